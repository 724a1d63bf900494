# Hugging Face directories of the llama family made from the GGUF files of
# ../shared/models/gguf-arch by the test helper hs-gguf-to-hf (config.json + float32
# safetensors in each family's layout: Qwen2ForCausalLM with q/k/v biases, Phi3ForCausalLM
# with fused qkv_proj and gate_up_proj, LlamaForCausalLM with rope_scaling llama3 and q/k in
# Hugging Face's rotate-half order): headsplit-convert --format hf must give the GGUF
# conversion's weights.  Datasets are compared with h5diff (exact); llama's wq/wk are in
# another row order there (rope_style half against interleaved), so the two llama files are
# held to the same tokens and logits within 1e-5 instead.  Then MistralForCausalLM with a
# sliding window: the first W positions equal the unwindowed model's logits bit for bit, the
# later ones do not, and 5 ranks (head, slice) give the single process's tokens.
# HEADSPLIT_TEST_QUICK=1 (the sanitizer build): the windowed model on 3 ranks, head and slice
# partitions (the layer partition runs the one-process attention code on a worker).
. "$(dirname "$0")/common.sh"
G="$SHARED/gguf-arch"
TOK="$SHARED/stories260K/tok512.bin"
skip_without "$G/qwen2-d128-F32.gguf"
skip_without "$TOK"
TOHF="$BUILD/hs-gguf-to-hf"

# attr FILE NAME: the value of /config attribute NAME.
attr() {
  h5dump -a "/config/$2" "$1" | sed -n 's/^ *(0): *//p'
}

# same DATASET A B: h5diff must find no difference (exit 0).
same() {
  h5diff "$2" "$3" "$1" > "$T/diff.txt" 2>&1 || {
    head -5 "$T/diff.txt"
    fail "$1 differs between the GGUF and the Hugging Face conversion"
  }
}

run() { # FILE NP OUT STEPS [ARGS...]
  local f=$1 np=$2 out=$3 steps=$4
  shift 4
  run_hs "$np" --model "$f" --prompt "Once upon a time" --steps "$steps" --quiet \
    --metrics "$T/m.json" --logits-out "$out" --rtt-pings 1 "$@" > "$T/run.log" 2>&1 || {
    cat "$T/run.log"
    fail "$f np=$np $*: run failed"
  }
  jq -r '.tokens[]' "$T/m.json" > "$out.tokens"
}

