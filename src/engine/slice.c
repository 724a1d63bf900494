/* slice.c: a SLICE layer on one member: its attention parts with their columns of the output
 * projection, an exchange of partial sums (all-to-all, reduce-and-broadcast or
 * reduce-scatter / all-gather, as the plan says), its FFN slice, and a second exchange. */
#include "engine_internal.h"

#include "kernels.h"
#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* SLICE exchanges: this member's partial sum (xsend) and every other member's are added to
 * base (in place) in member order, element by element, whichever pattern the plan chose
 * (plan->exchange: all-to-all, reduce to the first member then back, or reduce-scatter /
 * all-gather by chunks), so every member ends with the same bits, and the same bits under
 * every pattern.  With --wire f16 or q8 the partials travel rounded, and so does the sum
 * (the second hop of reduce and rsag; all-to-all rounds its sum in place the same way,
 * chunks of rsag being whole Q8_0 blocks), so the patterns still agree bit for bit. */

/* Stamps this member's message; with --wire f16 or q8 the message carries the rounded form
 * and this member's own partial is rounded the same way, so that every member adds identical
 * values. */
static WireHdr stamp_partial(DistEngine *e, int l, int nv)
{
    WireHdr h = transport_msg_stamp(e->tp, e->buf.xsend, l);
    if (e->wire16) {
        memcpy(e->buf.wsend, &h, sizeof h);
        engine_wire_round(e, payload(e->buf.xsend), e->buf.wsend + sizeof h, nv);
    }
    return h;
}

/* Waits for a partial (n floats, as the wire carries them) from peer in msg (wb bytes), lets
 * the link deliver it, and leaves it as floats in out. */
static void take_partial(DistEngine *e, int l, int phase, TransportReq *rq, int peer,
                         const unsigned char *msg, size_t wb, float *out, int n)
{
    LayerRt *r = &e->lr[l];
    transport_msg_take(e->tp, rq, msg, wb, peer,
                       phase ? "FFN partial sums" : "projection partial sums", l,
                       &r->ewma[phase ? W_X2 : W_X1]);
    engine_read_hdr(msg, l);
    engine_wire_get(e, msg + sizeof(WireHdr), out, n);
}

/* All-to-all: every member sends its partial to every other (one hop). */
static void exchange_all(DistEngine *e, int l, int phase, float *base, int nv)
{
    const ScheduleLayer *sl = &e->sched.layers[l];
    const int n = sl->n_members, me = e->tp->rank, tag = WIRE_TAG_XCHG + 2 * l + phase;
    const int *members = sl->members;
    const int dim = nv;
    const size_t xs = sizeof(WireHdr) + (size_t)nv * sizeof(float); /* stride of xrecv */
    TransportReq *rq = xmalloc(2 * (size_t)n * sizeof(TransportReq));
    int nr = 0;
    stamp_partial(e, l, nv);
    const size_t wb = sizeof(WireHdr) + engine_wire_len(e, nv);
    unsigned char *sbuf = e->wire16 ? e->buf.wsend : e->buf.xsend;
    unsigned char *rbuf = e->wire16 ? e->buf.wrecv : e->buf.xrecv;
    for (int i = 0; i < n; i++) {
        if (members[i] == me)
            continue;
        transport_irecv(e->tp, rbuf + (size_t)i * wb, wb, members[i], tag, &rq[nr++]);
    }
    for (int i = 0; i < n; i++) {
        if (members[i] == me)
            continue;
        transport_isend(e->tp, sbuf, wb, members[i], tag, &rq[nr++]);
    }
    for (int i = 0, k = 0; i < n; i++) {
        if (members[i] == me)
            continue;
        take_partial(e, l, phase, &rq[k++], members[i], rbuf + (size_t)i * wb, wb,
                     payload(e->buf.xrecv + (size_t)i * xs), dim);
    }
    for (int k = n - 1; k < nr; k++)
        transport_wait(e->tp, &rq[k]);
    for (int i = 0; i < n; i++) {
        const float *p = members[i] == me ? payload(e->buf.xsend)
                                             : payload(e->buf.xrecv + (size_t)i * xs);
        kernels_add(base, p, dim);
    }
    /* the sum rounded as the other patterns send it back */
    engine_wire_round(e, base, e->buf.wsend + sizeof(WireHdr), dim);
    free(rq);
}

