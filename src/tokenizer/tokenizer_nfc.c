/* tokenizer_nfc.c: canonical decomposition, canonical ordering and canonical composition
 * (Unicode UAX #15) over UTF-8, as Hugging Face's NFC and NFD normalizers do.  Hangul
 * syllables are composed and decomposed arithmetically; everything else comes from the
 * generated tables. */
#include "tokenizer_nfc.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

enum { HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7,
       HANGUL_LCOUNT = 19, HANGUL_VCOUNT = 21, HANGUL_TCOUNT = 28,
       HANGUL_NCOUNT = HANGUL_VCOUNT * HANGUL_TCOUNT, HANGUL_SCOUNT = HANGUL_LCOUNT * HANGUL_NCOUNT };

static int nfc_ccc(uint32_t cp)
{
    int lo = 0, hi = tokenizer_nfc_n_ccc - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (tokenizer_nfc_ccc[mid].cp == cp)
            return tokenizer_nfc_ccc[mid].ccc;
        if (tokenizer_nfc_ccc[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

static const NfcDecomp *nfc_decomp(uint32_t cp)
{
    int lo = 0, hi = tokenizer_nfc_n_decomp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (tokenizer_nfc_decomp[mid].cp == cp)
            return &tokenizer_nfc_decomp[mid];
        if (tokenizer_nfc_decomp[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

/* The primary composite of a then b, or 0. */
static uint32_t nfc_compose_pair(uint32_t a, uint32_t b)
{
    if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LCOUNT && b >= HANGUL_V &&
        b < HANGUL_V + HANGUL_VCOUNT)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VCOUNT + (b - HANGUL_V)) * HANGUL_TCOUNT;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SCOUNT && (a - HANGUL_S) % HANGUL_TCOUNT == 0 &&
        b > HANGUL_T && b < HANGUL_T + HANGUL_TCOUNT)
        return a + (b - HANGUL_T);
    int lo = 0, hi = tokenizer_nfc_n_comp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const NfcComp *c = &tokenizer_nfc_comp[mid];
        if (c->first == a && c->second == b)
            return c->composite;
        if (c->first < a || (c->first == a && c->second < b))
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

/* Decodes one well-formed UTF-8 code point at s[0..n) into *cp; returns its length, or 0 when
 * the bytes there are not valid UTF-8 (overlong, surrogate, out of range, truncated). */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t k;
    uint32_t c, min;
    if ((s[0] & 0xE0) == 0xC0) {
        k = 2, c = s[0] & 0x1F, min = 0x80;
    } else if ((s[0] & 0xF0) == 0xE0) {
        k = 3, c = s[0] & 0x0F, min = 0x800;
    } else if ((s[0] & 0xF8) == 0xF0) {
        k = 4, c = s[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return k;
}

static size_t utf8_encode(uint32_t cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A growable array of code points. */
typedef struct {
    uint32_t *cp;
    size_t n, cap;
} CpBuf;

static void cp_push(CpBuf *b, uint32_t cp)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->cp = xrealloc(b->cp, b->cap * sizeof *b->cp);
    }
    b->cp[b->n++] = cp;
}

static void nfc_decompose_into(CpBuf *b, uint32_t cp)
{
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SCOUNT) {
        uint32_t si = cp - HANGUL_S;
        cp_push(b, HANGUL_L + si / HANGUL_NCOUNT);
        cp_push(b, HANGUL_V + (si % HANGUL_NCOUNT) / HANGUL_TCOUNT);
        if (si % HANGUL_TCOUNT)
            cp_push(b, HANGUL_T + si % HANGUL_TCOUNT);
        return;
    }
    const NfcDecomp *d = nfc_decomp(cp);
    if (!d) {
        cp_push(b, cp);
        return;
    }
    for (int i = 0; i < d->len; i++)
        cp_push(b, tokenizer_nfc_pool[d->start + i]);
}

/* Canonical ordering (stable by combining class within runs of non-starters), then, for NFC,
 * canonical composition; in place, returns the new length. */
static size_t nfc_reorder_compose(uint32_t *c, size_t n, int compose)
{
    for (size_t i = 1; i < n; i++) {
        int k = nfc_ccc(c[i]);
        if (k == 0)
            continue;
        for (size_t j = i; j > 0; j--) {
            int kp = nfc_ccc(c[j - 1]);
            if (kp <= k)
                break;
            uint32_t t = c[j - 1];
            c[j - 1] = c[j];
            c[j] = t;
        }
    }
    if (!compose || n == 0)
        return n;
    size_t starter = 0, w = 1;
    int last = nfc_ccc(c[0]);
    if (last != 0)
        last = 256; /* no starter yet: nothing composes until one comes */
    for (size_t i = 1; i < n; i++) {
        int k = nfc_ccc(c[i]);
        uint32_t comp = last < k || last == 0 ? nfc_compose_pair(c[starter], c[i]) : 0;
        if (comp) {
            c[starter] = comp;
            continue;
        }
        if (k == 0)
            starter = w;
        last = k;
        c[w++] = c[i];
    }
    return w;
}

char *tokenizer_nfc_normalize(const char *text, size_t len, int compose, size_t *out_len)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t cap = len + 16, n = 0;
    unsigned char *out = xmalloc(cap);
    CpBuf b = {0};
    for (size_t i = 0; i <= len;) {
        uint32_t cp = 0;
        size_t k = i < len ? utf8_decode(s + i, len - i, &cp) : 0;
        if (k > 0) {
            nfc_decompose_into(&b, cp);
            i += k;
            continue;
        }
        /* End of a valid run (an invalid byte or the end of the text): flush it. */
        size_t m = nfc_reorder_compose(b.cp, b.n, compose);
        if (n + 4 * m + 2 > cap) {
            cap = 2 * cap + 4 * m + 2;
            out = xrealloc(out, cap);
        }
        for (size_t j = 0; j < m; j++)
            n += utf8_encode(b.cp[j], out + n);
        b.n = 0;
        if (i < len)
            out[n++] = s[i];
        i++;
    }
    free(b.cp);
    out[n] = '\0';
    *out_len = n;
    return (char *)out;
}
