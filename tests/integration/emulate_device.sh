# shellcheck shell=bash disable=SC2086,SC2016  # $MPI_FLAGS splits; sh -c bodies expand later
# Device emulation (scripts/emulate-device): a CPU-bound process under the pi4 profile runs at
# the configured share (CPU time / wall time = 0.125 +- 0.03), a process that allocates beyond
# its memory limit is reported as killed by it, groups are removed afterwards, signals reach
# the command, and ranks get groups of their own.  Skipped (77) where cgroups cannot be used.
. "$(dirname "$0")/common.sh"
E="$SRC/scripts/emulate-device"

if ! "$E" --check pi4 > "$T/check" 2>&1; then
  echo "SKIP: device emulation needs writable cgroups (root, cgroup v2 with cpu+memory delegated or v1 cpu+memory mounted read-write):"
  cat "$T/check"
  exit 77
fi
cat "$T/check"

# 1. CPU share.  A busy loop for 3 s; bash's `time` gives wall and CPU seconds.  The machine
# may be busy with other work, which can only lower the share: up to three tries.
burn() {
  "$E" pi4 bash -c 'TIMEFORMAT="%R %U %S"; time timeout 3 sh -c "while :; do :; done"' \
    > /dev/null 2> "$T/burn" || true
  tail -n 1 "$T/burn" | awk '{ if (NF != 3 || $1 <= 0) exit 1; printf "%.3f %.2f %.2f\n", ($2 + $3) / $1, $2 + $3, $1 }'
}
ok=0
for try in 1 2 3; do
  read -r share cpu wall < <(burn) || { cat "$T/burn"; fail "no timing from the CPU burner"; }
  echo "pi4 CPU share, try $try: $cpu s CPU over $wall s wall = $share (want 0.125 +- 0.03)"
  if awk -v s="$share" 'BEGIN { exit !(s >= 0.095 && s <= 0.155) }'; then ok=1; break; fi
  # Above the quota is a real failure, not load.
  awk -v s="$share" 'BEGIN { exit !(s > 0.155) }' && fail "CPU share $share exceeds the pi4 quota"
done
[ $ok = 1 ] || fail "CPU share $share is not 0.125 +- 0.03 after 3 tries"

# Overrides: HEADSPLIT_EMU_CPU=0.7.
HEADSPLIT_EMU_CPU=0.7 "$E" pi4 bash -c 'TIMEFORMAT="%R %U %S"; time timeout 1 sh -c "while :; do :; done"' \
  > /dev/null 2> "$T/burn" || true
s2=$(tail -n 1 "$T/burn" | awk '{ printf "%.3f", ($2 + $3) / $1 }')
echo "HEADSPLIT_EMU_CPU=0.7: share $s2"
awk -v s="$s2" 'BEGIN { exit !(s >= 0.55 && s <= 0.75) }' || fail "HEADSPLIT_EMU_CPU=0.7 gave share $s2"

# 2. Memory limit: 96 MiB through a pipe into tail (which holds a line without newlines
# whole) under a 32 MiB limit must be killed and reported; 8 MiB must pass.
set +e
HEADSPLIT_EMU_MEM=32M timeout -k 5 60 "$E" pi4 sh -c 'head -c 96M /dev/zero | tail > /dev/null' \
  > "$T/out" 2> "$T/err"
rc=$?
set -e
[ $rc -ne 0 ] || fail "allocation beyond the limit exited 0"
[ $rc -ne 124 ] || fail "allocation beyond the limit hung"
grep -q "emulate-device: rank 0 exceeded its memory limit of 32M (oom_kill)" "$T/err" ||
  { cat "$T/err"; fail "OOM kill not reported"; }
echo "memory: exit $rc, reported: $(grep exceeded "$T/err")"
HEADSPLIT_EMU_MEM=32M "$E" pi4 sh -c 'head -c 8M /dev/zero | tail > /dev/null' 2> "$T/err" ||
  { cat "$T/err"; fail "8 MiB under a 32 MiB limit failed"; }
! grep -q exceeded "$T/err" || fail "false OOM report"

