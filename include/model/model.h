/* model.h: the weights one rank holds (read-only after load), its KV cache, and the pieces of
 * the forward pass.  The single-process engine and the distributed workers call the same
 * functions, so their results are bit-identical.  No MPI here. */
#ifndef HEADSPLIT_MODEL_H
#define HEADSPLIT_MODEL_H

#include "config.h"
#include "quant.h"

#include <hdf5.h>
#include <stddef.h>

/* A weight matrix in its stored type (float32 is one type among the others): rows of cols
 * values, row i at data + i * row_stride bytes.  Loaded from a file it is exactly the rank's
 * slice of the file's blocks, never widened.  x8: the same bytes in quant.h's eight-row
 * groups, where the loader (weights.c) finds them faster (quant_x8_preferred: Q4_0 on x86),
 * read only by the matrix products; results stay bit-identical. */
typedef struct {
    QType type;
    int rows, cols;
    size_t row_stride; /* bytes; quant_row_bytes(type, cols) when loaded */
    void *data;        /* owned by the struct that holds it */
    int x8;            /* data in eight-row groups (quant_x8_pack) */
} QMat;

/* Bytes of a matrix's data (rows * row_stride). */
size_t model_qmat_bytes(const QMat *m);
void model_qmat_free(QMat *m);

/* One attention part: a KV group (unit) of one layer with query heads [q0, q1) of it. */
typedef struct {
    int layer, unit, q0, q1;
    float *norm_w, *norm_b; /* [dim] (norm_b: gpt2 only, else NULL) */
    QMat wq;                /* [(q1-q0)*hd][dim] */
    QMat wk, wv;            /* [hd][dim] */
    float *bq;              /* [(q1-q0)*hd] gpt2 */
    float *bk, *bv;         /* [hd] gpt2 */
    float *k_cache, *v_cache; /* [kv_cap][hd]: the caches of c->kv_type QTYPE_F32, else NULL */
    void *k_store, *v_store;  /* c->kv_type F16 / Q8_0: kv_cap rows of hd values in that type */
    int kv_cap;               /* positions the cache holds */
} AttnPartW;

/* The storage of w's K (which 0) or V (1) cache, whatever its type: kv_cap rows of
 * config_kv_bytes(c, 1) / 2 bytes each. */
void *model_attn_part_cache(AttnPartW *w, int which);
/* Fresh K and V caches of kv_cap positions for w in c->kv_type (zeroed, resident as
 * positions are written, so a whole context costs what it holds).  The cache pointers w had
 * are overwritten, not freed: a copy of a part (a sequence slot's) shares the part's weights
 * and has caches of its own. */
void model_attn_part_caches_new(const ModelConfig *c, AttnPartW *w, int kv_cap);
/* Frees w's caches alone (a copy's: its weights are the part's it copied). */
void model_attn_part_caches_free(AttnPartW *w);

/* Output projection of one layer: z = x + wo . heads (+ bo). */
typedef struct {
    int layer;
    QMat wo;   /* [dim][n_heads*hd] */
    float *bo; /* [dim] gpt2 */
} ProjW;

/* FFN of one layer (columns [f0, f1) of the inner width).  Row-sliced (model_load_ffn_rows,
 * --exchange exact): w_gate/w_up rows [f0, f1) as ever, but w_down holds rows [d0, d1) of
 * the model width whole ([d1-d0][ffn]); d0 = d1 = 0 otherwise. */
typedef struct {
    int layer, f0, f1;
    int d0, d1, down_rows; /* down_rows: w_down is row-sliced */
    float *norm_w, *norm_b; /* [dim] */
    QMat w_gate;            /* [f][dim] llama (data NULL for gpt2) */
    QMat w_up;              /* [f][dim] */
    float *b_up;            /* [f] gpt2 */
    QMat w_down;            /* [dim][f] */
    float *b_down;          /* [dim] gpt2 */
} FfnW;

