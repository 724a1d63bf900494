/* loop.c: the token loop of both sides.  The controller sends the embedding into layer 0's
 * input and receives the last layer's output (or the split head's logits); a worker runs its
 * steps of the token's program per pass (interp.c) until a STOP or REPLAN passes through,
 * then takes the controller's word.  The messages themselves (headers, wire forms, the input
 * broadcast, control commands) are pipemsg.c's. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>


/* After a pass (or a control command) with header h: the size of the next pass's
 * broadcasts, as the controller announced it. */
static void take_next_rows(DistEngine *e, const WireHdr *h)
{
    if (h->next_n < 1)
        return;
    CHECK(h->next_n <= e->bmax, "the controller announced passes of %d rows; this rank "
          "holds buffers for %d (--batch differs between ranks?)", h->next_n, e->bmax);
    e->nb = h->next_n;
}

static int worker_token(DistEngine *e);

/* Waits (sleeping, without a deadline: an idle worker may wait long) for the controller's
 * confirmation of a control command to every rank. */
static WireHdr wait_control(DistEngine *e)
{
    WireHdr h;
    engine_control_bcast(e, &h);
    CHECK(h.magic == WIRE_MAGIC, "control message with a bad magic");
    return h;
}

void dist_worker_loop(DistEngine *e)
{
    for (;;) {
        int cmd = WIRE_STEP;
        const int svc = e->svc.rank == e->tp->rank;
        /* The service rank answers requests until the controller says what comes next; an
         * inactive service rank lets passes go by. */
        const int next = svc ? engine_service_serve(e) : WIRE_STEP;
        if (!e->active) {
            if (svc && next == WIRE_STEP)
                continue;
            cmd = WIRE_STOP; /* nothing to run: wait for the controller's word */
        } else {
            cmd = worker_token(e);
            if (cmd == WIRE_STEP)
                continue;
        }
        WireHdr h = wait_control(e);
        take_next_rows(e, &h);
        if (h.cmd == WIRE_STOP)
            return;
        if (h.cmd == WIRE_REPLAN)
            engine_replan(e, h.pos);
    }
}

/* One pass over this rank's steps of the program (interp.c); returns the pipeline command
 * seen. */
static int worker_token(DistEngine *e)
{
    if (e->sp.adaptive)
        for (int l = 0; l < e->L; l++)
            if (e->lr[l].is_ffn && e->sp.eligible[l])
                e->sp.on[l] = e->sp.pending[l];
    WireHdr h;
    const int stop = engine_run_pass(e, &h);
    if (stop == WIRE_STEP) /* every message of the pass carried the controller's header */
        take_next_rows(e, &h);
    return stop;
}

/* Sends one pass of n rows (n <= e->nb) at pos, its segment table in e->sl.cur, into layer
 * 0 (the controller's steps of the way in); next_n sizes the pass after it; out of its
 * result rows (the last ones) come back. */
static void controller_post(DistEngine *e, const float *x, int pos, int n, int next_n, int out)
{
    WireHdr h = {.magic = WIRE_MAGIC, .cmd = WIRE_STEP, .pos = pos, .n = (int16_t)n,
                 .next_n = (int16_t)next_n, .out = (int16_t)out};
    engine_service_go(e, WIRE_STEP);
    memcpy(payload(e, e->buf.xmsg), x, (size_t)n * (size_t)e->c->dim * sizeof(float));
    engine_controller_in(e, &h);
    e->nb = next_n;
}

/* The segment table of the pass of rows [row0, row0 + m) of a call's segments into
 * e->sl.cur: the pieces of the segments it covers.  Returns its first row's position. */
static int pass_table(DistEngine *e, const SeqRows *segs, int n_segs, int row0, int m)
{
    int pos = -1, k = 0;
    for (int i = 0, r = 0; i < n_segs && m > 0; r += segs[i].n, i++) {
        if (r + segs[i].n <= row0)
            continue;
        const int skip = row0 - r, take = segs[i].n - skip < m ? segs[i].n - skip : m;
        if (pos < 0)
            pos = segs[i].pos + skip;
        e->sl.cur[k++] = (WireSeg){.slot = (int16_t)segs[i].slot, .n = (int16_t)take,
                                   .pos = segs[i].pos + skip};
        row0 += take;
        m -= take;
    }
    e->sl.n_cur = k;
    return pos;
}

/* Receives the result of the pass of n rows at pos whose broadcasts were sized for nb (the
 * controller's steps of the way out): the split head's logits into rows row0.. of
 * e->hd.logits, or the last `out` rows of the last layer's output into y (rows n-out .. n-1
 * of the pass). */
static void controller_take(DistEngine *e, int pos, int n, int nb, int out, int row0, float *y)
{
    const EnginePass p = {.pos = pos, .n = n, .nb = nb, .out = out, .row0 = row0, .y = y};
    engine_controller_out(e, &p);
}

int engine_pipeline_depth(const DistEngine *e)
{
    return e->ubatch == 0 ? 0 : e->chain;
}

