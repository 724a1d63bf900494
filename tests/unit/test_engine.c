/* The distributed engine over the in-process transport: a controller and two workers as three
 * threads run a synthetic 2-layer model (LLaMA, and GPT-2) under PIPE (layer-wise, with
 * speculation that is always re-executed, and head-level) and SLICE plans; their outputs are compared with the
 * single-process backend (src/model/local.c): PIPE bit for bit, SLICE within 1e-5, SLICE with
 * --exchange exact bit for bit (f32, GPT-2's biases, and Q8_0 / Q4_0 weights); and again
 * with passes of several positions (forward_n), split and padded as the broadcast size
 * agreed between passes requires.  For a matrix of plans (layer-wise with speculation
 * rejected and kept, head-level, SLICE with each exchange and --wire f32|f16|q8), the bytes
 * and messages per token the engine counts, the simulator's and the analytic cost model's
 * are equal: they come from one step program (steps.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config_io.h"
#include "cost.h"
#include "convert.h"
#include "dist.h"
#include "generate.h"
#include "h5io.h"
#include "model.h"
#include "plan.h"
#include "schedule.h"
#include "sim.h"
#include "steps.h"
#include "test_helpers.h"
#include "transport.h"
#include "util.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { RANKS = 3, STEPS = 6, KV_CAP = 16 };
static const int tokens[STEPS] = {1, 17, 300, 42, 511, 7};

static char model_path[64];
static int g_positions = STEPS; /* positions the controller drives (tests of counts) */
static char g_quant[16]; /* the next synthetic model's --quantize ("": float32) */
static ModelConfig cfg;

/* The last layer's output and the logits of every position. */
typedef struct {
    float x[STEPS][64];
    float *logits; /* [STEPS][vocab] */
} Outputs;

/* One run: its plan, speculation mask, and each rank's transport; rank 0 fills out. */
typedef struct {
    const Plan *plan;
    const unsigned char *spec; /* [n_layers] or NULL */
    InprocWorld *world;
    Outputs *out;
    DistMetrics metrics; /* gathered after the last token (rank 0's copy) */
    const int *chunks;   /* passes of several positions (summing to STEPS), 0-terminated;
                          * NULL: one position per pass */
    const int *hints;    /* next_n hint of each pass */
    int max_batch;
    int service_rank;    /* 0: none; else the controller calls it before every pass */
    int wire;            /* dist_set_wire's mode (0: f32) */
    float tolerance;     /* speculation's (0: always re-executed) */
    int service_calls;   /* calls answered correctly (rank 0) */
} Run;

typedef struct {
    Run *run;
    int rank;
} RankArg;

/* Writes the synthetic model of spec (dim 64, 2 layers) and reads its config. */
static int setup_model(const char *spec)
{
    h5io_quiet();
    snprintf(model_path, sizeof model_path, "/tmp/hs_test_engine_%ld.h5", (long)getpid());
    char err[512];
    if (convert_make_synthetic(spec, 11, 0, NULL, model_path, g_quant[0] ? g_quant : NULL, NULL,
                               err, sizeof err) != 0 ||
        convert_synthetic_config(spec, 0, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "synthetic model: %s\n", err);
        return -1;
    }
    hid_t f = h5io_open_read(model_path, err, sizeof err); /* the stored types (budgets) */
    int rc = f >= 0 ? config_read_wtypes(&cfg, f, model_path, err, sizeof err) : -1;
    if (f >= 0)
        H5Fclose(f);
    if (rc < 0) {
        fprintf(stderr, "synthetic model: %s\n", err);
        return -1;
    }
    return cfg.dim == 64 ? 0 : -1; /* Outputs.x holds 64 floats a position */
}

/* LLaMA with grouped-query attention (2 query heads per KV group). */
static int setup_llama(void **state)
{
    (void)state;
    return setup_model("llama:dim=64,layers=2,heads=8,kv_heads=4,ffn=172,vocab=512,ctx=64");
}

/* GPT-2: biases (the SLICE projection bias added once, by the first member), LayerNorm. */
static int setup_gpt2(void **state)
{
    (void)state;
    return setup_model("gpt2:dim=64,layers=2,heads=4,vocab=512,ctx=64");
}

