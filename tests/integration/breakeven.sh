#!/usr/bin/env bash
# breakeven: the simulator's inputs for the break-even map and the map itself, end to end.
# A 3-rank run on an emulated shared link records its stored types and link in the metrics;
# headsplit-sim --calibrate fits the board speed to it (and reads the link as the engine did:
# a shared medium); --links takes a link description and --quantize the stored types;
# bench/breakeven.sh on a small grid writes a winner for every cell, the calibration and the
# heatmaps.
. "$(dirname "$0")/common.sh"
SIM="$BUILD/headsplit-sim"
"$CONVERT" --synthetic stories260k --seed 3 --quantize q8_0 --out "$T/m.h5" > /dev/null
run_hs 3 --model "$T/m.h5" --prompt hi -n 24 --partition slice --quiet \
  --emulate-link "rtt=4ms,bw=100mbit,medium=shared,relay=ap,frame=1ms" --metrics "$T/run.json" ||
  fail "the emulated run failed"
jq -e '.model.weight_types.wq == "q8_0" and .model.weight_types.w_down == "f16"' "$T/run.json" \
  > /dev/null || fail "metrics lack the stored types: $(jq -c .model.weight_types "$T/run.json")"
"$SIM" --calibrate "$T/run.json" > "$T/cal.json" || fail "calibrate failed"
jq -e '.calibration.speed_gbs > 0 and (.runs[0].error_pct | fabs) < 5' "$T/cal.json" > /dev/null ||
  fail "calibration does not fit its run: $(jq -c '.calibration, .runs[0].error_pct' "$T/cal.json")"
# the same run with the medium switched: fitted alike, priced differently (the link is read: frames of 1 ms on one channel)
jq '.config.emulate_link = "rtt=4ms,bw=100mbit,medium=switched"' "$T/run.json" > "$T/sw.json"
"$SIM" --calibrate "$T/run.json" --predict "$T/sw.json" > "$T/cal2.json" || fail "predict failed"
jq -e '.runs[1].simulated_ms < .runs[0].simulated_ms' "$T/cal2.json" > /dev/null ||
  fail "a switched link is not cheaper than the shared channel: $(jq -c '[.runs[].simulated_ms]' "$T/cal2.json")"
# --links SPEC and --quantize
sim_ms() { "$SIM" --shape llama2-7b --devices 4 --tokens 4 --engine-partition slice "$@" |
  jq .ms_per_token_median; }
slow=$(sim_ms --quantize q4_0 --links "rtt=20ms,bw=50mbit") || fail "--links spec refused"
fast=$(sim_ms --quantize q4_0 --links "rtt=1ms,bw=1gbit")
f32=$(sim_ms --quantize f32 --links "rtt=1ms,bw=1gbit")
awk -v s="$slow" -v f="$fast" -v g="$f32" 'BEGIN { exit !(s > f && g > 2 * f) }' ||
  fail "links or stored types do not price: slow $slow, fast $fast, fp32 $f32 ms/token"
"$SIM" --shape llama2-7b --quantize q9 > /dev/null 2> "$T/e" && fail "--quantize q9 accepted"
grep -q "unknown type 'q9'" "$T/e" || fail "--quantize q9: $(cat "$T/e")"
"$SIM" --links "rtt=fast" > /dev/null 2> "$T/e" && fail "--links rtt=fast accepted"
grep -q "links 'rtt=fast'" "$T/e" || fail "--links rtt=fast: $(cat "$T/e")"
# the map on a small grid
"$SRC/bench/breakeven.sh" --out "$T/map" --calibrate "$T/run.json" --shapes "tinyllama-1.1b" \
  --rtts "1 10" --bws "100 1000" --tokens 4 > "$T/map.out" 2>&1 || { cat "$T/map.out"; fail "breakeven.sh failed"; }
[ "$(tail -n +2 "$T/map/cells.tsv" | wc -l)" = 16 ] || fail "cells.tsv: not 16 cells"
awk -F'\t' 'NR > 1 && $6 !~ /^(one|layer|head|slice)$/ { bad = 1 } END { exit bad }' "$T/map/cells.tsv" ||
  fail "a cell without a winner: $(cat "$T/map/cells.tsv")"
jq -e '.calibration.fit_runs == 1' "$T/map/calibration.json" > /dev/null || fail "no calibration written"
for q in f32 q4_0; do
  [ -s "$T/map/breakeven_tinyllama-1.1b_$q.png" ] || fail "no heatmap for $q: $(cat "$T/map.out")"
done
grep -q "winners per shape" "$T/map.out" || fail "no summary printed"
echo "breakeven: ok"
