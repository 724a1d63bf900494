#!/usr/bin/env bash
# --serve --parallel on one process (continuous batching over slots), through the official
# openai npm client:
#  A. weights/austen-llama.h5 and, where ../shared has it, stories260K, with --parallel 4:
#     four streamed completions of different prompts at temperature 0 (the fourth sampled at
#     0.9 with a seed of its own), each first sent alone
#     (one at a time), then the four together: every text equals its text alone, the four
#     overlapped (each one's first token came before the first of them ended, or /metrics
#     shows a pass that carried all four; on stories260K, whose whole reply takes a few tens
#     of milliseconds, a pass that carried several), and /metrics counts passes shared by
#     several sequences; the same requests alone again afterwards (their slots now hold them: the
#     prefix is reused) give the same texts.
#  B. a slower synthetic model with --parallel 4 and four long streams: a client that
#     disconnects mid-stream frees its slot (a fifth request then completes while the three
#     others still run); SIGTERM then cuts the three within --shutdown-grace (each gets a
#     finish_reason and [DONE]) and the server exits 0.
. "$(dirname "$0")/common.sh"
need_node_modules
OPENAI=$NODE_MODULES/openai/index.mjs
SERVER=
trap '[ -n "$SERVER" ] && kill $SERVER 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

SERVE_TIMEOUT=240 CLIENT_TIMEOUT=180
# metric NAME: its value in $T/metrics
metric() { sed -n "s/^$1 //p" "$T/metrics"; }

