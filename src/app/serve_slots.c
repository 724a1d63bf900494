/* serve_slots.c: --parallel's shared passes, on one process or on several ranks (the layer
 * backend's several-sequence calls: the local model's, or the distributed engine's, whose
 * passes carry a segment table).  Each slot is a thread that runs one
 * request's generation (generate_run, with its own sampler, penalties, stop strings and
 * streamed text) on a backend of its own: its forward and forward_n hand the slot's rows (a
 * prompt chunk of up to --batch rows, or one decode row) to the batcher and wait.  Once every
 * slot that is generating has handed in its rows, one of them runs a step for all: the
 * rows of every slot in one pass (several passes only where the rows exceed the pass's
 * size: single rows first, then the chunks), the backend's forward_rows with each slot's
 * own KV caches, then the LM head on the rows whose logits are wanted (or the backend's
 * logits_rows where it computes them: the LM head split over workers); only one thread runs
 * a step at a time, so the engine is driven by one thread at a time.  Each slot then samples
 * its own token and hands in its next rows.  A request that comes joins at the next step
 * (batcher_join when the controller gives it a slot: the next step waits for its first
 * rows), one that ends leaves (batcher_leave).  Every sequence's
 * logits are bit-identical to running it alone (tests/unit/test_local_slots.c,
 * test_engine_slots.c), so what a client gets does not depend on what else runs.
 *
 * Pipelined decode: where the layers keep several calls in flight (the distributed engine on
 * a chain of stages: max_in_flight, one per stage), the slots go in up to that many groups
 * (a slot joins the group with the fewest generating) and a thread of the batcher's own, the
 * driver, posts a group's pass as soon as each of its generating slots has handed in its
 * rows and there is room in flight, and takes the oldest pass otherwise; so while one
 * group's pass is in one stage, another's is in the next, and every stage works at every
 * step.  The groups use disjoint slots, so each sequence's results are those of its pass
 * alone.  With copies of the layers (--replicas: the backend's `copies`), a slot's groups
 * are its copy's, so the copies' passes are in flight together, each on its own workers. */
#include "serve.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int slot, pos, n;
    float *x;  /* the slot's rows [n][dim], in place */
    int want;  /* the last rows whose logits are wanted (-1: every row) */
    int done;
} BatchReq;

typedef struct Batcher Batcher;

/* Pipelined decode: a group of slots, whose requests go as one pass, one pass in flight at
 * a time (the rest of its requests wait for its next pass where they exceed one). */
typedef struct {
    int active;         /* its slots generating */
    int n_pending;
    BatchReq **pending; /* [n_slots] handed in */
    BatchReq **order;   /* [n_slots] its pass in flight: k requests, total rows */
    int k, total;
    int flying;
    float *x;           /* [cap][dim] the pass's rows */
    SeqRows *rows;      /* [n_slots] */
} BatchGroup;

typedef struct {
    Batcher *b;
    int slot;
    int group;   /* pipelined: its group while it generates */
    int joined;  /* counted among the active slots */
    int want;    /* want_rows's hint for the next forward_n (-1: none) */
    float *lg;   /* [n_lg][vocab] the logits of its last pass's last n_lg rows */
    size_t lg_cap;
    int n_lg;
    BatchReq req;
} BatchSlot;

struct Batcher {
    LayerBackend be;  /* the layers: forward_rows (and logits_rows) */
    const ModelConfig *c;
    const HeadW *head;
    int n_slots, cap; /* slots; rows a pass takes */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active;       /* slots generating (they have handed in rows since they joined) */
    int running;      /* a step is being run */
    int n_pending;
    BatchReq **pending; /* [n_slots] handed in for the next step */
    BatchReq **order;   /* [n_slots] the step being run */
    BatchSlot *slots;
    float *x;         /* [cap][dim] a pass's rows */
    SeqRows *rows;    /* [n_slots] */
    Scratch sc;       /* the LM head's, cap rows */
    float *lx;        /* [cap][dim] the rows whose logits are wanted */
    float *lg;        /* [lg_rows][vocab] */
    size_t lg_rows;
    float *blg;       /* [cap][vocab] the backend's logits of a pass (logits_rows) */
    void (*wake)(void *), (*rest)(void *); /* batcher_on_idle's */
    void *idle_ctx;
    int awake;        /* woken (by the thread that runs a step) and not rested since */
    BatchStats st;
    /* Pipelined decode (the layers' max_in_flight > 1): n_groups groups of slots (0: one
     * step for all at a time, run by a slot's thread), up to max_in_flight groups' passes in
     * flight (fifo: oldest first), posted and taken by the driver thread. */
    int n_groups;
    BatchGroup *groups;
    int *fifo;
    int fifo_head, in_flight, next_group;
    pthread_t driver;
    int quit, driver_on;
};