/* Quantized weights (every matvec input quantized: partial sums drift, exact must not). */
static int setup_quant(const char *q)
{
    snprintf(g_quant, sizeof g_quant, "%s", q);
    int rc = setup_model("llama:dim=64,layers=2,heads=8,kv_heads=4,ffn=192,vocab=512,ctx=64");
    g_quant[0] = 0;
    return rc;
}
static int setup_q8(void **state)
{
    (void)state;
    return setup_quant("q8_0");
}
static int setup_q4(void **state)
{
    (void)state;
    return setup_quant("q4_0");
}
/* llama.cpp's Q4_K_M mix at this width (rows of 64: Q5_0, Q8_0 and f16 stand in for the
 * K-quants), matrices of several stored types. */
static int setup_q4_k_m(void **state)
{
    (void)state;
    return setup_quant("q4_k_m");
}

static int teardown_model(void **state)
{
    (void)state;
    return remove(model_path);
}

/* Embeds each token, runs the layers through backend b and takes the logits (the backend's,
 * or the controller's head on x). */
static void drive(LayerBackend *b, const HeadW *head, Outputs *out)
{
    Scratch s;
    model_scratch_init(&s, &cfg, KV_CAP);
    for (int pos = 0; pos < g_positions; pos++) {
        float *x = out->x[pos], *logits = out->logits + (size_t)pos * (size_t)cfg.vocab_size;
        model_embed(&cfg, head, tokens[pos], pos, x);
        b->forward(b->ctx, x, pos, tokens[pos]);
        if (!b->logits || !b->logits(b->ctx, logits))
            model_logits(&cfg, head, &s, x, logits);
    }
    model_scratch_free(&s);
}

/* The test's service: the request's bytes in reverse order, then the answering rank. */
static long echo_service(void *ctx, const void *req, size_t n, void *resp, size_t cap,
                         char *err, size_t errlen)
{
    const unsigned char *in = req;
    unsigned char *out = resp;
    if (n + 1 > cap)
        return util_err(err, errlen, "request too long"), -1;
    for (size_t i = 0; i < n; i++)
        out[i] = in[n - 1 - i];
    out[n] = (unsigned char)*(const int *)ctx;
    return (long)n + 1;
}

/* Rank 0: one service call, checked; counts the good ones. */
static void call_service(DistEngine *e, Run *run, int pos)
{
    unsigned char req[5] = {1, 2, 3, 4, (unsigned char)pos}, resp[16];
    size_t n = dist_service_call(e, req, sizeof req, resp, sizeof resp);
    if (n == 6 && resp[0] == pos && resp[4] == 1 && resp[5] == run->service_rank)
        run->service_calls++;
}

/* The same through forward_n: passes of chunks[i] positions with next_n hints[i]. */
static void drive_chunks(LayerBackend *b, const HeadW *head, Outputs *out, const int *chunks,
                         const int *hints)
{
    Scratch s;
    model_scratch_init(&s, &cfg, KV_CAP);
    assert_non_null(b->forward_n);
    const size_t V = (size_t)cfg.vocab_size;
    for (int i = 0, pos = 0; chunks[i]; pos += chunks[i], i++) {
        const int n = chunks[i];
        assert_true(n <= b->max_batch);
        float *x = out->x[pos], *logits = out->logits + (size_t)pos * V;
        for (int k = 0; k < n; k++)
            model_embed(&cfg, head, tokens[pos + k], pos + k, out->x[pos + k]);
        b->forward_n(b->ctx, x, pos, n, tokens + pos, hints[i]);
        if (!b->logits_n || !b->logits_n(b->ctx, logits, n))
            for (int k = 0; k < n; k++)
                model_logits(&cfg, head, &s, out->x[pos + k], logits + (size_t)k * V);
    }
    model_scratch_free(&s);
}

static void outputs_init(Outputs *o)
{
    memset(o, 0, sizeof *o);
    o->logits = xcalloc((size_t)STEPS * (size_t)cfg.vocab_size, sizeof(float));
}

