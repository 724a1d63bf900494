#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) and runs each one for
# a set time on a working copy of its committed seed corpus (fuzz/corpus/<target>).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default 600 s each, all targets
#   scripts/fuzz.sh 0                         build only, then report the last run's logs
#
# Environment:
#   FUZZ_BUILD   build and work directory (default build-fuzz/ in the source tree)
#   FUZZ_JOBS    targets run at the same time (default 2)
#   FUZZ_NICE    nice level of the fuzzers (default 10)
#   FUZZ_CC      compiler (default: clang, else clang-19 .. clang-14)
#   FUZZ_TIMEOUT seconds one input may take before libFuzzer calls it a hang (default 60)
#   FUZZ_COVERAGE=1   afterwards, line coverage of the code under test over each working corpus
#                     (clang source-based coverage, llvm-cov)
#   HEADSPLIT_SHARED_MODELS   the reference models (default ../shared/models)
# Prints, per target, executions, exec/s, libFuzzer's edge coverage (cov) and features (ft), the
# corpus size and findings: crash-, leak-, timeout- and oom- files under
# $FUZZ_BUILD/artifacts/<target>/ (slow-unit- files are only noted).  Exits 1 if any target found
# something.  Reproduce a finding with: $FUZZ_BUILD/bin/<target> <file>.
set -euo pipefail

ALL_TARGETS="fuzz_safetensors fuzz_tokenizer_llama2c fuzz_tokenizer_hf_json fuzz_tokenizer_gpt2
             fuzz_tokenizer_encode fuzz_tokenizer_h5 fuzz_llama2c fuzz_config fuzz_gguf"
