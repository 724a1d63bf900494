/* test_draft.c: the acceptance rule of speculative sampling (draft.c) and the
 * sampler's distribution (sampler_probs): the first token a round emits must be distributed
 * as the target's p whatever the draft's q, checked by a chi-square test on 200,000 draws
 * with a fixed seed (deterministic) at significance 0.001; broken rules (keeping every draft,
 * drawing from p after a rejection) must fail the same test. */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sampler.h"
#include "draft.h"
#include "util.h"

#include <math.h>
#include <string.h>

#include "test_helpers.h"

#define V 8
#define TRIALS 200000
/* The chi-square quantile at 0.999 by degrees of freedom (1..7): a correct rule fails the
 * test with probability 0.001, and with the fixed seed it either always or never does. */
static const double CHI2_999[8] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322};

/* A rule under test: the token emitted at a position from p, q and three uniforms. */
typedef int (*Rule)(const float *p, const float *q, float u_draft, float u_keep, float u_res);

static int rule_real(const float *p, const float *q, float u_draft, float u_keep, float u_res)
{
    int d = draft_draw(q, V, u_draft), kept;
    return draft_step(p, q, V, d, u_keep, u_res, &kept);
}

/* Negative control 1: every draft kept (the draft's distribution comes out). */
static int rule_keep_all(const float *p, const float *q, float u_draft, float u_keep,
                         float u_res)
{
    (void)p;
    (void)u_keep;
    (void)u_res;
    return draft_draw(q, V, u_draft);
}

/* Negative control 2: after a rejection a draw from p instead of the residual. */
static int rule_no_residual(const float *p, const float *q, float u_draft, float u_keep,
                            float u_res)
{
    int d = draft_draw(q, V, u_draft);
    return draft_keep(p, q, d, u_keep) ? d : draft_draw(p, V, u_res);
}

/* Chi-square of the rule's first tokens against p over the tokens p allows; *impossible:
 * draws of tokens with p = 0 (the rule must never emit one); *dof the degrees of freedom. */
static double chi_square(Rule rule, const float *p, const float *q, long *impossible, int *dof)
{
    long count[V] = {0};
    uint64_t rng = 20261201;
    for (int t = 0; t < TRIALS; t++) {
        float u1 = rng_float(&rng), u2 = rng_float(&rng), u3 = rng_float(&rng);
        count[rule(p, q, u1, u2, u3)]++;
    }
    double chi = 0;
    *impossible = 0;
    *dof = -1;
    for (int i = 0; i < V; i++) {
        if (p[i] <= 0) {
            *impossible += count[i];
            continue;
        }
        double e = (double)TRIALS * p[i];
        chi += (count[i] - e) * (count[i] - e) / e;
        (*dof)++;
    }
    return chi;
}

/* Fixed random p and q over 8 tokens, with q = 0 where p > 0 (tokens 2 and 6) and p = 0
 * where q > 0 (token 7): the residual must supply tokens 2 and 6, and 7 must never come. */
static void make_pq(float *p, float *q)
{
    uint64_t rng = 7;
    double sp = 0, sq = 0;
    for (int i = 0; i < V; i++) {
        p[i] = 0.05f + rng_float(&rng);
        q[i] = 0.05f + rng_float(&rng);
    }
    p[7] = 0;
    q[2] = q[6] = 0;
    for (int i = 0; i < V; i++) {
        sp += p[i];
        sq += q[i];
    }
    for (int i = 0; i < V; i++) {
        p[i] = (float)(p[i] / sp);
        q[i] = (float)(q[i] / sq);
    }
}

static void test_rule_matches_target(void **state)
{
    (void)state;
    float p[V], q[V];
    make_pq(p, q);
    long impossible;
    int dof;
    double chi = chi_square(rule_real, p, q, &impossible, &dof);
    print_message("chi-square %.2f with %d degrees of freedom (critical %.3f at 0.001)\n",
                  chi, dof, CHI2_999[dof]);
    assert_int_equal(dof, 6);
    assert_int_equal(impossible, 0);
    assert_true(chi < CHI2_999[dof]);
    /* the same p against a draft that equals it: every draft kept, still p */
    chi = chi_square(rule_real, p, p, &impossible, &dof);
    assert_true(chi < CHI2_999[dof]);
}