# 3. The group is removed after the command ends; the command sees its profile.
"$E" pi4 sh -c 'cat /proc/self/cgroup; env' > "$T/cg"
grep -q "^HEADSPLIT_DEVICE_PROFILE=pi4$" "$T/cg" || fail "HEADSPLIT_DEVICE_PROFILE not exported"
grep -q "^HEADSPLIT_DEVICE_CPU=0.125$" "$T/cg" || fail "HEADSPLIT_DEVICE_CPU not exported"
while IFS=: read -r _ ctl path; do
  case ",$ctl," in
    *,cpu,* | *,memory,* | ,,)
      if [ -z "$path" ] || [ "$path" = / ]; then continue; fi
      for mnt in /sys/fs/cgroup /sys/fs/cgroup/cpu /sys/fs/cgroup/memory /sys/fs/cgroup/unified; do
        case "$path" in */headsplit-emu/*) [ ! -d "$mnt$path" ] || fail "group $mnt$path left behind" ;; esac
      done ;;
  esac
done < <(grep -E '^[0-9]+:' "$T/cg")
grep -q "headsplit-emu/" "$T/cg" || fail "command did not run in a headsplit-emu group"

# 4. Signals reach the command; the wrapper exits with its status.
"$E" pi4 sleep 30 &
w=$!
sleep 0.5
kill -TERM $w
t0=$SECONDS
set +e
wait $w
rc=$?
set -e
[ $rc -eq 143 ] || fail "SIGTERM: wrapper exited $rc, want 143"
[ $((SECONDS - t0)) -lt 5 ] || fail "SIGTERM took too long"

# 5. Without cgroups: refuse by default, run with HEADSPLIT_EMU_ALLOW_NONE=1.
set +e
HEADSPLIT_EMU_CGROUP=none "$E" pi4 true 2> "$T/err"
rc=$?
set -e
[ $rc -eq 3 ] || fail "unavailable cgroups: exit $rc, want 3"
if ! grep -q "cgroups unavailable" "$T/err" || ! grep -q HEADSPLIT_EMU_ALLOW_NONE "$T/err"; then
  cat "$T/err"
  fail "refusal message unclear"
fi
HEADSPLIT_EMU_CGROUP=none HEADSPLIT_EMU_ALLOW_NONE=1 "$E" pi4 true 2> "$T/err" ||
  fail "HEADSPLIT_EMU_ALLOW_NONE=1 did not run the command"
grep -q "WITHOUT device limits" "$T/err" || fail "no warning when running unconstrained"

# 6. Under mpirun: one group per rank, rank 0 with the controller profile.
HEADSPLIT_EMU_CONTROLLER=unlimited timeout -k 5 60 mpirun $MPI_FLAGS -np 3 "$E" pi4 \
  sh -c 'echo "$OMPI_COMM_WORLD_RANK $HEADSPLIT_DEVICE_PROFILE $(grep -m1 headsplit-emu /proc/self/cgroup | sed "s|.*/||")"' \
  > "$T/mpi"
sort "$T/mpi"
[ "$(awk '{ print $3 }' "$T/mpi" | sort -u | wc -l)" -eq 3 ] || fail "ranks share a group"
grep -q "^0 unlimited .*-r0$" "$T/mpi" || fail "rank 0 did not get the controller profile"
grep -q "^1 pi4 .*-r1$" "$T/mpi" || fail "rank 1 group or profile wrong"

# 7. Dilate mode: no quota, the slowdown exported; headsplit stretches its work by it and
# still produces the same tokens.
HEADSPLIT_EMU_MODE=dilate HEADSPLIT_EMU_VERBOSE=1 "$E" pi4 sh -c 'env' > "$T/env" 2> "$T/err"
grep -q "^HEADSPLIT_DEVICE_SLOWDOWN=8$" "$T/env" || fail "dilate mode: HEADSPLIT_DEVICE_SLOWDOWN=8 not exported"
grep -q "compute dilated 8x" "$T/err" || { cat "$T/err"; fail "dilate mode not described"; }
"$CONVERT" --synthetic stories260k --seed 4 --out "$T/m.h5"
run_hs 3 --model "$T/m.h5" --prompt hi --steps 12 --quiet --metrics "$T/plain.json"
HEADSPLIT_EMU_MODE=dilate HEADSPLIT_EMU_CONTROLLER=unlimited timeout -k 5 120 \
  mpirun $MPI_FLAGS -np 3 "$E" pi4 "$HS" --model "$T/m.h5" --prompt hi --steps 12 --quiet \
  --metrics "$T/dil.json" || fail "headsplit under dilate mode failed"
