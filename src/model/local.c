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
    /* Sequence slots (local_model_set_slots): slot 0 is attn itself; slot s > 0 holds
     * copies of attn's parts with the same weights and KV caches of their own, allocated
     * lazily (resident as positions are written). */
    int n_slots;
    AttnPartW **slot_attn; /* [n_slots] ([0] = attn), each [n_layers][n_kv_heads] */
    AttnSeg *segs;         /* [n_slots * max_batch] a pass's segments */
    void (*on_pass)(void *); /* local_model_on_pass: after every pass */
    void *on_pass_arg;
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
    m->n_slots = 1;
    m->slot_attn = xcalloc(1, sizeof *m->slot_attn);
    m->slot_attn[0] = m->attn;
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
    for (int i = 1; i < m->n_slots; i++) {
        for (size_t p = 0; p < (size_t)c->n_layers * (size_t)c->n_kv_heads; p++) {
            model_attn_part_caches_free(&m->slot_attn[i][p]);
        }
        free(m->slot_attn[i]);
    }
    free(m->slot_attn);
    free(m->segs);
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
static void pass_done(LocalModel *m)
{
    if (m->on_pass)
        m->on_pass(m->on_pass_arg);
}

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

/* The rows of several sequences as one pass (local_model_forward_rows): every layer's
 * weights streamed once for all of them, each row's attention on its own slot's caches. */
static void local_forward_rows_pass(LocalModel *m, float *x, const LocalRows *rows, int n_rows)
{
    const ModelConfig *c = m->c;
    const int G = c->n_kv_heads, Q = config_q_per_kv(c), hd = c->head_dim;
    const int hw = c->n_heads * hd;
    int n = 0;
    for (int i = 0; i < n_rows; i++)
        n += rows[i].n;
    for (int l = 0; l < c->n_layers; l++) {
        for (int g = 0; g < G; g++) {
            const size_t part = (size_t)l * (size_t)G + (size_t)g;
            for (int i = 0; i < n_rows; i++)
                m->segs[i] = (AttnSeg){&m->slot_attn[rows[i].slot][part], rows[i].pos, rows[i].n};
            model_attn_part_forward_segs(c, &m->scratch, x, m->segs, n_rows,
                                         m->heads + (size_t)g * (size_t)Q * (size_t)hd, hw);
        }
        model_proj_forward_n(c, &m->proj[l], &m->scratch, x, m->heads, m->z, n);
        m->ratios[l] = model_ffn_forward_n(c, &m->ffn[l], &m->scratch, m->z, x, n);
    }
}

void local_model_forward_rows(LocalModel *m, float *x, const LocalRows *rows, int n_rows)
{
    CHECK(!m->spec, "local model: a pass of several sequences with speculation emulated");
    CHECK(n_rows >= 1 && n_rows <= m->n_slots * m->max_batch,
          "local model: a pass of %d segments", n_rows);
    int n = 0;
    for (int i = 0; i < n_rows; i++) {
        CHECK(rows[i].slot >= 0 && rows[i].slot < m->n_slots, "local model: slot %d of %d",
              rows[i].slot, m->n_slots);
        CHECK(rows[i].n >= 1 && rows[i].n <= m->max_batch, "local model: %d rows in a pass "
              "of at most %d", rows[i].n, m->max_batch);
        n += rows[i].n;
    }
    CHECK(n <= m->max_batch, "local model: %d rows in a pass of at most %d", n, m->max_batch);
    local_forward_rows_pass(m, x, rows, n_rows);
    pass_done(m);
}

void local_model_set_slots(LocalModel *m, int n_slots)
{
    const ModelConfig *c = m->c;
    CHECK(n_slots >= 1, "local model: %d slots", n_slots);
    if (n_slots <= m->n_slots)
        return; /* grows only */
    const size_t parts = (size_t)c->n_layers * (size_t)c->n_kv_heads;
    m->slot_attn = xrealloc(m->slot_attn, (size_t)n_slots * sizeof *m->slot_attn);
    for (int i = m->n_slots; i < n_slots; i++) {
        AttnPartW *copy = xcalloc(parts, sizeof(AttnPartW));
        for (size_t p = 0; p < parts; p++) {
            AttnPartW *a = &copy[p];
            *a = m->attn[p]; /* the weights are shared: slot 0 owns them */
            model_attn_part_caches_new(c, a, a->kv_cap);
        }
        m->slot_attn[i] = copy;
    }
    m->n_slots = n_slots;
    free(m->segs);
    m->segs = xcalloc((size_t)n_slots * (size_t)m->max_batch, sizeof(AttnSeg));
}

int local_model_slots(const LocalModel *m) { return m->n_slots; }

void local_model_on_pass(LocalModel *m, void (*fn)(void *), void *arg)
{
    m->on_pass = fn;
    m->on_pass_arg = arg;
}

/* One position: a pass of one row (the one-position functions' bits). */
static void local_forward(void *ctx, float *x, int pos, int token)
{
    (void)token;
    local_forward_batch(ctx, x, pos, 1);
    pass_done(ctx);
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
        pass_done(m);
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
    free(m->segs);
    m->segs = xcalloc((size_t)(m->n_slots > 0 ? m->n_slots : 1) * (size_t)max_batch,
                      sizeof(AttnSeg));
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

/* The backend's several-sequence calls. */
static int local_set_slots(void *ctx, int n_slots, char *err, size_t errlen)
{
    if (n_slots < 1)
        return util_err(err, errlen, "%d sequence slots", n_slots);
    local_model_set_slots(ctx, n_slots);
    return 0;
}

static void local_forward_rows(void *ctx, float *x, const SeqRows *rows, int n_rows)
{
    local_model_forward_rows(ctx, x, rows, n_rows);
}

LayerBackend local_model_backend(LocalModel *m)
{
    return (LayerBackend){.ctx = m,
                          .forward = local_forward,
                          .forward_n = local_forward_n,
                          .logits_n = local_logits_n,
                          .set_slots = local_set_slots,
                          .forward_rows = local_forward_rows,
                          .logits_rows = local_logits_n,
                          .max_batch = m->max_batch};
}

const float *local_model_ratios(const LocalModel *m) { return m->ratios; }

size_t local_model_weight_bytes(const LocalModel *m) { return m->weight_bytes; }
