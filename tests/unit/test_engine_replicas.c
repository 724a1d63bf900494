/* Replicas (--replicas, data parallel): a controller and four workers as five threads of one
 * process (the in-process transport) hold two copies of a synthetic 2-layer LLaMA, each a
 * 2-stage layer-wise chain on its own two workers (plan_build_replicas), every rank setting
 * up both copies' engines and each worker running its own.  Four sequences in slots 0..3
 * (slots 0 and 2 on copy 0, 1 and 3 on copy 1) go through the controller's backend over the
 * copies (dist_replicas_backend): as calls that mix both copies' rows (prompt chunks beside
 * decode rows), and as each sequence's rows a call of its own with the calls of both copies
 * in flight together (post_rows / take_rows).  Every position's logits must be bit-identical
 * to the same sequence run alone, one position at a time, on the single process
 * (local_model), and both copies must have run passes.  The plans' checks: each copy on its
 * own workers, more copies than workers and head partitions refused naming --replicas. */
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

enum { RANKS = 5, COPIES = 2, SEQS = 4, LEN = 6, KV_CAP = 16, MAX_BATCH = 12 };

static const int seq_tokens[SEQS][LEN] = {{1, 17, 300, 42, 511, 7},
                                          {5, 250, 3, 77, 128, 400},
                                          {460, 2, 33, 1, 290, 61},
                                          {9, 9, 120, 480, 6, 210}};

/* The shared calls: call i gives sequence s rows[i][s] more rows (0: none this call). */
enum { CALLS = 4 };
static const int call_rows[CALLS][SEQS] = {
    {3, 0, 2, 0}, /* copy 0 only */
    {1, 3, 1, 2}, /* both copies: chunks beside decode rows */
    {1, 2, 1, 3},
    {1, 1, 2, 1},
};

static char model_path[64];
static ModelConfig cfg;
static Plan plans[COPIES];

typedef struct {
    InprocWorld *world;
    int pipelined; /* each sequence's rows a call of its own, calls kept in flight */
    long passes[COPIES];
    float *logits; /* [SEQS][LEN][vocab] */
} Run;

typedef struct {
    Run *run;
    int rank;
} RankArg;

static float *logits_at(float *all, int s, int pos)
{
    return all + ((size_t)s * LEN + (size_t)pos) * (size_t)cfg.vocab_size;
}

/* The rows of call p of every sequence into x (each sequence's rows in its own block of
 * MAX_BATCH rows when apart, else packed), their segments into rows; returns the count. */
static int embed_call(const HeadW *head, int p, const int *pos, float *x, SeqRows *rows,
                      int apart)
{
    const size_t dim = (size_t)cfg.dim;
    int k = 0, n = 0;
    for (int s = 0; s < SEQS; s++) {
        const int m = call_rows[p][s];
        if (!m)
            continue;
        float *at = apart ? x + (size_t)s * MAX_BATCH * dim : x + (size_t)n * dim;
        for (int i = 0; i < m; i++)
            model_embed(&cfg, head, seq_tokens[s][pos[s] + i], pos[s] + i, at + (size_t)i * dim);
        rows[apart ? s : k] = (SeqRows){s, pos[s], m};
        k++;
        n += m;
    }
    return k;
}

/* Sequence s's m rows at x: their logits into the run's. */
static void keep_logits(Run *run, const HeadW *head, Scratch *sc, int s, int *pos,
                        const float *x, int m)
{
    for (int i = 0; i < m; i++)
        model_logits(&cfg, head, sc, x + (size_t)i * (size_t)cfg.dim,
                     logits_at(run->logits, s, pos[s]++));
}

