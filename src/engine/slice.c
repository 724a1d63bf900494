/* slice.c: the step handlers of a SLICE layer on one member: its attention parts with their
 * columns of the output projection (its partial sum), its FFN slice, and the exchanges of
 * partial sums as the program's steps say: all-to-all (an ALLGATHER of partials), reduce
 * and broadcast (REDUCE, then BCAST of the sum) or reduce-scatter / all-gather by chunks
 * (SCATTER, then ALLGATHER of the sum's chunks). */
#include "engine_internal.h"

#include "kernels.h"
#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* SLICE exchanges: this member's partial sum (xsend) and every other member's are added to
 * base (in place) in member order, element by element, whichever pattern the plan chose, so
 * every member ends with the same bits, and the same bits under every pattern.  With
 * --wire f16 or q8 (the step's form) the partials travel rounded, and so does the sum (the
 * second step of reduce and rsag; all-to-all rounds its sum in place the same way, chunks
 * of rsag being whole Q8_0 blocks), so the patterns still agree bit for bit.  The n rows of
 * a pass travel together, one vector of n * dim values (sums are element by element). */

/* An exchange step on this member: its layer, phase (0: the projection's partial sums, 1:
 * the FFN's), members and place among them, the vector's values and the wire form. */
typedef struct {
    int l, phase, n, mi, nv;
    const int *members;
    WireForm f;
    float *base;
    double t0;
} Xchg;

static Xchg xchg_of(DistEngine *e, const EngineWalk *w, const Step *st)
{
    return (Xchg){.l = st->layer, .phase = w->phase, .n = st->n_members,
                  .mi = engine_member(e, st), .nv = w->h.n * e->c->dim,
                  .members = steps_members(&e->prog.prog, st), .f = st->wire,
                  .base = payload(e, e->buf.xmsg), .t0 = time_now()};
}

/* The exchange's time: the projection's partial sums (T_GATHER) or the FFN's (T_BCAST). */
static void xchg_time(DistEngine *e, const Xchg *x)
{
    engine_timers(e, x->l)[x->phase ? T_BCAST : T_GATHER] += time_now() - x->t0;
}

static const char *what_partial(int phase)
{
    return phase ? "FFN partial sums" : "projection partial sums";
}

static const char *what_sum(int phase) { return phase ? "FFN sums" : "projection sums"; }

/* Stamps this member's message; in form f the message carries the rounded form and this
 * member's own partial is rounded the same way, so that every member adds identical
 * values. */
static WireHdr stamp_partial(DistEngine *e, const Xchg *x)
{
    WireHdr h = transport_msg_stamp(e->tp, e->buf.xsend, x->l);
    if (x->f != WIRE_FORM_F32) {
        memcpy(e->buf.wsend, e->buf.xsend, e->sl.hdr); /* the header and the segment table */
        engine_wire_round(x->f, payload(e, e->buf.xsend), e->buf.wsend + e->sl.hdr, x->nv);
    }
    return h;
}

/* Waits for a message (wb bytes) from peer in msg, lets the link deliver it, and leaves
 * its n values as floats in out. */
static void take(DistEngine *e, const Xchg *x, const char *what, TransportReq *rq, int peer,
                 const unsigned char *msg, size_t wb, float *out, int n)
{
    LayerRt *r = &e->lr[x->l];
    transport_msg_take(e->tp, rq, msg, wb, peer, what, x->l, &r->ewma[x->phase ? W_X2 : W_X1]);
    engine_read_hdr(msg, x->l);
    engine_wire_get(x->f, msg + e->sl.hdr, out, n);
}

/* ALLGATHER of partials (all-to-all): every member sends its partial to every other (one
 * hop) and adds them all. */
