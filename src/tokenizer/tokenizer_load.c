/* tokenizer_load.c: loaders for llama2.c tokenizer.bin, Hugging Face tokenizer.json (Llama
 * BPE with byte fallback, or GPT-2 byte-level BPE) and GPT-2 vocab.json + merges.txt.
 * Every input is untrusted: each failure returns -1 with a message naming file and field. */
#include "tokenizer_internal.h"

#include "util.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int32_t read_le_i32(const unsigned char *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24;
    int32_t r;
    memcpy(&r, &v, sizeof r);
    return r;
}

static float read_le_f32(const unsigned char *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24;
    float r;
    memcpy(&r, &v, sizeof r);
    return r;
}

/* Loads llama2.c tokenizer.bin with vocab_size records; see tokenizer.h. */
int tokenizer_load_llama2c(Tokenizer **out, const char *path, int vocab_size,
                           char *err, size_t errlen)
{
    size_t len = 0;
    *out = NULL;
    char *buf = util_read_file(path, &len, err, errlen);
    if (!buf)
        return -1;
    int rc = tokenizer_load_llama2c_mem(out, buf, len, path, vocab_size, err, errlen);
    free(buf);
    return rc;
}

/* The bytes of a llama2.c tokenizer.bin already in memory; see tokenizer.h. */
int tokenizer_load_llama2c_mem(Tokenizer **out, const void *data, size_t len, const char *path,
                               int vocab_size, char *err, size_t errlen)
{
    int rc = -1;
    Tokenizer *t = NULL;
    size_t pos = 4, total = 0;
    const unsigned char *buf = data;
    *out = NULL;
    if (!buf && len) {
        util_err(err, errlen, "%s: no data", path);
        goto fail;
    }
    if (vocab_size < 1 || vocab_size > TOKENIZER_MAX_VOCAB) {
        util_err(err, errlen, "%s: vocab_size %d out of range [1, %d]", path, vocab_size,
                 TOKENIZER_MAX_VOCAB);
        goto fail;
    }
    if (len < 4) {
        util_err(err, errlen, "%s: truncated: no max_token_length", path);
        goto fail;
    }
    int32_t max_len = read_le_i32(buf);
    if (max_len < 1 || max_len > TOKENIZER_MAX_PIECE_LEN) {
        util_err(err, errlen, "%s: max_token_length %d out of range [1, %d]", path,
                 (int)max_len, TOKENIZER_MAX_PIECE_LEN);
        goto fail;
    }
    for (int i = 0; i < vocab_size; i++) {
        if (len - pos < 8) {
            util_err(err, errlen, "%s: truncated in the record of piece %d (of %d)", path, i,
                     vocab_size);
            goto fail;
        }
        float score = read_le_f32(buf + pos);
        int32_t n = read_le_i32(buf + pos + 4);
        if (isnan(score)) {
            util_err(err, errlen, "%s: score of piece %d is NaN", path, i);
            goto fail;
        }
        if (n < 0 || n > max_len) {
            util_err(err, errlen, "%s: length %d of piece %d is outside [0, max_token_length "
                     "%d]", path, (int)n, i, (int)max_len);
            goto fail;
        }
        if (len - pos - 8 < (size_t)n) {
            util_err(err, errlen, "%s: truncated in the bytes of piece %d (of %d)", path, i,
                     vocab_size);
            goto fail;
        }
        pos += 8 + (size_t)n;
        total += (size_t)n;
    }
    if (pos != len) {
        util_err(err, errlen, "%s: %zu bytes left after %d pieces (vocab_size mismatch?)", path,
                 len - pos, vocab_size);
        goto fail;
    }
    t = tokenizer_alloc(TOKENIZER_SPM, vocab_size, total);
    pos = 4;
    size_t off = 0;
    for (int i = 0; i < vocab_size; i++) {
        t->scores[i] = read_le_f32(buf + pos);
        size_t n = (size_t)read_le_i32(buf + pos + 4);
        memcpy(t->piece_bytes + off, buf + pos + 8, n);
        off += n;
        t->offsets[i + 1] = off;
        pos += 8 + n;
    }
    /* llama2.c run.c: BOS 1 always, EOS 2, dummy prefix, byte fallback. */
    t->bos = vocab_size > 1 ? 1 : -1;
    t->eos = vocab_size > 2 ? 2 : -1;
    t->add_bos = 1;
    t->add_dummy_prefix = 1;
    t->byte_fallback = 1;
    if (tokenizer_index_pieces(t, path, err, errlen) != 0 ||
        tokenizer_index_merges(t, path, err, errlen) != 0)
        goto fail;
    *out = t;
    t = NULL;
    rc = 0;
fail:
    tokenizer_free(t);
    return rc;
}

