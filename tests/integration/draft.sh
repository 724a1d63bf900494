#!/usr/bin/env bash
# Several positions per pass (issue 17): --batch leaves the logits of every position
# bit-identical (one process and distributed); --draft with the target's own file keeps every drafted token;
# a different draft (stories260K quantized to Q4_0, and austen-gpt2 for austen-llama) gives
# the greedy tokens and logits of decoding without it, for fixed and auto K, in one process,
# distributed, with its layers on a worker (--draft-rank), in --chat and --serve; sampling gives the same tokens for every K; bad values of the
# new options and a draft with another vocabulary fail with one clear line.
# HEADSPLIT_TEST_QUICK=1 (the sanitizer build): --batch 1 and 5 (64 takes the prompt whole as
# 5 does), K 8 and auto (1 and 4 take the lines of 8), austen-gpt2 drafting on 3 ranks only
# (one process with a draft: stories260K's Q4_0 draft), 24 new tokens instead of 40, and
# sampling with K 1 and auto.
. "$(dirname "$0")/common.sh"
stories_model "$T/m.h5" 9
if [ -e "$SHARED/stories260K/stories260K.bin" ]; then
  "$CONVERT" --format llama2c --checkpoint "$SHARED/stories260K/stories260K.bin" \
    --tokenizer "$SHARED/stories260K/tok512.bin" --quantize q4_0 --out "$T/d.h5" > /dev/null
else # a synthetic model of the same shape and tokenizer, other weights
  "$CONVERT" --synthetic stories260k --seed 10 --out "$T/d.h5" > /dev/null
fi
W="$SRC/weights"
jqv() { jq -r "$2" "$1"; }

# --batch: the logits of every position equal one position per pass
for np in 1 3; do
  part=(); [ $np -gt 1 ] && part=(--partition layer)
  run_hs $np --model "$T/m.h5" "${part[@]}" --quiet --prompt "$P" -n 16 --batch 1 \
    --logits-out "$T/b1.f32" --metrics "$T/b1.json" 2> "$T/err" || { cat "$T/err"; fail "--batch 1 (np $np)"; }
  for b in $(quick 5 "5 64"); do
    run_hs $np --model "$T/m.h5" "${part[@]}" --quiet --prompt "$P" -n 16 --batch $b \
      --logits-out "$T/b.f32" --metrics "$T/b.json" 2> /dev/null || fail "--batch $b (np $np)"
    cmp -s "$T/b1.f32" "$T/b.f32" || fail "--batch $b: logits differ from --batch 1 (np $np)"
  done
  for k in prompt_s prompt_tokens_per_s gen_tokens_per_s generate_s passes tokens_per_pass; do
    [ "$(jqv "$T/b.json" ".$k")" != null ] || fail "metrics: $k missing"
  done
done
echo "ok: --batch bit-identical, one process and 3 ranks"

# the target's own file as the draft: every drafted token kept, the same tokens and logits
run_hs 1 --model "$T/m.h5" --quiet --prompt "$P" -n 30 --logits-out "$T/ref.f32" \
  --metrics "$T/ref.json" 2> /dev/null || fail "reference run"
run_hs 1 --model "$T/m.h5" --quiet --prompt "$P" -n 30 --draft "$T/m.h5" --logits-out "$T/s.f32" \
  --metrics "$T/s.json" 2> "$T/err" || { cat "$T/err"; fail "self draft"; }
cmp -s "$T/ref.f32" "$T/s.f32" || fail "self draft: logits differ"
[ "$(jqv "$T/s.json" .tokens_checksum)" = "$(jqv "$T/ref.json" .tokens_checksum)" ] || fail "self draft: tokens differ"
[ "$(jqv "$T/s.json" '.draft_acceptance')" = 1 ] || fail "self draft: acceptance $(jqv "$T/s.json" .draft_acceptance), not 1"
jq -e '.tokens_per_pass > 3' "$T/s.json" > /dev/null || fail "self draft: $(jqv "$T/s.json" .tokens_per_pass) tokens per pass"
grep -q "draft: .* accepted (100.0%)" "$T/err" || { cat "$T/err"; fail "closing line of the draft"; }
echo "ok: self draft keeps everything ($(jqv "$T/s.json" .tokens_per_pass) tokens per pass)"

