/* tokenizer_internal.h: the Tokenizer struct and helpers shared by tokenizer*.c only. */
#ifndef HEADSPLIT_TOKENIZER_INTERNAL_H
#define HEADSPLIT_TOKENIZER_INTERNAL_H

#include "bpe.h"
#include "tokenizer.h"

#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* Upper bounds for untrusted inputs. */
#define TOKENIZER_MAX_VOCAB (1 << 24)
#define TOKENIZER_MAX_MERGES (1 << 24)
#define TOKENIZER_MAX_PIECE_LEN 65536
#define TOKENIZER_MAX_TOTAL_BYTES ((size_t)1 << 31)

/* llama2.c run.c starts its best score at -1e10 and merges only strictly better pairs. */
#define TOKENIZER_SPM_MIN_SCORE (-1e10f)

/* A Hugging Face tokenizer.json pipeline (tokenizer_hf.c). */
typedef struct HfPipeline HfPipeline;

struct Tokenizer {
    TokenizerKind kind;
    int vocab_size;
    int bos, eos, unk; /* -1 when absent */
    int add_bos, add_dummy_prefix, byte_fallback;
    unsigned char *piece_bytes; /* all pieces concatenated, raw bytes */
    uint64_t *offsets;          /* [vocab_size + 1] */
    float *scores;              /* [vocab_size] */
    int n_merges;
    int32_t *merges;            /* [n_merges][2] piece ids, rank = index */
    int max_piece_len;
    int byte_id[256];           /* spm: id of <0xNN>; gpt2: id of the one-byte piece; -1 */
    int16_t *byte_of;           /* [vocab_size] spm: byte of a <0xNN> piece, else -1 */
    /* piece bytes -> lowest id with those bytes (open addressing, -1 empty) */
    int32_t *piece_slots;
    size_t piece_cap;
    /* (left, right) -> rank, result (open addressing, key UINT64_MAX empty) */
    uint64_t *pair_keys;
    int32_t *pair_rank;
    int32_t *pair_result;
    size_t pair_cap;
    pcre2_code *re; /* gpt2 pre-tokenizer */
    int byte_level; /* bpe_hf: pieces are raw bytes and each byte is one initial symbol */
    HfPipeline *hf; /* bpe_hf: the Hugging Face pipeline (tokenizer_hf.c) */
};

/* A zeroed tokenizer of the given kind and size with pieces, offsets and scores allocated
 * (piece_bytes of total bytes), all ids -1. */
Tokenizer *tokenizer_alloc(TokenizerKind kind, int vocab_size, size_t total_bytes);
/* Builds piece lookup, byte ids and max_piece_len from pieces; checks offsets. */
int tokenizer_index_pieces(Tokenizer *t, const char *fname, char *err, size_t errlen);
/* Builds the pair table from t->merges (results looked up by concatenation) and, for gpt2,
 * compiles the pre-tokenizer; derives unk for spm kinds.  Call after index_pieces. */
int tokenizer_index_merges(Tokenizer *t, const char *fname, char *err, size_t errlen);
/* Id of the piece with exactly these bytes, or -1. */
int tokenizer_lookup_piece(const Tokenizer *t, const void *bytes, size_t len);
/* Pointer to and length of piece id's bytes (id must be in range). */
const unsigned char *tokenizer_piece(const Tokenizer *t, int id, size_t *len);

/* The merge rule of a merges list (bpe.h BpePairFn; ctx is the Tokenizer): pieces a, b merge
 * when the pair is listed, the lower rank first. */
int tokenizer_merge_by_rank(const void *ctx, int a, int b, double *prio, int *result);

/* GPT-2 pre-tokenizer regex, compiled. */
int tokenizer_gpt2_compile(Tokenizer *t, char *err, size_t errlen);
/* GPT-2 encode of text (no BOS); appends to ids (capacity >= len + 1). */
int tokenizer_gpt2_encode(const Tokenizer *t, const char *text, size_t len, int *ids,
                          size_t *n_ids, char *err, size_t errlen);
/* Undoes GPT-2's bytes_to_unicode on a UTF-8 string: raw bytes into out (capacity >= len).
 * Returns the byte count, or -1 when a code point is not in the mapping. */
long tokenizer_gpt2_unmap(const char *s, size_t len, unsigned char *out);
/* A SentencePiece piece's bytes: U+2581 (the word marker) becomes a space, the rest is
 * copied; returns the bytes written to out (at most n). */
size_t tokenizer_spm_unspace(const char *s, size_t n, unsigned char *out);

/* ---- bpe_hf (tokenizer_hf.c) ---- */
/* Parses a pipeline JSON text (tokenizer.json's normalizer, pre_tokenizer, post_processor,
 * added_tokens, and model flags; docs/model-format.md).  0, or -1 with err naming fname. */
int tokenizer_hf_parse(HfPipeline **out, const char *text, size_t len, const char *fname,
                       char *err, size_t errlen);
void tokenizer_hf_free(HfPipeline *p);
/* 1 when the pipeline has a ByteLevel pre-tokenizer (pieces are stored as raw bytes). */
int tokenizer_hf_byte_level(const HfPipeline *p);
/* The pipeline text, as stored in /tokenizer/hf_pipeline. */
const char *tokenizer_hf_json(const HfPipeline *p, size_t *len);
/* Checks t->hf against t's vocabulary and sets unk, bos and add_bos; after index_pieces. */
int tokenizer_hf_bind(Tokenizer *t, const char *fname, char *err, size_t errlen);
/* Encodes text; add_special adds the post-processor's tokens.  *ids malloc'ed. */
int tokenizer_hf_encode(const Tokenizer *t, const char *text, size_t len, int add_special,
                        int **ids, size_t *n_ids, char *err, size_t errlen);
/* Content of added token id, or NULL. */
const char *tokenizer_hf_added_content(const HfPipeline *p, int id, size_t *len);
/* 1 when encoding prepends a space-like prefix (Metaspace, Prepend) that decoding strips. */
int tokenizer_hf_prefix_space(const HfPipeline *p);

#endif