static void test_broken_rules_fail(void **state)
{
    (void)state;
    float p[V], q[V];
    make_pq(p, q);
    long impossible;
    int dof;
    double chi = chi_square(rule_keep_all, p, q, &impossible, &dof);
    print_message("keep-all: chi-square %.1f, %ld impossible tokens\n", chi, impossible);
    assert_true(chi > CHI2_999[dof] || impossible > 0);
    chi = chi_square(rule_no_residual, p, q, &impossible, &dof);
    print_message("no residual: chi-square %.1f\n", chi);
    assert_true(chi > CHI2_999[dof]);
}

static void test_keep_edges(void **state)
{
    (void)state;
    const float p[3] = {0.5f, 0.5f, 0.0f}, q[3] = {0.0f, 0.25f, 0.75f};
    assert_true(draft_keep(p, q, 0, 0.999f));  /* q = 0, p > 0: kept */
    assert_false(draft_keep(p, q, 2, 0.0f));   /* p = 0: never */
    assert_true(draft_keep(p, q, 1, 0.999f));  /* p >= q: always */
    const float q2[3] = {0.5f, 0.5f, 0.0f};
    /* no residual mass (p = q): the draw falls back to p */
    assert_int_equal(draft_residual(p, q2, 3, 0.2f), 0);
    assert_int_equal(draft_residual(p, q2, 3, 0.7f), 1);
    /* the residual: max(0, p - q) = {0.5, 0.25, 0} */
    assert_int_equal(draft_residual(p, q, 3, 0.6f), 0);
    assert_int_equal(draft_residual(p, q, 3, 0.7f), 1);
    assert_int_equal(draft_draw(p, 3, 0.99999f), 1);
}

static void test_uniform_per_position(void **state)
{
    (void)state;
    /* a function of (seed, position, stream) only, and different across each */
    float a = draft_uniform(42, 10, DRAFT_U_KEEP);
    assert_true(a == draft_uniform(42, 10, DRAFT_U_KEEP));
    assert_true(a != draft_uniform(42, 11, DRAFT_U_KEEP));
    assert_true(a != draft_uniform(42, 10, DRAFT_U_DRAFT));
    assert_true(a != draft_uniform(43, 10, DRAFT_U_KEEP));
    double sum = 0;
    for (int i = 0; i < 10000; i++) {
        float u = draft_uniform(1, i, DRAFT_U_RESIDUAL);
        assert_true(u >= 0 && u < 1);
        sum += u;
    }
    assert_near(sum / 10000, 0.5, 0.02);
}

static void test_choose_k(void **state)
{
    (void)state;
    /* nothing accepted: one draft; everything accepted and a free draft: the most */
    assert_int_equal(draft_choose_k(0.0, 0.01, 1.0, 0, 8), 1);
    assert_int_equal(draft_choose_k(0.999, 0.0, 1.0, 0, 8), 8);
    /* alpha 0.8, draft a tenth of a pass: (1-a^(K+1))/(1-a)/(0.1K+1) is 2.40, 2.46, 2.47,
     * 2.45 at K = 4..7 */
    assert_int_equal(draft_choose_k(0.8, 0.1, 1.0, 0, 8), 6);
    /* the same when the pass costs 1 per position: (1-a^(K+1))/(1-a)/(1.1K+1) is 0.857,
     * 0.763 at K = 1, 2 */
    assert_int_equal(draft_choose_k(0.8, 0.1, 1.0, 1, 8), 1);
    /* a draft as dear as a pass: one */
    assert_int_equal(draft_choose_k(0.6, 1.0, 1.0, 0, 8), 1);
    DraftAuto a;
    draft_auto_init(&a, 4, 0);
    assert_int_equal(a.k, 4);
    for (int r = 0; r < 50; r++)
        draft_auto_update(&a, a.k, a.k, 0.001 * a.k, a.k, 0.1, a.k + 1); /* all kept */
    assert_int_equal(a.k, DRAFT_K_MAX);
    for (int r = 0; r < 150; r++) /* the acceptance remembers about thirty rounds */
        draft_auto_update(&a, 1, 0, 0.001, 1, 0.1, 2); /* nothing kept */
    assert_int_equal(a.k, 1);
}

