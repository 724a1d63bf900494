/* The schedule of a plan: holders, consumers, broadcast groups, the gather layout, SLICE
 * members, the split LM head, speculation eligibility, hops and bytes, on hand-built plans
 * (values worked out by hand) and on every plan_build policy (invariants). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan.h"
#include "schedule.h"
#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* dim 8, 4 query heads in 2 KV groups of head_dim 2, FFN 12, vocabulary 10. */
static ModelConfig small(void)
{
    ModelConfig c = {ARCH_LLAMA, 8, 2, 4, 2, 2, 12, 10, 16, 1e-5f, 10000.0f,
                     ROPE_INTERLEAVED, 1, 1, 2, {0}, "", 0, 0, 0, {0}, 0, 0, 0};
    return c;
}

static ModelConfig tinyllama(void)
{
    ModelConfig c = {ARCH_LLAMA, 2048, 22, 32, 4, 64, 5632, 32000, 2048, 1e-5f, 10000.0f,
                     ROPE_HALF, 0, 1, 2, {0}, "", 0, 0, 0, {0}, 0, 0, 0};
    return c;
}

enum { MSG = 32 + 8 * 4 }; /* WireHdr and dim floats */

static void assert_ints(const int *got, int n_got, const int *want, int n_want)
{
    assert_int_equal(n_got, n_want);
    for (int i = 0; i < n_want; i++)
        assert_int_equal(got[i], want[i]);
}

/* A PIPE layer with the given parts (rank, unit, q0, q1) and projection and FFN ranks. */
static void pipe_layer(LayerPlan *lp, const int (*parts)[4], int n, int proj, int ffn)
{
    memset(lp, 0, sizeof *lp);
    lp->mode = LAYER_PIPE;
    lp->n_parts = n;
    lp->parts = xcalloc((size_t)n, sizeof(AttnPart));
    for (int k = 0; k < n; k++)
        lp->parts[k] = (AttnPart){parts[k][0], parts[k][1], parts[k][2], parts[k][3]};
    lp->proj_rank = proj;
    lp->ffn_rank = ffn;
}

/* A SLICE layer over ranks[0..n): KV group k and FFN columns split evenly, in rank order. */
static void slice_layer(LayerPlan *lp, const int *ranks, int n, const ModelConfig *c)
{
    memset(lp, 0, sizeof *lp);
    lp->mode = LAYER_SLICE;
    lp->n_parts = c->n_kv_heads;
    lp->parts = xcalloc((size_t)lp->n_parts, sizeof(AttnPart));
    for (int k = 0; k < lp->n_parts; k++)
        lp->parts[k] = (AttnPart){ranks[k % n], k, 0, config_q_per_kv(c)};
    lp->n_slices = n;
    lp->slices = xcalloc((size_t)n, sizeof(FfnSlice));
    for (int i = 0; i < n; i++)
        lp->slices[i] = (FfnSlice){ranks[i], i * c->ffn_dim / n, (i + 1) * c->ffn_dim / n};
    lp->proj_rank = lp->ffn_rank = ranks[0];
}

static void plan_init(Plan *p, int n_layers, int n_workers)
{
    memset(p, 0, sizeof *p);
    p->n_layers = n_layers;
    p->n_workers = n_workers;
    p->layers = xcalloc((size_t)n_layers, sizeof(LayerPlan));
}

static void check_valid(const Plan *p, const ModelConfig *c)
{
    char err[256];
    if (plan_validate(p, c, err, sizeof err) != 0)
        fail_msg("hand-built plan invalid: %s", err);
}

