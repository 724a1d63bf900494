#!/usr/bin/env bash
# What the official openai npm client (v6) sends, against --serve, on three servers:
#  A. weights/austen-llama.h5, a shipped model with no chat template stored: /v1/completions
#     with a prompt string and a prompt array of one (the greedy text of --prompt), streamed
#     with stream_options.include_usage (a last chunk of usage, no choices); n: 2, logprobs,
#     response_format and out-of-range penalties refused with a 400 that names them; an
#     over-long prompt gets OpenAI's context_length_exceeded; max_tokens past the context is
#     capped; no temperature samples at 0.8 (llama-server's default); presence/frequency
#     penalties change the text; chat is refused naming --chat-template; --alias is the model
#     id; --api-key-file's key (not on the command line) is required.  curl: /metrics,
#     /tokenize (ids, pieces, add_special) and /detokenize.
#  B. stories260K with --chat-template zephyr: content as text parts equals content as a
#     string (parts joined by newlines), developer equals system, include_usage on chat,
#     image parts, tool messages and tools refused with a 400 that says so.
#  C. a slow synthetic model with --queue 1: with one generation running and one waiting, a
#     third request gets 503 with Retry-After.
# The client is tests/node's (scripts/install-deps.sh); without it the test fails under CI.
. "$(dirname "$0")/common.sh"
need_node_modules
OPENAI=$NODE_MODULES/openai/index.mjs
W=$SRC/weights
SERVER=
trap '[ -n "$SERVER" ] && kill $SERVER 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

# a helper every client script uses: the call must fail with this status and message
EXPECT_ERR='
async function expectErr(what, status, pattern, fn, check) {
  try { await fn(); } catch (e) {
    if (e.status !== status) throw new Error(`${what}: status ${e.status}, expected ${status}: ${e.message}`);
    if (!new RegExp(pattern).test(e.message)) throw new Error(`${what}: "${e.message}" lacks /${pattern}/`);
    if (check) check(e);
    return;
  }
  throw new Error(`${what}: no error`);
}
function eq(what, a, b) { if (a !== b) throw new Error(`${what}: ${JSON.stringify(a)} !== ${JSON.stringify(b)}`); }
'

# ---- A: a shipped model, no chat template ----
PA="It is a truth universally acknowledged"
run_hs 1 --model "$W/austen-llama.h5" --prompt "$PA" -n 16 --quiet --metrics "$T/refA.json" \
  > /dev/null 2> "$T/refA.err" || { cat "$T/refA.err"; fail "reference run"; }
REFA=$(python3 -c "import json; print(json.dumps(json.load(open('$T/refA.json'))['gen_text']))")
KEY=key-file-$$
printf '%s\n' "$KEY" > "$T/key"
serve A --model "$W/austen-llama.h5" --alias austen --api-key-file "$T/key"
! grep -q "$KEY" /proc/"$SPID"/cmdline || fail "the key is on the command line"
node_run A A <<JS
$EXPECT_ERR
const c = new OpenAI({ baseURL: "$URL/v1", apiKey: "$KEY", maxRetries: 0 });
const ref = $REFA;
const models = await c.models.list();
eq("model id (--alias)", models.data[0].id, "austen");
const base = { model: "austen", max_tokens: 16, temperature: 0 };
const one = await c.completions.create({ ...base, prompt: "$PA" });
eq("completion text", one.choices[0].text, ref);
eq("model in the reply", one.model, "austen");
const arr = await c.completions.create({ ...base, prompt: ["$PA"] });
eq("prompt array of one", arr.choices[0].text, ref);
// streamed with include_usage: the text, then one chunk of usage and no choices
const s = await c.completions.create({ ...base, prompt: "$PA", stream: true,
                                       stream_options: { include_usage: true } });
let text = "", usage = null, finish = null, after = 0;
for await (const ch of s) {
  if (usage) after++;
  if (ch.usage) { usage = ch.usage; eq("usage chunk choices", ch.choices.length, 0); continue; }
  eq("usage on a text chunk", ch.usage, null);
  text += ch.choices[0]?.text ?? "";
  finish = ch.choices[0]?.finish_reason ?? finish;
}
eq("streamed text", text, ref);
eq("finish_reason", finish, "length");
if (!usage) throw new Error("no usage chunk with include_usage");
eq("completion_tokens", usage.completion_tokens, 16);
eq("total_tokens", usage.total_tokens, usage.prompt_tokens + 16);
eq("chunks after the usage", after, 0);
// refused, never ignored
await expectErr("n: 2", 400, "'n' must be 1", () => c.completions.create({ ...base, prompt: "a", n: 2 }),
                (e) => eq("n param", e.param, "n"));
