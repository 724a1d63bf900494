# Every partition x placement with 1..4 workers (and 7, which splits KV groups) must generate the
# single-process tokens, with bit-identical logits: each head, projection and FFN is computed
# by the same code on the same inputs wherever it runs.
. "$(dirname "$0")/common.sh"
models=()
if [ -e "$SHARED/stories260K/stories260K.bin" ]; then
  "$CONVERT" --format llama2c --checkpoint "$SHARED/stories260K/stories260K.bin" \
    --tokenizer "$SHARED/stories260K/tok512.bin" --out "$T/stories.h5"
  models+=("$T/stories.h5")
else
  echo "note: $SHARED/stories260K absent; using synthetic models only"
fi
if [ -e "$SHARED/gpt2-tiny-random/model.safetensors" ]; then
  "$CONVERT" --format hf --dir "$SHARED/gpt2-tiny-random" --out "$T/gpt2.h5"
  models+=("$T/gpt2.h5")
fi
"$CONVERT" --synthetic stories260k --seed 3 --out "$T/synth.h5"
models+=("$T/synth.h5")

first=1
for m in "${models[@]}"; do
  name=$(basename "$m" .h5)
  run_hs 1 --model "$m" --prompt "Once upon a time" --steps 24 --quiet \
    --metrics "$T/$name.base.json" --logits-out "$T/$name.base.bin"
  jq -c .tokens "$T/$name.base.json" > "$T/$name.base.tok"
  vocab=$(jq .model.vocab_size "$T/$name.base.json")
  # The first model gets every combination; the others a cross-section.
  if [ $first = 1 ]; then counts="1 2 4"; places="greedy roundrobin random layer"; else
    counts="3"; places="greedy"; fi
  n=0
  for part in layer head slice; do
    for place in $places; do
      for w in $counts; do
        [ "$place" = layer ] && [ "$part" != layer ] && continue   # same as layer/layer
        [ "$part" = slice ] && [ "$place" != greedy ] && continue  # slice has one placement
        tag="$name $part/$place/$w"
        run_hs $((w + 1)) --model "$m" --prompt "Once upon a time" --steps 24 --quiet \
          --partition $part --placement $place --metrics "$T/r.json" --logits-out "$T/r.bin" \
          --rtt-pings 1 --seed $w || fail "$tag: run failed"
        jq -c .tokens "$T/r.json" | cmp -s - "$T/$name.base.tok" || fail "$tag: tokens differ"
        if [ $part = slice ]; then
          # Row-parallel partial sums add in another order: equal tokens, logits within 1e-4.
          "$CMP" "$T/r.bin" "$T/$name.base.bin" --cols "$vocab" --tol 1e-4 >/dev/null \
            || fail "$tag: logits differ by more than 1e-4"
        else
          "$CMP" "$T/r.bin" "$T/$name.base.bin" --cols "$vocab" --exact >/dev/null \
            || fail "$tag: logits not bit-identical"
        fi
        n=$((n + 1))
      done
    done
  done
  echo "ok: $name, $n configurations"
  first=0
done
# Seven workers on a model with 4 KV groups of 2 heads: every group is split over two ranks.
m=${models[0]}
name=$(basename "$m" .h5)
vocab=$(jq .model.vocab_size "$T/$name.base.json")
run_hs 8 --model "$m" --prompt "Once upon a time" --steps 24 --quiet --partition head \
  --placement greedy --metrics "$T/r7.json" --logits-out "$T/r7.bin" --show-placement
jq -c .tokens "$T/r7.json" | cmp -s - "$T/$name.base.tok" || fail "7 workers: tokens differ"
"$CMP" "$T/r7.bin" "$T/$name.base.bin" --cols "$vocab" --exact || fail "7 workers: logits differ"
echo "PASS: distributed runs equal the single-process run"
