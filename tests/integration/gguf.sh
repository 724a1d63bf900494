# GGUF files written and quantized by llama.cpp (../shared/models/gguf): every one converts;
# headsplit reproduces llama.cpp's greedy tokens at every position and, in one process and
# with 5 ranks for the layer and head partitions and slice --exchange exact, llama.cpp's
# logits bit for bit on every file, F32 included (the fp32 kernels follow ggml_vec_dot_f32's
# order of llama.cpp's AVX-512 build, docs/model-format.md); slice with partial sums (the F32
# default) stays within 1e-4 (F32) of llama.cpp's; and on every file the PIPE plans (layer,
# head) and SLICE with --exchange exact on 5 ranks give the single process's logits bit for
# bit.
. "$(dirname "$0")/common.sh"
G="$SHARED/gguf"
skip_without "$G/stories260K-pad256-F32.gguf"

# Files that match llama.cpp's reference: tokens at every position, logits bit for bit in one
# process, layer, head and slice --exchange exact (F32 and K-quants included).  Not yet:
#  - --partition slice with partial sums (--exchange all|reduce|rsag, asked for: the default
#    on these files is exact, checked below) on the quantized files:
#    the FFN's down projection is summed from per-rank partial dot products, an order
#    llama.cpp never takes, and the last-bit difference now and then moves an activation by
#    one Q8 rounding step (stories260K Q8_0 position 12 by 0.11; rand-llama Q8_0 and Q4_0 from
#    about 13-60), and the FFN cuts follow the speeds probed at start-up, which a loaded host
#    makes differ from run to run (another cut, another grouping of the partial sums: the same
#    plan gives the same bits), so these runs are only held to finishing; the F32 files meet
#    the bound with slice too.  --exchange exact sums nothing across ranks and is held to
#    bits.
exact="stories260K-pad256-F32 rand-llama-d256-F32 stories260K-pad256-Q4_0
       stories260K-pad256-Q8_0 rand-llama-d256-Q8_0 rand-llama-d256-Q4_0
       rand-llama-d256-Q4_K_M rand-llama-d256-Q6_K"


# check NAME NP [ARGS...]: tokens and logits of NAME on NP ranks against reference/NAME.
check() {
  local name=$1 np=$2
  shift 2
  local R="$G/reference/$name" tag="$name np=$np $*" n tol=2e-3
  n=$(wc -l < "$R/tokens.txt")
  case $name in *-F32) tol=1e-4 ;; esac
  gguf_run "$name" "$np" "$T/l.bin" "$@"
  jq -r '.tokens[]' "$T/m.json" | head -n "$n" > "$T/tokens.txt"
  diff -q "$T/tokens.txt" "$R/tokens.txt" >/dev/null || {
    diff "$T/tokens.txt" "$R/tokens.txt" | head -4
    fail "$tag: tokens differ from llama.cpp's"
  }
  "$CMP" "$T/l.bin" "$R/logits_f32le.bin" --cols 512 --rows "$n" --tol "$tol" \
    || fail "$tag: logits differ from llama.cpp's by more than $tol"
  echo "ok: $tag"
}

for name in $exact; do
  "$CONVERT" --format gguf --file "$G/$name.gguf" --out "$T/$name.h5" --quiet
done
for name in $exact; do
  check "$name" 1
  cp "$T/l.bin" "$T/one.bin"
  "$CMP" "$T/l.bin" "$G/reference/$name/logits_f32le.bin" --cols 512 \
    --rows "$(wc -l < "$G/reference/$name/tokens.txt")" --exact \
    || fail "$name: one process is not bit-identical to llama.cpp's logits"
  for part in layer head; do
    check "$name" 5 --partition $part
    "$CMP" "$T/l.bin" "$G/reference/$name/logits_f32le.bin" --cols 512 \
      --rows "$(wc -l < "$G/reference/$name/tokens.txt")" --exact \
      || fail "$name: --partition $part on 5 ranks is not bit-identical to llama.cpp"
  done
  case $name in
    *-F32) check "$name" 5 --partition slice
           check "$name" 5 --partition slice --exchange exact
           "$CMP" "$T/l.bin" "$G/reference/$name/logits_f32le.bin" --cols 512 \
             --rows "$(wc -l < "$G/reference/$name/tokens.txt")" --exact \
             || fail "$name: slice --exchange exact on 5 ranks is not bit-identical to llama.cpp" ;;
    *) gguf_run "$name" 5 "$T/l.bin" --partition slice --exchange all
       echo "ok: $name np=5 --partition slice --exchange all runs"
       # the default exchange (auto) on rounded activations is exact
       check "$name" 5 --partition slice
       [ "$(jq -r .plan.exchange "$T/m.json")" = exact ] ||
         fail "$name: --partition slice chose $(jq -r .plan.exchange "$T/m.json"), not exact" ;;
  esac
  "$CMP" "$T/l.bin" "$T/one.bin" --cols 512 --exact > /dev/null ||
    fail "$name: --partition slice (exact) on 5 ranks is not bit-identical to one process"
done
# A damaged file: one line naming it and the tensor, exit 1, no output left behind.
head -c 1000000 "$G/rand-llama-d256-Q4_0.gguf" > "$T/cut.gguf"
if "$CONVERT" --format gguf --file "$T/cut.gguf" --out "$T/cut.h5" 2> "$T/err.txt"; then
  fail "a truncated GGUF file converted"
fi
[ "$(wc -l < "$T/err.txt")" = 1 ] && grep -q "cut.gguf: tensor .*past the end" "$T/err.txt" \
  || fail "truncated GGUF: unexpected message: $(cat "$T/err.txt")"
[ ! -e "$T/cut.h5" ] && [ ! -e "$T/cut.h5.partial" ] || fail "truncated GGUF: output left behind"
echo "PASS: GGUF files reproduce llama.cpp's tokens and logits"