await expectErr("logprobs", 400, "logprobs", () => c.completions.create({ ...base, prompt: "a", logprobs: 2 }));
await expectErr("response_format", 400, "response_format",
  () => c.chat.completions.create({ ...base, messages: [{ role: "user", content: "a" }],
                                    response_format: { type: "json_object" } }));
await expectErr("presence_penalty 3", 400, "presence_penalty",
  () => c.completions.create({ ...base, prompt: "a", presence_penalty: 3 }));
await expectErr("echo", 400, "echo", () => c.completions.create({ ...base, prompt: "a", echo: true }));
// an over-long prompt: OpenAI's error shape
await expectErr("over-long prompt", 400, "maximum context length is 256 tokens",
  () => c.completions.create({ ...base, prompt: "It is a truth ".repeat(200) }),
  (e) => { eq("code", e.code, "context_length_exceeded"); eq("param", e.param, "prompt");
           eq("type", e.type, "invalid_request_error"); });
// max_tokens past the context: capped, not refused
const big = await c.completions.create({ ...base, prompt: "$PA", max_tokens: 100000 });
eq("capped finish_reason", big.choices[0].finish_reason, "length");
if (big.usage.prompt_tokens + big.usage.completion_tokens > 256)
  throw new Error("max_tokens not capped to the context: " + JSON.stringify(big.usage));
// no temperature: llama-server's 0.8 (with the server's seed: the same as asking for 0.8)
const dflt = await c.completions.create({ model: "austen", max_tokens: 16, prompt: "$PA" });
const t08 = await c.completions.create({ model: "austen", max_tokens: 16, prompt: "$PA", temperature: 0.8 });
eq("default temperature = 0.8", dflt.choices[0].text, t08.choices[0].text);
if (dflt.choices[0].text === ref) throw new Error("a request without temperature was greedy");
// the penalties change the greedy text
for (const p of [{ presence_penalty: 2 }, { frequency_penalty: 2 }]) {
  const r = await c.completions.create({ ...base, prompt: "$PA", max_tokens: 40, ...p });
  const g = await c.completions.create({ ...base, prompt: "$PA", max_tokens: 40 });
  if (r.choices[0].text === g.choices[0].text) throw new Error("no effect: " + JSON.stringify(p));
}
// chat needs a template, and says which option gives one
await expectErr("chat without a template", 400, "--chat-template",
  () => c.chat.completions.create({ ...base, messages: [{ role: "user", content: "a" }] }));
// the key
const nokey = new OpenAI({ baseURL: "$URL/v1", apiKey: "wrong", maxRetries: 0 });
await expectErr("wrong key", 401, "API key", () => nokey.models.list());
console.log("ok");
JS
# curl: /metrics, /tokenize, /detokenize
AUTH=(-H "Authorization: Bearer $KEY")
curl -sf "${AUTH[@]}" "$URL/metrics" > "$T/metrics" || fail "/metrics"
for m in 'headsplit_requests_total{outcome="ok"}' 'headsplit_requests_total{outcome="bad_request"}' \
         headsplit_prompt_tokens_total headsplit_generated_tokens_total \
         headsplit_prompt_tokens_per_second headsplit_generation_tokens_per_second \
         headsplit_queue_depth headsplit_busy_slots; do
  grep -q "^$m " "$T/metrics" || { cat "$T/metrics"; fail "/metrics lacks $m"; }
done
grep -q '^# TYPE headsplit_generated_tokens_total counter$' "$T/metrics" || fail "/metrics: no TYPE line"
python3 - "$T/metrics" <<'PY' || fail "/metrics figures"
import sys
v = {}
for line in open(sys.argv[1]):
    if line.startswith("#") or not line.strip():
        continue
    k, x = line.rsplit(" ", 1)
    v[k] = float(x)
assert v['headsplit_requests_total{outcome="ok"}'] >= 10, v
assert v['headsplit_requests_total{outcome="bad_request"}'] >= 6, v
assert v["headsplit_generated_tokens_total"] >= 16 * 8, v
assert v["headsplit_generation_tokens_per_second"] > 0 and v["headsplit_prompt_tokens_per_second"] > 0, v
assert v["headsplit_queue_depth"] == 0 and v["headsplit_busy_slots"] == 0, v
PY
curl -sf "${AUTH[@]}" -d "{\"content\":\"$PA\"}" "$URL/tokenize" > "$T/tok.json" || fail "/tokenize"
curl -sf "${AUTH[@]}" -d "{\"content\":\"$PA\",\"add_special\":true,\"with_pieces\":true}" "$URL/tokenize" \
  > "$T/pieces.json" || fail "/tokenize with pieces"
