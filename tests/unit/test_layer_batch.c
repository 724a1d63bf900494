/* test_layer_batch.c: the multi-position forward pieces (src/model/layer_batch.c) against n
 * calls of the one-position pieces, memcmp: attention parts (outputs and the whole KV caches),
 * the projection and its column share, the FFN (delta and forward, whole and sliced) and the
 * LM head rows.  Llama shapes (GQA, interleaved and halves RoPE, Llama 3.1 rope factors, a
 * sliding window, QKV biases) and GPT-2 shapes (LayerNorm, biases, GELU), random weights in
 * F32, Q8_0, Q4_0 and Q4_K, for n = 1, 5 and 32 at position 0 and past it. */
#define _XOPEN_SOURCE 700
#include "test_helpers.h"

#include "kernels.h"
#include "model.h"
#include "quant.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define DIM 256
#define FFN 512
#define VOCAB 77
#define MAXB 32
#define KV_CAP 96

/* A copy of m's data (the second instance of a weight for the batched side). */
static QMat copy_qmat(const QMat *m)
{
    QMat c = *m;
    c.data = xmalloc(model_qmat_bytes(m));
    memcpy(c.data, m->data, model_qmat_bytes(m));
    return c;
}

static float *copy_floats(const float *x, size_t n)
{
    if (!x)
        return NULL;
    float *c = xmalloc(n * sizeof(float));
    memcpy(c, x, n * sizeof(float));
    return c;
}

typedef enum { SHAPE_LLAMA, SHAPE_LLAMA_WINDOW, SHAPE_GPT2 } Shape;

static ModelConfig make_config(Shape shape, uint64_t *rng)
{
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.arch = shape == SHAPE_GPT2 ? ARCH_GPT2 : ARCH_LLAMA;
    c.dim = DIM;
    c.n_layers = 1;
    c.n_heads = shape == SHAPE_GPT2 ? 4 : 8;
    c.n_kv_heads = shape == SHAPE_GPT2 ? 4 : 2; /* GQA: 4 query heads per group */
    c.head_dim = shape == SHAPE_GPT2 ? 64 : 32;
    c.ffn_dim = FFN;
    c.vocab_size = VOCAB;
    c.context_length = KV_CAP;
    c.norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    c.rope_style = shape == SHAPE_GPT2 ? ROPE_NONE
                 : shape == SHAPE_LLAMA ? ROPE_INTERLEAVED : ROPE_HALF;
    c.bos_id = c.eos_id = -1;
    if (shape == SHAPE_LLAMA_WINDOW) { /* Mistral's window, Qwen2's biases, Llama 3.1's RoPE,
                                        * Phi-3's query scaled before the scores */
        c.sliding_window = 7;
        c.q_prescale = 1;
        c.qkv_bias = 1;
        c.n_rope_freq_factors = c.head_dim / 2;
        for (int i = 0; i < c.n_rope_freq_factors; i++)
            c.rope_freq_factors[i] = 1.0f + 3.0f * rng_float(rng);
    }
    return c;
}

static void same_floats(const float *a, const float *b, size_t n, const char *what, QType t,
                        int n_pos, int pos)
{
    if (memcmp(a, b, n * sizeof(float)) != 0)
        fail_msg("%s (%s, n=%d, pos=%d) differs from the one-position result", what,
                 quant_type_name(t), n_pos, pos);
}

