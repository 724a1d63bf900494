/* fuzz_tokenizer_gpt2: the GPT-2 vocab.json + merges.txt loader.  The input is vocab.json, a
 * NUL byte, then merges.txt (no NUL: all of it is vocab.json and merges.txt is empty). */
#include "fuzz_tokenizer_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = size ? memchr(data, 0, size) : NULL;
    size_t vlen = nul ? (size_t)(nul - data) : size;
    const char *merges = nul ? (const char *)nul + 1 : "";
    size_t mlen = nul ? size - vlen - 1 : 0;
    Tokenizer *t = NULL;
    char err[512];
    err[0] = '\0';
    if (tokenizer_load_gpt2_mem(&t, (const char *)data, vlen, "vocab.json", merges, mlen,
                                "merges.txt", err, sizeof err) == 0) {
        FUZZ_ASSERT(t && tokenizer_kind(t) == TOKENIZER_GPT2, "kind");
        fuzz_tok_exercise(t, data, size);
        tokenizer_free(t);
    } else {
        FUZZ_ASSERT(t == NULL && err[0], "failure without a message");
    }
    return 0;
}
