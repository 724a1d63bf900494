# --cache-type f32|f16|q8_0: the KV caches' stored type.  f32 (the default) is exact; f16
# halves and q8_0 cuts to 34/128 the KV bytes per position in the metrics; for one cache type
# a single process and 3 ranks (layer-wise and head-level) give the same tokens and logits
# (every rank runs the same store/dequantize/attention code in the same order); logits stay
# close to f32's; a bad value, and q8_0 on a head size not a multiple of 32, are refused.
. "$(dirname "$0")/common.sh"
M="$SRC/weights/austen-llama-9m.h5" # head size 32
P="It is a truth"
run_hs 1 --model "$M" --prompt "$P" --steps 40 --quiet --metrics "$T/base.json" \
  --logits-out "$T/base.bin" || fail "default run failed"
for t in f32 f16 q8_0; do
  run_hs 1 --model "$M" --prompt "$P" --steps 40 --quiet --cache-type "$t" \
    --metrics "$T/$t-1.json" --logits-out "$T/$t-1.bin" || fail "--cache-type $t failed (1 rank)"
  [ "$(jq -r .cache_type "$T/$t-1.json")" = "$t" ] || fail "metrics cache_type is not $t"
  [ "$(jq -r .config.cache_type "$T/$t-1.json")" = "$t" ] || fail "config.cache_type is not $t"
  for part in layer head; do
    run_hs 4 --model "$M" --prompt "$P" --steps 40 --quiet --cache-type "$t" --partition "$part" \
      --metrics "$T/$t-$part.json" --logits-out "$T/$t-$part.bin" ||
      fail "--cache-type $t --partition $part failed (3 workers)"
    [ "$(jq -c .tokens "$T/$t-$part.json")" = "$(jq -c .tokens "$T/$t-1.json")" ] ||
      fail "--cache-type $t: tokens on 3 workers ($part) differ from one process"
    cmp -s "$T/$t-$part.bin" "$T/$t-1.bin" ||
      fail "--cache-type $t: logits on 3 workers ($part) not bit-identical to one process"
    # the workers' KV bytes per position as placement counts them (a KV group whose query
    # heads a head-level plan splits is cached by each rank holding some of them)
    jq '[.memory[].kv_bytes_per_token] | add' "$T/$t-$part.json" > "$T/$t-$part.kv"
  done
done
cmp -s "$T/f32-1.bin" "$T/base.bin" || fail "--cache-type f32 logits differ from the default's"
[ "$(jq .tokens_checksum "$T/f32-1.json")" = "$(jq .tokens_checksum "$T/base.json")" ] || fail "f32 checksum"
vocab=$(jq .model.vocab_size "$T/base.json")
f32=$(jq .kv_bytes_per_position "$T/f32-1.json")
f16=$(jq .kv_bytes_per_position "$T/f16-1.json")
q8=$(jq .kv_bytes_per_position "$T/q8_0-1.json")
echo "KV bytes per position: f32 $f32, f16 $f16, q8_0 $q8"
[ $((2 * f16)) -eq "$f32" ] || fail "f16 does not halve the KV bytes: $f32 -> $f16"
[ $((128 * q8)) -eq $((34 * f32)) ] || fail "q8_0 is not 34/128 of f32: $f32 -> $q8"
[ "$(cat "$T/f32-layer.kv")" = "$f32" ] || fail "layer-wise: the workers hold other KV bytes"
for part in layer head; do
  a=$(cat "$T/f32-$part.kv") b=$(cat "$T/f16-$part.kv") c=$(cat "$T/q8_0-$part.kv")
  echo "workers' KV bytes per position ($part): f32 $a, f16 $b, q8_0 $c"
  [ $((2 * b)) -eq "$a" ] && [ $((128 * c)) -eq $((34 * a)) ] ||
    fail "$part: the workers' KV bytes do not follow the cache type"
done
for t in f16 q8_0; do
  echo "max |logit diff| vs f32, --cache-type $t:"
  "$CMP" "$T/$t-1.bin" "$T/f32-1.bin" --cols "$vocab" --tol 0.25 || fail "$t logits too far from f32"
done
expect_error "--cache-type q4_0" "--cache-type: 'q4_0' is not f32, f16 or q8_0" \
  run_hs 1 --model "$M" --prompt "$P" --steps 2 --cache-type q4_0
expect_error "--cache-type q8_0, head size 16" "--cache-type q8_0: the head size 16" \
  run_hs 2 --model "$SRC/weights/austen-llama.h5" --prompt "$P" --steps 2 --cache-type q8_0
echo "PASS: --cache-type stores the KV caches as f16 / q8_0 alike on 1 and 3 workers"
