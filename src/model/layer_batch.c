/* layer_batch.c: the forward pieces of layer.c for n positions at once (batched prompts,
 * verified drafts).  Each weight matrix is applied to the n rows by one matrix-matrix kernel
 * (kernels_matmul, quant_matmul), which reads it from memory once and gives every row the bits
 * the matrix-vector kernel gives it; everything per position (norms, biases, RoPE, the KV
 * append, attention, activations) runs the one-position kernels row by row.  So every output
 * equals n calls of the one-position function in position order, bit for bit
 * (tests/unit/test_layer_batch.c). */
#include "kernels.h"
#include "layer_internal.h"
#include "model.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void model_scratch_init_batch(Scratch *s, const ModelConfig *c, int kv_cap, int max_batch)
{
    CHECK(max_batch >= 1, "scratch: batch of %d positions", max_batch);
    const size_t B = (size_t)max_batch;
    const size_t qd = (size_t)c->n_heads * (size_t)c->head_dim;
    memset(s, 0, sizeof *s);
    s->max_batch = max_batch;
    s->xn = xcalloc(B * (size_t)c->dim, sizeof(float));
    s->q = xcalloc(B * qd, sizeof(float));
    s->k = xcalloc((size_t)c->head_dim, sizeof(float));
    s->v = xcalloc((size_t)c->head_dim, sizeof(float));
    s->att_cap = kv_cap > 0 ? kv_cap : 1;
    s->att = xcalloc((size_t)s->att_cap * (size_t)(c->n_heads > 0 ? c->n_heads : 1),
                     sizeof(float));
    s->hb = xcalloc(B * (size_t)c->ffn_dim, sizeof(float));
    s->hb2 = xcalloc(B * (size_t)c->ffn_dim, sizeof(float));
    s->tmp = xcalloc(B * (size_t)c->dim, sizeof(float));
    /* The longest matvec input, at 2 bytes a value (F16/BF16; the Q8 types take less). */
    size_t n = (size_t)c->dim;
    if ((size_t)c->ffn_dim > n)
        n = (size_t)c->ffn_dim;
    if (qd > n)
        n = qd;
    for (int i = 0; i < 5; i++)
        s->act[i] = xcalloc(B * (2 * n + 512), 1);
    layer_act_reset(s);
}

/* Y[b] = W . X[b] for the n rows (X rows ldx floats apart, Y rows ldy apart): the matvec of
 * layer.c row for row, as one matrix-matrix product.  Quantized weights take each row of X in
 * their vec-dot type, once per input buffer until layer_act_reset. */
static void matmul_n(Scratch *s, float *y, size_t ldy, const QMat *w, const float *x,
                     size_t ldx, int n)
{
    if (w->cols == 0 && w->rows > 0) { /* an empty FFN slice adds nothing */
        for (int b = 0; b < n; b++)
            memset(y + (size_t)b * ldy, 0, (size_t)w->rows * sizeof(float));
        return;
    }
    if (w->type == QTYPE_F32) {
        const size_t ldw = w->row_stride / sizeof(float);
        if (kernels_get_matvec() == MATVEC_BLAS) { /* BLAS's order: the matvec, row by row */
            for (int b = 0; b < n; b++)
                kernels_matvec_ld(y + (size_t)b * ldy, w->data, x + (size_t)b * ldx, w->cols,
                                  w->rows, ldw);
            return;
        }
        kernels_matmul(y, w->data, x, w->cols, w->rows, n, ldw, ldx, ldy);
        return;
    }
    const int slot = layer_act_slot(w->type);
    const size_t ab = quant_row_bytes(quant_vec_dot_type(w->type), w->cols);
    if (s->act_of[slot] != x || s->act_rows[slot] < n) {
        for (int b = 0; b < n; b++)
            quant_quantize_act((char *)s->act[slot] + (size_t)b * ab, x + (size_t)b * ldx,
                               w->type, w->cols);
        s->act_of[slot] = x;
        s->act_rows[slot] = n;
    }
    if (w->x8)
        quant_matmul_x8(y, w->data, w->type, s->act[slot], ab, w->cols, w->rows, n, ldy);
    else
        quant_matmul(y, w->data, w->type, w->row_stride, s->act[slot], ab, w->cols, w->rows, n,
                     ldy);
}

