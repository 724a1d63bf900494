#!/usr/bin/env bash
# Builds HeadSplit and runs the whole test suite: the Release build, then an ASan+UBSan build.
# The Release suite runs every test in full.  The sanitizer build leaves out the tests
# labelled slow (long matrices whose code the other tests run) and runs the integration
# scripts with HEADSPLIT_TEST_QUICK=1: one configuration per code path instead of every
# combination (each script says at its top what it leaves out; tests/integration/common.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/mpi-env.sh
scripts/build.sh build
(cd build && HEADSPLIT_TEST_QUICK=0 ctest --output-on-failure -j 2)
if [ "${HEADSPLIT_SKIP_SANITIZE:-0}" != 1 ]; then
  scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DHEADSPLIT_SANITIZE=ON
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0 \
         LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
         UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  (cd build-asan && HEADSPLIT_TEST_QUICK=1 ctest --output-on-failure -j 2 -LE slow)
fi