for fam in qwen2 phi3 llama3; do
  gg="$T/$fam-gguf.h5" hf="$T/$fam-hf.h5" dir="$T/$fam-hf"
  mkdir -p "$dir"
  extra=()
  [ $fam = llama3 ] && extra=(--llama3-rope 32,1,4,64) # the fixture's README
  "$CONVERT" --format gguf --file "$G/$fam-d128-F32.gguf" --out "$gg" --quiet
  "$TOHF" "$G/$fam-d128-F32.gguf" "$dir" "${extra[@]}"
  "$CONVERT" --format hf --dir "$dir" --tokenizer "$TOK" --out "$hf" --quiet
  for a in dim n_layers n_heads n_kv_heads head_dim ffn_dim vocab_size context_length \
           norm_eps rope_theta tied_embeddings bos_id eos_id; do
    [ "$(attr "$gg" $a)" = "$(attr "$hf" $a)" ] \
      || fail "$fam: /config $a: $(attr "$gg" $a) from GGUF, $(attr "$hf" $a) from HF"
  done
  for a in qkv_bias sliding_window q_prescale; do
    [ "$(attr "$gg" $a 2>/dev/null)" = "$(attr "$hf" $a 2>/dev/null)" ] \
      || fail "$fam: /config $a differs between the GGUF and the HF conversion"
  done
  [ $fam != phi3 ] || [ "$(attr "$hf" q_prescale)" = 1 ] \
    || fail "phi3 from HF: q_prescale is not 1 (llama.cpp's phi3 graph)"
  same /embed "$gg" "$hf"
  same /final_norm "$gg" "$hf"
  [ $fam = qwen2 ] || same /lm_head "$gg" "$hf"
  if [ $fam = llama3 ]; then
    same /config/rope_freq_factors "$gg" "$hf"
    for l in 0 1 2 3; do
      for d in wv wo attn_norm ffn_norm w_gate w_up w_down; do
        same /layers/$l/$d "$gg" "$hf"
      done
    done
    [ "$(attr "$hf" rope_style)" = '"half"' ] || fail "llama3 from HF: rope_style not half"
    run "$gg" 1 "$T/a.bin" 32
    run "$hf" 1 "$T/b.bin" 32
    cmp -s "$T/a.bin.tokens" "$T/b.bin.tokens" || fail "llama3: HF and GGUF tokens differ"
    "$CMP" "$T/a.bin" "$T/b.bin" --cols 512 --tol 1e-5 \
      || fail "llama3: HF and GGUF logits differ by more than 1e-5"
    # and the Hugging Face file against llama.cpp's own reference for the GGUF file
    R="$G/reference/llama3-d128-F32"
    run_hs 1 --model "$hf" --prompt "$(cat "$R/prompt.txt")" --steps "$(wc -l < "$R/tokens.txt")" \
      --quiet --metrics "$T/m.json" --logits-out "$T/c.bin" --rtt-pings 1 > "$T/run.log" 2>&1 \
      || { cat "$T/run.log"; fail "llama3 from HF: run failed"; }
    jq -r '.tokens[]' "$T/m.json" | head -n "$(wc -l < "$R/tokens.txt")" | cmp -s - "$R/tokens.txt" \
      || fail "llama3 from HF: tokens differ from llama.cpp's"
    "$CMP" "$T/c.bin" "$R/logits_f32le.bin" --cols 512 --rows "$(wc -l < "$R/tokens.txt")" \
      --tol 1e-4 || fail "llama3 from HF: logits differ from llama.cpp's by more than 1e-4"
  else
    same /layers "$gg" "$hf"
    [ "$(attr "$gg" rope_style)" = '"half"' ] || fail "$fam: rope_style not half"
  fi
  echo "ok: $fam: the Hugging Face directory converts to the GGUF file's weights"
done

# Mistral: the llama3 tensors as MistralForCausalLM with a window of 8 and without one.
for w in 8 0; do
  mkdir -p "$T/mistral$w"
  "$TOHF" "$G/llama3-d128-F32.gguf" "$T/mistral$w" --mistral $w
  "$CONVERT" --format hf --dir "$T/mistral$w" --tokenizer "$TOK" --out "$T/mistral$w.h5" --quiet
done
[ "$(attr "$T/mistral8.h5" sliding_window)" = 8 ] || fail "mistral: sliding_window not 8"
run "$T/mistral8.h5" 1 "$T/w8.bin" 24
run "$T/mistral0.h5" 1 "$T/w0.bin" 24
head -c $((8 * 512 * 4)) "$T/w8.bin" > "$T/w8a.bin"
head -c $((8 * 512 * 4)) "$T/w0.bin" > "$T/w0a.bin"
cmp -s "$T/w8a.bin" "$T/w0a.bin" || fail "mistral: the first 8 positions depend on the window"
cmp -s "$T/w8.bin" "$T/w0.bin" && fail "mistral: a window of 8 changed nothing after 8 positions"
NPM=$(quick 3 5)
for part in $(quick "head slice" "layer head slice"); do
  run "$T/mistral8.h5" $NPM "$T/w5.bin" 24 --partition $part
  cmp -s "$T/w5.bin.tokens" "$T/w8.bin.tokens" || fail "mistral np=$NPM $part: tokens differ"
  "$CMP" "$T/w5.bin" "$T/w8.bin" --cols 512 --tol 1e-5 || fail "mistral np=$NPM $part: logits"
done
echo "ok: MistralForCausalLM's sliding window, 1 and $NPM ranks"
echo "PASS: Hugging Face directories of qwen2, phi3, llama3 and mistral convert as their GGUF"
