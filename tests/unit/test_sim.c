/* Simulator: same seed, same event trace (byte for byte); hand-checkable 1- and 2-device
 * cases equal the analytic sum of op costs; the token time is additive over layers (what the
 * solvers rely on); policies, speculation and re-placement behave as documented. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cost.h"
#include "sim.h"
#include "solver.h"
#include "util.h"
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ModelConfig small_llama(void)
{
    ModelConfig c = {ARCH_LLAMA, 64, 4, 8, 4, 8, 172, 512, 512, 1e-5f, 10000.0f,
                     ROPE_INTERLEAVED, 1, 1, 2, {0}, "", 0, 0, 0, {0}, 0, 0, 0}; /* float32 weights */
    return c;
}

/* n identical-link workers; speeds given; every link latency lat, bandwidth bw, no jitter. */
static void uniform_cluster(Cluster *cl, int n, const double *speed, double lat, double bw)
{
    sim_cluster_init(cl, n);
    for (int r = 0; r <= n; r++)
        cl->dev[r] = (ClusterDevice){.name = "d", .speed_Bps = r == 0 ? 5e8 : speed[r - 1],
                                     .op_overhead_s = 1e-5, .load_Bps = 1e8};
    for (int i = 0; i < (n + 1) * (n + 1); i++)
        cl->link[i] = (NetLink){.rtt_s = 2 * lat, .bw_Bps = bw, .medium = MEDIUM_SWITCHED};
    cl->bcast = BCAST_LINEAR;
}

static void run_ok(SimResult *r, const ModelConfig *c, const Cluster *cl, const SimOptions *o)
{
    char err[256];
    if (sim_run(r, c, cl, o, err, sizeof err) != 0)
        fail_msg("sim_run: %s", err);
    assert_string_equal(r->status, "ok");
}

/* Reads a whole FILE* from the start into a malloc'd buffer. */
static char *slurp(FILE *f, long *len)
{
    fflush(f);
    *len = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)*len + 1);
    assert_int_equal(fread(buf, 1, (size_t)*len, f), (size_t)*len);
    buf[*len] = '\0';
    return buf;
}

static char *trace_of(const ModelConfig *c, const Cluster *cl, SimPolicy p, uint64_t seed,
                      long *len)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    SimOptions o = {p, NULL, 40, seed, 1, NULL, 0.6, 0.85, 8, f};
    SimResult r;
    run_ok(&r, c, cl, &o);
    sim_result_free(&r);
    char *t = slurp(f, len);
    fclose(f);
    return t;
}

static void test_determinism(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    Cluster cl;
    char err[256];
    assert_int_equal(sim_cluster_generate(&cl, 6, 3, &c, 2.0, 40, err, sizeof err), 0);
    assert_int_equal(sim_cluster_set_links(&cl, "wifi", 3, err, sizeof err), 0);
    SimPolicy ps[] = {SIM_POLICY_GREEDY, SIM_POLICY_DYNAMIC, SIM_POLICY_GALAXY,
                      SIM_POLICY_LAYER_DP};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        long n1, n2, n3;
        char *a = trace_of(&c, &cl, ps[i], 11, &n1), *b = trace_of(&c, &cl, ps[i], 11, &n2);
        char *d = trace_of(&c, &cl, ps[i], 12, &n3);
        assert_true(n1 > 1000);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, (size_t)n1);
        /* Jitter and speculation draws follow the seed. */
        assert_true(n1 != n3 || memcmp(a, d, (size_t)n1) != 0);
        free(a);
        free(b);
        free(d);
    }
    cluster_free(&cl);
}

/* Attention of every part of a layer on one device at pos. */
static double layer_compute(const ModelConfig *c, const Cluster *cl, int rank, int pos)
{
    double t = sim_cost_proj(c, cl, rank) + sim_cost_ffn(c, cl, rank);
    for (int g = 0; g < c->n_kv_heads; g++)
        t += sim_cost_attn(c, cl, rank, config_q_per_kv(c), pos);
    return t;
}

