/* Placement: every plan covers every head once, respects budgets, and each policy has the
 * shape it promises. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "netmodel.h"
#include "plan.h"
#include "util.h"

#include <math.h>
#include <string.h>

static ModelConfig tinyllama(void)
{
    ModelConfig c = {ARCH_LLAMA, 2048, 22, 32, 4, 64, 5632, 32000, 2048, 1e-5f, 10000.0f,
                     ROPE_HALF, 0, 1, 2, {0}, "", 0, 0, 0, {0}, 0, 0, 0}; /* float32 weights */
    return c;
}

static ModelConfig stories(void)
{
    ModelConfig c = {ARCH_LLAMA, 64, 5, 8, 4, 8, 172, 512, 512, 1e-5f, 10000.0f,
                     ROPE_INTERLEAVED, 1, 1, 2, {0}, "", 0, 0, 0, {0}, 0, 0, 0}; /* float32 weights */
    return c;
}

/* A cluster of n workers as the planner takes it: one_way_ms on every link between two ranks
 * (< 0: the links unknown), speeds (bytes/s; NULL: unknown) and budgets (NULL: none). */
static void make_cluster(Cluster *cl, int n, double one_way_ms, const double *speed,
                         const size_t *mem)
{
    cluster_init(cl, n + 1);
    for (int r = 1; r <= n; r++) {
        cl->dev[r].speed_Bps = speed ? speed[r - 1] : 0;
        cl->dev[r].mem_budget = mem ? mem[r - 1] : 0;
    }
    if (one_way_ms < 0) {
        free(cl->link);
        cl->link = NULL;
        return;
    }
    for (int a = 0; a <= n; a++)
        for (int b = 0; b <= n; b++)
            cluster_link(cl, a, b)->rtt_s = a == b ? 0 : 2 * (one_way_ms * 1e-3);
}

static void build_ok(Plan *p, const ModelConfig *c, Partition part, PlacementKind k, int n)
{
    PlanRequest req = {.partition = part, .placement = k, .seed = 7, .n_workers = n,
                       .kv_positions = 64};
    char err[256];
    int rc = plan_build(p, c, &req, err, sizeof err);
    if (rc != 0)
        fail_msg("plan_build: %s", err);
    assert_int_equal(plan_validate(p, c, err, sizeof err), 0);
}

static void test_all_policies_valid(void **state)
{
    (void)state;
    ModelConfig cs[2] = {tinyllama(), stories()};
    for (int ci = 0; ci < 2; ci++)
        for (int part = 0; part < 3; part++)
            for (int k = 0; k < 4; k++)
                for (int n = 1; n <= 9; n++) {
                    Plan p;
                    build_ok(&p, &cs[ci], (Partition)part, (PlacementKind)k, n);
                    for (int l = 0; l < p.n_layers; l++) {
                        assert_in_range(p.layers[l].proj_rank, 1, n);
                        assert_in_range(p.layers[l].ffn_rank, 1, n);
                        for (int j = 0; j < p.layers[l].n_parts; j++)
                            assert_in_range(p.layers[l].parts[j].rank, 1, n);
                    }
                    plan_free(&p);
                }
}

static void test_layerwise_contiguous(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    Plan p;
    build_ok(&p, &c, PARTITION_HEAD, PLACEMENT_LAYER, 4);
    assert_int_equal(p.partition, PARTITION_LAYER);
    int prev = 1, counts[5] = {0};
    for (int l = 0; l < c.n_layers; l++) {
        int r = p.layers[l].ffn_rank;
        assert_true(r >= prev); /* contiguous blocks in rank order */
        prev = r;
        counts[r]++;
        assert_int_equal(p.layers[l].proj_rank, r);
        for (int j = 0; j < p.layers[l].n_parts; j++)
            assert_int_equal(p.layers[l].parts[j].rank, r);
    }
    for (int r = 1; r <= 4; r++) /* 22 layers over 4: blocks of 5 or 6 */
        assert_in_range(counts[r], 5, 6);
    plan_free(&p);
}

static void test_split_groups_when_more_workers(void **state)
{
    (void)state;
    ModelConfig c = stories(); /* 4 KV groups of 2 query heads */
    Plan p;
    build_ok(&p, &c, PARTITION_HEAD, PLACEMENT_GREEDY, 7);
    assert_int_equal(p.layers[0].n_parts, 8); /* every group split in two */
    for (int j = 0; j < 8; j++)
        assert_int_equal(p.layers[0].parts[j].q1 - p.layers[0].parts[j].q0, 1);
    plan_free(&p);
}

