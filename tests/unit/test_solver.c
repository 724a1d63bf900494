/* Solvers: the exact branch and bound finds the brute-force optimum on tiny cases (budgets
 * binding), greedy is never better than it, its reported cost is the simulator's token time,
 * and the layer-wise DP is optimal over contiguous blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim.h"
#include "solver.h"
#include "util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A model small enough to brute-force: 4 query heads in 2 KV groups. */
static ModelConfig tiny(int layers)
{
    ModelConfig c = {ARCH_LLAMA, 32, layers, 4, 2, 8, 96, 64, 64, 1e-5f, 10000.0f,
                     ROPE_INTERLEAVED, 1, 1, 2, {0}, "", 0, 0, 0, {0}, 0}; /* float32 weights */
    return c;
}

/* n workers of the given speeds (bytes/s) and budgets; links with per-pair latencies. */
static void cluster(SimCluster *cl, int n, const double *speed, const size_t *budget,
                    uint64_t seed)
{
    sim_cluster_init(cl, n);
    cl->dev[0] = (SimDevice){"c", 1e8, 2e-6, 0, 1e8};
    for (int r = 1; r <= n; r++)
        cl->dev[r] = (SimDevice){"w", speed[r - 1], 2e-6, budget ? budget[r - 1] : 0, 1e8};
    uint64_t st = seed;
    for (int a = 0; a <= n; a++)
        for (int b = 0; b <= n; b++)
            cl->link[a * (n + 1) + b] =
                (SimLink){1e-4 * (1 + (double)(rng_next(&st) % 8)), 0, 5e7};
    cl->bcast = SIM_BCAST_AUTO;
    cl->medium = SIM_MEDIUM_SWITCHED;
}

static double rel(double a, double b) { return fabs(a - b) / b; }

static void exact_vs_brute(const ModelConfig *c, const SimCluster *cl, int expect_binding)
{
    SolverRequest req = {8, 16, 0, 0};
    Plan p;
    SolverStats st;
    char err[256];
    double brute = solver_exact_brute(c, cl, &req);
    assert_true(brute < DBL_MAX);
    if (solver_exact(&p, &st, c, cl, &req, err, sizeof err) != 0)
        fail_msg("solver_exact: %s", err);
    assert_true(st.optimal);
    assert_true(rel(st.cost_s, brute) < 1e-9);
    assert_true(solver_plan_fits(&p, c, cl, req.kv_positions));
    assert_true(rel(sim_plan_token_time(c, cl, &p, req.pos), st.cost_s) < 1e-12);
    plan_free(&p);
    /* Greedy is a feasible head-level plan: never better than the optimum. */
    Device *dv = sim_cluster_plan_devices(cl, 1.0);
    PlanRequest g = {.partition = PARTITION_HEAD, .placement = PLACEMENT_GREEDY,
                     .n_workers = cl->n_workers, .devices = dv, .kv_positions = 16};
    if (plan_build(&p, c, &g, err, sizeof err) == 0) {
        if (solver_plan_fits(&p, c, cl, 16))
            assert_true(sim_plan_token_time(c, cl, &p, req.pos) >= st.cost_s * (1 - 1e-12));
        plan_free(&p);
    }
    free(dv);
    if (expect_binding) {
        /* The budgets matter: without them the optimum is at least as good, and better. */
        SimCluster free_cl = *cl;
        SimDevice *devs = xmalloc(((size_t)cl->n_workers + 1) * sizeof(SimDevice));
        memcpy(devs, cl->dev, ((size_t)cl->n_workers + 1) * sizeof(SimDevice));
        for (int r = 1; r <= cl->n_workers; r++)
            devs[r].mem_budget = 0;
        free_cl.dev = devs;
        assert_true(solver_exact_brute(c, &free_cl, &req) < brute * (1 - 1e-9));
        free(devs);
    }
}

static void test_exact_two_devices(void **state)
{
    (void)state;
    ModelConfig c = tiny(3);
    /* Weights per layer: 2 parts of ~2.4 KB (+ KV), projection 4 KB, FFN 37 KB. */
    double speed[2] = {4e6, 1e6};
    size_t budget[2] = {90000, 200000}; /* the fast device holds at most two FFNs */
    SimCluster cl;
    cluster(&cl, 2, speed, budget, 1);
    exact_vs_brute(&c, &cl, 1);
    sim_cluster_free(&cl);
}

