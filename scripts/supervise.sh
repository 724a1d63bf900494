#!/usr/bin/env bash
# supervise.sh: runs a HeadSplit job and, when a worker board drops out, relaunches it on the
# remaining hosts of the hostfile with --resume, so that losing one board costs a restart, not
# the work.  The transcript (--transcript) holds every token produced; the new run re-plans
# for the smaller set of workers and replays the transcript to continue the same text.
#
#   scripts/supervise.sh --hostfile hostfiles/cluster-5boards --np 5 -- \
#       build/headsplit --model weights/M.h5 --prompt "..." --steps 256 --transcript out/t.txt
#
# Options:
#   --hostfile FILE     hosts in rank order ("host slots=N" lines; rank 0 = first slot)
#   --np N              ranks of the first launch (default: all slots)
#   --max-restarts K    give up after K relaunches (default 3)
#   --mpirun "ARGS"     extra mpirun arguments (default: $MPI_FLAGS of scripts/mpi-env.sh)
# A failed rank is found in mpirun's report ("process rank R") or the engine's message
# ("[rank R]", "no message from rank R").  Rank 0 (the controller) is not replaceable: its
# loss ends supervision.  --inject-kill (a test aid) is passed to the first launch only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/mpi-env.sh"

die() { echo "supervise: error: $*" >&2; exit 2; }
hostfile="" np="" max_restarts=3 extra="$MPI_FLAGS"
while [ $# -gt 0 ]; do
  case "$1" in
    --hostfile) hostfile=${2:?}; shift 2 ;;
    --np) np=${2:?}; shift 2 ;;
    --max-restarts) max_restarts=${2:?}; shift 2 ;;
    --mpirun) extra=${2?}; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ $# -gt 0 ] || die "no command after --"
[ -n "$hostfile" ] && [ -r "$hostfile" ] || die "--hostfile: '$hostfile' is not readable"
cmd=("$@")
transcript=""
for ((i = 0; i < ${#cmd[@]}; i++)); do
  [ "${cmd[$i]}" = --transcript ] && transcript=${cmd[$((i + 1))]:-}
done
[ -n "$transcript" ] || die "the command needs --transcript FILE (the work to resume from)"

# One entry per slot, in rank order.
slots=()
while read -r host rest; do
  [ -z "$host" ] || [ "${host:0:1}" = "#" ] && continue
  n=$(sed -n 's/.*slots=\([0-9]\+\).*/\1/p' <<< "$rest")
  for ((k = 0; k < ${n:-1}; k++)); do slots+=("$host"); done
done < "$hostfile"
[ -n "$np" ] || np=${#slots[@]}
[ "$np" -le ${#slots[@]} ] || die "--np $np exceeds the ${#slots[@]} slots of $hostfile"
slots=("${slots[@]:0:$np}")

state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
attempt=0
resume_from=""
while :; do
  # A hostfile of the slots still alive, consecutive slots of a host merged.
  : > "$state/hosts"
  prev="" count=0
  for h in "${slots[@]}"; do
    if [ "$h" = "$prev" ]; then count=$((count + 1)); else
      [ -n "$prev" ] && echo "$prev slots=$count" >> "$state/hosts"
      prev=$h count=1
    fi
  done
  echo "$prev slots=$count" >> "$state/hosts"
  run=("${cmd[@]}")
  if [ $attempt -gt 0 ]; then
    # Drop the test aid, write a fresh transcript, continue from the saved one.
    filtered=()
    for ((i = 0; i < ${#run[@]}; i++)); do
      if [ "${run[$i]}" = --inject-kill ]; then i=$((i + 1)); continue; fi
      filtered+=("${run[$i]}")
    done
    run=("${filtered[@]}" --resume "$resume_from")
  fi
  echo "supervise: launch $((attempt + 1)) on ${#slots[@]} ranks: ${slots[*]}" >&2
  set +e
  # shellcheck disable=SC2086
  mpirun $extra --hostfile "$state/hosts" -np ${#slots[@]} "${run[@]}" 2> >(tee "$state/err" >&2)
  rc=$?
  set -e
  wait
  [ $rc -eq 0 ] && { echo "supervise: done after $attempt restart(s)" >&2; exit 0; }
  attempt=$((attempt + 1))
  [ $attempt -le "$max_restarts" ] || die "giving up after $max_restarts restarts (rc $rc)"
  failed=$(grep -oE 'process rank [0-9]+|no message from rank [0-9]+|rank [0-9]+ exceeded' \
             "$state/err" | grep -oE '[0-9]+' | head -n 1 || true)
  [ -n "$failed" ] || failed=$(grep -oE '\[rank [0-9]+\]' "$state/err" | grep -oE '[0-9]+' \
             | grep -v '^0$' | head -n 1 || true)
  [ -n "$failed" ] || die "the job failed (rc $rc) and no failed rank could be identified"
  [ "$failed" -ne 0 ] || die "the controller (rank 0, ${slots[0]}) failed: nothing to resume on"
  echo "supervise: rank $failed on ${slots[$failed]} failed; dropping it" >&2
  slots=("${slots[@]:0:$failed}" "${slots[@]:$((failed + 1))}")
  [ ${#slots[@]} -ge 2 ] || die "no worker left"
  [ -s "$transcript" ] || die "transcript $transcript is empty: nothing to resume"
  resume_from="$state/transcript.$attempt"
  cp "$transcript" "$resume_from"
done
