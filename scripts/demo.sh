#!/usr/bin/env bash
# The README's main job: the Llama-architecture model that ships in weights/, run by a
# controller and four workers (heads spread over the workers), with the placement table,
# the RTT matrix and the per-layer time breakdown.  Extra arguments go to headsplit.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/mpi-env.sh
model=${HEADSPLIT_MODEL:-weights/austen-llama.h5}
[ -r "$model" ] || { echo "demo: error: $model not found (see weights/README.md)" >&2; exit 1; }
mkdir -p out
mpirun $MPI_FLAGS -np 5 build/headsplit --model "$model" --prompt "It was a truth" \
  --steps 160 --temperature 0.8 --top-p 0.95 --seed 7 --partition head --show-placement \
  --metrics out/demo.json "$@"
echo "metrics: out/demo.json" >&2
