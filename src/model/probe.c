/* probe.c: how fast this rank runs the model's layers, measured by running synthetic copies of
 * one layer of the model's shapes through the very forward functions the engine calls (norms,
 * RoPE, attention, SwiGLU/GELU and biases included), so the cost model sees the engine's speed
 * rather than a bare kernel's. */
#include "model.h"
#include "quant.h"
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char *buf; /* every weight of every copy, one huge-page buffer; NULL: measuring */
    size_t used, cap;   /* bytes, each piece 64-byte aligned */
    size_t raw;         /* bytes of the pieces themselves (config_layer_bytes's count) */
    size_t stride;      /* bytes of one copy of the layer (0 while measuring) */
    uint32_t rng;
} Arena;

/* The next piece of n bytes.  Only the first copy of the layer is generated (copy 0); later
 * copies repeat it with memcpy, which keeps the probe quick on small models of many copies
 * (and under sanitizers).  Returns NULL while measuring, or p and *fresh = whether it must
 * be generated. */
static unsigned char *piece(Arena *a, size_t n, int *fresh)
{
    size_t off = (a->used + 63) & ~(size_t)63;
    a->used = off + n;
    a->raw += n;
    *fresh = 0;
    if (!a->buf)
        return NULL;
    CHECK(a->used <= a->cap, "probe: arena overflow (%zu > %zu bytes)", a->used, a->cap);
    unsigned char *p = a->buf + off;
    if (off >= a->stride)
        memcpy(p, p - a->stride, n);
    else
        *fresh = 1;
    return p;
}

static float rnd(Arena *a)
{
    a->rng = a->rng * 1664525u + 1013904223u;
    return ((float)(a->rng >> 9) * (1.0f / 8388608.0f) - 0.5f) * 0.04f;
}

/* n floats: small pseudo-random values, or `fill` when fill >= 0. */
static float *carve(Arena *a, size_t n, float fill)
{
    int fresh;
    float *p = (float *)piece(a, n * sizeof(float), &fresh);
    for (size_t i = 0; fresh && i < n; i++)
        p[i] = fill >= 0 ? fill : rnd(a);
    return p;
}

/* A rows x cols matrix in the model's stored type of kind k: float32 random throughout,
 * other types one random row quantized and repeated (the speed does not depend on it). */
static QMat carve_mat(Arena *a, const ModelConfig *c, WeightKind k, int rows, int cols)
{
    const QType t = (QType)c->wtype[k];
    QMat m = {.type = t, .rows = rows, .cols = cols, .row_stride = quant_row_bytes(t, cols)};
    if (t == QTYPE_F32) {
        m.data = carve(a, (size_t)rows * (size_t)cols, -1);
        return m;
    }
    int fresh;
    unsigned char *p = piece(a, (size_t)rows * m.row_stride, &fresh);
    m.data = p;
    if (fresh) {
        float *row = xmalloc((size_t)cols * sizeof(float));
        for (int i = 0; i < cols; i++)
            row[i] = rnd(a);
        quant_quantize_row(p, row, t, cols);
        for (int r = 1; r < rows; r++)
            memcpy(p + (size_t)r * m.row_stride, p, m.row_stride);
        free(row);
    }
    return m;
}

/* Lays out (or, with a->buf NULL, measures) `copies` copies of one layer. */
static void layout(Arena *a, const ModelConfig *c, size_t copies, int kv_cap, AttnPartW *parts,
                   ProjW *proj, FfnW *ffn)
{
    const int units = c->n_kv_heads, qpk = config_q_per_kv(c), hd = c->head_dim;
    const int dim = c->dim, f = c->ffn_dim, gpt2 = c->arch == ARCH_GPT2;
    for (size_t k = 0; k < copies; k++) {
        for (int u = 0; u < units; u++) {
            AttnPartW *w = &parts[k * (size_t)units + (size_t)u];
            *w = (AttnPartW){.layer = (int)k, .unit = u, .q0 = 0, .q1 = qpk, .kv_cap = kv_cap};
            w->norm_w = carve(a, (size_t)dim, 1.0f);
            w->wq = carve_mat(a, c, WKIND_WQ, qpk * hd, dim);
            w->wk = carve_mat(a, c, WKIND_WK, hd, dim);
            w->wv = carve_mat(a, c, WKIND_WV, hd, dim);
            if (gpt2)
                w->norm_b = carve(a, (size_t)dim, 0.0f);
            if (gpt2 || c->qkv_bias) {
                w->bq = carve(a, (size_t)qpk * (size_t)hd, 0.0f);
                w->bk = carve(a, (size_t)hd, 0.0f);
                w->bv = carve(a, (size_t)hd, 0.0f);
            }
        }
        proj[k].layer = (int)k;
        proj[k].wo = carve_mat(a, c, WKIND_WO, dim, c->n_heads * hd);
        if (gpt2)
            proj[k].bo = carve(a, (size_t)dim, 0.0f);
        FfnW *w = &ffn[k];
        *w = (FfnW){.layer = (int)k, .f0 = 0, .f1 = f};
        w->norm_w = carve(a, (size_t)dim, 1.0f);
        if (gpt2) {
            w->norm_b = carve(a, (size_t)dim, 0.0f);
            w->b_up = carve(a, (size_t)f, 0.0f);
            w->b_down = carve(a, (size_t)dim, 0.0f);
        } else {
            w->w_gate = carve_mat(a, c, WKIND_W_GATE, f, dim);
        }
        w->w_up = carve_mat(a, c, WKIND_W_UP, f, dim);
        w->w_down = carve_mat(a, c, WKIND_W_DOWN, dim, f);
    }
}

