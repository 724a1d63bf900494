#!/usr/bin/env bash
# vs_llamacpp.sh: llama.cpp against HeadSplit on the same GGUF files, one process: decode
# (tg64: llama-bench -n 64, headsplit -n 64) and prompt processing (pp128: llama-bench -p 128,
# headsplit on a 128-token prompt), at each thread count, REPS interleaved repeats, medians
# side by side.  The files are TinyLlama-1.1B-shaped with pseudo-random weights: an F32 GGUF
# written by bench/random_gguf.py, quantized by llama.cpp's own llama-quantize, each converted
# with headsplit-convert --format gguf (its blocks kept byte for byte).
#   LLAMA_CPP_BIN=/path/to/llama.cpp/build/bin bench/vs_llamacpp.sh [BUILD_DIR]
# The project never vendors llama.cpp: without LLAMA_CPP_BIN this runs the project's own
# figures instead (bench/single.sh: ms per token and the roofline it measures).
# Knobs: TYPES="F32 Q4_0" (any of F32 Q8_0 Q4_0 Q4_K_M)  THREADS="1 2"  REPS=3  RT=1 (run
#   every measurement under chrt -f 1 where permitted: a busy host otherwise measures its
#   scheduler)  DIR=/tmp/headsplit-bench/gguf (the files; made once)  FORCE=1 (remake them)
#   LAYERS=22 (fewer: a smaller file of the same shapes)
# About 3 minutes per type and thread count at the defaults on a 2-core host (F32 the most).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
if [ -z "${LLAMA_CPP_BIN:-}" ]; then
  echo "vs_llamacpp.sh: LLAMA_CPP_BIN is not set (a llama.cpp build's bin directory with" \
    "llama-bench and llama-quantize); running the project's own figures (bench/single.sh)" >&2
  exec bench/single.sh
fi
for tool in llama-bench llama-quantize; do
  [ -x "$LLAMA_CPP_BIN/$tool" ] || { echo "vs_llamacpp.sh: $LLAMA_CPP_BIN/$tool is missing" >&2; exit 2; }
done
TYPES=${TYPES:-F32 Q4_0}
THREADS=${THREADS:-1 2}
REPS=${REPS:-3}
DIR=${DIR:-/tmp/headsplit-bench/gguf}
LAYERS=${LAYERS:-22}
. scripts/mpi-env.sh
cmake --build "$BUILD" --target headsplit headsplit-convert >/dev/null
# The revision the binaries were built from (HEAD may move while the runs go on).
REV="$(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet HEAD -- src include 2>/dev/null || echo +changes)"
PRE=()
if [ "${RT:-0}" = 1 ]; then
  if chrt -f 1 true 2>/dev/null; then PRE=(chrt -f 1); else
    echo "vs_llamacpp.sh: RT=1 but chrt -f 1 is not permitted here; running plainly" >&2; fi
fi
mkdir -p "$DIR"
f32="$DIR/tl$LAYERS-F32.gguf"
if [ ! -e "$f32" ] || [ "${FORCE:-0}" = 1 ]; then
  python3 bench/random_gguf.py "$f32" --layers "$LAYERS" >&2
fi
for t in $TYPES; do
  g="$DIR/tl$LAYERS-$t.gguf"
  case $t in F32 | Q8_0 | Q4_0 | Q4_K_M) ;; *) echo "vs_llamacpp.sh: TYPES: '$t' is not F32, Q8_0, Q4_0 or Q4_K_M" >&2; exit 2 ;; esac
  if [ "$t" != F32 ] && { [ ! -e "$g" ] || [ "${FORCE:-0}" = 1 ]; }; then
    "$LLAMA_CPP_BIN/llama-quantize" "$f32" "$g" "$t" > "$DIR/quantize-$t.log" 2>&1 ||
      { tail -5 "$DIR/quantize-$t.log"; exit 1; }
  fi
  if [ ! -e "${g%.gguf}.h5" ] || [ "$g" -nt "${g%.gguf}.h5" ] || [ "${FORCE:-0}" = 1 ]; then
    "$BUILD/headsplit-convert" --format gguf --file "$g" --out "${g%.gguf}.h5" --quiet
  fi
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
# A 128-token prompt: BOS and the SPM space prefix, then 126 byte tokens (the table says
# how many the prompt made).
PROMPT=$(printf 'x%.0s' $(seq 126))
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "host: $(nproc) cores ($cpu), revision $REV (built)," \
  "llama.cpp: $LLAMA_CPP_BIN, priority ${PRE[*]:-normal}"
echo "load before: $(load)"
for rep in $(seq "$REPS"); do
  for t in $TYPES; do
    g="$DIR/tl$LAYERS-$t.gguf"
    for th in $THREADS; do
      echo "[$rep/$REPS] $t --threads $th: llama-bench" >&2
      "${PRE[@]}" "$LLAMA_CPP_BIN/llama-bench" -m "$g" -p 128 -n 64 -t "$th" -r 1 -o json \
        > "$OUT/ll.$t.$th.$rep.json" 2> "$OUT/err" || { cat "$OUT/err"; exit 1; }
      echo "[$rep/$REPS] $t --threads $th: headsplit" >&2
      "${PRE[@]}" mpirun $MPI_FLAGS -np 1 "$BUILD/headsplit" --model "${g%.gguf}.h5" \
        --prompt "Once upon a time" -n 64 --threads "$th" --quiet \
        --metrics "$OUT/tg.$t.$th.$rep.json" 2> "$OUT/err" || { cat "$OUT/err"; exit 1; }
      "${PRE[@]}" mpirun $MPI_FLAGS -np 1 "$BUILD/headsplit" --model "${g%.gguf}.h5" \
        --prompt "$PROMPT" -n 1 --threads "$th" --quiet \
        --metrics "$OUT/pp.$t.$th.$rep.json" 2> "$OUT/err" || { cat "$OUT/err"; exit 1; }
    done
  done
done
echo "load after: $(load)"
python3 - "$OUT" "$REPS" "$TYPES" "$THREADS" <<'PY'
import json, statistics, sys
out, reps, types, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
med = statistics.median
print("| type | threads | decode tg64 HeadSplit / llama.cpp tok/s | ratio | prompt pp128 HeadSplit / llama.cpp tok/s | ratio |")
print("|---|---|---|---|---|---|")
res = []
for t in types:
    for th in threads:
        tg_h, pp_h, tg_l, pp_l, npp = [], [], [], [], 0
        for r in range(1, reps + 1):
            tg_h.append(json.load(open(f"{out}/tg.{t}.{th}.{r}.json"))["gen_tokens_per_s"])
            m = json.load(open(f"{out}/pp.{t}.{th}.{r}.json"))
            pp_h.append(m["prompt_tokens_per_s"])
            npp = m["n_prompt_tokens"]
            for row in json.load(open(f"{out}/ll.{t}.{th}.{r}.json")):
                (tg_l if row["n_gen"] > 0 else pp_l).append(row["avg_ts"])
        a, b, c, d = med(tg_h), med(tg_l), med(pp_h), med(pp_l)
        print(f"| {t} | {th} | {a:.2f} / {b:.2f} | {a / b:.2f}x | {c:.1f} / {d:.1f} | {c / d:.2f}x |")
        res.append({"type": t, "threads": int(th), "tg_headsplit": a, "tg_llama": b,
                    "pp_headsplit": c, "pp_llama": d, "headsplit_prompt_tokens": npp})
print(json.dumps({"bench": "vs_llamacpp", "reps": reps, "results": res}))
PY
