#!/usr/bin/env bash
# bench/breakeven.sh: the break-even map (docs/breakeven.md).  The simulator (headsplit-sim)
# prices one board, the best layer-wise plan over any subset of the boards (layer-dp), head-
# level and slice plans on 5 Raspberry Pi 4 boards for every model shape x stored type x
# medium x RTT x bandwidth (bench/breakeven.py), then draws a heatmap per shape and type
# (bench/breakeven.gp) and prints where a split pays.
#
#   bench/breakeven.sh [--out DIR] [--calibrate "RUN.json ..."] [--predict "RUN.json ..."]
#                      [--speed-q GBs]
#                      [--shapes "tinyllama-1.1b llama2-7b llama2-13b"] [--types "f32 q4_0"]
#                      [--rtts "0.5 1 2 5 10 20 30"] [--bws "50 100 200 500 1000"] [--tokens 8]
#
# --calibrate: headsplit --metrics files of runs on the emulated boards (bench/large_model.sh
# --device pi4 --out DIR) that fit the board's speed (stored bytes per second, headsplit-sim
# --calibrate); --predict: runs the fit then predicts, their errors printed and written to
# OUT/calibration.json.  The fitted speed prices the quantized cells (--speed-q sets it);
# fp32 cells use the catalogue's pi4 speed (4.8 GB/s, share/devices.tsv).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
SIM=$BUILD/headsplit-sim
out="" cal="" pred="" speed_q="" shapes="" types="" rtts="" bws="" tokens=8
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --calibrate) cal=$2; shift 2 ;;
    --predict) pred=$2; shift 2 ;;
    --speed-q) speed_q=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --rtts) rtts=$2; shift 2 ;;
    --bws) bws=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    *) echo "bench/breakeven.sh: unknown option $1 (see the header)" >&2; exit 2 ;;
  esac
done
[ -x "$SIM" ] || { echo "bench/breakeven.sh: $SIM not built (scripts/build.sh build)" >&2; exit 2; }
out=${out:-$SRC/bench/out/breakeven}
mkdir -p "$out"
echo "revision $(git -C "$SRC" rev-parse --short HEAD); headsplit-sim; out $out"
if [ -n "$cal" ]; then
  args=()
  for f in $cal; do
    [ -f "$f" ] || { echo "bench/breakeven.sh: --calibrate: $f: no such file" >&2; exit 2; }
    args+=(--calibrate "$f")
  done
  for f in $pred; do
    [ -f "$f" ] || { echo "bench/breakeven.sh: --predict: $f: no such file" >&2; exit 2; }
    args+=(--predict "$f")
  done
  "$SIM" "${args[@]}" > "$out/calibration.json"
  jq -r '"calibration: board speed \(.calibration.speed_gbs * 1000 | round / 1000) GB/s of stored bytes, fit over \(.calibration.fit_runs) run(s)"' "$out/calibration.json"
  jq -r '.runs[] | "  \(if .fit then "fit    " else "predict" end) \(.file | split("/") | last): measured \(.measured_ms | round) ms/token, simulated \(.simulated_ms | round) (\(.error_pct | round)%)"' "$out/calibration.json"
  speed_q=${speed_q:-$(jq .calibration.speed_gbs "$out/calibration.json")}
fi
py=(python3 "$SRC/bench/breakeven.py" --sim "$SIM" --out "$out" --tokens "$tokens")
[ -z "$speed_q" ] || py+=(--speed-q "$speed_q")
[ -z "$shapes" ] || py+=(--shapes "$shapes")
[ -z "$types" ] || py+=(--types "$types")
[ -z "$rtts" ] || py+=(--rtts "$rtts")
[ -z "$bws" ] || py+=(--bws "$bws")
"${py[@]}"
if command -v gnuplot > /dev/null 2>&1; then
  if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then term=pngcairo; else term=png; fi
  gnuplot -e "dir='$out'; term='$term'" "$SRC/bench/breakeven.gp" 2> "$out/gnuplot.log" ||
    { cat "$out/gnuplot.log" >&2; echo "bench/breakeven.sh: gnuplot failed" >&2; exit 1; }
  ls "$out"/breakeven_*.png
else
  echo "bench/breakeven.sh: gnuplot not found: no heatmaps (install gnuplot-nox)" >&2
fi
# where a split pays: per shape and type, the cells each plan wins and the range of the best
# split's ratio over the best layer-wise plan
python3 - "$out/cells.tsv" <<'PY'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
by = collections.OrderedDict()
for r in rows:
    by.setdefault((r[0], r[1], r[2]), []).append(r)
print("winners per shape / type / medium (cells: 1 one board, L layer-wise, H head, S slice; "
      "best split over best layer-wise, min-max)")
for (shape, q, med), rs in by.items():
    wins = collections.Counter(r[5] for r in rs)
    ratios = [float(r[11]) for r in rs if r[11] != "-"]
    w = ", ".join("%s %d" % (k, v) for k, v in sorted(wins.items())) or "none fits"
    rr = "%.2f-%.2fx" % (min(ratios), max(ratios)) if ratios else "-"
    print("  %-15s %-5s %-9s %-40s %s" % (shape, q, med, w, rr))
PY
