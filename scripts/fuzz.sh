#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) and runs each one for
# a set time on a working copy of its committed seed corpus (fuzz/corpus/<target>).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default 600 s each, all targets
#
# Environment:
#   FUZZ_BUILD   build and work directory (default build-fuzz/ in the source tree)
#   FUZZ_JOBS    targets run at the same time (default 2)
#   FUZZ_NICE    nice level of the fuzzers (default 10)
#   FUZZ_CC      compiler (default: clang, else clang-19 .. clang-14)
#   FUZZ_BUILD_ONLY=1   build, do not run
#   HEADSPLIT_SHARED_MODELS   the reference models (default ../shared/models)
# Prints, per target, executions, exec/s, coverage and findings (crash/leak/timeout files
# under $FUZZ_BUILD/artifacts/<target>/).  Exits 1 if any target found something.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_EACH=${1:-600}
shift || true
BUILD=${FUZZ_BUILD:-$SRC/build-fuzz}
JOBS=${FUZZ_JOBS:-2}
NICE=${FUZZ_NICE:-10}
ALL_TARGETS="fuzz_safetensors fuzz_tokenizer_llama2c fuzz_tokenizer_hf_json fuzz_tokenizer_gpt2
             fuzz_tokenizer_encode fuzz_tokenizer_h5 fuzz_llama2c fuzz_config"
TARGETS=${*:-$ALL_TARGETS}
SHARED=${HEADSPLIT_SHARED_MODELS:-$SRC/../shared/models}

case $SECONDS_EACH in (*[!0-9]*|'') echo "fuzz.sh: SECONDS must be a number" >&2; exit 2;; esac

CC=${FUZZ_CC:-}
if [ -z "$CC" ]; then
  for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
    if command -v "$c" >/dev/null 2>&1; then CC=$c; break; fi
  done
fi
[ -n "$CC" ] || { echo "fuzz.sh: clang not found (apt-get install clang)" >&2; exit 2; }

# ---- build -----------------------------------------------------------------------------------
# Only the modules under test are compiled (not the whole project), so that the fuzz build does
# not depend on MPI, BLAS or the kernels.
LIB_SRC="src/util/util.c src/model/config.c src/model/h5io.c src/model/tokenizer.c
         src/model/tokenizer_gpt2.c src/model/tokenizer_h5.c src/model/tokenizer_load.c
         src/convert/safetensors.c src/convert/llama2c.c src/convert/writer.c"
PKGS="hdf5 jansson libpcre2-8"
PKG_CFLAGS=$(pkg-config --cflags $PKGS)
PKG_LIBS=$(pkg-config --libs $PKGS)
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I$SRC/include $PKG_CFLAGS
        -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes"
mkdir -p "$BUILD/obj" "$BUILD/bin"
echo "fuzz.sh: building with $("$CC" --version | head -1) in $BUILD"
objs=()
for s in $LIB_SRC; do
  o="$BUILD/obj/$(echo "$s" | tr / _).o"
  if [ ! -e "$o" ] || [ "$SRC/$s" -nt "$o" ] || [ -n "$(find "$SRC/include" "$SRC/src" \
        -name '*.h' -newer "$o" -print -quit)" ]; then
    "$CC" $CFLAGS $SAN -fsanitize=fuzzer-no-link -c "$SRC/$s" -o "$o"
  fi
  objs+=("$o")
done
rm -f "$BUILD/libhs_fuzz.a"
ar rcs "$BUILD/libhs_fuzz.a" "${objs[@]}"
for t in $ALL_TARGETS; do
  "$CC" $CFLAGS -Werror $SAN -fsanitize=fuzzer -DHS_SHARED_DIR="\"$SHARED\"" \
    "$SRC/fuzz/$t.c" "$BUILD/libhs_fuzz.a" $PKG_LIBS -lm -o "$BUILD/bin/$t"
done
echo "fuzz.sh: built $(echo $ALL_TARGETS | wc -w) targets in $BUILD/bin"
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

# ---- run ---------------------------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export HEADSPLIT_SHARED_MODELS=$SHARED

run_one() { # run_one TARGET: fuzz for SECONDS_EACH on a working copy of the seeds
  local t=$1 work="$BUILD/corpus/$1" art="$BUILD/artifacts/$1/" dict=()
  mkdir -p "$work" "$art"
  [ -d "$SRC/fuzz/corpus/$t" ] && cp -n "$SRC/fuzz/corpus/$t/"* "$work/" 2>/dev/null || true
  [ -f "$SRC/fuzz/dict/$t.dict" ] && dict=(-dict="$SRC/fuzz/dict/$t.dict")
  nice -n "$NICE" "$BUILD/bin/$t" "$work" "${dict[@]}" -max_total_time="$SECONDS_EACH" \
    -print_final_stats=1 -artifact_prefix="$art" -timeout=20 -rss_limit_mb=2560 \
    -max_len=65536 > "$BUILD/$t.log" 2>&1 || true
}

echo "fuzz.sh: running $(echo $TARGETS | wc -w) targets for ${SECONDS_EACH}s each, $JOBS at a time"
running=0
for t in $TARGETS; do
  [ -x "$BUILD/bin/$t" ] || { echo "fuzz.sh: unknown target $t" >&2; exit 2; }
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

# ---- report ------------------------------------------------------------------------------------
found=0
printf '%-24s %12s %8s %8s %8s %8s  %s\n' target executions exec/s cov ft corpus findings
for t in $TARGETS; do
  log="$BUILD/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
  corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
  arts=$(find "$BUILD/artifacts/$t" -type f 2>/dev/null | wc -l)
  bad=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FUZZ INVARIANT' \
        "$log" || true)
  note="none"
  if [ "$arts" -gt 0 ] || [ "$bad" -gt 0 ]; then
    note="$arts artifact(s), see $log"
    found=1
  fi
  printf '%-24s %12s %8s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
    "${ft:-?}" "${corp:-?}" "$note"
done
exit $found
