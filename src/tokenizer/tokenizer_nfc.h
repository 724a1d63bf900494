/* tokenizer_nfc.h: Unicode canonical normalisation (NFC, NFD) of UTF-8 text, for the
 * Hugging Face normalizers (internal to src/model).  Tables: tokenizer_nfc_data.c, generated
 * by scripts/gen-nfc-tables.py. */
#ifndef HEADSPLIT_TOKENIZER_NFC_H
#define HEADSPLIT_TOKENIZER_NFC_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t cp;
    int ccc; /* canonical combining class, non-zero */
} NfcCcc;

typedef struct {
    uint32_t cp;
    int start, len; /* full canonical decomposition: tokenizer_nfc_pool[start .. start+len) */
} NfcDecomp;

typedef struct {
    uint32_t first, second, composite; /* primary composites, sorted by (first, second) */
} NfcComp;

extern const char tokenizer_nfc_unicode_version[];
extern const NfcCcc tokenizer_nfc_ccc[];
extern const int tokenizer_nfc_n_ccc;
extern const uint32_t tokenizer_nfc_pool[];
extern const NfcDecomp tokenizer_nfc_decomp[];
extern const int tokenizer_nfc_n_decomp;
extern const NfcComp tokenizer_nfc_comp[];
extern const int tokenizer_nfc_n_comp;

/* Normalises len bytes of UTF-8 to NFC (compose = 1) or NFD (compose = 0); bytes that are not
 * valid UTF-8 pass through unchanged and block reordering and composition across them.
 * Returns a malloc'ed buffer (NUL-terminated) and its length in *out_len. */
char *tokenizer_nfc_normalize(const char *s, size_t len, int compose, size_t *out_len);

#endif
