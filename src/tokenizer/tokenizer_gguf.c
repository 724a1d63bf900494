/* tokenizer_gguf.c: the tokenizer stored in a GGUF file's metadata (gguf_load_tokenizer).
 * tokenizer.ggml.model "llama": SentencePiece pieces (U+2581 for a space, byte pieces
 * <0xNN>) with scores, merged by score as llama2.c and llama.cpp's SPM tokenizer do: kind spm.
 * "gpt2": byte-level BPE pieces and ranked merges "left right", split first as
 * tokenizer.ggml.pre names: GPT-2's expression (absent, "gpt-2" and llama.cpp's other names
 * for it) keeps kind gpt2; Llama 3 ("llama-bpe", "llama3", ...), Qwen2 ("qwen2"), SmolLM
 * ("smollm") and llama.cpp's "default" become kind bpe_hf with the Hugging Face pipeline of
 * that family (tokenizer_hf_gguf_pre_tokenizer; Qwen2's NFC normalizer; the CONTROL and
 * USER_DEFINED tokens as added tokens), so that the file tokenizes as the family's
 * tokenizer.json does.  A name llama.cpp refuses is refused; one it knows and we lack gets a
 * warning and GPT-2's expression.  Ids of BOS and EOS from tokenizer.ggml.bos/eos_token_id,
 * add_bos from tokenizer.ggml.add_bos_token (llama.cpp's defaults when absent: on for llama
 * and Llama 3, off for the other gpt2 ones). */
#include "gguf.h"
#include "tokenizer_gguf.h"

#include "tokenizer_internal.h"
#include "util.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How a gpt2 tokenizer splits text, from tokenizer.ggml.pre. */
typedef struct {
    const char *pre_json;  /* Hugging Face pre_tokenizer; NULL: kind gpt2 (GPT-2's regex) */
    const char *normalizer; /* Hugging Face normalizer JSON, or NULL */
    int ignore_merges, add_bos;
} GgufPre;

/* The names llama.cpp (b4747) gives GPT-2's expression, and those it knows with other
 * expressions that are not implemented here. */
static const char *const gpt2_names[] = {"gpt-2",      "phi-2",      "jina-es",
                                         "jina-de",    "gigachat",   "jina-v1-en",
                                         "jina-v2-es", "jina-v2-de", "jina-v2-code",
                                         "roberta-bpe"};
static const char *const other_names[] = {
    "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon",     "mpt",     "starcoder",
    "refact",       "command-r",      "stablelm2",   "olmo",       "dbrx",    "smaug-bpe",
    "poro-chat",    "chatglm-bpe",    "viking",      "jais",       "tekken",  "codeshell",
    "bloom",        "gpt3-finnish",   "exaone",      "chameleon",  "minerva-7b", "megrez"};

static int name_in(const char *s, size_t n, const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0)
            return 1;
    return 0;
}

/* Reads tokenizer.ggml.pre into *out: 0, or -1 with err for a name llama.cpp refuses. */
static int read_pre(const GgufFile *g, GgufPre *out, char *err, size_t errlen)
{
    const char *s;
    size_t n;
    memset(out, 0, sizeof *out);
    int rc = gguf_get_string(g, "tokenizer.ggml.pre", &s, &n, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 0 || name_in(s, n, gpt2_names, sizeof gpt2_names / sizeof gpt2_names[0]))
        return 0; /* GPT-2's expression (llama.cpp warns when the key is absent) */
    char name[64];
    if (n < sizeof name && !memchr(s, '\0', n)) {
        memcpy(name, s, n);
        name[n] = '\0';
        out->pre_json = tokenizer_hf_gguf_pre_tokenizer(name, &out->ignore_merges);
    }
    if (out->pre_json) {
        out->add_bos = out->ignore_merges; /* llama.cpp: Llama 3 adds BOS */
        if (strcmp(name, "qwen2") == 0 || strcmp(name, "deepseek-r1-qwen") == 0)
            out->normalizer = "{\"type\": \"NFC\"}";
        return 0;
    }
    if (name_in(s, n, other_names, sizeof other_names / sizeof other_names[0])) {
        fprintf(stderr, "headsplit: warning: %s: key tokenizer.ggml.pre: pre-tokenizer \"%.*s\" "
                "is not implemented; GPT-2's is used, so some texts tokenize differently from "
                "llama.cpp\n", g->path, (int)n, s);
        return 0;
    }
    return util_err(err, errlen, "%s: key tokenizer.ggml.pre: unknown pre-tokenizer \"%.*s\" "
                    "(llama.cpp refuses it too; known: llama-bpe, llama3, qwen2, smollm, gpt-2, "
                    "default and llama.cpp's other names)", g->path, (int)(n > 64 ? 64 : n), s);
}