double model_probe_layer_Bps(const ModelConfig *c, size_t min_bytes, int passes)
{
    return model_probe_layer_speeds(c, min_bytes, passes, NULL);
}

double model_probe_layer_speeds(const ModelConfig *c, size_t min_bytes, int passes,
                                double *cpu_Bps)
{
    const int units = c->n_kv_heads, qpk = config_q_per_kv(c), hd = c->head_dim;
    const int dim = c->dim;
    const size_t layer = config_layer_bytes(c);
    size_t copies = min_bytes / layer + 1;
    if (passes < 1)
        passes = 1;
    AttnPartW *parts = xcalloc(copies * (size_t)units, sizeof(AttnPartW));
    ProjW *proj = xcalloc(copies, sizeof(ProjW));
    FfnW *ffn = xcalloc(copies, sizeof(FfnW));
    const int kv_cap = passes + 1;
    Arena a = {0};
    layout(&a, c, 1, kv_cap, parts, proj, ffn); /* measures one copy */
    CHECK(a.raw == layer, "probe: %zu of %zu bytes laid out (config_layer_bytes disagrees)",
          a.raw, layer);
    const size_t stride = (a.used + 63) & ~(size_t)63;
    a = (Arena){.buf = xmalloc_big(copies * stride), .cap = copies * stride, .stride = stride,
                .rng = 12345u};
    layout(&a, c, copies, kv_cap, parts, proj, ffn);
    for (size_t i = 0; i < copies * (size_t)units; i++) { /* caches of c->kv_type */
        if (c->kv_type == QTYPE_F32) {
            parts[i].k_cache = xcalloc((size_t)kv_cap * (size_t)hd, sizeof(float));
            parts[i].v_cache = xcalloc((size_t)kv_cap * (size_t)hd, sizeof(float));
        } else {
            parts[i].k_store = xcalloc((size_t)kv_cap, config_kv_bytes(c, 1) / 2);
            parts[i].v_store = xcalloc((size_t)kv_cap, config_kv_bytes(c, 1) / 2);
        }
    }
    Scratch s;
    model_scratch_init(&s, c, kv_cap);
    float *x = xmalloc((size_t)dim * sizeof(float)), *z = xmalloc((size_t)dim * sizeof(float));
    float *xo = xmalloc((size_t)dim * sizeof(float));
    float *heads = xcalloc((size_t)c->n_heads * (size_t)hd, sizeof(float));
    for (int i = 0; i < dim; i++)
        x[i] = (float)((i * 37) % 101) * 0.01f - 0.5f;
    double *t = xmalloc(2 * (size_t)passes * sizeof(double)), *tc = t + passes;
    for (int pos = 0; pos <= passes; pos++) { /* position 0 warms up (the fill faulted in) */
        double t0 = time_now(), c0 = time_cpu();
        for (size_t k = 0; k < copies; k++) {
            for (int u = 0; u < units; u++)
                model_attn_part_forward(c, &parts[k * (size_t)units + (size_t)u], &s, x, pos,
                                        heads + (size_t)u * (size_t)qpk * (size_t)hd);
            model_proj_forward(c, &proj[k], &s, x, heads, z);
            model_ffn_forward(c, &ffn[k], &s, z, xo);
        }
        if (pos > 0) {
            t[pos - 1] = time_now() - t0;
            tc[pos - 1] = time_cpu() - c0;
        }
    }
    const double median = util_median(t, (size_t)passes);
    const double cpu_median = util_median(tc, (size_t)passes);
    if (cpu_Bps)
        *cpu_Bps = (double)(copies * layer) / (cpu_median > 0 ? cpu_median : 1e-9);
    for (size_t i = 0; i < copies * (size_t)units; i++) {
        free(parts[i].k_cache);
        free(parts[i].v_cache);
        free(parts[i].k_store);
        free(parts[i].v_store);
    }
    free(parts);
    free(proj);
    free(ffn);
    free(a.buf);
    free(t);
    free(x);
    free(z);
    free(xo);
    free(heads);
    model_scratch_free(&s);
    return (double)(copies * layer) / (median > 0 ? median : 1e-9);
}
