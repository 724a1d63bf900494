/* loop.c: the token loop of both sides.  The controller sends the embedding into layer 0's
 * input and receives the last layer's output (or the split head's logits); a worker runs its
 * layers per token until a STOP or REPLAN passes through, then takes the controller's word.
 * Every message starts with a WireHdr, which carries commands down the pipeline and the
 * send time used by link emulation. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

WireHdr engine_read_hdr(const unsigned char *msg, int layer)
{
    WireHdr h;
    memcpy(&h, msg, sizeof h);
    CHECK(h.magic == WIRE_MAGIC, "layer %d: message with a bad magic 0x%08x (protocol "
          "mismatch between ranks?)", layer, h.magic);
    CHECK((h.cmd & 0xff) == WIRE_STEP || (h.cmd & 0xff) == WIRE_STOP ||
              (h.cmd & 0xff) == WIRE_REPLAN,
          "layer %d: unknown command %d", layer, h.cmd);
    return h;
}

/* Bytes of a broadcast of nb rows on the wire: the header and the rows as floats, halves
 * (--wire f16) or Q8_0 blocks (--wire q8). */
static size_t wire_bcast_bytes(const DistEngine *e, int nb)
{
    return sizeof(WireHdr) + engine_wire_len(e, (int64_t)nb * e->c->dim);
}

/* Rows a message of layer l's input carries: a pass's n, or, to the controller (l == L),
 * the `out` rows it reads; none for a command. */
static int msg_rows(const DistEngine *e, int l, const WireHdr *h)
{
    if ((h->cmd & 0xff) != WIRE_STEP || h->n < 1)
        return 0;
    return l == e->L && h->out >= 0 && h->out < h->n ? h->out : h->n;
}

size_t engine_wire_pack(const DistEngine *e, int l, const unsigned char *msg,
                        unsigned char *out, int nb)
{
    WireHdr h;
    memcpy(&h, msg, sizeof h);
    memcpy(out, &h, sizeof h);
    const int64_t vals = (int64_t)msg_rows(e, l, &h) * e->c->dim;
    engine_wire_put(e, (const float *)(const void *)(msg + sizeof h), out + sizeof h, vals);
    return wire_bcast_bytes(e, nb);
}

/* The rows of a packed message of layer l back to floats in msg's payload (header too). */
static void wire_unpack(const DistEngine *e, int l, const unsigned char *in, unsigned char *msg)
{
    WireHdr h;
    memcpy(&h, in, sizeof h);
    memcpy(msg, &h, sizeof h);
    const int64_t vals = (int64_t)msg_rows(e, l, &h) * e->c->dim;
    engine_wire_get(e, in + sizeof h, (float *)(void *)(msg + sizeof h), vals);
}

/* Broadcast of a pipeline message on layer l's input group (root sends, others receive and
 * wait out the emulated link), sized for nb rows.  With --wire f16 or q8 the rows travel
 * rounded, and the root rounds its own copy the same way, so every member holds the same
 * values. */
static void bcast_input_nb(DistEngine *e, int l, unsigned char *msg, int nb)
{
    LayerRt *r = &e->lr[l];
    TransportReq req;
    if (r->in_root) {
        WireHdr h;
        memcpy(&h, msg, sizeof h);
        transport_stamp(e->tp, &h);
        memcpy(msg, &h, sizeof h);
    }
    if (r->in_root && l == e->L) { /* to the controller: only the rows it reads */
        WireHdr h;
        memcpy(&h, msg, sizeof h);
        if ((h.cmd & 0xff) == WIRE_STEP && h.out >= 0 && h.out < h.n) {
            const size_t row = (size_t)e->c->dim * sizeof(float);
            memmove(payload(msg), (unsigned char *)payload(msg) + (size_t)(h.n - h.out) * row,
                    (size_t)h.out * row);
            nb = h.out;
        }
    }
    const size_t bytes = wire_bcast_bytes(e, nb);
    unsigned char *buf = msg;
    if (e->wire16) {
        buf = e->wbcast;
        if (r->in_root) {
            engine_wire_pack(e, l, msg, buf, nb);
            wire_unpack(e, l, buf, msg);
        }
    }
    transport_ibcast(e->tp, r->in_comm, buf, bytes, &req);
    if (r->in_root) {
        transport_wait(e->tp, &req);
        return;
    }
    transport_wait_link(e->tp, &req, r->in_peer, "layer input", l, &r->ewma[W_IN]);
    WireHdr h = engine_read_hdr(buf, l);
    const int rows = msg_rows(e, l, &h);
    CHECK((h.cmd & 0xff) != WIRE_STEP || (h.n >= 1 && rows <= nb),
          "layer %d: a pass of %d rows in a broadcast sized for %d (protocol mismatch)", l,
          rows, nb);
    transport_deliver(e->tp, &h, bytes);
    if (e->wire16)
        wire_unpack(e, l, buf, msg);
}

