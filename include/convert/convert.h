/* convert.h: headsplit-convert, the model converter.  Reads llama2.c legacy checkpoints and
 * Hugging Face directories (LlamaForCausalLM, GPT2LMHeadModel; safetensors F32/F16/BF16,
 * sharded or not) and llama.cpp GGUF files, or generates deterministic synthetic models, and
 * writes the HeadSplit model file of docs/model-format.md.  Conversion streams: at most one
 * source tensor and one 16 MiB block are in memory.  Every function returns 0, or -1 with a one-line message
 * "<file>: <field>: <what>" in err; a failed conversion leaves no output file behind. */
#ifndef HEADSPLIT_CONVERT_H
#define HEADSPLIT_CONVERT_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* quantize (every converter): NULL or "f32" for float32 matrices, or "q8_0", "q4_0",
 * "q4_k_m", "f16": matrices quantized row by row as llama-quantize would (writer.c's
 * writer_pick_type), norms and biases float32; a file of format version 2. */

/* What a conversion wrote (for the summary line). */
typedef struct {
    ModelConfig config;
    int n_tensors;
    uint64_t tensor_bytes;
    /* In: where --synthetic prints a progress line (bytes of the total, rate) every few
     * seconds of a long conversion; NULL: none.  The converters leave it as it is. */
    FILE *progress;
} ConvertStats;

/* llama2.c legacy checkpoint (7-int header; negative vocab = separate classifier) plus its
 * tokenizer.bin.  stats may be NULL. */
int convert_from_llama2c(const char *checkpoint, const char *tokenizer, const char *out,
                         const char *quantize, ConvertStats *stats, char *err, size_t errlen);

/* Hugging Face model directory: config.json, model.safetensors or
 * model.safetensors.index.json, and tokenizer.json (or vocab.json + merges.txt for GPT-2). */
int convert_from_hf(const char *dir, const char *out, const char *quantize, ConvertStats *stats,
                    char *err, size_t errlen);

/* llama.cpp GGUF file (architectures llama and gpt2): configuration and tokenizer from its
 * metadata; F32 matrices as float32, F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K
 * matrices as their blocks, byte for byte (format version 2). */
int convert_from_gguf(const char *path, const char *out, ConvertStats *stats, char *err,
                      size_t errlen);

/* convert_from_hf with the tokenizer taken from `tokenizer` (a llama2.c tokenizer.bin, a
 * tokenizer.json, or a directory as convert_load_tokenizer reads) instead of DIR's; NULL:
 * DIR's. */
int convert_from_hf_tok(const char *dir, const char *tokenizer, const char *out,
                        const char *quantize, ConvertStats *stats, char *err, size_t errlen);

/* Reads and checks DIR/config.json only (no weights): fills c.  For tests and tools. */
int convert_read_hf_config(const char *dir, ModelConfig *c, char *err, size_t errlen);

/* Resolves a synthetic model name (tinyllama-1.1b, gpt2-small, stories260k) or a spec
 * "llama:dim=64,ffn=172,layers=2,heads=8,kv_heads=4,vocab=512,ctx=512" into c; layers > 0
 * overrides the layer count. */
int convert_synthetic_config(const char *spec, int layers, ModelConfig *c, char *err,
                             size_t errlen);

/* The stored type of every matrix kind of c (c->wtype) as headsplit-convert --quantize
 * writes them (writer_pick_type: llama.cpp's choices, the LM head Q6_K or Q8_0); where the
 * type varies with the layer (q4_k_m's attn_v and ffn_down) the one most layers get.  NULL or
 * "f32": fp32.  -1 on an unknown type. */
int convert_stored_types(ModelConfig *c, const char *quantize, char *err, size_t errlen);

/* Deterministic random weights of the shapes of spec, seeded by seed, written block by block.
 * tokenizer (may be NULL) names a real tokenizer of the same vocabulary size; without it a
 * synthetic tokenizer is stored. */
int convert_make_synthetic(const char *spec, uint64_t seed, int layers, const char *tokenizer,
                           const char *out, const char *quantize, ConvertStats *stats,
                           char *err, size_t errlen);

/* The command line of headsplit-convert (argv[0] is skipped).  Prints help or the summary line
 * to out.  Returns 0, or -1 with err set (main prints it and exits 1). */
int convert_run_cli(int argc, char **argv, FILE *out, char *err, size_t errlen);

/* Where a conversion shows how far it is (headsplit-convert's progress bar). */
typedef struct {
    /* The work begins: total bytes to read (writes 0: the input files, each read once as
     * the conversion streams) or to write (writes 1: --synthetic, an estimate). */
    void (*start)(void *ctx, uint64_t total, int writes);
    /* The work has ended (ok: completed), before the summary line is printed. */
    void (*stop)(void *ctx, int ok);
    void *ctx;
} ConvertProgress;

/* convert_run_cli reporting to progress (NULL: nowhere). */
int convert_run_cli_progress(int argc, char **argv, FILE *out, const ConvertProgress *progress,
                             char *err, size_t errlen);

/* Writes the --help text to out. */
void convert_print_usage(FILE *out);

#endif