static void *driver_main(void *arg);

Batcher *batcher_new(const LayerBackend *be, const ModelConfig *c, const HeadW *head,
                     int n_slots, int cap)
{
    CHECK(be->forward_rows && cap >= 1 && cap <= be->max_batch, "the layers take passes of "
          "%d rows (%d asked) or not several sequences", be->max_batch, cap);
    Batcher *b = xcalloc(1, sizeof *b);
    b->be = *be;
    b->c = c;
    b->head = head;
    b->n_slots = n_slots;
    b->cap = cap;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->pending = xcalloc((size_t)n_slots, sizeof *b->pending);
    b->order = xcalloc((size_t)n_slots, sizeof *b->order);
    b->slots = xcalloc((size_t)n_slots, sizeof *b->slots);
    for (int i = 0; i < n_slots; i++)
        b->slots[i] = (BatchSlot){.b = b, .slot = i, .want = -1};
    b->x = xcalloc((size_t)cap * (size_t)c->dim, sizeof(float));
    b->rows = xcalloc((size_t)n_slots, sizeof *b->rows);
    model_scratch_init_batch(&b->sc, c, 1, cap);
    b->lx = xcalloc((size_t)cap * (size_t)c->dim, sizeof(float));
    if (be->post_rows && be->take_rows && be->max_in_flight > 1 && n_slots > 1) {
        b->n_groups = be->max_in_flight < n_slots ? be->max_in_flight : n_slots;
        b->st.groups = b->n_groups;
        b->groups = xcalloc((size_t)b->n_groups, sizeof *b->groups);
        b->fifo = xcalloc((size_t)b->n_groups, sizeof *b->fifo);
        for (int g = 0; g < b->n_groups; g++) {
            BatchGroup *gr = &b->groups[g];
            gr->pending = xcalloc((size_t)n_slots, sizeof *gr->pending);
            gr->order = xcalloc((size_t)n_slots, sizeof *gr->order);
            gr->x = xcalloc((size_t)cap * (size_t)c->dim, sizeof(float));
            gr->rows = xcalloc((size_t)n_slots, sizeof *gr->rows);
        }
        b->driver_on = 1;
        pthread_create(&b->driver, NULL, driver_main, b);
    }
    return b;
}

void batcher_free(Batcher *b)
{
    if (!b)
        return;
    batcher_quiesce(b);
    for (int g = 0; g < b->n_groups; g++) {
        free(b->groups[g].pending);
        free(b->groups[g].order);
        free(b->groups[g].x);
        free(b->groups[g].rows);
    }
    free(b->groups);
    free(b->fifo);
    for (int i = 0; i < b->n_slots; i++)
        free(b->slots[i].lg);
    free(b->slots);
    free(b->pending);
    free(b->order);
    free(b->x);
    free(b->rows);
    model_scratch_free(&b->sc);
    free(b->lx);
    free(b->lg);
    free(b->blg);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b);
}

/* The rows of k requests into x [rows][dim] and their segments into rows; returns the
 * rows in all. */
static int pass_pack(Batcher *b, BatchReq **r, int k, float *x, SeqRows *rows)
{
    const size_t dim = (size_t)b->c->dim;
    int off = 0;
    for (int i = 0; i < k; i++) {
        memcpy(x + (size_t)off * dim, r[i]->x, (size_t)r[i]->n * dim * sizeof(float));
        rows[i] = (SeqRows){r[i]->slot, r[i]->pos, r[i]->n};
        off += r[i]->n;
    }
    return off;
}

/* After the layers ran a pass of k requests (total rows x): each request's rows back, the
 * LM head on the rows whose logits are wanted (theirs: the backend's logits of every row in
 * b->blg), handed to each slot, and the pass counted.  One thread at a time (the step's, or
 * the driver's). */
