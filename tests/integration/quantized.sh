# Quantized models (issue 14): stories260K converted with --quantize q8_0 and q4_0 runs on
# 5 ranks exactly as on one.  layer and head (PIPE) give bit-identical logits, since every row
# of every matrix is computed by the same code on the same quantized activation wherever it
# runs; so does slice, whose default exchange on quantized weights is exact (no partial sums).
# Each worker holds its share of the quantized file: the workers' weight bytes shrink to the
# quantized types' size against the float32 run (w_down, whose rows of 172 values are not
# a multiple of 32, stays f16 as llama.cpp's fallback keeps such rows wide).
. "$(dirname "$0")/common.sh"
skip_without "$SHARED/stories260K/stories260K.bin"
src=(--format llama2c --checkpoint "$SHARED/stories260K/stories260K.bin"
     --tokenizer "$SHARED/stories260K/tok512.bin")
"$CONVERT" "${src[@]}" --out "$T/f32.h5" --quiet
args=(--prompt "Once upon a time" --steps 24 --quiet)
# Equal speeds from a devices file: one plan every run (slice's FFN cuts follow the probed
# speeds otherwise, and where a cut falls changes which partial sums round together).
printf '1 speed=1\n2 speed=1\n3 speed=1\n4 speed=1\n' > "$T/dev.txt"
dist=(--rtt-pings 1 --placement roundrobin --devices "$T/dev.txt")
run_hs 5 --model "$T/f32.h5" "${args[@]}" "${dist[@]}" --partition layer --metrics "$T/f32.json" \
  || fail "f32 run failed"
# Bytes of weights the workers hold together (the placement decides who holds what).
worker_bytes() { jq '[.ranks[] | select(.rank > 0) | .weight_bytes] | add' "$1"; }
f32_bytes=$(worker_bytes "$T/f32.json")
run_hs 1 --model "$T/f32.h5" "${args[@]}" --logits-out "$T/f32.base.bin" || fail "f32 run failed"
for q in q8_0 q4_0; do
  m="$T/$q.h5"
  "$CONVERT" "${src[@]}" --quantize $q --out "$m" --quiet
  h5dump -A -g /config "$m" | grep -q "\"$q\"" || fail "$q: no quantization attribute"
  run_hs 1 --model "$m" "${args[@]}" --metrics "$T/$q.base.json" --logits-out "$T/$q.base.bin" \
    || fail "$q: single-process run failed"
  jq -c .tokens "$T/$q.base.json" > "$T/$q.base.tok"
  [ "$(jq '.tokens | length' "$T/$q.base.json")" -gt 0 ] || fail "$q: no tokens"
  for part in layer head slice; do
    tag="$q $part/4 workers"
    run_hs 5 --model "$m" "${args[@]}" "${dist[@]}" --partition $part --metrics "$T/r.json" \
      --logits-out "$T/r.bin" || fail "$tag: run failed"
    jq -c .tokens "$T/r.json" | cmp -s - "$T/$q.base.tok" || fail "$tag: tokens differ"
    cmp -s "$T/r.bin" "$T/$q.base.bin" || fail "$tag: logits not bit-identical"
    if [ $part = layer ]; then
      b=$(worker_bytes "$T/r.json")
      ratio=$(echo "$b $f32_bytes" | awk '{printf "%.3f", $1 / $2}')
      echo "$q: workers hold $b bytes of weights, $ratio of float32's $f32_bytes"
      # q8_0: 34 bytes per 32 values (0.266 of float32) with w_down in f16 (0.5): ~0.32;
      # q4_0: 18 bytes per 32 values (0.141) with w_down in f16: ~0.23.
      lim=$([ $q = q8_0 ] && echo "0.25 0.34" || echo "0.14 0.26")
      echo "$ratio $lim" | awk '{exit !($1 >= $2 && $1 <= $3)}' \
        || fail "$q: worker weight bytes are $ratio of float32's, expected within [$lim]"
    fi
    echo "ok: $tag"
  done
  # The quantized weights are not the float32 ones, yet close to them.
  cmp -s "$T/$q.base.bin" "$T/f32.base.bin" && fail "$q: logits equal the float32 run's"
done
# GPT-2 (biases, LayerNorm, tied head) in llama.cpp's Q4_K_M mix: with dim 64 its q/k/v fall
# back to Q5_1 (a Q8_1 activation), wo and w_up to Q5_0; its w_down rows of 256 stay Q4_K, so
# the slice plan rounds the FFN cut to 256 and leaves empty slices [0, 0) before the one that
# holds it (which alone adds b_down).
if [ -e "$SHARED/gpt2-tiny-random/model.safetensors" ]; then
  m="$T/gpt2.h5"
  "$CONVERT" --format hf --dir "$SHARED/gpt2-tiny-random" --quantize q4_k_m --out "$m" --quiet
  run_hs 1 --model "$m" "${args[@]}" --metrics "$T/g.base.json" --logits-out "$T/g.base.bin" \
    || fail "gpt2 q4_k_m: single-process run failed"
  for part in layer head slice; do
    run_hs 5 --model "$m" "${args[@]}" "${dist[@]}" --partition $part --metrics "$T/r.json" \
      --logits-out "$T/r.bin" || fail "gpt2 q4_k_m $part: run failed"
    jq -c .tokens "$T/r.json" | cmp -s - <(jq -c .tokens "$T/g.base.json") \
      || fail "gpt2 q4_k_m $part: tokens differ"
    cmp -s "$T/r.bin" "$T/g.base.bin" || fail "gpt2 q4_k_m $part: logits not bit-identical"
  done
  echo "ok: gpt2 q4_k_m layer, head, slice"
fi
echo "PASS: quantized models run on 5 ranks as on one"