/* RoPE of one row at position p: its nq query heads (qi) and its K head (ki). */
static void rope_row(const ModelConfig *c, float *qi, float *ki, int nq, int p)
{
    if (c->rope_style == ROPE_NONE)
        return;
    const int hd = c->head_dim, inter = c->rope_style == ROPE_INTERLEAVED;
    if (c->n_rope_freq_factors > 0) { /* Llama 3.1 scaling */
        kernels_rope_factors(qi, nq, hd, p, c->rope_theta, inter, c->rope_freq_factors);
        kernels_rope_factors(ki, 1, hd, p, c->rope_theta, inter, c->rope_freq_factors);
    } else {
        kernels_rope(qi, nq, hd, p, c->rope_theta, inter);
        kernels_rope(ki, 1, hd, p, c->rope_theta, inter);
    }
}

/* b added to each of the n rows of y (ldy apart); nothing when b is NULL. */
static void add_bias_n(float *y, size_t ldy, const float *b, int width, int n)
{
    if (b)
        for (int i = 0; i < n; i++)
            kernels_add(y + (size_t)i * ldy, b, width);
}

static void check_batch(const Scratch *s, int n, const char *what)
{
    CHECK(n >= 1 && n <= s->max_batch, "%s: %d positions, the scratch takes 1..%d", what, n,
          s->max_batch);
}

void model_attn_part_forward_n(const ModelConfig *c, AttnPartW *w, Scratch *s, const float *x,
                               int pos, int n, float *out, int out_stride)
{
    const int hd = c->head_dim, nq = w->q1 - w->q0, dim = c->dim;
    const size_t qd = (size_t)nq * (size_t)hd;
    check_batch(s, n, "attention");
    CHECK(pos >= 0 && pos + n <= w->kv_cap, "positions %d..%d beyond the KV cache (%d "
          "positions) of layer %d unit %d", pos, pos + n - 1, w->kv_cap, w->layer, w->unit);
    CHECK((size_t)out_stride >= qd, "attention: output stride %d below %zu", out_stride, qd);
    for (int i = 0; i < n; i++)
        layer_pre_norm(c, s->xn + (size_t)i * dim, x + (size_t)i * dim, w->norm_w, w->norm_b);
    layer_act_reset(s);
    float *k, *v;
    layer_kv_rows(c, w, s, pos, n, &k, &v);
    matmul_n(s, s->q, qd, &w->wq, s->xn, (size_t)dim, n);
    add_bias_n(s->q, qd, w->bq, (int)qd, n);
    matmul_n(s, k, (size_t)hd, &w->wk, s->xn, (size_t)dim, n); /* appended at pos..pos+n-1 */
    add_bias_n(k, (size_t)hd, w->bk, hd, n);
    matmul_n(s, v, (size_t)hd, &w->wv, s->xn, (size_t)dim, n);
    add_bias_n(v, (size_t)hd, w->bv, hd, n);
    for (int i = 0; i < n; i++)
        rope_row(c, s->q + (size_t)i * qd, k + (size_t)i * (size_t)hd, nq, pos + i);
    /* Position p sees 0..p (the causal mask inside the batch), the last W with a window;
     * phi3 scales q first (position by position, before any attention reads it). */
    float kq_scale = 1.0f;
    for (int i = 0; i < n; i++)
        kq_scale = model_attn_q_scale(c, s->q + (size_t)i * qd, nq);
    const float *kc, *vc;
    layer_kv_commit(c, w, s, pos, n, &kc, &vc);
    layer_attention(c, s, out, (size_t)out_stride, s->q, qd, kc, vc, nq, pos, n, kq_scale);
}

