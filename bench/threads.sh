#!/usr/bin/env bash
# --threads on one rank: decode speed of TinyLlama-1.1B fp32 (synthetic weights, 4.4 GB) at
# -np 1 with --threads 1 and --threads 2, three runs of each, interleaved; prints both medians
# (ms per generated token, from the metrics' gen_ms / n_gen_tokens), their ratio, and the host
# load before and after (other work on the machine skews a 2-core measurement).
#   bench/threads.sh [BUILD_DIR] [MODEL.h5]      (the model is made once under /tmp)
# Not part of the test suite: it takes minutes and its figures depend on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODEL=${2:-/tmp/headsplit-bench/tinyllama-1.1b-f32.h5}
N=${N_PREDICT:-16}
. scripts/mpi-env.sh
if [ ! -e "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  echo "making $MODEL (4.4 GB, once)" >&2
  "$BUILD/headsplit-convert" --synthetic tinyllama-1.1b --out "$MODEL" >&2
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "host: $(nproc) cores, load before: $(load)"
# The ceiling: a 4.4 GB model is streamed from memory once per token, so --threads 2 can be
# at most as much faster as two threads read faster than one.
cmake --build "$BUILD" --target readbw >/dev/null
"$BUILD/bench/readbw" -m 1024 -r 7 -t 2 > "$OUT/readbw.txt"
cat "$OUT/readbw.txt" | head -3
for rep in 1 2 3; do
  for t in 1 2; do
    mpirun $MPI_FLAGS -np 1 "$BUILD/headsplit" --model "$MODEL" --prompt "Once upon a time" \
      -n "$N" --threads $t --quiet --metrics "$OUT/t$t.$rep.json" 2> "$OUT/err" ||
      { cat "$OUT/err"; exit 1; }
  done
done
echo "load after: $(load)"
python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
med = {}
for t in (1, 2):
    ms = []
    for rep in (1, 2, 3):
        m = json.load(open(f"{out}/t{t}.{rep}.json"))
        ms.append(m["gen_ms"] / max(1, m["n_gen_tokens"]))
    med[t] = statistics.median(ms)
    print(f"--threads {t}: {med[t]:8.1f} ms/token (runs: {', '.join(f'{v:.1f}' for v in ms)})")
print(f"speed-up --threads 2 over 1: {med[1] / med[2]:.2f}x (target >= 1.6x)")
bw = json.loads(open(f"{out}/readbw.txt").read().strip().splitlines()[-1])["gbs"]
print(f"read bandwidth 1 / 2 threads: {bw[0]:.1f} / {bw[1]:.1f} GB/s (ratio {bw[1] / bw[0]:.2f}, "
      f"the ceiling of the speed-up); decode at 1 / 2 threads reads "
      f"{4.4e3 / med[1]:.1f} / {4.4e3 / med[2]:.1f} GB/s")
PY
