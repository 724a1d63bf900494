#!/usr/bin/env bash
# bench/predict.sh: the analytic cost model's predicted_ms_per_token against the measured
# ms/token on the emulated testbed (5 ranks, scripts/emulate-device pi4 with compute
# dilation, --emulate-link wifi), configurations interleaved, each repeated; prints one row
# per run and the medians (docs/cost-model.md).
#
#   bench/predict.sh MODEL.h5 [--repeats K] [--steps N] [--configs LIST] [--out DIR]
#
# LIST: comma-separated of layer, head/greedy, head/spread, slice, slice/q8 (default all).
# The load average is printed before every run: the host's other work lengthens a dilated
# rank's stretches beyond what it is charged, so a busy host measures slower than the model.
set -euo pipefail
case "${BASH_SOURCE[0]}" in */*) HERE=${BASH_SOURCE[0]%/*} ;; *) HERE=. ;; esac
ROOT=$HERE/..
MODEL=${1:?usage: bench/predict.sh MODEL.h5 [--repeats K] [--steps N] [--configs LIST] [--out DIR]}
shift
REPEATS=3 STEPS=24 CONFIGS=layer,head/greedy,head/spread,slice,slice/q8
OUT=${TMPDIR:-/tmp}/predict-$$
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) REPEATS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "bench/predict.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -r "$MODEL" ] || { echo "bench/predict.sh: cannot read model '$MODEL'" >&2; exit 2; }
command -v jq >/dev/null || { echo "bench/predict.sh: needs jq" >&2; exit 2; }
. "$ROOT/scripts/mpi-env.sh"
mkdir -p "$OUT"

flags_of() {
  case "$1" in
    layer) echo "--partition layer" ;;
    head/greedy) echo "--partition head --placement greedy" ;;
    head/spread) echo "--partition head --placement spread" ;;
    slice) echo "--partition slice" ;;
    slice/q8) echo "--partition slice --wire q8" ;;
    *) echo "bench/predict.sh: unknown configuration '$1'" >&2; exit 2 ;;
  esac
}

echo "# $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) $(basename "$MODEL")" \
     "steps $STEPS repeats $REPEATS"
printf '%-12s %3s %8s %10s %10s %7s\n' config rep load measured predicted ratio
IFS=, read -ra LIST <<<"$CONFIGS"
for rep in $(seq 1 "$REPEATS"); do
  for cfg in "${LIST[@]}"; do
    f=$OUT/${cfg//\//_}-$rep.json
    load=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2046
    HEADSPLIT_EMU_MODE=dilate mpirun $MPI_FLAGS -np 5 "$ROOT/scripts/emulate-device" pi4 \
      "$ROOT/build/headsplit" --model "$MODEL" $(flags_of "$cfg") --emulate-link wifi \
      --prompt "Hi" --steps "$STEPS" --batch 1 --quiet --metrics "$f" >"$f.log" 2>&1 ||
      { echo "bench/predict.sh: $cfg failed (see $f.log)" >&2; exit 1; }
    m=$(jq .ms_per_token "$f") p=$(jq .predicted_ms_per_token "$f")
    printf '%-12s %3d %8s %10.1f %10.1f %7.2f\n' "$cfg" "$rep" "$load" "$m" "$p" \
      "$(echo "$p / $m" | bc -l)"
  done
done
echo "# medians"
for cfg in "${LIST[@]}"; do
  jq -s --arg c "$cfg" '[.[] | .ms_per_token] as $m | [.[] | .predicted_ms_per_token] as $p |
      ($m | sort | .[length / 2 | floor]) as $mm | ($p | sort | .[length / 2 | floor]) as $pp |
      "\($c) measured \($mm * 10 | round / 10) predicted \($pp * 10 | round / 10) ratio \($pp / $mm * 100 | round / 100)"' \
    -r "$OUT"/"${cfg//\//_}"-*.json
done
