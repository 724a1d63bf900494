#!/usr/bin/env bash
# single.sh: one process on a TinyLlama-1.1B-shaped synthetic model: ms per token and the
# fraction of this machine's single-core memory-bandwidth roofline it reaches
# (bytes of weights read per token / time per token / measured read bandwidth), for the own
# matrix-vector kernel and OpenBLAS, measured side by side (interleaved) in one run.
#   bench/single.sh [MODEL.h5] [REPEATS]      (default: out/models/tinyllama.h5, 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/mpi-env.sh
build=${BUILD_DIR:-build}
model=${1:-out/models/tinyllama.h5}
reps=${2:-3}
steps=${STEPS:-24}
cmake --build "$build" --target headsplit headsplit-convert matvec_bench >/dev/null
if [ ! -e "$model" ]; then
  mkdir -p "$(dirname "$model")"
  if [ -e /tmp/tinyllama-synth.h5 ]; then ln -s /tmp/tinyllama-synth.h5 "$model"; else
    echo "single.sh: writing $model (4.4 GB, about 2 minutes)" >&2
    "$build/headsplit-convert" --synthetic tinyllama-1.1b --seed 1 --out "$model"
  fi
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "single.sh: $model, $steps positions, $reps interleaved repeats; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
bw=() own=() blas=()
for ((i = 1; i <= reps; i++)); do
  echo "[$i/$reps] bandwidth" >&2
  # The read bandwidth of one core, measured by the matvec benchmark's streaming read.
  b=$(OPENBLAS_NUM_THREADS=1 "$build/bench/matvec_bench" -r 3 | tail -n 1 | jq .read4_gbs)
  bw+=("$b")
  for impl in own blas; do
    echo "[$i/$reps] headsplit --matvec $impl" >&2
    mpirun $MPI_FLAGS -np 1 "$build/headsplit" --model "$model" --prompt "Once upon a time" \
      --steps "$steps" --quiet --matvec $impl --metrics "$out/$impl.$i.json" 2>/dev/null
    ms=$(jq .ms_per_token "$out/$impl.$i.json")
    if [ $impl = own ]; then own+=("$ms"); else blas+=("$ms"); fi
  done
done
m="$out/own.1.json"
# Weights streamed per token: every layer, the final norm and the LM head (the embedding row
# is one row).
bytes=$(jq '.ranks[0].weight_bytes + (.model.vocab_size * .model.dim + .model.dim) * 4' "$m")
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mbw=$(median "${bw[@]}")
mown=$(median "${own[@]}")
mblas=$(median "${blas[@]}")
core=$(jq -r .openblas_corename "$m")
awk -v b="$bytes" -v bw="$mbw" -v o="$mown" -v l="$mblas" -v core="$core" -v r="$reps" 'BEGIN {
  printf "weights read per token      %.1f MB\n", b / 1e6
  printf "read bandwidth (1 core)     %.1f GB/s (median of %d)\n", bw, r
  printf "own kernel                  %.1f ms/token  %.1f GB/s  %.2f of the roofline\n", o, b / o / 1e6, b / o / 1e6 / bw
  printf "OpenBLAS (%s)        %.1f ms/token  %.1f GB/s  %.2f of the roofline\n", core, l, b / l / 1e6, b / l / 1e6 / bw
  printf "own / OpenBLAS speed        %.2fx\n", l / o
  printf "{\"bench\":\"single\",\"weight_bytes\":%d,\"bandwidth_gbs\":%.3f,\"own_ms\":%.2f,\"blas_ms\":%.2f,\"own_roofline\":%.3f,\"blas_roofline\":%.3f,\"openblas_core\":\"%s\"}\n", b, bw, o, l, b / o / 1e6 / bw, b / l / 1e6 / bw, core
}'
