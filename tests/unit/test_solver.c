/* Solvers (src/plan/, priced through the cost interface): the exact branch and bound finds the
 * brute-force optimum on tiny cases (budgets binding), greedy is never better than it, its
 * reported cost is the simulator's token time, and the layer-wise DP is optimal over
 * contiguous blocks; the plans of fixed clusters are those recorded before the solvers moved
 * out of the simulator; the analytic model serves the same solvers. */
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
                     ROPE_INTERLEAVED, 1, 1, 2, {0}, "", 0, 0, 0, {0}, 0, 0, 0}; /* float32 weights */
    return c;
}

/* n workers of the given speeds (bytes/s) and budgets; links with per-pair latencies. */
static void cluster(Cluster *cl, int n, const double *speed, const size_t *budget,
                    uint64_t seed)
{
    sim_cluster_init(cl, n);
    cl->dev[0] = (ClusterDevice){.name = "c", .speed_Bps = 1e8, .op_overhead_s = 2e-6,
                                 .load_Bps = 1e8};
    for (int r = 1; r <= n; r++)
        cl->dev[r] = (ClusterDevice){.name = "w", .speed_Bps = speed[r - 1],
                                     .op_overhead_s = 2e-6,
                                     .mem_budget = budget ? budget[r - 1] : 0, .load_Bps = 1e8};
    uint64_t st = seed;
    for (int a = 0; a <= n; a++)
        for (int b = 0; b <= n; b++)
            cl->link[a * (n + 1) + b] =
                (NetLink){.rtt_s = 2 * (1e-4 * (1 + (double)(rng_next(&st) % 8))),
                          .bw_Bps = 5e7, .medium = MEDIUM_SWITCHED};
    cl->bcast = BCAST_AUTO;
}

static double rel(double a, double b) { return fabs(a - b) / b; }

static void exact_vs_brute(const ModelConfig *c, const Cluster *cl, int expect_binding)
{
    SolverRequest req = {16, 0, 0};
    SimCostInputs in = {cl, 8};
    CostModel m = sim_cost_model(&in);
    Plan p;
    SolverStats st;
    char err[256];
    double brute = solver_exact_brute(c, cl, &m, &req);
    assert_true(brute < DBL_MAX);
    if (solver_exact(&p, &st, c, cl, &m, &req, err, sizeof err) != 0)
        fail_msg("solver_exact: %s", err);
    assert_true(st.optimal);
    assert_true(rel(st.cost_s, brute) < 1e-9);
    assert_true(solver_plan_fits(&p, c, cl, req.kv_positions));
    assert_true(rel(sim_plan_token_time(c, cl, &p, in.pos), st.cost_s) < 1e-12);
    plan_free(&p);
    /* Greedy is a feasible head-level plan: never better than the optimum. */
    PlanRequest g = {.partition = PARTITION_HEAD, .placement = PLACEMENT_GREEDY,
                     .kv_positions = 16};
    if (plan_build_cluster(&p, c, &g, cl, 1.0, 0, err, sizeof err) == 0) {
        if (solver_plan_fits(&p, c, cl, 16))
            assert_true(sim_plan_token_time(c, cl, &p, in.pos) >= st.cost_s * (1 - 1e-12));
        plan_free(&p);
    }
    if (expect_binding) {
        /* The budgets matter: without them the optimum is at least as good, and better. */
        Cluster free_cl = *cl;
        ClusterDevice *devs = xmalloc((size_t)cl->n * sizeof(ClusterDevice));
        memcpy(devs, cl->dev, (size_t)cl->n * sizeof(ClusterDevice));
        for (int r = 1; r < cl->n; r++)
            devs[r].mem_budget = 0;
        free_cl.dev = devs;
        SimCostInputs fin = {&free_cl, in.pos};
        CostModel fm = sim_cost_model(&fin);
        assert_true(solver_exact_brute(c, &free_cl, &fm, &req) < brute * (1 - 1e-9));
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
    Cluster cl;
    cluster(&cl, 2, speed, budget, 1);
    exact_vs_brute(&c, &cl, 1);
    cluster_free(&cl);
}

static void test_exact_three_devices(void **state)
{
    (void)state;
    ModelConfig c = tiny(1);
    c.n_kv_heads = 4; /* 4 parts of one head each */
    double speed[3] = {3e6, 1e6, 2e6};
    size_t budget[3] = {30000, 0, 60000};
    Cluster cl;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        cluster(&cl, 3, speed, budget, seed);
        exact_vs_brute(&c, &cl, 1);
        cluster_free(&cl);
    }
}

