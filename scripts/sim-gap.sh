#!/usr/bin/env bash
# Greedy placement versus the exact optimum (branch and bound over the simulator's cost model)
# for 3-5 heterogeneous devices, two link types and two memory regimes; writes
# docs/sim-greedy-gap.md.
# Environment: BUILD (default build), OUT (default $BUILD/sim-gap), SHAPE (tinyllama-1.1b),
# SEEDS ("1 2 3"), TOKENS (256: costs at position TOKENS/2, KV reserved for TOKENS),
# LIMIT (120: seconds per search; an unfinished search reports its proven bound).  Results
# already in OUT are reused (FRESH=1 solves everything again).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/sim-gap}
SHAPE=${SHAPE:-tinyllama-1.1b}
SEEDS=${SEEDS:-1 2 3}
TOKENS=${TOKENS:-256}
LIMIT=${LIMIT:-120}
[ -x "$BUILD/headsplit-sim" ] || scripts/build.sh "$BUILD"
mkdir -p "$OUT" docs
rows=()
for n in 3 4 5; do
  for links in gbit wifi; do
    for slack in 1.5 3; do
      for seed in $SEEDS; do
        f="$OUT/n$n-$links-s$slack-h$seed.json"
        rows+=("$f")
        [ -z "${FRESH:-}" ] && [ -s "$f" ] && continue
        "$BUILD/headsplit-sim" --shape "$SHAPE" --devices "$n" --hetero "$seed" \
          --mem-slack "$slack" --links "$links" --tokens "$TOKENS" --solve \
          --solve-limit "$LIMIT" --json "$f"
        echo "sim-gap: n=$n $links slack=$slack seed=$seed: $(jq -r '"greedy \(.greedy_ms |
          round) ms, exact \(.exact_ms | round) ms\(if .optimal then "" else " (bound \(.bound_ms |
          round))" end), gap \(.greedy_gap_pct // "n/a" | if type == "number" then
          (. * 10 | round / 10 | tostring) + "%" else . end)"' "$f")"
      done
    done
  done
done

{
  echo "# Greedy placement versus the exact optimum"
  echo
  echo "Produced by \`scripts/sim-gap.sh\` with \`headsplit-sim --solve\` ($SHAPE shapes: 22"
  echo "layers, 32 query heads in 4 KV groups; costs at position $((TOKENS / 2)), KV cache for"
  echo "$TOKENS positions in the budgets; heterogeneous devices \`--hetero SEED\`; budgets that"
  echo "together hold 1.5x (tight) or 3x (loose) the model)."
  echo
  echo "- **exact**: \`solver_exact\`, branch and bound over every head-level placement (each"
  echo "  attention part, projection and FFN of every layer on any device) under the simulator's"
  echo "  deterministic token time, memory budgets enforced; Lagrangian bound on the budgets."
  echo "  Where the search hit its $LIMIT s limit the best plan found and the proven lower bound"
  echo "  are both given, and the gap is a range."
  echo "- **greedy**: the engine's \`plan_build\` greedy (FFN and projection first, then heads on"
  echo "  other devices, balancing bytes/speed)."
  echo "- **layer-dp**: EdgeShard-style contiguous blocks by dynamic programming (\`solver_layer_dp\`)."
  echo
  echo "Gaps are of the whole token time (controller's embedding and 262 MB LM head included);"
  echo "*pipeline gap* leaves the controller's fixed part out."
  echo
  echo "| devices | links | budgets | seed | greedy ms | layer-dp ms | exact ms | lower bound ms | proven | greedy gap % | pipeline gap % | layer-dp gap % | search s |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for f in "${rows[@]}"; do
    b=$(basename "$f" .json)
    slack=$(echo "$b" | sed 's/.*-s\([0-9.]*\)-h.*/\1/')
    seed=${b##*-h}
    jq -r --arg slack "$([ "$slack" = 1.5 ] && echo tight || echo loose)" --arg seed "$seed" '
      def r1: if type == "number" then (. * 10 | round / 10 | if . == 0 then 0 else . end)
        else "n/a" end;
      def gap(x): if x > 0 then ((x / .exact_ms - 1) * 100 | r1 | tostring) +
        (if .optimal then "" else " .. " + ((x / .bound_ms - 1) * 100 | r1 | tostring) end)
        else "n/a" end;
      "| \(.devices) | \(.links) | \($slack) | \($seed) | " +
      "\(if .greedy_ms > 0 then (.greedy_ms | r1) else "does not fit" end) | " +
      "\(if .layer_dp_ms > 0 then (.layer_dp_ms | r1) else "does not fit" end) | " +
      "\(.exact_ms | r1) | \(.bound_ms | r1) | \(if .optimal then "yes" else "no" end) | " +
      "\(gap(.greedy_ms)) | \(.greedy_gap_pipeline_pct | r1) | \(gap(.layer_dp_ms)) | " +
      "\(.solve_s | r1) |"' "$f"
  done
  echo
  jq -rs '
    def r1: (. * 10 | round / 10);
    [.[] | select(.greedy_ms > 0)] as $g
    | ($g | map(.greedy_gap_pct) | sort) as $s
    | ($g | map(select(.optimal)) | length) as $proven
    | "Greedy gap over the \($g | length) scenarios where greedy fits (\($proven) proven optimal):" +
      " mean **\($s | add / length | r1)%**, median \($s[($s | length) / 2 | floor] | r1)%," +
      " min \($s[0] | r1)%, max \($s[-1] | r1)%." +
      " Layer-dp gap: mean \([.[] | select(.layer_dp_ms > 0) | .layer_dp_gap_pct] |
        add / length | r1)%."' "${rows[@]}"
  echo
  echo "Why greedy comes close: with one token in flight the token time is the sum of the"
  echo "layers' critical paths, so greedy places each layer's FFN and projection where its input"
  echo "arrives and its work ends soonest: the fastest devices fill first (as far as their budgets"
  echo "allow) and consecutive layers stay on one device where a hop costs time; attention parts"
  echo "then go where they reach the projection soonest. Where it loses, it is by filling"
  echo "devices in layer order where the optimum would cut the blocks elsewhere (tight budgets),"
  echo "which layer-dp's dynamic programme does see. (Until 2026-11-30 greedy balanced load, bytes"
  echo "over speed, which suits throughput, not one token's latency: mean gap 112%.)"
} >docs/sim-greedy-gap.md
echo "sim-gap: wrote docs/sim-greedy-gap.md"