static void test_exact_three_devices(void **state)
{
    (void)state;
    ModelConfig c = tiny(1);
    c.n_kv_heads = 4; /* 4 parts of one head each */
    double speed[3] = {3e6, 1e6, 2e6};
    size_t budget[3] = {30000, 0, 60000};
    SimCluster cl;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        cluster(&cl, 3, speed, budget, seed);
        exact_vs_brute(&c, &cl, 1);
        sim_cluster_free(&cl);
    }
}

static void test_layer_dp_optimal(void **state)
{
    (void)state;
    ModelConfig c = tiny(6);
    double speed[3] = {1e6, 3e6, 2e6};
    size_t budget[3] = {0, 110000, 160000}; /* the fastest takes two layers, the next three */
    SimCluster cl;
    char err[256];
    for (uint64_t seed = 1; seed <= 4; seed++) {
        cluster(&cl, 3, speed, seed % 2 ? budget : NULL, seed);
        SolverRequest req = {4, 16, 0, 0};
        Plan p;
        SolverStats st;
        if (solver_layer_dp(&p, &st, &c, &cl, &req, err, sizeof err) != 0)
            fail_msg("solver_layer_dp: %s", err);
        double brute = solver_layer_brute(&c, &cl, &req);
        assert_true(rel(st.cost_s, brute) < 1e-12);
        assert_true(rel(sim_plan_token_time(&c, &cl, &p, req.pos), st.cost_s) < 1e-12);
        assert_true(solver_plan_fits(&p, &c, &cl, 16));
        /* Contiguous: each rank holds one block of whole layers. */
        for (int l = 1; l < c.n_layers; l++)
            for (int m = 0; m < l - 1; m++)
                if (p.layers[m].ffn_rank == p.layers[l].ffn_rank)
                    assert_int_equal(p.layers[l - 1].ffn_rank, p.layers[l].ffn_rank);
        /* The engine's own layer-wise split is one of the candidates. */
        Device *dv = sim_cluster_plan_devices(&cl, 1.0);
        PlanRequest er = {.partition = PARTITION_LAYER, .placement = PLACEMENT_LAYER,
                          .n_workers = 3, .devices = dv, .kv_positions = 16};
        Plan e;
        if (plan_build(&e, &c, &er, err, sizeof err) == 0) {
            if (solver_plan_fits(&e, &c, &cl, 16))
                assert_true(sim_plan_token_time(&c, &cl, &e, 4) >= st.cost_s * (1 - 1e-12));
            plan_free(&e);
        }
        free(dv);
        plan_free(&p);
        sim_cluster_free(&cl);
    }
}

static void test_exact_real_shapes(void **state)
{
    (void)state;
    /* TinyLlama shapes, 3 heterogeneous devices, tight budgets: proven optimal quickly and
     * no worse than greedy or layer-dp. */
    ModelConfig c;
    SimCluster cl;
    char err[256];
    assert_int_equal(sim_model_preset(&c, "tinyllama-1.1b", 6, err, sizeof err), 0);
    assert_int_equal(sim_cluster_generate(&cl, 3, 2, &c, 1.5, 64, err, sizeof err), 0);
    SolverRequest req = {32, 64, 0, 20};
    Plan p, d;
    SolverStats st, dst;
    assert_int_equal(solver_exact(&p, &st, &c, &cl, &req, err, sizeof err), 0);
    assert_true(st.optimal);
    assert_int_equal(solver_layer_dp(&d, &dst, &c, &cl, &req, err, sizeof err), 0);
    assert_true(st.cost_s <= dst.cost_s * (1 + 1e-12));
    plan_free(&p);
    plan_free(&d);
    sim_cluster_free(&cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_two_devices),
        cmocka_unit_test(test_exact_three_devices),
        cmocka_unit_test(test_layer_dp_optimal),
        cmocka_unit_test(test_exact_real_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