static void test_one_device_analytic(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    Cluster cl;
    double speed[1] = {2e8};
    uniform_cluster(&cl, 1, speed, 1e-3, 1e7);
    SimOptions o = {SIM_POLICY_GREEDY, NULL, 5, 1, 0, NULL, 1, 0.85, 0, NULL};
    SimResult r;
    run_ok(&r, &c, &cl, &o);
    const double msg = sim_cost_msg(&cl, 0, 1, sim_msg_bytes(&c));
    assert_true(fabs(msg - (1e-3 + (32.0 + 64 * 4) / 1e7)) < 1e-15);
    for (int pos = 0; pos < 5; pos++) {
        /* embed, X to the worker, every layer there, X back, LM head. */
        double t = sim_cost_controller(&c, &cl, 1) + msg + msg + sim_cost_controller(&c, &cl, 0);
        for (int l = 0; l < c.n_layers; l++)
            t += layer_compute(&c, &cl, 1, pos);
        assert_true(fabs(r.token_ms[pos] - t * 1e3) < 1e-9);
    }
    assert_int_equal(r.devices_used, 1);
    sim_result_free(&r);
    cluster_free(&cl);
}

static void test_two_devices_analytic(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    Cluster cl;
    double speed[2] = {1e8, 3e8};
    uniform_cluster(&cl, 2, speed, 2e-3, 1e7);
    /* The engine's layer-wise placement: contiguous blocks sized by speed (1 and 3 layers). */
    PlanRequest req = {.partition = PARTITION_LAYER, .placement = PLACEMENT_LAYER,
                       .kv_positions = 8};
    Plan p;
    char err[256];
    assert_int_equal(plan_build_cluster(&p, &c, &req, &cl, 1.0, 0, err, sizeof err), 0);
    SimOptions o = {SIM_POLICY_PLAN, &p, 3, 1, 0, NULL, 1, 0.85, 0, NULL};
    SimResult r;
    run_ok(&r, &c, &cl, &o);
    const double msg = sim_cost_msg(&cl, 0, 1, sim_msg_bytes(&c));
    for (int pos = 0; pos < 3; pos++) {
        double t = sim_cost_controller(&c, &cl, 1) + sim_cost_controller(&c, &cl, 0);
        int prev = 0;
        for (int l = 0; l < c.n_layers; l++) {
            int rank = p.layers[l].ffn_rank;
            t += (rank != prev ? msg : 0) + layer_compute(&c, &cl, rank, pos);
            prev = rank;
        }
        t += msg; /* back to the controller */
        assert_true(fabs(r.token_ms[pos] - t * 1e3) < 1e-9);
    }
    sim_result_free(&r);
    /* Head-level on 2 devices, one layer by hand: parts of units 0,1 on rank 1, 2,3 on rank
     * 2, projection and FFN on rank 1.  X goes 0->1 then 0->2 (the root's uplink queues). */
    Plan h;
    PlanRequest hreq = {.partition = PARTITION_HEAD, .placement = PLACEMENT_ROUNDROBIN,
                        .n_workers = 2, .kv_positions = 8};
    assert_int_equal(plan_build(&h, &c, &hreq, err, sizeof err), 0);
    LayerPlan *lp = &h.layers[0];
    for (int k = 0; k < lp->n_parts; k++)
        lp->parts[k].rank = lp->parts[k].unit < 2 ? 1 : 2;
    lp->proj_rank = lp->ffn_rank = 1;
    const double B = sim_msg_bytes(&c), bw = 1e7, lat = 2e-3;
    double a1 = 2 * sim_cost_attn(&c, &cl, 1, 2, 0), a2 = 2 * sim_cost_attn(&c, &cl, 2, 2, 0);
    double x1 = B / bw + lat, x2 = 2 * B / bw + lat;
    double gbytes = 32.0 + 2 * 2 * 8 * 4; /* header + 2 parts x 2 heads x head_dim floats */
    double g2 = x2 + a2 + gbytes / bw + lat;
    double ready = x1 + a1 > g2 ? x1 + a1 : g2;
    double expect = ready + sim_cost_proj(&c, &cl, 1) + sim_cost_ffn(&c, &cl, 1);
    assert_true(fabs(sim_layer_time(&c, &cl, lp, 0, 0) - expect) < 1e-12);
    plan_free(&h);
    plan_free(&p);
    cluster_free(&cl);
}

