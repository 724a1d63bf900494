# Bad set-ups end every rank promptly with one clear message from rank 0 and a non-zero exit.
. "$(dirname "$0")/common.sh"
"$CONVERT" --synthetic stories260k --seed 1 --out "$T/m.h5"

expect_fail() { # expect_fail PATTERN NP ARGS...: must exit non-zero within the timeout
  local pat=$1 np=$2
  shift 2
  set +e
  timeout -k 5 60 mpirun $MPI_FLAGS -np "$np" "$@" > "$T/out" 2> "$T/err"
  local rc=$?
  set -e
  [ $rc -ne 0 ] || fail "expected failure for: $*"
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "hung: $*"
  grep -q -- "$pat" "$T/err" || { cat "$T/err"; fail "message '$pat' missing for: $*"; }
  local n
  n=$(grep -c "headsplit: error" "$T/err" || true)
  [ "$n" -eq 1 ] || { cat "$T/err"; fail "expected one error message, got $n: $*"; }
}

# Too few ranks for a distributed partition.
expect_fail "need at least 2 ranks" 1 "$HS" --model "$T/m.h5" --partition head
# A plan that does not fit the memory budget.
expect_fail "budget" 3 "$HS" --model "$T/m.h5" --partition head --mem-budget 10K
# The model file missing on one rank only (MPMD launch: rank 2 gets another path).
set +e
timeout -k 5 60 mpirun $MPI_FLAGS -np 2 "$HS" --model "$T/m.h5" --steps 4 : \
  -np 1 "$HS" --model "$T/missing.h5" --steps 4 > "$T/out" 2> "$T/err"
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "missing file on rank 2: rc $rc"
grep -q "rank 2.*missing.h5" "$T/err" || { cat "$T/err"; fail "rank 2 not named"; }
# Bad options and files.
expect_fail "steps" 1 "$HS" --model "$T/m.h5" --steps 0
expect_fail "placement" 3 "$HS" --model "$T/m.h5" --placement best
expect_fail "not found" 3 "$HS" --model "$T/none.h5"
head -c 3000 "$T/m.h5" > "$T/trunc.h5"
expect_fail "trunc" 1 "$HS" --model "$T/trunc.h5"
echo "PASS: failures end cleanly"