void model_attn_part_forward_segs(const ModelConfig *c, Scratch *s, const float *x,
                                  const AttnSeg *segs, int n_segs, float *out, int out_stride)
{
    CHECK(n_segs >= 1, "attention: a pass of %d sequences", n_segs);
    const AttnPartW *w0 = segs[0].w;
    const int hd = c->head_dim, nq = w0->q1 - w0->q0, dim = c->dim;
    const size_t qd = (size_t)nq * (size_t)hd;
    int n = 0;
    for (int i = 0; i < n_segs; i++) {
        const AttnPartW *w = segs[i].w;
        CHECK(w->wq.data == w0->wq.data && w->q0 == w0->q0 && w->q1 == w0->q1,
              "attention: the sequences of a pass hold different weights");
        CHECK(segs[i].n >= 1 && segs[i].pos >= 0 && segs[i].pos + segs[i].n <= w->kv_cap,
              "positions %d..%d beyond the KV cache (%d positions) of layer %d unit %d",
              segs[i].pos, segs[i].pos + segs[i].n - 1, w->kv_cap, w->layer, w->unit);
        n += segs[i].n;
    }
    check_batch(s, n, "attention");
    CHECK((size_t)out_stride >= qd, "attention: output stride %d below %zu", out_stride, qd);
    if (!s->seg_k) {
        s->seg_k = xcalloc((size_t)s->max_batch * (size_t)hd, sizeof(float));
        s->seg_v = xcalloc((size_t)s->max_batch * (size_t)hd, sizeof(float));
    }
    /* model_attn_part_forward_n's steps in its order, the products over every row at once;
     * K and V into the scratch's rows, then each sequence's into its cache */
    for (int i = 0; i < n; i++)
        layer_pre_norm(c, s->xn + (size_t)i * dim, x + (size_t)i * dim, w0->norm_w, w0->norm_b);
    layer_act_reset(s);
    float *k = s->seg_k, *v = s->seg_v;
    matmul_n(s, s->q, qd, &w0->wq, s->xn, (size_t)dim, n);
    add_bias_n(s->q, qd, w0->bq, (int)qd, n);
    matmul_n(s, k, (size_t)hd, &w0->wk, s->xn, (size_t)dim, n);
    add_bias_n(k, (size_t)hd, w0->bk, hd, n);
    matmul_n(s, v, (size_t)hd, &w0->wv, s->xn, (size_t)dim, n);
    add_bias_n(v, (size_t)hd, w0->bv, hd, n);
    for (int g = 0, i = 0; g < n_segs; g++)
        for (int j = 0; j < segs[g].n; j++, i++)
            rope_row(c, s->q + (size_t)i * qd, k + (size_t)i * (size_t)hd, nq,
                     segs[g].pos + j);
    float kq_scale = 1.0f;
    for (int i = 0; i < n; i++)
        kq_scale = model_attn_q_scale(c, s->q + (size_t)i * qd, nq);
    for (int g = 0, i = 0; g < n_segs; i += segs[g].n, g++) {
        AttnPartW *w = segs[g].w;
        const int pos = segs[g].pos, m = segs[g].n;
        const size_t bytes = (size_t)m * (size_t)hd * sizeof(float);
        float *kc_rows, *vc_rows;
        layer_kv_rows(c, w, s, pos, m, &kc_rows, &vc_rows);
        memcpy(kc_rows, k + (size_t)i * (size_t)hd, bytes);
        memcpy(vc_rows, v + (size_t)i * (size_t)hd, bytes);
        const float *kc, *vc;
        layer_kv_commit(c, w, s, pos, m, &kc, &vc);
        layer_attention(c, s, out + (size_t)i * (size_t)out_stride, (size_t)out_stride,
                        s->q + (size_t)i * qd, qd, kc, vc, nq, pos, m, kq_scale);
    }
}

