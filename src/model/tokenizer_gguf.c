/* tokenizer_gguf.c: the tokenizer stored in a GGUF file's metadata (gguf_load_tokenizer).
 * tokenizer.ggml.model "llama": SentencePiece pieces (U+2581 for a space, byte pieces
 * <0xNN>) with scores, merged by score as llama2.c and llama.cpp's SPM tokenizer do: kind spm.
 * "gpt2": byte-level BPE pieces and ranked merges "left right": kind gpt2.  Ids of BOS and
 * EOS from tokenizer.ggml.bos/eos_token_id, add_bos from tokenizer.ggml.add_bos_token
 * (llama.cpp's defaults when absent: on for llama, off for gpt2). */
#include "gguf.h"

#include "tokenizer_internal.h"
#include "util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The raw bytes a piece stands for (out holds n bytes): spm turns U+2581 into a space; gpt2
 * undoes bytes_to_unicode, keeping text that is not in its alphabet (added tokens) as is. */
static size_t piece_bytes(TokenizerKind kind, const char *s, size_t n, unsigned char *out)
{
    if (kind == TOKENIZER_GPT2) {
        long k = tokenizer_gpt2_unmap(s, n, out);
        if (k >= 0)
            return (size_t)k;
        memcpy(out, s, n);
        return n;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 < n && (unsigned char)s[i] == 0xe2 && (unsigned char)s[i + 1] == 0x96 &&
            (unsigned char)s[i + 2] == 0x81) {
            out[k++] = ' ';
            i += 2;
        } else {
            out[k++] = (unsigned char)s[i];
        }
    }
    return k;
}

/* A token id from metadata key (absent or 0xFFFFFFFF, llama.cpp's "none": -1). */
static int read_id(const GgufFile *g, const char *key, int vocab, int *id, char *err,
                   size_t errlen)
{
    int64_t v;
    *id = -1;
    int rc = gguf_get_int(g, key, &v, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 0 || v == 0xFFFFFFFFll || v == -1)
        return 0;
    if (v < 0 || v >= vocab)
        return util_err(err, errlen, "%s: key %s: token id %lld outside the vocabulary of %d",
                        g->path, key, (long long)v, vocab);
    *id = (int)v;
    return 0;
}

/* gpt2 merges "left right" into t->merges. */
static int read_merges(Tokenizer *t, const GgufFile *g, const GgufKV *mk, char *err,
                       size_t errlen)
{
    if (mk->n > TOKENIZER_MAX_MERGES)
        return util_err(err, errlen, "%s: key tokenizer.ggml.merges: %llu merges, more than %d",
                        g->path, (unsigned long long)mk->n, TOKENIZER_MAX_MERGES);
    t->n_merges = (int)mk->n;
    t->merges = xmalloc((mk->n ? mk->n : 1) * 2 * sizeof *t->merges);
    unsigned char *buf = xmalloc(TOKENIZER_MAX_PIECE_LEN);
    int rc = 0;
    for (uint64_t r = 0; r < mk->n && rc == 0; r++) {
        size_t n;
        const char *s = gguf_array_string(mk, r, &n);
        const char *sp = n ? memchr(s, ' ', n) : NULL;
        if (!sp || sp == s || sp + 1 == s + n || n > TOKENIZER_MAX_PIECE_LEN) {
            rc = util_err(err, errlen, "%s: key tokenizer.ggml.merges[%llu]: expected \"left "
                          "right\"", g->path, (unsigned long long)r);
            break;
        }
        const char *side[2] = {s, sp + 1};
        size_t len[2] = {(size_t)(sp - s), (size_t)(s + n - sp - 1)};
        for (int k = 0; k < 2 && rc == 0; k++) {
            size_t nb = piece_bytes(TOKENIZER_GPT2, side[k], len[k], buf);
            int id = tokenizer_lookup_piece(t, buf, nb);
            if (id < 0)
                rc = util_err(err, errlen, "%s: key tokenizer.ggml.merges[%llu]: piece \"%.*s\" "
                              "is not in the vocabulary", g->path, (unsigned long long)r,
                              (int)(len[k] > 64 ? 64 : len[k]), side[k]);
            t->merges[2 * r + (uint64_t)k] = id;
        }
    }
    free(buf);
    return rc;
}