static void reference(Outputs *out)
{
    char err[512];
    hid_t f = h5io_open_read(model_path, err, sizeof err);
    assert_true(f >= 0);
    LocalModel *m;
    HeadW head;
    assert_int_equal(local_model_load(&m, &cfg, f, model_path, KV_CAP, err, sizeof err), 0);
    assert_int_equal(model_load_head(&head, &cfg, f, model_path, err, sizeof err), 0);
    LayerBackend b = local_model_backend(m);
    outputs_init(out);
    drive(&b, &head, out);
    model_free_head(&head);
    local_model_free(m);
    H5Fclose(f);
}

static void *rank_main(void *p)
{
    RankArg *a = p;
    Run *run = a->run;
    Transport t;
    transport_inproc_init(&t, run->world, a->rank);
    char err[512];
    hid_t f = -1;
    transport_exclusive(&t, 1);
    f = h5io_open_read(model_path, err, sizeof err);
    transport_exclusive(&t, 0);
    CHECK(f >= 0, "%s", err);
    DistEngine *e;
    CHECK(dist_setup(&e, &t, &cfg, run->plan, f, model_path, KV_CAP) == 0, "dist_setup failed");
    if (run->spec)
        dist_set_speculation(e, run->spec, run->tolerance, 0.5f, 0);
    if (run->wire)
        dist_set_wire(e, run->wire);
    if (run->max_batch > 1)
        dist_set_max_batch(e, run->max_batch);
    int me = a->rank;
    if (run->service_rank)
        dist_set_service(e, run->service_rank, echo_service, &me, 64, 64);
    if (a->rank == 0) {
        HeadW head;
        transport_exclusive(&t, 1);
        CHECK(model_load_head(&head, &cfg, f, model_path, err, sizeof err) == 0, "%s", err);
        transport_exclusive(&t, 0);
        LayerBackend b = dist_backend(e);
        if (run->service_rank) /* calls before, between and after passes */
            for (int pos = 0; pos < STEPS; pos++) {
                call_service(e, run, pos);
                if (pos % 2)
                    call_service(e, run, pos);
                float x[64];
                model_embed(&cfg, &head, tokens[pos], pos, x);
                b.forward(b.ctx, x, pos, tokens[pos]);
                memcpy(run->out->x[pos], x, sizeof x);
            }
        else if (run->chunks)
            drive_chunks(&b, &head, run->out, run->chunks, run->hints);
        else
            drive(&b, &head, run->out);
        dist_controller_stop(e);
        model_free_head(&head);
    } else {
        dist_worker_loop(e);
    }
    DistMetrics m;
    dist_metrics_gather(e, &m);
    if (a->rank == 0)
        run->metrics = m;
    else
        dist_metrics_free(&m);
    dist_free(e);
    transport_exclusive(&t, 1);
    H5Fclose(f);
    transport_exclusive(&t, 0);
    transport_finalize(&t);
    return NULL;
}

/* Several positions per pass: with exact hints (1, 3, 2), and without hints (2 positions in
 * the first pass, sized for all 4: padded; then 4 while the broadcasts are sized for the 2
 * before: split into 2 and 2). */
static const int chunks_hinted[] = {1, 3, 2, 0}, hints_exact[] = {3, 2, 0};
static const int chunks_unhinted[] = {2, 4, 0}, hints_none[] = {0, 0};
static const int *g_chunks, *g_hints; /* the next run_plan's */
static int g_service;
static int g_wire;        /* the next run_plan's dist_set_wire mode */
static float g_tolerance; /* the next run_plan's speculation tolerance */

static void run_plan(const Plan *plan, const unsigned char *spec, Outputs *out, Run *run)
{
    memset(run, 0, sizeof *run);
    run->chunks = g_chunks;
    run->hints = g_hints;
    run->max_batch = g_chunks ? 4 : 1;
    run->service_rank = g_service;
    run->wire = g_wire;
    run->tolerance = g_tolerance;
    run->plan = plan;
    run->spec = spec;
    run->world = transport_inproc_world(RANKS);
    outputs_init(out);
    run->out = out;
    RankArg args[RANKS];
    for (int r = 0; r < RANKS; r++)
        args[r] = (RankArg){run, r};
    test_run_ranks(RANKS, rank_main, args, sizeof args[0]);
    transport_inproc_world_free(run->world);
}

