/* tokenizer.h: SentencePiece-style BPE (llama2.c and Hugging Face Llama) and GPT-2 byte-level
 * BPE.  Encoders follow the conventions of ../shared/models/ READMEs exactly. */
#ifndef HEADSPLIT_TOKENIZER_H
#define HEADSPLIT_TOKENIZER_H

#include <hdf5.h>
#include <stddef.h>

typedef enum {
    TOKENIZER_SPM = 0,        /* merge the highest-scoring adjacent pair (llama2.c run.c) */
    TOKENIZER_SPM_MERGES = 1, /* merge the lowest-rank pair from a merges list (HF Llama) */
    TOKENIZER_GPT2 = 2,       /* byte-level BPE with GPT-2 pre-tokenization regex */
    TOKENIZER_BPE_HF = 3,     /* BPE with a Hugging Face tokenizer.json pipeline: added tokens,
                                 normalizers, pre-tokenizers, post-processor */
} TokenizerKind;

typedef struct Tokenizer Tokenizer;

/* Loaders return 0, or -1 with err naming the file and what is wrong. */
/* llama2.c tokenizer.bin; vocab_size comes from the model. */
int tokenizer_load_llama2c(Tokenizer **out, const char *path, int vocab_size,
                           char *err, size_t errlen);
/* Hugging Face tokenizer.json with a BPE model: the plain Llama (spm_merges) and GPT-2 (gpt2)
 * shapes keep their kinds; any other supported pipeline (Sequence, Split, Digits, NFC,
 * ignore_merges, ...: Llama 3, Qwen2/3, SmolLM2) loads as bpe_hf. */
int tokenizer_load_hf_json(Tokenizer **out, const char *path, char *err, size_t errlen);
/* GPT-2 vocab.json + merges.txt. */
int tokenizer_load_gpt2_files(Tokenizer **out, const char *vocab_json, const char *merges_txt,
                              char *err, size_t errlen);
/* The same loaders on bytes already in memory (data need not be NUL-terminated); name is the
 * file name used in messages.  For fuzzing and for callers that hold the file. */
int tokenizer_load_llama2c_mem(Tokenizer **out, const void *data, size_t len, const char *name,
                               int vocab_size, char *err, size_t errlen);
int tokenizer_load_hf_json_mem(Tokenizer **out, const char *data, size_t len, const char *name,
                               char *err, size_t errlen);
int tokenizer_load_gpt2_mem(Tokenizer **out, const char *vocab_json, size_t vocab_len,
                            const char *vocab_name, const char *merges_txt, size_t merges_len,
                            const char *merges_name, char *err, size_t errlen);
/* The tokenizer.json "pre_tokenizer" (JSON text) of the family that llama.cpp's GGUF key
 * tokenizer.ggml.pre names ("llama-bpe"/"llama3": Llama 3, "qwen2", "smollm", "gpt-2"), and in
 * *ignore_merges (may be NULL) the model's ignore_merges; NULL when the name is unknown.  For
 * importers that build a tokenizer.json from another format (tokenizer_load_hf_json_mem). */
const char *tokenizer_hf_gguf_pre_tokenizer(const char *pre, int *ignore_merges);
/* A tokenizer for synthetic models: <unk> <s> </s>, 256 byte pieces, then filler pieces that
 * never match text, up to vocab_size (>= 259). */
Tokenizer *tokenizer_build_synthetic(int vocab_size);

/* HDF5 group /tokenizer of a model file (docs/model-format.md). */
int tokenizer_h5_write(const Tokenizer *t, hid_t file, char *err, size_t errlen);
int tokenizer_h5_read(Tokenizer **out, hid_t file, const char *fname, char *err, size_t errlen);

void tokenizer_free(Tokenizer *t);

TokenizerKind tokenizer_kind(const Tokenizer *t);
int tokenizer_vocab_size(const Tokenizer *t);
int tokenizer_bos(const Tokenizer *t); /* -1 if none */
int tokenizer_eos(const Tokenizer *t); /* -1 if none */

/* Encodes len bytes of text.  BOS is prepended when the tokenizer's add_bos is set (spm kinds),
 * as the engine feeds it.  *ids is malloc'ed (caller frees).  Invalid UTF-8 is encoded with
 * byte fallback (spm) or as bytes (gpt2, bpe_hf byte-level); never crashes.  For spm and gpt2,
 * special-token text such as "<s>" or "<|endoftext|>" is never matched: it encodes as ordinary
 * characters (as llama2.c and OpenAI's GPT-2 encoder do).  bpe_hf matches its added tokens as
 * Hugging Face does and adds the post-processor's tokens.  Returns 0 or -1 with err. */
int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int **ids, size_t *n_ids,
                     char *err, size_t errlen);

/* tokenizer_encode with the special tokens chosen: add_special 0 leaves out BOS (spm kinds)
 * or the post-processor's tokens (bpe_hf; Hugging Face add_special_tokens=False). */
int tokenizer_encode_opts(const Tokenizer *t, const char *text, size_t len, int add_special,
                          int **ids, size_t *n_ids, char *err, size_t errlen);
/* As tokenizer_encode, but text that spells a special or control token of the vocabulary
 * ("<s>", "</s>", "<unk>", "<|...|>" pieces, "<start_of_turn>"/"<end_of_turn>") becomes
 * that token, longest match first; the text between is encoded as by tokenizer_encode
 * (BOS once, at the start).  src/tokenizer/tokenizer_special.c. */
int tokenizer_encode_special(const Tokenizer *t, const char *text, size_t len, int **ids,
                             size_t *n_ids, char *err, size_t errlen);
/* A prompt as the engine encodes it (generate_run, --chat, --serve) and headsplit-tokenize
 * prints it: special 1, tokenizer_encode_special (special-token text becomes the token;
 * headsplit's default, --no-special turns it off), else tokenizer_encode; add_special 0
 * leaves out BOS and the post-processor's tokens (headsplit-tokenize --no-bos). */
int tokenizer_encode_prompt(const Tokenizer *t, const char *text, size_t len, int special,
                            int add_special, int **ids, size_t *n_ids, char *err, size_t errlen);
/* 1 when piece id counts as special for tokenizer_encode_special. */
int tokenizer_is_special(const Tokenizer *t, int id);

/* Raw bytes of one token as it continues a sequence whose previous token is prev (-1 at the
 * start): strips the dummy-prefix space after BOS, maps <0xNN> to its byte, BOS/EOS to "".
 * Returns the byte count written into out (capacity cap, truncated if smaller). */
size_t tokenizer_decode_token(const Tokenizer *t, int prev, int id, char *out, size_t cap);
/* Decodes a whole sequence to a malloc'ed NUL-terminated string (BOS/EOS skipped). */
char *tokenizer_decode(const Tokenizer *t, const int *ids, size_t n_ids);

#endif