int gguf_load_tokenizer(Tokenizer **out, const GgufFile *g, char *err, size_t errlen)
{
    *out = NULL;
    Tokenizer *t = NULL;
    const char *model;
    size_t mlen;
    const GgufKV *tokens = NULL, *scores = NULL, *merges = NULL;
    int rc = gguf_get_string(g, "tokenizer.ggml.model", &model, &mlen, err, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : util_err(err, errlen, "%s: key tokenizer.ggml.model: missing (the "
                                      "file holds no tokenizer)", g->path);
    TokenizerKind kind;
    if (mlen == 5 && memcmp(model, "llama", 5) == 0)
        kind = TOKENIZER_SPM;
    else if (mlen == 4 && memcmp(model, "gpt2", 4) == 0)
        kind = TOKENIZER_GPT2;
    else
        return util_err(err, errlen, "%s: key tokenizer.ggml.model: tokenizer \"%.*s\" is not "
                        "supported (llama and gpt2 are)", g->path, (int)(mlen > 32 ? 32 : mlen),
                        model);
    rc = gguf_get_array(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : util_err(err, errlen, "%s: key tokenizer.ggml.tokens: missing",
                                      g->path);
    if (tokens->n < 1 || tokens->n > TOKENIZER_MAX_VOCAB)
        return util_err(err, errlen, "%s: key tokenizer.ggml.tokens: %llu tokens (1 to %d "
                        "allowed)", g->path, (unsigned long long)tokens->n, TOKENIZER_MAX_VOCAB);
    int vocab = (int)tokens->n;
    if (kind == TOKENIZER_SPM) {
        rc = gguf_get_array(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores, err, errlen);
        if (rc <= 0)
            return rc < 0 ? -1 : util_err(err, errlen, "%s: key tokenizer.ggml.scores: missing "
                                          "(a llama tokenizer merges by score)", g->path);
        if (scores->n != tokens->n)
            return util_err(err, errlen, "%s: key tokenizer.ggml.scores: %llu scores for %d "
                            "tokens", g->path, (unsigned long long)scores->n, vocab);
    } else {
        rc = gguf_get_array(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err, errlen);
        if (rc <= 0)
            return rc < 0 ? -1 : util_err(err, errlen, "%s: key tokenizer.ggml.merges: missing "
                                          "(a gpt2 tokenizer needs its merges)", g->path);
    }
    size_t total = 0;
    for (int i = 0; i < vocab; i++) {
        size_t n;
        gguf_array_string(tokens, (uint64_t)i, &n);
        if (n > TOKENIZER_MAX_PIECE_LEN)
            return util_err(err, errlen, "%s: key tokenizer.ggml.tokens[%d]: %zu bytes, more "
                            "than %d", g->path, i, n, TOKENIZER_MAX_PIECE_LEN);
        total += n; /* converted pieces are never longer than the text */
        if (total > TOKENIZER_MAX_TOTAL_BYTES)
            return util_err(err, errlen, "%s: key tokenizer.ggml.tokens: pieces too long in "
                            "total", g->path);
    }
    t = tokenizer_alloc(kind, vocab, total);
    size_t off = 0;
    for (int i = 0; i < vocab; i++) {
        size_t n;
        const char *s = gguf_array_string(tokens, (uint64_t)i, &n);
        off += piece_bytes(kind, s, n, t->piece_bytes + off);
        t->offsets[i + 1] = off;
        if (scores) {
            double sc = gguf_array_float(scores, (uint64_t)i);
            if (isnan(sc) || (isfinite(sc) && fabs(sc) > FLT_MAX)) {
                util_err(err, errlen, "%s: key tokenizer.ggml.scores[%d]: %g is not a float32 "
                         "score", g->path, i, sc);
                goto fail;
            }
            t->scores[i] = (float)sc;
        }
    }
    int add_bos = kind == TOKENIZER_SPM, add_prefix = kind == TOKENIZER_SPM;
    if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, err, errlen) < 0 ||
        gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &add_prefix, err, errlen) < 0 ||
        read_id(g, "tokenizer.ggml.bos_token_id", vocab, &t->bos, err, errlen) < 0 ||
        read_id(g, "tokenizer.ggml.eos_token_id", vocab, &t->eos, err, errlen) < 0 ||
        read_id(g, "tokenizer.ggml.unknown_token_id", vocab, &t->unk, err, errlen) < 0)
        goto fail;
    t->add_bos = add_bos && t->bos >= 0;
    t->add_dummy_prefix = kind == TOKENIZER_SPM && add_prefix;
    t->byte_fallback = kind == TOKENIZER_SPM;
    if (tokenizer_index_pieces(t, g->path, err, errlen) != 0)
        goto fail;
    if (merges && read_merges(t, g, merges, err, errlen) != 0)
        goto fail;
    if (tokenizer_index_merges(t, g->path, err, errlen) != 0)
        goto fail;
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return -1;
}
