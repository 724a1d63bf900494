/* test_profile.c: the speculation profile (src/generate/profile.c): the decision function, the
 * acceptance interpolation, statistics of r, the JSON round trip and its validation, and
 * profiling runs on small synthetic models made with the converter library: the measured
 * ratios equal the in-process engine's, and tolerance 0 costs nothing (token agreement 1.0,
 * identical perplexity). */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config_io.h"
#include "convert.h"
#include "generate.h"
#include "h5io.h"
#include "profile.h"
#include "tokenizer.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_helpers.h"

static char tmpdir[64];
static char err[1024];

static int setup_dir(void **state)
{
    (void)state;
    h5io_quiet();
    return test_tmpdir_make(tmpdir, sizeof tmpdir, "profile");
}

static int teardown_dir(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

static const char *tp(char *buf, const char *name) { return test_path(buf, 256, tmpdir, name); }

/* A profile of a 4-layer model whose transition t has acceptance acc[t][k]. */
static void make_profile(Profile *p, ModelConfig *c, const double acc[3][PROFILE_N_TOL])
{
    memset(c, 0, sizeof *c);
    c->n_layers = 4;
    c->dim = 16;
    profile_init(p, c);
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < PROFILE_N_TOL; k++)
            p->acceptance[t * PROFILE_N_TOL + k] = acc[t][k];
}

static const double ACC[3][PROFILE_N_TOL] = {{0.5, 0.8, 0.9}, {0.1, 0.2, 0.3}, {0.9, 0.95, 1.0}};

static void test_acceptance_interpolation(void **state)
{
    (void)state;
    Profile p;
    ModelConfig c;
    make_profile(&p, &c, ACC);
    /* At the stored tolerances: the stored values. */
    assert_near(profile_acceptance(&p, 0, 0.02f), 0.5, 1e-12);
    assert_near(profile_acceptance(&p, 0, 0.05f), 0.8, 1e-12);
    assert_near(profile_acceptance(&p, 0, 0.10f), 0.9, 1e-12);
    /* Linear between them. */
    assert_near(profile_acceptance(&p, 0, 0.035f), 0.65, 1e-6);
    assert_near(profile_acceptance(&p, 0, 0.075f), 0.85, 1e-6);
    assert_near(profile_acceptance(&p, 1, 0.03f), 0.1 + 0.1 / 3, 1e-6);
    /* Clamped outside [0.02, 0.10]; tolerance <= 0 keeps nothing. */
    assert_near(profile_acceptance(&p, 0, 0.01f), 0.5, 1e-12);
    assert_near(profile_acceptance(&p, 0, 0.5f), 0.9, 1e-12);
    assert_near(profile_acceptance(&p, 2, 1e9f), 1.0, 1e-12);
    assert_near(profile_acceptance(&p, 0, 0.0f), 0.0, 0);
    assert_near(profile_acceptance(&p, 0, -1.0f), 0.0, 0);
    assert_near(profile_acceptance(&p, 0, NAN), 0.0, 0);
    /* Transitions outside 0..n_layers-2. */
    assert_near(profile_acceptance(&p, -1, 0.05f), 0.0, 0);
    assert_near(profile_acceptance(&p, 3, 0.05f), 0.0, 0);
    assert_near(profile_acceptance(NULL, 0, 0.05f), 0.0, 0);
    profile_free(&p);
}

