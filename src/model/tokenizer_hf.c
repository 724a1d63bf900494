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
 * (NFKC, Lowercase, ...) is refused with a message when the file is loaded. */
#include "tokenizer_internal.h"
#include "tokenizer_nfc.h"

#include "util.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ---- the parsed pipeline ----------------------------------------------------------------- */

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

/* ---- encoding ---------------------------------------------------------------------------- */

/* A growable byte string and a list of them. */
typedef struct {
    char *s;
    size_t n;
    int first; /* starts at the beginning of the text (Metaspace prepend_scheme first) */
} HfStr;

typedef struct {
    HfStr *v;
    size_t n, cap;
} HfList;

static void list_push(HfList *l, const char *s, size_t n, int first)
{
    if (n == 0)
        return; /* HF drops empty splits */
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    HfStr *h = &l->v[l->n++];
    h->s = xmalloc(n + 1);
    memcpy(h->s, s, n);
    h->s[n] = '\0';
    h->n = n;
    h->first = first;
}

static void list_free(HfList *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].s);
    free(l->v);
    memset(l, 0, sizeof *l);
}

typedef struct {
    int *v;
    size_t n, cap;
} IdBuf;

static void id_push(IdBuf *b, int id)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->v = xrealloc(b->v, b->cap * sizeof *b->v);
    }
    b->v[b->n++] = id;
}

/* One piece of a split: [start, end) and whether it is a match (after invert). */
typedef struct {
    size_t start, end;
    int match;
} HfRange;

typedef struct {
    HfRange *v;
    size_t n, cap;
} RangeBuf;

static void range_push(RangeBuf *b, size_t start, size_t end, int match)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 32;
        b->v = xrealloc(b->v, b->cap * sizeof *b->v);
    }
    b->v[b->n++] = (HfRange){start, end, match};
}

/* Length of the UTF-8 sequence at s (1 for a byte that does not start a valid one). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t k = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
                                                       : (s[0] & 0xF8) == 0xF0 ? 4 : 1;
    if (k > n)
        return 1;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 1;
    return k;
}

/* HF Pattern::find_matches: the text cut into matches and the gaps between them; an empty
 * match still cuts.  Returns 0 or -1 with err. */
static int hf_find_matches(const pcre2_code *re, pcre2_match_data *md, const char *s,
                           size_t n, RangeBuf *out, char *err, size_t errlen)
{
    size_t pos = 0, prev = 0;
    out->n = 0;
    while (pos <= n) {
        int m = pcre2_match(re, (PCRE2_SPTR)s, n, pos, 0, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH)
            break;
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return util_err(err, errlen, "tokenizer: regex match failed at %zu: %s", pos,
                            (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (a < pos || b < a || b > n)
            return util_err(err, errlen, "tokenizer: regex returned a bad match at %zu", pos);
        if (a > prev)
            range_push(out, prev, a, 0);
        range_push(out, a, b, 1);
        prev = b;
        if (b == a) { /* empty match: step over one character */
            if (b >= n)
                break;
            pos = b + utf8_len((const unsigned char *)s + b, n - b);
        } else {
            pos = b;
        }
    }
    if (prev < n)
        range_push(out, prev, n, 0);
    return 0;
}

/* HF NormalizedString::split with a behaviour, appending the pieces of h to out. */
static void hf_split_apply(const HfStr *h, RangeBuf *r, HfSplitBehavior beh, int invert,
                           HfList *out)
{
    if (invert)
        for (size_t i = 0; i < r->n; i++)
            r->v[i].match = !r->v[i].match;
    size_t k = 0; /* merged ranges written back into r->v[0..k) */
    int prev_match = 0;
    switch (beh) {
    case HF_SPLIT_REMOVED:
        for (size_t i = 0; i < r->n; i++)
            if (!r->v[i].match)
                r->v[k++] = r->v[i];
        break;
    case HF_SPLIT_ISOLATED:
        k = r->n;
        break;
    case HF_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < r->n; i++) {
            HfRange x = r->v[i];
            if (x.match && !prev_match && k > 0)
                r->v[k - 1].end = x.end;
            else
                r->v[k++] = x;
            prev_match = x.match;
        }
        break;
    case HF_SPLIT_MERGED_NEXT:
        /* right to left, merging a match into the piece after it */
        for (size_t i = r->n; i-- > 0;) {
            HfRange x = r->v[i];
            if (x.match && !prev_match && k > 0)
                r->v[r->n - k].start = x.start;
            else
                r->v[r->n - ++k] = x;
            prev_match = x.match;
        }
        memmove(r->v, r->v + (r->n - k), k * sizeof *r->v);
        break;
    case HF_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < r->n; i++) {
            HfRange x = r->v[i];
            if (x.match == prev_match && k > 0)
                r->v[k - 1].end = x.end;
            else
                r->v[k++] = x;
            prev_match = x.match;
        }
        break;
    }
    for (size_t i = 0; i < k; i++)
        list_push(out, h->s + r->v[i].start, r->v[i].end - r->v[i].start,
                  h->first && r->v[i].start == 0);
}

