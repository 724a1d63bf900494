#!/usr/bin/env bash
# roofline.sh: builds bench/matvec_bench if needed and runs it (arguments pass through:
# -r repeats, -m read-buffer MiB, -n no huge pages, -q only the quantized kernels: q8_0, q4_0,
# q4_K beside the read roofline).  Uses the CMake build in $BUILD_DIR
# (default build/) when it is configured with the bench target; otherwise compiles the
# benchmark directly with the project's flags into $BUILD_DIR/bench-standalone/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bin=""
if [ -f "$build/CMakeCache.txt" ] &&
   cmake --build "$build" --target matvec_bench >"$build/matvec_bench.log" 2>&1 &&
   [ -x "$build/bench/matvec_bench" ]; then
    bin="$build/bench/matvec_bench"
else
    out="$build/bench-standalone/matvec_bench"
    srcs=("$root/src/util/util.c" "$root"/src/kernels/*.c "$root/bench/matvec_bench.c")
    stale=1
    if [ -x "$out" ]; then
        stale=0
        for f in "${srcs[@]}" "$root"/include/util/*.h "$root"/include/kernels/*.h; do
            [ "$f" -nt "$out" ] && stale=1
        done
    fi
    if [ "$stale" = 1 ]; then
        mkdir -p "$(dirname "$out")"
        echo "roofline.sh: compiling $out" >&2
        # shellcheck disable=SC2046
        ${CC:-cc} -std=c11 -O3 -DNDEBUG -march=native -ffp-contract=off \
            -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Wpedantic -Wshadow \
            -Wstrict-prototypes -Wmissing-prototypes -Werror -I"$root/include/util" -I"$root/include/kernels" \
            "${srcs[@]}" $(pkg-config --cflags --libs openblas) -lm -o "$out"
    fi
    bin="$out"
fi
echo "roofline.sh: running $bin $*" >&2
OPENBLAS_NUM_THREADS=1 exec "$bin" "$@"