/* Reduce, then broadcast: the members send their partials to the first member, which adds
 * them in member order and sends the sum back (as the wire carries it: f32, or rounded
 * to f16 or Q8_0 and kept rounded at the root) to every other member (two hops). */
static void exchange_reduce(DistEngine *e, int l, int phase, float *base, int nv)
{
    const ScheduleLayer *sl = &e->sched.layers[l];
    const int n = sl->n_members, me = e->tp->rank, root = sl->members[0];
    const int tag = WIRE_TAG_XCHG + 2 * l + phase, tag2 = WIRE_TAG_XSUM + 2 * l + phase;
    const int *members = sl->members;
    const int dim = nv;
    const size_t xs = sizeof(WireHdr) + (size_t)nv * sizeof(float); /* stride of xrecv */
    LayerRt *r = &e->lr[l];
    TransportReq *rq = xmalloc(2 * (size_t)n * sizeof(TransportReq));
    int nr = 0;
    WireHdr h = stamp_partial(e, l, nv);
    const size_t wb = sizeof(WireHdr) + engine_wire_len(e, nv);
    unsigned char *sbuf = e->wire16 ? e->buf.wsend : e->buf.xsend;
    unsigned char *rbuf = e->wire16 ? e->buf.wrecv : e->buf.xrecv;
    if (me == root) {
        for (int i = 1; i < n; i++)
            transport_irecv(e->tp, rbuf + (size_t)i * wb, wb, members[i], tag, &rq[nr++]);
        for (int i = 1; i < n; i++)
            take_partial(e, l, phase, &rq[i - 1], members[i], rbuf + (size_t)i * wb, wb,
                         payload(e->buf.xrecv + (size_t)i * xs), dim);
        kernels_add(base, payload(e->buf.xsend), dim);
        for (int i = 1; i < n; i++)
            kernels_add(base, payload(e->buf.xrecv + (size_t)i * xs), dim);
        /* the sum goes back in xsend (this member's partial is spent); with --wire f16 or
         * q8 rounded as it travels, and the root keeps the rounded values too */
        h = transport_msg_stamp(e->tp, e->buf.xsend, l);
        const size_t sb = sizeof h + engine_wire_put(e, base, e->buf.xsend + sizeof h, dim);
        if (e->wire16)
            engine_wire_get(e, e->buf.xsend + sizeof h, base, dim);
        nr = 0;
        for (int i = 1; i < n; i++)
            transport_isend(e->tp, e->buf.xsend, sb, members[i], tag2, &rq[nr++]);
        for (int k = 0; k < nr; k++)
            transport_wait(e->tp, &rq[k]);
    } else {
        const size_t sb = sizeof(WireHdr) + engine_wire_len(e, dim);
        transport_irecv(e->tp, e->buf.xrecv, sb, root, tag2, &rq[0]);
        transport_isend(e->tp, sbuf, wb, root, tag, &rq[1]);
        transport_msg_take(e->tp, &rq[0], e->buf.xrecv, sb, root,
                           phase ? "FFN sums" : "projection sums", l,
                           &r->ewma[phase ? W_X2 : W_X1]);
        engine_read_hdr(e->buf.xrecv, l);
        engine_wire_get(e, e->buf.xrecv + sizeof(WireHdr), base, dim);
        transport_wait(e->tp, &rq[1]);
    }
    free(rq);
}

/* Reduce-scatter, then all-gather: member i owns the i-th of n chunks of the vector; every
 * member sends each owner its chunk of the partial, each owner adds them in member order
 * and sends its chunk of the sum (as the wire carries it, kept rounded at the owner) to
 * every other member (two hops, 1/n the bytes per
 * message). */