static void test_greedy_spreads_heads(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    Plan p;
    build_ok(&p, &c, PARTITION_HEAD, PLACEMENT_GREEDY, 4);
    /* Heads of a layer run in parallel: the 4 units of a layer sit on distinct ranks
     * other than... at least 3 distinct ranks per layer. */
    for (int l = 0; l < c.n_layers; l++) {
        int seen[5] = {0}, distinct = 0;
        for (int j = 0; j < p.layers[l].n_parts; j++)
            distinct += !seen[p.layers[l].parts[j].rank]++;
        assert_true(distinct >= 3);
    }
    /* Memory balanced within one whole layer of each other (the fair shares of 22 layers
     * over 4 differ by one FFN; the heads add less than a layer's attention). */
    size_t mn = SIZE_MAX, mx = 0;
    for (int r = 1; r <= 4; r++) {
        size_t b = plan_rank_weight_bytes(&p, &c, r);
        mn = b < mn ? b : mn;
        mx = b > mx ? b : mx;
    }
    assert_true(mx - mn <= (config_proj_floats(&c) + config_ffn_floats(&c, c.ffn_dim) +
                            config_attn_unit_floats(&c, c.n_heads)) * 4);
    plan_free(&p);
}

static void test_random_is_seeded(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    Plan a, b;
    build_ok(&a, &c, PARTITION_HEAD, PLACEMENT_RANDOM, 4);
    build_ok(&b, &c, PARTITION_HEAD, PLACEMENT_RANDOM, 4);
    for (int l = 0; l < c.n_layers; l++) {
        assert_int_equal(a.layers[l].ffn_rank, b.layers[l].ffn_rank);
        for (int j = 0; j < a.layers[l].n_parts; j++)
            assert_int_equal(a.layers[l].parts[j].rank, b.layers[l].parts[j].rank);
    }
    plan_free(&a);
    plan_free(&b);
}

static void test_budget_refused(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    Cluster d;
    make_cluster(&d, 4, -1, NULL, NULL);
    for (int i = 1; i <= 4; i++)
        d.dev[i].mem_budget = 500u * 1000 * 1000; /* 4 x 0.5 GB < 4.4 GB of layers */
    for (int k = 0; k < 4; k++) {
        PlanRequest req = {.partition = PARTITION_HEAD, .placement = (PlacementKind)k,
                           .seed = 1, .n_workers = 4, .cluster = &d, .kv_positions = 64};
        Plan p;
        char err[256] = "";
        assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), -1);
        assert_non_null(strstr(err, "budget"));
    }
    for (int i = 1; i <= 4; i++)
        d.dev[i].mem_budget = 2000u * 1000 * 1000;
    PlanRequest ok = {.partition = PARTITION_HEAD, .placement = PLACEMENT_GREEDY, .seed = 1,
                      .n_workers = 4, .cluster = &d, .kv_positions = 64};
    Plan p;
    char err[256];
    assert_int_equal(plan_build(&p, &c, &ok, err, sizeof err), 0);
    for (int r = 1; r <= 4; r++)
        assert_true(plan_rank_weight_bytes(&p, &c, r) + plan_rank_kv_bytes(&p, &c, r, 64) <=
                    d.dev[r].mem_budget);
    plan_free(&p);
    cluster_free(&d);
}

/* SLICE water-fill: every layer SLICE over the workers, shares in proportion to speed, capped
 * by budgets where the speed-proportional SLICE cut would overflow one. */