static void test_layers_additive(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    Cluster cl;
    char err[256];
    assert_int_equal(sim_cluster_generate(&cl, 5, 7, &c, 0, 64, err, sizeof err), 0);
    for (int k = 0; k < 3; k++) {
        PlanRequest req = {.partition = PARTITION_HEAD, .placement = (PlacementKind)k,
                           .seed = 5, .kv_positions = 64};
        Plan p;
        assert_int_equal(plan_build_cluster(&p, &c, &req, &cl, 1.0, 0, err, sizeof err), 0);
        double t = sim_cost_controller(&c, &cl, 1) + sim_cost_controller(&c, &cl, 0);
        int prev = 0;
        for (int l = 0; l < c.n_layers; l++) {
            t += sim_layer_time(&c, &cl, &p.layers[l], prev, 20);
            prev = p.layers[l].ffn_rank;
        }
        t += sim_cost_msg(&cl, prev, 0, sim_msg_bytes(&c));
        assert_true(fabs(sim_plan_token_time(&c, &cl, &p, 20) - t) < 1e-12);
        plan_free(&p);
    }
    cluster_free(&cl);
}

static double mean_ms(const ModelConfig *c, const Cluster *cl, const Plan *plan, int spec,
                      double accept)
{
    SimOptions o = {SIM_POLICY_PLAN, plan, 30, 4, spec, NULL, accept, 0.85, 0, NULL};
    SimResult r;
    run_ok(&r, c, cl, &o);
    double m = 0;
    for (int i = 0; i < r.n_tokens; i++)
        m += r.token_ms[i] / r.n_tokens;
    if (spec)
        assert_true(r.spec_tried > 0);
    sim_result_free(&r);
    return m;
}

static void test_speculation(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    Cluster cl;
    double speed[4] = {1e8, 1e8, 1e8, 1e8};
    uniform_cluster(&cl, 4, speed, 1e-3, 1e8);
    /* Each layer's FFN and projection on device 1 or 2 (alternating), its heads on 3 and 4:
     * while layer l's FFN runs, layer l+1's heads are idle and can speculate. */
    Plan p;
    PlanRequest req = {.partition = PARTITION_HEAD, .placement = PLACEMENT_ROUNDROBIN,
                       .n_workers = 4, .kv_positions = 30};
    char err[256];
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    for (int l = 0; l < p.n_layers; l++) {
        p.layers[l].proj_rank = p.layers[l].ffn_rank = l % 2 + 1;
        for (int k = 0; k < p.layers[l].n_parts; k++)
            p.layers[l].parts[k].rank = 3 + k % 2;
    }
    assert_int_equal(plan_validate(&p, &c, err, sizeof err), 0);
    double base = mean_ms(&c, &cl, &p, 0, 1);
    double keep = mean_ms(&c, &cl, &p, 1, 1.0);
    double reject = mean_ms(&c, &cl, &p, 1, 0.0);
    /* Kept speculation hides attention behind the FFN; a rejected one repeats it on X', which
     * here costs what no speculation costs (the wasted work ran on idle devices). */
    assert_true(keep < base * 0.95);
    assert_true(reject >= base * (1 - 1e-12));
    plan_free(&p);
    cluster_free(&cl);
}