static void test_decide(void **state)
{
    (void)state;
    Profile p;
    ModelConfig c;
    make_profile(&p, &c, ACC);
    double s = -99;
    /* acc 0.8 >= 0.7: saving 0.8 * min(1, 2) - 0.2 * 0.5 = 0.7. */
    assert_int_equal(profile_decide(&p, 0, 0.05f, 0.7f, 1.0, 2.0, 0.5, &s), 1);
    assert_near(s, 0.7, 1e-12);
    /* min(attn, ffn) is what overlaps: attn 3, ffn 1 -> 0.8 * 1 - 0.2 * 0.5 = 0.7. */
    assert_int_equal(profile_decide(&p, 0, 0.05f, 0.7f, 3.0, 1.0, 0.5, &s), 1);
    assert_near(s, 0.7, 1e-12);
    /* Re-execution too dear: 0.8 * 1 - 0.2 * 5 = -0.2. */
    assert_int_equal(profile_decide(&p, 0, 0.05f, 0.7f, 1.0, 2.0, 5.0, &s), 0);
    assert_near(s, -0.2, 1e-12);
    /* Break-even is not a saving: 0.5 * 1 - 0.5 * 1 = 0. */
    assert_int_equal(profile_decide(&p, 0, 0.02f, 0.5f, 1.0, 2.0, 1.0, &s), 0);
    assert_near(s, 0.0, 0);
    /* Acceptance below the threshold, however large the saving. */
    assert_int_equal(profile_decide(&p, 1, 0.05f, 0.7f, 10.0, 10.0, 0.0, &s), 0);
    assert_near(s, 2.0, 1e-12);
    assert_int_equal(profile_decide(&p, 0, 0.02f, 0.7f, 1.0, 2.0, 0.0, &s), 0); /* acc 0.5 */
    assert_int_equal(profile_decide(&p, 0, 0.02f, 0.5f, 1.0, 2.0, 0.0, &s), 1); /* acc == min */
    /* Interpolated acceptance: 0.035 -> 0.65 < 0.7; 0.04 -> 0.7. */
    assert_int_equal(profile_decide(&p, 0, 0.035f, 0.7f, 1.0, 2.0, 0.0, NULL), 0);
    assert_int_equal(profile_decide(&p, 0, 0.045f, 0.7f, 1.0, 2.0, 0.0, NULL), 1);
    /* Full acceptance never pays the re-execution. */
    assert_int_equal(profile_decide(&p, 2, 0.10f, 0.7f, 1.0, 1.0, 1e6, &s), 1);
    assert_near(s, 1.0, 1e-12);
    /* Tolerance 0 never speculates; invalid transitions never do. */
    assert_int_equal(profile_decide(&p, 2, 0.0f, 0.0f, 1.0, 1.0, 0.0, &s), 0);
    assert_int_equal(profile_decide(&p, 3, 0.05f, 0.0f, 1.0, 1.0, 0.0, &s), 0);
    assert_near(s, 0.0, 0);
    assert_int_equal(profile_decide(&p, -1, 0.05f, 0.0f, 1.0, 1.0, 0.0, NULL), 0);
    /* Zero-cost layers save nothing. */
    assert_int_equal(profile_decide(&p, 2, 0.05f, 0.7f, 0.0, 1.0, 0.0, &s), 0);
    /* Default costs: reexec = max(0, attn - ffn) + overhead, attn of the next layer. */
    for (int l = 0; l < 4; l++) {
        p.attn_ms[l] = 1.0 + l;
        p.ffn_ms[l] = 2.5;
    }
    double a[3], f[3], r[3];
    profile_default_costs(&p, 0.25, a, f, r);
    assert_near(a[0], 2.0, 0);
    assert_near(a[2], 4.0, 0);
    assert_near(f[1], 2.5, 0);
    assert_near(r[0], 0.25, 1e-12);
    assert_near(r[2], 1.75, 1e-12);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    profile_print_decisions(&p, m, 0.05f, 0.7f, NULL, NULL, NULL);
    fclose(m);
    assert_non_null(strstr(buf, "| 0 -> 1 | 0.800 |"));
    assert_non_null(strstr(buf, "no (acceptance)"));
    free(buf);
    profile_free(&p);
}

static void test_statistics(void **state)
{
    (void)state;
    ModelConfig c = {.n_layers = 2, .dim = 4};
    Profile p;
    profile_init(&p, &c);
    /* r = 0.005, 0.015, ..., 0.195 shuffled: 2 of 20 below 0.02, 5 below 0.05, 10 below 0.10. */
    float r[20];
    for (int i = 0; i < 20; i++)
        r[i] = 0.005f + (float)((i * 7) % 20) * 0.01f;
    profile_set_transition(&p, 0, r, 20);
    assert_near(p.acceptance[0], 0.10, 1e-12);
    assert_near(p.acceptance[1], 0.25, 1e-12);
    assert_near(p.acceptance[2], 0.50, 1e-12);
    assert_near(p.mean_r[0], 0.1, 1e-6);
    /* Type-7 quantiles: p50 = (r[9] + r[10]) / 2; p05 = r[0] + 0.95 (r[1] - r[0]); p95 at 18.05. */
    assert_near(p.quantiles[2], 0.1, 1e-6);
    assert_near(p.quantiles[0], 0.0145, 1e-6);
    assert_near(p.quantiles[4], 0.1855, 1e-6);
    /* A single sample; an infinite ratio is never accepted and stays out of the mean. */
    float one[2] = {INFINITY, 0.01f};
    profile_set_transition(&p, 0, one, 2);
    assert_near(p.acceptance[0], 0.5, 0);
    assert_near(p.mean_r[0], 0.01, 1e-6);
    assert_true(isinf(p.quantiles[4]));
    profile_set_transition(&p, 0, one, 0);
    assert_near(p.acceptance[2], 0.0, 0);
    profile_set_transition(&p, 5, one, 2); /* out of range: ignored */
    profile_free(&p);
    profile_free(&p); /* idempotent */
    profile_free(NULL);
}

