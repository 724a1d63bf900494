/* tokenizer_hf.c: byte-level and character BPE as Hugging Face `tokenizers` defines it
 * (kind bpe_hf): added tokens matched as whole strings first, then the normalizers, the
 * pre-tokenizers, the BPE model and the post-processor's special tokens.
 *
 * The pipeline is parsed from a JSON text holding the tokenizer.json sections it needs
 * (normalizer, pre_tokenizer, post_processor, added_tokens and the model's flags); the same
 * text is stored in the model file (/tokenizer/hf_pipeline), so the controller encodes from
 * the model file exactly as from tokenizer.json.  Pieces are stored as the raw bytes they
 * stand for: with a ByteLevel pre-tokenizer the byte-level mapping is undone, so its
 * "bytes -> characters" step is the identity on our side and each byte is one initial symbol;
 * without one, each UTF-8 character is one initial symbol.  Whatever cannot be done exactly
 * (NFKC, Lowercase, ...) is refused with a message when the file is loaded.  This file parses
 * and checks the pipeline; tokenizer_hf_encode.c runs it. */
#include "tokenizer_hf.h"

#include "util.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char hf_bytelevel_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void tokenizer_hf_free(HfPipeline *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_norm; i++) {
        free(p->norm[i].a);
        free(p->norm[i].b);
        if (p->norm[i].re)
            pcre2_code_free(p->norm[i].re);
    }
    for (int i = 0; i < p->n_pre; i++) {
        if (p->pre[i].re)
            pcre2_code_free(p->pre[i].re);
        free(p->pre[i].replacement);
    }
    for (int i = 0; i < p->n_added; i++)
        free(p->added[i].content);
    if (p->word_re)
        pcre2_code_free(p->word_re);
    free(p->norm);
    free(p->pre);
    free(p->added);
    free(p->unk_token);
    free(p->prefix);
    free(p->suffix);
    free(p->added_only);
    free(p->json);
    free(p);
}

int tokenizer_hf_byte_level(const HfPipeline *p) { return p->byte_level; }

const char *tokenizer_hf_json(const HfPipeline *p, size_t *len)
{
    *len = p->json_len;
    return p->json;
}

static pcre2_code *hf_compile(const char *pattern, size_t len, int literal, const char *fname,
                              const char *field, char *err, size_t errlen)
{
    int code;
    PCRE2_SIZE off;
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &code, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        util_err(err, errlen, "%s: %s: cannot compile the pattern at offset %zu: %s", fname,
                 field, (size_t)off, (const char *)msg);
        return NULL;
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* an optimisation only */
    return re;
}

static const char *hf_type(json_t *o)
{
    const char *s = json_string_value(json_object_get(o, "type"));
    return s ? s : "?";
}

/* A {"String": s} or {"Regex": r} pattern, compiled. */
static pcre2_code *hf_pattern(json_t *pat, const char *fname, const char *field, char *err,
                              size_t errlen)
{
    json_t *s = json_object_get(pat, "String"), *r = json_object_get(pat, "Regex");
    if (json_is_string(s))
        return hf_compile(json_string_value(s), json_string_length(s), 1, fname, field, err,
                          errlen);
    if (json_is_string(r))
        return hf_compile(json_string_value(r), json_string_length(r), 0, fname, field, err,
                          errlen);
    util_err(err, errlen, "%s: %s: pattern must be {\"String\": ...} or {\"Regex\": ...}", fname,
             field);
    return NULL;
}

static int hf_parse_norm_one(HfPipeline *p, json_t *o, const char *fname, char *err,
                             size_t errlen)
{
    const char *type = hf_type(o);
    HfNorm n = {0};
    if (strcmp(type, "NFC") == 0) {
        n.type = HF_NORM_NFC;
    } else if (strcmp(type, "NFD") == 0) {
        n.type = HF_NORM_NFD;
    } else if (strcmp(type, "Prepend") == 0) {
        json_t *s = json_object_get(o, "prepend");
        if (!json_is_string(s))
            return util_err(err, errlen, "%s: normalizer Prepend: prepend is not a string",
                            fname);
        n.type = HF_NORM_PREPEND;
        n.a = xstrdup(json_string_value(s));
    } else if (strcmp(type, "Replace") == 0) {
        json_t *c = json_object_get(o, "content");
        if (!json_is_string(c))
            return util_err(err, errlen, "%s: normalizer Replace: content is not a string",
                            fname);
        n.type = HF_NORM_REPLACE;
        n.re = hf_pattern(json_object_get(o, "pattern"), fname, "normalizer Replace", err,
                          errlen);
        if (!n.re)
            return -1;
        n.b = xstrdup(json_string_value(c));
    } else if (strcmp(type, "Strip") == 0) {
        n.type = HF_NORM_STRIP;
        n.left = json_is_true(json_object_get(o, "strip_left"));
        n.right = json_is_true(json_object_get(o, "strip_right"));
    } else {
        return util_err(err, errlen, "%s: normalizer: %s is not supported (HeadSplit does NFC, "
                        "NFD, Prepend, Replace, Strip and Sequence exactly, and refuses the "
                        "rest rather than guess)", fname, type);
    }
    p->norm = xrealloc(p->norm, (size_t)(p->n_norm + 1) * sizeof *p->norm);
    p->norm[p->n_norm++] = n;
    return 0;
}

