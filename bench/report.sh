#!/usr/bin/env bash
# bench/report.sh: writes docs/results.md from a benchmark run of bench/run.sh and copies its
# plots and summary tables into docs/results/.
#
#   bench/report.sh [OUT]       OUT: the run's --out directory (default: the newest out/bench-*)
#   bench/report.sh --doc FILE --assets DIR [OUT]
#
# The page holds the exact command, the machine (CPU model, cores, memory, kernel), the date,
# the git revision, quick or full, the host's load average, the tables (bench/run.sh's
# table.md) and the plots.  Re-running it on the same OUT gives the same page.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/bench/lib.sh"
DOC=docs/results.md
ASSETS=docs/results
OUT=""
while [ $# -gt 0 ]; do
  case $1 in
    --doc) DOC=$2; shift 2 ;;
    --assets) ASSETS=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "report: unknown option $1" >&2; exit 2 ;;
    *) OUT=$1; shift ;;
  esac
done
if [ -z "$OUT" ]; then
  OUT=$(ls -1dt out/bench-*/ 2>/dev/null | head -1 || true)
  [ -n "$OUT" ] || { echo "report: no out/bench-* directory; give the run's --out" >&2; exit 2; }
fi
OUT=${OUT%/}
[ -f "$OUT/meta.json" ] || { echo "report: $OUT/meta.json missing: not a bench/run.sh output" >&2; exit 2; }
# Tables are (re)made from the raw runs, so the page always matches the harness's code.
[ -f "$OUT/runs.tsv" ] && hs_aggregate "$OUT" && hs_plots "$OUT"
mkdir -p "$ASSETS"
for f in seconds_per_256.png speedup.png rtt_sweep.png tolerance_sweep.png summary.csv \
         rtt_sweep.csv tolerance_sweep.csv results.csv; do
  if [ -f "$OUT/$f" ]; then cp "$OUT/$f" "$ASSETS/$f"; else rm -f "$ASSETS/$f"; fi
done
python3 "$ROOT/bench/report.py" "$OUT" "$DOC" "$ASSETS"
