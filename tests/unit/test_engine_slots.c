/* Several sequences per pass in the distributed engine (dist_set_slots, the backend's
 * forward_rows): a controller and two workers as three threads of one process (the in-process
 * transport) run a synthetic 2-layer LLaMA under a layer-wise plan (one pass at a time, and
 * passes of at most 2 rows kept in flight along the chain, cutting segments), a head-level
 * plan and SLICE plans with every exchange (all-to-all, reduce, reduce-scatter/all-gather,
 * exact) and the LM head split over the members or on the controller, with f32 and f16 KV
 * caches.  Three sequences, in slots 2, 0 and 1, go through shared passes that mix prompt
 * chunks and single decode rows; every position's logits must be bit-identical to the same
 * sequence run alone, one position per pass, on an engine of one slot under the same plan.
 * The sequences differ, so a row that read another slot's caches would show.  On the
 * layer-wise chain, again with each sequence's rows a call of its own, the calls kept in
 * flight together (post_rows / take_rows: pipelined decode), the same bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config_io.h"
#include "convert.h"
#include "dist.h"
#include "h5io.h"
#include "model.h"
#include "plan.h"
#include "transport.h"
#include "test_helpers.h"
#include "util.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { RANKS = 3, SEQS = 3, LEN = 7, KV_CAP = 16, MAX_BATCH = 8 };

static const int seq_tokens[SEQS][LEN] = {
    {1, 17, 300, 42, 511, 7, 99}, {5, 250, 3, 77, 128, 400, 12}, {460, 2, 33, 1, 290, 61, 8}};
static const int seq_slot[SEQS] = {2, 0, 1};

/* The shared passes: pass i gives sequence s rows[i][s] more rows (0: none this pass). */
enum { PASSES = 6 };
static const int pass_rows[PASSES][SEQS] = {
    {3, 0, 0}, /* A's prompt chunk alone */
    {1, 2, 0}, /* A decodes beside B's prompt chunk */
    {1, 1, 3}, /* all three: C's chunk */
    {1, 2, 1}, {1, 1, 2}, {0, 1, 1},
};

static char model_path[64];
static ModelConfig cfg;

typedef struct {
    const Plan *plan;
    InprocWorld *world;
    int slots;     /* 1: each sequence alone (seq) */
    int seq;
    int ubatch;
    int pipelined; /* each sequence's rows a call of its own, calls kept in flight */
    int in_flight; /* the most passes the controller had in flight */
    float *logits; /* [SEQS][LEN][vocab] */
} Run;

typedef struct {
    Run *run;
    int rank;
} RankArg;

static float *logits_at(const Run *run, int s, int pos)
{
    return run->logits + ((size_t)s * LEN + (size_t)pos) * (size_t)cfg.vocab_size;
}

/* The logits of n rows x: the backend's (split LM head) or the controller's head. */
static void take_logits(LayerBackend *b, const HeadW *head, Scratch *sc, const float *x,
                        int n, float *all, int rows_call)
{
    if (rows_call ? b->logits_rows(b->ctx, all, n) : b->logits_n(b->ctx, all, n))
        return;
    for (int i = 0; i < n; i++)
        model_logits(&cfg, head, sc, x + (size_t)i * (size_t)cfg.dim,
                     all + (size_t)i * (size_t)cfg.vocab_size);
}

/* One sequence alone, one position per pass, in slot 0 of a one-slot engine. */
static void drive_alone(Run *run, LayerBackend *b, const HeadW *head, Scratch *sc)
{
    float x[64];
    for (int pos = 0; pos < LEN; pos++) {
        model_embed(&cfg, head, seq_tokens[run->seq][pos], pos, x);
        b->forward_n(b->ctx, x, pos, 1, &seq_tokens[run->seq][pos], 1);
        take_logits(b, head, sc, x, 1, logits_at(run, run->seq, pos), 0);
    }
}