/* Rows per pass of a forward_n of n rows: --ubatch N, or all of them (0), or auto: on a
 * chain, one pass per stage (but at least DIST_UBATCH_MIN rows each, so that a short call,
 * a draft's verification, stays one pass); elsewhere all of them. */
static int ubatch_rows(const DistEngine *e, int n)
{
    if (e->ubatch > 0)
        return e->ubatch;
    const int d = e->ubatch < 0 ? e->chain : 0;
    if (d == 0 || n < 2 * DIST_UBATCH_MIN)
        return n;
    const int r = (n + d) / (d + 1);
    return r > DIST_UBATCH_MIN ? r : DIST_UBATCH_MIN;
}

void dist_set_ubatch(DistEngine *e, int rows)
{
    CHECK(rows >= DIST_UBATCH_AUTO && rows <= WIRE_MAX_ROWS,
          "--ubatch %d: must be 0..%d or auto", rows, WIRE_MAX_ROWS);
    e->ubatch = rows;
    const int first = ubatch_rows(e, e->bmax);
    if (e->nb > first)
        e->nb = first; /* the first pass's broadcasts, as every rank sizes them */
}

void dist_set_wire(DistEngine *e, WireForm form)
{
    CHECK(form != WIRE_FORM_Q8 || e->c->dim % 32 == 0, "--wire q8: the model width %d is not "
          "a multiple of 32 (Q8_0 blocks)", e->c->dim);
    e->wire = form;
    e->prog.built = 0; /* the program's messages change form */
}

/* Takes the oldest pass in flight: its result into its call's x (the controller's steps of
 * the way out); a call whose last pass it is is ready for take_rows. */
static void flight_take(DistEngine *e)
{
    EngineFlight *f = &e->fl;
    CHECK(f->count > 0, "a pass taken with none in flight");
    const int i = f->head;
    controller_take(e, f->q[i].pos, f->q[i].m, f->q[i].nb, f->q[i].out, f->q[i].row0,
                    f->q[i].y);
    f->calls += f->q[i].last;
    f->head = (f->head + 1) % (ENGINE_MAX_DEPTH + 1);
    f->count--;
}

/* Sends the rows of a call, n of them in n_segs segments (one sequence's positions each, in
 * its slot's caches; forward_n: one segment of slot 0): passes of at most the agreed rows
 * each (and of at most ubatch_rows), a segment cut where a pass ends.  A pass that must
 * carry more rows than the broadcasts are sized for first carries what fits and announces
 * the rest; the last announces the caller's hint (or its own size), so a steady stream of
 * equal passes (decoding, drafting K+1 rows) never pays for a change.  On a chain of stages
 * (dist_set_ubatch) up to `depth` passes more are in flight before the oldest one's result
 * is taken, so that the stages work on successive passes at once.  The caller reads the
 * last `want` rows of x once the call's passes are taken. */
static void flight_post(DistEngine *e, float *x, const SeqRows *segs, int n_segs, int n,
                        int next_n, int want)
{
    EngineFlight *f = &e->fl;
    const size_t dim = (size_t)e->c->dim;
    const int ub = ubatch_rows(e, n);
    const int depth = engine_pipeline_depth(e);
    for (int done = 0; done < n;) {
        while (f->count > depth)
            flight_take(e);
        int m = n - done < e->nb ? n - done : e->nb;
        if (m > ub)
            m = ub;
        const int rest = n - done - m;
        int nxt = rest > 0 ? rest : next_n > 0 ? next_n : m;
        const int next_ub = rest > 0 ? ub : ubatch_rows(e, nxt); /* split the same way */
        if (nxt > next_ub)
            nxt = next_ub;
        if (nxt > e->bmax)
            nxt = e->bmax;
        const int i = (f->head + f->count) % (ENGINE_MAX_DEPTH + 1);
        const int out = done + m - (n - want); /* rows of this pass in the wanted tail */
        f->q[i].row0 = done;
        f->q[i].m = m;
        f->q[i].nb = e->nb;
        f->q[i].pos = pass_table(e, segs, n_segs, done, m);
        f->q[i].out = out < 0 ? 0 : out > m ? m : out;
        f->q[i].last = rest == 0;
        f->q[i].y = x + (size_t)done * dim;
        controller_post(e, f->q[i].y, f->q[i].pos, m, nxt, f->q[i].out);
        f->count++;
        f->max_count = f->count > f->max_count ? f->count : f->max_count;
        e->stats.wire_passes++;
        done += m;
    }
    e->last_n = n;
}

/* A call's passes, sent and taken (nothing else in flight). */
static void controller_run(DistEngine *e, float *x, const SeqRows *segs, int n_segs, int n,
                           int next_n, int want)
{
    CHECK(e->fl.count == 0 && e->fl.calls == 0, "a forward while %d passes posted are not "
          "taken", e->fl.count + e->fl.calls);
    flight_post(e, x, segs, n_segs, n, next_n, want);
    while (e->fl.count > 0)
        flight_take(e);
    e->fl.calls = 0;
}