static SliceExchange g_exchange; /* the next build's --exchange (AUTO: the default) */
static void build(Plan *p, Partition part, PlacementKind k, int head_on_controller)
{
    PlanRequest req = {.partition = part, .placement = k, .seed = 5, .n_workers = RANKS - 1,
                       .kv_positions = KV_CAP, .head_on_controller = head_on_controller,
                       .exchange = g_exchange};
    char err[256];
    if (plan_build(p, &cfg, &req, err, sizeof err) != 0)
        fail_msg("plan_build: %s", err);
}

/* Ranks that hold attention parts of layer l. */
static int head_ranks(const Plan *p, int l)
{
    int seen[RANKS] = {0}, n = 0;
    for (int k = 0; k < p->layers[l].n_parts; k++)
        if (!seen[p->layers[l].parts[k].rank]++)
            n++;
    return n;
}

static void expect_identical(const Plan *p, const unsigned char *spec)
{
    Outputs ref, got;
    Run run;
    reference(&ref);
    run_plan(p, spec, &got, &run);
    if (!p->head_split) /* a split head's members send the controller logits, not X' */
        assert_memory_equal(got.x, ref.x, sizeof ref.x);
    assert_memory_equal(got.logits, ref.logits,
                        (size_t)STEPS * (size_t)cfg.vocab_size * sizeof(float));
    /* The metrics: the schedule's hops; the bytes of every token counted (and the stop). */
    Schedule s;
    plan_schedule(&s, p, &cfg);
    assert_int_equal(run.metrics.size, RANKS);
    assert_int_equal(run.metrics.hops_per_token, s.hops_per_token);
    double total = 0;
    for (int r = 0; r < RANKS; r++)
        total += run.metrics.rank[r].bytes_sent;
    if (!spec && !g_chunks)
        assert_true(total >= (double)STEPS * (double)s.bytes_per_token &&
                    total <= (double)(STEPS + 1) * (double)s.bytes_per_token);
    json_t *j = dist_metrics_json(&run.metrics, STEPS);
    assert_int_equal(json_integer_value(json_object_get(j, "hops_per_token")), s.hops_per_token);
    json_decref(j);
    dist_metrics_free(&run.metrics);
    schedule_free(&s);
    free(ref.logits);
    free(got.logits);
}

static void test_pipe_layerwise(void **state)
{
    (void)state;
    Plan p;
    build(&p, PARTITION_LAYER, PLACEMENT_LAYER, 0);
    assert_int_equal(p.layers[0].ffn_rank, 1);
    assert_int_equal(p.layers[1].ffn_rank, 2);
    expect_identical(&p, NULL);
    plan_free(&p);
}

/* Speculation 0 -> 1 with tolerance 0: never kept, always re-executed: exact results. */
static void test_pipe_speculation_rejected(void **state)
{
    (void)state;
    Plan p;
    build(&p, PARTITION_LAYER, PLACEMENT_LAYER, 0);
    assert_true(schedule_spec_eligible(&p, 0));
    const unsigned char spec[2] = {1, 0};
    expect_identical(&p, spec);
    plan_free(&p);
}

static void test_pipe_heads(void **state)
{
    (void)state;
    Plan p;
    build(&p, PARTITION_HEAD, PLACEMENT_ROUNDROBIN, 0);
    assert_int_equal(head_ranks(&p, 0), 2); /* a real gather across ranks */
    expect_identical(&p, NULL);
    plan_free(&p);
}

static void expect_close(const Plan *p)
{
    Outputs ref, got;
    Run run;
    reference(&ref);
    run_plan(p, NULL, &got, &run);
    const size_t n = (size_t)STEPS * (size_t)cfg.vocab_size;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got.logits[i] - (double)ref.logits[i]) /
                   fmax(1.0, fabs((double)ref.logits[i]));
        worst = d > worst ? d : worst;
    }
    if (!(worst <= 1e-5))
        fail_msg("SLICE logits differ from the single process by %g", worst);
    dist_metrics_free(&run.metrics);
    free(ref.logits);
    free(got.logits);
}