static void pass_unpack(Batcher *b, BatchReq **r, int k, int total, const float *x, int theirs)
{
    const size_t dim = (size_t)b->c->dim, V = (size_t)b->c->vocab_size;
    size_t nl = 0, off = 0;
    if ((size_t)total > b->lg_rows) { /* at most every row's */
        free(b->lg);
        b->lg = xmalloc((size_t)total * V * sizeof(float));
        b->lg_rows = (size_t)total;
    }
    for (int i = 0; i < k; i++) {
        const int n = r[i]->n, w = r[i]->want < 0 || r[i]->want > n ? n : r[i]->want;
        const size_t first = off + (size_t)(n - w); /* the pass's row of its first wanted */
        memcpy(r[i]->x, x + off * dim, (size_t)n * dim * sizeof(float));
        if (theirs)
            memcpy(b->lg + nl * V, b->blg + first * V, (size_t)w * V * sizeof(float));
        else
            memcpy(b->lx + nl * dim, x + first * dim, (size_t)w * dim * sizeof(float));
        nl += (size_t)w;
        off += (size_t)n;
    }
    for (size_t o = 0; !theirs && o < nl; o += (size_t)b->sc.max_batch) {
        const int n = nl - o < (size_t)b->sc.max_batch ? (int)(nl - o) : b->sc.max_batch;
        model_logits_rows_n(b->c, b->head, &b->sc, b->lx + o * dim, b->c->vocab_size,
                            b->lg + o * V, n);
    }
    nl = 0;
    for (int i = 0; i < k; i++) {
        BatchSlot *s = &b->slots[r[i]->slot];
        const int n = r[i]->n, w = r[i]->want < 0 || r[i]->want > n ? n : r[i]->want;
        if ((size_t)w * V > s->lg_cap) {
            free(s->lg);
            s->lg_cap = (size_t)w * V;
            s->lg = xmalloc(s->lg_cap * sizeof(float));
        }
        if (w)
            memcpy(s->lg, b->lg + nl * V, (size_t)w * V * sizeof(float));
        s->n_lg = w;
        nl += (size_t)w;
    }
    /* b->st is read under mu by batcher_stats; this thread holds the step (running) */
    pthread_mutex_lock(&b->mu);
    b->st.passes++;
    b->st.rows += (unsigned long)total;
    b->st.seq_rows += (unsigned long)k;
    if (k > 1)
        b->st.shared++;
    if (k > b->st.max_seqs)
        b->st.max_seqs = k;
    pthread_mutex_unlock(&b->mu);
}

/* One pass of k requests (total rows <= cap): their rows together through every layer,
 * then the LM head on the rows whose logits are wanted, handed to each slot. */
static void batcher_pass(Batcher *b, BatchReq **r, int k, int total)
{
    const size_t V = (size_t)b->c->vocab_size;
    pass_pack(b, r, k, b->x, b->rows);
    b->be.forward_rows(b->be.ctx, b->x, b->rows, k);
    if (!b->blg && b->be.logits_rows)
        b->blg = xmalloc((size_t)b->cap * V * sizeof(float));
    const int theirs = b->be.logits_rows && b->be.logits_rows(b->be.ctx, b->blg, total);
    pass_unpack(b, r, k, total, b->x, theirs);
}

/* A step: every request handed in, single rows first (a decode row never waits behind a
 * prompt chunk that does not fit beside it), in passes of up to cap rows. */
static void sort_by_rows(BatchReq **r, int k)
{
    for (int i = 1; i < k; i++) { /* stable: by rows */
        BatchReq *t = r[i];
        int j = i;
        for (; j > 0 && r[j - 1]->n > t->n; j--)
            r[j] = r[j - 1];
        r[j] = t;
    }
}

static void batcher_step(Batcher *b, BatchReq **r, int k)
{
    sort_by_rows(r, k);
    for (int i = 0; i < k;) {
        int total = 0, m = 0;
        while (i + m < k && total + r[i + m]->n <= b->cap)
            total += r[i + m++]->n;
        batcher_pass(b, r + i, m, total);
        i += m;
    }
}

/* Counts slot s among the generating ones (mu held); pipelined: into the group with the
 * fewest generating slots (of its copy's groups), so that the groups' passes are as even as
 * they can be. */
static void slot_join(Batcher *b, BatchSlot *s)
{
    if (s->joined)
        return;
    s->joined = 1;
    b->active++;
    if (!b->n_groups)
        return;
    /* --replicas: slot s runs on copy s % copies and joins one of its copy's groups (group
     * g is copy g % copies'), so that a group's pass goes to one copy's workers */
    const int k = b->be.copies > 1 ? b->be.copies : 1;
    int best = s->slot % k;
    for (int g = best + k; g < b->n_groups; g += k)
        if (b->groups[g].active < b->groups[best].active)
            best = g;
    s->group = best;
    b->groups[best].active++;
}