static void drive(Run *run, LayerBackend *b, const HeadW *head, Scratch *sc)
{
    const size_t dim = (size_t)cfg.dim;
    char err[256];
    assert_int_equal(b->copies, COPIES);
    assert_int_equal(b->set_slots(b->ctx, SEQS, err, sizeof err), 0);
    assert_true(b->max_in_flight >= COPIES);
    float *x = xcalloc((size_t)SEQS * MAX_BATCH * dim, sizeof(float));
    int pos[SEQS] = {0};
    SeqRows rows[SEQS];
    for (int p = 0; p < CALLS; p++) {
        if (!run->pipelined) { /* one call of every sequence's rows, both copies in it */
            const int k = embed_call(head, p, pos, x, rows, 0);
            b->forward_rows(b->ctx, x, rows, k);
            for (int i = 0, r = 0; i < k; r += rows[i].n, i++)
                keep_logits(run, head, sc, rows[i].slot, pos, x + (size_t)r * dim, rows[i].n);
            continue;
        }
        /* each sequence a call of its own, all four posted before the oldest is taken */
        embed_call(head, p, pos, x, rows, 1);
        int order[SEQS], n = 0;
        for (int s = 0; s < SEQS; s++)
            if (call_rows[p][s]) {
                b->post_rows(b->ctx, x + (size_t)s * MAX_BATCH * dim, &rows[s], 1, 1);
                order[n++] = s;
            }
        for (int i = 0; i < n; i++) {
            b->take_rows(b->ctx);
            keep_logits(run, head, sc, order[i], pos, x + (size_t)order[i] * MAX_BATCH * dim,
                        rows[order[i]].n);
        }
    }
    for (int s = 0; s < SEQS; s++)
        assert_int_equal(pos[s], LEN);
    free(x);
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
    DistEngine *e[COPIES], *mine = NULL;
    for (int k = 0; k < COPIES; k++) { /* every rank sets up every copy, in order */
        CHECK(dist_setup(&e[k], &t, &cfg, &plans[k], f, model_path, KV_CAP) == 0, "setup");
        int first;
        const int n = plan_copy_workers(RANKS - 1, COPIES, k, &first);
        int members[RANKS] = {0};
        for (int i = 0; i < n; i++)
            members[i + 1] = first + i;
        dist_set_control(e[k], members, n + 1);
        dist_set_max_batch(e[k], MAX_BATCH);
        dist_set_ubatch(e[k], DIST_UBATCH_AUTO); /* each chain keeps a pass per stage */
        dist_set_slots(e[k], SEQS / COPIES);
        if (a->rank >= first && a->rank < first + n)
            mine = e[k];
    }
    if (a->rank == 0) {
        HeadW head;
        Scratch sc;
        transport_exclusive(&t, 1);
        CHECK(model_load_head(&head, &cfg, f, model_path, err, sizeof err) == 0, "%s", err);
        transport_exclusive(&t, 0);
        model_scratch_init(&sc, &cfg, KV_CAP);
        LayerBackend b = dist_replicas_backend(e, COPIES);
        drive(run, &b, &head, &sc);
        for (int k = 0; k < COPIES; k++) {
            run->passes[k] = dist_passes(e[k]);
            dist_controller_stop(e[k]);
        }
        dist_replicas_free(&b);
        model_scratch_free(&sc);
        model_free_head(&head);
    } else {
        CHECK(mine, "rank %d in no copy", a->rank);
        dist_worker_loop(mine);
    }
    for (int k = 0; k < COPIES; k++)
        dist_free(e[k]);
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

/* Each sequence alone on the single process, one position at a time. */
static float *reference_logits(void)
{
    char err[256];
    hid_t f = h5io_open_read(model_path, err, sizeof err);
    assert_true(f >= 0);
    LocalModel *m = NULL;
    HeadW head;
    assert_int_equal(model_load_head(&head, &cfg, f, model_path, err, sizeof err), 0);
    H5Fclose(f);
    Scratch sc;
    model_scratch_init(&sc, &cfg, KV_CAP);
    float *all = xcalloc((size_t)SEQS * LEN * (size_t)cfg.vocab_size, sizeof(float));
    float x[64];
    for (int s = 0; s < SEQS; s++) {
        local_model_free(m); /* fresh caches for each sequence */
        f = h5io_open_read(model_path, err, sizeof err);
        assert_int_equal(local_model_load(&m, &cfg, f, model_path, KV_CAP, err, sizeof err), 0);
        H5Fclose(f);
        LayerBackend b = local_model_backend(m);
        for (int pos = 0; pos < LEN; pos++) {
            model_embed(&cfg, &head, seq_tokens[s][pos], pos, x);
            b.forward_n(b.ctx, x, pos, 1, &seq_tokens[s][pos], 1);
            model_logits(&cfg, &head, &sc, x, logits_at(all, s, pos));
        }
    }
    local_model_free(m);
    model_free_head(&head);
    model_scratch_free(&sc);
    return all;
}

static void expect_alone_bits(int pipelined)
{
    float *alone = reference_logits();
    Run run = {.pipelined = pipelined,
               .logits = xcalloc((size_t)SEQS * LEN * (size_t)cfg.vocab_size, sizeof(float))};
    run_engine(&run);
    for (int s = 0; s < SEQS; s++)
        for (int pos = 0; pos < LEN; pos++)
            if (memcmp(logits_at(alone, s, pos), logits_at(run.logits, s, pos),
                       (size_t)cfg.vocab_size * sizeof(float)))
                fail_msg("sequence %d (copy %d), position %d: the logits on the copies differ "
                         "from the sequence's alone", s, s % COPIES, pos);
    /* the sequences differ: a row that went to another copy's caches would have shown */
    assert_true(memcmp(logits_at(alone, 0, 1), logits_at(alone, 1, 1),
                       (size_t)cfg.vocab_size * sizeof(float)) != 0);
    for (int k = 0; k < COPIES; k++)
        assert_true(run.passes[k] >= CALLS - (k == 1)); /* copy 1 sits out the first call */
    free(alone);
    free(run.logits);
}

/* Each copy on its own two workers, layer-wise (a 2-stage chain). */
static void test_plans(void **state)
{
    (void)state;
    for (int k = 0; k < COPIES; k++) {
        int first;
        assert_int_equal(plan_copy_workers(RANKS - 1, COPIES, k, &first), 2);
        assert_int_equal(first, 1 + 2 * k);
        assert_int_equal(plans[k].n_workers, RANKS - 1);
        for (int l = 0; l < plans[k].n_layers; l++)
            assert_int_equal(plans[k].layers[l].ffn_rank, first + l);
        for (int r = 1; r < RANKS; r++)
            assert_int_equal(plan_rank_weight_bytes(&plans[k], &cfg, r) > 0,
                             r >= first && r < first + 2);
    }
    PlanRequest req = {.partition = PARTITION_LAYER, .placement = PLACEMENT_LAYER,
                       .n_workers = RANKS - 1, .kv_positions = KV_CAP};
    char err[256];
    Plan p[RANKS];
    assert_int_equal(plan_build_replicas(p, &cfg, &req, RANKS, err, sizeof err), -1);
    assert_non_null(strstr(err, "--replicas 5: more copies than workers"));
    assert_int_equal(plan_replicas_check(&req, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "--replicas 0"));
    req.partition = PARTITION_HEAD;
    assert_int_equal(plan_replicas_check(&req, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "--replicas 2 with --partition head"));
}

static void test_shared_calls(void **state)
{
    (void)state;
    expect_alone_bits(0);
}

static void test_in_flight(void **state)
{
    (void)state;
    expect_alone_bits(1);
}

static int setup(void **state)
{
    (void)state;
    h5io_quiet();
    snprintf(model_path, sizeof model_path, "/tmp/hs_test_replicas_%ld.h5", (long)getpid());
    const char *spec = "llama:dim=64,layers=2,heads=8,kv_heads=4,ffn=172,vocab=512,ctx=64";
    char err[512];
    if (convert_make_synthetic(spec, 13, 0, NULL, model_path, NULL, NULL, err, sizeof err) ||
        convert_synthetic_config(spec, 0, &cfg, err, sizeof err)) {
        fprintf(stderr, "synthetic model: %s\n", err);
        return -1;
    }
    hid_t f = h5io_open_read(model_path, err, sizeof err);
    int rc = f >= 0 ? config_read_wtypes(&cfg, f, model_path, err, sizeof err) : -1;
    if (f >= 0)
        H5Fclose(f);
    PlanRequest req = {.partition = PARTITION_LAYER, .placement = PLACEMENT_LAYER,
                       .n_workers = RANKS - 1, .kv_positions = KV_CAP * SEQS / COPIES};
    if (rc == 0 && plan_build_replicas(plans, &cfg, &req, COPIES, err, sizeof err) < 0) {
        fprintf(stderr, "plan_build_replicas: %s\n", err);
        rc = -1;
    }
    return rc < 0 || cfg.dim != 64 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int k = 0; k < COPIES; k++)
        plan_free(&plans[k]);
    return remove(model_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plans),
        cmocka_unit_test(test_shared_calls),
        cmocka_unit_test(test_in_flight),
    };
    return cmocka_run_group_tests_name("engine_replicas", tests, setup, teardown);
}
