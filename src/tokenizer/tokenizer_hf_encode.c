/* tokenizer_hf_encode.c: encoding with a bpe_hf pipeline (tokenizer_hf.h), as Hugging Face
 * `tokenizers` does: added tokens that are not normalized are cut out of the raw text first,
 * each remaining piece is normalized, cut again at normalized added tokens, pre-tokenized and
 * run through BPE; the post-processor's tokens go around the whole. */
#include "tokenizer_hf.h"
#include "tokenizer_nfc.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

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
