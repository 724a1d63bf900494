/* test_exact.c: the pieces of --exchange exact (issue 14) without the engine.
 * - The row-slice forward helpers (model_proj_rows_n, model_ffn_hidden_n,
 *   model_ffn_down_rows_n) against the whole projection and FFN (model_proj_forward_n,
 *   model_ffn_forward_n), memcmp, for cuts at any row (block-aligned or not), F32, Q8_0, Q4_0
 *   and Q4_K weights, LLaMA (SwiGLU) and GPT-2 (GELU, biases) shapes, 1 and 5 rows.
 * - The plan: the name, plan_exact_rows tiling the width, AUTO never choosing exact, the
 *   schedule's four all-gather hops and bytes, the cost model's price of them, and the per-rank
 *   accounting of rows. */
#define _XOPEN_SOURCE 700
#include "test_helpers.h"

#include "convert.h"
#include "model.h"
#include "plan.h"
#include "quant.h"
#include "schedule.h"
#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

#define DIM 256
#define FFN 512
#define HEADS 8
#define HD 32
#define MAXB 5

/* Rows [r0, r1) of m, sharing its data (a member's hyperslab of whole rows). */
static QMat rows_of(const QMat *m, int r0, int r1)
{
    QMat v = *m;
    v.rows = r1 - r0;
    v.data = (char *)m->data + (size_t)r0 * m->row_stride;
    return v;
}

static ModelConfig make_config(int gpt2)
{
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.arch = gpt2 ? ARCH_GPT2 : ARCH_LLAMA;
    c.dim = DIM;
    c.n_layers = 1;
    c.n_heads = HEADS;
    c.n_kv_heads = HEADS;
    c.head_dim = HD;
    c.ffn_dim = FFN;
    c.vocab_size = 32;
    c.context_length = 16;
    c.norm_eps = 1e-5f;
    c.bos_id = c.eos_id = -1;
    return c;
}

/* The members' cuts of the width and of the FFN: uneven, not on block boundaries. */
static const int dcut[] = {0, 37, 38, 150, DIM};
static const int fcut[] = {0, 1, 200, 333, FFN};
enum { N_CUT = 4 };