/* Offset of the first occurrence of needle (m > 0 bytes) in hay[from..n), or n; NUL bytes in
 * the text are ordinary bytes. */
static size_t find_bytes(const char *hay, size_t n, size_t from, const char *needle, size_t m)
{
    for (size_t i = from; i + m <= n; i++) {
        const char *q = memchr(hay + i, needle[0], n - m + 1 - i);
        if (!q)
            return n;
        i = (size_t)(q - hay);
        if (memcmp(q, needle, m) == 0)
            return i;
    }
    return n;
}

/* Replaces every occurrence of a (non-empty) by b in h. */
static void str_replace_all(HfStr *h, const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b), cnt = 0;
    for (size_t q = find_bytes(h->s, h->n, 0, a, na); q < h->n;
         q = find_bytes(h->s, h->n, q + na, a, na))
        cnt++;
    if (!cnt)
        return;
    char *s = xmalloc(h->n + cnt * nb + 1), *w = s;
    size_t r = 0;
    for (size_t q = find_bytes(h->s, h->n, 0, a, na); q < h->n;
         q = find_bytes(h->s, h->n, r, a, na)) {
        memcpy(w, h->s + r, q - r);
        w += q - r;
        memcpy(w, b, nb);
        w += nb;
        r = q + na;
    }
    memcpy(w, h->s + r, h->n - r);
    w += h->n - r;
    *w = '\0';
    free(h->s);
    h->s = s;
    h->n = (size_t)(w - s);
}

static void str_prepend(HfStr *h, const char *a)
{
    size_t na = strlen(a);
    char *s = xmalloc(h->n + na + 1);
    memcpy(s, a, na);
    memcpy(s + na, h->s, h->n + 1);
    free(h->s);
    h->s = s;
    h->n += na;
}

/* Encoding scratch space. */
typedef struct {
    pcre2_match_data *md;
    RangeBuf ranges;
    BpeWork w;
    BpeSym *sym;
    size_t cap_sym;
} HfWork;

static int hf_pretokenize(const HfPipeline *p, HfWork *wk, HfList *l, char *err, size_t errlen)
{
    for (int k = 0; k < p->n_pre; k++) {
        const HfPre *pre = &p->pre[k];
        HfList next = {0};
        for (size_t i = 0; i < l->n; i++) {
            HfStr *h = &l->v[i];
            if (pre->type == HF_PRE_METASPACE) {
                /* HF Metaspace: spaces become the replacement, prepended per the scheme, then
                 * split before each replacement (MergedWithNext). */
                str_replace_all(h, " ", pre->replacement);
                size_t nr = strlen(pre->replacement);
                if ((pre->prepend == 2 || (pre->prepend == 1 && h->first)) &&
                    (h->n < nr || memcmp(h->s, pre->replacement, nr) != 0))
                    str_prepend(h, pre->replacement);
                if (!pre->split) {
                    list_push(&next, h->s, h->n, h->first);
                    continue;
                }
                wk->ranges.n = 0;
                size_t prev = 0;
                for (size_t a = find_bytes(h->s, h->n, 0, pre->replacement, nr); a < h->n;
                     a = find_bytes(h->s, h->n, a + nr, pre->replacement, nr)) {
                    if (a > prev)
                        range_push(&wk->ranges, prev, a, 0);
                    range_push(&wk->ranges, a, a + nr, 1);
                    prev = a + nr;
                }
                if (prev < h->n)
                    range_push(&wk->ranges, prev, h->n, 0);
                hf_split_apply(h, &wk->ranges, HF_SPLIT_MERGED_NEXT, 0, &next);
                continue;
            }
            if (pre->type == HF_PRE_BYTELEVEL && pre->add_prefix_space && h->s[0] != ' ')
                str_prepend(h, " ");
            if (pre->type == HF_PRE_BYTELEVEL && !pre->use_regex) {
                list_push(&next, h->s, h->n, h->first);
                continue;
            }
            if (!wk->md || pcre2_get_ovector_count(wk->md) < 1) {
                util_err(err, errlen, "tokenizer: no match data");
                list_free(&next);
                return -1;
            }
            if (hf_find_matches(pre->re, wk->md, h->s, h->n, &wk->ranges, err, errlen) != 0) {
                list_free(&next);
                return -1;
            }
            hf_split_apply(h, &wk->ranges,
                           pre->type == HF_PRE_BYTELEVEL ? HF_SPLIT_ISOLATED : pre->behavior,
                           pre->type == HF_PRE_SPLIT && pre->invert, &next);
        }
        list_free(l);
        *l = next;
    }
    return 0;
}