# ---- A: four at once equal four alone ----
# together MODEL NAME ALL PROMPT...: the check on one model (ALL 1: the four must overlap)
together() {
  local model=$1 name=$2 all=$3
  shift 3
  local prompts
  prompts=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@")
  serve "$name" --model "$model" --parallel 4 --threads 2
  grep -q "headsplit_slots 4" <(curl -sf "$URL/metrics") || fail "$name: /metrics does not say 4 slots"
  node_run "$name" "$name" <<JS
const c = new OpenAI({ baseURL: "$URL/v1", apiKey: "none", maxRetries: 0 });
const prompts = $prompts;
const base = { model: "m", max_tokens: 160, temperature: 0 };
// the last one samples (its own seed): its tokens do not depend on the others either
const extra = (i) => (i === prompts.length - 1 ? { temperature: 0.9, seed: 5 } : {});
async function one(prompt, t0, i) {
  const s = await c.completions.create({ ...base, ...extra(i), prompt, stream: true });
  let text = "", first = null, finish = null;
  for await (const ch of s) {
    const piece = ch.choices[0]?.text ?? "";
    if (piece && first === null) first = performance.now() - t0;
    text += piece;
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  if (!finish) throw new Error("no finish_reason for " + JSON.stringify(prompt));
  return { text, first, end: performance.now() - t0 };
}
const alone = [];
for (let i = 0; i < prompts.length; i++) alone.push((await one(prompts[i], performance.now(), i)).text);
if (new Set(alone).size < 2) throw new Error("the prompts gave one text: the check could not fail");
const t0 = performance.now();
const tog = await Promise.all(prompts.map((p, i) => one(p, t0, i)));
for (let i = 0; i < prompts.length; i++)
  if (tog[i].text !== alone[i])
    throw new Error("prompt " + i + ": together " + JSON.stringify(tog[i].text) + " alone " + JSON.stringify(alone[i]));
const lastFirst = Math.max(...tog.map((r) => r.first)), firstEnd = Math.min(...tog.map((r) => r.end));
console.log(JSON.stringify({ lastFirst, firstEnd, overlapped: lastFirst < firstEnd }));
// alone again: the slots now hold these prompts (their prefixes reused), the same texts
for (let i = 0; i < prompts.length; i++) {
  const again = (await one(prompts[i], performance.now(), i)).text;
  if (again !== alone[i]) throw new Error("prompt " + i + " alone again: " + JSON.stringify(again));
}
console.log("ok");
JS
  curl -sf "$URL/metrics" > "$T/metrics" || fail "$name: /metrics"
  local overlapped max shared
  overlapped=$(python3 -c "import json; print(json.loads(open('$T/$name.node.out').readline())['overlapped'])")
  max=$(metric headsplit_pass_sequences_max)
  shared=$(metric headsplit_shared_passes_total)
  if [ "$all" = 1 ]; then
    [ "$overlapped" = True ] || [ "$max" = 4 ] \
      || { cat "$T/$name.node.out" "$T/metrics"; fail "$name: the four requests did not run together"; }
  else
    [ "${max:-0}" -ge 2 ] || { cat "$T/$name.node.out" "$T/metrics"; fail "$name: no two requests ran together"; }
  fi
  [ "${shared:-0}" -gt 0 ] || { cat "$T/metrics"; fail "$name: no pass carried several sequences"; }
  grep -q "in slot 3" "$T/$name.err" || { cat "$T/$name.err"; fail "$name: slot 3 never served"; }
  grep -q "(1 new to the KV caches)" "$T/$name.err" \
    || { cat "$T/$name.err"; fail "$name: a slot's prefix was not reused"; }
  stop "$name"
  echo "ok: $name: 4 at once equal 4 alone (overlapped $overlapped, at most $max sequences a pass, $shared shared passes)"
}
together "$SRC/weights/austen-llama.h5" austen 1 "It is a truth universally acknowledged" \
  "Mr. Darcy" "She was" "The weather"
if [ -e "$SHARED/stories260K/stories260K.bin" ]; then
  stories_model "$T/s.h5" 1
  together "$T/s.h5" stories 0 "Once upon a time" "Lily and Tom" "The cat" "One day, a little"
else
  echo "note: $SHARED/stories260K absent; austen-llama alone"
fi

# ---- B: a client that leaves frees its slot; the drain cuts every running one ----
"$CONVERT" --synthetic "llama:dim=512,layers=8,heads=8,kv_heads=8,head_dim=64,ffn=2048,vocab=4096,ctx=4096" \
  --out "$T/slow.h5" > /dev/null
serve B --model "$T/slow.h5" --parallel 4 --threads 1 --shutdown-grace 2
RUNS=()
for i in 1 2 3; do
  curl -s -N -d "{\"prompt\":\"run $i\",\"max_tokens\":4000,\"stream\":true}" "$URL/v1/completions" \
    > "$T/run$i.sse" &
  RUNS+=($!)
done
# the fourth leaves after its first events (head closes the pipe; curl's next write fails)
timeout -k 5 60 bash -c 'curl -s -N -d "{\"prompt\":\"leaves\",\"max_tokens\":4000,\"stream\":true}" "$1/v1/completions" | head -n 3' \
  _ "$URL" > "$T/gone.sse" || true
grep -q '^data: {' "$T/gone.sse" || { cat "$T/B.err" "$T/gone.sse"; fail "B: no streamed data before the disconnect"; }
for i in 1 2 3; do
  for _ in $(seq 300); do grep -q '^data: {' "$T/run$i.sse" 2>/dev/null && break; sleep 0.1; done
  grep -q '^data: {' "$T/run$i.sse" || { cat "$T/B.err"; fail "B: stream $i sent nothing"; }
done
# the fifth: only the slot the fourth left can take it
t0=$(date +%s.%N)
curl -s -d '{"prompt":"fifth","max_tokens":4}' "$URL/v1/completions" > "$T/fifth.json"
t1=$(date +%s.%N)
grep -q '"finish_reason":"length"' "$T/fifth.json" || { cat "$T/fifth.json" "$T/B.err"; fail "B: the fifth request did not complete"; }
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 30 else 1)" || fail "B: the fifth request waited ($t0 .. $t1)"
grep -q "client gone" "$T/B.err" || { cat "$T/B.err"; fail "B: the disconnect was not noticed"; }
curl -sf "$URL/metrics" > "$T/metrics"
[ "$(metric headsplit_busy_slots)" = 3 ] || { cat "$T/metrics"; fail "B: three streams should still run"; }
[ "$(metric 'headsplit_requests_total{outcome="cancelled"}')" = 1 ] || { cat "$T/metrics"; fail "B: the disconnect not counted"; }
# the drain: the three running ones are cut after the grace period, the server exits 0
t0=$(date +%s.%N)
stop B
t1=$(date +%s.%N)
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 2 + $(quick 20 5) else 1)" || fail "B: the drain took $t0 .. $t1"
for i in 1 2 3; do
  wait "${RUNS[$((i - 1))]}" 2>/dev/null || true
  grep -q '"finish_reason":"length"' "$T/run$i.sse" && grep -q '^data: \[DONE\]' "$T/run$i.sse" \
    || { tail -c 600 "$T/run$i.sse"; fail "B: stream $i was not ended with a finish_reason and [DONE]"; }
done
[ "$(grep -c "cut by the shutdown" "$T/B.err")" = 3 ] || { cat "$T/B.err"; fail "B: not three cut by the shutdown"; }
echo "ok: B (a client that leaves frees its slot; the drain cuts every running one)"
echo "PASS: serve_parallel"