static void check_rows(QType t, int gpt2)
{
    uint64_t rng = 7 + (uint64_t)t * 31 + (uint64_t)gpt2;
    const ModelConfig c = make_config(gpt2);
    const int qd = HEADS * HD;
    ProjW proj = {.layer = 0, .wo = test_qmat(t, DIM, qd, &rng)};
    proj.bo = gpt2 ? test_randv(DIM, 0.1f, 0.0f, &rng) : NULL;
    FfnW ffn = {.layer = 0, .f0 = 0, .f1 = FFN};
    ffn.norm_w = test_randv(DIM, 0.2f, 1.0f, &rng);
    ffn.norm_b = gpt2 ? test_randv(DIM, 0.1f, 0.0f, &rng) : NULL;
    if (!gpt2)
        ffn.w_gate = test_qmat(t, FFN, DIM, &rng);
    ffn.w_up = test_qmat(t, FFN, DIM, &rng);
    ffn.b_up = gpt2 ? test_randv(FFN, 0.1f, 0.0f, &rng) : NULL;
    ffn.w_down = test_qmat(t, DIM, FFN, &rng);
    ffn.b_down = gpt2 ? test_randv(DIM, 0.1f, 0.0f, &rng) : NULL;
    float *x = test_randv((size_t)MAXB * DIM, 1.0f, 0.0f, &rng);
    float *heads = test_randv((size_t)MAXB * (size_t)qd, 1.0f, 0.0f, &rng);
    float *z = xcalloc((size_t)MAXB * DIM, sizeof(float));
    float *xo = xcalloc((size_t)MAXB * DIM, sizeof(float));
    float *gz = xcalloc((size_t)MAXB * DIM, sizeof(float));
    float *gx = xcalloc((size_t)MAXB * DIM, sizeof(float));
    float *hidden = xcalloc((size_t)MAXB * FFN, sizeof(float));
    Scratch s;
    model_scratch_init_batch(&s, &c, 16, MAXB);
    static const int ns[] = {1, MAXB};
    for (int ni = 0; ni < 2; ni++) {
        const int n = ns[ni];
        model_proj_forward_n(&c, &proj, &s, x, heads, z, n);
        model_ffn_forward_n(&c, &ffn, &s, z, xo, n);
        /* every member's rows of Z (into a copy of x, in place as the engine does) */
        memcpy(gz, x, (size_t)n * DIM * sizeof(float));
        for (int m = 0; m < N_CUT; m++) {
            ProjW pr = {.layer = 0, .wo = rows_of(&proj.wo, dcut[m], dcut[m + 1]), .bo = proj.bo};
            model_proj_rows_n(&c, &pr, &s, dcut[m], gz, heads, gz, n);
        }
        if (memcmp(gz, z, (size_t)n * DIM * sizeof(float)) != 0)
            fail_msg("Z by rows (%s, %s, n=%d) differs from the whole projection",
                     quant_type_name(t), gpt2 ? "gpt2" : "llama", n);
        /* every member's hidden slice, then its rows of X' */
        for (int m = 0; m < N_CUT; m++) {
            FfnW f = ffn;
            f.f0 = fcut[m];
            f.f1 = fcut[m + 1];
            if (!gpt2)
                f.w_gate = rows_of(&ffn.w_gate, f.f0, f.f1);
            f.w_up = rows_of(&ffn.w_up, f.f0, f.f1);
            f.b_up = gpt2 ? ffn.b_up + f.f0 : NULL;
            model_ffn_hidden_n(&c, &f, &s, z, hidden + f.f0, FFN, n);
        }
        memcpy(gx, z, (size_t)n * DIM * sizeof(float));
        for (int m = 0; m < N_CUT; m++) {
            FfnW f = ffn;
            f.down_rows = 1;
            f.d0 = dcut[m];
            f.d1 = dcut[m + 1];
            f.w_down = rows_of(&ffn.w_down, f.d0, f.d1);
            model_ffn_down_rows_n(&c, &f, &s, gx, hidden, gx, n);
        }
        if (memcmp(gx, xo, (size_t)n * DIM * sizeof(float)) != 0)
            fail_msg("X' by rows (%s, %s, n=%d) differs from the whole FFN",
                     quant_type_name(t), gpt2 ? "gpt2" : "llama", n);
    }
    model_scratch_free(&s);
    free(x);
    free(heads);
    free(z);
    free(xo);
    free(gz);
    free(gx);
    free(hidden);
    model_free_proj(&proj);
    model_free_ffn(&ffn);
}