void engine_bcast_input(DistEngine *e, int l, unsigned char *msg)
{
    bcast_input_nb(e, l, msg, e->nb);
}

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
    transport_bcast_all(e->tp, &h, sizeof h);
    CHECK(h.magic == WIRE_MAGIC, "control message with a bad magic");
    return h;
}

void dist_worker_loop(DistEngine *e)
{
    for (;;) {
        int cmd = WIRE_STEP;
        const int svc = e->service_rank == e->tp->rank;
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

void engine_controller_control(DistEngine *e, int cmd, int pos)
{
    WireHdr h = {.magic = WIRE_MAGIC, .cmd = cmd, .pos = pos, .next_n = (int16_t)e->nb};
    engine_service_go(e, cmd);
    memcpy(e->xmsg, &h, sizeof h);
    engine_bcast_input(e, 0, e->xmsg);
    engine_bcast_input(e, e->L, e->xmsg);
    transport_bcast_all(e->tp, &h, sizeof h);
}

/* One pass over this rank's layers; returns the pipeline command seen. */
static int worker_token(DistEngine *e)
{
    int stop = WIRE_STEP;
    if (e->adaptive)
        for (int l = 0; l < e->L; l++)
            if (e->lr[l].is_ffn && e->eligible[l])
                e->spec[l] = e->spec_pending[l];
    for (int l = 0; l < e->L; l++) {
        if (!plan_rank_in_layer(e->plan, l, e->tp->rank))
            continue;
        stop = e->lr[l].mode == LAYER_SLICE ? engine_slice_layer(e, l)
                                            : engine_pipe_layer(e, l);
    }
    if (stop == WIRE_STEP) { /* every message of the pass carried the controller's header */
        WireHdr h;
        memcpy(&h, e->xmsg, sizeof h);
        take_next_rows(e, &h);
    }
    return stop;
}

/* Sends one pass of n rows (n <= e->nb) into layer 0; next_n sizes the pass after it; out
 * of its result rows (the last ones) come back. */
static void controller_post(DistEngine *e, const float *x, int pos, int n, int next_n, int out)
{
    WireHdr h = {.magic = WIRE_MAGIC, .cmd = WIRE_STEP, .pos = pos, .n = (int16_t)n,
                 .next_n = (int16_t)next_n, .out = (int16_t)out};
    engine_service_go(e, WIRE_STEP);
    memcpy(e->xmsg, &h, sizeof h);
    memcpy(payload(e->xmsg), x, (size_t)n * (size_t)e->c->dim * sizeof(float));
    engine_bcast_input(e, 0, e->xmsg);
    e->nb = next_n;
}

/* Receives the result of the pass of n rows at pos whose broadcasts were sized for nb: the
 * split head's logits into rows row0.. of e->logits, or the last `out` rows of the last
 * layer's output into y (rows n-out .. n-1 of the pass). */
static void controller_take(DistEngine *e, int pos, int n, int nb, int out, int row0, float *y)
{
    if (e->head_comm) {
        engine_head_recv(e, n, row0); /* the members send logits, not X' */
        return;
    }
    bcast_input_nb(e, e->L, e->xout, out < n ? out : nb);
    WireHdr h = engine_read_hdr(e->xout, e->L);
    CHECK((h.cmd & 0xff) == WIRE_STEP && h.n == n && h.pos == pos && h.out == out,
          "the pass of %d rows at position %d came back as %d rows at %d (protocol mismatch)",
          n, pos, h.n, h.pos);
    memcpy(y + (size_t)(n - out) * (size_t)e->c->dim, payload(e->xout),
           (size_t)out * (size_t)e->c->dim * sizeof(float));
}

int engine_chain_depth(const DistEngine *e)
{
    const Plan *p = e->plan;
    int runs = 0, prev = -1;
    for (int l = 0; l < p->n_layers; l++) {
        const LayerPlan *lp = &p->layers[l];
        const int r = lp->ffn_rank;
        if (lp->mode != LAYER_PIPE || lp->proj_rank != r)
            return 0;
        for (int k = 0; k < lp->n_parts; k++)
            if (lp->parts[k].rank != r)
                return 0;
        if (r == prev)
            continue;
        for (int m = 0; m < l; m++) /* a rank that comes back would wait on itself */
            if (p->layers[m].ffn_rank == r)
                return 0;
        runs++;
        prev = r;
    }
    if (p->head_split)
        return 0;
    const int d = runs - 1;
    return d < ENGINE_MAX_DEPTH ? d : ENGINE_MAX_DEPTH;
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

void dist_set_wire(DistEngine *e, int mode)
{
    CHECK(mode != 2 || e->c->dim % 32 == 0, "--wire q8: the model width %d is not a multiple "
          "of 32 (Q8_0 blocks)", e->c->dim);
    e->wire16 = mode;
}

/* n positions: passes of at most the agreed rows each (and of at most ubatch_rows).  A
 * pass that must carry more rows than the broadcasts are sized for first carries what fits
 * and announces the rest; the last announces the caller's hint (or its own size), so a
 * steady stream of equal passes (decoding, drafting K+1 rows) never pays for a change.
 * On a chain of stages (dist_set_ubatch) up to `depth` passes more are sent before the
 * oldest one's result is taken, so that the stages work on successive passes at once. */
static void controller_forward_n(void *ctx, float *x, int pos, int n, const int *tokens,
                                 int next_n)
{
    DistEngine *e = ctx;
    (void)tokens;
    CHECK(n >= 1 && n <= e->bmax, "a pass of %d positions: the engine was set up for 1..%d",
          n, e->bmax);
    const size_t dim = (size_t)e->c->dim;
    const int ub = ubatch_rows(e, n);
    const int depth = engine_pipeline_depth(e);
    /* the caller reads rows n-want .. n-1 only (dist_backend's want_rows) */
    const int want = e->want >= 0 && e->want < n ? e->want : n;
    e->want = -1;
    struct { int row0, m, nb, out; } fl[ENGINE_MAX_DEPTH + 1];
    int done = 0, head = 0, count = 0, passes = 0;
    while (done < n || count > 0) {
        if (done < n && count <= depth) {
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
            const int slot = (head + count) % (ENGINE_MAX_DEPTH + 1);
            fl[slot].row0 = done;
            fl[slot].m = m;
            fl[slot].nb = e->nb;
            int out = done + m - (n - want); /* rows of this pass in the wanted tail */
            fl[slot].out = out < 0 ? 0 : out > m ? m : out;
            controller_post(e, x + (size_t)done * dim, pos + done, m, nxt, fl[slot].out);
            count++;
            passes++;
            done += m;
            continue;
        }
        controller_take(e, pos + fl[head].row0, fl[head].m, fl[head].nb, fl[head].out,
                        fl[head].row0, x + (size_t)fl[head].row0 * dim);
        head = (head + 1) % (ENGINE_MAX_DEPTH + 1);
        count--;
    }
    e->wire_passes += passes;
    e->last_n = n;
}

static void controller_forward(void *ctx, float *x, int pos, int token)
{
    controller_forward_n(ctx, x, pos, 1, &token, 1);
}

static int controller_logits(void *ctx, float *logits)
{
    DistEngine *e = ctx;
    if (!e->head_comm)
        return 0;
    memcpy(logits, e->logits + (size_t)(e->last_n - 1) * (size_t)e->c->vocab_size,
           (size_t)e->c->vocab_size * sizeof(float));
    return 1;
}

static int controller_logits_n(void *ctx, float *logits, int n)
{
    DistEngine *e = ctx;
    if (!e->head_comm)
        return 0;
    CHECK(n == e->last_n, "logits of %d rows asked after a pass of %d", n, e->last_n);
    memcpy(logits, e->logits, (size_t)n * (size_t)e->c->vocab_size * sizeof(float));
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
                          .max_batch = e->bmax};
}

void dist_controller_stop(DistEngine *e) { engine_controller_control(e, WIRE_STOP, 0); }