/* Hands in a slot's rows and returns once a step has run them (pipelined: once the driver
 * has taken its group's pass). */
static void batcher_submit(BatchSlot *s, float *x, int pos, int n, int want)
{
    Batcher *b = s->b;
    CHECK(n >= 1 && n <= b->cap, "slot %d: %d rows, a pass takes 1..%d", s->slot, n, b->cap);
    pthread_mutex_lock(&b->mu);
    slot_join(b, s);
    s->req = (BatchReq){s->slot, pos, n, x, want, 0};
    s->n_lg = 0;
    if (b->n_groups) {
        BatchGroup *g = &b->groups[s->group];
        g->pending[g->n_pending++] = &s->req;
        pthread_cond_broadcast(&b->cv);
    } else {
        b->pending[b->n_pending++] = &s->req;
    }
    while (!s->req.done) {
        if (!b->n_groups && !b->running && b->n_pending >= b->active) {
            /* every active slot has handed in its rows: this thread runs the step */
            const int k = b->n_pending;
            memcpy(b->order, b->pending, (size_t)k * sizeof *b->order);
            b->n_pending = 0;
            b->running = 1;
            const int wake = !b->awake;
            b->awake = 1;
            pthread_mutex_unlock(&b->mu);
            if (wake && b->wake)
                b->wake(b->idle_ctx);
            batcher_step(b, b->order, k);
            pthread_mutex_lock(&b->mu);
            for (int i = 0; i < k; i++)
                b->order[i]->done = 1;
            b->running = 0;
            pthread_cond_broadcast(&b->cv);
            continue;
        }
        pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
}

void batcher_join(Batcher *b, int slot)
{
    pthread_mutex_lock(&b->mu);
    slot_join(b, &b->slots[slot]);
    pthread_mutex_unlock(&b->mu);
}

void batcher_leave(Batcher *b, int slot)
{
    BatchSlot *s = &b->slots[slot];
    pthread_mutex_lock(&b->mu);
    if (s->joined) {
        s->joined = 0;
        b->active--;
        if (b->n_groups)
            b->groups[s->group].active--;
        pthread_cond_broadcast(&b->cv); /* the others may make a step without it now */
    }
    s->want = -1;
    /* the last one out lets the layers rest, as a step would run: alone (pipelined: the
     * driver does) */
    while (!b->n_groups && b->active == 0 && b->awake && b->running)
        pthread_cond_wait(&b->cv, &b->mu);
    if (!b->n_groups && b->active == 0 && b->awake) {
        b->running = 1;
        pthread_mutex_unlock(&b->mu);
        if (b->rest)
            b->rest(b->idle_ctx);
        pthread_mutex_lock(&b->mu);
        b->awake = 0;
        b->running = 0;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
}

/* ---- pipelined decode: the driver ---- */

/* The group whose pass goes next: one not in flight whose every generating slot has handed
 * in its rows, the first after the last one posted; -1: none. */
static int group_ready(const Batcher *b)
{
    for (int i = 0; i < b->n_groups; i++) {
        const int gi = (b->next_group + i) % b->n_groups;
        const BatchGroup *g = &b->groups[gi];
        if (!g->flying && g->active > 0 && g->n_pending >= g->active)
            return gi;
    }
    return -1;
}

/* Posts group gi's pass (mu held, released while the layers take it): its requests, single
 * rows first, as many as a pass takes (the rest wait for its next pass). */
static void driver_post(Batcher *b, int gi)
{
    BatchGroup *g = &b->groups[gi];
    const int k = g->n_pending;
    memcpy(g->order, g->pending, (size_t)k * sizeof *g->order);
    sort_by_rows(g->order, k);
    int total = 0, m = 0;
    while (m < k && total + g->order[m]->n <= b->cap)
        total += g->order[m++]->n;
    memmove(g->pending, g->order + m, (size_t)(k - m) * sizeof *g->pending);
    g->n_pending = k - m;
    g->k = m;
    g->total = total;
    g->flying = 1;
    b->fifo[(b->fifo_head + b->in_flight) % b->n_groups] = gi;
    b->in_flight++;
    if (b->in_flight > b->st.in_flight_max)
        b->st.in_flight_max = b->in_flight;
    b->next_group = (gi + 1) % b->n_groups;
    const int hint = b->groups[b->next_group].active; /* its decode rows */
    const int wake = !b->awake;
    b->awake = 1;
    pthread_mutex_unlock(&b->mu);
    if (wake && b->wake)
        b->wake(b->idle_ctx);
    pass_pack(b, g->order, m, g->x, g->rows);
    b->be.post_rows(b->be.ctx, g->x, g->rows, m, hint);
    pthread_mutex_lock(&b->mu);
}

/* Takes the oldest pass in flight (mu held, released while waiting): its rows back, the LM
 * head on the rows wanted, its requests done. */
static void driver_take(Batcher *b)
{
    BatchGroup *g = &b->groups[b->fifo[b->fifo_head]];
    pthread_mutex_unlock(&b->mu);
    b->be.take_rows(b->be.ctx);
    pass_unpack(b, g->order, g->k, g->total, g->x, 0);
    pthread_mutex_lock(&b->mu);
    b->fifo_head = (b->fifo_head + 1) % b->n_groups;
    b->in_flight--;
    g->flying = 0;
    for (int i = 0; i < g->k; i++)
        g->order[i]->done = 1;
    pthread_cond_broadcast(&b->cv);
}

/* The driver: posts every group that is ready while there is room in flight, else takes the
 * oldest pass, else lets the layers rest once no slot generates; ends at batcher_quiesce.
 * The only thread that drives the layers, so no step runs beside another. */
static void *driver_main(void *arg)
{
    Batcher *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        const int gi = b->in_flight < b->be.max_in_flight ? group_ready(b) : -1;
        if (gi >= 0) {
            driver_post(b, gi);
        } else if (b->in_flight > 0) {
            driver_take(b);
        } else if (b->awake && b->active == 0) {
            b->awake = 0;
            pthread_mutex_unlock(&b->mu);
            if (b->rest)
                b->rest(b->idle_ctx);
            pthread_mutex_lock(&b->mu);
        } else if (b->quit) {
            break;
        } else {
            pthread_cond_wait(&b->cv, &b->mu);
        }
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

void batcher_quiesce(Batcher *b)
{
    pthread_mutex_lock(&b->mu);
    b->quit = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (b->driver_on)
        pthread_join(b->driver, NULL);
    b->driver_on = 0;
}

void batcher_on_idle(Batcher *b, void (*wake)(void *), void (*rest)(void *), void *ctx)
{
    b->wake = wake;
    b->rest = rest;
    b->idle_ctx = ctx;
}

void batcher_stats(Batcher *b, BatchStats *st)
{
    pthread_mutex_lock(&b->mu);
    *st = b->st;
    pthread_mutex_unlock(&b->mu);
}

/* ---- a slot's backend ---- */

static void slot_forward(void *ctx, float *x, int pos, int token)
{
    (void)token;
    batcher_submit(ctx, x, pos, 1, 1);
}

static void slot_forward_n(void *ctx, float *x, int pos, int n, const int *tokens, int next_n)
{
    BatchSlot *s = ctx;
    (void)tokens;
    (void)next_n;
    const int want = s->want;
    s->want = -1;
    batcher_submit(s, x, pos, n, want);
}

static void slot_want_rows(void *ctx, int rows)
{
    BatchSlot *s = ctx;
    s->want = rows;
}

/* The logits the step computed (the LM head ran on the pass's rows together). */
static int slot_logits(void *ctx, float *logits)
{
    BatchSlot *s = ctx;
    if (s->n_lg < 1)
        return 0;
    const size_t V = (size_t)s->b->c->vocab_size;
    memcpy(logits, s->lg + (size_t)(s->n_lg - 1) * V, V * sizeof(float));
    return 1;
}

static int slot_logits_n(void *ctx, float *logits, int n)
{
    BatchSlot *s = ctx;
    if (s->n_lg != n)
        return 0;
    memcpy(logits, s->lg, (size_t)n * (size_t)s->b->c->vocab_size * sizeof(float));
    return 1;
}

LayerBackend batcher_backend(Batcher *b, int slot)
{
    return (LayerBackend){.ctx = &b->slots[slot],
                          .forward = slot_forward,
                          .forward_n = slot_forward_n,
                          .want_rows = slot_want_rows,
                          .logits = slot_logits,
                          .logits_n = slot_logits_n,
                          .max_batch = b->cap};
}
