/* replicas.c: the controller's backend over the engines of K copies of the layers
 * (--replicas, data parallel: src/plan/replicas.c places each copy on its own workers).
 * Slot s is slot s / K of copy s % K.  A call of several sequences is cut by copy: each
 * copy's rows gathered into a buffer of the call's, posted to that copy's engine (its own
 * queue of passes in flight, loop.c), and taken back in posting order; since every copy's
 * engine takes its passes oldest first, the oldest call's parts are the oldest of their
 * copies.  So the copies decode their groups of sequences at once, each on its own workers,
 * and a sequence's rows never meet another copy's: its results are its copy's alone. */
#include "engine_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Calls in flight at once, at most (every copy's chain of stages, summed, and one more). */
#define REPLICA_MAX_CALLS (4 * (ENGINE_MAX_DEPTH + 1))

/* One call: its rows x as the caller posted them, and for each copy that takes part its
 * rows gathered (buf), their segments in the copy's slots, and where they came from. */
typedef struct {
    float *x;
    unsigned used;  /* bit c: copy c takes part (at most 32 copies) */
    int n_segs;
    SeqRows *segs;  /* [n_segs] the caller's, in its order */
} ReplicaCall;

typedef struct {
    int k;
    LayerBackend *be; /* [k] each copy's engine */
    int dim, max_batch;
    float **buf;      /* [REPLICA_MAX_CALLS * k] a call's rows of each copy */
    SeqRows *rows;    /* [k * max_batch] a call's segments of each copy, translated */
    ReplicaCall q[REPLICA_MAX_CALLS];
    int head, count;
    long *calls;      /* [k] calls each copy took part in (atomic: /metrics reads them) */
} Replicas;

static float *call_buf(Replicas *r, int call, int copy)
{
    float **b = &r->buf[(size_t)call * (size_t)r->k + (size_t)copy];
    if (!*b)
        *b = xcalloc((size_t)r->max_batch * (size_t)r->dim, sizeof(float));
    return *b;
}

/* Posts a call: each copy's rows, in the caller's order, into its buffer and to its engine. */
static void rep_post_rows(void *ctx, float *x, const SeqRows *rows, int n_rows, int next_n)
{
    Replicas *r = ctx;
    CHECK(r->count < REPLICA_MAX_CALLS, "more than %d calls of several copies in flight",
          REPLICA_MAX_CALLS);
    const int ci = (r->head + r->count) % REPLICA_MAX_CALLS;
    ReplicaCall *call = &r->q[ci];
    call->x = x;
    call->used = 0;
    call->n_segs = n_rows;
    call->segs = xrealloc(call->segs, (size_t)n_rows * sizeof *call->segs);
    memcpy(call->segs, rows, (size_t)n_rows * sizeof *rows);
    const size_t dim = (size_t)r->dim;
    for (int c = 0; c < r->k; c++) {
        int m = 0, n = 0;
        float *buf = NULL;
        for (int i = 0, row = 0; i < n_rows; row += rows[i].n, i++) {
            if (rows[i].slot % r->k != c)
                continue;
            buf = buf ? buf : call_buf(r, ci, c);
            memcpy(buf + (size_t)n * dim, x + (size_t)row * dim,
                   (size_t)rows[i].n * dim * sizeof(float));
            r->rows[(size_t)c * (size_t)r->max_batch + (size_t)m++] =
                (SeqRows){rows[i].slot / r->k, rows[i].pos, rows[i].n};
            n += rows[i].n;
        }
        if (!m)
            continue;
        call->used |= 1u << c;
        __atomic_fetch_add(&r->calls[c], 1, __ATOMIC_RELAXED);
        r->be[c].post_rows(r->be[c].ctx, buf, r->rows + (size_t)c * (size_t)r->max_batch, m,
                           next_n);
    }
    r->count++;
}

/* Takes the oldest call: each copy's part, its rows back into the caller's x. */
static void rep_take_rows(void *ctx)
{
    Replicas *r = ctx;
    CHECK(r->count > 0, "a call taken with none posted");
    const int ci = r->head;
    ReplicaCall *call = &r->q[ci];
    const size_t dim = (size_t)r->dim;
    for (int c = 0; c < r->k; c++) {
        if (!(call->used & (1u << c)))
            continue;
        r->be[c].take_rows(r->be[c].ctx);
        const float *buf = call_buf(r, ci, c);
        for (int i = 0, row = 0, n = 0; i < call->n_segs; row += call->segs[i].n, i++) {
            if (call->segs[i].slot % r->k != c)
                continue;
            memcpy(call->x + (size_t)row * dim, buf + (size_t)n * dim,
                   (size_t)call->segs[i].n * dim * sizeof(float));
            n += call->segs[i].n;
        }
    }
    r->head = (r->head + 1) % REPLICA_MAX_CALLS;
    r->count--;
}