void engine_xchg_all(DistEngine *e, EngineWalk *w, const Step *st)
{
    const Xchg x = xchg_of(e, w, st);
    const int n = x.n, tag = WIRE_TAG_XCHG + 2 * x.l + x.phase;
    const size_t xs = e->sl.hdr + (size_t)x.nv * sizeof(float); /* stride of xrecv */
    TransportReq *rq = xmalloc(2 * (size_t)n * sizeof(TransportReq));
    int nr = 0;
    stamp_partial(e, &x);
    const size_t wb = e->sl.hdr + engine_wire_len(x.f, x.nv);
    const int packed = x.f != WIRE_FORM_F32;
    unsigned char *sbuf = packed ? e->buf.wsend : e->buf.xsend;
    unsigned char *rbuf = packed ? e->buf.wrecv : e->buf.xrecv;
    for (int i = 0; i < n; i++)
        if (i != x.mi)
            transport_irecv(e->tp, rbuf + (size_t)i * wb, wb, x.members[i], tag, &rq[nr++]);
    for (int i = 0; i < n; i++)
        if (i != x.mi)
            transport_isend(e->tp, sbuf, wb, x.members[i], tag, &rq[nr++]);
    for (int i = 0, k = 0; i < n; i++)
        if (i != x.mi)
            take(e, &x, what_partial(x.phase), &rq[k++], x.members[i], rbuf + (size_t)i * wb,
                 wb, payload(e, e->buf.xrecv + (size_t)i * xs), x.nv);
    for (int k = n - 1; k < nr; k++)
        transport_wait(e->tp, &rq[k]);
    for (int i = 0; i < n; i++)
        kernels_add(x.base, payload(e, i == x.mi ? e->buf.xsend : e->buf.xrecv + (size_t)i * xs),
                    x.nv);
    /* the sum rounded as the other patterns send it back */
    engine_wire_round(x.f, x.base, e->buf.wsend + e->sl.hdr, x.nv);
    free(rq);
    xchg_time(e, &x);
}

/* REDUCE: the members send their partials to the first member, which adds them (its own
 * first) in member order. */
void engine_xchg_reduce(DistEngine *e, EngineWalk *w, const Step *st)
{
    const Xchg x = xchg_of(e, w, st);
    const int n = x.n, tag = WIRE_TAG_XCHG + 2 * x.l + x.phase;
    const size_t xs = e->sl.hdr + (size_t)x.nv * sizeof(float); /* stride of xrecv */
    stamp_partial(e, &x);
    const size_t wb = e->sl.hdr + engine_wire_len(x.f, x.nv);
    const int packed = x.f != WIRE_FORM_F32;
    if (x.mi != 0) {
        TransportReq rq;
        transport_isend(e->tp, packed ? e->buf.wsend : e->buf.xsend, wb, x.members[0], tag, &rq);
        transport_wait(e->tp, &rq);
        xchg_time(e, &x);
        return;
    }
    unsigned char *rbuf = packed ? e->buf.wrecv : e->buf.xrecv;
    TransportReq *rq = xmalloc((size_t)n * sizeof(TransportReq));
    for (int i = 1; i < n; i++)
        transport_irecv(e->tp, rbuf + (size_t)i * wb, wb, x.members[i], tag, &rq[i - 1]);
    for (int i = 1; i < n; i++)
        take(e, &x, what_partial(x.phase), &rq[i - 1], x.members[i], rbuf + (size_t)i * wb, wb,
             payload(e, e->buf.xrecv + (size_t)i * xs), x.nv);
    kernels_add(x.base, payload(e, e->buf.xsend), x.nv);
    for (int i = 1; i < n; i++)
        kernels_add(x.base, payload(e, e->buf.xrecv + (size_t)i * xs), x.nv);
    free(rq);
    xchg_time(e, &x);
}

/* BCAST of the sum from the first member (after REDUCE): it goes back in xsend (the root's
 * partial is spent), rounded as the wire carries it, and the root keeps the rounded values
 * too; the others receive it into base. */
void engine_xchg_sum_bcast(DistEngine *e, EngineWalk *w, const Step *st)
{
    const Xchg x = xchg_of(e, w, st);
    const int n = x.n, tag2 = WIRE_TAG_XSUM + 2 * x.l + x.phase;
    const size_t hdr = e->sl.hdr, sb = hdr + engine_wire_len(x.f, x.nv);
    TransportReq *rq = xmalloc((size_t)n * sizeof(TransportReq));
    if (x.mi == 0) {
        transport_msg_stamp(e->tp, e->buf.xsend, x.l);
        engine_wire_put(x.f, x.base, e->buf.xsend + hdr, x.nv);
        if (x.f != WIRE_FORM_F32)
            engine_wire_get(x.f, e->buf.xsend + hdr, x.base, x.nv);
        for (int i = 1; i < n; i++)
            transport_isend(e->tp, e->buf.xsend, sb, x.members[i], tag2, &rq[i - 1]);
        for (int k = 0; k < n - 1; k++)
            transport_wait(e->tp, &rq[k]);
    } else {
        transport_irecv(e->tp, e->buf.xrecv, sb, x.members[0], tag2, &rq[0]);
        take(e, &x, what_sum(x.phase), &rq[0], x.members[0], e->buf.xrecv, sb, x.base, x.nv);
    }
    free(rq);
    xchg_time(e, &x);
}

