#!/usr/bin/env bash
# bench/large_model.sh: a 7-8B-class model end to end, on loopback or on emulated boards
# (docs/large-models.md).  Converts the synthetic preset (unless MODEL.h5 exists) or a GGUF
# file (--gguf) under /usr/bin/time -v, then decodes it on NP ranks for each partition, link
# and repeat, and prints every rank's weights, accounted weights + KV and peak RSS from the
# metrics, the decode speed (gen_tokens_per_s, decode_ms_per_token) beside the cost model's
# predicted_ms_per_token, with the load and the revision; a summary of medians at the end.
#
#   bench/large_model.sh [--preset llama2-7b] [--quantize q4_0] [--gguf FILE.gguf]
#                        [--model /tmp/M.h5] [--np 5] [--ctx-size 512] [-n 16]
#                        [--partitions "layer slice"] [--device pi4|none] [--links "none"]
#                        [--repeats 1] [--keep] [--out DIR]
#   --device pi4   each rank under scripts/emulate-device pi4 (HEADSPLIT_EMU_MODE=dilate unless
#                  set: the board's speed from CPU time, not a share of a loaded host)
#   --links L      space-separated --emulate-link specs (wifi, ethernet, ...; none: loopback)
# A model file the script writes (~3.8 GB for llama2-7b q4_0) is removed at the end unless
# --keep; a --model that exists is used and kept.  --out DIR keeps every run's metrics
# (PARTITION-LINK-REPEAT.json) and output there (default: a temporary folder, removed).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
preset=llama2-7b quant=q4_0 model="" gguf="" np=5 ctx=512 steps=16 parts="layer slice" keep=0
device=none links=none repeats=1 outdir=""
while [ $# -gt 0 ]; do
  case $1 in
    --preset) preset=$2; shift 2 ;;
    --quantize) quant=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --ctx-size) ctx=$2; shift 2 ;;
    --steps|-n) steps=$2; shift 2 ;;
    --gguf) gguf=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --links) links=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --partitions) parts=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --out) outdir=$2; shift 2 ;;
    *) echo "bench/large_model.sh: unknown option $1 (see the header)" >&2; exit 2 ;;
  esac
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "bench/large_model.sh: --repeats must be a positive integer" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "bench/large_model.sh: -n must be a positive integer" >&2; exit 2; }
[ -z "$gguf" ] || [ -f "$gguf" ] || { echo "bench/large_model.sh: --gguf $gguf: no such file" >&2; exit 2; }
if [ -n "$gguf" ]; then model=${model:-/tmp/hs-$(basename "$gguf" .gguf).h5}; fi
model=${model:-/tmp/hs-$preset-$quant.h5}
. "$SRC/scripts/mpi-env.sh"
wrap=()
if [ "$device" != none ]; then
  "$SRC/scripts/emulate-device" --check "$device" > /dev/null ||
    { echo "bench/large_model.sh: --device $device: emulate-device --check failed" >&2; exit 2; }
  wrap=("$SRC/scripts/emulate-device" "$device")
  export HEADSPLIT_EMU_MODE=${HEADSPLIT_EMU_MODE:-dilate}
fi
if [ -n "$outdir" ]; then
  mkdir -p "$outdir"; out=$outdir
else
  out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
fi
echo "revision $(git -C "$SRC" rev-parse --short HEAD); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load at start: $(uptime | sed 's/.*load average: //')"
echo "device $device${wrap:+ (HEADSPLIT_EMU_MODE=$HEADSPLIT_EMU_MODE)}, links: $links, $repeats repeat(s), -n $steps, --ctx-size $ctx"
made=0
if [ ! -e "$model" ]; then
  made=1
  if [ -n "$gguf" ]; then
    /usr/bin/time -v "$BUILD/headsplit-convert" --format gguf --file "$gguf" --out "$model" \
      > "$out/conv.out" 2> "$out/conv.err" || { tail -5 "$out/conv.err"; exit 1; }
  else
    /usr/bin/time -v "$BUILD/headsplit-convert" --synthetic "$preset" --quantize "$quant" \
      --out "$model" > "$out/conv.out" 2> "$out/conv.err" || { tail -5 "$out/conv.err"; exit 1; }
  fi
  cat "$out/conv.out"
  grep -E "Elapsed|Maximum resident|User time|System time" "$out/conv.err"