/* n positions pos .. pos+n-1 of the sequence in slot 0. */
static void controller_forward_n(void *ctx, float *x, int pos, int n, const int *tokens,
                                 int next_n)
{
    DistEngine *e = ctx;
    (void)tokens;
    CHECK(n >= 1 && n <= e->bmax, "a pass of %d positions: the engine was set up for 1..%d",
          n, e->bmax);
    /* the caller reads rows n-want .. n-1 only (dist_backend's want_rows) */
    const int want = e->want >= 0 && e->want < n ? e->want : n;
    e->want = -1;
    const SeqRows seg = {0, pos, n};
    controller_run(e, x, &seg, 1, n, next_n, want);
}

/* The rows of several sequences, each in its slot's caches (every row comes back). */
static void controller_forward_rows(void *ctx, float *x, const SeqRows *rows, int n_rows)
{
    DistEngine *e = ctx;
    CHECK(n_rows >= 1 && n_rows <= e->sl.n, "a pass of %d sequences: the engine holds %d "
          "slots", n_rows, e->sl.n);
    int n = 0;
    for (int i = 0; i < n_rows; i++) {
        CHECK(rows[i].slot >= 0 && rows[i].slot < e->sl.n && rows[i].n >= 1 &&
                  rows[i].pos >= 0 && rows[i].pos + rows[i].n <= e->kv_cap,
              "%d rows at position %d of slot %d: the engine holds %d slots of %d positions",
              rows[i].n, rows[i].pos, rows[i].slot, e->sl.n, e->kv_cap);
        n += rows[i].n;
    }
    CHECK(n <= e->bmax, "a pass of %d rows: the engine was set up for 1..%d", n, e->bmax);
    e->want = -1;
    controller_run(e, x, rows, n_rows, n, 0, n);
}

/* The rows of several sequences sent as a call of their own, its result taken later
 * (take_rows, calls in posting order): passes of several calls in flight on a chain of stages
 * (the backend's max_in_flight).  Every row comes back; the LM head is the caller's. */
static void controller_post_rows(void *ctx, float *x, const SeqRows *rows, int n_rows,
                                 int next_n)
{
    DistEngine *e = ctx;
    CHECK(!e->hd.comm, "passes of several calls in flight with the LM head split");
    int n = 0;
    for (int i = 0; i < n_rows; i++)
        n += rows[i].n;
    CHECK(n_rows >= 1 && n_rows <= e->sl.n && n <= e->bmax, "a call of %d rows of %d "
          "sequences: the engine takes 1..%d rows of at most %d", n, n_rows, e->bmax, e->sl.n);
    flight_post(e, x, rows, n_rows, n, next_n, n);
}

static void controller_take_rows(void *ctx)
{
    DistEngine *e = ctx;
    while (e->fl.calls == 0)
        flight_take(e);
    e->fl.calls--;
}

int dist_max_in_flight(const DistEngine *e) { return e->fl.max_count; }

/* The slots are set up on every rank at load (dist_set_slots); a backend takes as many. */
static int controller_set_slots(void *ctx, int n_slots, char *err, size_t errlen)
{
    DistEngine *e = ctx;
    if (n_slots >= 1 && n_slots <= e->sl.n)
        return 0;
    return util_err(err, errlen, "%d sequence slots: every rank was set up for %d", n_slots,
                    e->sl.n);
}

static void controller_forward(void *ctx, float *x, int pos, int token)
{
    controller_forward_n(ctx, x, pos, 1, &token, 1);
}

static int controller_logits(void *ctx, float *logits)
{
    DistEngine *e = ctx;
    if (!e->hd.comm)
        return 0;
    memcpy(logits, e->hd.logits + (size_t)(e->last_n - 1) * (size_t)e->c->vocab_size,
           (size_t)e->c->vocab_size * sizeof(float));
    return 1;
}

static int controller_logits_n(void *ctx, float *logits, int n)
{
    DistEngine *e = ctx;
    if (!e->hd.comm)
        return 0;
    CHECK(n == e->last_n, "logits of %d rows asked after a pass of %d", n, e->last_n);
    memcpy(logits, e->hd.logits, (size_t)n * (size_t)e->c->vocab_size * sizeof(float));
    return 1;
}

static void controller_want_rows(void *ctx, int rows)
{
    DistEngine *e = ctx;
    e->want = rows;
}

LayerBackend dist_backend(DistEngine *e)
{
    e->want = -1;
    return (LayerBackend){.ctx = e, .forward = controller_forward, .want_rows = controller_want_rows,
                          .prepare = dist_controller_prepare, .logits = controller_logits,
                          .forward_n = controller_forward_n, .logits_n = controller_logits_n,
                          .set_slots = controller_set_slots,
                          .forward_rows = controller_forward_rows,
                          .logits_rows = controller_logits_n, .max_batch = e->bmax,
                          .post_rows = controller_post_rows, .take_rows = controller_take_rows,
                          .max_in_flight = e->hd.comm ? 1 : engine_pipeline_depth(e) + 1};
}

void dist_controller_stop(DistEngine *e) { engine_controller_control(e, WIRE_STOP, 0); }
