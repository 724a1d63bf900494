#!/usr/bin/env bash
# batch.sh: what a multi-position pass buys on one process (issue 17).  For each B, ms per
# position of the in-process backend's forward_n over B positions at once (every layer of
# MODEL.h5, each weight streamed once per pass), the median of REPEATS timed passes after a
# warm-up, and its ratio to B = 1, for the file's weight type.  The host's load averages are
# printed before and after (shared machines make single figures unreliable: quote them).
#   bench/batch.sh BUILD MODEL.h5 [B...]       (default B: 1 8 32 64; 1 is always run first)
#   REPEATS (default 5), THREADS (kernel threads, default 1)
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bench/batch.sh BUILD MODEL.h5 [B...]" >&2
  exit 1
fi
build=$1 model=$2
shift 2
bin=$build/bench/batch_bench
[ -x "$bin" ] || { echo "batch.sh: $bin not found (build the project into $build)" >&2; exit 1; }
[ -r "$model" ] || { echo "batch.sh: cannot read model $model" >&2; exit 1; }
bs=("$@")
[ ${#bs[@]} -gt 0 ] || bs=(8 32 64)
list=(1)
for b in "${bs[@]}"; do
  [[ $b =~ ^[1-9][0-9]*$ ]] || { echo "batch.sh: B must be a positive integer, not '$b'" >&2; exit 1; }
  [ "$b" = 1 ] || list+=("$b")
done
echo "# host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" "$model" -r "${REPEATS:-5}" -t "${THREADS:-1}" "${list[@]}"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
