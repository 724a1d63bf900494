/* slice.c: a SLICE layer on one member: its attention parts with their columns of the output
 * projection, a direct exchange of partial sums, its FFN slice, and a second exchange. */
#include "engine_internal.h"

#include "kernels.h"
#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* SLICE: exchanges this rank's partial sum (xsend) with every member directly and adds all
 * partials in member order to base (in place), so every member gets identical bits. */
static void exchange_partials(DistEngine *e, int l, int phase, float *base)
{
    LayerRt *r = &e->lr[l];
    const ScheduleLayer *sl = &e->sched.layers[l];
    const int n = sl->n_members, me = e->tp->rank, tag = WIRE_TAG_XCHG + 2 * l + phase;
    const int *members = sl->members;
    const int dim = e->c->dim;
    TransportReq *rq = xmalloc(2 * (size_t)n * sizeof(TransportReq));
    int nr = 0;
    WireHdr h;
    memcpy(&h, e->xsend, sizeof h);
    transport_stamp(e->tp, &h);
    h.layer = l;
    memcpy(e->xsend, &h, sizeof h);
    /* f16: the message carries the halves; this member's own partial is rounded the same
     * way, so that every member adds identical values. */
    const size_t wb = e->wire16 ? e->wire_bytes : e->msg_bytes;
    unsigned char *sbuf = e->wire16 ? e->wsend : e->xsend;
    unsigned char *rbuf = e->wire16 ? e->wrecv : e->xrecv;
    if (e->wire16) {
        uint16_t *half = (uint16_t *)(void *)(e->wsend + sizeof h);
        memcpy(e->wsend, &h, sizeof h);
        kernels_f32_to_f16(half, payload(e->xsend), dim);
        kernels_f16_to_f32(payload(e->xsend), half, dim);
    }
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
        transport_wait_link(e->tp, &rq[k++], members[i], phase ? "FFN partial sums" :
                       "projection partial sums", l, &r->ewma[phase ? W_X2 : W_X1]);
        WireHdr hi = engine_read_hdr(rbuf + (size_t)i * wb, l);
        transport_deliver(e->tp, &hi, wb);
        if (e->wire16)
            kernels_f16_to_f32(payload(e->xrecv + (size_t)i * e->msg_bytes),
                               (const uint16_t *)(const void *)(rbuf + (size_t)i * wb +
                                                                sizeof hi), dim);
    }
    for (int k = n - 1; k < nr; k++)
        transport_wait(e->tp, &rq[k]);
    for (int i = 0; i < n; i++) {
        const float *p = members[i] == me ? payload(e->xsend)
                                             : payload(e->xrecv + (size_t)i * e->msg_bytes);
        kernels_add(base, p, dim);
    }
    free(rq);
}

/* One SLICE layer on this member; returns 1 if the message was a stop. */
int engine_slice_layer(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    double *tm = e->timers + (size_t)l * T_COUNT, t;
    if (r->in_comm && !r->in_root) {
        t = time_now();
        engine_bcast_input(e, l, e->xmsg);
        tm[T_BCAST] += time_now() - t;
    }
    WireHdr h = engine_read_hdr(e->xmsg, l);
    float *x = payload(e->xmsg), *part = payload(e->xsend);
    if (h.cmd != WIRE_STEP)
        goto forward;
    t = time_now();
    memset(part, 0, (size_t)c->dim * sizeof(float));
    /* A run of parts sharing one slice of wo (load_layer) writes its heads side by
     * side. */
    for (int k = 0, run = 0, off = 0; k < r->n_parts; k++) {
        if (r->wo_cols[k].data) {
            run = k;
            off = 0;
        }
        model_attn_part_forward(c, &r->parts[k], &e->scratch, x, h.pos, e->heads + off);
        off += (r->parts[k].q1 - r->parts[k].q0) * c->head_dim;
        if (k + 1 == r->n_parts || r->wo_cols[k + 1].data) {
            model_proj_partial(c, &e->scratch, &r->wo_cols[run], e->heads, off, e->acc);
            kernels_add(part, e->acc, c->dim);
        }
    }
    if (r->proj.bo)
        kernels_add(part, r->proj.bo, c->dim);
    tm[T_ATTN] += time_now() - t;
    memcpy(e->xsend, &h, sizeof h);
    t = time_now();
    exchange_partials(e, l, 0, x); /* x becomes Z */
    tm[T_GATHER] += time_now() - t;
    t = time_now();
    model_ffn_delta(c, &r->ffn, &e->scratch, x, part);
    tm[T_FFN] += time_now() - t;
    t = time_now();
    exchange_partials(e, l, 1, x); /* x becomes X' */
    tm[T_BCAST] += time_now() - t;
forward:
    memcpy(e->xmsg, &h, sizeof h);
    if (l == e->L - 1 && e->hsend && h.cmd == WIRE_STEP) { /* split LM head: logits go */
        t = time_now();
        engine_head_send(e, &h, x);
        tm[T_BCAST] += time_now() - t;
        return h.cmd & 0xff;
    }
    if (l + 1 <= e->L && e->lr[l + 1].in_root && e->lr[l + 1].in_comm) {
        t = time_now();
        engine_bcast_input(e, l + 1, e->xmsg);
        tm[T_BCAST] += time_now() - t;
    }
    return h.cmd & 0xff;
}