/* Chunk i of an rsag exchange of nv values among n members: [C0(i), C0(i+1)), whole blocks
 * of the wire form (the last one to the end). */
static int chunk0(const Xchg *x, int i)
{
    if (i >= x->n)
        return x->nv;
    const int64_t blk = wire_form_block(x->f);
    return (int)((int64_t)i * x->nv / x->n / blk * blk);
}

/* Bytes of one chunk message's buffer (the widest chunk as floats). */
static size_t chunk_stride(const DistEngine *e, const Xchg *x)
{
    return e->sl.hdr +
           ((size_t)(x->nv + x->n - 1) / (size_t)x->n + (size_t)wire_form_block(x->f)) *
               sizeof(float);
}

/* SCATTER (reduce-scatter): member i owns the i-th of n chunks; every member sends each
 * owner its chunk of the partial, and each owner adds them in member order into its chunk of
 * base. */
void engine_xchg_scatter(DistEngine *e, EngineWalk *w, const Step *st)
{
    const Xchg x = xchg_of(e, w, st);
    const int n = x.n, mi = x.mi, tag = WIRE_TAG_XCHG + 2 * x.l + x.phase;
    const size_t hdr = e->sl.hdr, cb = chunk_stride(e, &x);
    const size_t cmax = (cb - hdr) / sizeof(float);
    TransportReq *rq = xmalloc(2 * (size_t)n * sizeof(TransportReq));
    unsigned char *sb = xmalloc((size_t)n * cb), *rb = xmalloc((size_t)n * cb);
    float *parts = xmalloc((size_t)n * cmax * sizeof(float)); /* [n][cmax] my chunk's */
    stamp_partial(e, &x);
    const unsigned char *mine =
        (x.f != WIRE_FORM_F32 ? e->buf.wsend : e->buf.xsend) + hdr;
    const int o0 = chunk0(&x, mi), o1 = chunk0(&x, mi + 1);
    const size_t mb = hdr + engine_wire_len(x.f, o1 - o0);
    int nr = 0;
    for (int i = 0; i < n; i++)
        if (i != mi)
            transport_irecv(e->tp, rb + (size_t)i * cb, mb, x.members[i], tag, &rq[nr++]);
    for (int j = 0; j < n; j++) {
        if (j == mi)
            continue;
        unsigned char *m = sb + (size_t)j * cb;
        const size_t len = engine_wire_len(x.f, chunk0(&x, j + 1) - chunk0(&x, j));
        memcpy(m, x.f != WIRE_FORM_F32 ? e->buf.wsend : e->buf.xsend, hdr);
        memcpy(m + hdr, mine + engine_wire_len(x.f, chunk0(&x, j)), len);
        transport_isend(e->tp, m, hdr + len, x.members[j], tag, &rq[nr++]);
    }
    for (int i = 0, k = 0; i < n; i++)
        if (i != mi)
            take(e, &x, what_partial(x.phase), &rq[k++], x.members[i], rb + (size_t)i * cb, mb,
                 parts + (size_t)i * cmax, o1 - o0);
    for (int k = n - 1; k < nr; k++)
        transport_wait(e->tp, &rq[k]);
    for (int i = 0; i < n; i++)
        kernels_add(x.base + o0, i == mi ? payload(e, e->buf.xsend) + o0 : parts + (size_t)i * cmax,
                    o1 - o0);
    free(parts);
    free(sb);
    free(rb);
    free(rq);
    xchg_time(e, &x);
}

/* ALLGATHER of the sum's chunks (after SCATTER): each owner sends its chunk of the sum to
 * every member (rounded as it travels; the owner keeps the rounded values too) and takes
 * theirs into base. */