/* The pass plan's rows of each sequence as calls of their own, up to the backend's
 * max_in_flight posted before the oldest is taken (in posting order). */
static void drive_pipelined(Run *run, LayerBackend *b, const HeadW *head, Scratch *sc)
{
    const size_t dim = (size_t)cfg.dim, V = (size_t)cfg.vocab_size;
    assert_true(b->post_rows && b->take_rows && b->max_in_flight >= 2);
    float *x = xcalloc((size_t)SEQS * MAX_BATCH * dim, sizeof(float));
    float *lg = xcalloc(V, sizeof(float));
    int pos[SEQS] = {0, 0, 0}, fifo[SEQS], head_i = 0, count = 0;
    SeqRows rows[SEQS];
    for (int p = 0; p <= PASSES; p++) {
        for (int s = 0; s < SEQS; s++) {
            const int m = p < PASSES ? pass_rows[p][s] : 0;
            /* take the oldest while the flight is full, or, past the plan, all of them;
             * also before a sequence's next call (its rows follow its last call's) */
            int mine = 0;
            for (int i = 0; i < count; i++)
                mine |= fifo[(head_i + i) % SEQS] == s;
            while (count > 0 && (count >= b->max_in_flight || p == PASSES || (m && mine))) {
                const int t = fifo[head_i];
                b->take_rows(b->ctx);
                for (int i = 0; i < rows[t].n; i++) {
                    model_logits(&cfg, head, sc, x + ((size_t)t * MAX_BATCH + (size_t)i) * dim, lg);
                    memcpy(logits_at(run, t, pos[t]++), lg, V * sizeof(float));
                }
                mine &= t != s;
                head_i = (head_i + 1) % SEQS;
                count--;
            }
            if (!m)
                continue;
            for (int i = 0; i < m; i++)
                model_embed(&cfg, head, seq_tokens[s][pos[s] + i], pos[s] + i,
                            x + ((size_t)s * MAX_BATCH + (size_t)i) * dim);
            rows[s] = (SeqRows){seq_slot[s], pos[s], m};
            b->post_rows(b->ctx, x + (size_t)s * MAX_BATCH * dim, &rows[s], 1, 1);
            fifo[(head_i + count++) % SEQS] = s;
        }
    }
    for (int s = 0; s < SEQS; s++)
        assert_int_equal(pos[s], LEN);
    free(x);
    free(lg);
}

/* The three sequences through the shared passes, each in its slot. */
static void drive_together(Run *run, LayerBackend *b, const HeadW *head, Scratch *sc)
{
    const size_t dim = (size_t)cfg.dim, V = (size_t)cfg.vocab_size;
    char err[256];
    assert_int_equal(b->set_slots(b->ctx, SEQS, err, sizeof err), 0);
    assert_int_equal(b->set_slots(b->ctx, SEQS + 1, err, sizeof err), -1);
    float *x = xcalloc((size_t)MAX_BATCH * dim, sizeof(float));
    float *lg = xcalloc((size_t)MAX_BATCH * V, sizeof(float));
    int pos[SEQS] = {0, 0, 0};
    for (int p = 0; p < PASSES; p++) {
        SeqRows rows[SEQS];
        int k = 0, n = 0;
        for (int s = 0; s < SEQS; s++) {
            const int m = pass_rows[p][s];
            if (!m)
                continue;
            for (int i = 0; i < m; i++)
                model_embed(&cfg, head, seq_tokens[s][pos[s] + i], pos[s] + i,
                            x + (size_t)(n + i) * dim);
            rows[k++] = (SeqRows){seq_slot[s], pos[s], m};
            n += m;
        }
        b->forward_rows(b->ctx, x, rows, k);
        take_logits(b, head, sc, x, n, lg, 1);
        for (int s = 0, r = 0; s < SEQS; s++)
            for (int i = 0; i < pass_rows[p][s]; i++, r++)
                memcpy(logits_at(run, s, pos[s]++), lg + (size_t)r * V, V * sizeof(float));
    }
    for (int s = 0; s < SEQS; s++)
        assert_int_equal(pos[s], LEN);
    free(x);
    free(lg);
}