static void exchange_rsag(DistEngine *e, int l, int phase, float *base, int nv)
{
    const ScheduleLayer *sl = &e->sched.layers[l];
    const int n = sl->n_members, me = e->tp->rank;
    const int tag = WIRE_TAG_XCHG + 2 * l + phase, tag2 = WIRE_TAG_XSUM + 2 * l + phase;
    const int *members = sl->members;
    const int dim = nv;
    const size_t hdr = sizeof(WireHdr);
    const int64_t blk = e->wire16 == 2 ? 32 : 1; /* chunks of whole Q8_0 blocks */
    const size_t cmax = (size_t)(dim + n - 1) / (size_t)n + (size_t)blk;
    const size_t cb = hdr + cmax * sizeof(float);
    int mi = 0;
    while (members[mi] != me)
        mi++;
#define C0(i) ((int)((int64_t)(i) * dim / n / blk * blk))
    TransportReq *rq = xmalloc(2 * (size_t)n * sizeof(TransportReq));
    unsigned char *sb = xmalloc((size_t)n * cb), *rb = xmalloc((size_t)n * cb);
    float *parts = xmalloc((size_t)n * cmax * sizeof(float)); /* [n][cmax] my chunk's */
    WireHdr h = stamp_partial(e, l, nv);
    const unsigned char *mine = e->wire16 ? e->buf.wsend + hdr : e->buf.xsend + hdr;
    const int o0 = C0(mi), o1 = C0(mi + 1);
    int nr = 0;
    for (int i = 0; i < n; i++)
        if (i != mi)
            transport_irecv(e->tp, rb + (size_t)i * cb, hdr + engine_wire_len(e, o1 - o0), members[i],
                            tag, &rq[nr++]);
    for (int j = 0; j < n; j++) {
        if (j == mi)
            continue;
        unsigned char *m = sb + (size_t)j * cb;
        const size_t len = engine_wire_len(e, C0(j + 1) - C0(j));
        memcpy(m, &h, hdr);
        memcpy(m + hdr, mine + engine_wire_len(e, C0(j)), len);
        transport_isend(e->tp, m, hdr + len, members[j], tag, &rq[nr++]);
    }
    for (int i = 0, k = 0; i < n; i++)
        if (i != mi)
            take_partial(e, l, phase, &rq[k++], members[i], rb + (size_t)i * cb,
                         hdr + engine_wire_len(e, o1 - o0), parts + (size_t)i * cmax, o1 - o0);
    for (int k = n - 1; k < nr; k++)
        transport_wait(e->tp, &rq[k]);
    for (int i = 0; i < n; i++)
        kernels_add(base + o0, i == mi ? payload(e->buf.xsend) + o0 : parts + (size_t)i * cmax,
                    o1 - o0);
    /* all-gather: my chunk of the sum to every member, theirs into base (with --wire f16 or
     * q8 rounded as it travels; the owner keeps the rounded values too) */
    memcpy(sb, &h, hdr);
    h = transport_msg_stamp(e->tp, sb, l);
    engine_wire_put(e, base + o0, sb + hdr, o1 - o0);
    if (e->wire16)
        engine_wire_get(e, sb + hdr, base + o0, o1 - o0);
    nr = 0;
    for (int i = 0; i < n; i++)
        if (i != mi)
            transport_irecv(e->tp, rb + (size_t)i * cb, hdr + engine_wire_len(e, C0(i + 1) - C0(i)),
                            members[i], tag2, &rq[nr++]);
    for (int j = 0; j < n; j++)
        if (j != mi)
            transport_isend(e->tp, sb, hdr + engine_wire_len(e, o1 - o0), members[j], tag2, &rq[nr++]);
    LayerRt *r = &e->lr[l];
    for (int i = 0, k = 0; i < n; i++) {
        if (i == mi)
            continue;
        const int cnt = C0(i + 1) - C0(i);
        transport_msg_take(e->tp, &rq[k++], rb + (size_t)i * cb, hdr + engine_wire_len(e, cnt),
                           members[i], phase ? "FFN sums" : "projection sums", l,
                           &r->ewma[phase ? W_X2 : W_X1]);
        engine_read_hdr(rb + (size_t)i * cb, l);
        engine_wire_get(e, rb + (size_t)i * cb + hdr, base + C0(i), cnt);
    }
    for (int k = n - 1; k < nr; k++)
        transport_wait(e->tp, &rq[k]);
#undef C0
    free(parts);
    free(sb);
    free(rb);
    free(rq);
}

