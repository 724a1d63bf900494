/* local.c: the in-process backend: every layer of the model held and run by this process,
 * through the same forward pieces the distributed workers use. */
#include "generate.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

struct LocalModel {
    const ModelConfig *c;
    AttnPartW *attn; /* [n_layers][n_kv_heads] */
    ProjW *proj;     /* [n_layers] */
    FfnW *ffn;       /* [n_layers] */
    Scratch scratch;
    float *heads;    /* [n_heads*hd] */
    float *z;        /* [dim] */
    float *ratios;   /* [n_layers] last ||FFN(Z)||/||Z|| */
    size_t weight_bytes;
};

int local_model_load(LocalModel **out, const ModelConfig *c, hid_t file, const char *fname,
                     int kv_cap, char *err, size_t errlen)
{
    LocalModel *m = xcalloc(1, sizeof *m);
    const int L = c->n_layers, G = c->n_kv_heads, Q = config_q_per_kv(c);
    m->c = c;
    m->attn = xcalloc((size_t)L * (size_t)G, sizeof(AttnPartW));
    m->proj = xcalloc((size_t)L, sizeof(ProjW));
    m->ffn = xcalloc((size_t)L, sizeof(FfnW));
    for (int l = 0; l < L; l++) {
        for (int g = 0; g < G; g++) {
            AttnPartW *a = &m->attn[(size_t)l * (size_t)G + (size_t)g];
            if (model_load_attn_part(a, c, file, fname, l, g, 0, Q, kv_cap, err, errlen) < 0)
                goto fail;
            m->weight_bytes += model_attn_part_bytes(c, a);
        }
        if (model_load_proj(&m->proj[l], c, file, fname, l, err, errlen) < 0 ||
            model_load_ffn(&m->ffn[l], c, file, fname, l, 0, c->ffn_dim, err, errlen) < 0)
            goto fail;
        m->weight_bytes += config_proj_floats(c) * sizeof(float) + model_ffn_bytes(c, &m->ffn[l]);
    }
    model_scratch_init(&m->scratch, c, kv_cap);
    m->heads = xcalloc((size_t)c->n_heads * (size_t)c->head_dim, sizeof(float));
    m->z = xcalloc((size_t)c->dim, sizeof(float));
    m->ratios = xcalloc((size_t)L, sizeof(float));
    *out = m;
    return 0;
fail:
    local_model_free(m);
    return -1;
}

void local_model_free(LocalModel *m)
{
    if (!m)
        return;
    const ModelConfig *c = m->c;
    for (int l = 0; l < c->n_layers; l++) {
        for (int g = 0; g < c->n_kv_heads; g++)
            model_free_attn_part(&m->attn[(size_t)l * (size_t)c->n_kv_heads + (size_t)g]);
        model_free_proj(&m->proj[l]);
        model_free_ffn(&m->ffn[l]);
    }
    free(m->attn);
    free(m->proj);
    free(m->ffn);
    model_scratch_free(&m->scratch);
    free(m->heads);
    free(m->z);
    free(m->ratios);
    free(m);
}

static void local_forward(void *ctx, float *x, int pos, int token)
{
    LocalModel *m = ctx;
    const ModelConfig *c = m->c;
    const int G = c->n_kv_heads, Q = config_q_per_kv(c), hd = c->head_dim;
    (void)token;
    for (int l = 0; l < c->n_layers; l++) {
        for (int g = 0; g < G; g++)
            model_attn_part_forward(c, &m->attn[(size_t)l * (size_t)G + (size_t)g], &m->scratch,
                                    x, pos, m->heads + (size_t)g * (size_t)Q * (size_t)hd);
        model_proj_forward(c, &m->proj[l], &m->scratch, x, m->heads, m->z);
        m->ratios[l] = model_ffn_forward(c, &m->ffn[l], &m->scratch, m->z, x);
    }
}

LayerBackend local_model_backend(LocalModel *m)
{
    return (LayerBackend){m, local_forward};
}

const float *local_model_ratios(const LocalModel *m) { return m->ratios; }

size_t local_model_weight_bytes(const LocalModel *m) { return m->weight_bytes; }