void engine_xchg_sum_allgather(DistEngine *e, EngineWalk *w, const Step *st)
{
    const Xchg x = xchg_of(e, w, st);
    const int n = x.n, mi = x.mi, tag2 = WIRE_TAG_XSUM + 2 * x.l + x.phase;
    const size_t hdr = e->sl.hdr, cb = chunk_stride(e, &x);
    TransportReq *rq = xmalloc(2 * (size_t)n * sizeof(TransportReq));
    unsigned char *sb = xmalloc(cb), *rb = xmalloc((size_t)n * cb);
    const int o0 = chunk0(&x, mi), o1 = chunk0(&x, mi + 1);
    memcpy(sb, e->buf.xsend, hdr);
    transport_msg_stamp(e->tp, sb, x.l);
    engine_wire_put(x.f, x.base + o0, sb + hdr, o1 - o0);
    if (x.f != WIRE_FORM_F32)
        engine_wire_get(x.f, sb + hdr, x.base + o0, o1 - o0);
    int nr = 0;
    for (int i = 0; i < n; i++)
        if (i != mi)
            transport_irecv(e->tp, rb + (size_t)i * cb,
                            hdr + engine_wire_len(x.f, chunk0(&x, i + 1) - chunk0(&x, i)),
                            x.members[i], tag2, &rq[nr++]);
    for (int j = 0; j < n; j++)
        if (j != mi)
            transport_isend(e->tp, sb, hdr + engine_wire_len(x.f, o1 - o0), x.members[j], tag2,
                            &rq[nr++]);
    for (int i = 0, k = 0; i < n; i++) {
        if (i == mi)
            continue;
        const int cnt = chunk0(&x, i + 1) - chunk0(&x, i);
        take(e, &x, what_sum(x.phase), &rq[k++], x.members[i], rb + (size_t)i * cb,
             hdr + engine_wire_len(x.f, cnt), x.base + chunk0(&x, i), cnt);
    }
    for (int k = n - 1; k < nr; k++)
        transport_wait(e->tp, &rq[k]);
    free(sb);
    free(rb);
    free(rq);
    xchg_time(e, &x);
}

/* A layer of one member exchanges nothing (the program has no exchange steps): its sum is
 * its own partial, added and rounded as an exchange would (to the program's wire form). */
static void sum_alone(DistEngine *e, const EngineWalk *w, int l)
{
    if (e->sched.layers[l].n_members > 1)
        return;
    const int nv = w->h.n * e->c->dim;
    float *x = payload(e, e->buf.xmsg);
    kernels_add(x, payload(e, e->buf.xsend), nv);
    engine_wire_round(e->prog.wire, x, e->buf.wsend + e->sl.hdr, nv);
}

/* ATTN of a SLICE member: its attention parts on the layer input and their columns of wo,
 * summed into its partial (xsend's payload, [n][dim], the header the pass's); the first
 * member adds the projection bias.  A run of parts sharing one slice of wo (load_layer)
 * writes its heads side by side, row by row ([n][qd], the run's heads first in each row). */
void engine_slice_attn(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    const double t = time_now();
    const int n = w->h.n, qd = c->n_heads * c->head_dim;
    const size_t nd = (size_t)n * (size_t)c->dim;
    const float *x = payload(e, e->buf.xmsg);
    float *part = payload(e, e->buf.xsend);
    memset(part, 0, nd * sizeof(float));
    for (int k = 0, run = 0, off = 0; k < r->n_parts; k++) {
        if (r->wo_cols[k].data) {
            run = k;
            off = 0;
        }
        const double kv = engine_attn_part(e, l, k, x, &w->h, e->buf.heads + off, qd);
        const QMat *wo = &r->wo_cols[k];
        off += (r->parts[k].q1 - r->parts[k].q0) * c->head_dim;
        transport_streamed(e->tp, kv + (wo->data ? (double)model_qmat_bytes(wo) : 0));
        if (k + 1 == r->n_parts || r->wo_cols[k + 1].data) {
            model_proj_partial_n(c, &e->scratch, &r->wo_cols[run], e->buf.heads, qd, off,
                                 e->buf.acc, n);
            kernels_add(part, e->buf.acc, (int)nd);
        }
    }
    if (r->proj.bo)
        for (int i = 0; i < n; i++)
            kernels_add(part + (size_t)i * (size_t)c->dim, r->proj.bo, c->dim);
    engine_hdr_put(e, e->buf.xsend, &w->h);
    w->phase = 0;
    engine_timers(e, l)[T_ATTN] += time_now() - t;
    sum_alone(e, w, l);
}

/* FFN of a SLICE member: its slice's contribution on Z (the exchanged sum, in place in the
 * layer input) into its partial. */
void engine_slice_ffn(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    LayerRt *r = &e->lr[l];
    const double t = time_now();
    model_ffn_delta_n(e->c, &r->ffn, &e->scratch, payload(e, e->buf.xmsg), payload(e, e->buf.xsend),
                      w->h.n);
    transport_streamed(e->tp, (double)model_ffn_bytes(e->c, &r->ffn));
    w->phase = 1;
    engine_timers(e, l)[T_FFN] += time_now() - t;
    sum_alone(e, w, l);
}