static int hf_parse_norm(HfPipeline *p, json_t *o, const char *fname, char *err, size_t errlen)
{
    if (!o || json_is_null(o))
        return 0;
    if (!json_is_object(o))
        return util_err(err, errlen, "%s: normalizer: not an object", fname);
    if (strcmp(hf_type(o), "Sequence") != 0)
        return hf_parse_norm_one(p, o, fname, err, errlen);
    json_t *list = json_object_get(o, "normalizers"), *one;
    size_t i;
    if (!json_is_array(list))
        return util_err(err, errlen, "%s: normalizer Sequence: normalizers is not an array",
                        fname);
    json_array_foreach(list, i, one) {
        if (!json_is_object(one))
            return util_err(err, errlen, "%s: normalizer Sequence[%zu]: not an object", fname,
                            i);
        if (strcmp(hf_type(one), "Sequence") == 0 ? hf_parse_norm(p, one, fname, err, errlen)
                                                  : hf_parse_norm_one(p, one, fname, err,
                                                                      errlen))
            return -1;
    }
    return 0;
}

static int hf_add_pre(HfPipeline *p, HfPre pre)
{
    p->pre = xrealloc(p->pre, (size_t)(p->n_pre + 1) * sizeof *p->pre);
    p->pre[p->n_pre++] = pre;
    return 0;
}

static int hf_parse_pre_one(HfPipeline *p, json_t *o, const char *fname, char *err,
                            size_t errlen)
{
    const char *type = hf_type(o);
    HfPre pre = {0};
    if (p->byte_level)
        return util_err(err, errlen, "%s: pre_tokenizer: %s after ByteLevel is not supported",
                        fname, type);
    if (strcmp(type, "Split") == 0) {
        static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                      "MergedWithNext", "Contiguous"};
        const char *b = json_string_value(json_object_get(o, "behavior"));
        int found = -1;
        for (int k = 0; b && k < 5; k++)
            if (strcmp(b, names[k]) == 0)
                found = k;
        if (found < 0)
            return util_err(err, errlen, "%s: pre_tokenizer Split: behavior \"%s\" is not one "
                            "of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                            "Contiguous", fname, b ? b : "(missing)");
        pre.type = HF_PRE_SPLIT;
        pre.behavior = (HfSplitBehavior)found;
        pre.invert = json_is_true(json_object_get(o, "invert"));
        pre.re = hf_pattern(json_object_get(o, "pattern"), fname, "pre_tokenizer Split", err,
                            errlen);
        if (!pre.re)
            return -1;
    } else if (strcmp(type, "Digits") == 0) {
        /* HF: numeric characters Isolated one by one, or Contiguous runs (= runs Isolated). */
        int single = json_is_true(json_object_get(o, "individual_digits"));
        const char *pat = single ? "\\p{N}" : "\\p{N}+";
        pre.type = HF_PRE_SPLIT;
        pre.behavior = HF_SPLIT_ISOLATED;
        pre.re = hf_compile(pat, strlen(pat), 0, fname, "pre_tokenizer Digits", err, errlen);
        if (!pre.re)
            return -1;
    } else if (strcmp(type, "ByteLevel") == 0) {
        pre.type = HF_PRE_BYTELEVEL;
        pre.add_prefix_space = json_is_true(json_object_get(o, "add_prefix_space"));
        pre.use_regex = !json_is_false(json_object_get(o, "use_regex"));
        if (pre.use_regex) {
            pre.re = hf_compile(hf_bytelevel_pattern, strlen(hf_bytelevel_pattern), 0, fname,
                                "pre_tokenizer ByteLevel", err, errlen);
            if (!pre.re)
                return -1;
        }
        p->byte_level = 1;
    } else if (strcmp(type, "Metaspace") == 0) {
        json_t *rep = json_object_get(o, "replacement");
        const char *scheme = json_string_value(json_object_get(o, "prepend_scheme"));
        pre.type = HF_PRE_METASPACE;
        pre.replacement = xstrdup(json_is_string(rep) ? json_string_value(rep)
                                                      : "\xe2\x96\x81");
        if (scheme)
            pre.prepend = strcmp(scheme, "always") == 0 ? 2 : strcmp(scheme, "first") == 0;
        else
            pre.prepend = json_is_false(json_object_get(o, "add_prefix_space")) ? 0 : 2;
        pre.split = !json_is_false(json_object_get(o, "split"));
        if (!*pre.replacement) {
            free(pre.replacement);
            return util_err(err, errlen, "%s: pre_tokenizer Metaspace: empty replacement",
                            fname);
        }
    } else {
        return util_err(err, errlen, "%s: pre_tokenizer: type %s is not supported (Split, "
                        "Digits, ByteLevel, Metaspace and Sequence are)", fname, type);
    }
    return hf_add_pre(p, pre);
}