static void test_slice_split_head(void **state)
{
    (void)state;
    Plan p;
    build(&p, PARTITION_SLICE, PLACEMENT_GREEDY, 0);
    assert_int_equal(p.layers[0].mode, LAYER_SLICE);
    assert_int_equal(p.layers[0].n_slices, 2);
    assert_true(p.head_split);
    expect_close(&p);
    plan_free(&p);
}

static void test_slice_head_on_controller(void **state)
{
    (void)state;
    Plan p;
    build(&p, PARTITION_SLICE, PLACEMENT_GREEDY, 1);
    assert_false(p.head_split);
    expect_close(&p);
    plan_free(&p);
}

/* --exchange exact: no partial sums, so SLICE gives the single process's bits, with the LM
 * head split over the members and on the controller; the schedule's hops and bytes are what
 * the engine sends (expect_identical). */
static void test_slice_exact(void **state)
{
    (void)state;
    g_exchange = EXCHANGE_EXACT;
    for (int hoc = 0; hoc <= 1; hoc++) {
        Plan p;
        build(&p, PARTITION_SLICE, PLACEMENT_GREEDY, hoc);
        assert_int_equal(p.exchange, EXCHANGE_EXACT);
        assert_int_equal(p.layers[0].mode, LAYER_SLICE);
        assert_int_equal(p.layers[0].n_slices, 2);
        assert_int_equal(p.head_split, !hoc);
        /* the members' rows tile the width; each holds whole rows of wo and w_down */
        int d0, d1, d = 0;
        for (int r = 1; r < RANKS; r++) {
            assert_true(plan_exact_rows(&p, &cfg, 0, r, &d0, &d1));
            assert_int_equal(d0, d);
            d = d1;
        }
        assert_int_equal(d, cfg.dim);
        assert_false(plan_exact_rows(&p, &cfg, 0, 0, &d0, &d1));
        expect_identical(&p, NULL);
        /* the plan's accounting is what the members loaded: rows of wo and w_down */
        Outputs got;
        Run run;
        run_plan(&p, NULL, &got, &run);
        for (int r = 1; r < RANKS; r++)
            if ((size_t)run.metrics.rank[r].weight_bytes != plan_rank_weight_bytes(&p, &cfg, r))
                fail_msg("rank %d loaded %.0f bytes, the plan accounts %zu", r,
                         run.metrics.rank[r].weight_bytes, plan_rank_weight_bytes(&p, &cfg, r));
        dist_metrics_free(&run.metrics);
        free(got.logits);
        plan_free(&p);
    }
    g_exchange = EXCHANGE_AUTO;
}

/* Unequal members: a third and two thirds of the FFN (and so of the rows), cut anywhere. */
static void test_slice_exact_uneven(void **state)
{
    (void)state;
    g_exchange = EXCHANGE_EXACT;
    Plan p;
    build(&p, PARTITION_SLICE, PLACEMENT_GREEDY, 0);
    g_exchange = EXCHANGE_AUTO;
    LayerPlan *lp = &p.layers[1];
    lp->slices[0].f1 = lp->slices[1].f0 = cfg.ffn_dim / 3 + 1;
    char err[256];
    assert_int_equal(plan_validate(&p, &cfg, err, sizeof err), 0);
    expect_identical(&p, NULL);
    plan_free(&p);
}

/* A service on worker 2 called between passes: every reply right, outputs unchanged. */
static void test_service(void **state)
{
    (void)state;
    Plan p;
    build(&p, PARTITION_LAYER, PLACEMENT_LAYER, 0);
    for (int svc = 1; svc <= 2; svc++) {
        Outputs ref, got;
        Run run;
        reference(&ref);
        memset(&run, 0, sizeof run);
        g_service = svc;
        run_plan(&p, NULL, &got, &run);
        g_service = 0;
        assert_int_equal(run.service_calls, STEPS + STEPS / 2);
        assert_memory_equal(got.x, ref.x, sizeof ref.x);
        dist_metrics_free(&run.metrics);
        free(ref.logits);
        free(got.logits);
    }
    plan_free(&p);
}