static void test_rows_llama(void **state)
{
    (void)state;
    static const QType types[] = {QTYPE_F32, QTYPE_Q8_0, QTYPE_Q4_0, QTYPE_Q4_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        check_rows(types[i], 0);
}

static void test_rows_gpt2(void **state)
{
    (void)state;
    check_rows(QTYPE_F32, 1);
    check_rows(QTYPE_Q8_0, 1);
}

static ModelConfig stories(void)
{
    ModelConfig c;
    char err[256];
    if (convert_synthetic_config("stories260k", 0, &c, err, sizeof err) != 0)
        fail_msg("%s", err);
    return c;
}

static void build(Plan *p, const ModelConfig *c, int n, SliceExchange x, const Cluster *cl)
{
    PlanRequest req = {.partition = PARTITION_SLICE, .placement = PLACEMENT_GREEDY,
                       .n_workers = n, .kv_positions = 64, .exchange = x, .cluster = cl,
                       .ref_Bps = 4e9};
    char err[256];
    if (plan_build(p, c, &req, err, sizeof err) != 0)
        fail_msg("plan_build: %s", err);
}

static void test_plan_rows(void **state)
{
    (void)state;
    SliceExchange x;
    assert_int_equal(plan_parse_exchange("exact", &x), 0);
    assert_int_equal(x, EXCHANGE_EXACT);
    assert_string_equal(plan_exchange_name(EXCHANGE_EXACT), "exact");
    const ModelConfig c = stories();
    for (int n = 1; n <= 6; n++) {
        Plan p;
        build(&p, &c, n, EXCHANGE_EXACT, NULL);
        assert_int_equal(p.exchange, EXCHANGE_EXACT);
        for (int l = 0; l < p.n_layers; l++) {
            int d = 0, d0, d1;
            for (int r = 1; r <= n; r++)
                if (plan_exact_rows(&p, &c, l, r, &d0, &d1)) {
                    assert_int_equal(d0, d); /* the members' rows tile the width */
                    assert_true(d1 >= d0);
                    d = d1;
                }
            assert_int_equal(d, c.dim);
            assert_false(plan_exact_rows(&p, &c, l, 0, &d0, &d1));
        }
        plan_free(&p);
        /* AUTO never picks exact, whatever the prediction */
        build(&p, &c, n, EXCHANGE_AUTO, NULL);
        assert_int_not_equal(p.exchange, EXCHANGE_EXACT);
        int d0, d1;
        assert_false(plan_exact_rows(&p, &c, 0, 1, &d0, &d1));
        plan_free(&p);
    }
}

/* Hops, bytes and the cost model: four all-gather rounds per layer, 1/n of the rows each. */
static void test_plan_cost(void **state)
{
    (void)state;
    const ModelConfig c = stories();
    const int n = 4, R = n + 1;
    Cluster lat;
    cluster_init(&lat, R);
    for (int i = 0; i < R * R; i++)
        lat.link[i].rtt_s = i / R == i % R ? 0 : 2 * 5e-3; /* 5 ms one way */
    Plan pe, pa;
    build(&pe, &c, n, EXCHANGE_EXACT, &lat);
    build(&pa, &c, n, EXCHANGE_ALL, &lat);
    Schedule se, sa;
    plan_schedule(&se, &pe, &c);
    plan_schedule(&sa, &pa, &c);
    /* all-to-all: 2 exchange hops per layer; exact: 4 */
    assert_int_equal(se.hops_per_token - sa.hops_per_token, 2 * c.n_layers);
    const uint64_t hdr = sizeof(WireHdr), m = (uint64_t)se.layers[0].n_members;
    const uint64_t floats = (uint64_t)(c.n_heads * c.head_dim + 2 * c.dim + c.ffn_dim);
    assert_int_equal(m, n);
    const ScheduleLayer *l0 = &se.layers[0];
    const uint64_t bcast = l0->n_bcast > 1 ? (uint64_t)(l0->n_bcast - 1) * se.msg_bytes : 0;
    assert_int_equal(l0->bytes - bcast, (m - 1) * (4 * m * hdr + floats * sizeof(float)));
    /* two more 5 ms hops per layer: slower than all-to-all by about that */
    PlanRequest req = {.partition = PARTITION_SLICE, .n_workers = n, .kv_positions = 64,
                       .cluster = &lat, .ref_Bps = 4e9};
    const double te = plan_predict_ms(&pe, &c, &req), ta = plan_predict_ms(&pa, &c, &req);
    if (!(te > ta + 1.5 * 5.0 * c.n_layers))
        fail_msg("exact predicted %.2f ms, all-to-all %.2f ms: four hops not priced", te, ta);
    /* the accounting: whole rows of wo and w_down instead of columns, the same total */
    size_t we = 0, wa = 0;
    for (int r = 1; r <= n; r++) {
        we += plan_rank_weight_bytes(&pe, &c, r);
        wa += plan_rank_weight_bytes(&pa, &c, r);
    }
    assert_true(we > 0);
    assert_int_equal(we, wa);
    schedule_free(&se);
    schedule_free(&sa);
    plan_free(&pe);
    plan_free(&pa);
    cluster_free(&lat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_llama),
        cmocka_unit_test(test_rows_gpt2),
        cmocka_unit_test(test_plan_rows),
        cmocka_unit_test(test_plan_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