# different drafts: greedy tokens and logits as without a draft (one process; 3 ranks, layer)
N=$(quick 24 40)
check_pair() { # TARGET DRAFT PROMPT NP ARGS...
  local tgt=$1 dr=$2 pr=$3 np=$4
  shift 4
  run_hs $np --model "$tgt" --quiet --prompt "$pr" -n $N "$@" --logits-out "$T/r.f32" \
    --metrics "$T/r.json" 2> /dev/null || fail "$tgt without a draft (np $np)"
  for k in $(quick "8 auto" "1 4 8 auto"); do
    run_hs $np --model "$tgt" --quiet --prompt "$pr" -n $N "$@" --draft "$dr" --draft-tokens $k \
      --logits-out "$T/d.f32" --metrics "$T/dd.json" 2> "$T/err" || { cat "$T/err"; fail "--draft $dr K $k (np $np)"; }
    cmp -s "$T/r.f32" "$T/d.f32" || fail "--draft $dr K $k (np $np): logits differ"
    jq -c .tokens "$T/r.json" | cmp -s - <(jq -c .tokens "$T/dd.json") || fail "--draft $dr K $k (np $np): tokens differ"
    jq -e '.draft_tokens > 0 and .draft_accepted > 0 and .gen_passes < .n_gen_tokens' "$T/dd.json" > /dev/null \
      || fail "--draft $dr K $k (np $np): no drafts kept"
  done
  echo "ok: $(basename "$dr") drafting for $(basename "$tgt"), np $np: greedy identical, acceptance $(jqv "$T/dd.json" .draft_acceptance)"
}
check_pair "$T/m.h5" "$T/d.h5" "$P" 1
is_quick || check_pair "$W/austen-llama.h5" "$W/austen-gpt2.h5" "It is a truth universally acknowledged, that" 1
check_pair "$W/austen-llama.h5" "$W/austen-gpt2.h5" "It is a truth universally acknowledged, that" 3 --partition layer
# the draft's layers on worker 2 (--draft-rank): the same tokens, logits and acceptance as on
# the controller
run_hs 3 --model "$W/austen-llama.h5" --quiet --prompt "It is a truth" -n $N --partition layer \
  --draft "$W/austen-gpt2.h5" --logits-out "$T/dl.f32" --metrics "$T/dl.json" 2> /dev/null || fail "draft on rank 0"
run_hs 3 --model "$W/austen-llama.h5" --quiet --prompt "It is a truth" -n $N --partition layer \
  --draft "$W/austen-gpt2.h5" --draft-rank 2 --logits-out "$T/dr.f32" --metrics "$T/dr.json" 2> "$T/err" \
  || { cat "$T/err"; fail "--draft-rank 2"; }
cmp -s "$T/dl.f32" "$T/dr.f32" || fail "--draft-rank 2: logits differ from the controller's draft"
for k in tokens_checksum draft_tokens draft_accepted passes; do
  [ "$(jqv "$T/dr.json" .$k)" = "$(jqv "$T/dl.json" .$k)" ] || fail "--draft-rank 2: $k differs"
done
grep -q "layers on rank 2" "$T/err" || { cat "$T/err"; fail "--draft-rank 2: the draft's rank is not reported"; }
echo "ok: --draft-rank 2 as the controller's draft (acceptance $(jqv "$T/dr.json" .draft_acceptance))"

# sampling: the same tokens for every K (each position draws its own random numbers)
for k in 1 $(quick auto "3 auto"); do
  run_hs 1 --model "$W/austen-llama.h5" --quiet --prompt "Emma" -n $N --temperature 0.8 --top-p 0.95 \
    --draft "$W/austen-gpt2.h5" --draft-tokens $k --metrics "$T/t$k.json" 2> /dev/null || fail "sampling K $k"
done
for k in $(quick auto "3 auto"); do
  [ "$(jqv "$T/t$k.json" .tokens_checksum)" = "$(jqv "$T/t1.json" .tokens_checksum)" ] || fail "sampling: K $k differs from K 1"