/* The exchange of the n rows of a pass: one vector of n * dim values (sums are element by
 * element, so the rows travel together in one message per hop). */
static void exchange_partials(DistEngine *e, int l, int phase, float *base, int n)
{
    const int nv = n * e->c->dim;
    switch (e->plan->exchange) {
    case EXCHANGE_REDUCE: exchange_reduce(e, l, phase, base, nv); break;
    case EXCHANGE_RSAG: exchange_rsag(e, l, phase, base, nv); break;
    default: exchange_all(e, l, phase, base, nv); break;
    }
}

/* One SLICE layer on this member; returns 1 if the message was a stop. */
int engine_slice_layer(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    double *tm = e->stats.timers + (size_t)l * T_COUNT, t;
    if (r->in_comm && !r->in_root) {
        t = time_now();
        engine_bcast_input(e, l, e->buf.xmsg);
        tm[T_BCAST] += time_now() - t;
    }
    WireHdr h = engine_read_hdr(e->buf.xmsg, l);
    float *x = payload(e->buf.xmsg), *part = payload(e->buf.xsend);
    if (h.cmd != WIRE_STEP)
        goto forward;
    if (e->plan->exchange == EXCHANGE_EXACT) { /* slice_exact.c: all-gathers, no sums */
        engine_exact_compute(e, l, &h, x);
        goto forward;
    }
    t = time_now();
    const int n = h.n;
    const size_t nd = (size_t)n * (size_t)c->dim;
    const int qd = c->n_heads * c->head_dim;
    memset(part, 0, nd * sizeof(float));
    /* A run of parts sharing one slice of wo (load_layer) writes its heads side by
     * side, row by row ([n][qd], the run's heads first in each row). */
    for (int k = 0, run = 0, off = 0; k < r->n_parts; k++) {
        if (r->wo_cols[k].data) {
            run = k;
            off = 0;
        }
        model_attn_part_forward_n(c, &r->parts[k], &e->scratch, x, h.pos, n, e->buf.heads + off,
                                  qd);
        off += (r->parts[k].q1 - r->parts[k].q0) * c->head_dim;
        transport_streamed(e->tp, attn_stream_bytes(c, &r->parts[k], h.pos, n) +
                                      (r->wo_cols[k].data ? (double)model_qmat_bytes(&r->wo_cols[k])
                                                          : 0));
        if (k + 1 == r->n_parts || r->wo_cols[k + 1].data) {
            model_proj_partial_n(c, &e->scratch, &r->wo_cols[run], e->buf.heads, qd, off,
                                 e->buf.acc, n);
            kernels_add(part, e->buf.acc, (int)nd);
        }
    }
    if (r->proj.bo)
        for (int i = 0; i < n; i++)
            kernels_add(part + (size_t)i * (size_t)c->dim, r->proj.bo, c->dim);
    tm[T_ATTN] += time_now() - t;
    memcpy(e->buf.xsend, &h, sizeof h);
    t = time_now();
    exchange_partials(e, l, 0, x, n); /* x becomes Z */
    tm[T_GATHER] += time_now() - t;
    t = time_now();
    model_ffn_delta_n(c, &r->ffn, &e->scratch, x, part, n);
    transport_streamed(e->tp, (double)model_ffn_bytes(c, &r->ffn));
    tm[T_FFN] += time_now() - t;
    t = time_now();
    exchange_partials(e, l, 1, x, n); /* x becomes X' */
    tm[T_BCAST] += time_now() - t;
forward:
    memcpy(e->buf.xmsg, &h, sizeof h);
    if (l == e->L - 1 && e->hd.send && h.cmd == WIRE_STEP) { /* split LM head: logits go */
        t = time_now();
        engine_head_send(e, &h, x);
        tm[T_BCAST] += time_now() - t;
        return h.cmd;
    }
    if (l + 1 <= e->L && e->lr[l + 1].in_root && e->lr[l + 1].in_comm) {
        t = time_now();
        engine_bcast_input(e, l + 1, e->buf.xmsg);
        tm[T_BCAST] += time_now() - t;
    }
    return h.cmd;
}
