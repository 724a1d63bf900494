#!/usr/bin/env bash
# quant.sh: quantized decode on TinyLlama-1.1B shapes (synthetic weights), beside fp32.
#   1. one process, types f32, q8_0, q4_0, q4_k_m: ms per token and the fraction of one core's
#      read roofline (bytes of weights read per token / time per token / the read bandwidth
#      bench/roofline.sh measures: matvec_bench's read4_gbs), medians of REPEATS interleaved
#      rounds (each round: bandwidth, then every type once);
#   2. five ranks on loopback, --partition slice, q4_0 against f32 (issue 14: q4_0 at least as
#      fast per token as f32 / 3), medians of the same rounds.
# The models are written once under $QUANT_MODELS (default /tmp/headsplit-quant; f32 4.4 GB,
# the others 0.6-1.2 GB, a few minutes) and never into the repository.  The 1-minute load
# average is printed before and after every round; the script refuses to start above
# MAX_LOAD (default 4; other builds on a small machine make the figures meaningless) unless
# FORCE=1.
#   bench/quant.sh [REPEATS]      (default 3; N_PREDICT new tokens per run, default 24)
# The figure is decode: milliseconds per generated token (1000 / gen_tokens_per_s), not the
# median over every position (the prompt's positions run in batched passes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/mpi-env.sh
build=${BUILD_DIR:-build}
reps=${1:-3}
npred=${N_PREDICT:-24}
dir=${QUANT_MODELS:-/tmp/headsplit-quant}
max_load=${MAX_LOAD:-4}
types="f32 q8_0 q4_0 q4_k_m"
load1() { cut -d' ' -f1 /proc/loadavg; }
if [ "${FORCE:-0}" != 1 ] && awk -v l="$(load1)" -v m="$max_load" 'BEGIN {exit !(l > m)}'; then
  echo "quant.sh: 1-minute load $(load1) is above $max_load; run when the host is quiet" \
       "(or FORCE=1, and publish the load with the figures)" >&2
  exit 1
fi
cmake --build "$build" --target headsplit headsplit-convert matvec_bench >/dev/null
mkdir -p "$dir"
for t in $types; do
  m="$dir/tinyllama-$t.h5"
  [ -e "$m" ] && continue
  echo "quant.sh: writing $m" >&2
  if [ "$t" = f32 ]; then q=(); else q=(--quantize "$t"); fi
  "$build/headsplit-convert" --synthetic tinyllama-1.1b --seed 1 "${q[@]}" --out "$m.partial"
  mv "$m.partial" "$m"
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
loads=()
run() { # run NP TYPE TAG [ARGS...]: one decode run, its metrics in $out/TAG.json
  local np=$1 t=$2 tag=$3
  shift 3
  mpirun $MPI_FLAGS -np "$np" "$build/headsplit" --model "$dir/tinyllama-$t.h5" \
    --prompt "Once upon a time" -n "$npred" --quiet --rtt-pings 1 \
    --metrics "$out/$tag.json" "$@" >/dev/null 2>"$out/$tag.err" || {
    cat "$out/$tag.err" >&2
    echo "quant.sh: $tag failed" >&2
    exit 1
  }
  jq '1000 / .gen_tokens_per_s' "$out/$tag.json"
}
declare -A ms
bw=()
for ((i = 1; i <= reps; i++)); do
  loads+=("$(load1)")
  echo "[$i/$reps] load $(load1): bandwidth" >&2
  bw+=("$(OPENBLAS_NUM_THREADS=1 "$build/bench/matvec_bench" -r 3 | tail -n 1 | jq .read4_gbs)")
  for t in $types; do
    echo "[$i/$reps] np=1 $t" >&2
    ms[1,$t]+="$(run 1 "$t" "one-$t-$i") "
  done
  for t in f32 q4_0; do
    echo "[$i/$reps] np=5 slice $t" >&2
    ms[5,$t]+="$(run 5 "$t" "slice-$t-$i" --partition slice) "
  done
done
loads+=("$(load1)")
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mbw=$(median "${bw[@]}")
# Bytes read per token in one process: the layers' weights as held (weight_bytes) plus the
# LM head's rows and the final norm.  The head's type is llama-quantize's choice for the
# output tensor: Q8_0 in a q8_0 file, Q6_K in q4_0 and q4_k_m files, F32 in f32 (row bytes
# for dim 2048: 2176, 1680, 8192).
echo "host $(uname -n), $(nproc) cores; load averages (1 min) per round: ${loads[*]}"
echo "read bandwidth (one core, median)  $mbw GB/s"
printf '%-8s %12s %14s %10s\n' type "ms/token" "MB/token" roofline
for t in $types; do
  m="$out/one-$t-1.json"
  case $t in q8_0) hr=2176 ;; q4_0 | q4_k_m) hr=1680 ;; *) hr=8192 ;; esac
  bytes=$(jq --argjson hr "$hr" '.ranks[0].weight_bytes + .model.vocab_size * $hr + .model.dim * 4' "$m")
  # shellcheck disable=SC2086
  med=$(median ${ms[1,$t]})
  awk -v t="$t" -v ms="$med" -v b="$bytes" -v bw="$mbw" 'BEGIN {
    printf "%-8s %12.1f %14.1f %10.2f\n", t, ms, b / 1e6, (b / (ms / 1e3)) / (bw * 1e9) }'
done
# shellcheck disable=SC2086
sf=$(median ${ms[5,f32]})
# shellcheck disable=SC2086
sq=$(median ${ms[5,q4_0]})
awk -v f="$sf" -v q="$sq" 'BEGIN {
  printf "5 ranks, slice, loopback: f32 %.1f ms/token, q4_0 %.1f ms/token (f32 / 3 = %.1f: %s)\n",
    f, q, f / 3, (q <= f / 3 ? "met" : "not met") }'
echo "all runs (ms/token, in round order):"
for k in "${!ms[@]}"; do echo "  np=${k%%,*} ${k#*,}: ${ms[$k]}"; done | sort