void model_proj_forward_n(const ModelConfig *c, const ProjW *w, Scratch *s, const float *x,
                          const float *heads, float *z, int n)
{
    const size_t dim = (size_t)c->dim, hw = (size_t)c->n_heads * (size_t)c->head_dim;
    check_batch(s, n, "projection");
    layer_act_reset(s);
    matmul_n(s, s->tmp, dim, &w->wo, heads, hw, n);
    add_bias_n(s->tmp, dim, w->bo, c->dim, n);
    if (z != x)
        memcpy(z, x, (size_t)n * dim * sizeof(float));
    for (int i = 0; i < n; i++)
        kernels_add(z + (size_t)i * dim, s->tmp + (size_t)i * dim, c->dim);
}

void model_proj_partial_n(const ModelConfig *c, Scratch *s, const QMat *wo_cols,
                          const float *heads, int heads_stride, int ncols, float *partial, int n)
{
    CHECK(wo_cols->cols == ncols && wo_cols->rows == c->dim, "projection columns: %d x %d "
          "held, %d x %d asked", wo_cols->rows, wo_cols->cols, c->dim, ncols);
    CHECK(heads_stride >= ncols, "projection: heads stride %d below %d columns", heads_stride,
          ncols);
    check_batch(s, n, "projection");
    layer_act_reset(s);
    matmul_n(s, partial, (size_t)c->dim, wo_cols, heads, (size_t)heads_stride, n);
}

void model_proj_rows_n(const ModelConfig *c, const ProjW *w, Scratch *s, int d0,
                       const float *x, const float *heads, float *z, int n)
{
    const int rows = w->wo.rows;
    const size_t dim = (size_t)c->dim, hw = (size_t)c->n_heads * (size_t)c->head_dim;
    CHECK(w->wo.cols == (int)hw && d0 >= 0 && d0 + rows <= c->dim, "projection rows: %d x %d "
          "from row %d held, rows of width %zu within %d asked", rows, w->wo.cols, d0, hw,
          c->dim);
    check_batch(s, n, "projection");
    if (rows == 0)
        return;
    layer_act_reset(s);
    /* the order of model_proj_forward_n, on these rows: the product, its bias, then x */
    matmul_n(s, s->tmp, (size_t)rows, &w->wo, heads, hw, n);
    add_bias_n(s->tmp, (size_t)rows, w->bo ? w->bo + d0 : NULL, rows, n);
    for (int i = 0; i < n; i++) {
        float *zi = z + (size_t)i * dim + d0;
        if (z != x)
            memcpy(zi, x + (size_t)i * dim + d0, (size_t)rows * sizeof(float));
        kernels_add(zi, s->tmp + (size_t)i * (size_t)rows, rows);
    }
}

void model_ffn_hidden_n(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                        float *hidden, int ldh, int n)
{
    const int f = w->f1 - w->f0;
    const size_t dim = (size_t)c->dim;
    check_batch(s, n, "FFN");
    CHECK(ldh >= f, "FFN: hidden stride %d below %d rows", ldh, f);
    if (f == 0)
        return;
    for (int i = 0; i < n; i++)
        layer_pre_norm(c, s->xn + (size_t)i * dim, z + (size_t)i * dim, w->norm_w, w->norm_b);
    layer_act_reset(s);
    if (c->arch == ARCH_GPT2) {
        matmul_n(s, hidden, (size_t)ldh, &w->w_up, s->xn, dim, n);
        add_bias_n(hidden, (size_t)ldh, w->b_up, f, n);
        for (int i = 0; i < n; i++)
            layer_gelu(c, hidden + (size_t)i * (size_t)ldh, f);
    } else {
        matmul_n(s, hidden, (size_t)ldh, &w->w_gate, s->xn, dim, n);
        matmul_n(s, s->hb2, (size_t)f, &w->w_up, s->xn, dim, n);
        for (int i = 0; i < n; i++)
            kernels_swiglu(hidden + (size_t)i * (size_t)ldh, s->hb2 + (size_t)i * (size_t)f, f);
    }
}

