# headsplit-profile end to end: profiles the shipped model on the shipped corpus (a few hundred
# positions, greedy runs of 8 tokens, with the quality runs), under each --f32-order, writes the
# profile file that headsplit --speculate auto then reads on 3 ranks; bad options are refused
# with the option named.
. "$(dirname "$0")/common.sh"
M="$SRC/weights/austen-llama.h5"
C="$SRC/docs/corpus/stories.txt"
PROF="$BUILD/headsplit-profile"
for order in avx512 avx2; do
  "$PROF" --model "$M" --corpus "$C" --tokens 384 -n 8 --f32-order "$order" \
    --out "$T/$order.json" > "$T/$order.out" 2>&1 || { cat "$T/$order.out"; fail "headsplit-profile --f32-order $order failed"; }
  [ "$(jq -r .format "$T/$order.json")" = "headsplit-profile 1" ] || fail "$order: no profile format"
  [ "$(jq -r .f32_order "$T/$order.json")" = "$order" ] || fail "$order: the profile does not record its f32 order"
  n=$(jq '.transitions | length' "$T/$order.json")
  [ "$n" = "$(( $(jq .config.n_layers "$T/$order.json") - 1 ))" ] || fail "$order: $n transitions for the model's layers"
  jq -e '[.transitions[].mean_r] | all(. > 0)' "$T/$order.json" > /dev/null || fail "$order: a transition without a measured ratio"
  jq -e '.quality.runs | length > 0' "$T/$order.json" > /dev/null || fail "$order: no quality runs"
  grep -q "transitions speculate" "$T/$order.out" || fail "$order: no decision summary printed"
done
# the profile drives --speculate auto on 3 ranks (layer-wise plan: every transition can speculate)
run_hs 3 --model "$M" --prompt "It is a truth" --steps 24 --quiet --speculate auto \
  --profile "$T/avx2.json" --f32-order avx2 --metrics "$T/run.json" > "$T/run.out" 2>&1 ||
  { cat "$T/run.out"; fail "headsplit --speculate auto with the profile failed"; }
[ "$(jq .n_gen_tokens "$T/run.json")" -gt 0 ] || fail "the profiled run generated nothing"
"$PROF" --model "$M" --corpus "$C" --f32-order avx1 > "$T/bad.out" 2>&1 && fail "--f32-order avx1 accepted"
grep -q -- "--f32-order: 'avx1'" "$T/bad.out" || fail "the bad --f32-order is not named: $(cat "$T/bad.out")"
"$PROF" --model "$M" --corpus "$T/none.txt" > "$T/bad2.out" 2>&1 && fail "a missing corpus accepted"
grep -q "none.txt" "$T/bad2.out" || fail "the missing corpus is not named: $(cat "$T/bad2.out")"
echo "PASS: headsplit-profile writes a profile (each --f32-order) that --speculate auto runs on"