static int hf_parse_pre(HfPipeline *p, json_t *o, const char *fname, char *err, size_t errlen)
{
    if (!o || json_is_null(o))
        return 0;
    if (!json_is_object(o))
        return util_err(err, errlen, "%s: pre_tokenizer: not an object", fname);
    if (strcmp(hf_type(o), "Sequence") != 0)
        return hf_parse_pre_one(p, o, fname, err, errlen);
    json_t *list = json_object_get(o, "pretokenizers"), *one;
    size_t i;
    if (!json_is_array(list))
        return util_err(err, errlen, "%s: pre_tokenizer Sequence: pretokenizers is not an "
                        "array", fname);
    json_array_foreach(list, i, one) {
        if (!json_is_object(one))
            return util_err(err, errlen, "%s: pre_tokenizer Sequence[%zu]: not an object",
                            fname, i);
        if (strcmp(hf_type(one), "Sequence") == 0 ? hf_parse_pre(p, one, fname, err, errlen)
                                                  : hf_parse_pre_one(p, one, fname, err,
                                                                     errlen))
            return -1;
    }
    return 0;
}

static void ids_append(int **ids, int *n, int id)
{
    *ids = xrealloc(*ids, (size_t)(*n + 1) * sizeof **ids);
    (*ids)[(*n)++] = id;
}

/* The ids of special token name in a TemplateProcessing's special_tokens. */
static int hf_special_ids(HfPipeline *p, json_t *specials, const char *name, int suffix,
                          const char *fname, char *err, size_t errlen)
{
    json_t *ids = json_object_get(json_object_get(specials, name), "ids"), *v;
    size_t i;
    if (!json_is_array(ids))
        return util_err(err, errlen, "%s: post_processor: special token \"%.64s\" has no ids",
                        fname, name);
    json_array_foreach(ids, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= TOKENIZER_MAX_VOCAB)
            return util_err(err, errlen, "%s: post_processor: special token \"%.64s\": bad id",
                            fname, name);
        if (suffix)
            ids_append(&p->suffix, &p->n_suffix, (int)json_integer_value(v));
        else
            ids_append(&p->prefix, &p->n_prefix, (int)json_integer_value(v));
    }
    return 0;
}

static int hf_parse_post(HfPipeline *p, json_t *o, const char *fname, char *err, size_t errlen)
{
    if (!o || json_is_null(o))
        return 0;
    const char *type = hf_type(o);
    if (strcmp(type, "ByteLevel") == 0)
        return 0; /* offsets only */
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(o, "processors"), *one;
        size_t i;
        if (!json_is_array(list))
            return util_err(err, errlen, "%s: post_processor Sequence: processors is not an "
                            "array", fname);
        json_array_foreach(list, i, one)
            if (hf_parse_post(p, one, fname, err, errlen) != 0)
                return -1;
        return 0;
    }
    if (strcmp(type, "TemplateProcessing") == 0) {
        json_t *single = json_object_get(o, "single"), *item;
        json_t *specials = json_object_get(o, "special_tokens");
        size_t i;
        int seen_a = 0;
        if (!json_is_array(single))
            return util_err(err, errlen, "%s: post_processor TemplateProcessing: single is not "
                            "an array", fname);
        json_array_foreach(single, i, item) {
            const char *name = json_string_value(
                json_object_get(json_object_get(item, "SpecialToken"), "id"));
            if (name) {
                if (hf_special_ids(p, specials, name, seen_a, fname, err, errlen) != 0)
                    return -1;
            } else if (json_object_get(item, "Sequence")) {
                seen_a = 1;
            } else {
                return util_err(err, errlen, "%s: post_processor TemplateProcessing: single[%zu]"
                                " is neither SpecialToken nor Sequence", fname, i);
            }
        }
        return 0;
    }
    if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        json_t *cls = json_array_get(json_object_get(o, "cls"), 1);
        json_t *sep = json_array_get(json_object_get(o, "sep"), 1);
        if (!json_is_integer(cls) || !json_is_integer(sep) || json_integer_value(cls) < 0 ||
            json_integer_value(sep) < 0 || json_integer_value(cls) >= TOKENIZER_MAX_VOCAB ||
            json_integer_value(sep) >= TOKENIZER_MAX_VOCAB)
            return util_err(err, errlen, "%s: post_processor %s: bad cls or sep", fname, type);
        ids_append(&p->prefix, &p->n_prefix, (int)json_integer_value(cls));
        ids_append(&p->suffix, &p->n_suffix, (int)json_integer_value(sep));
        return 0;
    }
    return util_err(err, errlen, "%s: post_processor: type %s is not supported", fname, type);
}

