/* layer.c: the forward-pass pieces one rank computes: attention parts, the output projection,
 * the FFN, the embedding and the LM head.  Both the single-process engine and the workers call
 * these, which is what makes their results bit-identical. */
#include "kernels.h"
#include "model.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void model_scratch_init(Scratch *s, const ModelConfig *c, int kv_cap)
{
    size_t qd = (size_t)c->n_heads * (size_t)c->head_dim;
    s->xn = xcalloc((size_t)c->dim, sizeof(float));
    s->q = xcalloc(qd, sizeof(float));
    s->k = xcalloc((size_t)c->head_dim, sizeof(float));
    s->v = xcalloc((size_t)c->head_dim, sizeof(float));
    s->att = xcalloc((size_t)(kv_cap > 0 ? kv_cap : 1), sizeof(float));
    s->hb = xcalloc((size_t)c->ffn_dim, sizeof(float));
    s->hb2 = xcalloc((size_t)c->ffn_dim, sizeof(float));
    s->tmp = xcalloc((size_t)c->dim, sizeof(float));
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
    memset(s, 0, sizeof *s);
}

/* Pre-norm of the layer input: RMSNorm (llama) or LayerNorm (gpt2). */
static void pre_norm(const ModelConfig *c, float *out, const float *x, const float *w,
                     const float *b)
{
    if (c->arch == ARCH_GPT2)
        kernels_layernorm(out, x, w, b, c->norm_eps, c->dim);
    else
        kernels_rmsnorm(out, x, w, c->norm_eps, c->dim);
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
    pre_norm(c, s->xn, x, w->norm_w, w->norm_b);
    kernels_matvec(s->q, w->wq, s->xn, c->dim, nq * hd);
    add_bias(s->q, w->bq, nq * hd);
    float *k = w->k_cache + (size_t)pos * (size_t)hd;
    float *v = w->v_cache + (size_t)pos * (size_t)hd;
    kernels_matvec(k, w->wk, s->xn, c->dim, hd);
    add_bias(k, w->bk, hd);
    kernels_matvec(v, w->wv, s->xn, c->dim, hd);
    add_bias(v, w->bv, hd);
    if (c->rope_style != ROPE_NONE) {
        int inter = c->rope_style == ROPE_INTERLEAVED;
        kernels_rope(s->q, nq, hd, pos, c->rope_theta, inter);
        kernels_rope(k, 1, hd, pos, c->rope_theta, inter);
    }
    kernels_attention(out, s->q, w->k_cache, w->v_cache, s->att, nq, hd, pos + 1);
}

void model_proj_forward(const ModelConfig *c, const ProjW *w, Scratch *s, const float *x,
                        const float *heads, float *z)
{
    kernels_matvec(s->tmp, w->wo, heads, c->n_heads * c->head_dim, c->dim);
    add_bias(s->tmp, w->bo, c->dim);
    if (z != x)
        memcpy(z, x, (size_t)c->dim * sizeof(float));
    kernels_add(z, s->tmp, c->dim);
}

void model_proj_partial(const ModelConfig *c, const float *wo_cols, const float *heads,
                        int ncols, float *partial)
{
    kernels_matvec(partial, wo_cols, heads, ncols, c->dim);
}

void model_ffn_delta(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                     float *delta)
{
    const int f = w->f1 - w->f0;
    pre_norm(c, s->xn, z, w->norm_w, w->norm_b);
    if (c->arch == ARCH_GPT2) {
        kernels_matvec(s->hb, w->w_up, s->xn, c->dim, f);
        add_bias(s->hb, w->b_up, f);
        kernels_gelu(s->hb, f);
    } else {
        kernels_matvec(s->hb, w->w_gate, s->xn, c->dim, f);
        kernels_matvec(s->hb2, w->w_up, s->xn, c->dim, f);
        kernels_swiglu(s->hb, s->hb2, f);
    }
    /* w_down holds columns [f0, f1) of a [dim][ffn] matrix, stored densely [dim][f]. */
    kernels_matvec(delta, w->w_down, s->hb, f, c->dim);
    if (w->f0 == 0)
        add_bias(delta, w->b_down, c->dim);
}

/* Euclidean norm in double, so the ratio does not depend on float rounding of the sum. */
static double norm2(const float *x, int n)
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
    double nz = norm2(z, c->dim), nd = norm2(s->tmp, c->dim);
    if (x_out != z)
        memcpy(x_out, z, (size_t)c->dim * sizeof(float));
    kernels_add(x_out, s->tmp, c->dim);
    return nz > 0 ? (float)(nd / nz) : INFINITY;
}

void model_embed(const ModelConfig *c, const HeadW *w, int token, int pos, float *x)
{
    memcpy(x, w->embed + (size_t)token * (size_t)c->dim, (size_t)c->dim * sizeof(float));
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
    pre_norm(c, s->xn, x, w->final_norm, w->final_norm_b);
    kernels_matvec(logits, w->lm_head, s->xn, c->dim, n_rows);
}