static void check_attention(const ModelConfig *c, QType t, Scratch *s1, Scratch *sb,
                            uint64_t *rng)
{
    const int hd = c->head_dim, Q = config_q_per_kv(c), bias = c->arch == ARCH_GPT2 || c->qkv_bias;
    const size_t qd = (size_t)Q * (size_t)hd;
    AttnPartW a = {.layer = 0, .unit = 1, .q0 = 0, .q1 = Q, .kv_cap = KV_CAP};
    a.norm_w = test_randv(DIM, 0.2f, 1.0f, rng);
    a.norm_b = c->arch == ARCH_GPT2 ? test_randv(DIM, 0.1f, 0.0f, rng) : NULL;
    a.wq = test_qmat(t, (int)qd, DIM, rng);
    a.wk = test_qmat(t, hd, DIM, rng);
    a.wv = test_qmat(t, hd, DIM, rng);
    a.bq = bias ? test_randv(qd, 0.1f, 0.0f, rng) : NULL;
    a.bk = bias ? test_randv((size_t)hd, 0.1f, 0.0f, rng) : NULL;
    a.bv = bias ? test_randv((size_t)hd, 0.1f, 0.0f, rng) : NULL;
    a.k_cache = test_randv((size_t)KV_CAP * (size_t)hd, 1.0f, 0.0f, rng); /* earlier positions */
    a.v_cache = test_randv((size_t)KV_CAP * (size_t)hd, 1.0f, 0.0f, rng);
    AttnPartW b = a;
    b.norm_w = copy_floats(a.norm_w, DIM);
    b.norm_b = copy_floats(a.norm_b, DIM);
    b.wq = copy_qmat(&a.wq), b.wk = copy_qmat(&a.wk), b.wv = copy_qmat(&a.wv);
    b.bq = copy_floats(a.bq, qd), b.bk = copy_floats(a.bk, (size_t)hd);
    b.bv = copy_floats(a.bv, (size_t)hd);
    b.k_cache = copy_floats(a.k_cache, (size_t)KV_CAP * (size_t)hd);
    b.v_cache = copy_floats(a.v_cache, (size_t)KV_CAP * (size_t)hd);
    const int stride = (int)qd + 3; /* out rows wider than the part's heads */
    float *x = test_randv((size_t)MAXB * DIM, 1.0f, 0.0f, rng);
    float *want = xcalloc((size_t)MAXB * (size_t)stride, sizeof(float));
    float *got = xcalloc((size_t)MAXB * (size_t)stride, sizeof(float));
    static const int ns[] = {1, 5, 32};
    static const int poss[] = {0, 3, 40};
    for (int pi = 0; pi < 3; pi++)
        for (int ni = 0; ni < 3; ni++) {
            const int n = ns[ni], pos = poss[pi];
            for (int i = 0; i < n; i++)
                model_attn_part_forward(c, &a, s1, x + (size_t)i * DIM, pos + i,
                                        want + (size_t)i * (size_t)stride);
            model_attn_part_forward_n(c, &b, sb, x, pos, n, got, stride);
            same_floats(got, want, (size_t)n * (size_t)stride, "attention output", t, n, pos);
            same_floats(b.k_cache, a.k_cache, (size_t)KV_CAP * (size_t)hd, "K cache", t, n, pos);
            same_floats(b.v_cache, a.v_cache, (size_t)KV_CAP * (size_t)hd, "V cache", t, n, pos);
            /* a row of x changed after the first call must be seen (no stale activations) */
            x[0] += 0.5f;
        }
    free(x), free(want), free(got);
    model_free_attn_part(&a);
    model_free_attn_part(&b);
}

