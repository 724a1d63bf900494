/* layer.c: the forward-pass pieces one rank computes: attention parts, the output projection,
 * the FFN, the embedding and the LM head.  Both the single-process engine and the workers call
 * these, which is what makes their results bit-identical. */
#include "kernels.h"
#include "model.h"
#include "util.h"
#include "layer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void model_scratch_init(Scratch *s, const ModelConfig *c, int kv_cap)
{
    model_scratch_init_batch(s, c, kv_cap, 1);
}

void model_scratch_free(Scratch *s)
{
    if (!s)
        return;
    free(s->xn);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->att);
    free(s->hb);
    free(s->hb2);
    free(s->tmp);
    free(s->kv_k);
    free(s->kv_v);
    free(s->seg_k);
    free(s->seg_v);
    for (int i = 0; i < 5; i++)
        free(s->act[i]);
    memset(s, 0, sizeof *s);
}

void layer_pre_norm(const ModelConfig *c, float *out, const float *x, const float *w,
                    const float *b)
{
    if (c->arch == ARCH_GPT2)
        kernels_layernorm(out, x, w, b, c->norm_eps, c->dim);
    else
        kernels_rmsnorm(out, x, w, c->norm_eps, c->dim);
}

/* GELU in place: ggml's fp16 table form for GGUF imports (c->gelu_fp16), else the tanh form. */
void layer_gelu(const ModelConfig *c, float *x, int n)
{
    if (c->gelu_fp16)
        kernels_gelu_fp16(x, n);
    else
        kernels_gelu(x, n);
}

void layer_act_reset(Scratch *s)
{
    for (int i = 0; i < 5; i++) {
        s->act_of[i] = NULL;
        s->act_rows[i] = 0;
    }
}

int layer_act_slot(QType t)
{
    const QType vt = quant_vec_dot_type(t);
    return vt == QTYPE_Q8_0 ? 0 : vt == QTYPE_Q8_1 ? 1 : vt == QTYPE_Q8_K ? 2
         : vt == QTYPE_F16  ? 3 : 4;
}

/* y[w->rows] = W . x[w->cols].  Float32 runs the fp32 kernel exactly as before quantized
 * types existed; any other type takes x quantized to its vec-dot type, once per input
 * (Scratch caches it until act_reset) as llama.cpp does, then the block dot products. */
static void matvec(Scratch *s, float *y, const QMat *w, const float *x)
{
    if (w->cols == 0 && w->rows > 0) { /* an empty FFN slice adds nothing */
        memset(y, 0, (size_t)w->rows * sizeof(float));
        return;
    }
    if (w->type == QTYPE_F32) {
        if (w->row_stride == (size_t)w->cols * sizeof(float))
            kernels_matvec(y, w->data, x, w->cols, w->rows);
        else
            kernels_matvec_ld(y, w->data, x, w->cols, w->rows, w->row_stride / sizeof(float));
        return;
    }
    const int slot = layer_act_slot(w->type);
    if (s->act_of[slot] != x) {
        quant_quantize_act(s->act[slot], x, w->type, w->cols);
        s->act_of[slot] = x;
    }
    if (w->x8)
        quant_matvec_x8(y, w->data, w->type, s->act[slot], w->cols, w->rows);
    else
        quant_matvec(y, w->data, w->type, w->row_stride, s->act[slot], w->cols, w->rows);
}

static void add_bias(float *y, const float *b, int n)
{
    if (b)
        kernels_add(y, b, n);
}

void model_attn_part_forward(const ModelConfig *c, AttnPartW *w, Scratch *s, const float *x,
                             int pos, float *out)
{
    const int hd = c->head_dim, nq = w->q1 - w->q0;
    CHECK(pos >= 0 && pos < w->kv_cap, "position %d beyond the KV cache (%d positions) of "
          "layer %d unit %d", pos, w->kv_cap, w->layer, w->unit);
    layer_pre_norm(c, s->xn, x, w->norm_w, w->norm_b);
    layer_act_reset(s);
    matvec(s, s->q, &w->wq, s->xn);
    add_bias(s->q, w->bq, nq * hd);
    float *k, *v;
    layer_kv_rows(c, w, s, pos, 1, &k, &v);
    matvec(s, k, &w->wk, s->xn);
    add_bias(k, w->bk, hd);
    matvec(s, v, &w->wv, s->xn);
    add_bias(v, w->bv, hd);
    if (c->rope_style != ROPE_NONE) {
        int inter = c->rope_style == ROPE_INTERLEAVED;
        if (c->n_rope_freq_factors > 0) { /* Llama 3.1 scaling */
            kernels_rope_factors(s->q, nq, hd, pos, c->rope_theta, inter, c->rope_freq_factors);
            kernels_rope_factors(k, 1, hd, pos, c->rope_theta, inter, c->rope_freq_factors);
        } else {
            kernels_rope(s->q, nq, hd, pos, c->rope_theta, inter);
            kernels_rope(k, 1, hd, pos, c->rope_theta, inter);
        }
    }
    const float kq_scale = model_attn_q_scale(c, s->q, nq);
    const float *kc, *vc;
    layer_kv_commit(c, w, s, pos, 1, &kc, &vc);
    layer_attention(c, s, out, (size_t)nq * (size_t)hd, s->q, (size_t)nq * (size_t)hd, kc, vc,
                    nq, pos, 1, kq_scale);
}

