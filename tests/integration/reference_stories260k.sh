# stories260K converted from llama2.c format and from the Hugging Face copy: greedy tokens,
# text and logits must match llama2.c run.c's reference outputs.
. "$(dirname "$0")/common.sh"
skip_without "$SHARED/stories260K/stories260K.bin"
REF="$SHARED/stories260K/reference/once_upon_a_time_n64"

"$CONVERT" --format llama2c --checkpoint "$SHARED/stories260K/stories260K.bin" \
  --tokenizer "$SHARED/stories260K/tok512.bin" --out "$T/s.h5"
run_hs 1 --model "$T/s.h5" --prompt "Once upon a time" --steps 64 --quiet \
  --metrics "$T/m.json" --logits-out "$T/l.bin"
jq -r '.tokens[]' "$T/m.json" > "$T/tokens.txt"
diff "$T/tokens.txt" "$REF/tokens.txt" || fail "llama2c: token ids differ from run.c"
jq -r '.text' "$T/m.json" > "$T/out.txt"
diff "$T/out.txt" "$REF/output.txt" || fail "llama2c: text differs from run.c"
"$CMP" "$T/l.bin" "$REF/logits_f32le.bin" --cols 512 --rows 8 --tol 1e-4 \
  || fail "llama2c: logits differ from run.c by more than 1e-4"
[ "$(jq -r .stopped_by "$T/m.json")" = steps ] || fail "llama2c: wrong stop reason"

if [ -e "$SHARED/stories260K-hf/model.safetensors" ]; then
  HREF="$SHARED/stories260K-hf/reference/once_upon_a_time_n64"
  "$CONVERT" --format hf --dir "$SHARED/stories260K-hf" --out "$T/h.h5"
  run_hs 1 --model "$T/h.h5" --prompt "Once upon a time" --steps 64 --quiet \
    --metrics "$T/mh.json" --logits-out "$T/lh.bin"
  jq -r '.tokens[]' "$T/mh.json" > "$T/tokens_h.txt"
  diff "$T/tokens_h.txt" "$HREF/tokens.txt" || fail "hf: token ids differ from run.c"
  "$CMP" "$T/lh.bin" "$HREF/logits_all_positions_f32le.bin" --cols 512 --rows 64 --tol 1e-4 \
    || fail "hf: logits differ from run.c by more than 1e-4"
  jq -r '.text' "$T/mh.json" > "$T/out_h.txt"
  diff "$T/out_h.txt" "$HREF/output.txt" || fail "hf: text differs from run.c"
fi
echo "PASS: stories260K matches llama2.c run.c"
