#!/usr/bin/env bash
# prompt.sh: prompt processing (a 128-token prompt in one pass, THREADS kernel threads) and
# one-thread decode of HeadSplit on TinyLlama-shaped random-weight files, Q8_0, Q4_0 and
# Q4_K_M, beside llama.cpp's llama-bench (pp128, tg32) on the same bytes when a llama.cpp
# build is given; interleaved repeats, medians, the load average printed.
#
#   LLAMA_CPP_BIN=DIR bench/prompt.sh [TYPES...]      (default types: Q8_0 Q4_0 Q4_K_M)
#
# LLAMA_CPP_BIN     llama.cpp's bin directory (llama-bench, llama-quantize; the project does
#                   not vendor it).  The files: bench/random_gguf.py writes an F32 GGUF of
#                   TinyLlama's shape, llama-quantize quantizes it, headsplit-convert --format
#                   gguf reads the quantized file, so both engines multiply the same blocks.
#                   Without it: headsplit-convert --synthetic tinyllama-1.1b --quantize, and
#                   HeadSplit's figures alone.
# LLAMA_CPP_LIB     directories put first on llama-bench's LD_LIBRARY_PATH (e.g. a build of
#                   libggml-cpu.so without AMX, to compare the AVX-512 or AVX2 code paths).
# HEADSPLIT         the headsplit binary timed (default: BUILD_DIR/headsplit, built first).
# HEADSPLIT_BASE    a second headsplit binary (an older revision) timed interleaved, A/B.
# MODELS            where the files are kept (default /tmp/headsplit-prompt; 4.4 GB of F32
#                   GGUF while quantizing, then about 2.5 GB).
# THREADS (2), REPS (3), DECODE (1: also 1-thread decode, 32 tokens; 0: prompt only).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build}
models=${MODELS:-/tmp/headsplit-prompt}
threads=${THREADS:-2}
reps=${REPS:-3}
decode=${DECODE:-1}
lbin=${LLAMA_CPP_BIN:-}
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(Q8_0 Q4_0 Q4_K_M)
cmake --build "$build" --target headsplit headsplit-convert >/dev/null
hsbin=${HEADSPLIT:-$build/headsplit}
mkdir -p "$models"
lenv=()
if [ -n "$lbin" ]; then
  [ -x "$lbin/llama-bench" ] || { echo "prompt.sh: no llama-bench in LLAMA_CPP_BIN=$lbin" >&2; exit 2; }
  lenv=(env "LD_LIBRARY_PATH=${LLAMA_CPP_LIB:+$LLAMA_CPP_LIB:}$lbin:${LD_LIBRARY_PATH:-}")
fi

# The files of one type: tl-T.gguf (with llama.cpp) and tl-T.h5.
make_files() {
  local t=$1 lower
  lower=$(echo "$t" | tr 'A-Z' 'a-z')
  [ -e "$models/tl-$t.h5" ] && { [ -z "$lbin" ] || [ -e "$models/tl-$t.gguf" ]; } && return
  if [ -n "$lbin" ]; then
    if [ ! -e "$models/tl-f32.gguf" ]; then
      echo "prompt.sh: writing $models/tl-f32.gguf (4.4 GB)" >&2
      python3 bench/random_gguf.py "$models/tl-f32.gguf.partial"
      mv "$models/tl-f32.gguf.partial" "$models/tl-f32.gguf"
    fi
    "${lenv[@]}" "$lbin/llama-quantize" "$models/tl-f32.gguf" "$models/tl-$t.gguf" "$t" \
      >"$models/quantize-$t.log" 2>&1
    "$build/headsplit-convert" --format gguf --file "$models/tl-$t.gguf" --out "$models/tl-$t.h5" --quiet
  else
    "$build/headsplit-convert" --synthetic tinyllama-1.1b --seed 1 --quantize "$lower" \
      --out "$models/tl-$t.h5" --quiet
  fi
}
for t in "${types[@]}"; do make_files "$t"; done
rm -f "$models/tl-f32.gguf"

