/* probe.c: how fast this rank runs the model's layers, measured by running synthetic copies of
 * one layer of the model's shapes through the very forward functions the engine calls (norms,
 * RoPE, attention, SwiGLU/GELU and biases included), so the cost model sees the engine's speed
 * rather than a bare kernel's. */
#include "model.h"
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *buf;   /* every weight of every copy, one huge-page buffer */
    size_t used, cap;
    uint32_t rng;
} Arena;

/* n floats of weights: small pseudo-random values, or `fill` when fill >= 0.  Only the first
 * copy of the layer is computed (copy 0); later copies repeat it with memcpy, which keeps the
 * probe quick on small models of many copies (and under sanitizers). */
static float *carve(Arena *a, size_t n, float fill, size_t layer)
{
    CHECK(a->used + n <= a->cap, "probe: arena overflow (%zu + %zu > %zu floats)", a->used, n,
          a->cap);
    float *p = a->buf + a->used;
    a->used += n;
    if (a->used > layer) {
        memcpy(p, p - layer, n * sizeof(float));
        return p;
    }
    for (size_t i = 0; i < n; i++) {
        a->rng = a->rng * 1664525u + 1013904223u;
        p[i] = fill >= 0 ? fill : ((float)(a->rng >> 9) * (1.0f / 8388608.0f) - 0.5f) * 0.04f;
    }
    return p;
}

double model_probe_layer_Bps(const ModelConfig *c, size_t min_bytes, int passes)
{
    const int units = c->n_kv_heads, qpk = config_q_per_kv(c), hd = c->head_dim;
    const int dim = c->dim, f = c->ffn_dim, gpt2 = c->arch == ARCH_GPT2;
    const size_t layer = config_layer_floats(c);
    size_t copies = min_bytes / (layer * sizeof(float)) + 1;
    if (passes < 1)
        passes = 1;
    Arena a = {xmalloc_big(copies * layer * sizeof(float)), 0, copies * layer, 12345u};
    AttnPartW *parts = xcalloc(copies * (size_t)units, sizeof(AttnPartW));
    ProjW *proj = xcalloc(copies, sizeof(ProjW));
    FfnW *ffn = xcalloc(copies, sizeof(FfnW));
    const int kv_cap = passes + 1;
    for (size_t k = 0; k < copies; k++) {
        for (int u = 0; u < units; u++) {
            AttnPartW *w = &parts[k * (size_t)units + (size_t)u];
            *w = (AttnPartW){.layer = (int)k, .unit = u, .q0 = 0, .q1 = qpk, .kv_cap = kv_cap};
            w->norm_w = carve(&a, (size_t)dim, 1.0f, layer);
            w->wq = carve(&a, (size_t)qpk * (size_t)hd * (size_t)dim, -1, layer);
            w->wk = carve(&a, (size_t)hd * (size_t)dim, -1, layer);
            w->wv = carve(&a, (size_t)hd * (size_t)dim, -1, layer);
            if (gpt2) {
                w->norm_b = carve(&a, (size_t)dim, 0.0f, layer);
                w->bq = carve(&a, (size_t)qpk * (size_t)hd, 0.0f, layer);
                w->bk = carve(&a, (size_t)hd, 0.0f, layer);
                w->bv = carve(&a, (size_t)hd, 0.0f, layer);
            }
            w->k_cache = xcalloc((size_t)kv_cap * (size_t)hd, sizeof(float));
            w->v_cache = xcalloc((size_t)kv_cap * (size_t)hd, sizeof(float));
        }
        proj[k].layer = (int)k;
        proj[k].wo = carve(&a, (size_t)dim * (size_t)c->n_heads * (size_t)hd, -1, layer);
        if (gpt2)
            proj[k].bo = carve(&a, (size_t)dim, 0.0f, layer);
        FfnW *w = &ffn[k];
        *w = (FfnW){.layer = (int)k, .f0 = 0, .f1 = f};
        w->norm_w = carve(&a, (size_t)dim, 1.0f, layer);
        if (gpt2) {
            w->norm_b = carve(&a, (size_t)dim, 0.0f, layer);
            w->b_up = carve(&a, (size_t)f, 0.0f, layer);
            w->b_down = carve(&a, (size_t)dim, 0.0f, layer);
        } else {
            w->w_gate = carve(&a, (size_t)f * (size_t)dim, -1, layer);
        }
        w->w_up = carve(&a, (size_t)f * (size_t)dim, -1, layer);
        w->w_down = carve(&a, (size_t)dim * (size_t)f, -1, layer);
    }
    CHECK(a.used == a.cap, "probe: %zu of %zu floats carved (config_layer_floats disagrees)",
          a.used, a.cap);
    Scratch s;
    model_scratch_init(&s, c, kv_cap);
    float *x = xmalloc((size_t)dim * sizeof(float)), *z = xmalloc((size_t)dim * sizeof(float));
    float *xo = xmalloc((size_t)dim * sizeof(float));
    float *heads = xcalloc((size_t)c->n_heads * (size_t)hd, sizeof(float));
    for (int i = 0; i < dim; i++)
        x[i] = (float)((i * 37) % 101) * 0.01f - 0.5f;
    double *t = xmalloc((size_t)passes * sizeof(double));
    for (int pos = 0; pos <= passes; pos++) { /* position 0 warms up (the fill faulted in) */
        double t0 = time_now();
        for (size_t k = 0; k < copies; k++) {
            for (int u = 0; u < units; u++)
                model_attn_part_forward(c, &parts[k * (size_t)units + (size_t)u], &s, x, pos,
                                        heads + (size_t)u * (size_t)qpk * (size_t)hd);
            model_proj_forward(c, &proj[k], &s, x, heads, z);
            model_ffn_forward(c, &ffn[k], &s, z, xo);
        }
        if (pos > 0)
            t[pos - 1] = time_now() - t0;
    }
    const double median = util_median(t, (size_t)passes);
    for (size_t i = 0; i < copies * (size_t)units; i++) {
        free(parts[i].k_cache);
        free(parts[i].v_cache);
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
    return (double)(copies * layer * sizeof(float)) / (median > 0 ? median : 1e-9);
}
