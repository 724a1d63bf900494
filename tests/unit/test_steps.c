/* The step program (steps.h): one payload size per wire form (Q8_0 blocks as the kernels
 * store them); the steps of a layer-wise token in order with their dependencies; speculation
 * as accept/reject branches (the rejected token sends a second gather, the kept one does
 * not); the SLICE patterns' message counts; and the pricing the cost models read from the
 * steps: matrices by their stored types (a Q4_K LM head at its own bytes, not 4 per weight;
 * SLICE wo columns; the exact exchange's gate/up and w_down rows from the real matrices),
 * KV reads per position. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan.h"
#include "quant.h"
#include "schedule.h"
#include "steps.h"
#include "util.h"
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ModelConfig tinyllama(void)
{
    ModelConfig c = {ARCH_LLAMA, 2048, 4, 32, 4, 64, 5632, 32000, 2048, 1e-5f, 10000.0f,
                     ROPE_HALF, 0, 1, 2, {0}, "", 0, 0, 0, {0}, 0, 0, 0};
    return c;
}

/* Q4_K_M's usual types at TinyLlama's shapes. */
static ModelConfig tinyllama_q4km(void)
{
    ModelConfig c = tinyllama();
    for (int k = 0; k < WKIND_COUNT; k++)
        c.wtype[k] = QTYPE_Q4_K;
    c.wtype[WKIND_WV] = c.wtype[WKIND_W_DOWN] = c.wtype[WKIND_LM_HEAD] = QTYPE_Q6_K;
    return c;
}

static void build(Plan *p, const ModelConfig *c, Partition part, PlacementKind k,
                  SliceExchange x, int n_workers)
{
    PlanRequest req = {.partition = part, .placement = k, .seed = 1, .n_workers = n_workers,
                       .kv_positions = 16, .exchange = x, .head_on_controller = 1};
    char err[256];
    if (plan_build(p, c, &req, err, sizeof err) != 0)
        fail_msg("plan_build: %s", err);
}

static void program(StepProgram *prog, const Plan *p, const ModelConfig *c, WireForm w,
                    const unsigned char *spec)
{
    Schedule s;
    plan_schedule(&s, p, c);
    const StepOptions o = {w, spec};
    steps_build(prog, p, &s, c, &o);
    schedule_free(&s);
}

/* The first step of kind (op, what) at or after index from, or -1. */
static int find(const StepProgram *p, int from, StepOp op, StepWhat what)
{
    for (int k = from; k < p->n_steps; k++)
        if (p->steps[k].op == op && p->steps[k].what == what)
            return k;
    return -1;
}

static void test_wire_form_bytes(void **state)
{
    (void)state;
    for (int64_t n = 32; n <= 4096; n *= 2) {
        assert_int_equal(wire_form_bytes(WIRE_FORM_F32, n), 4 * n);
        assert_int_equal(wire_form_bytes(WIRE_FORM_F16, n), 2 * n);
        assert_int_equal(wire_form_bytes(WIRE_FORM_Q8, n), quant_row_bytes(QTYPE_Q8_0, n));
    }
    assert_int_equal(wire_form_bytes(WIRE_FORM_Q8, 0), 0);
    assert_int_equal(wire_form_block(WIRE_FORM_Q8), 32);
    assert_int_equal(steps_wire_of_bytes(4), WIRE_FORM_F32);
    assert_int_equal(steps_wire_of_bytes(0), WIRE_FORM_F32);
    assert_int_equal(steps_wire_of_bytes(2), WIRE_FORM_F16);
    assert_int_equal(steps_wire_of_bytes(34.0 / 32), WIRE_FORM_Q8);
}

/* Layer-wise over 2 workers (2 layers each): embed, X to rank 1, its layers, X to rank 2,
 * its layers, X back, the LM head; every step after the one before it. */
static void test_layerwise_order(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    Plan p;
    build(&p, &c, PARTITION_LAYER, PLACEMENT_LAYER, EXCHANGE_AUTO, 2);
    StepProgram prog;
    program(&prog, &p, &c, WIRE_FORM_F16, NULL);
    const Step *st = prog.steps;
    assert_int_equal(st[0].what, STEP_WORK_EMBED);
    assert_int_equal(st[1].op, STEP_BCAST);
    assert_int_equal(st[1].wire, WIRE_FORM_F16); /* the engine rounds broadcasts too */
    assert_int_equal(steps_members(&prog, &st[1])[0], 0);
    assert_int_equal(steps_members(&prog, &st[1])[1], 1);
    int msgs = 0;
    for (int k = 1; k < prog.n_steps; k++) {
        assert_true(prog.steps[k].n_deps >= 1);
        for (int i = 0; i < prog.steps[k].n_deps; i++)
            assert_true(steps_deps(&prog, &prog.steps[k])[i] < k);
        msgs += prog.steps[k].op != STEP_COMPUTE;
    }
    assert_int_equal(msgs, 3); /* 0 -> 1, 1 -> 2, 2 -> 0 */
    assert_int_equal(prog.steps[prog.last].what, STEP_WORK_HEAD);
    assert_int_equal(prog.steps[prog.last].rank, 0);
    const double msg = 32 + 2.0 * c.dim;
    assert_true(steps_bytes(&prog, NULL) == 3 * msg);
    assert_int_equal(steps_hops(&prog), 3);
    steps_free(&prog);
    /* speculation into layer 2 (rank 1's FFN -> rank 2): Z goes out before the FFN; a
     * rejection runs the attention again; nothing else changes */
    unsigned char spec[4] = {0, 0, 1, 0}, kept[4] = {1, 1, 1, 1}, rej[4] = {1, 1, 0, 1};
    assert_true(schedule_spec_eligible(&p, 1));
    program(&prog, &p, &c, WIRE_FORM_F32, spec);
    int z = find(&prog, 0, STEP_BCAST, STEP_MSG_SPEC_Z);
    assert_true(z > 0);
    assert_int_equal(prog.steps[z + 1].what, STEP_WORK_FFN); /* before layer 1's FFN */
    int sa = find(&prog, z, STEP_COMPUTE, STEP_WORK_SPEC_ATTN);
    int re = find(&prog, z, STEP_COMPUTE, STEP_WORK_REEXEC);
    assert_true(sa > z && re > sa);
    assert_int_equal(prog.steps[re].branch, STEP_REJECT);
    assert_true(steps_bytes(&prog, kept) == 4 * (32 + 4.0 * c.dim));
    assert_true(steps_bytes(&prog, rej) == steps_bytes(&prog, kept));
    assert_int_equal(steps_messages(&prog, rej), 4);
    steps_free(&prog);
    plan_free(&p);
}