# Only the modules under test are compiled (not the whole project), so that the fuzz build does
# not depend on MPI or BLAS: the kernels (the converter's writer quantizes) without OpenBLAS.
LIB_SRC="src/util/util.c src/model/config.c src/format/h5io.c src/tokenizer/bpe.c src/tokenizer/tokenizer.c
         src/tokenizer/tokenizer_gpt2.c src/tokenizer/tokenizer_h5.c src/tokenizer/tokenizer_load.c
         src/format/gguf.c src/tokenizer/tokenizer_gguf.c
         src/tokenizer/tokenizer_hf.c src/tokenizer/tokenizer_hf_encode.c src/tokenizer/tokenizer_nfc.c
         src/tokenizer/tokenizer_nfc_data.c
         src/convert/safetensors.c src/convert/llama2c.c src/convert/writer.c
         $(cd "$(dirname "$0")/.." && echo src/kernels/*.c)"
PKGS="hdf5 jansson libpcre2-8"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

find_cc() {
  CC=${FUZZ_CC:-}
  if [ -z "$CC" ]; then
    local c
    for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
      if command -v "$c" >/dev/null 2>&1; then CC=$c; break; fi
    done
  fi
  [ -n "$CC" ] || { echo "fuzz.sh: clang not found (apt-get install clang)" >&2; exit 2; }
}

build() {
  local s o t objs=()
  mkdir -p "$BUILD/obj" "$BUILD/bin"
  echo "fuzz.sh: building with $("$CC" --version | head -1) in $BUILD"
  for s in $LIB_SRC; do
    o="$BUILD/obj/$(echo "$s" | tr / _).o"
    if [ ! -e "$o" ] || [ "$SRC/$s" -nt "$o" ] || [ -n "$(find "$SRC/include" "$SRC/src" \
          -name '*.h' -newer "$o" -print -quit)" ]; then
      # shellcheck disable=SC2086
      "$CC" $CFLAGS $SAN -fsanitize=fuzzer-no-link -c "$SRC/$s" -o "$o"
    fi
    objs+=("$o")
  done
  rm -f "$BUILD/libhs_fuzz.a"
  ar rcs "$BUILD/libhs_fuzz.a" "${objs[@]}"
  for t in $ALL_TARGETS; do
    # shellcheck disable=SC2086
    "$CC" $CFLAGS -Werror $SAN -fsanitize=fuzzer -DHS_SHARED_DIR="\"$SHARED\"" \
      "$SRC/fuzz/$t.c" "$BUILD/libhs_fuzz.a" $PKG_LIBS -lm -o "$BUILD/bin/$t"
  done
  echo "fuzz.sh: built $(echo $ALL_TARGETS | wc -w) targets in $BUILD/bin"
}

run_one() { # run_one TARGET: fuzz for SECONDS_EACH on a working copy of the seeds
  local t=$1 work="$BUILD/corpus/$1" art="$BUILD/artifacts/$1/" dict=()
  mkdir -p "$work" "$art"
  if [ -d "$SRC/fuzz/corpus/$t" ]; then cp -n "$SRC/fuzz/corpus/$t/"* "$work/" 2>/dev/null || true; fi
  [ -f "$SRC/fuzz/dict/$t.dict" ] && dict=(-dict="$SRC/fuzz/dict/$t.dict")
  nice -n "$NICE" "$BUILD/bin/$t" "$work" "${dict[@]}" -max_total_time="$SECONDS_EACH" \
    -print_final_stats=1 -artifact_prefix="$art" -timeout="${FUZZ_TIMEOUT:-60}" \
    -rss_limit_mb=2560 -max_len=65536 > "$BUILD/$t.log" 2>&1 || true
}

run_all() {
  local t running=0
  echo "fuzz.sh: running $(echo $TARGETS | wc -w) targets for ${SECONDS_EACH}s each, $JOBS at a time"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export HEADSPLIT_SHARED_MODELS=$SHARED
  for t in $TARGETS; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then wait -n || true; running=$((running - 1)); fi
  done
  wait
}

# Files whose line coverage is reported for each target.
cov_files() {
  case $1 in
    fuzz_safetensors) echo src/convert/safetensors.c ;;
    fuzz_tokenizer_llama2c|fuzz_tokenizer_hf_json|fuzz_tokenizer_gpt2)
      echo src/tokenizer/tokenizer_load.c src/tokenizer/tokenizer.c src/tokenizer/tokenizer_gpt2.c ;;
    fuzz_tokenizer_encode) echo src/tokenizer/tokenizer.c src/tokenizer/tokenizer_gpt2.c ;;
    fuzz_tokenizer_h5) echo src/tokenizer/tokenizer_h5.c src/tokenizer/tokenizer.c ;;
    fuzz_llama2c) echo src/convert/llama2c.c src/convert/writer.c ;;
    fuzz_config) echo src/model/config.c src/format/h5io.c ;;
    fuzz_gguf) echo src/format/gguf.c src/tokenizer/tokenizer_gguf.c ;;
  esac
}

coverage() {
  local t f s srcs=() profdata llvmcov
  profdata=$(command -v llvm-profdata || command -v "llvm-profdata-${CC#clang-}" || true)
  llvmcov=$(command -v llvm-cov || command -v "llvm-cov-${CC#clang-}" || true)
  [ -n "$profdata" ] && [ -n "$llvmcov" ] || { echo "fuzz.sh: llvm-cov not found" >&2; exit 2; }
  for s in $LIB_SRC; do srcs+=("$SRC/$s"); done
  mkdir -p "$BUILD/cov"
  echo "fuzz.sh: line coverage over the working corpora ($BUILD/corpus/<target>)"
  printf '%-24s %-30s %7s %9s\n' target file lines covered
  for t in $TARGETS; do
    # shellcheck disable=SC2086
    "$CC" $CFLAGS -fprofile-instr-generate -fcoverage-mapping -fsanitize=fuzzer \
      -DHS_SHARED_DIR="\"$SHARED\"" "$SRC/fuzz/$t.c" "${srcs[@]}" $PKG_LIBS -lm \
      -o "$BUILD/cov/$t"
    rm -f "$BUILD/cov/$t".*.profraw
    HEADSPLIT_SHARED_MODELS=$SHARED LLVM_PROFILE_FILE="$BUILD/cov/$t.%p.profraw" \
      "$BUILD/cov/$t" -runs=0 "$BUILD/corpus/$t" > "$BUILD/cov/$t.log" 2>&1 || true
    "$profdata" merge -sparse "$BUILD/cov/$t".*.profraw -o "$BUILD/cov/$t.profdata"
    for f in $(cov_files "$t"); do
      "$llvmcov" report "$BUILD/cov/$t" -instr-profile="$BUILD/cov/$t.profdata" "$SRC/$f" |
        awk -v t="$t" -v f="$f" '$1 ~ /\.c$/ { printf "%-24s %-30s %7s %9s\n", t, f, $8, $10 }'
    done
  done
}

report() { # one line per target from its last log; sets found=1 on findings
  local t log execs rate last cov ft corp arts slow bad note
  printf '%-24s %12s %8s %6s %6s %7s  %s\n' target executions exec/s cov ft corpus findings
  for t in $TARGETS; do
    log="$BUILD/$t.log"
    [ -f "$log" ] || { printf '%-24s (no log)\n' "$t"; continue; }
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
    arts=$(find "$BUILD/artifacts/$t" -type f ! -name 'slow-unit-*' 2>/dev/null | wc -l)
    slow=$(find "$BUILD/artifacts/$t" -type f -name 'slow-unit-*' 2>/dev/null | wc -l)
    bad=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FUZZ INVARIANT' \
          "$log" || true)
    note="none"
    [ "$slow" -gt 0 ] && note="none ($slow slow unit(s) noted)"
    if [ "$arts" -gt 0 ] || [ "$bad" -gt 0 ]; then
      note="$arts artifact(s), see $log"
      found=1
    fi
    printf '%-24s %12s %8s %6s %6s %7s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
      "${ft:-?}" "${corp:-?}" "$note"
  done
}

main() {
  SRC=$(cd "$(dirname "$0")/.." && pwd)
  SECONDS_EACH=${1:-600}
  shift || true
  case $SECONDS_EACH in (*[!0-9]*|'') echo "fuzz.sh: SECONDS must be a number" >&2; exit 2;; esac
  BUILD=${FUZZ_BUILD:-$SRC/build-fuzz}
  JOBS=${FUZZ_JOBS:-2}
  NICE=${FUZZ_NICE:-10}
  TARGETS=${*:-$ALL_TARGETS}
  SHARED=${HEADSPLIT_SHARED_MODELS:-$SRC/../shared/models}
  local t
  for t in $TARGETS; do
    case " $(echo $ALL_TARGETS) " in (*" $t "*) ;; (*) echo "fuzz.sh: unknown target $t" >&2; exit 2;; esac
  done
  find_cc
  # shellcheck disable=SC2086
  PKG_CFLAGS=$(pkg-config --cflags $PKGS)
  # shellcheck disable=SC2086
  PKG_LIBS=$(pkg-config --libs $PKGS)
  CFLAGS="-std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -DHEADSPLIT_NO_BLAS $(for l in util proto kernels format tokenizer model generate plan convert; do printf -- "-I%s " "$SRC/include/$l"; done) $PKG_CFLAGS
          -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes"
  build
  [ "$SECONDS_EACH" -gt 0 ] && run_all
  found=0
  report
  [ "${FUZZ_COVERAGE:-0}" = 1 ] && coverage
  exit $found
}

main "$@"
