# --placement dp|exact: the engine runs the simulator's solvers (layer DP and the exact
# head-level search) over the measured cluster; --placement waterfill: the budget-aware SLICE
# placement the simulator's galaxy policy uses (tokens equal to the single process's, SLICE
# sums in another order).  Every rank must build the same plan (the
# run would hang or fail otherwise) and, both being PIPE plans, the logits must be
# bit-identical to the single process's; a contradicting --partition is refused.
. "$(dirname "$0")/common.sh"
stories_model "$T/m.h5" 7
run_hs 1 --model "$T/m.h5" --prompt "$P" --steps 16 --quiet --logits-out "$T/single.bin" \
  --metrics "$T/single.json" || fail "single process failed"
# Unequal budgets and speeds from a file, so that the solvers have something to decide.
printf '1 speed=1 mem=600K\n2 speed=0.5\n3 speed=1\n' > "$T/dev.txt"
for p in dp exact; do
  run_hs 4 --model "$T/m.h5" --prompt "$P" --steps 16 --quiet --placement "$p" \
    --devices "$T/dev.txt" --metrics "$T/$p.json" --logits-out "$T/$p.bin" 2> "$T/$p.err" ||
    { cat "$T/$p.err"; fail "--placement $p failed"; }
  cmp -s "$T/single.bin" "$T/$p.bin" || fail "--placement $p: logits differ from the single process"
  [ "$(jq -r .config.placement "$T/$p.json")" = "$p" ] || fail "metrics do not record --placement $p"
  grep -q "headsplit: $p placement: simulated" "$T/$p.err" || fail "no $p placement line"
done
[ "$(jq -r .plan.partition "$T/dp.json")" = layer ] || fail "dp did not place whole layers"
[ "$(jq -r .plan.partition "$T/exact.json")" = head ] || fail "exact did not place heads"
# Rank 1's budget (600K) cannot take the whole model: its share must stay within it.
w=$(jq '[.ranks[] | select(.rank == 1) | .weight_bytes] | first' "$T/dp.json")
[ "$w" -le 614400 ] || fail "dp put $w bytes on rank 1, over its 600K budget"
run_hs 4 --model "$T/m.h5" --prompt "$P" --steps 16 --quiet --placement waterfill \
  --devices "$T/dev.txt" --metrics "$T/wf.json" 2> "$T/wf.err" ||
  { cat "$T/wf.err"; fail "--placement waterfill failed"; }
[ "$(jq -c .tokens "$T/wf.json")" = "$(jq -c .tokens "$T/single.json")" ] ||
  fail "--placement waterfill: tokens differ from the single process"
[ "$(jq -r .plan.partition "$T/wf.json")" = slice ] || fail "waterfill did not slice"
[ "$(jq -r .config.placement "$T/wf.json")" = waterfill ] || fail "metrics lost --placement waterfill"
set +e
OMPI_MCA_ess_singleton_isolated=1 timeout 60 "$HS" --model "$T/m.h5" --placement dp \
  --partition slice > /dev/null 2> "$T/bad.err"
rc=$?
set -e
[ $rc -eq 2 ] || fail "--placement dp --partition slice: exit $rc, not 2"
grep -q -- "--placement dp" "$T/bad.err" || fail "the refusal does not name --placement: $(cat "$T/bad.err")"
echo "PASS: --placement dp and exact: the same plan on every rank, bit-identical logits; waterfill: equal tokens"
