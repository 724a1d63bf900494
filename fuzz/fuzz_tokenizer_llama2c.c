/* fuzz_tokenizer_llama2c: the llama2.c tokenizer.bin loader.  The first two input bytes give
 * the vocabulary size the model would pass (little-endian, minus 8, so that 0 and negative
 * sizes occur); the rest is the file. */
#include "fuzz_tokenizer_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int vocab = (int)(data[0] | (unsigned)data[1] << 8) - 8;
    Tokenizer *t = NULL;
    char err[512];
    err[0] = '\0';
    if (tokenizer_load_llama2c_mem(&t, data + 2, size - 2, "tokenizer.bin", vocab, err,
                                   sizeof err) == 0) {
        FUZZ_ASSERT(t && tokenizer_vocab_size(t) == vocab, "vocab");
        FUZZ_ASSERT(tokenizer_kind(t) == TOKENIZER_SPM, "kind");
        fuzz_tok_exercise(t, data, size);
        tokenizer_free(t);
    } else {
        FUZZ_ASSERT(t == NULL && err[0], "failure without a message");
    }
    return 0;
}
