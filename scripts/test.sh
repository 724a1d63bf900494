#!/usr/bin/env bash
# Builds HeadSplit and runs the whole test suite: the Release build, then an ASan+UBSan build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/mpi-env.sh
scripts/build.sh build
(cd build && ctest --output-on-failure -j 2)
if [ "${HEADSPLIT_SKIP_SANITIZE:-0}" != 1 ]; then
  scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DHEADSPLIT_SANITIZE=ON
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0 \
         LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
         UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  (cd build-asan && ctest --output-on-failure -j 2 -LE slow)
fi