static int hf_added_cmp(const void *x, const void *y)
{
    const HfAdded *a = x, *b = y;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1; /* longest first */
    return a->id - b->id;
}

static int hf_parse_added(HfPipeline *p, json_t *list, const char *fname, char *err,
                          size_t errlen)
{
    json_t *o;
    size_t i;
    if (!list || json_is_null(list))
        return 0;
    if (!json_is_array(list))
        return util_err(err, errlen, "%s: added_tokens: not an array", fname);
    p->added = xcalloc(json_array_size(list) + 1, sizeof *p->added);
    json_array_foreach(list, i, o) {
        json_t *c = json_object_get(o, "content"), *id = json_object_get(o, "id");
        if (!json_is_string(c) || json_string_length(c) == 0 || !json_is_integer(id) ||
            json_integer_value(id) < 0 || json_integer_value(id) >= TOKENIZER_MAX_VOCAB)
            return util_err(err, errlen, "%s: added_tokens[%zu]: bad id or content", fname, i);
        HfAdded *a = &p->added[p->n_added++];
        a->len = json_string_length(c);
        a->content = xmalloc(a->len + 1);
        memcpy(a->content, json_string_value(c), a->len + 1);
        a->id = (int)json_integer_value(id);
        a->special = json_is_true(json_object_get(o, "special"));
        a->lstrip = json_is_true(json_object_get(o, "lstrip"));
        a->rstrip = json_is_true(json_object_get(o, "rstrip"));
        a->single_word = json_is_true(json_object_get(o, "single_word"));
        /* HF: normalized defaults to !special */
        json_t *nz = json_object_get(o, "normalized");
        a->normalized = nz ? json_is_true(nz) : !a->special;
        a->in_vocab = json_is_true(json_object_get(o, "in_vocab"));
    }
    qsort(p->added, (size_t)p->n_added, sizeof *p->added, hf_added_cmp);
    return 0;
}

int tokenizer_hf_parse(HfPipeline **out, const char *text, size_t len, const char *fname,
                       char *err, size_t errlen)
{
    int rc = -1;
    json_error_t jerr;
    HfPipeline *p = xcalloc(1, sizeof *p);
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    *out = NULL;
    if (!json_is_object(root)) {
        util_err(err, errlen, "%s: tokenizer pipeline: invalid JSON: %s", fname,
                 root ? "not an object" : jerr.text);
        goto fail;
    }
    json_t *model = json_object_get(root, "model");
    const char *cont = json_string_value(json_object_get(model, "continuing_subword_prefix"));
    const char *eow = json_string_value(json_object_get(model, "end_of_word_suffix"));
    json_t *dropout = json_object_get(model, "dropout");
    if ((cont && *cont) || (eow && *eow)) {
        util_err(err, errlen, "%s: model: continuing_subword_prefix and end_of_word_suffix are "
                 "not supported", fname);
        goto fail;
    }
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0.0) {
        util_err(err, errlen, "%s: model.dropout is not supported (encoding would be random)",
                 fname);
        goto fail;
    }
    p->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    p->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    p->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    p->unk_token = unk ? xstrdup(unk) : NULL;
    if (hf_parse_norm(p, json_object_get(root, "normalizer"), fname, err, errlen) != 0 ||
        hf_parse_pre(p, json_object_get(root, "pre_tokenizer"), fname, err, errlen) != 0 ||
        hf_parse_post(p, json_object_get(root, "post_processor"), fname, err, errlen) != 0 ||
        hf_parse_added(p, json_object_get(root, "added_tokens"), fname, err, errlen) != 0)
        goto fail;
    static const char word_pat[] = "^[\\p{L}\\p{N}\\p{M}_]";
    p->word_re = hf_compile(word_pat, strlen(word_pat), 0, fname, "single_word", err, errlen);
    if (!p->word_re)
        goto fail;
    p->json = xmalloc(len + 1);
    memcpy(p->json, text, len);
    p->json[len] = '\0';
    p->json_len = len;
    *out = p;
    p = NULL;
    rc = 0;
