/* tokenizer_hf.h: the parsed Hugging Face pipeline of a bpe_hf tokenizer, shared by
 * tokenizer_hf.c (parsing, checking) and tokenizer_hf_encode.c (encoding); internal to
 * src/model. */
#ifndef HEADSPLIT_TOKENIZER_HF_H
#define HEADSPLIT_TOKENIZER_HF_H

#include "tokenizer_internal.h"

/* ---- the parsed pipeline ---- */

typedef enum {
    HF_NORM_NFC = 0,
    HF_NORM_NFD = 1,
    HF_NORM_PREPEND = 2,
    HF_NORM_REPLACE = 3, /* a (string or regex) -> b */
    HF_NORM_STRIP = 4,   /* left, right */
} HfNormType;

typedef struct {
    HfNormType type;
    char *a, *b;     /* Prepend: a; Replace: content b; */
    pcre2_code *re;  /* Replace pattern (a String pattern compiled as a literal) */
    int left, right; /* Strip */
} HfNorm;

typedef enum {
    HF_PRE_SPLIT = 0,     /* regex or string, behavior, invert; also Digits */
    HF_PRE_BYTELEVEL = 1, /* add_prefix_space, use_regex */
    HF_PRE_METASPACE = 2, /* replacement, prepend scheme, split */
} HfPreType;

typedef enum {
    HF_SPLIT_REMOVED = 0,
    HF_SPLIT_ISOLATED = 1,
    HF_SPLIT_MERGED_PREV = 2,
    HF_SPLIT_MERGED_NEXT = 3,
    HF_SPLIT_CONTIGUOUS = 4,
} HfSplitBehavior;

typedef struct {
    HfPreType type;
    pcre2_code *re;
    HfSplitBehavior behavior;
    int invert;
    int add_prefix_space, use_regex; /* ByteLevel */
    char *replacement;               /* Metaspace */
    int prepend;                     /* Metaspace: 0 never, 1 first, 2 always */
    int split;                       /* Metaspace */
} HfPre;

typedef struct {
    char *content;
    size_t len;
    int id;
    int special, lstrip, rstrip, single_word, normalized, in_vocab;
} HfAdded;

struct HfPipeline {
    HfNorm *norm;
    int n_norm;
    HfPre *pre;
    int n_pre;
    HfAdded *added; /* sorted longest first */
    int n_added;
    int byte_level, ignore_merges, byte_fallback, fuse_unk;
    char *unk_token;
    int *prefix, *suffix; /* post-processor ids around the sequence */
    int n_prefix, n_suffix;
    unsigned char *added_only; /* [vocab] 1: id is an added token outside the model's vocab */
    pcre2_code *word_re;       /* one word character, for single_word */
    char *json;                /* the pipeline text, as stored in the model file */
    size_t json_len;
};

#endif