void model_ffn_down_rows_n(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                           const float *hidden, float *x_out, int n)
{
    const int rows = w->d1 - w->d0;
    const size_t dim = (size_t)c->dim;
    CHECK(w->down_rows && w->w_down.rows == rows && w->w_down.cols == c->ffn_dim,
          "FFN down rows: %d x %d held, %d x %d asked", w->w_down.rows, w->w_down.cols, rows,
          c->ffn_dim);
    check_batch(s, n, "FFN");
    if (rows == 0)
        return;
    layer_act_reset(s);
    /* model_ffn_forward_n's order on these rows: the product, b_down, then z */
    matmul_n(s, s->tmp, (size_t)rows, &w->w_down, hidden, (size_t)c->ffn_dim, n);
    add_bias_n(s->tmp, (size_t)rows, w->b_down ? w->b_down + w->d0 : NULL, rows, n);
    for (int i = 0; i < n; i++) {
        float *xo = x_out + (size_t)i * dim + w->d0;
        if (x_out != z)
            memcpy(xo, z + (size_t)i * dim + w->d0, (size_t)rows * sizeof(float));
        kernels_add(xo, s->tmp + (size_t)i * (size_t)rows, rows);
    }
}

void model_ffn_delta_n(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                       float *delta, int n)
{
    const int f = w->f1 - w->f0;
    const size_t dim = (size_t)c->dim;
    check_batch(s, n, "FFN");
    for (int i = 0; i < n; i++)
        layer_pre_norm(c, s->xn + (size_t)i * dim, z + (size_t)i * dim, w->norm_w, w->norm_b);
    layer_act_reset(s);
    if (c->arch == ARCH_GPT2) {
        matmul_n(s, s->hb, (size_t)f, &w->w_up, s->xn, dim, n);
        add_bias_n(s->hb, (size_t)f, w->b_up, f, n);
        for (int i = 0; i < n; i++)
            layer_gelu(c, s->hb + (size_t)i * (size_t)f, f);
    } else {
        matmul_n(s, s->hb, (size_t)f, &w->w_gate, s->xn, dim, n);
        matmul_n(s, s->hb2, (size_t)f, &w->w_up, s->xn, dim, n);
        for (int i = 0; i < n; i++)
            kernels_swiglu(s->hb + (size_t)i * (size_t)f, s->hb2 + (size_t)i * (size_t)f, f);
    }
    matmul_n(s, delta, dim, &w->w_down, s->hb, (size_t)f, n);
    if (w->f0 == 0 && w->f1 > 0) /* the one non-empty slice at column 0, as model_ffn_delta */
        add_bias_n(delta, dim, w->b_down, c->dim, n);
}

float model_ffn_forward_n(const ModelConfig *c, const FfnW *w, Scratch *s, const float *z,
                          float *x_out, int n)
{
    const size_t dim = (size_t)c->dim;
    model_ffn_delta_n(c, w, s, z, s->tmp, n);
    float worst = 0.0f;
    for (int i = 0; i < n; i++) {
        const float *zi = z + (size_t)i * dim, *di = s->tmp + (size_t)i * dim;
        const double nz = layer_norm2(zi, c->dim), nd = layer_norm2(di, c->dim);
        const float ratio = nz > 0 ? (float)(nd / nz) : INFINITY;
        if (i == 0 || ratio > worst)
            worst = ratio;
        float *xo = x_out + (size_t)i * dim;
        if (xo != zi)
            memcpy(xo, zi, dim * sizeof(float));
        kernels_add(xo, di, c->dim);
    }
    return worst;
}

void model_logits_rows_n(const ModelConfig *c, const HeadW *w, Scratch *s, const float *x,
                         int n_rows, float *logits, int n)
{
    const size_t dim = (size_t)c->dim;
    check_batch(s, n, "LM head");
    for (int i = 0; i < n; i++)
        layer_pre_norm(c, s->xn + (size_t)i * dim, x + (size_t)i * dim, w->final_norm,
                       w->final_norm_b);
    layer_act_reset(s);
    QMat head = w->lm_head;
    CHECK(n_rows <= head.rows, "LM head: %d rows asked, %d held", n_rows, head.rows);
    head.rows = n_rows;
    matmul_n(s, logits, (size_t)n_rows, &head, s->xn, dim, n);
}
