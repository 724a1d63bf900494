/* TEMPORARY (branch eng): one-position loops standing in for the batch branch's kernels. */
#include "model.h"
#include <math.h>

void model_scratch_init_batch(Scratch *s, const ModelConfig *c, int kv_cap, int max_batch)
{
    (void)max_batch;
    model_scratch_init(s, c, kv_cap);
}
void model_attn_part_forward_n(const ModelConfig *c, AttnPartW *w, Scratch *s, const float *x,
                               int pos, int n, float *out, int out_stride)
{
    for (int i = 0; i < n; i++)
        model_attn_part_forward(c, w, s, x + (size_t)i * c->dim, pos + i,
                                out + (size_t)i * (size_t)out_stride);
}
void model_proj_forward_n(const ModelConfig *c, const ProjW *w, Scratch *s, const float *x,
                          const float *heads, float *z, int n)
{
    const size_t hw = (size_t)c->n_heads * (size_t)c->head_dim;
    for (int i = 0; i < n; i++)
        model_proj_forward(c, w, s, x + (size_t)i * c->dim, heads + i * hw, z + (size_t)i * c->dim);
}
void model_proj_partial_n(const ModelConfig *c, Scratch *s, const QMat *wo_cols,
                          const float *heads, int heads_stride, int ncols, float *partial, int n)
{
    for (int i = 0; i < n; i++)
        model_proj_partial(c, s, wo_cols, heads + (size_t)i * (size_t)heads_stride, ncols,
                           partial + (size_t)i * c->dim);
}
void model_ffn_delta_n(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                       float *delta, int n)
{
    for (int i = 0; i < n; i++)
        model_ffn_delta(c, w, s, z + (size_t)i * c->dim, delta + (size_t)i * c->dim);
}
float model_ffn_forward_n(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                          float *x_out, int n)
{
    float m = 0;
    for (int i = 0; i < n; i++) {
        float r = model_ffn_forward(c, w, s, z + (size_t)i * c->dim, x_out + (size_t)i * c->dim);
        if (!(r <= m))
            m = r;
    }
    return m;
}
void model_logits_rows_n(const ModelConfig *c, const HeadW *w, Scratch *s, const float *x,
                         int n_rows, float *logits, int n)
{
    for (int i = 0; i < n; i++)
        model_logits_rows(c, w, s, x + (size_t)i * c->dim, n_rows, logits + (size_t)i * n_rows);
}