static void test_json_round_trip(void **state)
{
    (void)state;
    char path[256], bad[256];
    ModelConfig c = {.n_layers = 3, .dim = 8, .n_heads = 2, .n_kv_heads = 1, .head_dim = 4,
                     .ffn_dim = 16, .vocab_size = 300, .context_length = 32};
    Profile p, q;
    profile_init(&p, &c);
    p.tokens = 1234;
    p.model_path = strdup("m.h5");
    p.corpus_path = strdup("corpus \"quoted\".txt");
    for (int i = 0; i < 2 * PROFILE_N_TOL; i++)
        p.acceptance[i] = 1.0 / (i + 3);
    for (int i = 0; i < 2 * PROFILE_N_QUANT; i++)
        p.quantiles[i] = 0.1 * i + 1e-17;
    p.quantiles[9] = INFINITY;
    p.mean_r[0] = 0.123456789012345678;
    p.mean_r[1] = 1e-300;
    for (int l = 0; l < 3; l++) {
        p.attn_ms[l] = 0.3 / (l + 1);
        p.proj_ms[l] = 0.01 * l;
        p.ffn_ms[l] = 0.7 + l;
    }
    p.n_quality = 2;
    p.quality[0] = (ProfileQuality){0.0f, 64, 1.0, 64, 7.25, 0.0};
    p.quality[1] = (ProfileQuality){0.5f, 60, 0.3125, 12, 7.5, 0.47};
    p.prompt = strdup("Once upon a time");
    p.heldout_path = strdup("h.txt");
    p.gen_tokens_requested = 64;
    p.heldout_tokens = 2085;
    p.ppl_exact = 7.25;
    assert_int_equal(profile_write(&p, &c, tp(path, "p.json"), err, sizeof err), 0);
    if (profile_load(&q, path, &c, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_int_equal(q.n_layers, 3);
    assert_int_equal(q.tokens, 1234);
    assert_string_equal(q.model_path, "m.h5");
    assert_string_equal(q.corpus_path, "corpus \"quoted\".txt");
    assert_memory_equal(q.acceptance, p.acceptance, 2 * PROFILE_N_TOL * sizeof(double));
    assert_memory_equal(q.quantiles, p.quantiles, 2 * PROFILE_N_QUANT * sizeof(double));
    assert_memory_equal(q.mean_r, p.mean_r, 2 * sizeof(double));
    assert_memory_equal(q.attn_ms, p.attn_ms, 3 * sizeof(double));
    assert_memory_equal(q.proj_ms, p.proj_ms, 3 * sizeof(double));
    assert_memory_equal(q.ffn_ms, p.ffn_ms, 3 * sizeof(double));
    assert_int_equal(q.n_quality, 2);
    assert_memory_equal(&q.quality[1], &p.quality[1], sizeof(ProfileQuality));
    assert_string_equal(q.prompt, "Once upon a time");
    assert_int_equal(q.heldout_tokens, 2085);
    assert_near(q.ppl_exact, 7.25, 0);
    profile_free(&q);

    /* Another model's shape is refused, naming both. */
    ModelConfig other = c;
    other.n_layers = 4;
    assert_int_equal(profile_load(&q, path, &other, err, sizeof err), -1);
    assert_non_null(strstr(err, "3 layers"));
    assert_null(q.acceptance);
    other = c;
    other.dim = 16;
    assert_int_equal(profile_load(&q, path, &other, err, sizeof err), -1);
    /* Missing file, not JSON, wrong format, missing or out-of-range fields. */
    assert_int_equal(profile_load(&q, tp(bad, "none.json"), &c, err, sizeof err), -1);
    const char *cases[] = {
        "not json",
        "[1, 2]",
        "{\"format\": \"headsplit-profile 2\"}",
        "{\"format\": \"headsplit-profile 1\", \"config\": {\"n_layers\": 3}}",
        "{\"format\": \"headsplit-profile 1\", \"config\": {\"n_layers\": 3, \"dim\": 8}, "
        "\"tokens\": 1, \"transitions\": [], \"layers\": []}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(tp(bad, "bad.json"), "w");
        fputs(cases[i], f);
        fclose(f);
        assert_int_equal(profile_load(&q, bad, &c, err, sizeof err), -1);
        assert_non_null(strstr(err, "bad.json"));
    }
    /* An acceptance above 1 is refused. */
    p.acceptance[1] = 1.5;
    assert_int_equal(profile_write(&p, &c, bad, err, sizeof err), 0);
    assert_int_equal(profile_load(&q, bad, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "acceptance"));
    /* Without quality. */
    p.acceptance[1] = 0.5;
    p.n_quality = 0;
    assert_int_equal(profile_write(&p, &c, bad, err, sizeof err), 0);
    assert_int_equal(profile_load(&q, bad, &c, err, sizeof err), 0);
    assert_int_equal(q.n_quality, 0);
    profile_free(&q);
    profile_free(&p);
    assert_int_equal(profile_write(&p, &c, "/nonexistent/dir/p.json", err, sizeof err), -1);
}

/* A small synthetic model, opened with everything the profiler needs. */
typedef struct {
    ModelConfig c;
    hid_t file;
    Tokenizer *tok;
    HeadW head;
    LocalModel *m;
    int *ids;
    size_t n;
} Fixture;

static const char TEXT[] =
    "Once upon a time there was a small model.\nIt ran its layers one after another, and the "
    "profiler watched the ratio of every FFN to its input.\nThe end.\nAnother story began, "
    "with more words so that the windows fill up more than once.\n";

static void fixture_open(Fixture *fx, const char *spec, const char *name)
{
    char path[256];
    memset(fx, 0, sizeof *fx);
    if (convert_make_synthetic(spec, 7, 0, NULL, tp(path, name), NULL, NULL, err, sizeof err) < 0)
        fail_msg("%s", err);
    fx->file = h5io_open_read(path, err, sizeof err);
    assert_true(fx->file >= 0);
    if (config_read(&fx->c, fx->file, path, err, sizeof err) < 0 ||
        tokenizer_h5_read(&fx->tok, fx->file, path, err, sizeof err) < 0 ||
        model_load_head(&fx->head, &fx->c, fx->file, path, err, sizeof err) < 0 ||
        local_model_load(&fx->m, &fx->c, fx->file, path, fx->c.context_length, err,
                         sizeof err) < 0 ||
        tokenizer_encode(fx->tok, TEXT, strlen(TEXT), &fx->ids, &fx->n, err, sizeof err) < 0)
        fail_msg("%s", err);
}

static void fixture_close(Fixture *fx)
{
    free(fx->ids);
    local_model_free(fx->m);
    model_free_head(&fx->head);
    tokenizer_free(fx->tok);
    H5Fclose(fx->file);
}

static void test_measure_matches_engine(void **state)
{
    (void)state;
    Fixture fx;
    fixture_open(&fx, "llama:dim=32,ffn=64,layers=3,heads=4,kv_heads=2,vocab=300,ctx=48",
                 "m.h5");
    const int bos = tokenizer_bos(fx.tok), L = fx.c.n_layers, ctx = fx.c.context_length;
    assert_true(bos >= 0 && fx.ids[0] == bos);
    size_t ns = fx.n - 1; /* stream after the leading BOS */
    assert_true(ns > (size_t)(2 * ctx)); /* at least three windows */
    Profile p, q;
    profile_init(&p, &fx.c);
    if (profile_measure(&p, &fx.c, &fx.head, fx.file, "m.h5", fx.ids, fx.n, bos, 1000000, err,
                        sizeof err) < 0)
        fail_msg("%s", err);
    /* Every stream token once, plus one BOS per window of ctx - 1 tokens. */
    long want = (long)(ns + (ns + (size_t)ctx - 2) / ((size_t)ctx - 1));
    assert_int_equal(p.tokens, want);
    for (int l = 0; l < L; l++)
        assert_true(p.attn_ms[l] > 0 && p.ffn_ms[l] > 0 && p.proj_ms[l] > 0);

    /* The same windows through the in-process engine give bit-identical statistics. */
    float *r = malloc((size_t)(L - 1) * (size_t)want * sizeof(float));
    float *x = malloc((size_t)fx.c.dim * sizeof(float));
    LayerBackend be = local_model_backend(fx.m);
    long k = 0;
    for (size_t i = 1; i < fx.n;) {
        for (int pos = 0; pos < ctx && (pos == 0 || i < fx.n); pos++, k++) {
            int t = pos == 0 ? bos : fx.ids[i++];
            model_embed(&fx.c, &fx.head, t, pos, x);
            be.forward(be.ctx, x, pos, t);
            for (int l = 0; l + 1 < L; l++)
                r[(size_t)l * (size_t)want + (size_t)k] = local_model_ratios(fx.m)[l];
        }
    }
    assert_int_equal(k, want);
    profile_init(&q, &fx.c);
    for (int l = 0; l + 1 < L; l++)
        profile_set_transition(&q, l, r + (size_t)l * (size_t)want, (size_t)want);
    assert_memory_equal(q.acceptance, p.acceptance, (size_t)(L - 1) * PROFILE_N_TOL * 8);
    assert_memory_equal(q.quantiles, p.quantiles, (size_t)(L - 1) * PROFILE_N_QUANT * 8);
    assert_memory_equal(q.mean_r, p.mean_r, (size_t)(L - 1) * 8);
    profile_free(&q);

    /* --tokens caps the positions; without BOS the windows hold ctx stream tokens. */
    profile_init(&q, &fx.c);
    assert_int_equal(profile_measure(&q, &fx.c, &fx.head, fx.file, "m.h5", fx.ids, fx.n, bos,
                                     50, err, sizeof err), 0);
    assert_int_equal(q.tokens, 50);
    assert_int_equal(profile_measure(&q, &fx.c, &fx.head, fx.file, "m.h5", fx.ids + 1, ns, -1,
                                     1000000, err, sizeof err), 0);
    assert_int_equal(q.tokens, (long)ns);
    /* Perplexity windows like the measurement: every token after a window's first. */
    long n_pred = 0;
    double ppl = profile_perplexity(&fx.c, &fx.head, &be, fx.ids, fx.n, bos, 1000000, &n_pred);
    assert_int_equal(n_pred, want - (want + ctx - 1) / ctx);
    assert_true(isfinite(ppl) && ppl > 1.0);
    profile_free(&q);
    free(r);
    free(x);
    profile_free(&p);
    fixture_close(&fx);
}

static void test_quality_tolerance_zero(void **state)
{
    (void)state;
    Fixture fx;
    fixture_open(&fx, "llama:dim=32,ffn=64,layers=3,heads=4,kv_heads=2,vocab=300,ctx=64",
                 "q.h5");
    const int bos = tokenizer_bos(fx.tok);
    Profile p;
    profile_init(&p, &fx.c);
    const float tols[3] = {0.0f, 0.05f, 1e9f};
    if (profile_quality(&p, &fx.c, fx.tok, &fx.head, fx.m, tols, 3, "Once upon", 24, fx.ids,
                        fx.n, bos, 1000000, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_int_equal(p.n_quality, 3);
    assert_true(p.heldout_tokens > 100);
    assert_true(isfinite(p.ppl_exact));
    /* Tolerance 0: nothing kept, so bit-identical to exact execution. */
    const ProfileQuality *z = &p.quality[0];
    assert_near(z->agreement, 1.0, 0);
    assert_int_equal(z->first_divergence, z->gen_tokens);
    assert_true(z->gen_tokens > 0 && z->gen_tokens <= 24);
    assert_true(z->ppl_spec == p.ppl_exact);
    assert_near(z->kept_fraction, 0.0, 0);
    /* Tolerance 1e9: every speculation kept; agreement in [0, 1]. */
    const ProfileQuality *all = &p.quality[2];
    assert_near(all->kept_fraction, 1.0, 0);
    assert_true(all->agreement >= 0.0 && all->agreement <= 1.0);
    assert_true(all->first_divergence >= 0 && all->first_divergence <= all->gen_tokens);
    assert_true(isfinite(all->ppl_spec) && all->ppl_spec != p.ppl_exact);
    /* The model is left without speculation: a new forward matches the exact perplexity. */
    LayerBackend be = local_model_backend(fx.m);
    double again = profile_perplexity(&fx.c, &fx.head, &be, fx.ids, fx.n, bos, 1000000, NULL);
    assert_true(again == p.ppl_exact);
    /* Printing and writing a measured profile. */
    char path[256];
    assert_int_equal(profile_write(&p, &fx.c, tp(path, "q.json"), err, sizeof err), 0);
    Profile back;
    assert_int_equal(profile_load(&back, path, &fx.c, err, sizeof err), 0);
    assert_int_equal(back.n_quality, 3);
    assert_true(back.quality[0].ppl_spec == back.ppl_exact);
    profile_free(&back);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    profile_print_acceptance(&p, m);
    profile_print_quality(&p, m);
    fclose(m);
    assert_non_null(strstr(buf, "| 0 | 1.000 | none |"));
    free(buf);
    /* Too many tolerances are refused. */
    float many[PROFILE_MAX_QUALITY + 1] = {0};
    assert_int_equal(profile_quality(&p, &fx.c, fx.tok, &fx.head, fx.m, many,
                                     PROFILE_MAX_QUALITY + 1, "x", 4, fx.ids, fx.n, bos, 100,
                                     err, sizeof err), -1);
    profile_free(&p);
    fixture_close(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acceptance_interpolation),
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_measure_matches_engine),
        cmocka_unit_test(test_quality_tolerance_zero),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