static void test_waterfill(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    const double sp[4] = {1.0 * 10e9, 2.0 * 10e9, 1.0 * 10e9, 0.5 * 10e9};
    Cluster d;
    make_cluster(&d, 4, -1, sp, NULL);
    PlanRequest req = {.partition = PARTITION_HEAD, .placement = PLACEMENT_WATERFILL, .seed = 1,
                       .n_workers = 4, .cluster = &d, .kv_positions = 64};
    Plan p;
    char err[256] = "";
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    assert_int_equal(p.partition, PARTITION_SLICE);
    assert_int_equal(p.placement, PLACEMENT_WATERFILL);
    assert_string_equal(plan_placement_name(p.placement), "waterfill");
    for (int l = 0; l < p.n_layers; l++)
        assert_int_equal(p.layers[l].mode, LAYER_SLICE);
    size_t w[5];
    for (int r = 1; r <= 4; r++)
        w[r] = plan_rank_weight_bytes(&p, &c, r);
    assert_true(w[2] > w[1] && w[2] > w[3] && w[4] < w[1] && w[4] < w[3]);
    plan_free(&p);
    /* Rank 2 (the fastest) gets 0.8 GB: the speed-proportional cut (about 2 GB there) does
     * not fit, the water-fill does, within every budget. */
    for (int i = 0; i < 4; i++)
        d.dev[i + 1].mem_budget = i == 1 ? 800u * 1000 * 1000 : 3000u * 1000 * 1000;
    PlanRequest plain = req;
    plain.partition = PARTITION_SLICE;
    plain.placement = PLACEMENT_GREEDY;
    assert_int_equal(plan_build(&p, &c, &plain, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not fit"));
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    for (int r = 1; r <= 4; r++)
        assert_true(plan_rank_weight_bytes(&p, &c, r) + plan_rank_kv_bytes(&p, &c, r, 64) <=
                    d.dev[r].mem_budget);
    assert_int_equal(plan_validate(&p, &c, err, sizeof err), 0);
    plan_free(&p);
    /* Budgets that together cannot hold the model. */
    for (int i = 1; i <= 4; i++)
        d.dev[i].mem_budget = 500u * 1000 * 1000;
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), -1);
    assert_non_null(strstr(err, "budgets cannot hold"));
    PlacementKind k;
    assert_int_equal(plan_parse_placement("waterfill", &k), 0);
    assert_int_equal(k, PLACEMENT_WATERFILL);
    cluster_free(&d);
}

static void test_json_and_print(void **state)
{
    (void)state;
    ModelConfig c = stories();
    Plan p;
    build_ok(&p, &c, PARTITION_HEAD, PLACEMENT_ROUNDROBIN, 3);
    json_t *j = plan_to_json(&p, &c);
    assert_int_equal(json_array_size(json_object_get(j, "layers")), 5);
    json_decref(j);
    FILE *f = tmpfile();
    plan_print(&p, &c, f);
    assert_true(ftell(f) > 100);
    fclose(f);
    plan_free(&p);
}

/* On a fast network the link-aware greedy spreads heads; on a slow one it keeps them with the
 * projection, and auto picks layer-wise; with fast links and slow devices it picks slices. */
static void test_links_and_auto(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    const int n = 4;
    Cluster cl;
    PlanRequest req = {.partition = PARTITION_HEAD, .placement = PLACEMENT_GREEDY, .seed = 1,
                       .n_workers = n, .kv_positions = 64, .cluster = &cl, .ref_Bps = 4e9};
    char err[256];
    for (int pass = 0; pass < 2; pass++) {
        double one_way = pass == 0 ? 0.05 : 50.0;
        make_cluster(&cl, n, one_way, NULL, NULL);
        Plan p;
        assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
        int distinct = 0, seen[5] = {0};
        for (int k = 0; k < p.layers[3].n_parts; k++)
            distinct += !seen[p.layers[3].parts[k].rank]++;
        if (pass == 0) {
            assert_true(distinct >= 3);
        } else {
            /* Every part sits where the input already is or where the projection runs. */
            for (int k = 0; k < p.layers[3].n_parts; k++) {
                int r = p.layers[3].parts[k].rank;
                assert_true(r == p.layers[2].ffn_rank || r == p.layers[3].proj_rank);
            }
        }
        plan_free(&p);
        double preds[3], best;
        assert_int_equal(plan_build_auto(&p, &c, &req, NULL, 0, &best, preds, NULL, err, sizeof err), 0);
        for (int i = 0; i < 3; i++) /* the pick is the fastest, or within 1% of it */
            assert_true(best <= 1.01 * preds[i]);
        assert_int_equal(p.partition, pass == 0 ? PARTITION_SLICE : PARTITION_LAYER);
        plan_free(&p);
        cluster_free(&cl);
    }
}

/* spread: the FFN and projection together by the greedy's rule, the heads over the workers
 * even where the greedy keeps them with the projection (a 10 ms network). */