/* SLICE over 4 members: messages of one exchange per pattern (all-to-all n(n-1), reduce
 * 2(n-1), rsag 2n(n-1)); exact: four all-gathers of the members' rows. */
static void test_slice_patterns(void **state)
{
    (void)state;
    ModelConfig c = tinyllama();
    const SliceExchange xs[4] = {EXCHANGE_ALL, EXCHANGE_REDUCE, EXCHANGE_RSAG, EXCHANGE_EXACT};
    const uint64_t per_layer[4] = {2 * 12, 2 * 6, 2 * 24, 4 * 12};
    for (int i = 0; i < 4; i++) {
        Plan p;
        build(&p, &c, PARTITION_SLICE, PLACEMENT_GREEDY, xs[i], 4);
        StepProgram prog;
        program(&prog, &p, &c, WIRE_FORM_Q8, NULL);
        /* layer 0's input (4 messages), the exchanges, the output (1) */
        assert_int_equal(steps_messages(&prog, NULL), 4 + c.n_layers * per_layer[i] + 1);
        int x = find(&prog, 0, i == 3 ? STEP_ALLGATHER : i == 1 ? STEP_REDUCE
                                                       : i == 2 ? STEP_SCATTER
                                                                : STEP_ALLGATHER,
                     i == 3 ? STEP_MSG_HEADS : STEP_MSG_PARTIAL);
        assert_true(x > 0);
        /* partial sums in the wire form; exact's whole values as floats */
        assert_int_equal(prog.steps[x].wire, i == 3 ? WIRE_FORM_F32 : WIRE_FORM_Q8);
        steps_free(&prog);
        plan_free(&p);
    }
}

/* Pricing by stored type: the controller's LM head at Q6_K's bytes (4.9x below 4 bytes
 * a weight), SLICE wo columns at Q4_K's, the exact exchange's matrices from the real ones,
 * KV reads growing with the position. */
static void test_pricing(void **state)
{
    (void)state;
    ModelConfig c = tinyllama_q4km();
    Plan p;
    build(&p, &c, PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_ALL, 4);
    StepProgram prog;
    program(&prog, &p, &c, WIRE_FORM_F32, NULL);
    const Step *head = &prog.steps[prog.last];
    assert_int_equal(head->what, STEP_WORK_HEAD);
    const double f32_head = (double)c.vocab_size * c.dim * 4;
    assert_true(head->weight_bytes ==
                (double)quant_row_bytes(QTYPE_Q6_K, c.dim) * c.vocab_size + c.dim * 4.0);
    assert_true(head->weight_bytes < f32_head / 4.8);
    /* a member's attention with its wo columns: 8 heads of 64 columns, Q4_K rows */
    int a = find(&prog, 0, STEP_COMPUTE, STEP_WORK_ATTN);
    const double attn = (double)config_attn_unit_bytes(&c, 8);
    assert_true(prog.steps[a].weight_bytes ==
                attn + (double)c.dim * (double)quant_row_bytes(QTYPE_Q4_K, 512));
    assert_true(steps_work_bytes(&prog.steps[a], &c, 9) ==
                prog.steps[a].weight_bytes + (double)config_kv_bytes(&c, 10));
    steps_free(&prog);
    plan_free(&p);
    /* exact: wo rows, gate and up rows, w_down rows add up to the layer's matrices */
    build(&p, &c, PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_EXACT, 4);
    program(&prog, &p, &c, WIRE_FORM_F32, NULL);
    double proj = 0, ffn = 0;
    for (int k = 0; k < prog.n_steps; k++) {
        const Step *st = &prog.steps[k];
        if (st->layer != 1 || st->op != STEP_COMPUTE)
            continue;
        proj += st->what == STEP_WORK_PROJ ? st->weight_bytes : 0;
        ffn += st->what == STEP_WORK_FFN || st->what == STEP_WORK_FFN_DOWN ? st->weight_bytes
                                                                           : 0;
    }
    assert_true(fabs(proj - (double)config_proj_bytes(&c)) < 1);
    /* config_ffn_bytes adds the FFN norm's weights (float32), the row slices do not */
    assert_true(fabs(ffn - ((double)config_ffn_bytes(&c, c.ffn_dim) - c.dim * 4.0)) < 1);
    steps_free(&prog);
    plan_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_form_bytes),
        cmocka_unit_test(test_layerwise_order),
        cmocka_unit_test(test_slice_patterns),
        cmocka_unit_test(test_pricing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
