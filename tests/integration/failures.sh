# Bad set-ups end every rank promptly with one clear message from rank 0 and a non-zero exit.
. "$(dirname "$0")/common.sh"
"$CONVERT" --synthetic stories260k --seed 1 --out "$T/m.h5"

expect_fail() { # expect_fail PATTERN NP ARGS...: must fail promptly with one error message
  local pat=$1 np=$2
  shift 2
  expect_error "$*" "$pat" timeout -k 5 60 mpirun $MPI_FLAGS -np "$np" "$@"
  local n
  n=$(grep -c "headsplit: error" "$T/err" || true)
  [ "$n" -eq 1 ] || { cat "$T/err"; fail "expected one error message, got $n: $*"; }
}

# Too few ranks for a distributed partition.
expect_fail "need at least 2 ranks" 1 "$HS" --model "$T/m.h5" --partition head
# A plan that does not fit the memory budget.
expect_fail "budget" 3 "$HS" --model "$T/m.h5" --partition head --mem-budget 10K
# The model file missing on one rank only (MPMD launch: rank 2 gets another path).
expect_error "missing file on rank 2" "rank 2.*missing.h5" \
  timeout -k 5 60 mpirun $MPI_FLAGS -np 2 "$HS" --model "$T/m.h5" --steps 4 : \
  -np 1 "$HS" --model "$T/missing.h5" --steps 4
# Bad options and files.
expect_fail "steps" 1 "$HS" --model "$T/m.h5" --steps 0
expect_fail "placement" 3 "$HS" --model "$T/m.h5" --placement best
expect_fail "not found" 3 "$HS" --model "$T/none.h5"
head -c 3000 "$T/m.h5" > "$T/trunc.h5"
expect_fail "trunc" 1 "$HS" --model "$T/trunc.h5"
echo "PASS: failures end cleanly"