static void test_spread_placement(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    const int n = 4;
    Cluster cl;
    make_cluster(&cl, n, 5.0, NULL, NULL);
    PlanRequest req = {.partition = PARTITION_HEAD, .placement = PLACEMENT_GREEDY, .seed = 1,
                       .n_workers = n, .kv_positions = 64, .cluster = &cl, .ref_Bps = 4e9};
    Plan g, s;
    char err[256];
    PlacementKind k;
    assert_int_equal(plan_parse_placement("spread", &k), 0);
    assert_int_equal(k, PLACEMENT_SPREAD);
    assert_string_equal(plan_placement_name(k), "spread");
    assert_int_equal(plan_build(&g, &c, &req, err, sizeof err), 0);
    req.placement = PLACEMENT_SPREAD;
    assert_int_equal(plan_build(&s, &c, &req, err, sizeof err), 0);
    int sum_s = 0, sum_g = 0;
    for (int l = 0; l < c.n_layers; l++) {
        /* by the greedy's rule (the devices' loads differ, so not always the same device) */
        assert_int_equal(s.layers[l].proj_rank, s.layers[l].ffn_rank);
        int used[5] = {0}, ranks = 0, gused[5] = {0}, granks = 0;
        for (int p = 0; p < s.layers[l].n_parts; p++) {
            ranks += !used[s.layers[l].parts[p].rank]++;
            granks += !gused[g.layers[l].parts[p].rank]++;
        }
        assert_true(ranks >= n - 1); /* 4 KV groups off the projection rank first */
        sum_s += ranks;
        sum_g += granks;
    }
    /* the greedy keeps most of them with the projection */
    assert_true(sum_g <= c.n_layers * 2 && sum_s >= c.n_layers * (n - 1));
    plan_free(&g);
    plan_free(&s);
    cluster_free(&cl);
}

static void set_relay(Cluster *cl, int relay)
{
    for (int i = 0; i < cl->n * cl->n; i++)
        cl->link[i].relay_ap = relay;
}

/* The medium: on a shared channel a slice exchange's n(n-1) transmissions queue (11 more
 * airtimes than a switched network's each at most, for 4 members), through an access point each
 * takes the air twice, and --wire f16 halves the exchange's bytes. */
static void test_prediction_medium(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    const int n = 4, P = n + 1;
    Cluster cl;
    make_cluster(&cl, n, 5.0, NULL, NULL);
    for (int i = 0; i < P * P; i++)
        cl.link[i].bw_Bps = 25e6;
    PlanRequest req = {.partition = PARTITION_SLICE, .placement = PLACEMENT_GREEDY, .seed = 1,
                       .n_workers = n, .kv_positions = 64, .cluster = &cl, .ref_Bps = 4e9,
                       .head_on_controller = 1};
    Plan p;
    char err[256];
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    const double air = (32.0 + 4.0 * c.dim) / 25e6 * 1e3, ex = 2.0 * c.n_layers;
    const double sw = plan_predict_ms(&p, &c, &req);
    cluster_set_medium(&cl, MEDIUM_SHARED);
    const double sh = plan_predict_ms(&p, &c, &req);
    /* every exchange up to 11 airtimes later (its 12 transmissions queue; each member takes
     * the sum when its own 3 have arrived, so members leave an exchange up to 3 airtimes
     * apart and the next one's queue starts with the first: at least 7 more); layer 0's
     * input 3 more transmissions at most */
    assert_true(sh - sw >= ex * 7 * air - 1e-6);
    assert_true(sh - sw <= ex * 11 * air + 4 * air + 1e-6);
    set_relay(&cl, 1);
    const double ap = plan_predict_ms(&p, &c, &req);
    assert_true(ap - sw >= ex * 15 * air - 1e-6);
    assert_true(ap - sw <= ex * 23 * air + 8 * air + 1e-6);
    req.wire_bytes = 2;
    const double ap16 = plan_predict_ms(&p, &c, &req);
    /* --wire f16 halves every transmission (the exchanges' and the broadcasts': the engine
     * rounds both), and so the time the channel adds over a switched network */
    cluster_set_medium(&cl, MEDIUM_SWITCHED);
    set_relay(&cl, 0);
    const double sw16 = plan_predict_ms(&p, &c, &req);
    cluster_set_medium(&cl, MEDIUM_SHARED);
    set_relay(&cl, 1);
    assert_true(ap16 < ap && sw16 < sw);
    assert_true(fabs((ap16 - sw16) - (ap - sw) / 2) < 0.02 * (ap - sw) / 2);
    req.wire_bytes = 34.0 / 32; /* Q8_0 blocks: fewer bytes still */
    assert_true(plan_predict_ms(&p, &c, &req) < ap16);
    /* One message: latency plus its airtime, with the frame overhead, twice through an AP. */
    for (int i = 0; i < P * P; i++)
        cl.link[i].frame_s = 0.2e-3;
    NetLink net = plan_cost_net(&req);
    assert_true(fabs(plan_cost_hop_ms(&req, 1, 2, 25e3) - (5.0 + 2 * (1.0 + 0.2))) < 1e-9);
    assert_true(fabs(net_airtime_s(&net, 25e3) - 2 * (1e-3 + 0.2e-3)) < 1e-12);
    plan_free(&p);
    cluster_free(&cl);
}