/* An attention job for the pool: heads [lo, hi) of every position. */
typedef struct {
    float *out, *att;
    const float *q, *k_cache, *v_cache;
    size_t out_stride, q_stride, att_cap;
    int hd, pos, n, window;
    float scale;
} AttJob;

/* The first position that position p sees. */
static int att_first(int p, int window)
{
    return window > 0 && p + 1 > window ? p + 1 - window : 0;
}

static void att_heads(void *arg, int lo, int hi)
{
    const AttJob *j = arg;
    const size_t hd = (size_t)j->hd;
    for (int i = 0; i < j->n; i++) {
        const int p = j->pos + i, first = att_first(p, j->window);
        kernels_attention_scaled(j->out + (size_t)i * j->out_stride + (size_t)lo * hd,
                                 j->q + (size_t)i * j->q_stride + (size_t)lo * hd,
                                 j->k_cache + (size_t)first * hd, j->v_cache + (size_t)first * hd,
                                 j->att + (size_t)lo * j->att_cap, hi - lo, j->hd, p + 1 - first,
                                 j->scale);
    }
}

void layer_kv_rows(const ModelConfig *c, AttnPartW *w, Scratch *s, int pos, int n, float **k,
                   float **v)
{
    const size_t hd = (size_t)c->head_dim;
    if (c->kv_type == QTYPE_F32) {
        *k = w->k_cache + (size_t)pos * hd;
        *v = w->v_cache + (size_t)pos * hd;
        return;
    }
    CHECK(pos + n <= s->att_cap, "attention: positions up to %d, the scratch holds %d",
          pos + n, s->att_cap);
    if (!s->kv_k) {
        s->kv_k = xcalloc_lazy((size_t)s->att_cap * hd, sizeof(float));
        s->kv_v = xcalloc_lazy((size_t)s->att_cap * hd, sizeof(float));
    }
    *k = s->kv_k + (size_t)pos * hd;
    *v = s->kv_v + (size_t)pos * hd;
}

void layer_kv_commit(const ModelConfig *c, AttnPartW *w, Scratch *s, int pos, int n,
                     const float **k, const float **v)
{
    if (c->kv_type == QTYPE_F32) {
        *k = w->k_cache;
        *v = w->v_cache;
        return;
    }
    const QType t = (QType)c->kv_type;
    const size_t hd = (size_t)c->head_dim, row = config_kv_bytes(c, 1) / 2;
    const int first = att_first(pos, c->sliding_window);
    unsigned char *ks = w->k_store, *vs = w->v_store;
    const int64_t add = (int64_t)n * c->head_dim;
    quant_quantize_row(ks + (size_t)pos * row, s->kv_k + (size_t)pos * hd, t, add);
    quant_quantize_row(vs + (size_t)pos * row, s->kv_v + (size_t)pos * hd, t, add);
    const int64_t len = (int64_t)(pos + n - first) * c->head_dim;
    quant_dequantize_row(s->kv_k + (size_t)first * hd, ks + (size_t)first * row, t, len);
    quant_dequantize_row(s->kv_v + (size_t)first * hd, vs + (size_t)first * row, t, len);
    *k = s->kv_k;
    *v = s->kv_v;
}

void layer_attention(const ModelConfig *c, Scratch *s, float *out, size_t out_stride,
                     const float *q, size_t q_stride, const float *k_cache,
                     const float *v_cache, int nq, int pos, int n, float scale)
{
    CHECK(pos + n <= s->att_cap && nq <= c->n_heads, "attention: positions up to %d and %d "
          "heads, the scratch holds %d positions of %d heads", pos + n, nq, s->att_cap,
          c->n_heads);
    AttJob j = {out, s->att, q, k_cache, v_cache, out_stride, q_stride, (size_t)s->att_cap,
                c->head_dim, pos, n, c->sliding_window, scale};
    /* multiply-adds: q.k and the weighted sum of v, per head and visible position, counted
     * four times against the pool's threshold (set for weights streamed from memory): the
     * cache rows are read from cache and every score costs an exp besides, so the heads split
     * from about 16 positions (measured: Q4_0 TinyLlama decode of 64 tokens 4-7% faster at 2
     * threads than with the threshold of the products) */
    long long work = 0;
    for (int i = 0; i < n; i++)
        work += 2LL * (pos + i + 1 - att_first(pos + i, c->sliding_window)) * c->head_dim;
    kernels_parallel_rows(att_heads, &j, nq, 4 * work * nq);
}