static void test_layer_dp_optimal(void **state)
{
    (void)state;
    ModelConfig c = tiny(6);
    double speed[3] = {1e6, 3e6, 2e6};
    size_t budget[3] = {0, 110000, 160000}; /* the fastest takes two layers, the next three */
    Cluster cl;
    char err[256];
    for (uint64_t seed = 1; seed <= 4; seed++) {
        cluster(&cl, 3, speed, seed % 2 ? budget : NULL, seed);
        SolverRequest req = {16, 0, 0};
        SimCostInputs in = {&cl, 4};
        CostModel m = sim_cost_model(&in);
        Plan p;
        SolverStats st;
        if (solver_layer_dp(&p, &st, &c, &cl, &m, &req, err, sizeof err) != 0)
            fail_msg("solver_layer_dp: %s", err);
        double brute = solver_layer_brute(&c, &cl, &m, &req);
        assert_true(rel(st.cost_s, brute) < 1e-12);
        assert_true(rel(sim_plan_token_time(&c, &cl, &p, in.pos), st.cost_s) < 1e-12);
        assert_true(solver_plan_fits(&p, &c, &cl, 16));
        /* Contiguous: each rank holds one block of whole layers. */
        for (int l = 1; l < c.n_layers; l++)
            for (int k = 0; k < l - 1; k++)
                if (p.layers[k].ffn_rank == p.layers[l].ffn_rank)
                    assert_int_equal(p.layers[l - 1].ffn_rank, p.layers[l].ffn_rank);
        /* The engine's own layer-wise split is one of the candidates. */
        PlanRequest er = {.partition = PARTITION_LAYER, .placement = PLACEMENT_LAYER,
                          .kv_positions = 16};
        Plan e;
        if (plan_build_cluster(&e, &c, &er, &cl, 1.0, 0, err, sizeof err) == 0) {
            if (solver_plan_fits(&e, &c, &cl, 16))
                assert_true(sim_plan_token_time(&c, &cl, &e, 4) >= st.cost_s * (1 - 1e-12));
            plan_free(&e);
        }
        plan_free(&p);
        cluster_free(&cl);
    }
}

static void test_exact_real_shapes(void **state)
{
    (void)state;
    /* TinyLlama shapes, 3 heterogeneous devices, tight budgets: proven optimal quickly and
     * no worse than greedy or layer-dp. */
    ModelConfig c;
    Cluster cl;
    char err[256];
    assert_int_equal(sim_model_preset(&c, "tinyllama-1.1b", 6, err, sizeof err), 0);
    assert_int_equal(sim_cluster_generate(&cl, 3, 2, &c, 1.5, 64, err, sizeof err), 0);
    SolverRequest req = {64, 0, 20};
    SimCostInputs in = {&cl, 32};
    CostModel m = sim_cost_model(&in);
    Plan p, d;
    SolverStats st, dst;
    assert_int_equal(solver_exact(&p, &st, &c, &cl, &m, &req, err, sizeof err), 0);
    assert_true(st.optimal);
    assert_int_equal(solver_layer_dp(&d, &dst, &c, &cl, &m, &req, err, sizeof err), 0);
    assert_true(st.cost_s <= dst.cost_s * (1 + 1e-12));
    plan_free(&p);
    plan_free(&d);
    cluster_free(&cl);
}

/* "ranks of the parts:proj:ffn" per layer, '|' between layers (ranks below 10). */
static void plan_str(const Plan *p, char *out, size_t n)
{
    size_t o = 0;
    for (int l = 0; l < p->n_layers && o < n; l++) {
        const LayerPlan *lp = &p->layers[l];
        o += (size_t)snprintf(out + o, n - o, "%s", l ? "|" : "");
        for (int k = 0; k < lp->n_parts && o < n; k++)
            o += (size_t)snprintf(out + o, n - o, "%d", lp->parts[k].rank);
        if (o < n)
            o += (size_t)snprintf(out + o, n - o, ":%d:%d", lp->proj_rank, lp->ffn_rank);
    }
}

/* The layer DP's and the exact solver's plans and costs under the simulator's model, as
 * recorded before the solvers moved into src/plan/ behind the cost interface (GPT-2's since
 * 0.15 us more: the controller's final norm counts its bias too). */