python3 - "$T/tok.json" "$T/pieces.json" "$PA" <<'PY' || fail "/tokenize shapes"
import json, sys
ids = json.load(open(sys.argv[1]))["tokens"]
pieces = json.load(open(sys.argv[2]))["tokens"]
assert ids and all(isinstance(i, int) for i in ids), ids
assert [p["id"] for p in pieces[1:]] == ids, (pieces, ids)  # add_special: BOS in front
assert "".join(p["piece"] for p in pieces[1:]).strip() == sys.argv[3], pieces
PY
IDS=$(python3 -c "import json; print(json.dumps(json.load(open('$T/tok.json'))['tokens']))")
curl -sf "${AUTH[@]}" -d "{\"tokens\":$IDS}" "$URL/detokenize" > "$T/detok.json" || fail "/detokenize"
[ "$(python3 -c "import json; print(json.load(open('$T/detok.json'))['content'])")" = "$PA" ] \
  || { cat "$T/detok.json"; fail "/detokenize does not give the text back"; }
code=$(curl -s -o "$T/body" -w '%{http_code}' "${AUTH[@]}" -d '{"tokens":[1,99999]}' "$URL/detokenize")
[ "$code" = 400 ] && grep -q "not a token id" "$T/body" || { cat "$T/body"; fail "/detokenize of a bad id: $code"; }
stop A
echo "ok: A (a shipped model: completions, refusals, context, defaults, /metrics, /tokenize)"

# ---- B: chat shapes ----
stories_model "$T/s.h5" 3
serve B --model "$T/s.h5" --chat-template zephyr
node_run B B <<JS
$EXPECT_ERR
const c = new OpenAI({ baseURL: "$URL/v1", apiKey: "none", maxRetries: 0 });
const base = { model: "m", max_tokens: 12, temperature: 0 };
const say = async (messages) => (await c.chat.completions.create({ ...base, messages })).choices[0].message.content;
const str = await say([{ role: "user", content: "$P" }]);
if (!str.length) throw new Error("an empty reply");
eq("text parts = string", await say([{ role: "user", content: [{ type: "text", text: "$P" }] }]), str);
eq("parts joined by newlines",
   await say([{ role: "user", content: [{ type: "text", text: "a b" }, { type: "text", text: "c" }] }]),
   await say([{ role: "user", content: "a b\nc" }]));
eq("developer = system",
   await say([{ role: "developer", content: "Be brief." }, { role: "user", content: "$P" }]),
   await say([{ role: "system", content: "Be brief." }, { role: "user", content: "$P" }]));
// include_usage on chat
const s = await c.chat.completions.create({ ...base, messages: [{ role: "user", content: "$P" }],
                                            stream: true, stream_options: { include_usage: true } });
let text = "", usage = null;
for await (const ch of s) {
  if (ch.usage) { usage = ch.usage; eq("usage chunk choices", ch.choices.length, 0); }
  else text += ch.choices[0]?.delta?.content ?? "";
}
eq("streamed chat text", text, str);
if (!usage || usage.completion_tokens < 1 || usage.prompt_tokens < 1) throw new Error("usage: " + JSON.stringify(usage));
// what this server cannot do: a 400 that says so
await expectErr("image part", 400, "'image_url' parts are not supported",
  () => c.chat.completions.create({ ...base, messages: [{ role: "user", content: [
    { type: "text", text: "what is this" }, { type: "image_url", image_url: { url: "http://x/y.png" } }] }] }));
await expectErr("tool message", 400, "tool calls are not supported",
  () => c.chat.completions.create({ ...base, messages: [{ role: "user", content: "a" },
    { role: "tool", tool_call_id: "x", content: "1" }] }));
await expectErr("tools", 400, "tool calls are not supported",
  () => c.chat.completions.create({ ...base, messages: [{ role: "user", content: "a" }],
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }] }),
  (e) => eq("tools param", e.param, "tools"));
await expectErr("n: 2 on chat", 400, "'n' must be 1",
  () => c.chat.completions.create({ ...base, messages: [{ role: "user", content: "a" }], n: 2 }));
console.log("ok");
JS
stop B
echo "ok: B (chat: text parts, developer, include_usage, refusals)"

# ---- C: the queue's bound ----
"$CONVERT" --synthetic "llama:dim=512,layers=8,heads=8,kv_heads=8,head_dim=64,ffn=2048,vocab=4096,ctx=4096" \
  --out "$T/slow.h5" > /dev/null
serve C --model "$T/slow.h5" --threads 1 --queue 1 --shutdown-grace 0 --parallel 1
node_run C C <<JS
$EXPECT_ERR
const c = new OpenAI({ baseURL: "$URL/v1", apiKey: "none", maxRetries: 0 });
const long = { model: "m", prompt: "hello", max_tokens: 4000, stream: true };
const running = await c.completions.create(long);
const it = running[Symbol.asyncIterator]();
await it.next(); // generating
const waiting = await c.completions.create(long); // the status line comes at once; it waits
let health;
for (let i = 0; i < 100; i++) {
  health = await (await fetch("$URL/health")).json();
  if (health.queued === 1) break;
  await new Promise((r) => setTimeout(r, 50));
}
eq("queued", health.queued, 1);
await expectErr("queue full", 503, "queue is full", () => c.completions.create({ model: "m", prompt: "a", max_tokens: 2 }),
  (e) => { const ra = e.headers?.get("retry-after"); if (!(Number(ra) >= 1)) throw new Error("Retry-After: " + ra); });