/* Every plan above again, with passes of several positions. */
static void test_batched(void **state)
{
    (void)state;
    static const int *const modes[2][2] = {{chunks_hinted, hints_exact},
                                           {chunks_unhinted, hints_none}};
    for (int m = 0; m < 2; m++) {
        g_chunks = modes[m][0];
        g_hints = modes[m][1];
        test_pipe_layerwise(NULL);
        test_pipe_speculation_rejected(NULL);
        test_pipe_heads(NULL);
        test_slice_split_head(NULL);
        test_slice_head_on_controller(NULL);
        test_slice_exact(NULL);
    }
    g_chunks = g_hints = NULL;
}

/* Bytes and messages per token the engine counts (every rank's): the difference between a
 * run of STEPS positions and one of 2, over the STEPS - 2 positions between. */
static void engine_per_token(const Plan *p, const unsigned char *spec, double *bytes,
                             double *msgs)
{
    double b[2] = {0, 0}, m[2] = {0, 0};
    const int n[2] = {STEPS, 2};
    for (int i = 0; i < 2; i++) {
        Outputs got;
        Run run;
        g_positions = n[i];
        run_plan(p, spec, &got, &run);
        for (int r = 0; r < RANKS; r++) {
            b[i] += run.metrics.rank[r].bytes_sent;
            m[i] += run.metrics.rank[r].messages_sent;
        }
        dist_metrics_free(&run.metrics);
        free(got.logits);
    }
    g_positions = STEPS;
    *bytes = (b[0] - b[1]) / (STEPS - 2);
    *msgs = (m[0] - m[1]) / (STEPS - 2);
}

/* One plan of the matrix below: partition, placement, exchange, --wire (0 f32, 1 f16, 2
 * q8), speculation 0 -> 1 (0: none, 1: always rejected, 2: always kept), LM head on the
 * controller. */
typedef struct {
    Partition part;
    PlacementKind place;
    SliceExchange x;
    int wire, spec, hoc;
} CountCase;

/* The engine's counted bytes and messages per token, the simulator's events' and the
 * analytic model's walk: equal, because all three come from the plan's step program. */
static void expect_counts(const CountCase *k)
{
    g_exchange = k->x;
    Plan p;
    build(&p, k->part, k->place, k->hoc);
    g_exchange = EXCHANGE_AUTO;
    const int L = p.n_layers;
    unsigned char mask[8] = {0}, into[8] = {0}, accept[8];
    memset(accept, 1, sizeof accept);
    if (k->spec) {
        assert_true(schedule_spec_eligible(&p, 0));
        mask[0] = 1; /* the engine's transition 0 -> 1 is the steps' speculation into 1 */
        into[1] = 1;
        accept[1] = k->spec == 2;
    }
    g_wire = k->wire;
    g_tolerance = k->spec == 2 ? 1e30f : 0.0f;
    double eb, em;
    engine_per_token(&p, k->spec ? mask : NULL, &eb, &em);
    g_wire = 0;
    g_tolerance = 0;
    /* the step program */
    Schedule s;
    plan_schedule(&s, &p, &cfg);
    const StepOptions so = {(WireForm)k->wire, into};
    StepProgram prog;
    steps_build(&prog, &p, &s, &cfg, &so);
    const double want_b = (double)steps_bytes(&prog, accept);
    const double want_m = (double)steps_messages(&prog, accept);
    /* the simulator */
    Cluster cl;
    sim_cluster_init(&cl, RANKS - 1);
    for (int r = 0; r < cl.n; r++)
        cl.dev[r].speed_Bps = 1e9;
    double sb, sm;
    sim_plan_token_counts(&cfg, &cl, &p, 3, (WireForm)k->wire, into, accept, &sb, &sm);
    /* the analytic model */
    PlanRequest req = {.n_workers = RANKS - 1, .ref_Bps = 1e9, .speculate = into,
                       .wire_bytes = k->wire == 2 ? 34.0 / 32 : k->wire ? 2 : 4};
    CostTally tally;
    cost_predict_tally(&p, &cfg, &req, accept, &tally);
    if (eb != want_b || em != want_m || sb != want_b || sm != want_m ||
        tally.bytes != want_b || tally.messages != want_m || want_m < 1)
        fail_msg("%s/%s exchange %s wire %d spec %d hoc %d (%d layers): bytes/messages per "
                 "token: engine %.1f/%.1f, steps %.0f/%.0f, simulator %.0f/%.0f, analytic "
                 "%.0f/%.0f", plan_partition_name(p.partition), plan_placement_name(p.placement),
                 plan_exchange_name(p.exchange), k->wire, k->spec, k->hoc, L, eb, em, want_b,
                 want_m, sb, sm, tally.bytes, tally.messages);
    if (!k->spec) /* the schedule's hops are without speculation */
        assert_int_equal(tally.hops, s.hops_per_token);
    steps_free(&prog);
    schedule_free(&s);
    cluster_free(&cl);
    plan_free(&p);
}

