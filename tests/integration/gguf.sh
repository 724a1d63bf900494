# GGUF files written and quantized by llama.cpp (../shared/models/gguf): each converts, and
# headsplit reproduces llama.cpp's greedy tokens at every position with logits within 1e-4
# (F32) or 2e-3 (block types) of llama.cpp's, in one process and with 5 ranks for the layer,
# head and slice partitions.
. "$(dirname "$0")/common.sh"
G="$SHARED/gguf"
skip_without "$G/stories260K-pad256-F32.gguf"

# check NAME NP [ARGS...]: runs model NAME on NP ranks against reference/NAME.
check() {
  local name=$1 np=$2
  shift 2
  local R="$G/reference/$name" tag="$name np=$np $*"
  local n tol=2e-3
  n=$(wc -l < "$R/tokens.txt")
  case $name in *-F32) tol=1e-4 ;; esac
  run_hs "$np" --model "$T/$name.h5" --prompt "$(cat "$R/prompt.txt")" --steps "$n" --quiet \
    --metrics "$T/m.json" --logits-out "$T/l.bin" --rtt-pings 1 "$@" || fail "$tag: run failed"
  jq -r '.tokens[]' "$T/m.json" | head -n "$n" > "$T/tokens.txt"
  diff -q "$T/tokens.txt" "$R/tokens.txt" >/dev/null || {
    diff "$T/tokens.txt" "$R/tokens.txt" | head -4
    fail "$tag: tokens differ from llama.cpp's"
  }
  "$CMP" "$T/l.bin" "$R/logits_f32le.bin" --cols 512 --rows "$n" --tol "$tol" \
    || fail "$tag: logits differ from llama.cpp's by more than $tol"
}

models="stories260K-pad256-F32 rand-llama-d256-F32"
for name in $models; do
  "$CONVERT" --format gguf --file "$G/$name.gguf" --out "$T/$name.h5" --quiet
  check "$name" 1
done
for name in $models; do
  for part in layer head slice; do
    check "$name" 5 --partition $part
  done
done
echo "PASS: GGUF files reproduce llama.cpp's tokens and logits"
