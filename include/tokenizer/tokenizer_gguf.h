/* tokenizer_gguf.h: the tokenizer stored in a GGUF file's metadata (src/tokenizer/
 * tokenizer_gguf.c), on top of the GGUF reader (gguf.h). */
#ifndef HEADSPLIT_TOKENIZER_GGUF_H
#define HEADSPLIT_TOKENIZER_GGUF_H

#include "gguf.h"
#include "tokenizer.h"

#include <stddef.h>

/* The tokenizer of the file's metadata: tokenizer.ggml.model "llama" (SentencePiece pieces
 * with scores and token types) as kind spm, "gpt2" (byte-level BPE with merges) as kind gpt2;
 * bos/eos ids and add_bos_token. */
int gguf_load_tokenizer(Tokenizer **out, const GgufFile *g, char *err, size_t errlen);

#endif
