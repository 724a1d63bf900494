/* local.c: the in-process backend: every layer of the model held and run by this process,
 * through the same forward pieces the distributed workers use. */
#include "backend.h"
#include "model.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

struct LocalModel {
    const ModelConfig *c;
    AttnPartW *attn; /* [n_layers][n_kv_heads] */
    ProjW *proj;     /* [n_layers] */
    FfnW *ffn;       /* [n_layers] */
    Scratch scratch; /* for max_batch positions */
    int kv_cap, max_batch;
    float *heads;    /* [max_batch][n_heads*hd] */
    float *z;        /* [max_batch][dim] */
    float *ratios;   /* [n_layers] last ||FFN(Z)||/||Z|| */
    float *zprev;    /* [max_batch][dim] Z of the previous layer (speculation's early input) */
    size_t weight_bytes;
    /* Inter-layer speculation, emulated numerically: transition l -> l+1 speculates when
     * spec[l] is set; the next layer's attention then runs on Z_l instead of X'_l when
     * ||FFN(Z_l)|| / ||Z_l|| < tolerance (kept), else on X'_l (re-executed). */
    unsigned char *spec; /* [n_layers] or NULL */
    float tolerance;
    long spec_tried, spec_kept;
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
        m->weight_bytes += model_proj_bytes(c, &m->proj[l]) + model_ffn_bytes(c, &m->ffn[l]);
    }
    m->kv_cap = kv_cap;
    local_model_set_max_batch(m, 1);
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
    free(m->zprev);
    free(m->spec);
    free(m);
}

/* Every layer on positions pos..pos+n-1 (n <= max_batch) as one pass: each weight matrix
 * streamed once for the n rows, every result bit-identical to n calls of local_forward.
 * Speculation is emulated per pass, as the distributed engine decides it: transition l -> l+1
 * keeps the attention on Z when the largest ratio of the pass's rows is under the tolerance
 * (one pass of one row is local_forward's decision). */
static void local_forward_batch(LocalModel *m, float *x, int pos, int n)
{
    const ModelConfig *c = m->c;
    const int G = c->n_kv_heads, Q = config_q_per_kv(c), hd = c->head_dim;
    const int hw = c->n_heads * hd;
    const size_t rows = (size_t)n * (size_t)c->dim * sizeof(float);
    for (int l = 0; l < c->n_layers; l++) {
        const float *ain = x;
        if (l > 0 && m->spec && m->spec[l - 1]) {
            m->spec_tried++;
            if (m->ratios[l - 1] < m->tolerance) {
                ain = m->zprev; /* the speculative attention on Z is kept */
                m->spec_kept++;
            }
        }
        for (int g = 0; g < G; g++)
            model_attn_part_forward_n(c, &m->attn[(size_t)l * (size_t)G + (size_t)g],
                                      &m->scratch, ain, pos, n,
                                      m->heads + (size_t)g * (size_t)Q * (size_t)hd, hw);
        model_proj_forward_n(c, &m->proj[l], &m->scratch, x, m->heads, m->z, n);
        if (m->spec)
            memcpy(m->zprev, m->z, rows);
        /* the largest ratio of the n positions (speculation's and the profiler's) */
        m->ratios[l] = model_ffn_forward_n(c, &m->ffn[l], &m->scratch, m->z, x, n);
    }
}

/* One position: a pass of one row (the one-position functions' bits). */
static void local_forward(void *ctx, float *x, int pos, int token)
{
    (void)token;
    local_forward_batch(ctx, x, pos, 1);
}

/* The backend's forward_n: passes of up to max_batch positions. */
static void local_forward_n(void *ctx, float *x, int pos, int n, const int *tokens, int next_n)
{
    LocalModel *m = ctx;
    const size_t dim = (size_t)m->c->dim;
    (void)next_n;
    (void)tokens;
    for (int i = 0; i < n; i += m->max_batch) {
        const int k = n - i < m->max_batch ? n - i : m->max_batch;
        local_forward_batch(m, x + (size_t)i * dim, pos + i, k);
    }
}

/* The controller computes the logits from x (the LM head is not split here). */
static int local_logits_n(void *ctx, float *logits, int n)
{
    (void)ctx, (void)logits, (void)n;
    return 0;
}

void local_model_set_max_batch(LocalModel *m, int max_batch)
{
    const ModelConfig *c = m->c;
    CHECK(max_batch >= 1, "local model: batch of %d positions", max_batch);
    model_scratch_free(&m->scratch);
    model_scratch_init_batch(&m->scratch, c, m->kv_cap, max_batch);
    free(m->heads);
    free(m->z);
    m->heads = xcalloc((size_t)max_batch * (size_t)c->n_heads * (size_t)c->head_dim,
                       sizeof(float));
    m->z = xcalloc((size_t)max_batch * (size_t)c->dim, sizeof(float));
    free(m->zprev);
    m->zprev = xcalloc((size_t)max_batch * (size_t)c->dim, sizeof(float));
    m->max_batch = max_batch;
}

void local_model_set_speculation(LocalModel *m, const unsigned char *spec, float tolerance)
{
    free(m->spec);
    m->spec = NULL;
    if (spec) {
        m->spec = xmalloc((size_t)m->c->n_layers);
        memcpy(m->spec, spec, (size_t)m->c->n_layers);
    }
    m->tolerance = tolerance;
    m->spec_tried = m->spec_kept = 0;
}

void local_model_spec_counts(const LocalModel *m, long *tried, long *kept)
{
    *tried = m->spec_tried;
    *kept = m->spec_kept;
}

LayerBackend local_model_backend(LocalModel *m)
{
    return (LayerBackend){.ctx = m,
                          .forward = local_forward,
                          .forward_n = local_forward_n,
                          .logits_n = local_logits_n,
                          .max_batch = m->max_batch};
}

const float *local_model_ratios(const LocalModel *m) { return m->ratios; }

size_t local_model_weight_bytes(const LocalModel *m) { return m->weight_bytes; }
