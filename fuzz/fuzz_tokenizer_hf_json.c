/* fuzz_tokenizer_hf_json: the Hugging Face tokenizer.json loader (Llama BPE with byte
 * fallback, GPT-2 byte-level BPE, and the bpe_hf pipelines: added tokens, normalizers,
 * pre-tokenizers, post-processors); a loaded tokenizer is run over sample text. */
#include "fuzz_tokenizer_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Tokenizer *t = NULL;
    char err[512];
    err[0] = '\0';
    if (tokenizer_load_hf_json_mem(&t, (const char *)data, size, "tokenizer.json", err,
                                   sizeof err) == 0) {
        FUZZ_ASSERT(t != NULL, "no tokenizer");
        fuzz_tok_exercise(t, data, size);
        tokenizer_free(t);
    } else {
        FUZZ_ASSERT(t == NULL && err[0], "failure without a message");
    }
    return 0;
}