/* Controller-only tensors. */
typedef struct {
    QMat embed;        /* [vocab][dim] */
    float *pos_embed;  /* [context][dim] gpt2 */
    float *final_norm; /* [dim] */
    float *final_norm_b; /* [dim] gpt2 */
    QMat lm_head;      /* [vocab][dim]; shares embed's data when tied */
} HeadW;

/* Scratch for one rank's forward pieces, allocated once (no allocation in the token loop).
 * B = max_batch rows (1 for model_scratch_init); the one-position pieces use row 0. */
typedef struct {
    int max_batch;   /* positions the *_n functions take at most */
    float *xn;       /* [B][dim] normalised input */
    float *q;        /* [B][n_heads*hd] */
    float *k, *v;    /* [hd] */
    float *att;      /* [n_heads][att_cap] scores, one row per head (heads run in parallel) */
    int att_cap;     /* positions a row of att holds (the kv_cap it was made for) */
    float *hb, *hb2; /* [B][ffn] */
    float *tmp;      /* [B][dim] */
    /* KV caches stored as F16 / Q8_0: the rows an attention call reads, dequantized
     * ([att_cap][hd] each, allocated at the first such call; resident as used). */
    float *kv_k, *kv_v;
    /* The current matvec input quantized to each vec-dot type (Q8_0, Q8_1, Q8_K, F16,
     * BF16), each large enough for B of the longest input; act_of says which input each one
     * holds (NULL: none, after every new input), act_rows how many of its rows. */
    void *act[5];
    const float *act_of[5];
    int act_rows[5];
    /* model_attn_part_forward_segs: the K and V rows of a pass of several sequences before
     * they go to their caches ([max_batch][hd] each, allocated at its first call). */
    float *seg_k, *seg_v;
} Scratch;

/* Loaders read exactly their slices with hyperslabs; return 0 or -1 with err. */
int model_load_attn_part(AttnPartW *w, const ModelConfig *c, hid_t file, const char *fname,
                         int layer, int unit, int q0, int q1, int kv_cap, char *err,
                         size_t errlen);
int model_load_proj(ProjW *w, const ModelConfig *c, hid_t file, const char *fname, int layer,
                    char *err, size_t errlen);
/* Columns [col0, col0+ncols) of layer's output projection wo [dim][n_heads*hd]: the
 * row-parallel share of the heads a rank holds.  *wo becomes [dim][ncols].  For a quantized
 * wo the range must start and end on block boundaries (else -1 naming the layer). */
int model_load_proj_cols(QMat *wo, const ModelConfig *c, hid_t file, const char *fname,
                         int layer, int col0, int ncols, char *err, size_t errlen);
/* Rows [d0, d1) of layer's output projection wo [dim][n_heads*hd], whole (any row
 * boundary): *wo becomes [d1-d0][n_heads*hd] (--exchange exact). */
int model_load_proj_rows(QMat *wo, const ModelConfig *c, hid_t file, const char *fname,
                         int layer, int d0, int d1, char *err, size_t errlen);
/* The output projection's bias bo [dim] alone (gpt2). */
int model_load_proj_bias(float **bo, const ModelConfig *c, hid_t file, const char *fname,
                         int layer, char *err, size_t errlen);
int model_load_ffn(FfnW *w, const ModelConfig *c, hid_t file, const char *fname, int layer,
                   int f0, int f1, char *err, size_t errlen);
/* The FFN by rows: w_gate/w_up rows [f0, f1) (with their biases), and w_down rows [d0, d1)
 * whole, the norm and b_down whole (--exchange exact). */
int model_load_ffn_rows(FfnW *w, const ModelConfig *c, hid_t file, const char *fname,
                        int layer, int f0, int f1, int d0, int d1, char *err, size_t errlen);
int model_load_head(HeadW *w, const ModelConfig *c, hid_t file, const char *fname, char *err,
                    size_t errlen);