static void check_proj_ffn_head(const ModelConfig *c, QType t, Scratch *s1, Scratch *sb,
                                uint64_t *rng)
{
    const int hw = c->n_heads * c->head_dim, gpt2 = c->arch == ARCH_GPT2;
    ProjW p = {.layer = 0, .wo = test_qmat(t, DIM, hw, rng)};
    p.bo = gpt2 ? test_randv(DIM, 0.1f, 0.0f, rng) : NULL;
    FfnW f = {.layer = 0, .f0 = 0, .f1 = FFN};
    f.norm_w = test_randv(DIM, 0.2f, 1.0f, rng);
    f.norm_b = gpt2 ? test_randv(DIM, 0.1f, 0.0f, rng) : NULL;
    if (!gpt2)
        f.w_gate = test_qmat(t, FFN, DIM, rng);
    f.w_up = test_qmat(t, FFN, DIM, rng);
    f.b_up = gpt2 ? test_randv(FFN, 0.1f, 0.0f, rng) : NULL;
    f.w_down = test_qmat(t, DIM, FFN, rng);
    f.b_down = gpt2 ? test_randv(DIM, 0.1f, 0.0f, rng) : NULL;
    /* The second half of the FFN: a slice that adds no b_down. */
    FfnW fs = f;
    fs.f0 = FFN / 2;
    fs.w_gate.rows = gpt2 ? 0 : FFN / 2;
    if (!gpt2)
        fs.w_gate.data = (char *)f.w_gate.data + (size_t)(FFN / 2) * f.w_gate.row_stride;
    fs.w_up.rows = FFN / 2;
    fs.w_up.data = (char *)f.w_up.data + (size_t)(FFN / 2) * f.w_up.row_stride;
    fs.b_up = f.b_up ? f.b_up + FFN / 2 : NULL;
    fs.w_down = test_qmat(t, DIM, FFN / 2, rng);
    HeadW h = {.lm_head = test_qmat(t, VOCAB, DIM, rng)};
    h.final_norm = test_randv(DIM, 0.2f, 1.0f, rng);
    h.final_norm_b = gpt2 ? test_randv(DIM, 0.1f, 0.0f, rng) : NULL;
    const int ncols = 256, hstride = 512; /* a column share, heads rows wider than it */
    QMat wo_cols = test_qmat(t, DIM, ncols, rng);

    float *x = test_randv((size_t)MAXB * DIM, 1.0f, 0.0f, rng);
    float *heads = test_randv((size_t)MAXB * (size_t)hw, 1.0f, 0.0f, rng);
    float *hpart = test_randv((size_t)MAXB * (size_t)hstride, 1.0f, 0.0f, rng);
    const size_t big = (size_t)MAXB * (VOCAB > DIM ? VOCAB : DIM);
    float *want = xcalloc(big, sizeof(float)), *got = xcalloc(big, sizeof(float));
    static const int ns[] = {1, 5, 32};
    for (int ni = 0; ni < 3; ni++) {
        const int n = ns[ni];
        const size_t nd = (size_t)n * DIM;
        for (int i = 0; i < n; i++)
            model_proj_forward(c, &p, s1, x + (size_t)i * DIM, heads + (size_t)i * (size_t)hw,
                               want + (size_t)i * DIM);
        model_proj_forward_n(c, &p, sb, x, heads, got, n);
        same_floats(got, want, nd, "projection", t, n, 0);
        /* in place (z == x), as the local backend runs it */
        float *xin = copy_floats(x, nd);
        model_proj_forward_n(c, &p, sb, xin, heads, xin, n);
        same_floats(xin, want, nd, "projection in place", t, n, 0);
        free(xin);
        for (int i = 0; i < n; i++)
            model_proj_partial(c, s1, &wo_cols, hpart + (size_t)i * (size_t)hstride, ncols,
                               want + (size_t)i * DIM);
        model_proj_partial_n(c, sb, &wo_cols, hpart, hstride, ncols, got, n);
        same_floats(got, want, nd, "projection columns", t, n, 0);
        const FfnW *ffns[2] = {&f, &fs};
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < n; i++)
                model_ffn_delta(c, ffns[k], s1, x + (size_t)i * DIM, want + (size_t)i * DIM);
            model_ffn_delta_n(c, ffns[k], sb, x, got, n);
            same_floats(got, want, nd, k ? "FFN slice delta" : "FFN delta", t, n, 0);
        }
        float worst = 0.0f;
        for (int i = 0; i < n; i++) {
            const float r = model_ffn_forward(c, &f, s1, x + (size_t)i * DIM,
                                              want + (size_t)i * DIM);
            if (i == 0 || r > worst)
                worst = r;
        }
        const float rb = model_ffn_forward_n(c, &f, sb, x, got, n);
        same_floats(got, want, nd, "FFN forward", t, n, 0);
        same_floats(&rb, &worst, 1, "FFN ratio", t, n, 0);
        for (int rows = VOCAB; rows >= VOCAB - 30; rows -= 30) {
            for (int i = 0; i < n; i++)
                model_logits_rows(c, &h, s1, x + (size_t)i * DIM, rows, want + (size_t)i * rows);
            model_logits_rows_n(c, &h, sb, x, rows, got, n);
            same_floats(got, want, (size_t)n * (size_t)rows, "logits", t, n, 0);
        }
    }
    free(x), free(heads), free(hpart), free(want), free(got);
    model_qmat_free(&wo_cols);
    model_qmat_free(&fs.w_down);
    model_free_proj(&p);
    model_free_ffn(&f);
    model_free_head(&h);
}