/* A piece of the model's own vocabulary (added-only tokens excluded), or -1. */
static int hf_model_piece(const Tokenizer *t, const void *s, size_t n)
{
    int id = tokenizer_lookup_piece(t, s, n);
    return id >= 0 && t->hf->added_only[id] ? -1 : id;
}

/* HF BPE::tokenize of one pre-token: the whole word when ignore_merges finds it, else its
 * characters (or bytes, byte-level) as symbols, byte fallback, unk (fused), then merges. */
static void hf_bpe_word(const Tokenizer *t, HfWork *wk, const unsigned char *s, size_t n,
                        IdBuf *out)
{
    const HfPipeline *p = t->hf;
    if (p->ignore_merges) {
        int id = hf_model_piece(t, s, n);
        if (id >= 0) {
            id_push(out, id);
            return;
        }
    }
    if (wk->cap_sym < n) {
        wk->cap_sym = n;
        wk->sym = xrealloc(wk->sym, n * sizeof *wk->sym);
    }
    int ns = 0, last_unk = 0;
    for (size_t i = 0; i < n;) {
        size_t k = p->byte_level ? 1 : utf8_len(s + i, n - i);
        int id = hf_model_piece(t, s + i, k);
        if (id >= 0) {
            wk->sym[ns++].id = id;
            last_unk = 0;
            i += k;
            continue;
        }
        int all = p->byte_fallback;
        for (size_t j = 0; all && j < k; j++)
            all = t->byte_id[s[i + j]] >= 0;
        if (all) {
            for (size_t j = 0; j < k; j++)
                wk->sym[ns++].id = t->byte_id[s[i + j]];
            last_unk = 0;
        } else if (t->unk >= 0) {
            if (!(p->fuse_unk && last_unk))
                wk->sym[ns++].id = t->unk;
            last_unk = 1;
        } /* else HF drops the character */
        i += k;
    }
    if (ns == 0)
        return;
    bpe_link(wk->sym, ns);
    if (ns > 1)
        bpe_run(&wk->w, wk->sym, 0, BPE_MERGE_ONE, tokenizer_merge_by_rank, t);
    size_t need = out->n + (size_t)ns;
    if (need > out->cap) {
        out->cap = need + out->cap;
        out->v = xrealloc(out->v, out->cap * sizeof *out->v);
    }
    out->n += bpe_collect(wk->sym, 0, out->v + out->n);
}