static void expect_plans(const char *name, const ModelConfig *c, const Cluster *cl, int kv,
                         const char *dp_plan, double dp_cost, const char *ex_plan,
                         double ex_cost)
{
    SolverRequest req = {kv, 2000000, 0};
    SimCostInputs in = {cl, kv / 2};
    CostModel m = sim_cost_model(&in);
    Plan p;
    SolverStats st;
    char err[256], got[512];
    if (solver_layer_dp(&p, &st, c, cl, &m, &req, err, sizeof err) != 0)
        fail_msg("%s: solver_layer_dp: %s", name, err);
    plan_str(&p, got, sizeof got);
    print_message("%s dp %.17g %s\n", name, st.cost_s, got);
    assert_string_equal(got, dp_plan);
    assert_true(rel(st.cost_s, dp_cost) < 1e-12);
    plan_free(&p);
    if (solver_exact(&p, &st, c, cl, &m, &req, err, sizeof err) != 0)
        fail_msg("%s: solver_exact: %s", name, err);
    plan_str(&p, got, sizeof got);
    print_message("%s exact %.17g %s\n", name, st.cost_s, got);
    assert_true(st.optimal);
    assert_string_equal(got, ex_plan);
    assert_true(rel(st.cost_s, ex_cost) < 1e-12);
    plan_free(&p);
}

static void test_recorded_plans(void **state)
{
    (void)state;
    ModelConfig c, g, s;
    Cluster cl;
    char err[256];
    assert_int_equal(sim_model_preset(&c, "tinyllama-1.1b", 6, err, sizeof err), 0);
    assert_int_equal(sim_cluster_generate(&cl, 3, 2, &c, 1.5, 64, err, sizeof err), 0);
    expect_plans("gbit", &c, &cl, 64, "1111:1:1|1111:1:1|2222:2:2|2222:2:2|2222:2:2|2222:2:2",
                 0.066507927477306078,
                 "1222:2:2|1222:2:2|1222:2:2|1222:2:2|1122:1:1|1122:2:2",
                 0.062065193232874245);
    cluster_free(&cl);
    assert_int_equal(sim_cluster_generate(&cl, 4, 7, &c, 1.5, 64, err, sizeof err), 0);
    assert_int_equal(sim_cluster_set_links(&cl, "wifi", 5, err, sizeof err), 0);
    expect_plans("wifi", &c, &cl, 64, "3333:3:3|3333:3:3|4444:4:4|4444:4:4|4444:4:4|2222:2:2",
                 0.067362082487983616,
                 "4444:4:4|4444:4:4|4444:4:4|3444:3:3|3333:3:3|3333:3:3",
                 0.05695559328452942);
    cluster_free(&cl);
    assert_int_equal(sim_model_preset(&g, "gpt2-small", 4, err, sizeof err), 0);
    assert_int_equal(sim_cluster_generate(&cl, 4, 3, &g, 2.0, 128, err, sizeof err), 0);
    assert_int_equal(sim_cluster_set_links(&cl, "loopback", 3, err, sizeof err), 0);
    expect_plans("gpt2", &g, &cl, 128,
                 "444444444444:4:4|444444444444:4:4|111111111111:1:1|111111111111:1:1",
                 0.012581668324362378,
                 "222233444444:1:1|122223344444:1:1|222233444444:4:1|222233444444:4:1",
                 0.011194722016441073);
    cluster_free(&cl);
    /* The engine's path: measured inputs, stabilised, as the planner sees them. */
    assert_int_equal(sim_model_preset(&s, "tinyllama-1.1b", 5, err, sizeof err), 0);
    static const char *const dp[2] = {"1111:1:1|1111:1:1|1111:1:1|3333:3:3|3333:3:3",
                                      "1111:1:1|1111:1:1|3333:3:3|3333:3:3|3333:3:3"};
    static const char *const ex[2] = {"1134:1:1|1133:3:3|1133:1:1|1133:3:3|1133:1:1",
                                      "1111:1:1|1111:1:1|1111:1:1|1133:3:3|3333:3:3"};
    static const double dp_cost[2] = {0.23374789276097557, 0.24649531676097555};
    static const double ex_cost[2] = {0.22766833429407665, 0.24391758407804878};
    for (int shared = 0; shared < 2; shared++) {
        ClusterInputs ci;
        inputs_init(&ci, 5);
        const double sp[5] = {20e9, 4e9, 1.5e9, 4.1e9, 2.9e9};
        const size_t mem[5] = {0, 900000000, 0, 700000000, 1200000000};
        for (int r = 0; r < 5; r++) {
            ci.cluster.dev[r].speed_Bps = sp[r];
            ci.cluster.dev[r].mem_budget = mem[r];
        }
        NetLink l;
        assert_int_equal(cluster_parse_link(shared ? "wifi" : "ethernet,rtt=3ms", &l, err,
                                            sizeof err), 0);
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 5; b++) {
                if (a != b)
                    ci.cluster.link[a * 5 + b] = l;
                ci.rtt_ms[a * 5 + b] = a == b ? 0 : (shared ? 10.0 : 3.0) + 0.3 * ((a + 2 * b) % 5);
                ci.rtt_p95_ms[a * 5 + b] = ci.rtt_ms[a * 5 + b] + 1.5;
            }
        inputs_derive(&ci, &s, NULL, NULL);
        inputs_solver_cluster(&cl, &ci, 0.9 * 0.85);
        expect_plans(shared ? "measured wifi" : "measured ethernet", &s, &cl, 128, dp[shared],
                     dp_cost[shared], ex[shared], ex_cost[shared]);
        cluster_free(&cl);
        inputs_free(&ci);
    }
}