/* ---- shared helpers for the JSON-based loaders ------------------------------------------ */

/* Converts a piece as written in the file into the raw bytes it stands for (out needs n
 * bytes): spm_merges turns U+2581 into a space; gpt2 undoes bytes_to_unicode.  -1 if not. */
static long piece_convert(TokenizerKind kind, const char *s, size_t n, unsigned char *out)
{
    if (kind == TOKENIZER_GPT2)
        return tokenizer_gpt2_unmap(s, n, out);
    if (kind == TOKENIZER_BPE_HF) { /* character-level bpe_hf: pieces as written */
        memcpy(out, s, n);
        return (long)n;
    }
    return (long)tokenizer_spm_unspace(s, n, out);
}

/* Temporary per-id piece list. */
typedef struct {
    int n;
    unsigned char **bytes;
    size_t *lens;
} PieceList;

static void piece_list_free(PieceList *pl)
{
    for (int i = 0; pl->bytes && i < pl->n; i++)
        free(pl->bytes[i]);
    free(pl->bytes);
    free(pl->lens);
    memset(pl, 0, sizeof *pl);
}

/* Sets piece id from file text s; raw=1 keeps s as is when it cannot be converted. */
static int piece_list_set(PieceList *pl, TokenizerKind kind, int id, const char *s, int raw)
{
    size_t n = strlen(s);
    unsigned char *b = xmalloc(n + 1);
    long k = piece_convert(kind, s, n, b);
    if (k < 0 && raw) {
        memcpy(b, s, n);
        k = (long)n;
    }
    if (k < 0) {
        free(b);
        return -1;
    }
    pl->bytes[id] = b;
    pl->lens[id] = (size_t)k;
    return 0;
}