/* Layer 0: heads split over ranks 1..3, projection on 1, FFN on 2; layer 1 wholly on 2. */
static void test_pipe_head_partition(void **state)
{
    (void)state;
    ModelConfig c = small();
    Plan p;
    plan_init(&p, 2, 3);
    pipe_layer(&p.layers[0], (const int[][4]){{1, 0, 0, 2}, {2, 1, 0, 1}, {3, 1, 1, 2}}, 3, 1,
               2);
    pipe_layer(&p.layers[1], (const int[][4]){{2, 0, 0, 2}, {2, 1, 0, 2}}, 2, 2, 2);
    check_valid(&p, &c);
    Schedule s;
    plan_schedule(&s, &p, &c);
    assert_int_equal(s.msg_bytes, MSG);
    const ScheduleLayer *a = &s.layers[0], *b = &s.layers[1], *out = &s.layers[2];
    assert_int_equal(a->producer, 0);
    assert_ints(a->holders, a->n_holders, (int[]){0}, 1);
    assert_ints(a->consumers, a->n_consumers, (int[]){1, 2, 3}, 3);
    assert_ints(a->bcast, a->n_bcast, (int[]){0, 1, 2, 3}, 4);
    assert_ints(a->gather, a->n_gather, (int[]){1, 2, 3}, 3);
    assert_ints(a->g_floats, 3, (int[]){4, 2, 2}, 3);
    assert_ints(a->g_counts, 3, (int[]){32 + 16, 32 + 8, 32 + 8}, 3);
    assert_ints(a->g_displs, 3, (int[]){0, 48, 88}, 3);
    /* Head floats: group 0 = [0, 4), group 1 head 0 = [4, 6), head 1 = [6, 8). */
    assert_ints(a->g_part_dst, a->n_gparts, (int[]){0, 4, 6}, 3);
    assert_ints(a->g_part_src, 3, (int[]){32, 48 + 32, 88 + 32}, 3);
    assert_ints(a->g_part_len, 3, (int[]){4, 2, 2}, 3);
    assert_int_equal(a->hops, 3); /* broadcast, gather, Z */
    assert_int_equal(a->bytes, 3 * MSG + 40 + 40 + MSG);
    assert_int_equal(a->spec_eligible, 0); /* projection and FFN apart */
    /* Layer 1: its only consumer holds the input already. */
    assert_int_equal(b->producer, 2);
    assert_ints(b->holders, b->n_holders, (int[]){2}, 1);
    assert_ints(b->consumers, b->n_consumers, (int[]){2}, 1);
    assert_int_equal(b->n_bcast, 0);
    assert_ints(b->gather, b->n_gather, (int[]){2}, 1);
    assert_ints(b->g_counts, 1, (int[]){32 + 32}, 1);
    assert_int_equal(b->hops, 0);
    assert_int_equal(b->bytes, 0);
    assert_int_equal(b->spec_eligible, 0); /* the last layer has no transition */
    /* The output goes from rank 2 to the controller. */
    assert_ints(out->consumers, out->n_consumers, (int[]){0}, 1);
    assert_ints(out->bcast, out->n_bcast, (int[]){2, 0}, 2);
    assert_int_equal(s.hops_per_token, 4);
    assert_int_equal(s.bytes_per_token, 3 * MSG + 80 + MSG + MSG);
    assert_int_equal(s.n_head, 0);
    schedule_free(&s);
    plan_free(&p);
}

/* Layer-wise: every layer on one rank; hops only where the rank changes. */
static void test_pipe_layerwise(void **state)
{
    (void)state;
    ModelConfig c = small();
    Plan p;
    plan_init(&p, 2, 2);
    for (int l = 0; l < 2; l++)
        pipe_layer(&p.layers[l], (const int[][4]){{l + 1, 0, 0, 2}, {l + 1, 1, 0, 2}}, 2, l + 1,
                   l + 1);
    check_valid(&p, &c);
    Schedule s;
    plan_schedule(&s, &p, &c);
    for (int l = 0; l < 2; l++) {
        assert_ints(s.layers[l].bcast, s.layers[l].n_bcast, (int[]){l, l + 1}, 2);
        assert_int_equal(s.layers[l].n_gather, 1);
        assert_int_equal(s.layers[l].hops, 1);
        assert_int_equal(s.layers[l].bytes, MSG);
    }
    /* 0 -> 1 may speculate: layer 1 (rank 2) gets its input by broadcast from rank 1. */
    assert_int_equal(s.layers[0].spec_eligible, 1);
    assert_int_equal(schedule_spec_eligible(&p, 0), 1);
    assert_int_equal(s.hops_per_token, 3);
    assert_int_equal(s.bytes_per_token, 3 * MSG);
    schedule_free(&s);
    plan_free(&p);
}

