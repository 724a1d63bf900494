# GPT-2 in GGUF (../shared/models/gguf-gpt2: F32, Q8_0, Q4_0 as llama.cpp's converter lays GPT-2
# out, with llama.cpp's tokens and logits): every file converts with ggml's GELU
# (/config gelu_fp16) and reproduces llama.cpp's greedy tokens at every position, in one
# process and on 5 ranks (layer, head, slice --exchange exact: the single process's logits bit
# for bit).  Logits: these references come from llama.cpp built for AVX2, whose F32 dot
# product and softmax sum in 8-lane vectors; the project follows its AVX-512 build (the
# references of ../gguf and ../gguf-arch), whose bits on these files it gives exactly
# (docs/model-format.md).  So against these files: Q4_0 bit for bit (its activations rounded
# to Q8_0 absorb the last-bit differences), Q8_0 bit for bit at positions 0-37 (at 38 one
# activation lands one Q8 step away, 0.12), F32 within 3e-3 (ggml's GELU rounds its input to
# fp16, which turns a last-bit difference into an fp16 step now and then).
. "$(dirname "$0")/common.sh"
G="$SHARED/gguf-gpt2"
skip_without "$G/gpt2-tiny-b-F32.gguf"

# check NAME NP [ARGS...]: the last run's tokens must be llama.cpp's at every position.
tokens() {
  local R="$G/reference/$1"
  jq -r '.tokens[]' "$T/m.json" | head -n "$(wc -l < "$R/tokens.txt")" > "$T/tokens.txt"
  diff -q "$T/tokens.txt" "$R/tokens.txt" > /dev/null || {
    diff "$T/tokens.txt" "$R/tokens.txt" | head -4
    fail "$2: tokens differ from llama.cpp's"
  }
}

for ty in F32 Q8_0 Q4_0; do
  name=gpt2-tiny-b-$ty
  R="$G/reference/$name"
  n=$(wc -l < "$R/tokens.txt")
  "$CONVERT" --format gguf --file "$G/$name.gguf" --out "$T/$name.h5" --quiet
  h5dump -A -g /config "$T/$name.h5" | grep -A4 '"gelu_fp16"' | grep -q '(0): 1' \
    || fail "$name: /config gelu_fp16 is not 1"
  gguf_run "$name" 1 "$T/one.bin"
  tokens "$name" "$name np=1"
  case $ty in
    Q4_0) "$CMP" "$T/one.bin" "$R/logits_f32le.bin" --cols 50257 --rows "$n" --exact \
            || fail "$name: one process is not bit-identical to llama.cpp's logits" ;;
    Q8_0) "$CMP" "$T/one.bin" "$R/logits_f32le.bin" --cols 50257 --rows 38 --exact \
            || fail "$name: positions 0-37 are not bit-identical to llama.cpp's logits" ;;
    F32) "$CMP" "$T/one.bin" "$R/logits_f32le.bin" --cols 50257 --rows "$n" --tol 3e-3 \
           || fail "$name: logits differ from llama.cpp's by more than 3e-3" ;;
  esac
  for args in "--partition layer" "--partition head" "--partition slice --exchange exact"; do
    # shellcheck disable=SC2086
    gguf_run "$name" 5 "$T/l.bin" $args
    tokens "$name" "$name np=5 $args"
    "$CMP" "$T/l.bin" "$T/one.bin" --cols 50257 --exact > /dev/null \
      || fail "$name: $args on 5 ranks is not bit-identical to one process"
  done
  echo "ok: $name: llama.cpp's tokens; 5 ranks (layer, head, slice exact) = one process"
done
echo "PASS: GPT-2 GGUF files reproduce llama.cpp's tokens and logits"