static void run_shape(Shape shape)
{
    static const QType types[] = {QTYPE_F32, QTYPE_Q8_0, QTYPE_Q4_0, QTYPE_Q4_K};
    uint64_t rng = 1234 + (uint64_t)shape;
    for (int th = 1; th <= 2; th++) {
        kernels_set_threads(th);
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            ModelConfig c = make_config(shape, &rng);
            Scratch s1, sb;
            model_scratch_init(&s1, &c, KV_CAP);
            model_scratch_init_batch(&sb, &c, KV_CAP, MAXB);
            check_attention(&c, types[k], &s1, &sb, &rng);
            check_proj_ffn_head(&c, types[k], &s1, &sb, &rng);
            model_scratch_free(&s1);
            model_scratch_free(&sb);
        }
    }
    kernels_set_threads(1);
}

static void test_llama(void **state)
{
    (void)state;
    run_shape(SHAPE_LLAMA);
}

static void test_llama_window_factors_bias(void **state)
{
    (void)state;
    run_shape(SHAPE_LLAMA_WINDOW);
}

static void test_gpt2(void **state)
{
    (void)state;
    run_shape(SHAPE_GPT2);
}

/* Attention over a long context splits its heads over the kernel threads: the outputs and
 * caches of one position and of a pass of 32, at 1 and 3 threads, are the same bits (3 does
 * not divide the 4 heads of a part evenly). */
static void test_attention_heads_any_threads(void **state)
{
    (void)state;
    enum { CAP = 600, N = 32 };
    uint64_t rng = 99;
    ModelConfig c = make_config(SHAPE_LLAMA, &rng);
    c.context_length = CAP;
    const int hd = c.head_dim, Q = config_q_per_kv(&c);
    const size_t qd = (size_t)Q * (size_t)hd, cache = (size_t)CAP * (size_t)hd;
    AttnPartW a = {.layer = 0, .unit = 1, .q0 = 0, .q1 = Q, .kv_cap = CAP};
    a.norm_w = test_randv(DIM, 0.2f, 1.0f, &rng);
    a.wq = test_qmat(QTYPE_F32, (int)qd, DIM, &rng);
    a.wk = test_qmat(QTYPE_F32, hd, DIM, &rng);
    a.wv = test_qmat(QTYPE_F32, hd, DIM, &rng);
    float *k0 = test_randv(cache, 1.0f, 0.0f, &rng), *v0 = test_randv(cache, 1.0f, 0.0f, &rng);
    a.k_cache = xmalloc(cache * sizeof(float));
    a.v_cache = xmalloc(cache * sizeof(float));
    float *x = test_randv((size_t)N * DIM, 1.0f, 0.0f, &rng);
    float *out[2], *kc[2];
    for (int r = 0; r < 2; r++) {
        out[r] = xcalloc((size_t)(N + 1) * qd, sizeof(float));
        kc[r] = xmalloc(cache * sizeof(float));
    }
    for (int r = 0; r < 2; r++) {
        kernels_set_threads(r ? 3 : 1);
        Scratch s;
        model_scratch_init_batch(&s, &c, CAP, N);
        memcpy(a.k_cache, k0, cache * sizeof(float));
        memcpy(a.v_cache, v0, cache * sizeof(float));
        model_attn_part_forward(&c, &a, &s, x, CAP - 1, out[r]);
        model_attn_part_forward_n(&c, &a, &s, x, CAP - 1 - N, N, out[r] + qd, (int)qd);
        memcpy(kc[r], a.k_cache, cache * sizeof(float));
        model_scratch_free(&s);
    }
    kernels_set_threads(1);
    if (memcmp(out[0], out[1], (size_t)(N + 1) * qd * sizeof(float)) != 0)
        fail_msg("long-context attention with 3 threads differs from 1 thread");
    assert_memory_equal(kc[0], kc[1], cache * sizeof(float));
    for (int r = 0; r < 2; r++)
        free(out[r]), free(kc[r]);
    free(x), free(k0), free(v0);
    model_free_attn_part(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_llama_window_factors_bias),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_attention_heads_any_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
