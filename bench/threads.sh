#!/usr/bin/env bash
# --threads on one rank: decode speed of TinyLlama-1.1B-shaped models (synthetic weights) in
# fp32 (4.4 GB) and Q4_0 (0.64 GB) at -np 1 with --threads 1 and --threads 2, REPS runs of
# each, interleaved; prints the medians (ms per generated token, from the metrics' gen_ms /
# n_gen_tokens), their ratio against the target (>= 1.6x), the bytes of weights each decode
# reads per second, the host's read bandwidth at 1 and 2 threads (bench/readbw: what one
# plain sum per thread reads, the scale of a bandwidth-bound decode's ratio), the CPU, the
# revision and the load before and after.
#   bench/threads.sh [BUILD_DIR]
# Knobs (environment):
#   MODEL_F32, MODEL_Q4   the models (default /tmp/headsplit-bench/tinyllama-1.1b-*.h5, made
#                         once with headsplit-convert --synthetic tinyllama-1.1b --seed 1)
#   TYPES="f32 q4_0"      which of the two to run      REPS=3      N_F32=16  N_Q4=64 (tokens)
#   RT=1                  run every measurement under chrt -f 1 (real-time priority) where
#                         permitted: on a host busy with other work a 2-thread run otherwise
#                         measures the scheduler; RT=0 (the default) runs plainly
# Not part of the test suite: about 3-4 minutes (most of it loading the fp32 model 6 times).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
DIR=/tmp/headsplit-bench
MODEL_F32=${MODEL_F32:-$DIR/tinyllama-1.1b-f32.h5}
MODEL_Q4=${MODEL_Q4:-$DIR/tinyllama-1.1b-q4_0.h5}
TYPES=${TYPES:-f32 q4_0}
REPS=${REPS:-3}
. scripts/mpi-env.sh
cmake --build "$BUILD" --target headsplit headsplit-convert readbw >/dev/null
# The revision the binaries were built from (HEAD may move while the runs go on).
REV="$(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet HEAD -- src include 2>/dev/null || echo +changes)"
PRE=()
if [ "${RT:-0}" = 1 ]; then
  if chrt -f 1 true 2>/dev/null; then PRE=(chrt -f 1); else
    echo "threads.sh: RT=1 but chrt -f 1 is not permitted here; running plainly" >&2; fi
fi
for t in $TYPES; do
  case $t in
    f32) m=$MODEL_F32 q= ;;
    q4_0) m=$MODEL_Q4 q="--quantize q4_0" ;;
    *) echo "threads.sh: TYPES: '$t' is not f32 or q4_0" >&2; exit 2 ;;
  esac
  if [ ! -e "$m" ]; then
    mkdir -p "$(dirname "$m")"
    echo "threads.sh: making $m (once)" >&2
    # shellcheck disable=SC2086
    "$BUILD/headsplit-convert" --synthetic tinyllama-1.1b --seed 1 $q --out "$m" --quiet
  fi
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "host: $(nproc) cores ($cpu), revision $REV (built)," \
  "priority ${PRE[*]:-normal}"
echo "load before: $(load)"
"${PRE[@]}" "$BUILD/bench/readbw" -m 1024 -r 7 -t 2 > "$OUT/readbw.txt"
for rep in $(seq "$REPS"); do
  for t in $TYPES; do
    if [ "$t" = f32 ]; then m=$MODEL_F32 n=${N_F32:-16}; else m=$MODEL_Q4 n=${N_Q4:-64}; fi
    for th in 1 2; do
      echo "[$rep/$REPS] $t --threads $th" >&2
      "${PRE[@]}" mpirun $MPI_FLAGS -np 1 "$BUILD/headsplit" --model "$m" \
        --prompt "Once upon a time" -n "$n" --threads $th --quiet \
        --metrics "$OUT/$t.$th.$rep.json" 2> "$OUT/err" || { cat "$OUT/err"; exit 1; }
      if grep -q "warning" "$OUT/err"; then cat "$OUT/err" >&2; fi
    done
  done
done
echo "load after: $(load)"
python3 - "$OUT" "$REPS" "$TYPES" <<'PY'
import json, statistics, sys
out, reps, types = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
bw = json.loads(open(f"{out}/readbw.txt").read().strip().splitlines()[-1])["gbs"]
print(f"read bandwidth (bench/readbw, one sum per thread) 1 / 2 threads: {bw[0]:.1f} / "
      f"{bw[1]:.1f} GB/s, ratio {bw[1] / bw[0]:.2f} (the kernels keep more streams in flight "
      f"and may read faster)")
# Bytes each token reads: the layers' weights, the final norm and the LM head (fp32, or Q6_K
# in the Q4_0 file as llama-quantize chooses: 210 bytes per 256 weights).
lm = {"f32": 4.0, "q4_0": 210 / 256}
res = {}
for t in types:
    med, gbs = {}, {}
    for th in (1, 2):
        ms = []
        for rep in range(1, reps + 1):
            m = json.load(open(f"{out}/{t}.{th}.{rep}.json"))
            ms.append(m["gen_ms"] / max(1, m["n_gen_tokens"]))
        med[th] = statistics.median(ms)
        b = m["ranks"][0]["weight_bytes"] + m["model"]["vocab_size"] * m["model"]["dim"] * lm[t]
        gbs[th] = b / med[th] / 1e6
        print(f"{t:5s} --threads {th}: {med[th]:7.1f} ms/token  {1e3 / med[th]:5.1f} tok/s  "
              f"{gbs[th]:5.1f} GB/s of weights  (runs: {', '.join(f'{v:.1f}' for v in ms)})")
    r = med[1] / med[2]
    print(f"{t:5s} speed-up --threads 2 over 1: {r:.2f}x (target >= 1.6x: "
          f"{'met' if r >= 1.6 else 'NOT met'})")
    res[t] = {"ms_per_token": [round(med[1], 2), round(med[2], 2)], "speedup": round(r, 3),
              "weights_gbs": [round(gbs[1], 2), round(gbs[2], 2)]}
print(json.dumps({"bench": "threads", "readbw_gbs": bw, "reps": reps, "results": res}))
PY
