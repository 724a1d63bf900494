# gpt2-tiny-random: prompt ids, greedy continuation and logits must match llm.c's reference.
. "$(dirname "$0")/common.sh"
skip_without "$SHARED/gpt2-tiny-random/model.safetensors"
G="$SHARED/gpt2-tiny-random"
"$CONVERT" --format hf --dir "$G" --out "$T/g.h5"

REF="$G/reference/hello_greedy32"
run_hs 1 --model "$T/g.h5" --prompt "$(cat "$REF/prompt.txt")" --steps 36 --quiet \
  --metrics "$T/m.json" --logits-out "$T/l.bin"
jq -r '.tokens[]' "$T/m.json" > "$T/tokens.txt"
diff "$T/tokens.txt" "$REF/tokens.txt" || fail "gpt2: token ids differ from llm.c"
"$CMP" "$T/l.bin" "$REF/logits_f32le.bin" --cols 50257 --rows 36 --tol 1e-4 \
  || fail "gpt2: logits differ from llm.c by more than 1e-4"
printf '%s' "$(jq -r '.text' "$T/m.json")" > "$T/out.txt"
cmp "$T/out.txt" "$REF/output.txt" || fail "gpt2: decoded text differs"

# The unicode prompt: every position's logits (positions 0..30, all forced but the last).
U="$G/reference/unicode_mix_prompt"
n=$(wc -l < "$U/prompt_tokens.txt")
"$BUILD/headsplit-tokenize" --model "$T/g.h5" - < "$U/prompt.txt" | jq -r '.[]' > "$T/ptok.txt"
diff "$T/ptok.txt" "$U/prompt_tokens.txt" || fail "gpt2: unicode prompt ids differ"
run_hs 1 --model "$T/g.h5" --prompt "$(cat "$U/prompt.txt")" --steps "$n" --quiet \
  --logits-out "$T/lu.bin" --metrics "$T/mu.json"
"$CMP" "$T/lu.bin" "$U/logits_f32le.bin" --cols 50257 --rows "$n" --tol 1e-4 \
  || fail "gpt2: unicode prompt logits differ from llm.c by more than 1e-4"
echo "PASS: gpt2-tiny-random matches llm.c"