/* The Hugging Face pipeline JSON (tokenizer_hf_parse) of a bpe_hf tokenizer from GGUF: the
 * family's normalizer and pre-tokenizer, ignore_merges, BOS by a TemplateProcessing post-
 * processor when added, and the CONTROL (3) and USER_DEFINED (4) tokens as added tokens
 * matched in the text before splitting, as tokenizer.json's added_tokens are.  malloc'ed. */
static char *pipeline_json(const GgufPre *pre, const GgufKV *tokens, const GgufKV *types,
                           int bos, int add_bos, size_t *len)
{
    json_t *root = json_object(), *model = json_object(), *added = json_array();
    json_object_set_new(root, "normalizer",
                        pre->normalizer ? json_loads(pre->normalizer, 0, NULL) : json_null());
    json_object_set_new(root, "pre_tokenizer", json_loads(pre->pre_json, 0, NULL));
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "ignore_merges", json_boolean(pre->ignore_merges));
    json_object_set_new(root, "model", model);
    if (add_bos && bos >= 0) {
        char buf[256];
        snprintf(buf, sizeof buf,
                 "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": "
                 "\"bos\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
                 "\"special_tokens\": {\"bos\": {\"id\": \"bos\", \"ids\": [%d]}}}",
                 bos);
        json_object_set_new(root, "post_processor", json_loads(buf, 0, NULL));
    } else {
        json_object_set_new(root, "post_processor", json_null());
    }
    for (uint64_t i = 0; types && i < types->n && i < tokens->n; i++) {
        int64_t ty = gguf_array_int(types, i);
        size_t n;
        const char *s = gguf_array_string(tokens, i, &n);
        if ((ty != 3 && ty != 4) || n == 0)
            continue;
        json_t *a = json_object();
        json_object_set_new(a, "id", json_integer((json_int_t)i));
        json_object_set_new(a, "content", json_stringn_nocheck(s, n));
        json_object_set_new(a, "special", json_boolean(ty == 3));
        json_object_set_new(a, "normalized", json_false());
        json_array_append_new(added, a);
    }
    json_object_set_new(root, "added_tokens", added);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    *len = text ? strlen(text) : 0;
    return text;
}

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
    return tokenizer_spm_unspace(s, n, out);
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
    GgufPre pre = {0};
    const GgufKV *types = NULL;
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
    if (kind == TOKENIZER_GPT2) {
        if (read_pre(g, &pre, err, errlen) < 0)
            return -1;
        if (pre.pre_json) {
            rc = gguf_get_array(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types, err,
                                errlen);
            if (rc < 0)
                return -1;
            if (types && types->n != tokens->n)
                return util_err(err, errlen, "%s: key tokenizer.ggml.token_type: %llu types for "
                                "%d tokens", g->path, (unsigned long long)types->n, vocab);
        }
    }
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
    t = tokenizer_alloc(pre.pre_json ? TOKENIZER_BPE_HF : kind, vocab, total);
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
    int add_bos = kind == TOKENIZER_SPM || pre.add_bos, add_prefix = kind == TOKENIZER_SPM;
    if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, err, errlen) < 0 ||
        gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &add_prefix, err, errlen) < 0 ||
        read_id(g, "tokenizer.ggml.bos_token_id", vocab, &t->bos, err, errlen) < 0 ||
        read_id(g, "tokenizer.ggml.eos_token_id", vocab, &t->eos, err, errlen) < 0 ||
        read_id(g, "tokenizer.ggml.unknown_token_id", vocab, &t->unk, err, errlen) < 0)
        goto fail;
    t->add_bos = add_bos && t->bos >= 0;
    t->add_dummy_prefix = kind == TOKENIZER_SPM && add_prefix;
    t->byte_fallback = kind == TOKENIZER_SPM;
    if (pre.pre_json) { /* bpe_hf: the family's Hugging Face pipeline */
        size_t plen;
        char *pj = pipeline_json(&pre, tokens, types, t->bos, t->add_bos, &plen);
        int prc = pj ? tokenizer_hf_parse(&t->hf, pj, plen, g->path, err, errlen)
                     : util_err(err, errlen, "%s: cannot build the tokenizer pipeline", g->path);
        free(pj);
        if (prc != 0)
            goto fail;
        t->byte_level = tokenizer_hf_byte_level(t->hf);
    }
    if (tokenizer_index_pieces(t, g->path, err, errlen) != 0)
        goto fail;
    if (merges && read_merges(t, g, merges, err, errlen) != 0)
        goto fail;
    if (t->hf) {
        const int bos = t->bos, eos = t->eos, unk = t->unk;
        if (tokenizer_hf_bind(t, g->path, err, errlen) != 0)
            goto fail;
        t->bos = bos; /* the file's ids (bind takes BOS from the post-processor) */
        t->eos = eos;
        t->unk = unk;
    }
    if (tokenizer_index_merges(t, g->path, err, errlen) != 0)
        goto fail;
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return -1;
}