static void rep_forward_rows(void *ctx, float *x, const SeqRows *rows, int n_rows)
{
    Replicas *r = ctx;
    CHECK(r->count == 0, "a forward while %d calls posted are not taken", r->count);
    rep_post_rows(ctx, x, rows, n_rows, 0);
    rep_take_rows(ctx);
}

/* Slots 0..n-1: copy c holds those with s % k == c. */
static int rep_set_slots(void *ctx, int n_slots, char *err, size_t errlen)
{
    Replicas *r = ctx;
    for (int c = 0; c < r->k && c < n_slots; c++) {
        const int mine = (n_slots - c + r->k - 1) / r->k;
        if (r->be[c].set_slots(r->be[c].ctx, mine, err, errlen) < 0)
            return -1;
    }
    return 0;
}

/* The caller computes every row's logits (a copy's LM head is the controller's). */
static int rep_logits_rows(void *ctx, float *logits, int n)
{
    (void)ctx;
    (void)logits;
    (void)n;
    return 0;
}

/* One sequence (forward, forward_n and their logits): copy 0's slot 0. */
static void rep_forward(void *ctx, float *x, int pos, int token)
{
    Replicas *r = ctx;
    r->be[0].forward(r->be[0].ctx, x, pos, token);
}

static void rep_forward_n(void *ctx, float *x, int pos, int n, const int *tokens, int next_n)
{
    Replicas *r = ctx;
    r->be[0].forward_n(r->be[0].ctx, x, pos, n, tokens, next_n);
}

static void rep_want_rows(void *ctx, int rows)
{
    Replicas *r = ctx;
    r->be[0].want_rows(r->be[0].ctx, rows);
}

static int rep_logits(void *ctx, float *logits)
{
    Replicas *r = ctx;
    return r->be[0].logits(r->be[0].ctx, logits);
}

static int rep_logits_n(void *ctx, float *logits, int n)
{
    Replicas *r = ctx;
    return r->be[0].logits_n(r->be[0].ctx, logits, n);
}

/* Before a position: every copy's memory check (each holds its own sequences). */
static int rep_prepare(void *ctx, int pos, char *err, size_t errlen)
{
    Replicas *r = ctx;
    for (int c = 0; c < r->k; c++)
        if (r->be[c].prepare && r->be[c].prepare(r->be[c].ctx, pos, err, errlen) < 0)
            return -1;
    return 0;
}

void dist_replicas_free(LayerBackend *be)
{
    Replicas *r = be->ctx;
    for (int i = 0; i < REPLICA_MAX_CALLS; i++)
        free(r->q[i].segs);
    for (int i = 0; i < REPLICA_MAX_CALLS * r->k; i++)
        free(r->buf[i]);
    free(r->buf);
    free(r->rows);
    free(r->be);
    free(r->calls);
    free(r);
    be->ctx = NULL;
}

long dist_replicas_calls(const LayerBackend *be, int copy)
{
    const Replicas *r = be->ctx;
    return r && copy >= 0 && copy < r->k ? __atomic_load_n(&r->calls[copy], __ATOMIC_RELAXED)
                                         : 0;
}

LayerBackend dist_replicas_backend(DistEngine **copies, int n_copies)
{
    CHECK(n_copies >= 1 && n_copies <= 32, "%d copies: 1..32", n_copies);
    Replicas *r = xcalloc(1, sizeof *r);
    r->k = n_copies;
    r->be = xcalloc((size_t)n_copies, sizeof *r->be);
    r->calls = xcalloc((size_t)n_copies, sizeof *r->calls);
    r->dim = copies[0]->c->dim;
    int max_batch = 0, flight = 0;
    for (int c = 0; c < n_copies; c++) {
        r->be[c] = dist_backend(copies[c]);
        CHECK(!copies[c]->hd.comm, "copy %d splits its LM head over workers", c);
        max_batch = c == 0 || r->be[c].max_batch < max_batch ? r->be[c].max_batch : max_batch;
        flight += r->be[c].max_in_flight;
    }
    r->max_batch = max_batch;
    r->buf = xcalloc((size_t)REPLICA_MAX_CALLS * (size_t)n_copies, sizeof *r->buf);
    r->rows = xcalloc((size_t)n_copies * (size_t)max_batch, sizeof *r->rows);
    LayerBackend be = {.ctx = r, .forward = rep_forward, .forward_n = rep_forward_n,
                       .want_rows = rep_want_rows, .logits = rep_logits,
                       .logits_n = rep_logits_n, .prepare = rep_prepare};
    be.set_slots = rep_set_slots;
    be.forward_rows = rep_forward_rows;
    be.logits_rows = rep_logits_rows;
    be.post_rows = rep_post_rows;
    be.take_rows = rep_take_rows;
    be.max_in_flight = flight < REPLICA_MAX_CALLS - 1 ? flight : REPLICA_MAX_CALLS - 1;
    be.max_batch = max_batch;
    be.copies = n_copies;
    return be;
}