/* --draft-tokens auto against a pass that grows with its positions (36 ms + 2.7 ms per
 * extra position, as a verifying pass measured on the emulated testbed), acceptance 0.6 per
 * drafted token (drawn), a 1 ms draft: from K = 4 and from K = 8, over eight draws, it
 * settles where the expected rate is within 3% of the best K's. */
static void test_auto_k_growing_pass(void **state)
{
    (void)state;
    const double alpha = 0.6, t_draft = 1e-3;
    double cost[DRAFT_K_MAX + 2];
    for (int m = 1; m < DRAFT_K_MAX + 2; m++)
        cost[m] = 36e-3 + 2.7e-3 * (m - 1);
    const int best = draft_choose_k_costs(alpha, t_draft, cost, DRAFT_K_MAX);
    assert_int_equal(best, 3);
    double rate[DRAFT_K_MAX + 1], e = 1, ap = 1;
    for (int k = 1; k <= DRAFT_K_MAX; k++) {
        ap *= alpha;
        e += ap;
        rate[k] = e / (k * t_draft + cost[k + 1]);
    }
    for (int run = 0; run < 8; run++) {
        DraftAuto a;
        draft_auto_init(&a, run % 2 ? 8 : 4, 0);
        uint64_t s = 12345 + (uint64_t)run;
        for (int r = 0; r < 100; r++) {
            const int k = a.k;
            int kept = 0;
            while (kept < k) { /* each draft kept with probability alpha, up to a rejection */
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                if ((double)(s >> 11) / 9007199254740992.0 >= alpha)
                    break;
                kept++;
            }
            draft_auto_update(&a, kept < k ? kept + 1 : k, kept, k * t_draft, k,
                                    cost[k + 1], k + 1);
        }
        assert_true(rate[a.k] >= 0.97 * rate[best]);
    }
}

/* sampler_probs is the distribution sampler_sample draws from, filters included. */
static void test_sampler_probs_match_sample(void **state)
{
    (void)state;
    const float logits[V] = {2.0f, 1.5f, 1.4f, 0.3f, -0.5f, 1.9f, -3.0f, 0.0f};
    Sampler s;
    sampler_init(&s, V, 0.7f, 0.9f, 99);
    sampler_set_filters(&s, 6, 0.02f);
    float p[V];
    memcpy(p, logits, sizeof p);
    sampler_probs(&s, p);
    double total = 0;
    for (int i = 0; i < V; i++)
        total += p[i];
    assert_near(total, 1.0, 1e-5);
    long count[V] = {0};
    for (int t = 0; t < 100000; t++) {
        float w[V];
        memcpy(w, logits, sizeof w);
        count[sampler_sample(&s, w)]++;
    }
    double chi = 0;
    int dof = -1;
    for (int i = 0; i < V; i++) {
        if (p[i] <= 0) {
            assert_int_equal(count[i], 0);
            continue;
        }
        double e = 100000.0 * p[i];
        chi += (count[i] - e) * (count[i] - e) / e;
        dof++;
    }
    assert_true(dof >= 1 && dof < 8);
    assert_true(p[6] == 0); /* cut by top-k (6 of 8) */
    assert_true(chi < CHI2_999[dof]);
    sampler_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_matches_target),
        cmocka_unit_test(test_broken_rules_fail),
        cmocka_unit_test(test_keep_edges),
        cmocka_unit_test(test_uniform_per_position),
        cmocka_unit_test(test_choose_k),
        cmocka_unit_test(test_auto_k_growing_pass),
        cmocka_unit_test(test_sampler_probs_match_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
