# Inter-layer speculation: tolerance 0 is bit-identical to exact execution; at any tolerance
# the distributed run computes exactly what the single-process emulation of speculation
# computes (same kept/re-executed choices, same bits).
. "$(dirname "$0")/common.sh"
stories_model "$T/m.h5" 5
P="Once upon a time"
run_hs 1 --model "$T/m.h5" --prompt "$P" --steps 40 --quiet --logits-out "$T/exact.bin" \
  --metrics "$T/exact.json"
vocab=$(jq .model.vocab_size "$T/exact.json")
for place in greedy roundrobin random; do
  for w in 2 3 4; do
    run_hs $((w + 1)) --model "$T/m.h5" --prompt "$P" --steps 40 --quiet --partition head \
      --placement $place --speculate all --tolerance 0 --logits-out "$T/s.bin" \
      --metrics "$T/s.json"
    "$CMP" "$T/s.bin" "$T/exact.bin" --cols "$vocab" --exact >/dev/null \
      || fail "tolerance 0, $place, $w workers: not bit-identical to exact execution"
    [ "$(jq .spec_kept "$T/s.json")" = 0 ] || fail "tolerance 0 kept a speculation"
  done
done
echo "ok: tolerance 0 is exact (3 placements x 2..4 workers)"
for tol in 0.3 100; do
  run_hs 1 --model "$T/m.h5" --prompt "$P" --steps 40 --quiet --speculate all \
    --tolerance $tol --logits-out "$T/local.bin"
  for w in 3 4; do
    # Round-robin spreads every layer's heads, so every transition may speculate, as in the
    # emulation (a plan that keeps a layer's heads with the previous FFN cannot).
    run_hs $((w + 1)) --model "$T/m.h5" --prompt "$P" --steps 40 --quiet --partition head \
      --placement roundrobin --speculate all --tolerance $tol --logits-out "$T/d.bin" \
      --metrics "$T/d.json"
    tried=$(jq .spec_tried "$T/d.json")
    # one decision per pass and transition (the prompt's positions share one pass)
    want=$(jq '.passes * (.model.n_layers - 1)' "$T/d.json")
    [ "$tried" -eq "$want" ] || fail "tolerance $tol, $w workers: $tried of $want speculated"
    "$CMP" "$T/d.bin" "$T/local.bin" --cols "$vocab" --exact >/dev/null \
      || fail "tolerance $tol, $w workers: differs from the single-process emulation"
  done
done
# Adaptive: with an impossible tolerance speculation switches itself off and stays exact.
run_hs 5 --model "$T/m.h5" --prompt "$P" --steps 40 --quiet --partition head \
  --speculate all --tolerance 0 --adaptive --logits-out "$T/a.bin" --metrics "$T/a.json"
"$CMP" "$T/a.bin" "$T/exact.bin" --cols "$vocab" --exact >/dev/null || fail "adaptive not exact"
tried=$(jq .spec_tried "$T/a.json")
[ "$tried" -lt $((39 * 4)) ] || fail "adaptive did not switch speculation off ($tried tried)"
# predicted_ms_per_token prices the speculation the run uses: kept (no profile: assumed kept)
# it is below the prediction without, from the same measured inputs (one run states both).
run_hs 4 --model "$T/m.h5" --prompt "$P" --steps 4 --quiet --partition head \
  --placement roundrobin --speculate all --tolerance 0.3 --metrics "$T/p.json" 2> "$T/p.err" \
  >/dev/null || { cat "$T/p.err"; fail "prediction run failed"; }
line=$(grep "predicted ms/token" "$T/p.err") || fail "no prediction with speculation logged"
with=$(echo "$line" | sed 's/.*ms\/token \([^ ]*\) with.*/\1/')
without=$(echo "$line" | sed 's/.*), \([^ ]*\) without.*/\1/')
pred=$(jq .predicted_ms_per_token "$T/p.json")
awk -v a="$with" -v b="$without" -v p="$pred" 'BEGIN { exit !(a < b && p > a * 0.9999 &&
  p < a * 1.0001) }' || fail "prediction with speculation $with (metrics $pred), without $without"
echo "ok: predicted ms/token $with with speculation, $without without"
echo "PASS: speculation is exact at tolerance 0 and matches its emulation elsewhere"
