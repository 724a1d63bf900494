/* tokenizer.c: the Tokenizer core: piece and pair indexes, the merge rules handed to the BPE
 * core (bpe.c), the SentencePiece-style encoders (llama2.c run.c by score, Hugging Face Llama
 * by merge rank), decoding and the synthetic tokenizer.
 *
 * Special tokens are never matched in the text: a literal "<s>" or "</s>" is encoded as
 * ordinary characters, as llama2.c's run.c and OpenAI's GPT-2 encoder do (Hugging Face
 * tokenizers would match its added tokens instead). */
#include "tokenizer_internal.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static size_t table_capacity(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

Tokenizer *tokenizer_alloc(TokenizerKind kind, int vocab_size, size_t total_bytes)
{
    Tokenizer *t = xcalloc(1, sizeof *t);
    t->kind = kind;
    t->vocab_size = vocab_size;
    t->bos = t->eos = t->unk = -1;
    t->piece_bytes = xmalloc(total_bytes ? total_bytes : 1);
    t->offsets = xcalloc((size_t)vocab_size + 1, sizeof *t->offsets);
    t->scores = xcalloc((size_t)vocab_size, sizeof *t->scores);
    t->byte_of = xmalloc((size_t)vocab_size * sizeof *t->byte_of);
    for (int i = 0; i < vocab_size; i++)
        t->byte_of[i] = -1;
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = -1;
    return t;
}

/* Frees t and everything it owns; NULL is a no-op. */
void tokenizer_free(Tokenizer *t)
{
    if (!t)
        return;
    free(t->piece_bytes);
    free(t->offsets);
    free(t->scores);
    free(t->merges);
    free(t->byte_of);
    free(t->piece_slots);
    free(t->pair_keys);
    free(t->pair_rank);
    free(t->pair_result);
    if (t->re)
        pcre2_code_free(t->re);
    tokenizer_hf_free(t->hf);
    free(t);
}

const unsigned char *tokenizer_piece(const Tokenizer *t, int id, size_t *len)
{
    *len = (size_t)(t->offsets[id + 1] - t->offsets[id]);
    return t->piece_bytes + t->offsets[id];
}

int tokenizer_lookup_piece(const Tokenizer *t, const void *bytes, size_t len)
{
    if (!t->piece_slots)
        return -1;
    size_t mask = t->piece_cap - 1;
    for (size_t i = hash_bytes(bytes, len) & mask;; i = (i + 1) & mask) {
        int32_t id = t->piece_slots[i];
        if (id < 0)
            return -1;
        size_t n;
        const unsigned char *p = tokenizer_piece(t, id, &n);
        if (n == len && memcmp(p, bytes, len) == 0)
            return id;
    }
}

