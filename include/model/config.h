/* config.h: the model configuration (read-only after load).  Pure: no HDF5 here, so that the
 * planner and the simulator can include it; its HDF5 form is in config_io.h. */
#ifndef HEADSPLIT_CONFIG_H
#define HEADSPLIT_CONFIG_H

#include "quant.h"

#include <stddef.h>

/* The matrix kinds, for the stored type of each (ModelConfig.wtype). */
typedef enum {
    WKIND_EMBED = 0,
    WKIND_LM_HEAD,
    WKIND_WQ,
    WKIND_WK,
    WKIND_WV,
    WKIND_WO,
    WKIND_W_GATE,
    WKIND_W_UP,
    WKIND_W_DOWN,
    WKIND_COUNT
} WeightKind;

typedef enum { ARCH_LLAMA = 0, ARCH_GPT2 = 1 } Arch;
/* RoPE pair layout: adjacent pairs (2i, 2i+1) as Meta/llama2.c, or halves (i, i+hd/2) as HF. */
typedef enum { ROPE_NONE = 0, ROPE_INTERLEAVED = 1, ROPE_HALF = 2 } RopeStyle;

/* Most RoPE frequencies (head_dim / 2) that per-frequency factors may be given for. */
#define CONFIG_MAX_ROPE_PAIRS 512

typedef struct {
    Arch arch;
    int dim;            /* residual width */
    int n_layers;
    int n_heads;        /* query heads */
    int n_kv_heads;     /* key/value heads = attention units (KV groups) */
    int head_dim;
    int ffn_dim;        /* FFN inner width */
    int vocab_size;
    int context_length; /* positions the model supports */
    float norm_eps;
    float rope_theta;
    RopeStyle rope_style;
    int tied_embeddings; /* LM head is the token embedding */
    int bos_id, eos_id;  /* -1 when absent */
    /* Stored type of each matrix kind (QType; QTYPE_F32 = 0, so a zeroed config is fp32).
     * Where layers differ (llama.cpp's Q4_K_M mix) the widest one, so that budgets built on
     * it are never short.  Filled by config_read from the datasets. */
    int wtype[WKIND_COUNT];
    char quantization[16]; /* "" for fp32 files, else e.g. "q8_0", "q4_K_M", "mixed" */
    int qkv_bias;        /* llama family: biases bq, bk, bv on the projections (Qwen2) */
    int sliding_window;  /* attention sees the last W positions (Mistral, Phi-3); 0: all */
    /* Llama 3.1 RoPE scaling as llama.cpp stores it: frequency i (of head_dim / 2) is divided
     * by rope_freq_factors[i].  n_rope_freq_factors is 0 (none) or head_dim / 2. */
    int n_rope_freq_factors;
    float rope_freq_factors[CONFIG_MAX_ROPE_PAIRS];
    /* llama.cpp's phi3 graph: q multiplied by 1/sqrt(head_dim) after RoPE and the scores
     * left unscaled (1: Phi-3); 0: the scores scaled, as every other graph does. */
    int q_prescale;
    /* gpt2: GELU as llama.cpp's CPU backend computes it (the input rounded to fp16, the
     * result looked up in its fp16 table: kernels_gelu_fp16), set by the GGUF import; 0: the
     * tanh form in float (llm.c, Hugging Face). */
    int gelu_fp16;
    /* The type the KV caches store their rows in (--cache-type; QType): QTYPE_F32 (0, a
     * zeroed config; exact), QTYPE_F16 or QTYPE_Q8_0 (head_dim a multiple of 32).  Set by the
     * run, not read from the file; config_kv_bytes counts by it. */
    int kv_type;
} ModelConfig;

/* Query heads per KV group. */
static inline int config_q_per_kv(const ModelConfig *c) { return c->n_heads / c->n_kv_heads; }

/* Checks every dimension against the others (positive, divisible, sizes that fit size_t
 * and HDF5).  Returns 0, or -1 with err naming the offending field. */
int config_validate(const ModelConfig *c, char *err, size_t errlen);

/* The shape named tinyllama-1.1b, gpt2-small, stories260k, llama2-7b or llama3-8b (Llama
 * 3.1's RoPE scaling as its rope_freq_factors); -1 for another name. */
int config_preset(const char *name, ModelConfig *out);

/* Llama 3.1's rope_scaling (HF config.json, rope_type "llama3"). */
typedef struct {
    double factor, low_freq_factor, high_freq_factor, original_max_positions;
} RopeScalingLlama3;

/* Llama 3.1 8B's figures: factor 8, low 1, high 4, 8192 original positions. */
RopeScalingLlama3 config_rope_scaling_llama31(void);
/* c's rope_freq_factors from s for its head_dim and rope_theta, as llama.cpp's
 * convert_hf_to_gguf.py makes rope_freqs.weight (frequency i divided by 1 above high_freq
 * wavelengths, by factor below low_freq ones, smoothly between); -1 when head_dim / 2 is
 * outside 1..CONFIG_MAX_ROPE_PAIRS. */
int config_set_rope_scaling_llama3(ModelConfig *c, const RopeScalingLlama3 *s);

const char *config_arch_name(Arch a);
const char *config_rope_name(RopeStyle r);

/* The dataset name of a matrix kind ("wq", "embed"); layer kinds live under /layers/<l>/. */
const char *config_wkind_name(WeightKind k);
/* Parameter counts (floats) of one layer's pieces, for memory accounting and placement. */
size_t config_attn_unit_floats(const ModelConfig *c, int n_q_heads); /* wq part + wk + wv (+ biases) */
size_t config_proj_floats(const ModelConfig *c);                      /* wo (+ bo) */
size_t config_ffn_floats(const ModelConfig *c, int ffn_cols);        /* gate/up/down slice (+ biases, norms) */
size_t config_layer_floats(const ModelConfig *c);
/* The same in bytes of the stored types (c->wtype; norms and biases float32): what a rank
 * holds, for budgets, placement and the metrics.  config_proj_cols_bytes: ncols columns of
 * the output projection (the row-parallel share of a head range). */
size_t config_attn_unit_bytes(const ModelConfig *c, int n_q_heads);
size_t config_proj_bytes(const ModelConfig *c);
size_t config_proj_cols_bytes(const ModelConfig *c, int ncols);
size_t config_ffn_bytes(const ModelConfig *c, int ffn_cols);
size_t config_layer_bytes(const ModelConfig *c);
/* n_rows rows of the LM head (of the embedding when tied). */
size_t config_head_rows_bytes(const ModelConfig *c, int n_rows);
/* Values per block of a matrix kind's stored type (1 for float types): column cuts of it
 * must fall on multiples of this. */
int config_wkind_block(const ModelConfig *c, WeightKind k);
/* 1 if a matrix that reads a layer's input or the final norm's output (wq, wk, wv, w_gate,
 * w_up, the LM head) is stored in a type other than float32: its input is rounded first
 * (to Q8_0, Q8_K, fp16 or bf16), so a last-bit difference of that input can move it by a
 * whole rounding step. */
int config_rounds_activations(const ModelConfig *c);
/* Bytes of KV cache for one KV group of one layer holding n positions (K and V rows in
 * c->kv_type: 4, 2 or 34/32 bytes per value). */
size_t config_kv_bytes(const ModelConfig *c, int n_positions);

#endif