waiting.controller.abort(); // noticed within 0.1 s (its connection is peeked between waits)
await new Promise((r) => setTimeout(r, 1000));
running.controller.abort();
console.log("ok");
JS
curl -sf "$URL/metrics" | grep -q '^headsplit_requests_total{outcome="queue_full"} 1$' || fail "/metrics: queue_full not counted"
# both clients went away: the running generation stops, the queued one is dropped unrun
for _ in $(seq 50); do
  curl -sf "$URL/metrics" > "$T/mC"
  grep -q '^headsplit_requests_total{outcome="cancelled"} 2$' "$T/mC" && grep -q '^headsplit_busy_slots 0$' "$T/mC" && break
  sleep 0.1
done
grep -q '^headsplit_requests_total{outcome="cancelled"} 2$' "$T/mC" || { cat "$T/mC" "$T/C.err"; fail "the abandoned streams were not cancelled"; }
[ "$(grep -c '^headsplit: served' "$T/C.err")" = 1 ] || { cat "$T/C.err"; fail "the abandoned queued stream ran"; }
stop C
echo "ok: C (a full queue: 503 with Retry-After)"

# IPv6: [::1]:PORT, no key needed (loopback); where the host has no IPv6, said and left out
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2> /dev/null; then
  port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0)); print(s.getsockname()[1])')
  OMPI_MCA_ess_singleton_isolated=1 timeout -k 5 60 "$HS" --model "$T/s.h5" --serve "[::1]:$port" \
    > "$T/v6.out" 2> "$T/v6.err" &
  SERVER=$!
  for _ in $(seq 150); do curl -gsf "http://[::1]:$port/health" > /dev/null 2>&1 && break; sleep 0.2; done
  curl -gs -d '{"prompt":"a","max_tokens":2}' "http://[::1]:$port/v1/completions" | grep -q text_completion \
    || { cat "$T/v6.err"; fail "no completion over IPv6"; }
  kill -TERM $SERVER
  wait $SERVER || { cat "$T/v6.err"; fail "the IPv6 server's exit"; }
  SERVER=
  echo "ok: IPv6 [::1]:$port"
else
  echo "note: no IPv6 loopback on this host; [::1] not tried"
fi
# libmicrohttpd's own messages come through the logger: a port already taken
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); print(s.getsockname()[1], flush=True); time.sleep(60)' \
  > "$T/busy.port" &
HOLDER=$!
for _ in $(seq 50); do [ -s "$T/busy.port" ] && break; sleep 0.1; done
expect_error "a port in use" "cannot listen" env OMPI_MCA_ess_singleton_isolated=1 \
  "$HS" --model "$T/s.h5" --serve 127.0.0.1:"$(cat "$T/busy.port")"
kill $HOLDER
grep -q "^headsplit: libmicrohttpd: .*bind" "$T/err" || { cat "$T/err"; fail "libmicrohttpd's message not through the logger"; }
# the server's options: one clear line each
hs1() { OMPI_MCA_ess_singleton_isolated=1 timeout -k 5 60 "$HS" --model "$T/s.h5" "$@"; }
expect_error "--queue -1" "\-\-queue: '-1' is not a count" hs1 --serve 127.0.0.1:1 --queue -1
expect_error "--shutdown-grace soon" "\-\-shutdown-grace: 'soon' is not a number" hs1 --serve 127.0.0.1:1 --shutdown-grace soon
expect_error "--alias ''" "\-\-alias: the name is empty" hs1 --serve 127.0.0.1:1 --alias ""
expect_error "both keys" "\-\-api-key and \-\-api-key-file: choose one" hs1 --serve 127.0.0.1:1 --api-key a --api-key-file "$T/key"
expect_error "no key file" "\-\-api-key-file: cannot open $T/nokey" hs1 --serve 0.0.0.0:1 --api-key-file "$T/nokey"
: > "$T/empty"
expect_error "empty key file" "holds no key" hs1 --serve 127.0.0.1:1 --api-key-file "$T/empty"
expect_error "beyond loopback, no key" "requires \-\-api-key" hs1 --serve "[::]:1"
expect_error "bad IPv6" "is not an IPv6 address" hs1 --serve "[::g]:1" --api-key k
echo "PASS: serve_openai (the openai client's shapes, refusals, limits; /metrics, /tokenize, /detokenize)"