static void test_policies_and_replacement(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    c.n_layers = 6;
    Cluster cl;
    char err[256];
    assert_int_equal(sim_cluster_generate(&cl, 8, 5, &c, 1.6, 200, err, sizeof err), 0);
    for (int p = 0; p < SIM_POLICY_PLAN; p++) {
        SimOptions o = {(SimPolicy)p, NULL, 200, 1, 0, NULL, 1, 0.85, 16, NULL};
        SimResult r;
        run_ok(&r, &c, &cl, &o);
        assert_int_equal(r.n_tokens, 200);
        assert_true(r.peak_mem_frac <= 1.0 + 1e-9);
        assert_int_equal(plan_validate(&r.plan, &c, err, sizeof err), 0);
        if (p == SIM_POLICY_GALAXY)
            assert_int_equal(r.plan.layers[0].mode, LAYER_SLICE);
        if (p == SIM_POLICY_DYNAMIC) {
            /* Planned for 16 positions with 15% headroom: the KV cache outgrows it. */
            assert_true(r.replans >= 1);
            assert_true(r.migrated_bytes > 0);
        }
        sim_result_free(&r);
    }
    cluster_free(&cl);
}

static void test_cluster_roundtrip(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    Cluster a, b;
    char err[256], path[] = "/tmp/hs_sim_devXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(sim_cluster_generate(&a, 4, 9, &c, 1.5, 64, err, sizeof err), 0);
    assert_int_equal(sim_cluster_set_links(&a, "wifi", 2, err, sizeof err), 0);
    assert_int_equal(sim_cluster_write(&a, path, err, sizeof err), 0);
    assert_int_equal(sim_cluster_read(&b, path, err, sizeof err), 0);
    assert_int_equal(b.n, 5);
    for (int i = 0; i < 25; i++)
        assert_int_equal(b.link[i].medium, MEDIUM_SHARED);
    assert_int_equal(b.jitter, JITTER_HALFNORMAL);
    for (int r = 0; r <= 4; r++)
        assert_true(fabs(b.dev[r].speed_Bps - a.dev[r].speed_Bps) < 1e-3 * a.dev[r].speed_Bps);
    for (int i = 0; i < 25; i++)
        assert_true(fabs(b.link[i].rtt_s - a.link[i].rtt_s) < 2e-9);
    /* The cluster-wide settings by name: an ideal medium, a linear broadcast, the
     * emulation's uniform jitter. */
    cluster_set_medium(&b, MEDIUM_IDEAL);
    b.bcast = BCAST_LINEAR;
    b.jitter = JITTER_UNIFORM;
    json_t *j = sim_cluster_to_json(&b);
    assert_string_equal(json_string_value(json_object_get(j, "medium")), "ideal");
    assert_string_equal(json_string_value(json_object_get(j, "bcast")), "linear");
    assert_string_equal(json_string_value(json_object_get(j, "jitter")), "uniform");
    assert_string_equal(json_string_value(json_object_get(j, "links")), "wifi");
    json_decref(j);
    assert_int_equal(sim_cluster_write(&b, path, err, sizeof err), 0);
    cluster_free(&a);
    assert_int_equal(sim_cluster_read(&a, path, err, sizeof err), 0);
    for (int i = 0; i < 25; i++)
        assert_int_equal(a.link[i].medium, MEDIUM_IDEAL);
    assert_int_equal(a.bcast, BCAST_LINEAR);
    assert_int_equal(a.jitter, JITTER_UNIFORM);
    unlink(path);
    close(fd);
    cluster_free(&a);
    cluster_free(&b);
}

/* Both cost models behind one interface: the candidate builder prices each candidate with the
 * model it is given (the simulator's: its deterministic token time; the analytic one: the
 * same choice and predictions as plan_build_auto), and keeps the fastest or, within 1% of
 * it, the simpler. */