/* Builds a tokenizer from a complete piece list and indexes its pieces. */
static Tokenizer *tokenizer_from_pieces(TokenizerKind kind, const PieceList *pl,
                                        const char *fname, char *err, size_t errlen)
{
    size_t total = 0;
    for (int i = 0; i < pl->n; i++) {
        if (!pl->bytes[i]) {
            util_err(err, errlen, "%s: vocab: no piece has id %d (ids must be 0..%d)", fname, i,
                     pl->n - 1);
            return NULL;
        }
        total += pl->lens[i];
    }
    if (total > TOKENIZER_MAX_TOTAL_BYTES) {
        util_err(err, errlen, "%s: vocab: pieces too long in total", fname);
        return NULL;
    }
    Tokenizer *t = tokenizer_alloc(kind, pl->n, total);
    size_t off = 0;
    for (int i = 0; i < pl->n; i++) {
        memcpy(t->piece_bytes + off, pl->bytes[i], pl->lens[i]);
        off += pl->lens[i];
        t->offsets[i + 1] = off;
    }
    if (tokenizer_index_pieces(t, fname, err, errlen) != 0) {
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

/* Reads a vocab object {piece: id} (plus HF added_tokens, may be NULL) into pl; added tokens
 * not in the vocab take their content converted like a piece of kind added_kind, or as is. */
static int vocab_read(PieceList *pl, TokenizerKind kind, TokenizerKind added_kind, json_t *vocab,
                      json_t *added, const char *fname, const char *field, char *err,
                      size_t errlen)
{
    int rc = -1;
    const char *key;
    json_t *val;
    size_t i;
    json_int_t max_id = -1;
    if (!json_is_object(vocab)) {
        util_err(err, errlen, "%s: %s: missing or not an object", fname, field);
        goto fail;
    }
    json_object_foreach(vocab, key, val) {
        json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
        if (id < 0 || id >= TOKENIZER_MAX_VOCAB) {
            util_err(err, errlen, "%s: %s: id of \"%.64s\" is not an integer in [0, %d)", fname,
                     field, key, TOKENIZER_MAX_VOCAB);
            goto fail;
        }
        if (id > max_id)
            max_id = id;
    }
    json_array_foreach(added, i, val) {
        json_t *jid = json_object_get(val, "id");
        json_int_t id = json_is_integer(jid) ? json_integer_value(jid) : -1;
        if (id < 0 || id >= TOKENIZER_MAX_VOCAB ||
            !json_is_string(json_object_get(val, "content"))) {
            util_err(err, errlen, "%s: added_tokens[%zu]: bad id or content", fname, i);
            goto fail;
        }
        if (id > max_id)
            max_id = id;
    }
    if (max_id < 0) {
        util_err(err, errlen, "%s: %s: empty vocabulary", fname, field);
        goto fail;
    }
    /* Every id 0..max_id needs a piece: refuse a sparse id before allocating max_id tables. */
    if ((size_t)max_id >= json_object_size(vocab) + json_array_size(added)) {
        util_err(err, errlen, "%s: %s: ids go up to %lld but there are only %zu pieces (ids "
                 "must be 0..n-1)", fname, field, (long long)max_id,
                 json_object_size(vocab) + json_array_size(added));
        goto fail;
    }
    pl->n = (int)max_id + 1;
    pl->bytes = xcalloc((size_t)pl->n, sizeof *pl->bytes);
    pl->lens = xcalloc((size_t)pl->n, sizeof *pl->lens);
    json_object_foreach(vocab, key, val) {
        int id = (int)json_integer_value(val);
        if (pl->bytes[id]) {
            util_err(err, errlen, "%s: %s: id %d is given to more than one piece (\"%.64s\")",
                     fname, field, id, key);
            goto fail;
        }
        if (piece_list_set(pl, kind, id, key, 0) != 0) {
            util_err(err, errlen, "%s: %s: piece \"%.64s\" is not in the byte-level alphabet",
                     fname, field, key);
            goto fail;
        }
    }
    json_array_foreach(added, i, val) {
        int id = (int)json_integer_value(json_object_get(val, "id"));
        if (!pl->bytes[id]) /* a token already in the vocab keeps the vocab's piece */
            piece_list_set(pl, added_kind, id,
                           json_string_value(json_object_get(val, "content")), 1);
    }
    rc = 0;
fail:
    return rc;
}

/* Resolves one side of a merge to a piece id, or -1. */
static int merge_side_id(const Tokenizer *t, const char *s, size_t n)
{
    unsigned char stack[256];
    unsigned char *b = n <= sizeof stack ? stack : xmalloc(n);
    TokenizerKind conv = t->kind == TOKENIZER_BPE_HF && t->byte_level ? TOKENIZER_GPT2 : t->kind;
    long k = piece_convert(conv, s, n, b);
    int id = k < 0 ? -1 : tokenizer_lookup_piece(t, b, (size_t)k);
    if (b != stack)
        free(b);
    return id;
}

/* Stores merge rank r from its two sides as written in the file. */
static int merge_set(Tokenizer *t, int r, const char *a, size_t na, const char *b, size_t nb,
                     const char *fname, const char *field, char *err, size_t errlen)
{
    int ia = merge_side_id(t, a, na), ib = merge_side_id(t, b, nb);
    if (ia < 0 || ib < 0) {
        const char *bad = ia < 0 ? a : b;
        int nbad = (int)(ia < 0 ? na : nb);
        return util_err(err, errlen, "%s: %s[%d]: piece \"%.*s\" is not in the vocabulary",
                        fname, field, r, nbad > 64 ? 64 : nbad, bad);
    }
    t->merges[2 * r] = ia;
    t->merges[2 * r + 1] = ib;
    return 0;
}

/* Reads HF model.merges: "a b" strings or ["a", "b"] arrays. */
static int merges_read_json(Tokenizer *t, json_t *merges, const char *fname, char *err,
                            size_t errlen)
{
    size_t n = json_array_size(merges), i;
    json_t *m;
    if (merges && !json_is_array(merges))
        return util_err(err, errlen, "%s: model.merges: not an array", fname);
    if (n > TOKENIZER_MAX_MERGES)
        return util_err(err, errlen, "%s: model.merges: %zu merges, more than %d", fname, n,
                        TOKENIZER_MAX_MERGES);
    t->n_merges = (int)n;
    t->merges = xmalloc((n ? n : 1) * 2 * sizeof *t->merges);
    json_array_foreach(merges, i, m) {
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (json_is_string(m)) {
            a = json_string_value(m);
            const char *sp = strchr(a, ' ');
            if (sp) {
                na = (size_t)(sp - a);
                b = sp + 1;
                nb = strlen(b);
            }
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            na = strlen(a);
            nb = strlen(b);
        }
        if (!a || !b)
            return util_err(err, errlen, "%s: model.merges[%zu]: expected \"left right\" or "
                            "[left, right]", fname, i);
        if (merge_set(t, (int)i, a, na, b, nb, fname, "model.merges", err, errlen) != 0)
            return -1;
    }
    return 0;
}

static const char *json_type_name(json_t *o)
{
    const char *s = json_string_value(json_object_get(o, "type"));
    return s ? s : "?";
}

/* Normalizer/pre-tokenizer settings of an HF tokenizer.json; sets kind and dummy prefix. */
static int hf_read_pipeline(json_t *root, TokenizerKind *kind, int *dummy, const char *fname,
                            char *err, size_t errlen)
{
    json_t *pre = json_object_get(root, "pre_tokenizer");
    json_t *norm = json_object_get(root, "normalizer");
    *dummy = 0;
    if (json_is_object(pre) && strcmp(json_type_name(pre), "ByteLevel") == 0) {
        *kind = TOKENIZER_GPT2;
        if (json_is_false(json_object_get(pre, "use_regex")))
            return util_err(err, errlen, "%s: pre_tokenizer: ByteLevel without use_regex is "
                            "not supported", fname);
        *dummy = json_is_true(json_object_get(pre, "add_prefix_space"));
        if (norm && !json_is_null(norm))
            return util_err(err, errlen, "%s: normalizer: %s is not supported with ByteLevel",
                            fname, json_type_name(norm));
        return 0;
    }
    *kind = TOKENIZER_SPM_MERGES;
    if (json_is_object(pre) && strcmp(json_type_name(pre), "Metaspace") == 0) {
        const char *scheme = json_string_value(json_object_get(pre, "prepend_scheme"));
        if (json_is_true(json_object_get(pre, "split")))
            return util_err(err, errlen, "%s: pre_tokenizer: Metaspace with split is not "
                            "supported", fname);
        *dummy = json_is_true(json_object_get(pre, "add_prefix_space")) ||
                 (scheme && strcmp(scheme, "never") != 0);
    } else if (pre && !json_is_null(pre)) {
        return util_err(err, errlen, "%s: pre_tokenizer: type %s is not supported", fname,
                        json_type_name(pre));
    }
    if (!norm || json_is_null(norm))
        return 0;
    json_t *list = json_object_get(norm, "normalizers");
    size_t n = strcmp(json_type_name(norm), "Sequence") == 0 ? json_array_size(list) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *one = strcmp(json_type_name(norm), "Sequence") == 0 ? json_array_get(list, i)
                                                                    : norm;
        const char *type = json_type_name(one);
        if (strcmp(type, "Prepend") == 0 &&
            json_is_string(json_object_get(one, "prepend")) &&
            strcmp(json_string_value(json_object_get(one, "prepend")), "\xe2\x96\x81") == 0) {
            *dummy = 1;
        } else if (strcmp(type, "Replace") == 0 &&
                   json_is_string(json_object_get(json_object_get(one, "pattern"), "String")) &&
                   strcmp(json_string_value(json_object_get(json_object_get(one, "pattern"),
                                                            "String")), " ") == 0 &&
                   json_is_string(json_object_get(one, "content")) &&
                   strcmp(json_string_value(json_object_get(one, "content")),
                          "\xe2\x96\x81") == 0) {
            /* spaces -> U+2581: our pieces store U+2581 as a space already */
        } else {
            return util_err(err, errlen, "%s: normalizer: %s is not supported", fname, type);
        }
    }
    return 0;
}

/* BOS from a TemplateProcessing post-processor whose single template starts with a special
 * token; otherwise add_bos stays 0. */
static void hf_read_bos(Tokenizer *t, json_t *root)
{
    json_t *post = json_object_get(root, "post_processor");
    if (!json_is_object(post) || strcmp(json_type_name(post), "TemplateProcessing") != 0)
        return;
    json_t *first = json_object_get(json_array_get(json_object_get(post, "single"), 0),
                                    "SpecialToken");
    const char *name = json_string_value(json_object_get(first, "id"));
    if (!name)
        return;
    json_t *ids = json_object_get(json_object_get(json_object_get(post, "special_tokens"),
                                                  name), "ids");
    json_t *jid = json_array_get(ids, 0);
    int id = -1;
    if (json_is_integer(jid) && json_integer_value(jid) >= 0 &&
        json_integer_value(jid) < t->vocab_size)
        id = (int)json_integer_value(jid);
    else
        id = tokenizer_lookup_piece(t, name, strlen(name));
    if (id >= 0) {
        t->bos = id;
        t->add_bos = 1;
    }
}

/* The pipeline text of a bpe_hf tokenizer: the sections of tokenizer.json the encoder needs,
 * with each added token marked in_vocab when the model's vocab holds its id.  Compact, keys
 * sorted, so that a model file is reproducible. */
static char *hf_pipeline_text(json_t *root, json_t *model, const char *fname, size_t *len,
                              char *err, size_t errlen)
{
    static const char *sections[] = {"normalizer", "pre_tokenizer", "post_processor"};
    static const char *flags[] = {"type", "unk_token", "byte_fallback", "fuse_unk",
                                  "ignore_merges", "continuing_subword_prefix",
                                  "end_of_word_suffix", "dropout"};
    char *text = NULL;
    unsigned char *has = NULL;
    json_t *p = json_object(), *m = json_object(), *added = json_array();
    json_t *vocab = json_object_get(model, "vocab"), *src = json_object_get(root, "added_tokens");
    const char *key;
    json_t *val;
    size_t i;
    if (!json_is_object(vocab)) {
        util_err(err, errlen, "%s: model.vocab: missing or not an object", fname);
        goto fail;
    }
    if (src && !json_is_null(src) && !json_is_array(src)) {
        util_err(err, errlen, "%s: added_tokens: not an array", fname);
        goto fail;
    }
    has = xcalloc(TOKENIZER_MAX_VOCAB, 1);
    json_object_foreach(vocab, key, val) {
        if (json_is_integer(val) && json_integer_value(val) >= 0 &&
            json_integer_value(val) < TOKENIZER_MAX_VOCAB)
            has[json_integer_value(val)] = 1;
    }
    for (size_t k = 0; k < 3; k++) {
        json_t *s = json_object_get(root, sections[k]);
        json_object_set(p, sections[k], s ? s : json_null());
    }
    for (size_t k = 0; k < 8; k++) {
        json_t *s = json_object_get(model, flags[k]);
        if (s)
            json_object_set(m, flags[k], s);
    }
    json_array_foreach(src, i, val) {
        json_t *c = json_deep_copy(val), *id = json_object_get(val, "id");
        if (!json_is_object(c)) {
            json_decref(c);
            util_err(err, errlen, "%s: added_tokens[%zu]: not an object", fname, i);
            goto fail;
        }
        int in = json_is_integer(id) && json_integer_value(id) >= 0 &&
                 json_integer_value(id) < TOKENIZER_MAX_VOCAB && has[json_integer_value(id)];
        json_object_set_new(c, "in_vocab", json_boolean(in));
        json_array_append_new(added, c);
    }
    json_object_set(p, "model", m);
    json_object_set(p, "added_tokens", added);
    text = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        util_err(err, errlen, "%s: cannot serialise the tokenizer pipeline", fname);
    else
        *len = strlen(text);
fail:
    free(has);
    json_decref(p);
    json_decref(m);
    json_decref(added);
    return text;
}

/* Loads the bpe_hf kind from a parsed tokenizer.json. */
static int hf_load_bpe_hf(Tokenizer **out, json_t *root, json_t *model, const char *path,
                          char *err, size_t errlen)
{
    int rc = -1;
    Tokenizer *t = NULL;
    HfPipeline *hp = NULL;
    PieceList pl = {0};
    size_t len = 0;
    char *text = hf_pipeline_text(root, model, path, &len, err, errlen);
    if (!text || tokenizer_hf_parse(&hp, text, len, path, err, errlen) != 0)
        goto fail;
    int byte_level = tokenizer_hf_byte_level(hp);
    if (vocab_read(&pl, byte_level ? TOKENIZER_GPT2 : TOKENIZER_BPE_HF, TOKENIZER_BPE_HF,
                   json_object_get(model, "vocab"), json_object_get(root, "added_tokens"), path,
                   "model.vocab", err, errlen) != 0)
        goto fail;
    t = tokenizer_from_pieces(TOKENIZER_BPE_HF, &pl, path, err, errlen);
    if (!t)
        goto fail;
    t->byte_level = byte_level;
    t->hf = hp;
    hp = NULL;
    if (tokenizer_index_pieces(t, path, err, errlen) != 0 ||
        merges_read_json(t, json_object_get(model, "merges"), path, err, errlen) != 0 ||
        tokenizer_hf_bind(t, path, err, errlen) != 0)
        goto fail;
    t->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    /* EOS (and BOS when the post-processor adds none) by the families' names. */
    static const char *eos_names[] = {"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>"};
    static const char *bos_names[] = {"<|begin_of_text|>", "<s>", "<bos>"};
    for (int k = 3; k >= 0; k--) {
        int id = tokenizer_lookup_piece(t, eos_names[k], strlen(eos_names[k]));
        if (id >= 0)
            t->eos = id;
    }
    for (int k = 0; k < 3 && t->bos < 0; k++)
        t->bos = tokenizer_lookup_piece(t, bos_names[k], strlen(bos_names[k]));
    if (tokenizer_index_merges(t, path, err, errlen) != 0)
        goto fail;
    *out = t;
    t = NULL;
    rc = 0;
fail:
    tokenizer_free(t);
    tokenizer_hf_free(hp);
    piece_list_free(&pl);
    free(text);
    return rc;
}

/* Loads a Hugging Face tokenizer.json (BPE model); see tokenizer.h. */
int tokenizer_load_hf_json(Tokenizer **out, const char *path, char *err, size_t errlen)
{
    size_t len = 0;
    *out = NULL;
    char *buf = util_read_file(path, &len, err, errlen);
    if (!buf)
        return -1;
    int rc = tokenizer_load_hf_json_mem(out, buf, len, path, err, errlen);
    free(buf);
    return rc;
}

/* The bytes of a tokenizer.json already in memory; see tokenizer.h. */
int tokenizer_load_hf_json_mem(Tokenizer **out, const char *buf, size_t len, const char *path,
                               char *err, size_t errlen)
{
    int rc = -1;
    Tokenizer *t = NULL;
    json_t *root = NULL;
    PieceList pl = {0};
    json_error_t jerr;
    TokenizerKind kind;
    int dummy;
    *out = NULL;
    if (!buf && len) {
        util_err(err, errlen, "%s: no data", path);
        goto fail;
    }
    root = json_loadb(buf ? buf : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        util_err(err, errlen, "%s: invalid JSON at line %d column %d: %s", path, jerr.line,
                 jerr.column, jerr.text);
        goto fail;
    }
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) {
        util_err(err, errlen, "%s: missing object \"model\"", path);
        goto fail;
    }
    const char *mtype = json_string_value(json_object_get(model, "type"));
    if (mtype && strcmp(mtype, "BPE") != 0) {
        util_err(err, errlen, "%s: model.type %s is not supported (only BPE)", path, mtype);
        goto fail;
    }
    /* The plain Llama and GPT-2 shapes keep their kinds (and their encodings, bit for bit);
     * every other pipeline is bpe_hf. */
    if (json_is_true(json_object_get(model, "ignore_merges")) ||
        hf_read_pipeline(root, &kind, &dummy, path, err, errlen) != 0) {
        rc = hf_load_bpe_hf(out, root, model, path, err, errlen);
        goto fail;
    }
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added) && !json_is_null(added)) {
        util_err(err, errlen, "%s: added_tokens: not an array", path);
        goto fail;
    }
    if (vocab_read(&pl, kind, kind, json_object_get(model, "vocab"), added, path, "model.vocab",
                   err, errlen) != 0)
        goto fail;
    t = tokenizer_from_pieces(kind, &pl, path, err, errlen);
    if (!t)
        goto fail;
    t->add_dummy_prefix = dummy;
    t->byte_fallback = kind != TOKENIZER_GPT2 && json_is_true(json_object_get(model,
                                                                              "byte_fallback"));
    if (merges_read_json(t, json_object_get(model, "merges"), path, err, errlen) != 0)
        goto fail;
    hf_read_bos(t, root);
    if (kind == TOKENIZER_GPT2) {
        int eot = tokenizer_lookup_piece(t, "<|endoftext|>", 13);
        if (t->bos < 0)
            t->bos = eot;
        t->eos = eot;
    } else {
        const char *unk = json_string_value(json_object_get(model, "unk_token"));
        if (unk)
            t->unk = merge_side_id(t, unk, strlen(unk));
        if (t->bos < 0)
            t->bos = tokenizer_lookup_piece(t, "<s>", 3);
        t->eos = tokenizer_lookup_piece(t, "</s>", 4);
    }
    if (tokenizer_index_merges(t, path, err, errlen) != 0)
        goto fail;
    *out = t;
    t = NULL;
    rc = 0;