float model_attn_q_scale(const ModelConfig *c, float *q, int n_q)
{
    const float scale = 1.0f / sqrtf((float)c->head_dim);
    if (!c->q_prescale)
        return scale;
    const int n = n_q * c->head_dim;
    for (int i = 0; i < n; i++) /* ggml_scale: one multiply per value */
        q[i] *= scale;
    return 1.0f;
}

void model_proj_forward(const ModelConfig *c, const ProjW *w, Scratch *s, const float *x,
                        const float *heads, float *z)
{
    layer_act_reset(s);
    matvec(s, s->tmp, &w->wo, heads);
    add_bias(s->tmp, w->bo, c->dim);
    if (z != x)
        memcpy(z, x, (size_t)c->dim * sizeof(float));
    kernels_add(z, s->tmp, c->dim);
}

void model_proj_partial(const ModelConfig *c, Scratch *s, const QMat *wo_cols,
                        const float *heads, int ncols, float *partial)
{
    CHECK(wo_cols->cols == ncols && wo_cols->rows == c->dim, "projection columns: %d x %d "
          "held, %d x %d asked", wo_cols->rows, wo_cols->cols, c->dim, ncols);
    layer_act_reset(s);
    matvec(s, partial, wo_cols, heads);
}

void model_ffn_delta(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                     float *delta)
{
    const int f = w->f1 - w->f0;
    layer_pre_norm(c, s->xn, z, w->norm_w, w->norm_b);
    layer_act_reset(s);
    if (c->arch == ARCH_GPT2) {
        matvec(s, s->hb, &w->w_up, s->xn);
        add_bias(s->hb, w->b_up, f);
        layer_gelu(c, s->hb, f);
    } else {
        matvec(s, s->hb, &w->w_gate, s->xn);
        matvec(s, s->hb2, &w->w_up, s->xn);
        kernels_swiglu(s->hb, s->hb2, f);
    }
    /* w_down holds columns [f0, f1) of a [dim][ffn] matrix, stored densely [dim][f]. */
    matvec(s, delta, &w->w_down, s->hb);
    if (w->f0 == 0 && w->f1 > 0) /* the one non-empty slice at column 0 (cuts rounded to
                                   * blocks can leave empty slices [0, 0) before it) */
        add_bias(delta, w->b_down, c->dim);
}

double layer_norm2(const float *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    return sqrt(s);
}

float model_ffn_forward(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                        float *x_out)
{
    model_ffn_delta(c, w, s, z, s->tmp);
    double nz = layer_norm2(z, c->dim), nd = layer_norm2(s->tmp, c->dim);
    if (x_out != z)
        memcpy(x_out, z, (size_t)c->dim * sizeof(float));
    kernels_add(x_out, s->tmp, c->dim);
    return nz > 0 ? (float)(nd / nz) : INFINITY;
}

void model_embed(const ModelConfig *c, const HeadW *w, int token, int pos, float *x)
{
    const QMat *e = &w->embed;
    CHECK(token >= 0 && token < e->rows, "token %d outside the embedding's %d rows", token,
          e->rows);
    const unsigned char *row = (const unsigned char *)e->data + (size_t)token * e->row_stride;
    if (e->type == QTYPE_F32)
        memcpy(x, row, (size_t)c->dim * sizeof(float));
    else
        quant_dequantize_row(x, row, e->type, c->dim);
    if (w->pos_embed)
        kernels_add(x, w->pos_embed + (size_t)pos * (size_t)c->dim, c->dim);
}

void model_logits(const ModelConfig *c, const HeadW *w, Scratch *s, const float *x,
                  float *logits)
{
    model_logits_rows(c, w, s, x, c->vocab_size, logits);
}

void model_logits_rows(const ModelConfig *c, const HeadW *w, Scratch *s, const float *x,
                       int n_rows, float *logits)
{
    layer_pre_norm(c, s->xn, x, w->final_norm, w->final_norm_b);
    layer_act_reset(s);
    QMat head = w->lm_head;
    CHECK(n_rows <= head.rows, "LM head: %d rows asked, %d held", n_rows, head.rows);
    head.rows = n_rows;
    matvec(s, logits, &head, s->xn);
}