static int hf_is_space(uint32_t c)
{
    return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Code point of the UTF-8 sequence at s[0..k) (k from utf8_len). */
static uint32_t utf8_cp(const unsigned char *s, size_t k)
{
    if (k == 1)
        return s[0];
    uint32_t c = s[0] & (0x7F >> k);
    for (size_t i = 1; i < k; i++)
        c = (c << 6) | (s[i] & 0x3F);
    return c;
}

/* Start of the character that ends at s[end) (end > 0). */
static size_t utf8_prev(const char *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && end - i < 4 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    return utf8_len((const unsigned char *)s + i, end - i) == end - i ? i : end - 1;
}

static int hf_word_char(const HfPipeline *p, HfWork *wk, const char *s, size_t n)
{
    return pcre2_match(p->word_re, (PCRE2_SPTR)s, n, 0, 0, wk->md, NULL) >= 0;
}

/* Finds the next added token (of the normalized or non-normalized set) in s[from..n): the
 * leftmost start, the longest there, honouring single_word; *a, *b get the span after lstrip
 * and rstrip (never before lo).  Returns the token or NULL. */
static const HfAdded *hf_next_added(const HfPipeline *p, HfWork *wk, const char *s, size_t n,
                                    size_t from, size_t lo, int normalized, size_t *a,
                                    size_t *b, size_t *resume)
{
    for (size_t i = from; i < n; i++) {
        for (int k = 0; k < p->n_added; k++) {
            const HfAdded *t = &p->added[k];
            if (t->normalized != normalized || t->len > n - i ||
                memcmp(s + i, t->content, t->len) != 0)
                continue;
            size_t start = i, stop = i + t->len;
            if (t->single_word) {
                int left = start > 0 && hf_word_char(p, wk, s + utf8_prev(s, start),
                                                     start - utf8_prev(s, start));
                int right = stop < n && hf_word_char(p, wk, s + stop, n - stop);
                if (left || right)
                    continue;
            }
            *resume = stop;
            if (t->lstrip) {
                while (start > lo) {
                    size_t q = utf8_prev(s, start);
                    if (!hf_is_space(utf8_cp((const unsigned char *)s + q, start - q)))
                        break;
                    start = q;
                }
            }
            if (t->rstrip) {
                while (stop < n) {
                    size_t k2 = utf8_len((const unsigned char *)s + stop, n - stop);
                    if (!hf_is_space(utf8_cp((const unsigned char *)s + stop, k2)))
                        break;
                    stop += k2;
                }
            }
            *a = start;
            *b = stop;
            return t;
        }
    }
    return NULL;
}

static char *hf_normalize(const HfPipeline *p, HfWork *wk, const char *s, size_t n,
                          size_t *out_n, char *err, size_t errlen)
{
    HfStr h = {xmalloc(n + 1), n, 0};
    memcpy(h.s, s, n);
    h.s[n] = '\0';
    for (int k = 0; k < p->n_norm; k++) {
        const HfNorm *z = &p->norm[k];
        if (z->type == HF_NORM_NFC || z->type == HF_NORM_NFD) {
            size_t m;
            char *r = tokenizer_nfc_normalize(h.s, h.n, z->type == HF_NORM_NFC, &m);
            free(h.s);
            h.s = r;
            h.n = m;
        } else if (z->type == HF_NORM_PREPEND) {
            if (h.n > 0)
                str_prepend(&h, z->a);
        } else if (z->type == HF_NORM_STRIP) {
            size_t a = 0, b = h.n;
            while (z->left && a < b) {
                size_t c = utf8_len((unsigned char *)h.s + a, b - a);
                if (!hf_is_space(utf8_cp((unsigned char *)h.s + a, c)))
                    break;
                a += c;
            }
            while (z->right && b > a) {
                size_t q = utf8_prev(h.s, b);
                if (!hf_is_space(utf8_cp((unsigned char *)h.s + q, b - q)))
                    break;
                b = q;
            }
            memmove(h.s, h.s + a, b - a);
            h.n = b - a;
            h.s[h.n] = '\0';
        } else {
            /* Replace: every non-overlapping match by the content */
            if (hf_find_matches(z->re, wk->md, h.s, h.n, &wk->ranges, err, errlen) != 0) {
                free(h.s);
                return NULL;
            }
            size_t nb = strlen(z->b), total = 0;
            for (size_t i = 0; i < wk->ranges.n; i++)
                total += wk->ranges.v[i].match ? nb : wk->ranges.v[i].end - wk->ranges.v[i].start;
            char *r = xmalloc(total + 1), *w = r;
            for (size_t i = 0; i < wk->ranges.n; i++) {
                const HfRange *x = &wk->ranges.v[i];
                if (x->match) {
                    memcpy(w, z->b, nb);
                    w += nb;
                } else {
                    memcpy(w, h.s + x->start, x->end - x->start);
                    w += x->end - x->start;
                }
            }
            *w = '\0';
            free(h.s);
            h.s = r;
            h.n = total;
        }
    }
    *out_n = h.n;
    return h.s;
}

/* Normalizes, splits on normalized added tokens, pre-tokenizes and runs BPE on one segment of
 * the text that holds no non-normalized added token. */
static int hf_encode_segment(const Tokenizer *t, HfWork *wk, const char *s, size_t n,
                             int first, IdBuf *out, char *err, size_t errlen)
{
    const HfPipeline *p = t->hf;
    size_t nn;
    char *norm = hf_normalize(p, wk, s, n, &nn, err, errlen);
    if (!norm)
        return -1;
    int rc = -1;
    size_t pos = 0, from = 0;
    for (;;) {
        size_t a = nn, b = nn, resume = nn;
        const HfAdded *tok = hf_next_added(p, wk, norm, nn, from, pos, 1, &a, &b, &resume);
        HfList seg = {0};
        list_push(&seg, norm + pos, (tok ? a : nn) - pos, first && pos == 0);
        if (seg.n > 0) {
            if (hf_pretokenize(p, wk, &seg, err, errlen) != 0) {
                list_free(&seg);
                goto fail;
            }
            for (size_t i = 0; i < seg.n; i++)
                hf_bpe_word(t, wk, (const unsigned char *)seg.v[i].s, seg.v[i].n, out);
        }
        list_free(&seg);
        if (!tok)
            break;
        id_push(out, tok->id);
        pos = b;
        from = resume > b ? resume : b;
    }
    rc = 0;
fail:
    free(norm);
    return rc;
}

int tokenizer_hf_encode(const Tokenizer *t, const char *text, size_t len, int add_special,
                        int **ids, size_t *n_ids, char *err, size_t errlen)
{
    int rc = -1;
    const HfPipeline *p = t->hf;
    HfWork wk = {0};
    IdBuf out = {0};
    *ids = NULL;
    *n_ids = 0;
    /* one match data for every pattern: ByteLevel's, Split's and the word test need 1 pair */
    wk.md = pcre2_match_data_create(4, NULL);
    if (!wk.md) {
        util_err(err, errlen, "tokenizer: out of memory for regex match data");
        goto fail;
    }
    for (int i = 0; add_special && i < p->n_prefix; i++)
        id_push(&out, p->prefix[i]);
    size_t pos = 0, from = 0;
    for (;;) {
        size_t a = len, b = len, resume = len;
        const HfAdded *tok = hf_next_added(p, &wk, text, len, from, pos, 0, &a, &b, &resume);
        size_t end = tok ? a : len;
        if (end > pos &&
            hf_encode_segment(t, &wk, text + pos, end - pos, pos == 0, &out, err, errlen) != 0)
            goto fail;
        if (!tok)
            break;
        id_push(&out, tok->id);
        pos = b;
        from = resume > b ? resume : b;
    }
    for (int i = 0; add_special && i < p->n_suffix; i++)
        id_push(&out, p->suffix[i]);
    if (!out.v)
        out.v = xmalloc(sizeof *out.v);
    *ids = out.v;
    *n_ids = out.n;
    out.v = NULL;
    rc = 0;
fail:
    free(out.v);
    free(wk.ranges.v);
    free(wk.sym);
    bpe_work_free(&wk.w);
    if (wk.md)
        pcre2_match_data_free(wk.md);
    return rc;
}

/* The content of added token id when it is one, for decoding; NULL otherwise. */
const char *tokenizer_hf_added_content(const HfPipeline *p, int id, size_t *len)
{
    for (int i = 0; i < p->n_added; i++) {
        if (p->added[i].id == id) {
            *len = p->added[i].len;
            return p->added[i].content;
        }
    }
    return NULL;
}

/* Whether the pipeline prepends a Metaspace replacement or a Prepend normalizer adds one
 * (the decoder strips one leading space at the start then). */
int tokenizer_hf_prefix_space(const HfPipeline *p)
{
    for (int i = 0; i < p->n_pre; i++)
        if (p->pre[i].type == HF_PRE_METASPACE && p->pre[i].prepend)
            return 1;
    for (int i = 0; i < p->n_norm; i++)
        if (p->norm[i].type == HF_NORM_PREPEND)
            return 1;
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

const char *tokenizer_hf_gguf_pre_tokenizer(const char *pre, int *ignore_merges)
{
    static const struct {
        const char *name, *json;
        int ignore_merges;
    } table[] = {
        {"llama-bpe", HF_L3_SPLIT("{1,3}"), 1},
        {"llama3", HF_L3_SPLIT("{1,3}"), 1},
        {"qwen2", HF_L3_SPLIT(""), 0},
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