fail:
    tokenizer_free(t);
    piece_list_free(&pl);
    json_decref(root);
    return rc;
}

/* Loads GPT-2 vocab.json + merges.txt; see tokenizer.h. */
int tokenizer_load_gpt2_files(Tokenizer **out, const char *vocab_json, const char *merges_txt,
                              char *err, size_t errlen)
{
    size_t len = 0, mlen = 0;
    char *mbuf = NULL;
    *out = NULL;
    char *buf = util_read_file(vocab_json, &len, err, errlen);
    if (buf)
        mbuf = util_read_file(merges_txt, &mlen, err, errlen);
    int rc = buf && mbuf ? tokenizer_load_gpt2_mem(out, buf, len, vocab_json, mbuf, mlen,
                                                   merges_txt, err, errlen)
                         : -1;
    free(buf);
    free(mbuf);
    return rc;
}

/* GPT-2 vocab.json and merges.txt already in memory; see tokenizer.h. */
int tokenizer_load_gpt2_mem(Tokenizer **out, const char *buf, size_t len,
                            const char *vocab_json, const char *mbuf, size_t mlen,
                            const char *merges_txt, char *err, size_t errlen)
{
    int rc = -1;
    Tokenizer *t = NULL;
    json_t *root = NULL;
    PieceList pl = {0};
    json_error_t jerr;
    *out = NULL;
    if ((!buf && len) || (!mbuf && mlen)) {
        util_err(err, errlen, "%s: no data", !buf && len ? vocab_json : merges_txt);
        goto fail;
    }
    root = json_loadb(buf ? buf : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        util_err(err, errlen, "%s: invalid JSON at line %d column %d: %s", vocab_json,
                 jerr.line, jerr.column, jerr.text);
        goto fail;
    }
    if (vocab_read(&pl, TOKENIZER_GPT2, TOKENIZER_GPT2, root, NULL, vocab_json, "vocab", err,
                   errlen) != 0)
        goto fail;
    t = tokenizer_from_pieces(TOKENIZER_GPT2, &pl, vocab_json, err, errlen);
    if (!t)
        goto fail;
    size_t cap = 1024;
    t->merges = xmalloc(cap * 2 * sizeof *t->merges);
    long line_no = 0;
    for (const char *p = mbuf ? mbuf : "", *end = p + mlen; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t n = (size_t)(le - p);
        line_no++;
        if (n && p[n - 1] == '\r')
            n--;
        const char *sp = memchr(p, ' ', n);
        if (n == 0 || (line_no == 1 && n >= 8 && memcmp(p, "#version", 8) == 0)) {
            p = nl ? nl + 1 : end;
            continue;
        }
        if (!sp || sp == p || sp + 1 == p + n) {
            util_err(err, errlen, "%s: line %ld: expected \"left right\"", merges_txt, line_no);
            goto fail;
        }
        if (t->n_merges >= TOKENIZER_MAX_MERGES) {
            util_err(err, errlen, "%s: more than %d merges", merges_txt, TOKENIZER_MAX_MERGES);
            goto fail;
        }
        if ((size_t)t->n_merges == cap) {
            cap *= 2;
            t->merges = xrealloc(t->merges, cap * 2 * sizeof *t->merges);
        }
        char field[48];
        snprintf(field, sizeof field, "line %ld: merge", line_no);
        if (merge_set(t, t->n_merges, p, (size_t)(sp - p), sp + 1, (size_t)(p + n - sp - 1),
                      merges_txt, field, err, errlen) != 0)
            goto fail;
        t->n_merges++;
        p = nl ? nl + 1 : end;
    }
    t->bos = t->eos = tokenizer_lookup_piece(t, "<|endoftext|>", 13);
    if (tokenizer_index_merges(t, merges_txt, err, errlen) != 0)
        goto fail;
    *out = t;
    t = NULL;
    rc = 0;
fail:
    tokenizer_free(t);
    piece_list_free(&pl);
    json_decref(root);
    return rc;
}

size_t tokenizer_spm_unspace(const char *s, size_t n, unsigned char *out)
{
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