static void test_counts_agree(void **state)
{
    (void)state;
    const CountCase cases[] = {
        {PARTITION_LAYER, PLACEMENT_LAYER, EXCHANGE_AUTO, 0, 0, 0},
        {PARTITION_LAYER, PLACEMENT_LAYER, EXCHANGE_AUTO, 1, 1, 0},
        {PARTITION_LAYER, PLACEMENT_LAYER, EXCHANGE_AUTO, 2, 2, 0},
        {PARTITION_HEAD, PLACEMENT_GREEDY, EXCHANGE_AUTO, 0, 0, 0},
        {PARTITION_HEAD, PLACEMENT_SPREAD, EXCHANGE_AUTO, 0, 0, 0},
        {PARTITION_HEAD, PLACEMENT_ROUNDROBIN, EXCHANGE_AUTO, 1, 0, 0},
        {PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_ALL, 0, 0, 0},
        {PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_ALL, 2, 0, 1},
        {PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_REDUCE, 1, 0, 0},
        {PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_REDUCE, 2, 0, 1},
        {PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_RSAG, 0, 0, 1},
        {PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_RSAG, 2, 0, 0},
        {PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_EXACT, 0, 0, 0},
        {PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_EXACT, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_counts(&cases[i]);
}

int main(void)
{
    hbool_t ts = 0;
    H5is_library_threadsafe(&ts);
    fprintf(stderr, "HDF5 thread-safe: %s (weights are read one rank at a time either way)\n",
            ts ? "yes" : "no");
    const struct CMUnitTest llama[] = {
        cmocka_unit_test(test_pipe_layerwise),
        cmocka_unit_test(test_pipe_speculation_rejected),
        cmocka_unit_test(test_pipe_heads),
        cmocka_unit_test(test_slice_split_head),
        cmocka_unit_test(test_slice_head_on_controller),
        cmocka_unit_test(test_slice_exact),
        cmocka_unit_test(test_slice_exact_uneven),
        cmocka_unit_test(test_batched),
        cmocka_unit_test(test_service),
        cmocka_unit_test(test_counts_agree),
    };
    const struct CMUnitTest gpt2[] = {
        cmocka_unit_test(test_pipe_heads),
        cmocka_unit_test(test_slice_split_head),
        cmocka_unit_test(test_slice_exact),
        cmocka_unit_test(test_batched),
        cmocka_unit_test(test_counts_agree),
    };
    const struct CMUnitTest quantized[] = {
        cmocka_unit_test(test_pipe_heads),
        cmocka_unit_test(test_slice_exact),
        cmocka_unit_test(test_slice_exact_uneven),
        cmocka_unit_test(test_counts_agree),
    };
    /* mixed stored types: the plan accounts each kind at its widest type, more than some
     * layers load, so test_slice_exact's check of the loaded bytes is not for this one */
    const struct CMUnitTest mixed[] = {
        cmocka_unit_test(test_pipe_heads),
        cmocka_unit_test(test_slice_exact_uneven),
        cmocka_unit_test(test_counts_agree),
    };
    int failed = cmocka_run_group_tests_name("llama", llama, setup_llama, teardown_model);
    failed += cmocka_run_group_tests_name("gpt2", gpt2, setup_gpt2, teardown_model);
    failed += cmocka_run_group_tests_name("q8_0", quantized, setup_q8, teardown_model);
    failed += cmocka_run_group_tests_name("q4_0", quantized, setup_q4, teardown_model);
    return failed + cmocka_run_group_tests_name("q4_k_m", mixed, setup_q4_k_m,
                                                teardown_model);
}