done
echo "ok: sampling with a draft independent of K"

# --chat: the replies with and without a draft
printf 'Who is Emma?\nAnd her father?\n' > "$T/chat.txt"
for d in none draft; do
  extra=(); [ $d = draft ] && extra=(--draft "$W/austen-gpt2.h5")
  run_hs 1 --model "$W/austen-llama.h5" --chat --chat-template chatml -n 12 "${extra[@]}" \
    < "$T/chat.txt" > "$T/chat-$d.txt" 2> "$T/err" || { cat "$T/err"; fail "--chat ($d)"; }
done
[ "$(wc -c < "$T/chat-none.txt")" -gt 20 ] || fail "--chat: no replies"
cmp -s "$T/chat-none.txt" "$T/chat-draft.txt" || { diff "$T/chat-none.txt" "$T/chat-draft.txt"; fail "--chat: replies differ with a draft"; }
echo "ok: --chat with a draft"

# --serve with a draft: two requests (the second reuses the KV entries of the shared prefix)
# give the greedy text of a run without a draft
if command -v curl > /dev/null; then
  run_hs 1 --model "$W/austen-llama.h5" --quiet --prompt "It is a truth" -n 16 --metrics "$T/sv.json" \
    2> /dev/null || fail "serve reference"
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  timeout -k 5 120 mpirun $MPI_FLAGS -np 1 "$HS" --model "$W/austen-llama.h5" --serve 127.0.0.1:$PORT \
    --chat-template chatml --draft "$W/austen-gpt2.h5" > "$T/serve.out" 2> "$T/serve.err" &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -rf "$T"' EXIT
  for i in $(seq 100); do
    curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 && break
    kill -0 $SERVER 2>/dev/null || { cat "$T/serve.err"; fail "the server exited"; }
    sleep 0.2
  done
  want=$(jqv "$T/sv.json" .gen_text)
  for i in 1 2; do
    got=$(curl -s "http://127.0.0.1:$PORT/v1/completions" \
      -d '{"prompt":"It is a truth","max_tokens":16,"temperature":0}' | jq -r '.choices[0].text')
    [ "$got" = "$want" ] || { cat "$T/serve.err"; fail "--serve with a draft, request $i: '$got', not '$want'"; }
  done
  kill $SERVER
  wait $SERVER 2> /dev/null || true
  echo "ok: --serve with a draft"
fi

# errors: one clear line each
gen() { run_hs 1 --model "$T/m.h5" --quiet --prompt "$P" -n 4 "$@"; }
expect_error "--batch 0" "--batch: '0' is not a count" gen --batch 0
expect_error "--draft-tokens 9" "--draft-tokens: '9' is not auto or a count of 1..8" gen --draft "$T/m.h5" --draft-tokens 9
expect_error "--draft-tokens x" "--draft-tokens: 'x' is not auto" gen --draft "$T/m.h5" --draft-tokens x
expect_error "--draft-rank 1" "--draft-rank 1: there are only ranks 0..0" gen --draft "$T/m.h5" --draft-rank 1
expect_error "--draft-rank without --draft" "--draft-rank: there is no draft model" gen --draft-rank 0
expect_error "--draft-tokens without --draft" "--draft-tokens: there is no draft model" gen --draft-tokens 2
expect_error "--draft missing" "$T/none.h5" gen --draft "$T/none.h5"
expect_error "--draft vocabulary" "--draft $W/austen-llama.h5: its vocabulary (1024 tokens.*differs from $T/m.h5's" \
  gen --draft "$W/austen-llama.h5"
[ "$(grep -c "^headsplit" "$T/err")" = 1 ] || { cat "$T/err"; fail "--draft vocabulary: more than one line"; }
if [ -e "$SHARED/stories260K/stories260K.bin" ]; then # same size, another tokenizer
  "$CONVERT" --synthetic stories260k --seed 3 --out "$T/syn.h5" > /dev/null
  expect_error "--draft tokenizer" "--draft $T/syn.h5: its tokenizer differs from $T/m.h5's" \
    gen --draft "$T/syn.h5"
fi
echo "PASS: batched prompts and drafts"
