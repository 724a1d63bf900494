# The 16-bit wire (--wire f16): SLICE partial sums travel as IEEE halves.  Half the exchange
# bytes, members stay in step (the run completes with every member adding the same rounded
# values), logits stay close to the exact f32 run's, and a bad --wire value is refused.
. "$(dirname "$0")/common.sh"
stories_model "$T/m.h5" 3
vocab=512
# Equal speeds from a file: the slices (and so the bytes exchanged) must not follow the
# start-up speed measurement's noise from one run to the next (on a loaded host the two runs
# got different plans, and f16 then moved more bytes than f32).
printf '1 speed=1\n2 speed=1\n3 speed=1\n4 speed=1\n' > "$T/dev.txt"
for w in f32 f16; do
  run_hs 5 --model "$T/m.h5" --prompt "$P" --steps 48 --quiet --partition slice --wire "$w" \
    --devices "$T/dev.txt" --metrics "$T/$w.json" --logits-out "$T/$w.bin" || fail "--wire $w run failed"
done
[ "$(jq -r .config.wire "$T/f16.json")" = f16 ] || fail "metrics do not record the wire format"
f32=$(jq .bytes_per_token "$T/f32.json")
f16=$(jq .bytes_per_token "$T/f16.json")
echo "bytes/token: f32 $f32, f16 $f16"
awk -v a="$f32" -v b="$f16" 'BEGIN { exit !(b < 0.62 * a) }' || fail "f16 did not shrink the traffic: $f32 -> $f16"
# Rounding partial sums to 11 significant bits moves logits by far less than their scale.
rows=$(( $(stat -c %s "$T/f32.bin") / (4 * vocab) ))
[ "$rows" -gt 0 ] || fail "no logits written"
"$CMP" "$T/f16.bin" "$T/f32.bin" --cols "$vocab" --tol 0.05 || fail "f16 logits too far from f32"
same=$(jq -n --slurpfile a "$T/f32.json" --slurpfile b "$T/f16.json" \
  '[range($a[0].tokens | length) as $i | select($a[0].tokens[$i] == $b[0].tokens[$i])] | length')
echo "tokens equal to the f32 run: $same of $(jq '.tokens | length' "$T/f32.json")"
expect_error "--wire f8" "--wire: 'f8' is not f32, f16 or q8" \
  run_hs 2 --model "$T/m.h5" --prompt "$P" --steps 2 --wire f8
echo "PASS: --wire f16 halves the exchange bytes and stays close to f32"