/* The same solvers over the analytic model: their costs are its token time (the layer-cost
 * calls add up to plan_predict_ms), the DP is optimal over contiguous blocks and the exact
 * search finds the brute-force optimum, on a switched network and a shared channel. */
static void test_solvers_analytic(void **state)
{
    (void)state;
    ModelConfig c = tiny(4);
    double speed[3] = {3e6, 1e6, 2e6};
    size_t budget[3] = {110000, 0, 160000};
    char err[256];
    for (int shared = 0; shared < 2; shared++) {
        Cluster cl;
        cluster(&cl, 3, speed, budget, 3);
        if (shared)
            for (int i = 0; i < cl.n * cl.n; i++)
                cl.link[i] = (NetLink){.rtt_s = 2e-3, .bw_Bps = 2e6, .medium = MEDIUM_SHARED,
                                       .relay_ap = 1, .frame_s = 1e-4};
        PlanRequest req = {.n_workers = 3, .cluster = &cl, .kv_positions = 16,
                           .lat_sd_ms = 0.2, .fixed_ms = 1.5};
        CostModel m = cost_model_analytic(&req);
        assert_string_equal(m.name, "analytic");
        SolverRequest sreq = {16, 0, 0};
        Plan p;
        SolverStats st;
        if (solver_layer_dp(&p, &st, &c, &cl, &m, &sreq, err, sizeof err) != 0)
            fail_msg("solver_layer_dp: %s", err);
        assert_true(rel(plan_predict_ms(&p, &c, &req) / 1e3, st.cost_s) < 1e-9);
        assert_true(rel(solver_layer_brute(&c, &cl, &m, &sreq), st.cost_s) < 1e-12);
        assert_true(solver_plan_fits(&p, &c, &cl, 16));
        plan_free(&p);
        if (solver_exact(&p, &st, &c, &cl, &m, &sreq, err, sizeof err) != 0)
            fail_msg("solver_exact: %s", err);
        assert_true(st.optimal);
        assert_true(rel(plan_predict_ms(&p, &c, &req) / 1e3, st.cost_s) < 1e-9);
        assert_true(solver_plan_fits(&p, &c, &cl, 16));
        plan_free(&p);
        /* one head per KV group: the brute force's part structure is the only one */
        ModelConfig one = tiny(1);
        one.n_kv_heads = 4;
        if (solver_exact(&p, &st, &one, &cl, &m, &sreq, err, sizeof err) != 0)
            fail_msg("solver_exact: %s", err);
        assert_true(rel(solver_exact_brute(&one, &cl, &m, &sreq), st.cost_s) < 1e-9);
        plan_free(&p);
        /* A whole layer on rank 3: from the controller it costs one hop more than from rank
         * 3 itself, which streams the weights and its two KV groups' one position at its
         * speed. */
        LayerPlan lp = {0};
        AttnPart parts[2] = {{3, 0, 0, 2}, {3, 1, 0, 2}};
        lp.mode = LAYER_PIPE;
        lp.n_parts = 2;
        lp.parts = parts;
        lp.proj_rank = 3;
        lp.ffn_rank = 3;
        double from0 = cost_layer_s(&m, &lp, 0, &c), from3 = cost_layer_s(&m, &lp, 3, &c);
        assert_true(rel(from0 - from3, cost_hop_s(&m, 0, 3, &c)) < 1e-9);
        double w = 2.0 * (double)config_attn_unit_bytes(&c, 2) + (double)config_proj_bytes(&c) +
                   (double)config_ffn_bytes(&c, c.ffn_dim) + 2.0 * (double)config_kv_bytes(&c, 1);
        assert_true(rel(from3, w / cl.dev[3].speed_Bps) < 1e-9);
        assert_true(from3 > cost_ffn_s(&m, 3, &c));
        cluster_free(&cl);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_two_devices),
        cmocka_unit_test(test_exact_three_devices),
        cmocka_unit_test(test_layer_dp_optimal),
        cmocka_unit_test(test_exact_real_shapes),
        cmocka_unit_test(test_recorded_plans),
        cmocka_unit_test(test_solvers_analytic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