/* The prediction's extra terms: fixed_ms is added once; the latency spread adds the expected
 * maximum over the other members to each of a slice layer's two exchanges. */
static void test_prediction_terms(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    const int n = 4;
    Cluster cl;
    make_cluster(&cl, n, 5.0, NULL, NULL);
    PlanRequest req = {.partition = PARTITION_SLICE, .placement = PLACEMENT_GREEDY, .seed = 1,
                       .n_workers = n, .kv_positions = 64, .cluster = &cl, .ref_Bps = 4e9,
                       .head_on_controller = 1};
    Plan p;
    char err[256];
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    assert_int_equal(p.head_split, 0);
    const double base = plan_predict_ms(&p, &c, &req);
    req.fixed_ms = 70;
    assert_true(fabs(plan_predict_ms(&p, &c, &req) - (base + 70)) < 1e-9);
    req.fixed_ms = 0;
    req.lat_sd_ms = 2;
    const double spread = 2 * c.n_layers * 2 * plan_expected_max_normal(n - 1);
    assert_true(fabs(plan_predict_ms(&p, &c, &req) - (base + spread)) < 1e-6);
    plan_free(&p);
    /* Split head: the controller's term is gone; each member streams a quarter of the LM head
     * (32000 / 4 rows) and the final norm's weights (one row, as sim_cost_head_rows counts)
     * and sends its logits one hop. */
    req.head_on_controller = 0;
    req.lat_sd_ms = 0;
    req.fixed_ms = 70;
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    assert_int_equal(p.head_split, 1);
    const double rows_ms = (8000.0 + 1.0) * c.dim * 4 / 4e9 * 1e3;
    assert_true(fabs(plan_predict_ms(&p, &c, &req) - (base - 5.0 + rows_ms + 5.0)) < 1e-6);
    plan_free(&p);
    cluster_free(&cl);
    /* The expected maximum of normals: 0 for one, the known order statistics, increasing. */
    assert_true(plan_expected_max_normal(1) == 0);
    assert_true(fabs(plan_expected_max_normal(2) - 1 / sqrt(M_PI)) < 1e-4);
    assert_true(fabs(plan_expected_max_normal(3) - 1.5 / sqrt(M_PI)) < 1e-4);
    for (int k = 2; k < 400; k++)
        assert_true(plan_expected_max_normal(k + 1) > plan_expected_max_normal(k));
}

/* The split LM head: the last layer's members hold its rows exactly once, in rank order, and
 * are charged for them; no other rank holds any, and no other partition splits it. */
static void test_head_rows(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    c.vocab_size = 32003; /* not a multiple of the member count */
    PlanRequest req = {.partition = PARTITION_SLICE, .placement = PLACEMENT_GREEDY, .seed = 1,
                       .n_workers = 3, .kv_positions = 8};
    Plan p;
    char err[256];
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    assert_int_equal(p.head_split, 1);
    int next = 0, v0, v1;
    assert_int_equal(plan_head_rows(&p, &c, 0, &v0, &v1), 0);
    for (int r = 1; r <= 3; r++) {
        assert_int_equal(plan_head_rows(&p, &c, r, &v0, &v1), 1);
        assert_int_equal(v0, next);
        assert_true(v1 > v0);
        next = v1;
    }
    assert_int_equal(next, c.vocab_size);
    size_t with = plan_rank_weight_bytes(&p, &c, 2);
    plan_head_rows(&p, &c, 2, &v0, &v1);
    p.head_split = 0;
    assert_int_equal(with - plan_rank_weight_bytes(&p, &c, 2),
                     ((size_t)(v1 - v0) + 1) * (size_t)c.dim * sizeof(float));
    plan_free(&p);
    req.partition = PARTITION_HEAD;
    assert_int_equal(plan_build(&p, &c, &req, err, sizeof err), 0);
    assert_int_equal(p.head_split, 0);
    plan_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_policies_valid),
        cmocka_unit_test(test_layerwise_contiguous),
        cmocka_unit_test(test_split_groups_when_more_workers),
        cmocka_unit_test(test_greedy_spreads_heads),
        cmocka_unit_test(test_random_is_seeded),
        cmocka_unit_test(test_budget_refused),
        cmocka_unit_test(test_waterfill),
        cmocka_unit_test(test_json_and_print),
        cmocka_unit_test(test_links_and_auto),
        cmocka_unit_test(test_prediction_terms),
        cmocka_unit_test(test_prediction_medium),
        cmocka_unit_test(test_spread_placement),
        cmocka_unit_test(test_head_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
