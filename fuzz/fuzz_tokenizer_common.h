/* fuzz_tokenizer_common.h: exercising a tokenizer that a fuzzed file produced: encode sample
 * text (and bytes of the input), check every id is in range, decode ids and pieces. */
#ifndef HEADSPLIT_FUZZ_TOKENIZER_COMMON_H
#define HEADSPLIT_FUZZ_TOKENIZER_COMMON_H

#include "fuzz_common.h"
#include "tokenizer.h"

/* Encodes text with t and checks the result; returns the number of ids (or -1 if refused). */
static inline long fuzz_tok_encode_check(const Tokenizer *t, const char *text, size_t len)
{
    int *ids = NULL;
    size_t n = 0;
    char err[512];
    int vocab = tokenizer_vocab_size(t);
    if (tokenizer_encode(t, text, len, &ids, &n, err, sizeof err) != 0) {
        FUZZ_ASSERT(ids == NULL && n == 0, "failed encode left output");
        return -1;
    }
    /* bpe_hf normalizers (Replace, Prepend, NFC) can lengthen the text: no bound there */
    FUZZ_ASSERT(n <= 3 * len + 8 || tokenizer_kind(t) == TOKENIZER_BPE_HF, "%zu ids for %zu bytes",
                n, len);
    for (size_t i = 0; i < n; i++)
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < vocab, "id %d of %d", ids[i], vocab);
    char *s = tokenizer_decode(t, ids, n);
    FUZZ_ASSERT(s != NULL, "decode");
    free(s);
    free(ids);
    return (long)n;
}

/* Runs a freshly loaded tokenizer over sample text, the tail of the input and every id. */
static inline void fuzz_tok_exercise(const Tokenizer *t, const uint8_t *data, size_t size)
{
    static const char *samples[] = {
        "", " ", "Hello world", "  two  spaces\n\nand lines\t", "<s></s><unk><|endoftext|>",
        "caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80 \xe4\xb8\xad\xe6\x96\x87",
        "\xff\xfe\x80\xc3 broken utf8 \xe2\x96", "'s 't 're 123 4567 !!?",
    };
    int vocab = tokenizer_vocab_size(t);
    FUZZ_ASSERT(vocab >= 1, "vocab %d", vocab);
    FUZZ_ASSERT(tokenizer_bos(t) >= -1 && tokenizer_bos(t) < vocab, "bos");
    FUZZ_ASSERT(tokenizer_eos(t) >= -1 && tokenizer_eos(t) < vocab, "eos");
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        fuzz_tok_encode_check(t, samples[i], strlen(samples[i]));
    size_t tail = size < 256 ? size : 256;
    fuzz_tok_encode_check(t, (const char *)data + size - tail, tail);
    char piece[64];
    int step = vocab > 4096 ? vocab / 4096 : 1;
    for (int id = -1; id <= vocab; id += step)
        FUZZ_ASSERT(tokenizer_decode_token(t, id - 1, id, piece, sizeof piece) <= sizeof piece,
                    "decode_token");
    int bad[3] = {-5, vocab, 0};
    free(tokenizer_decode(t, bad, 3));
}

#endif