/* Byte NN of a piece that is exactly "<0xNN>", else -1. */
static int piece_byte_value(const unsigned char *p, size_t n)
{
    if (n != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

int tokenizer_index_pieces(Tokenizer *t, const char *fname, char *err, size_t errlen)
{
    int rc = -1;
    if (t->offsets[0] != 0) {
        util_err(err, errlen, "%s: tokenizer piece_offsets[0] is not 0", fname);
        goto fail;
    }
    t->max_piece_len = 0;
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = -1;
    int single_bytes = t->kind == TOKENIZER_GPT2 || t->byte_level;
    for (int i = 0; i < t->vocab_size; i++) {
        if (t->offsets[i + 1] < t->offsets[i] ||
            t->offsets[i + 1] - t->offsets[i] > TOKENIZER_MAX_PIECE_LEN) {
            util_err(err, errlen, "%s: tokenizer piece %d has a bad offset or length", fname, i);
            goto fail;
        }
        int n = (int)(t->offsets[i + 1] - t->offsets[i]);
        if (n > t->max_piece_len)
            t->max_piece_len = n;
    }
    free(t->piece_slots);
    t->piece_cap = table_capacity((size_t)t->vocab_size);
    t->piece_slots = xmalloc(t->piece_cap * sizeof *t->piece_slots);
    memset(t->piece_slots, 0xff, t->piece_cap * sizeof *t->piece_slots);
    size_t mask = t->piece_cap - 1;
    for (int id = 0; id < t->vocab_size; id++) {
        size_t n;
        const unsigned char *p = tokenizer_piece(t, id, &n);
        size_t i = hash_bytes(p, n) & mask;
        int dup = 0;
        for (; t->piece_slots[i] >= 0; i = (i + 1) & mask) {
            size_t m;
            const unsigned char *q = tokenizer_piece(t, t->piece_slots[i], &m);
            if (m == n && memcmp(p, q, n) == 0) {
                dup = 1; /* the lowest id keeps the piece */
                break;
            }
        }
        if (!dup)
            t->piece_slots[i] = id;
        t->byte_of[id] = -1;
        if (!single_bytes) {
            int b = piece_byte_value(p, n);
            t->byte_of[id] = (int16_t)b;
            if (b >= 0 && t->byte_id[b] < 0)
                t->byte_id[b] = id;
        }
    }
    if (single_bytes) {
        for (int b = 0; b < 256; b++) {
            unsigned char c = (unsigned char)b;
            t->byte_id[b] = tokenizer_lookup_piece(t, &c, 1);
        }
    }
    rc = 0;
fail:
    return rc;
}

static int pair_find(const Tokenizer *t, int a, int b, int *rank, int *result)
{
    if (!t->pair_keys)
        return 0;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t mask = t->pair_cap - 1;
    for (size_t i = hash_u64(key) & mask;; i = (i + 1) & mask) {
        if (t->pair_keys[i] == UINT64_MAX)
            return 0;
        if (t->pair_keys[i] == key) {
            *rank = t->pair_rank[i];
            *result = t->pair_result[i];
            return 1;
        }
    }
}

int tokenizer_index_merges(Tokenizer *t, const char *fname, char *err, size_t errlen)
{
    int rc = -1;
    unsigned char *buf = xmalloc(2 * (size_t)t->max_piece_len + 1);
    free(t->pair_keys);
    free(t->pair_rank);
    free(t->pair_result);
    t->pair_cap = table_capacity((size_t)t->n_merges);
    t->pair_keys = xmalloc(t->pair_cap * sizeof *t->pair_keys);
    t->pair_rank = xmalloc(t->pair_cap * sizeof *t->pair_rank);
    t->pair_result = xmalloc(t->pair_cap * sizeof *t->pair_result);
    memset(t->pair_keys, 0xff, t->pair_cap * sizeof *t->pair_keys);
    size_t mask = t->pair_cap - 1;
    for (int r = 0; r < t->n_merges; r++) {
        int a = t->merges[2 * r], b = t->merges[2 * r + 1];
        if (a < 0 || a >= t->vocab_size || b < 0 || b >= t->vocab_size) {
            util_err(err, errlen, "%s: tokenizer merges[%d] = (%d, %d): id out of range [0, %d)",
                     fname, r, a, b, t->vocab_size);
            goto fail;
        }
        size_t na, nb;
        const unsigned char *pa = tokenizer_piece(t, a, &na);
        const unsigned char *pb = tokenizer_piece(t, b, &nb);
        memcpy(buf, pa, na);
        memcpy(buf + na, pb, nb);
        int res = tokenizer_lookup_piece(t, buf, na + nb);
        if (res < 0) {
            util_err(err, errlen, "%s: tokenizer merges[%d] = (%d, %d): merged piece is not in "
                     "the vocabulary", fname, r, a, b);
            goto fail;
        }
        uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
        size_t i = hash_u64(key) & mask;
        while (t->pair_keys[i] != UINT64_MAX && t->pair_keys[i] != key)
            i = (i + 1) & mask;
        t->pair_keys[i] = key; /* a repeated pair keeps its last rank, as HF and GPT-2 do */
        t->pair_rank[i] = r;
        t->pair_result[i] = res;
    }
    if ((t->kind == TOKENIZER_SPM || t->kind == TOKENIZER_SPM_MERGES) && t->unk < 0)
        t->unk = tokenizer_lookup_piece(t, "<unk>", 5);
    if (t->kind == TOKENIZER_GPT2 && !t->re && tokenizer_gpt2_compile(t, err, errlen) != 0)
        goto fail;
    rc = 0;
fail:
    free(buf);
    return rc;
}

/* ---- merge rules for the BPE core ------------------------------------------------------ */

int tokenizer_merge_by_rank(const void *ctx, int a, int b, double *prio, int *result)
{
    int rank;
    if (!pair_find(ctx, a, b, &rank, result))
        return 0;
    *prio = -(double)rank;
    return 1;
}

/* llama2.c run.c's rule: a, b merge when their concatenation is a piece scoring above
 * TOKENIZER_SPM_MIN_SCORE; the higher score first. */
typedef struct {
    const Tokenizer *t;
    unsigned char *buf; /* [2 * max_piece_len + 1] for the concatenation */
} SpmScoreRule;

static int spm_merge_by_score(const void *ctx, int a, int b, double *prio, int *result)
{
    const SpmScoreRule *rule = ctx;
    const Tokenizer *t = rule->t;
    size_t na, nb;
    const unsigned char *pa = tokenizer_piece(t, a, &na);
    const unsigned char *pb = tokenizer_piece(t, b, &nb);
    memcpy(rule->buf, pa, na);
    memcpy(rule->buf + na, pb, nb);
    int id = tokenizer_lookup_piece(t, rule->buf, na + nb);
    if (id < 0 || !(t->scores[id] > TOKENIZER_SPM_MIN_SCORE))
        return 0;
    *prio = t->scores[id];
    *result = id;
    return 1;
}

/* ---- SentencePiece-style encoders ------------------------------------------------------ */

/* Appends the symbols of one code point (or stray byte group) g[0..n). */
static int spm_add_group(const Tokenizer *t, BpeSym *sym, int *n_sym, const unsigned char *g,
                         size_t n, char *err, size_t errlen)
{
    static const unsigned char meta[3] = {0xe2, 0x96, 0x81}; /* U+2581 */
    const unsigned char *key = g;
    size_t klen = n;
    if (t->kind == TOKENIZER_SPM_MERGES && n == 3 && memcmp(g, meta, 3) == 0) {
        key = (const unsigned char *)" "; /* HF: a literal U+2581 is a space */
        klen = 1;
    }
    int id = tokenizer_lookup_piece(t, key, klen);
    if (id >= 0) {
        sym[(*n_sym)++].id = id;
        return 0;
    }
    const unsigned char *fb = g;
    size_t fn = n;
    if (t->kind == TOKENIZER_SPM_MERGES && klen == 1 && key[0] == ' ') {
        fb = meta; /* HF normalized the space to U+2581 before falling back to bytes */
        fn = 3;
    }
    int all = t->byte_fallback;
    for (size_t i = 0; all && i < fn; i++)
        all = t->byte_id[fb[i]] >= 0;
    if (all) {
        for (size_t i = 0; i < fn; i++)
            sym[(*n_sym)++].id = t->byte_id[fb[i]];
        return 0;
    }
    if (t->unk >= 0) {
        sym[(*n_sym)++].id = t->unk;
        return 0;
    }
    return util_err(err, errlen, "tokenizer: cannot encode byte 0x%02X (no piece, byte piece "
                    "or <unk>)", g[0]);
}

static int spm_encode(const Tokenizer *t, const unsigned char *s, size_t len, int *out,
                      size_t *n_out, char *err, size_t errlen)
{
    int rc = -1;
    BpeWork w = {0};
    SpmScoreRule rule = {t, NULL};
    BpeSym *sym = xmalloc((3 * len + 8) * sizeof *sym);
    int n = 0;
    /* BOS stays out of the merges (run.c lets it take part, but no piece starts with it). */
    if (len > 0 && t->add_dummy_prefix &&
        spm_add_group(t, sym, &n, (const unsigned char *)" ", 1, err, errlen) != 0)
        goto fail;
    /* llama2.c run.c: a group is any byte plus up to three following continuation bytes. */
    for (size_t i = 0; i < len;) {
        size_t g = 1;
        while (g < 4 && i + g < len && (s[i + g] & 0xC0) == 0x80)
            g++;
        if (spm_add_group(t, sym, &n, s + i, g, err, errlen) != 0)
            goto fail;
        i += g;
    }
    bpe_link(sym, n);
    if (n > 0) {
        if (t->kind == TOKENIZER_SPM) {
            rule.buf = xmalloc(2 * (size_t)t->max_piece_len + 1);
            bpe_run(&w, sym, 0, BPE_MERGE_ONE, spm_merge_by_score, &rule);
        } else {
            bpe_run(&w, sym, 0, BPE_MERGE_ONE, tokenizer_merge_by_rank, t);
        }
    }
    *n_out = bpe_collect(sym, n > 0 ? 0 : -1, out);
    rc = 0;
fail:
    bpe_work_free(&w);
    free(rule.buf);
    free(sym);
    return rc;
}

/* Encodes text to ids (malloc'ed), BOS first when add_bos; see tokenizer.h. */
int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int **ids, size_t *n_ids,
                     char *err, size_t errlen)
{
    return tokenizer_encode_opts(t, text, len, 1, ids, n_ids, err, errlen);
}

/* Encodes text, the special tokens only when add_special; see tokenizer.h. */
int tokenizer_encode_opts(const Tokenizer *t, const char *text, size_t len, int add_special,
                          int **ids, size_t *n_ids, char *err, size_t errlen)
{
    int rc = -1;
    int *out = NULL;
    size_t cap, n = 0, k = 0;
    *ids = NULL;
    *n_ids = 0;
    if (!t || (!text && len)) {
        util_err(err, errlen, "tokenizer_encode: no tokenizer or no text");
        goto fail;
    }
    if (len > ((size_t)1 << 40) || size_mul(&cap, len, 3) || size_add(&cap, cap, 8)) {
        util_err(err, errlen, "tokenizer_encode: text of %zu bytes is too long", len);
        goto fail;
    }
    if (t->kind == TOKENIZER_BPE_HF)
        return tokenizer_hf_encode(t, text ? text : "", len, add_special, ids, n_ids, err,
                                   errlen);
    out = xmalloc(cap * sizeof *out);
    if (add_special && t->add_bos && t->bos >= 0)
        out[n++] = t->bos;
    if (t->kind == TOKENIZER_GPT2) {
        if (tokenizer_gpt2_encode(t, text, len, out + n, &k, err, errlen) != 0)
            goto fail;
    } else if (spm_encode(t, (const unsigned char *)text, len, out + n, &k, err, errlen) != 0) {
        goto fail;
    }
    *ids = out;
    *n_ids = n + k;
    out = NULL;
    rc = 0;
fail:
    free(out);
    return rc;
}

/* ---- decoding and accessors ------------------------------------------------------------ */

/* bpe_hf: an added token decodes to its content; byte-level pieces are raw bytes already;
 * otherwise byte pieces <0xNN> give their byte, U+2581 a space, and the space the encoder
 * prepended (Metaspace, Prepend) is dropped at the start. */
static size_t hf_decode_token(const Tokenizer *t, int prev, int id, char *out, size_t cap)
{
    size_t n, k = 0;
    const unsigned char *p = tokenizer_piece(t, id, &n);
    const char *added = tokenizer_hf_added_content(t->hf, id, &n);
    if (added)
        p = (const unsigned char *)added;
    else if (t->byte_of[id] >= 0 && !t->byte_level) {
        if (cap > 0)
            out[k++] = (char)t->byte_of[id];
        return k;
    }
    int strip = !added && !t->byte_level && (prev < 0 || prev == t->bos) &&
                tokenizer_hf_prefix_space(t->hf);
    for (size_t i = 0; i < n && k < cap; i++) {
        if (!added && !t->byte_level && i + 2 < n && p[i] == 0xe2 && p[i + 1] == 0x96 &&
            p[i + 2] == 0x81) {
            i += 2;
            if (!strip)
                out[k++] = ' ';
            strip = 0;
            continue;
        }
        strip = 0;
        out[k++] = (char)p[i];
    }
    return k;
}

/* Raw bytes of id continuing after prev; see tokenizer.h. */
size_t tokenizer_decode_token(const Tokenizer *t, int prev, int id, char *out, size_t cap)
{
    if (!t || id < 0 || id >= t->vocab_size || id == t->bos || id == t->eos)
        return 0;
    size_t n;
    const unsigned char *p = tokenizer_piece(t, id, &n);
    unsigned char byte;
    if (t->kind == TOKENIZER_BPE_HF)
        return hf_decode_token(t, prev, id, out, cap);
    if (t->kind != TOKENIZER_GPT2) {
        if (id == t->unk)
            return 0;
        if (t->byte_of[id] >= 0) {
            byte = (unsigned char)t->byte_of[id];
            p = &byte;
            n = 1;
        } else if (prev >= 0 && prev == t->bos && t->add_dummy_prefix && n > 0 && p[0] == ' ') {
            p++;
            n--;
        }
    }
    if (n > cap)
        n = cap;
    if (n)
        memcpy(out, p, n);
    return n;
}

/* Decodes ids to a malloc'ed NUL-terminated string; see tokenizer.h. */
char *tokenizer_decode(const Tokenizer *t, const int *ids, size_t n_ids)
{
    size_t total = 1;
    for (size_t i = 0; t && i < n_ids; i++)
        if (ids[i] >= 0 && ids[i] < t->vocab_size)
            total += (size_t)(t->offsets[ids[i] + 1] - t->offsets[ids[i]]);
    char *s = xmalloc(total);
    size_t k = 0;
    int prev = -1;
    for (size_t i = 0; t && i < n_ids; i++) {
        k += tokenizer_decode_token(t, prev, ids[i], s + k, total - 1 - k);
        prev = ids[i];
    }
    s[k] = '\0';
    return s;
}

/* Accessors: kind, vocabulary size, BOS and EOS ids (-1 if none). */
TokenizerKind tokenizer_kind(const Tokenizer *t) { return t->kind; }
int tokenizer_vocab_size(const Tokenizer *t) { return t->vocab_size; }
int tokenizer_bos(const Tokenizer *t) { return t->bos; }
int tokenizer_eos(const Tokenizer *t) { return t->eos; }

/* Synthetic spm tokenizer: <unk>, BOS, EOS, 256 byte pieces, fillers that never merge.
 * add_dummy_prefix is off: there is no " " piece, so a prefix would decode as a space. */
Tokenizer *tokenizer_build_synthetic(int vocab_size)
{
    if (vocab_size < 259 || vocab_size > TOKENIZER_MAX_VOCAB)
        return NULL;
    size_t total = 5 + 5 + 6 + 256 * 6 + (size_t)(vocab_size - 259) * 20;
    Tokenizer *t = tokenizer_alloc(TOKENIZER_SPM, vocab_size, total);
    char piece[32];
    size_t off = 0;
    for (int id = 0; id < vocab_size; id++) {
        if (id == 0)
            snprintf(piece, sizeof piece, "<unk>");
        else if (id == 1)
            snprintf(piece, sizeof piece, "\n<s>\n");
        else if (id == 2)
            snprintf(piece, sizeof piece, "\n</s>\n");
        else if (id < 259)
            snprintf(piece, sizeof piece, "<0x%02X>", id - 3);
        else
            snprintf(piece, sizeof piece, "<synth%d>", id);
        size_t n = strlen(piece);
        memcpy(t->piece_bytes + off, piece, n);
        off += n;
        t->offsets[id + 1] = off;
        t->scores[id] = id < 259 ? 0.0f : -1e30f;
    }
    t->bos = 1;
    t->eos = 2;
    t->unk = 0;
    t->add_bos = 1;
    t->add_dummy_prefix = 0;
    t->byte_fallback = 1;
    char err[256];
    if (tokenizer_index_pieces(t, "synthetic", err, sizeof err) != 0 ||
        tokenizer_index_merges(t, "synthetic", err, sizeof err) != 0) {
        tokenizer_free(t);
        return NULL;
    }
    return t;
}