fi
: > "$out/summary.tsv"
for rep in $(seq 1 "$repeats"); do
for link in $links; do
for part in $parts; do
  f=$out/$part-$link-$rep
  la=(); [ "$link" = none ] || la=(--emulate-link "$link")
  echo "== --partition $part, link $link, repeat $rep, $np ranks (load: $(uptime | sed 's/.*load average: //'))"
  timeout 3600 mpirun $MPI_FLAGS -np "$np" "${wrap[@]}" "$BUILD/headsplit" --model "$model" \
    --prompt "hi there" --ctx-size "$ctx" -n "$steps" --partition "$part" "${la[@]}" --quiet \
    --metrics "$f.json" > "$f.out" 2>&1 || { tail -5 "$f.out"; continue; }
  grep -m1 "auto partition" "$f.out" || true
  jq -r '"decode \(.decode_ms_per_token) ms/token (predicted \(.predicted_ms_per_token)), " +
      "\(.gen_tokens_per_s) tok/s over \(.n_gen_tokens) tokens, partition \(.config.partition_chosen // .config.partition), load_s \(.load_s), " +
      "host over the boards \((.emulation_host_over // 0) * 100 | floor)% (rank \(.emulation_host_over_rank // -1))"' "$f.json"
  jq -r '(.memory | map({key: (.rank | tostring), value: .peak_accounted_bytes}) | from_entries)
      as $acc | .ranks[] | "rank \(.rank) \(.role): weights \(.weight_bytes / 1e6 | floor) MB, " +
      "weights + KV accounted \(($acc[.rank | tostring] // .weight_bytes) / 1e6 | floor) MB, " +
      "peak RSS \(.peak_rss_bytes / 1e6 | floor) MB"' "$f.json"
  jq -r --arg p "$part" --arg l "$link" '[$p, $l, .decode_ms_per_token, .predicted_ms_per_token,
      .gen_tokens_per_s, (.config.partition_chosen // .config.partition),
      ([.ranks[] | select(.role == "worker" and .weight_bytes > 0)] | length + 1)] | @tsv' \
    "$f.json" >> "$out/summary.tsv"
done; done; done
echo "== summary: medians over $repeats repeat(s) (decode ms/token, predicted, tok/s; boards = controller + workers holding weights)"
python3 - "$out/summary.tsv" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    p, l, ms, pred, tps, chosen, boards = line.rstrip("\n").split("\t")
    rows.setdefault((l, p), []).append((float(ms), float(pred), float(tps), chosen, boards))
best = {}
for (l, p), v in rows.items():
    if p == "layer":
        best[l] = statistics.median(x[0] for x in v)
for (l, p), v in sorted(rows.items()):
    ms = statistics.median(x[0] for x in v)
    pred = statistics.median(x[1] for x in v)
    tps = statistics.median(x[2] for x in v)
    vs = f", {best[l] / ms:.2f}x layer" if l in best else ""
    print(f"{l:10s} {p:6s} -> {v[0][3]:6s} boards {v[0][4]}: {ms:8.1f} ms/token (range "
          f"{min(x[0] for x in v):.1f}-{max(x[0] for x in v):.1f}), {tps:.2f} tok/s, predicted "
          f"{pred:.1f} ({(pred / ms - 1) * 100:+.0f}%){vs}")
PY
# a model this script wrote goes unless --keep; one it was given stays
[ $keep = 1 ] || [ $made = 0 ] || rm -f "$model"