static void *rank_main(void *p)
{
    RankArg *a = p;
    Run *run = a->run;
    Transport t;
    transport_inproc_init(&t, run->world, a->rank);
    char err[512];
    transport_exclusive(&t, 1);
    hid_t f = h5io_open_read(model_path, err, sizeof err);
    transport_exclusive(&t, 0);
    CHECK(f >= 0, "%s", err);
    DistEngine *e;
    CHECK(dist_setup(&e, &t, &cfg, run->plan, f, model_path, KV_CAP) == 0, "dist_setup failed");
    dist_set_max_batch(e, MAX_BATCH);
    dist_set_slots(e, run->slots);
    if (run->ubatch)
        dist_set_ubatch(e, run->ubatch);
    if (a->rank == 0) {
        HeadW head;
        Scratch sc;
        transport_exclusive(&t, 1);
        CHECK(model_load_head(&head, &cfg, f, model_path, err, sizeof err) == 0, "%s", err);
        transport_exclusive(&t, 0);
        model_scratch_init(&sc, &cfg, KV_CAP);
        LayerBackend b = dist_backend(e);
        if (run->slots == 1)
            drive_alone(run, &b, &head, &sc);
        else if (run->pipelined)
            drive_pipelined(run, &b, &head, &sc);
        else
            drive_together(run, &b, &head, &sc);
        run->in_flight = dist_max_in_flight(e);
        dist_controller_stop(e);
        model_scratch_free(&sc);
        model_free_head(&head);
    } else {
        dist_worker_loop(e);
    }
    dist_free(e);
    transport_exclusive(&t, 1);
    H5Fclose(f);
    transport_exclusive(&t, 0);
    transport_finalize(&t);
    return NULL;
}

static void run_engine(Run *run)
{
    run->world = transport_inproc_world(RANKS);
    RankArg args[RANKS];
    for (int r = 0; r < RANKS; r++)
        args[r] = (RankArg){run, r};
    test_run_ranks(RANKS, rank_main, args, sizeof args[0]);
    transport_inproc_world_free(run->world);
}

/* Each sequence alone, then the three together (passes of at most ubatch rows: 0, no
 * limit; pipelined: each one's rows a call of its own, calls in flight together); every
 * logit compared bit for bit.  Returns the most passes the controller had in flight. */
static int expect_alone_bits_as(const Plan *plan, int ubatch, int pipelined)
{
    const size_t all = (size_t)SEQS * LEN * (size_t)cfg.vocab_size;
    Run alone = {.plan = plan, .slots = 1, .logits = xcalloc(all, sizeof(float))};
    for (int s = 0; s < SEQS; s++) {
        alone.seq = s;
        run_engine(&alone);
    }
    Run together = {.plan = plan, .slots = SEQS, .ubatch = ubatch, .pipelined = pipelined,
                    .logits = xcalloc(all, sizeof(float))};
    run_engine(&together);
    for (int s = 0; s < SEQS; s++)
        for (int pos = 0; pos < LEN; pos++)
            if (memcmp(logits_at(&alone, s, pos), logits_at(&together, s, pos),
                       (size_t)cfg.vocab_size * sizeof(float)))
                fail_msg("sequence %d (slot %d), position %d: the logits in shared passes "
                         "differ from the sequence's alone", s, seq_slot[s], pos);
    /* the sequences differ from the first position on: a row that read another slot's
     * caches would have shown */
    assert_true(memcmp(logits_at(&alone, 0, 1), logits_at(&alone, 1, 1),
                       (size_t)cfg.vocab_size * sizeof(float)) != 0);
    free(alone.logits);
    free(together.logits);
    return together.in_flight;
}