jq -e '.ranks[0].slowdown == 1 and .ranks[1].slowdown == 8 and .ranks[2].slowdown == 8' \
  "$T/dil.json" > /dev/null || fail "per-rank slowdown not 1/8/8: $(jq -c '[.ranks[].slowdown]' "$T/dil.json")"
jq -e '.ranks[1].dilated_s > 0 and .ranks[2].dilated_s > 0 and .ranks[0].dilated_s == 0' "$T/dil.json" \
  > /dev/null || fail "no dilation recorded"
# the board's time for the work is what was slept plus what the host took, at least the sleep;
# the host's excess over the board is a share of it (emulation_host_over: worst rank)
jq -e '[.ranks[1,2] | .board_s >= .dilated_s and .host_over_s >= 0 and .host_over_s <= .board_s]
       | all' "$T/dil.json" > /dev/null || fail "board_s/host_over_s inconsistent: $(jq -c '[.ranks[] | [.board_s, .dilated_s, .host_over_s]]' "$T/dil.json")"
jq -e '.emulation_host_over >= 0 and .emulation_host_over <= 1' "$T/dil.json" > /dev/null ||
  fail "emulation_host_over missing or out of range"
# an emulated link's deliveries noticed late (the host's scheduling), per rank and per token
run_hs 3 --model "$T/m.h5" --prompt hi --steps 8 --quiet --emulate-link "rtt=2ms" --metrics "$T/late.json"
jq -e '([.ranks[].late_s] | all(. >= 0 and . < 1)) and .emulation_late_ms_per_token >= 0' \
  "$T/late.json" > /dev/null || fail "late_s missing: $(jq -c '[.ranks[].late_s], .emulation_late_ms_per_token' "$T/late.json")"
[ "$(jq -c .tokens "$T/dil.json")" = "$(jq -c .tokens "$T/plain.json")" ] ||
  fail "dilation changed the tokens"
# --emulate-slowdown overrides the environment for every rank.
run_hs 3 --model "$T/m.h5" --prompt hi --steps 4 --quiet --emulate-slowdown 2 --metrics "$T/k2.json"
jq -e '[.ranks[].slowdown] == [2, 2, 2]' "$T/k2.json" > /dev/null || fail "--emulate-slowdown 2 not applied"
# A single process (no messages) is dilated too, at the end of each pass of the model: K = 8
# takes several times the undilated decode time (8x its CPU time; 2x leaves room for a busy
# host slowing the undilated run), with the same tokens.
one() { OMPI_MCA_ess_singleton_isolated=1 timeout -k 5 120 "$HS" --model "$T/m.h5" --prompt hi \
          --steps 24 --quiet --threads 1 --emulate-slowdown "$1" --metrics "$T/one$1.json"; }
one 1 && one 8 || fail "a single process with --emulate-slowdown failed"
read -r d1 d8 < <(jq -rn --slurpfile a "$T/one1.json" --slurpfile b "$T/one8.json" \
  '"\($a[0].decode_ms_per_token) \($b[0].decode_ms_per_token)"')
echo "single process decode: $d1 ms/token undilated, $d8 ms/token at K = 8"
awk -v a="$d1" -v b="$d8" 'BEGIN { exit !(a > 0 && b >= 2 * a) }' ||
  fail "a single process at --emulate-slowdown 8 took $d8 ms/token against $d1 undilated"
[ "$(jq -c .tokens "$T/one8.json")" = "$(jq -c .tokens "$T/one1.json")" ] ||
  fail "a single process's dilation changed the tokens"
expect_error "a bad HEADSPLIT_DEVICE_SLOWDOWN" "HEADSPLIT_DEVICE_SLOWDOWN='fast'" \
  env HEADSPLIT_DEVICE_SLOWDOWN=fast timeout -k 5 60 mpirun $MPI_FLAGS -np 2 "$HS" \
  --model "$T/m.h5" --prompt hi --steps 2 --quiet
echo "PASS: emulated devices keep their CPU share and memory limit; dilation stretches work"