/* A worker's share of the LM head: the final norm and rows [v0, v1) of lm_head (of the
 * embedding when tied) in w->lm_head; w->embed stays NULL. */
int model_load_head_rows(HeadW *w, const ModelConfig *c, hid_t file, const char *fname, int v0,
                         int v1, char *err, size_t errlen);
void model_free_attn_part(AttnPartW *w);
void model_free_proj(ProjW *w);
void model_free_ffn(FfnW *w);
void model_free_head(HeadW *w);

/* Bytes of weights held (for the metrics and budgets). */
size_t model_attn_part_bytes(const ModelConfig *c, const AttnPartW *w);
size_t model_ffn_bytes(const ModelConfig *c, const FfnW *w);
size_t model_proj_bytes(const ModelConfig *c, const ProjW *w);

void model_scratch_init(Scratch *s, const ModelConfig *c, int kv_cap);
/* Scratch able to run up to max_batch positions per call (model_scratch_init == batch 1). */
void model_scratch_init_batch(Scratch *s, const ModelConfig *c, int kv_cap, int max_batch);
void model_scratch_free(Scratch *s);

/* Attention part at position pos on layer input x[dim]: appends this unit's K/V at pos and
 * writes the part's head outputs out[(q1-q0)*hd]. */
void model_attn_part_forward(const ModelConfig *c, AttnPartW *w, Scratch *s, const float *x,
                             int pos, float *out);
/* The attention scale as llama.cpp's graph applies it, for q[n_q][hd] after RoPE: returns
 * the factor for the K.q scores (kernels_attention_scaled), 1/sqrtf(hd); where the model
 * scales q instead (c->q_prescale, llama.cpp's phi3), multiplies q by it and returns 1. */
float model_attn_q_scale(const ModelConfig *c, float *q, int n_q);
/* z[dim] = x + wo . heads[n_heads*hd] (+ bo). */
void model_proj_forward(const ModelConfig *c, const ProjW *w, Scratch *s, const float *x,
                        const float *heads, float *z);
/* partial[dim] = wo_cols[dim][ncols] . heads[ncols]: one rank's share of the projection. */
void model_proj_partial(const ModelConfig *c, Scratch *s, const QMat *wo_cols,
                        const float *heads, int ncols, float *partial);
/* delta[dim] = FFN(norm(z)) for this slice (partial sum when sliced; biases b_down added only
 * by the non-empty slice with f0 == 0). */
void model_ffn_delta(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                     float *delta);
/* x_out = z + FFN(z) for a whole FFN; returns ||FFN(z)|| / ||z|| (speculation's ratio). */
float model_ffn_forward(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                        float *x_out);

/* Multi-position forms of the functions above: n positions pos..pos+n-1 at once, each row
 * array packed [n][width] unless a stride is given (floats between consecutive positions).
 * Every weight matrix is streamed once for all n rows, and every output is bit-identical
 * to n calls of the one-position function in position order.  n <= the scratch's max_batch. */
void model_attn_part_forward_n(const ModelConfig *c, AttnPartW *w, Scratch *s,
                               const float *x /*[n][dim]*/, int pos, int n,
                               float *out, int out_stride /* >= (q1-q0)*hd */);
/* One sequence's rows in a pass of several (--parallel's slots): rows pos..pos+n-1 of the
 * sequence whose KV caches w holds (w: that sequence's copy of the attention part, the same
 * weights, its own caches). */
typedef struct {
    AttnPartW *w;
    int pos, n;
} AttnSeg;
/* model_attn_part_forward_n for the rows of several sequences in one pass: x[rows][dim] is
 * segs[0]'s n rows, then segs[1]'s, ...; every weight matrix streamed once for all of them;
 * each row's K and V go to its own sequence's cache and its attention reads only that cache,
 * so each sequence's outputs are bit-identical to model_attn_part_forward_n on its rows
 * alone.  The rows in all <= the scratch's max_batch; the segments share the weights. */
