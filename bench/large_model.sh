#!/usr/bin/env bash
# bench/large_model.sh: a 7-8B-class model end to end on loopback, once (docs/large-models.md).
# Converts the synthetic preset (unless MODEL.h5 exists) under /usr/bin/time -v, then decodes
# it on NP ranks for each partition and prints every rank's weights, accounted weights + KV
# and peak RSS from the metrics, with the load and the revision.
#
#   bench/large_model.sh [--preset llama2-7b] [--quantize q4_0] [--model /tmp/M.h5]
#                        [--np 5] [--ctx-size 512] [--steps 8] [--partitions "layer slice"]
#                        [--keep]
# The model file (~3.8 GB for llama2-7b q4_0) is removed at the end unless --keep.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
preset=llama2-7b quant=q4_0 model="" np=5 ctx=512 steps=8 parts="layer slice" keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --preset) preset=$2; shift 2 ;;
    --quantize) quant=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --ctx-size) ctx=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --partitions) parts=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "bench/large_model.sh: unknown option $1 (see the header)" >&2; exit 2 ;;
  esac
done
model=${model:-/tmp/hs-$preset-$quant.h5}
. "$SRC/scripts/mpi-env.sh"
out=$(mktemp -d)
echo "revision $(git -C "$SRC" rev-parse --short HEAD); $(nproc) cores; load at start: $(uptime | sed 's/.*load average: //')"
if [ ! -e "$model" ]; then
  /usr/bin/time -v "$BUILD/headsplit-convert" --synthetic "$preset" --quantize "$quant" \
    --out "$model" > "$out/conv.out" 2> "$out/conv.err"
  cat "$out/conv.out"
  grep -E "Elapsed|Maximum resident|User time|System time" "$out/conv.err"
fi
for part in $parts; do
  echo "== --partition $part, $np ranks, --ctx-size $ctx, --steps $steps (load: $(uptime | sed 's/.*load average: //'))"
  timeout 3600 mpirun $MPI_FLAGS -np "$np" "$BUILD/headsplit" --model "$model" --prompt "hi" \
    --ctx-size "$ctx" --steps "$steps" --partition "$part" --rtt-pings 1 --quiet \
    --metrics "$out/$part.json" > "$out/$part.out" 2>&1 || { tail -5 "$out/$part.out"; continue; }
  jq -r '"ms/token (median) \(.ms_per_token), generated \(.n_gen_tokens), load_s \(.load_s)"' \
    "$out/$part.json"
  jq -r '(.memory | map({key: (.rank | tostring), value: .peak_accounted_bytes}) | from_entries)
      as $acc | .ranks[] | "rank \(.rank) \(.role): weights \(.weight_bytes / 1e6 | floor) MB, " +
      "weights + KV accounted \(($acc[.rank | tostring] // .weight_bytes) / 1e6 | floor) MB, " +
      "peak RSS \(.peak_rss_bytes / 1e6 | floor) MB"' "$out/$part.json"
done
rm -rf "$out"
[ $keep = 1 ] || rm -f "$model"
