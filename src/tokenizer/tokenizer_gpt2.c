/* tokenizer_gpt2.c: GPT-2 byte-level BPE: the bytes_to_unicode mapping, the pre-tokenizer
 * regex (PCRE2) and the encoder (GPT-2 encoder.py bpe(): merge every occurrence of the
 * lowest-rank pair, left to right, until no ranked pair remains; bpe.c BPE_MERGE_ALL). */
#include "tokenizer_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes
 * to U+0100 upwards in byte order.  Fills the code point of each byte. */
static void gpt2_byte_codepoints(int cp_of[256])
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp_of[b] = printable ? b : 256 + n++;
    }
}

long tokenizer_gpt2_unmap(const char *s, size_t len, unsigned char *out)
{
    int cp_of[256];
    int byte_of_cp[324];
    gpt2_byte_codepoints(cp_of);
    for (int c = 0; c < 324; c++)
        byte_of_cp[c] = -1;
    for (int b = 0; b < 256; b++)
        byte_of_cp[cp_of[b]] = b;
    const unsigned char *u = (const unsigned char *)s;
    long n = 0;
    for (size_t i = 0; i < len;) {
        int cp;
        if (u[i] < 0x80) {
            cp = u[i];
            i += 1;
        } else if ((u[i] & 0xE0) == 0xC0 && i + 1 < len && (u[i + 1] & 0xC0) == 0x80) {
            cp = ((u[i] & 0x1F) << 6) | (u[i + 1] & 0x3F);
            if (cp < 0x80)
                return -1; /* overlong */
            i += 2;
        } else {
            return -1;
        }
        if (cp >= 324 || byte_of_cp[cp] < 0)
            return -1;
        out[n++] = (unsigned char)byte_of_cp[cp];
    }
    return n;
}

int tokenizer_gpt2_compile(Tokenizer *t, char *err, size_t errlen)
{
    int errcode;
    PCRE2_SIZE erroff;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    t->re = pcre2_compile((PCRE2_SPTR)gpt2_pattern, PCRE2_ZERO_TERMINATED, opts, &errcode,
                          &erroff, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        return util_err(err, errlen, "tokenizer: cannot compile the GPT-2 regex at %zu: %s",
                        (size_t)erroff, (const char *)msg);
    }
    /* JIT is an optimisation only: the interpreter gives the same matches. */
    (void)pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE);
    return 0;
}

/* Byte-level BPE of one pre-token; appends its ids to ids[*n]. */
static int gpt2_encode_word(const Tokenizer *t, BpeWork *w, BpeSym *sym,
                            const unsigned char *s, size_t len, int *ids, size_t *n,
                            char *err, size_t errlen)
{
    for (size_t i = 0; i < len; i++) {
        int id = t->byte_id[s[i]];
        if (id < 0)
            return util_err(err, errlen, "tokenizer: no piece for byte 0x%02X", s[i]);
        sym[i].id = id;
    }
    bpe_link(sym, (int)len);
    if (len > 1)
        bpe_run(w, sym, 0, BPE_MERGE_ALL, tokenizer_merge_by_rank, t);
    *n += bpe_collect(sym, 0, ids + *n);
    return 0;
}

int tokenizer_gpt2_encode(const Tokenizer *t, const char *text, size_t len, int *ids,
                          size_t *n_ids, char *err, size_t errlen)
{
    int rc = -1;
    BpeWork w = {0};
    pcre2_match_data *md = NULL;
    char *copy = NULL;
    BpeSym *sym = NULL;
    size_t n = 0;
    *n_ids = 0;
    if (len == 0)
        return 0;
    if (!t->re) {
        util_err(err, errlen, "tokenizer: GPT-2 pre-tokenizer not compiled");
        goto fail;
    }
    if (t->add_dummy_prefix && text[0] != ' ') { /* HF ByteLevel add_prefix_space */
        copy = xmalloc(len + 1);
        copy[0] = ' ';
        memcpy(copy + 1, text, len);
        text = copy;
        len++;
    }
    md = pcre2_match_data_create_from_pattern(t->re, NULL);
    if (!md) {
        util_err(err, errlen, "tokenizer: out of memory for regex match data");
        goto fail;
    }
    sym = xmalloc(len * sizeof *sym);
    const unsigned char *s = (const unsigned char *)text;
    size_t pos = 0;
    while (pos < len) {
        int m = pcre2_match(t->re, s, len, pos, 0, md, NULL);
        size_t start = len, end = len;
        if (m >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            start = ov[0];
            end = ov[1];
            if (start < pos || start > len || end > len || end <= start) {
                util_err(err, errlen, "tokenizer: regex returned a bad match at %zu", pos);
                goto fail;
            }
        } else if (m != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            util_err(err, errlen, "tokenizer: regex match failed at %zu: %s", pos,
                     (const char *)msg);
            goto fail;
        }
        /* Bytes no alternative matches (invalid UTF-8) form a pre-token of their own. */
        if (start > pos &&
            gpt2_encode_word(t, &w, sym, s + pos, start - pos, ids, &n, err, errlen) != 0)
            goto fail;
        if (end > start &&
            gpt2_encode_word(t, &w, sym, s + start, end - start, ids, &n, err, errlen) != 0)
            goto fail;
        pos = end;
    }
    *n_ids = n;
    rc = 0;
fail:
    bpe_work_free(&w);
    if (md)
        pcre2_match_data_free(md);
    free(sym);
    free(copy);
    return rc;
}