/* Eligibility: PIPE -> PIPE with projection and FFN together and a broadcast into l+1. */
static void test_spec_eligibility(void **state)
{
    (void)state;
    ModelConfig c = small();
    struct {
        int next_rank;   /* rank of layer 1's second KV group */
        int slice_next;  /* layer 1 SLICE over {1, 2} */
        int ffn0;        /* layer 0's FFN rank (projection on 1) */
        int want;
    } cases[] = {
        {2, 0, 1, 1}, /* heads of layer 1 elsewhere: Z is worth sending early */
        {1, 0, 1, 0}, /* layer 1 wholly on rank 1: no broadcast, nothing to hide */
        {2, 0, 2, 0}, /* projection and FFN of layer 0 apart */
        {2, 1, 1, 0}, /* layer 1 SLICE */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Plan p;
        plan_init(&p, 3, 2);
        pipe_layer(&p.layers[0], (const int[][4]){{1, 0, 0, 2}, {1, 1, 0, 2}}, 2, 1,
                   cases[i].ffn0);
        if (cases[i].slice_next)
            slice_layer(&p.layers[1], (const int[]){1, 2}, 2, &c);
        else
            pipe_layer(&p.layers[1], (const int[][4]){{1, 0, 0, 2}, {cases[i].next_rank, 1, 0, 2}},
                       2, 1, 1);
        pipe_layer(&p.layers[2], (const int[][4]){{1, 0, 0, 2}, {1, 1, 0, 2}}, 2, 1, 1);
        check_valid(&p, &c);
        Schedule s;
        plan_schedule(&s, &p, &c);
        assert_int_equal(s.layers[0].spec_eligible, cases[i].want);
        for (int l = 0; l < 3; l++)
            assert_int_equal(schedule_spec_eligible(&p, l), s.layers[l].spec_eligible);
        assert_int_equal(s.layers[2].spec_eligible, 0);
        schedule_free(&s);
        plan_free(&p);
    }
}

/* SLICE layers and the split LM head. */
static void test_slice_and_split_head(void **state)
{
    (void)state;
    ModelConfig c = small();
    Plan p;
    plan_init(&p, 2, 3);
    slice_layer(&p.layers[0], (const int[]){1, 2, 3}, 3, &c);
    slice_layer(&p.layers[1], (const int[]){2, 3}, 2, &c);
    p.head_split = 1;
    check_valid(&p, &c);
    Schedule s;
    plan_schedule(&s, &p, &c);
    const ScheduleLayer *a = &s.layers[0], *b = &s.layers[1], *out = &s.layers[2];
    assert_ints(a->members, a->n_members, (int[]){1, 2, 3}, 3);
    assert_ints(a->bcast, a->n_bcast, (int[]){0, 1, 2, 3}, 4);
    assert_int_equal(a->n_gather, 0);
    assert_int_equal(a->hops, 3);
    assert_int_equal(a->bytes, 3 * MSG + 2 * 3 * 2 * MSG);
    /* Layer 1's members both hold layer 0's output: no broadcast. */
    assert_ints(b->holders, b->n_holders, (int[]){1, 2, 3}, 3);
    assert_ints(b->members, b->n_members, (int[]){2, 3}, 2);
    assert_int_equal(b->n_bcast, 0);
    assert_int_equal(b->hops, 2);
    assert_int_equal(b->bytes, 2 * 2 * 1 * MSG);
    /* Output: from layer 1's projection member; the split head sends logits instead. */
    assert_ints(out->holders, out->n_holders, (int[]){2, 3}, 2);
    assert_ints(out->bcast, out->n_bcast, (int[]){2, 0}, 2);
    assert_ints(s.head_members, s.n_head, (int[]){0, 2, 3}, 3);
    assert_ints(s.head_v0, 3, (int[]){0, 0, 5}, 3);
    assert_ints(s.head_v1, 3, (int[]){0, 5, 10}, 3);
    assert_ints(s.h_counts, 3, (int[]){0, 32 + 20, 32 + 20}, 3);
    assert_ints(s.h_displs, 3, (int[]){0, 0, 52}, 3);
    assert_int_equal(s.hops_per_token, 3 + 2 + 1);
    assert_int_equal(s.bytes_per_token, a->bytes + b->bytes + 2 * 52);
    for (int l = 0; l < 2; l++)
        assert_int_equal(s.layers[l].spec_eligible, 0);
    schedule_free(&s);
    plan_free(&p);
}