prompt=$(printf 'a%.0s' $(seq 126)) # BOS and 127 tokens of the synthetic vocabulary: 128
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# headsplit BIN MODEL THREADS N: prints prompt tokens/s (N = 1) or decode tokens/s (N > 1).
hs() {
  "$1" --model "$2" --prompt "$prompt" -n "$4" --threads "$3" --batch 128 --ctx-size 256 \
    --quiet --metrics "$out/m.json" >/dev/null 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
  local np
  np=$(jq .n_prompt_tokens "$out/m.json")
  [ "$np" = 128 ] || { echo "prompt.sh: the prompt has $np tokens, not 128" >&2; exit 1; }
  if [ "$4" = 1 ]; then jq .prompt_tokens_per_s "$out/m.json"; else jq .gen_tokens_per_s "$out/m.json"; fi
}
# llama-bench's t/s of one test (-p 128 -n 0 or -p 0 -n 32).
lb() {
  "${lenv[@]}" "$lbin/llama-bench" -m "$1" -t "$2" -r 1 -o json $3 2>/dev/null | jq '.[0].avg_ts'
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "prompt.sh: tree $(git rev-parse --short HEAD)$(git diff --quiet || echo +changes), $("$hsbin" --version 2>&1 | head -1), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $("$hsbin" --version 2>&1 | grep -o 'SIMD path: [^;]*' | head -1); $reps interleaved repeats"
echo "load before: $(uptime)"
printf '%-8s %-22s %12s %12s\n' type engine "pp128 t=$threads" "tg32 t=1"
for t in "${types[@]}"; do
  pp_hs=() pp_base=() pp_l=() tg_hs=() tg_base=() tg_l=()
  for ((i = 0; i < reps; i++)); do
    pp_hs+=("$(hs "$hsbin" "$models/tl-$t.h5" "$threads" 1)")
    [ -z "${HEADSPLIT_BASE:-}" ] || pp_base+=("$(hs "$HEADSPLIT_BASE" "$models/tl-$t.h5" "$threads" 1)")
    [ -z "$lbin" ] || pp_l+=("$(lb "$models/tl-$t.gguf" "$threads" "-p 128 -n 0")")
    if [ "$decode" = 1 ]; then
      tg_hs+=("$(hs "$hsbin" "$models/tl-$t.h5" 1 33)")
      [ -z "${HEADSPLIT_BASE:-}" ] || tg_base+=("$(hs "$HEADSPLIT_BASE" "$models/tl-$t.h5" 1 33)")
      [ -z "$lbin" ] || tg_l+=("$(lb "$models/tl-$t.gguf" 1 "-p 0 -n 32")")
    fi
  done
  row() { printf '%-8s %-22s %12.2f %12s\n' "$t" "$1" "$(median "${@:3}")" "$2"; }
  tgm() { if [ $# -gt 0 ]; then printf '%.2f' "$(median "$@")"; else echo -; fi; }
  row headsplit "$(tgm "${tg_hs[@]}")" "${pp_hs[@]}"
  [ -z "${HEADSPLIT_BASE:-}" ] || row "headsplit (base)" "$(tgm "${tg_base[@]}")" "${pp_base[@]}"
  if [ -n "$lbin" ]; then
    row llama.cpp "$(tgm "${tg_l[@]}")" "${pp_l[@]}"
    awk -v a="$(median "${pp_hs[@]}")" -v b="$(median "${pp_l[@]}")" \
        -v c="$(tgm "${tg_hs[@]}")" -v d="$(tgm "${tg_l[@]}")" -v t="$t" 'BEGIN {
      printf "%-8s %-22s %11.2fx %12s\n", t, "headsplit / llama.cpp", a / b, (d > 0 ? sprintf("%.2fx", c / d) : "-") }'
  fi
  echo "  samples pp: headsplit ${pp_hs[*]}${pp_base:+ | base ${pp_base[*]}}${pp_l:+ | llama.cpp ${pp_l[*]}}"
done
echo "load after: $(uptime)"
