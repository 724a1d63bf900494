#!/usr/bin/env bash
# --serve on a 3-rank run: a streamed chat completion through the real `openai` npm client
# (run by node) gives exactly the text of the same generation through --prompt with the
# template applied; the non-streamed reply too; curl for the errors (malformed JSON, missing
# fields, an oversized body, a wrong key) and /health, /v1/models.  --parallel 4 on 3 ranks:
# four slots sharing passes (/metrics), nothing said of one request at a time.
# The client is tests/node's (scripts/install-deps.sh); without it the test fails under CI.
. "$(dirname "$0")/common.sh"
need_node_modules
NPM_DIR=$SRC/tests/node
stories_model "$T/m.h5" 3
N=24
run_hs 3 --model "$T/m.h5" --prompt "$P" --chat-template zephyr -n $N --quiet \
  --metrics "$T/ref.json" > "$T/ref.out" 2> "$T/ref.err" || { cat "$T/ref.err"; fail "reference run"; }
python3 -c "import json,sys; sys.stdout.write(json.load(open('$T/ref.json'))['gen_text'])" > "$T/ref.txt"
[ -s "$T/ref.txt" ] || fail "the reference generation is empty"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
KEY=test-key-$$
timeout -k 5 300 mpirun $MPI_FLAGS -np 3 "$HS" --model "$T/m.h5" --serve 127.0.0.1:$PORT \
  --chat-template zephyr --api-key $KEY --max-body 16384 --parallel 4 > "$T/serve.out" 2> "$T/serve.err" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -rf "$T"' EXIT
URL=http://127.0.0.1:$PORT
for _ in $(seq 100); do
  curl -sf "$URL/health" > "$T/health" 2>/dev/null && break
  kill -0 $SERVER 2>/dev/null || { cat "$T/serve.err"; fail "the server exited"; }
  sleep 0.3
done
grep -q '"status":"ok"' "$T/health" || { cat "$T/serve.err"; fail "/health never answered"; }
grep -q -- "one request at a time" "$T/serve.err" && { cat "$T/serve.err"; fail "--parallel 4 on 3 ranks: said to run one request at a time"; }
grep -q -- "4 slots sharing each pass" "$T/serve.err" || { cat "$T/serve.err"; fail "--parallel 4 on 3 ranks: no slots at start-up"; }
curl -sf -H "Authorization: Bearer $KEY" "$URL/metrics" | grep -q '^headsplit_slots 4$' \
  || fail "/metrics: 3 ranks with --parallel 4 should have 4 slots"

# the real client, streamed
cat > "$T/client.mjs" <<JS
import OpenAI from "$NPM_DIR/node_modules/openai/index.mjs";
const client = new OpenAI({ baseURL: "$URL/v1", apiKey: "$KEY" });
const models = await client.models.list();
if (!models.data.length) throw new Error("no models listed");
const stream = await client.chat.completions.create({
  model: models.data[0].id, stream: true, max_tokens: $N, temperature: 0,
  messages: [{ role: "user", content: process.argv[2] }],
});
let text = "", finish = null;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? "";
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
if (!finish) throw new Error("no finish_reason in the stream");
process.stdout.write(text);
JS
timeout 120 node "$T/client.mjs" "$P" > "$T/stream.txt" 2> "$T/node.err" || { cat "$T/node.err" "$T/serve.err"; fail "the openai client failed"; }
cmp "$T/ref.txt" "$T/stream.txt" || { echo "ref:    $(cat "$T/ref.txt")"; echo "stream: $(cat "$T/stream.txt")"; fail "streamed text differs from --prompt's"; }

# not streamed: the same text (temperature 0 given: a request without one samples at 0.8)
curl -s -H "Authorization: Bearer $KEY" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"$P\"}],\"max_tokens\":$N,\"temperature\":0}" \
  "$URL/v1/chat/completions" > "$T/plain.json"
python3 -c "import json,sys; sys.stdout.write(json.load(open('$T/plain.json'))['choices'][0]['message']['content'])" > "$T/plain.txt" \
  || { cat "$T/plain.json"; fail "non-streamed reply unreadable"; }
cmp "$T/ref.txt" "$T/plain.txt" || fail "non-streamed text differs from --prompt's"