static void test_cost_models(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    Cluster cl;
    char err[256];
    assert_int_equal(sim_cluster_generate(&cl, 4, 2, &c, 3.0, 64, err, sizeof err), 0);
    assert_int_equal(sim_cluster_set_links(&cl, "wifi", 2, err, sizeof err), 0);
    PlanRequest req = {.partition = PARTITION_HEAD, .placement = PLACEMENT_GREEDY, .seed = 1,
                       .n_workers = 4, .cluster = &cl, .kv_positions = 64};
    SimCostInputs in = {&cl, 32};
    CostModel sim = sim_cost_model(&in), ana = cost_model_analytic(&req);
    assert_string_equal(sim.name, "simulated");
    assert_string_equal(ana.name, "analytic");
    const Partition parts[3] = {PARTITION_LAYER, PARTITION_HEAD, PARTITION_SLICE};
    const PlacementKind places[3] = {PLACEMENT_LAYER, PLACEMENT_GREEDY, PLACEMENT_GREEDY};
    for (int which = 0; which < 2; which++) {
        const CostModel *m = which ? &ana : &sim;
        Plan best;
        double preds[3], pred;
        assert_int_equal(cost_build_best(&best, &c, &req, m, NULL, 0, &pred, preds, NULL, err, sizeof err), 0);
        int pick = -1, priced = 0;
        double v = 0;
        for (int i = 0; i < 3; i++) {
            PlanRequest r = req;
            r.partition = parts[i];
            r.placement = places[i];
            Plan p;
            if (plan_build(&p, &c, &r, err, sizeof err) < 0) { /* does not fit: no price */
                assert_true(preds[i] == -1);
                continue;
            }
            double want = which ? plan_predict_ms(&p, &c, &req)
                                : sim_plan_token_time(&c, &cl, &p, 32) * 1e3;
            assert_true(preds[i] == want);
            assert_true(cost_token_ms(m, &p, &c) == want);
            priced++;
            if (pick < 0 || want < v * 0.99) {
                pick = i;
                v = want;
            }
            plan_free(&p);
        }
        assert_true(priced >= 2);
        assert_int_equal(best.partition, parts[pick]);
        assert_true(pred == v);
        plan_free(&best);
        if (which) { /* the analytic model: what --partition auto has always chosen */
            Plan a;
            double apreds[3], apred;
            assert_int_equal(plan_build_auto(&a, &c, &req, NULL, 0, &apred, apreds, NULL, err, sizeof err), 0);
            assert_int_equal(a.partition, parts[pick]);
            assert_true(apred == pred);
            assert_memory_equal(apreds, preds, sizeof preds);
            plan_free(&a);
        }
    }
    cluster_free(&cl);
}

/* --partition auto's layer-wise candidate with the cluster: the better of N stages and the
 * best layer-wise plan over subsets of the boards (solver_layer_dp under the same model).
 * On WiFi a model that fits one board is one stage, not four, and the prediction says so. */
static void test_auto_layer_dp(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    Cluster cl;
    char err[256];
    assert_int_equal(sim_cluster_generate(&cl, 4, 2, &c, 3.0, 64, err, sizeof err), 0);
    assert_int_equal(sim_cluster_set_links(&cl, "wifi", 2, err, sizeof err), 0);
    PlanRequest req = {.partition = PARTITION_LAYER, .placement = PLACEMENT_LAYER, .seed = 1,
                       .n_workers = 4, .cluster = &cl, .kv_positions = 64};
    CostModel ana = cost_model_analytic(&req);
    Plan naive, dp, a;
    assert_int_equal(plan_build(&naive, &c, &req, err, sizeof err), 0);
    SolverRequest sreq = {64, 2000000, 0};
    SolverStats st;
    assert_int_equal(solver_layer_dp(&dp, &st, &c, &cl, &ana, &sreq, err, sizeof err), 0);
    double v_naive = cost_token_ms(&ana, &naive, &c), v_dp = cost_token_ms(&ana, &dp, &c);
    /* four stages pay three more WiFi hops than the fewest boards that hold the model */
    assert_true(v_dp < v_naive);
    double preds[3], pred, preds0[3];
    int layer_dp = -1;
    assert_int_equal(plan_build_auto(&a, &c, &req, &cl, 64, &pred, preds, &layer_dp, err,
                                     sizeof err), 0);
    assert_true(preds[0] == v_dp);
    assert_true(pred <= v_dp);
    if (a.partition == PARTITION_LAYER) { /* the solver's plan, layer by layer */
        assert_int_equal(layer_dp, 1);
        for (int l = 0; l < c.n_layers; l++)
            assert_int_equal(a.layers[l].ffn_rank, dp.layers[l].ffn_rank);
    } else {
        assert_int_equal(layer_dp, 0);
        assert_true(pred < 0.99 * v_dp);
    }
    plan_free(&a);
    /* without the cluster: the naive stages, as before */
    assert_int_equal(plan_build_auto(&a, &c, &req, NULL, 0, &pred, preds0, &layer_dp, err,
                                     sizeof err), 0);
    assert_true(preds0[0] == v_naive);
    assert_int_equal(layer_dp, 0);
    assert_true(preds0[1] == preds[1] && preds0[2] == preds[2]);
    plan_free(&a);
    plan_free(&dp);
    plan_free(&naive);
    cluster_free(&cl);
}

