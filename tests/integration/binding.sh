#!/usr/bin/env bash
# Binding: a rank whose CPU affinity has fewer cores than --threads asks for (taskset -c 0,
# or Open MPI's default binding to one core for np <= 2) says so on stderr with the fix
# (mpirun --bind-to none); a default --threads takes what the affinity gives, and a rank the
# launcher bound below its share of the host says so too.  No warning where the threads fit.
. "$(dirname "$0")/common.sh"
"$CONVERT" --synthetic stories260k --seed 3 --out "$T/m.h5" > /dev/null
A=(--model "$T/m.h5" --prompt hello --steps 4 --quiet)
one() { OMPI_MCA_ess_singleton_isolated=1 timeout -k 5 60 "$@"; }
cores=$(nproc --all)

# warns NAME CMD...: CMD succeeds and its stderr holds the binding warning and the fix.
warns() {
  local name=$1
  shift
  "$@" 2> "$T/err" > /dev/null || { cat "$T/err"; fail "$name: exit status"; }
  grep -q "warning: rank 0: .*--threads\|warning: rank 0: the launcher bound" "$T/err" ||
    { cat "$T/err"; fail "$name: no binding warning"; }
}
# quiet NAME CMD...: CMD succeeds without a binding warning.
quiet() {
  local name=$1
  shift
  "$@" 2> "$T/err" > /dev/null || { cat "$T/err"; fail "$name: exit status"; }
  if grep -q "warning: rank" "$T/err"; then cat "$T/err"; fail "$name: a warning where the threads fit"; fi
}

# One process bound to one core by taskset.
warns "taskset -c 0, --threads 2" one taskset -c 0 "$HS" "${A[@]}" --threads 2
grep -q "more threads than the 1 core" "$T/err" || { cat "$T/err"; fail "taskset: the warning does not name the one core"; }
quiet "taskset -c 0, --threads 1" one taskset -c 0 "$HS" "${A[@]}" --threads 1
quiet "taskset -c 0, default threads" one taskset -c 0 "$HS" "${A[@]}" --metrics "$T/ts.json"
grep -q '"threads": 1,' "$T/ts.json" || fail "taskset -c 0: the default --threads is not 1"

if [ "$cores" -lt 2 ]; then
  echo "note: one core here; the launcher's binding below the host is not checked"
  echo "PASS: binding (taskset only)"
  exit 0
fi
quiet "singleton, --threads 2" one "$HS" "${A[@]}" --threads 2

# mpirun's own binding (no --bind-to none): Open MPI binds np <= 2 to one core each, where
# hwloc can bind here.
bound=$(timeout -k 5 60 mpirun -np 1 grep Cpus_allowed_list /proc/self/status | awk '{print $2}')
if [ "$bound" = "$(grep Cpus_allowed_list /proc/self/status | awk '{print $2}')" ]; then
  echo "note: mpirun does not bind here (affinity $bound); its default binding is not checked"
else
  warns "mpirun -np 1, --threads 2" timeout -k 5 60 mpirun -np 1 "$HS" "${A[@]}" --threads 2
  grep -q -- "--bind-to none" "$T/err" || { cat "$T/err"; fail "mpirun -np 1: the warning does not give the fix"; }
  warns "mpirun -np 1, default threads" timeout -k 5 60 mpirun -np 1 "$HS" "${A[@]}" --metrics "$T/mb.json"
  grep -q "the launcher bound this rank to 1 of the host's $cores cores" "$T/err" ||
    { cat "$T/err"; fail "mpirun -np 1: the warning does not say how it is bound"; }
  grep -q '"threads": 1,' "$T/mb.json" || fail "mpirun -np 1 bound: the default --threads is not 1"
fi
quiet "mpirun --bind-to none -np 1, --threads 2" timeout -k 5 60 mpirun --bind-to none -np 1 "$HS" "${A[@]}" --threads 2
quiet "mpirun --bind-to none -np 1, default threads" timeout -k 5 60 mpirun --bind-to none -np 1 "$HS" "${A[@]}" --metrics "$T/mn.json"
want=$((cores > 64 ? 64 : cores))
grep -q "\"threads\": $want," "$T/mn.json" || fail "mpirun --bind-to none: the default --threads is not the host's $want cores"
echo "PASS: binding (warning with the fix where the affinity is short of --threads or of the host's cores; none where they fit)"