fail:
    tokenizer_hf_free(p);
    json_decref(root);
    return rc;
}

int tokenizer_hf_bind(Tokenizer *t, const char *fname, char *err, size_t errlen)
{
    HfPipeline *p = t->hf;
    free(p->added_only);
    p->added_only = xcalloc((size_t)t->vocab_size, 1);
    for (int i = 0; i < p->n_added; i++) {
        if (p->added[i].id >= t->vocab_size)
            return util_err(err, errlen, "%s: added token \"%.64s\": id %d outside the "
                            "vocabulary of %d", fname, p->added[i].content, p->added[i].id,
                            t->vocab_size);
        if (!p->added[i].in_vocab)
            p->added_only[p->added[i].id] = 1;
    }
    for (int i = 0; i < p->n_prefix + p->n_suffix; i++) {
        int id = i < p->n_prefix ? p->prefix[i] : p->suffix[i - p->n_prefix];
        if (id >= t->vocab_size)
            return util_err(err, errlen, "%s: post_processor: id %d outside the vocabulary of "
                            "%d", fname, id, t->vocab_size);
    }
    t->unk = p->unk_token ? tokenizer_lookup_piece(t, p->unk_token, strlen(p->unk_token)) : -1;
    t->add_bos = p->n_prefix > 0;
    if (p->n_prefix > 0)
        t->bos = p->prefix[0];
    return 0;
}

/* ---- pre-tokenizers by llama.cpp's names -------------------------------------------------- */

#define HF_L3_SPLIT(digits)                                                                      \
    "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "        \
    "{\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"       \
    "\\\\p{N}" digits "| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"     \
    "\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, "         \
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "        \
    "\"use_regex\": false}]}"

/* One Split step by a regular expression (a JSON string body), matches kept as pieces. */
#define HF_ISOLATED(re)                                                                          \
    "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"" re "\"}, \"behavior\": "             \
    "\"Isolated\", \"invert\": false}"
/* GPT-2's expression, as a JSON string body. */
#define HF_GPT2_RE                                                                               \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|"             \
    "\\\\s+(?!\\\\S)"

const char *tokenizer_hf_gguf_pre_tokenizer(const char *pre, int *ignore_merges)
{
    static const struct {
        const char *name, *json;
        int ignore_merges;
    } table[] = {
        {"llama-bpe", HF_L3_SPLIT("{1,3}"), 1},
        {"llama3", HF_L3_SPLIT("{1,3}"), 1},
        {"llama-v3", HF_L3_SPLIT("{1,3}"), 1},
        {"falcon3", HF_L3_SPLIT("{1,3}"), 1},
        {"qwen2", HF_L3_SPLIT(""), 0},
        {"deepseek-r1-qwen", HF_L3_SPLIT(""), 0},
        /* llama.cpp's "default": four regular expressions, each splitting the pieces of the
         * one before (matches and the text between them), then bytes */
        {"default", "{\"type\": \"Sequence\", \"pretokenizers\": ["
                    HF_ISOLATED("[\\\\p{P}\\\\$\\\\+<=>\\\\^~\\\\|]+") ", "
                    HF_ISOLATED(HF_GPT2_RE) ", "
                    HF_ISOLATED("\\\\p{N}+") ", "
                    HF_ISOLATED("[0-9][0-9][0-9]") ", "
                    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                    "\"use_regex\": false}]}", 0},
        {"smollm", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
                   "\"individual_digits\": true}, {\"type\": \"ByteLevel\", "
                   "\"add_prefix_space\": false, \"use_regex\": true}]}", 0},
        {"gpt-2", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\", "
                  "\"add_prefix_space\": false, \"use_regex\": true}]}", 0},
    };
    for (size_t i = 0; pre && i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(pre, table[i].name) == 0) {
            if (ignore_merges)
                *ignore_merges = table[i].ignore_merges;
            return table[i].json;
        }
    }
    return NULL;
}