# errors: status and an OpenAI error object with a message
expect_status() { # WHAT STATUS PATTERN CURL-ARGS...
  local what=$1 want=$2 pat=$3
  shift 3
  local got
  got=$(curl -s -o "$T/body" -w '%{http_code}' "$@")
  [ "$got" = "$want" ] || { cat "$T/body"; fail "$what: HTTP $got, expected $want"; }
  grep -q -- "$pat" "$T/body" || { cat "$T/body"; fail "$what: '$pat' missing from the body"; }
}
AUTH=(-H "Authorization: Bearer $KEY")
expect_status "malformed JSON" 400 'malformed JSON' "${AUTH[@]}" -d '{"messages": [' "$URL/v1/chat/completions"
expect_status "missing messages" 400 "'messages' must be" "${AUTH[@]}" -d '{"max_tokens": 4}' "$URL/v1/chat/completions"
expect_status "missing prompt" 400 "'prompt' must be" "${AUTH[@]}" -d '{"max_tokens": 4}' "$URL/v1/completions"
expect_status "bad max_tokens" 400 "max_tokens" "${AUTH[@]}" -d '{"prompt":"a","max_tokens":-3}' "$URL/v1/completions"
head -c 20000 /dev/zero | tr '\0' a > "$T/big"
expect_status "oversized body" 413 'larger than 16384' "${AUTH[@]}" --data-binary @"$T/big" "$URL/v1/completions"
expect_status "wrong key" 401 'API key' -H "Authorization: Bearer nope" -d '{"prompt":"a"}' "$URL/v1/completions"
expect_status "no key" 401 'API key' "$URL/v1/models"
expect_status "unknown route" 404 'no route' "${AUTH[@]}" "$URL/v2/nothing"
# a prompt longer than the context: OpenAI's context_length_exceeded, streamed or not (the
# prompt is counted before anything is sent)
LONG=$(python3 -c "print('once upon a time ' * 400)")
expect_status "prompt too long" 400 '"code":"context_length_exceeded"' "${AUTH[@]}" -d "{\"prompt\":\"$LONG\"}" "$URL/v1/completions"
grep -q '"param":"prompt"' "$T/body" || { cat "$T/body"; fail "prompt too long: param not 'prompt'"; }
expect_status "prompt too long, streamed" 400 '"code":"context_length_exceeded"' "${AUTH[@]}" \
  -d "{\"prompt\":\"$LONG\",\"stream\":true}" "$URL/v1/completions"
# the server survived all of it
expect_status "completion after errors" 200 'text_completion' "${AUTH[@]}" -d '{"prompt":"a","max_tokens":2}' "$URL/v1/completions"
kill -0 $SERVER || fail "the server died"
kill $SERVER; wait $SERVER 2>/dev/null || true

# a client that goes away ends its generation: a long streamed reply on a slower model, cut
# once its first events have arrived (head closes the pipe: curl's next write fails and it
# disconnects; no fixed delay, which a loaded host can outlast before the first token); the
# server says so and answers the next request at once
"$CONVERT" --synthetic "llama:dim=512,layers=8,heads=8,kv_heads=8,head_dim=64,ffn=2048,vocab=4096,ctx=4096" \
  --out "$T/slow.h5" > /dev/null
# a port of its own: the first server's closed connections may hold its port a while
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
timeout -k 5 120 mpirun $MPI_FLAGS -np 1 "$HS" --model "$T/slow.h5" --serve 127.0.0.1:$PORT \
  --chat-template chatml --threads 1 > "$T/serve2.out" 2> "$T/serve2.err" &
SERVER=$!
# /v1/models without a key: only this server (no --api-key) answers it, not the first one
for _ in $(seq 100); do curl -sf "$URL/v1/models" > /dev/null 2>&1 && break; sleep 0.3; done
timeout -k 5 60 bash -c 'curl -s -N -d "{\"prompt\":\"hello\",\"max_tokens\":3000,\"stream\":true}" "$1/v1/completions" | head -n 3' \
  _ "$URL" > "$T/cut.sse" || true
grep -q '^data: {' "$T/cut.sse" || { cat "$T/serve2.err" "$T/cut.sse"; fail "no streamed data before the disconnect"; }
t0=$(date +%s.%N)
curl -s -d '{"prompt":"hello","max_tokens":2}' "$URL/v1/completions" | grep -q text_completion || fail "no reply after a disconnect"
t1=$(date +%s.%N)
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 10 else 1)" || fail "the abandoned generation ran on ($t0 .. $t1)"
grep -q "client gone" "$T/serve2.err" || { cat "$T/serve2.err"; fail "the disconnect was not noticed"; }
echo "PASS: serve ($(wc -c < "$T/ref.txt") bytes of text equal through openai streaming, curl and --prompt)"