static void expect_alone_bits(const Plan *plan, int ubatch)
{
    expect_alone_bits_as(plan, ubatch, 0);
}

static void build(Plan *p, Partition part, PlacementKind k, SliceExchange x, int hoc)
{
    PlanRequest req = {.partition = part, .placement = k, .seed = 5, .n_workers = RANKS - 1,
                       .kv_positions = KV_CAP, .head_on_controller = hoc, .exchange = x};
    char err[256];
    if (plan_build(p, &cfg, &req, err, sizeof err) != 0)
        fail_msg("plan_build: %s", err);
}

static void test_layer(void **state)
{
    (void)state;
    Plan p;
    build(&p, PARTITION_LAYER, PLACEMENT_LAYER, EXCHANGE_AUTO, 0);
    assert_int_equal(p.layers[0].ffn_rank, 1);
    assert_int_equal(p.layers[1].ffn_rank, 2);
    expect_alone_bits(&p, 0);
    expect_alone_bits(&p, 2); /* passes of 2 rows, two in flight on the chain */
    /* pipelined decode: the sequences' calls in flight together, one per stage */
    assert_int_equal(expect_alone_bits_as(&p, DIST_UBATCH_AUTO, 1), 2);
    plan_free(&p);
}

static void test_head(void **state)
{
    (void)state;
    Plan p;
    build(&p, PARTITION_HEAD, PLACEMENT_ROUNDROBIN, EXCHANGE_AUTO, 0);
    expect_alone_bits(&p, 0);
    plan_free(&p);
}

static void test_slice(void **state)
{
    (void)state;
    const SliceExchange xs[] = {EXCHANGE_ALL, EXCHANGE_REDUCE, EXCHANGE_RSAG, EXCHANGE_EXACT};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
        for (int hoc = 0; hoc <= 1; hoc++) {
            Plan p;
            build(&p, PARTITION_SLICE, PLACEMENT_GREEDY, xs[i], hoc);
            assert_int_equal(p.layers[0].mode, LAYER_SLICE);
            assert_int_equal(p.head_split, !hoc);
            expect_alone_bits(&p, 0);
            plan_free(&p);
        }
}

/* KV caches stored as halves: the slots' copies hold their rows in that type too. */
static void test_f16_caches(void **state)
{
    (void)state;
    cfg.kv_type = QTYPE_F16;
    Plan p;
    build(&p, PARTITION_HEAD, PLACEMENT_ROUNDROBIN, EXCHANGE_AUTO, 0);
    expect_alone_bits(&p, 0);
    plan_free(&p);
    build(&p, PARTITION_SLICE, PLACEMENT_GREEDY, EXCHANGE_RSAG, 0);
    expect_alone_bits(&p, 0);
    plan_free(&p);
    cfg.kv_type = QTYPE_F32;
}

static int setup(void **state)
{
    (void)state;
    h5io_quiet();
    snprintf(model_path, sizeof model_path, "/tmp/hs_test_slots_%ld.h5", (long)getpid());
    const char *spec = "llama:dim=64,layers=2,heads=8,kv_heads=4,ffn=172,vocab=512,ctx=64";
    char err[512];
    if (convert_make_synthetic(spec, 11, 0, NULL, model_path, NULL, NULL, err, sizeof err) ||
        convert_synthetic_config(spec, 0, &cfg, err, sizeof err)) {
        fprintf(stderr, "synthetic model: %s\n", err);
        return -1;
    }
    hid_t f = h5io_open_read(model_path, err, sizeof err);
    int rc = f >= 0 ? config_read_wtypes(&cfg, f, model_path, err, sizeof err) : -1;
    if (f >= 0)
        H5Fclose(f);
    return rc < 0 || cfg.dim != 64 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    return remove(model_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer),
        cmocka_unit_test(test_head),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_f16_caches),
    };
    return cmocka_run_group_tests_name("engine_slots", tests, setup, teardown);
}