/* The shared medium and the exchange patterns in the event core: a slice exchange's
 * transmissions queue on one channel (each taking the air twice through an access point),
 * so the same plan slows down from switched to shared to relayed, and on the shared channel
 * reduce-and-broadcast (2(n-1) transmissions an exchange) beats all-to-all (n(n-1)). */
static void test_shared_medium(void **state)
{
    (void)state;
    ModelConfig c = small_llama();
    const double speed[4] = {1e9, 1e9, 1e9, 1e9};
    Cluster cl;
    uniform_cluster(&cl, 4, speed, 1e-3, 1e6); /* 1 MB/s: the air dominates */
    PlanRequest req = {.partition = PARTITION_SLICE, .placement = PLACEMENT_GREEDY,
                       .n_workers = 4, .kv_positions = 64, .head_on_controller = 1,
                       .exchange = EXCHANGE_ALL};
    Plan p;
    char err[256];
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    const double sw = sim_plan_token_time(&c, &cl, &p, 8);
    cluster_set_medium(&cl, MEDIUM_SHARED);
    const double sh = sim_plan_token_time(&c, &cl, &p, 8);
    for (int i = 0; i < cl.n * cl.n; i++)
        cl.link[i].relay_ap = 1;
    const double ap = sim_plan_token_time(&c, &cl, &p, 8);
    const double air = sim_msg_bytes(&c) / 1e6, ex = 2.0 * c.n_layers;
    print_message("slice token: switched %.1f ms, shared %.1f, via an AP %.1f (air %.2f ms)\n",
                  sw * 1e3, sh * 1e3, ap * 1e3, air * 1e3);
    /* 12 transmissions queued, against a switched sender's 3 on its own uplink */
    assert_true(sh - sw >= ex * 4.5 * air);
    assert_true(ap - sh >= ex * 11 * air);
    p.exchange = EXCHANGE_REDUCE;
    const double red = sim_plan_token_time(&c, &cl, &p, 8);
    assert_true(red < ap);
    plan_free(&p);
    /* --exchange exact: four all-gathers of whole values per layer, (n-1)(4n headers +
     * (heads + 2 dim + ffn) floats) bytes on the channel, twice through the AP: the token
     * takes at least their airtime, and it is not the all-to-all's time. */
    req.exchange = EXCHANGE_EXACT;
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    const double exact = sim_plan_token_time(&c, &cl, &p, 8);
    const double qd = c.n_heads * c.head_dim;
    const double b_exact = 3.0 * (4 * 4 * sizeof(WireHdr) + (qd + 2 * c.dim + c.ffn_dim) * 4);
    print_message("exact: %.1f ms via an AP (its bytes' air %.1f ms)\n", exact * 1e3,
                  2 * c.n_layers * b_exact / 1e6 * 1e3);
    assert_true(exact >= 2 * c.n_layers * b_exact / 1e6);
    assert_true(fabs(exact - ap) > 0.01 * ap);
    plan_free(&p);
    cluster_free(&cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_one_device_analytic),
        cmocka_unit_test(test_two_devices_analytic),
        cmocka_unit_test(test_layers_additive),
        cmocka_unit_test(test_speculation),
        cmocka_unit_test(test_policies_and_replacement),
        cmocka_unit_test(test_cluster_roundtrip),
        cmocka_unit_test(test_cost_models),
        cmocka_unit_test(test_auto_layer_dp),
        cmocka_unit_test(test_shared_medium),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