/* Invariants on plan_build's plans, and the counts a layer-wise plan must have. */
static void test_built_plans(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    for (int part = 0; part < 3; part++)
        for (int k = 0; k < 4; k++)
            for (int n = 1; n <= 6; n++) {
                PlanRequest req = {.partition = (Partition)part, .placement = (PlacementKind)k,
                                   .seed = 3, .n_workers = n, .kv_positions = 64};
                Plan p;
                char err[256];
                if (plan_build(&p, &c, &req, err, sizeof err) != 0)
                    fail_msg("plan_build: %s", err);
                Schedule s;
                plan_schedule(&s, &p, &c);
                int hops = 0, blocks = 0;
                for (int l = 0; l <= p.n_layers; l++) {
                    const ScheduleLayer *sl = &s.layers[l];
                    int all = 1;
                    for (int i = 0; i < sl->n_consumers; i++)
                        all &= schedule_has(sl->holders, sl->n_holders, sl->consumers[i]);
                    assert_int_equal(sl->n_bcast == 0, all);
                    if (sl->n_bcast)
                        assert_int_equal(sl->bcast[0], sl->producer);
                    assert_true(schedule_has(sl->holders, sl->n_holders, sl->producer));
                    hops += sl->hops;
                    if (l == p.n_layers)
                        break;
                    const LayerPlan *lp = &p.layers[l];
                    for (int i = 0; i < sl->n_consumers; i++)
                        assert_true(plan_rank_in_layer(&p, l, sl->consumers[i]));
                    assert_int_equal(schedule_spec_eligible(&p, l), sl->spec_eligible);
                    if (lp->mode == LAYER_SLICE) {
                        assert_int_equal(sl->n_members, lp->n_slices);
                        continue;
                    }
                    /* The gather covers every head float exactly once. */
                    assert_int_equal(sl->gather[0], lp->proj_rank);
                    int total = 0, *seen = xcalloc((size_t)c.n_heads * c.head_dim, sizeof(int));
                    for (int m = 0; m < sl->n_gather; m++) {
                        total += sl->g_floats[m];
                        assert_int_equal(sl->g_counts[m],
                                         (int)sizeof(WireHdr) + 4 * sl->g_floats[m]);
                    }
                    for (int q = 0; q < sl->n_gparts; q++)
                        for (int f = 0; f < sl->g_part_len[q]; f++)
                            seen[sl->g_part_dst[q] + f]++;
                    assert_int_equal(total, c.n_heads * c.head_dim);
                    for (int f = 0; f < c.n_heads * c.head_dim; f++)
                        assert_int_equal(seen[f], 1);
                    free(seen);
                    blocks += l == 0 || lp->ffn_rank != p.layers[l - 1].ffn_rank;
                }
                assert_int_equal(s.hops_per_token, hops);
                if (p.partition == PARTITION_LAYER) /* into every block, and out of the last */
                    assert_int_equal(s.hops_per_token, blocks + 1);
                schedule_free(&s);
                plan_free(&p);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipe_head_partition),
        cmocka_unit_test(test_pipe_layerwise),
        cmocka_unit_test(test_spec_eligibility),
        cmocka_unit_test(test_slice_and_split_head),
        cmocka_unit_test(test_built_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