void model_attn_part_forward_segs(const ModelConfig *c, Scratch *s, const float *x,
                                  const AttnSeg *segs, int n_segs, float *out, int out_stride);
void model_proj_forward_n(const ModelConfig *c, const ProjW *w, Scratch *s,
                          const float *x /*[n][dim]*/, const float *heads /*[n][n_heads*hd]*/,
                          float *z /*[n][dim]*/, int n);
void model_proj_partial_n(const ModelConfig *c, Scratch *s, const QMat *wo_cols,
                          const float *heads, int heads_stride, int ncols,
                          float *partial /*[n][dim]*/, int n);
void model_ffn_delta_n(const ModelConfig *c, const FfnW *w, Scratch *s,
                       const float *z /*[n][dim]*/, float *delta /*[n][dim]*/, int n);
/* Row slices (--exchange exact), each value bit-identical to model_proj_forward_n's and
 * model_ffn_forward_n's: z[i][d0 .. d0+rows) = x + (wo_rows . heads[i] + bo), with wo_rows
 * (w->wo) rows [d0, d0+rows) of wo and bo (may be NULL) the whole bias; other columns of
 * z are left alone (z may be x). */
void model_proj_rows_n(const ModelConfig *c, const ProjW *w, Scratch *s, int d0,
                       const float *x /*[n][dim]*/, const float *heads /*[n][n_heads*hd]*/,
                       float *z /*[n][dim]*/, int n);
/* The FFN's hidden activations of rows [f0, f1): hidden[i][0 .. f1-f0) (rows ldh floats
 * apart) = act(gate . norm(z[i])) * (up . norm(z[i])) (gpt2: gelu(up . norm + b_up)). */
void model_ffn_hidden_n(const ModelConfig *c, const FfnW *w, Scratch *s,
                        const float *z /*[n][dim]*/, float *hidden, int ldh, int n);
/* x_out[i][d0 .. d1) = z[i] + (w_down rows . hidden[i] + b_down) for a row-sliced FFN,
 * hidden[n][ffn] whole; other columns left alone (x_out may be z). */
void model_ffn_down_rows_n(const ModelConfig *c, const FfnW *w, Scratch *s,
                           const float *z /*[n][dim]*/, const float *hidden /*[n][ffn]*/,
                           float *x_out /*[n][dim]*/, int n);
/* x_out = z + FFN(z) per row; returns the largest ||FFN(z)||/||z|| of the n rows. */
float model_ffn_forward_n(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                          float *x_out, int n);
void model_logits_rows_n(const ModelConfig *c, const HeadW *w, Scratch *s,
                         const float *x /*[n][dim]*/, int n_rows,
                         float *logits /*[n][n_rows]*/, int n);

/* Bytes per second this process streams through the model's layers: synthetic copies of one
 * layer of c's shapes (at least min_bytes of weights, so that they stream from memory) run
 * through the functions above; the median of `passes` timed passes after a warm-up. */
double model_probe_layer_Bps(const ModelConfig *c, size_t min_bytes, int passes);
/* The same, and *cpu_Bps (may be NULL): the bytes per second of this process's CPU time (all
 * its threads), the rate a dilated rank is charged at (transport_dilation_owed). */
double model_probe_layer_speeds(const ModelConfig *c, size_t min_bytes, int passes,
                                double *cpu_Bps);

/* Controller: x[dim] = embedding of token at pos. */
void model_embed(const ModelConfig *c, const HeadW *w, int token, int pos, float *x);
/* Controller: logits[vocab] from the last layer's output x (final norm, LM head). */
void model_logits(const ModelConfig *c, const HeadW *w, Scratch *s, const float *x,
                  float *logits);
/* The same for the n_rows rows w->lm_head holds: every logit bit-identical to the full
 * model_logits's (the kernel sums each row in an order that depends only on its length). */
void model_logits_rows(const ModelConfig *c, const HeadW *w, Scratch *s, const float *x,
                       int n_rows, float *logits);

#endif
