/* convert_internal.h: the streaming model-file writer shared by the converters (writer.c).
 * A tensor is produced block by block by a fill callback, so that no converter ever holds more
 * than one source tensor plus one block (WRITER_BLOCK_FLOATS) in memory. */
#ifndef HEADSPLIT_CONVERT_INTERNAL_H
#define HEADSPLIT_CONVERT_INTERNAL_H

#include "config.h"
#include "convert.h"
#include "tokenizer.h"

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Largest block handed to a fill callback: 4 Mi floats = 16 MiB. */
#define WRITER_BLOCK_FLOATS ((uint64_t)4 << 20)

/* Produces elements [elem0, elem0+n) of the output tensor in row-major order. */
typedef int (*WriterFillFn)(void *ctx, uint64_t elem0, uint64_t n, float *out, char *err,
                            size_t errlen);

/* --quantize: llama.cpp's file types (llama-quantize's choice of a type per tensor). */
typedef enum {
    QUANTIZE_NONE = 0, /* float32 throughout (format version 1) */
    QUANTIZE_F16,
    QUANTIZE_Q8_0,
    QUANTIZE_Q4_0,
    QUANTIZE_Q4_K_M,
} QuantizeMode;

/* The mode named (NULL or "f32": none; "f16", "q8_0", "q4_0", "q4_k_m", any case); -1 with
 * err naming --quantize for another name. */
int writer_parse_quantize(const char *name, QuantizeMode *out, char *err, size_t errlen);
/* The type llama-quantize gives a matrix of kind k in layer `layer` (rows of cols values) of
 * a model c under mode m: the mode's base type, Q6_K for the output (Q8_0 under q8_0) and,
 * in q4_k_m, Q6_K for attn_v and ffn_down in the layers use_more_bits picks and Q5_K for
 * gpt2's q/k/v (llama.cpp's fused attn_qkv); K-quant rows not a multiple of 256 fall back
 * to Q5_0 / Q5_1 / Q8_0 as llama.cpp does, and rows not a multiple of 32 to F16. */
QType writer_pick_type(QuantizeMode m, const ModelConfig *c, WeightKind k, int layer,
                       int64_t cols);

typedef struct {
    hid_t file;
    char *out_path;  /* final name */
    char *tmp_path;  /* written here, renamed on success */
    float *buf;      /* one block */
    uint64_t bytes;  /* tensor bytes written so far */
    int n_tensors;
    QuantizeMode quant;
    ModelConfig config;   /* as written */
    unsigned char *qbuf;  /* quantized rows of one block */
    int n_fallback;       /* matrices kept wider than the mode's type (row lengths) */
    /* Progress: with dry set, writer_stream_tensor only adds a tensor's stored bytes to
     * total (a first pass over the tensors); then, where progress is set, a line every few
     * seconds of the bytes written of that total. */
    int dry;
    uint64_t total;
    FILE *progress;
    double t_open, t_shown;
} ModelWriter;

/* Validates c, creates OUT.partial and writes /config with the source attribute; matrices
 * are then stored in the types `quantize` picks (NULL: float32; else a --quantize name). */
int writer_open_file(ModelWriter *w, const char *out, const ModelConfig *c, const char *source,
                     const char *quantize, char *err, size_t errlen);
/* Creates dataset path of the given shape (rank 1..3) and fills it block by block.  A matrix
 * (embed, lm_head, a layer's wq wk wv wo w_gate w_up w_down) is stored quantized, row by row,
 * when the file is; everything else stays float32. */
int writer_stream_tensor(ModelWriter *w, const char *path, int rank, const uint64_t *dims,
                         WriterFillFn fill, void *ctx, char *err, size_t errlen);
/* Writes a small tensor held in memory. */
int writer_put_tensor(ModelWriter *w, const char *path, int rank, const uint64_t *dims,
                      const float *data, char *err, size_t errlen);
/* Writes /tokenizer. */
int writer_put_tokenizer(ModelWriter *w, const Tokenizer *t, char *err, size_t errlen);
/* The model's chat template (HF tokenizer_config.json chat_template, GGUF
 * tokenizer.chat_template) as /tokenizer attribute chat_template, which --chat and --serve
 * recognise by family; len bytes, not NUL-terminated; nothing when tmpl is NULL or empty. */
int writer_put_chat_template(ModelWriter *w, const char *tmpl, size_t len, char *err,
                             size_t errlen);
/* Fills stats (may be NULL: config c, tensors and bytes written), closes the file and renames
 * it to its final name; 0 or -1 (the partial file is removed). */
int writer_finish_file(ModelWriter *w, const ModelConfig *c, ConvertStats *stats, char *err,
                       size_t errlen);
/* Closes and removes the partial file (safe on a writer that never opened). */
void writer_abort_file(ModelWriter *w);

/* Formats a layer dataset path "/layers/<l>/<name>" into buf. */
const char *writer_layer_path(char *buf, size_t cap, int layer, const char *name);

/* Loads the tokenizer named by path for a model of vocab_size: a llama2.c tokenizer.bin, a
 * Hugging Face tokenizer.json, or a directory holding tokenizer.json or vocab.json +
 * merges.txt.  A vocabulary of another size is an error naming the file. */
int convert_load_tokenizer(Tokenizer **out, const char *path, int vocab_size, char *err,
                           size_t errlen);

#endif
