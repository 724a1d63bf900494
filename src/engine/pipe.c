/* pipe.c: a PIPE layer on one rank: attention parts on the layer input (or, speculating, on
 * the previous layer's Z), the gather of head outputs at the projection rank, the projection,
 * Z to the FFN rank, the FFN, and the next layer's input. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* Computes this rank's attention parts of layer l on the n rows of input x into gbuf's
 * payload, [n][my_floats] (each row: the parts in plan order). */
static void attn_parts(DistEngine *e, int l, const float *x, int pos, int n)
{
    LayerRt *r = &e->lr[l];
    float *mine = payload(e->buf.gbuf);
    double t = time_now();
    for (int k = 0, off = 0; k < r->n_parts; k++) {
        model_attn_part_forward_n(e->c, &r->parts[k], &e->scratch, x, pos, n, mine + off,
                                  r->my_floats);
        off += (r->parts[k].q1 - r->parts[k].q0) * e->c->head_dim;
        transport_streamed(e->tp, attn_stream_bytes(e->c, &r->parts[k], pos, n));
    }
    e->stats.timers[(size_t)l * T_COUNT + T_ATTN] += time_now() - t;
}

/* Posts this rank's contribution to layer l's gather of head outputs. */
static void gather_post(DistEngine *e, int l, const WireHdr *h, TransportReq *req)
{
    LayerRt *r = &e->lr[l];
    memcpy(e->buf.gbuf, h, sizeof *h);
    transport_msg_stamp(e->tp, e->buf.gbuf, l);
    int bytes = (int)sizeof(WireHdr) + h->n * r->my_floats * (int)sizeof(float);
    const ScheduleLayer *sl = &e->sched.layers[l];
    for (int m = 0, off = 0; m < sl->n_gather; m++) { /* member m: [hdr | n rows of its floats] */
        e->buf.g_counts_n[m] = (int)sizeof(WireHdr) + h->n * sl->g_floats[m] * (int)sizeof(float);
        e->buf.g_displs_n[m] = off;
        off += e->buf.g_counts_n[m];
    }
    transport_igatherv(e->tp, r->g_comm, e->buf.gbuf, (size_t)bytes, e->buf.staging,
                       e->buf.g_counts_n, e->buf.g_displs_n, req);
}

/* Completes the gather of a pass of n rows; at the projection rank, waits out the emulated
 * links and assembles the head outputs of each row in head order into e->buf.heads [n][qd]. */
static void gather_finish(DistEngine *e, int l, TransportReq *req, int n)
{
    LayerRt *r = &e->lr[l];
    const ScheduleLayer *sl = &e->sched.layers[l];
    const size_t hdr = sizeof(WireHdr), qd = (size_t)e->c->n_heads * (size_t)e->c->head_dim;
    double t = time_now();
    int gathered = 0;
    if (r->g_comm) {
        if (!r->is_proj) {
            transport_wait(e->tp, req);
        } else {
            transport_msg_gathered(e->tp, req, e->buf.staging, e->buf.g_counts_n,
                                   e->buf.g_displs_n, sl->n_gather, sl->gather[sl->n_gather - 1],
                                   "head outputs", l, &r->ewma[W_GATHER]);
            for (int m = 1; m < sl->n_gather; m++)
                engine_read_hdr(e->buf.staging + e->buf.g_displs_n[m], l);
        }
        gathered = 1;
    }
    e->stats.timers[(size_t)l * T_COUNT + T_GATHER] += time_now() - t;
    if (!r->is_proj)
        return;
    for (int k = 0, m = 0; k < sl->n_gparts; k++) {
        while (m + 1 < sl->n_gather && sl->g_part_src[k] >= sl->g_displs[m + 1])
            m++;
        /* part k: byte g_part_src[k] of member m's one-row message */
        const size_t in_row = (size_t)sl->g_part_src[k] - (size_t)sl->g_displs[m] - hdr;
        const unsigned char *base = gathered ? e->buf.staging + e->buf.g_displs_n[m] : e->buf.gbuf;
        for (int i = 0; i < n; i++)
            memcpy(e->buf.heads + (size_t)i * qd + sl->g_part_dst[k],
                   base + hdr + (size_t)i * (size_t)sl->g_floats[m] * sizeof(float) + in_row,
                   (size_t)sl->g_part_len[k] * sizeof(float));
    }
}

/* Attention and gather of a consumer of layer l.  Without speculation: one round on X.  With
 * speculation into l: a round on Z of layer l-1 (sent before that layer's FFN ran), then X'
 * with the decision; a second round on X' only when the speculation was rejected. */
static WireHdr pipe_attention(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    double *tm = e->stats.timers + (size_t)l * T_COUNT, t;
    const int recv = r->in_comm && !r->in_root;
    const int s_in = l > 0 && e->sp.on[l - 1];
    TransportReq g1 = {0}, g2 = {0};
    WireHdr h;
    if (!s_in) {
        if (recv) {
            t = time_now();
            engine_bcast_input(e, l, e->buf.xmsg);
            tm[T_BCAST] += time_now() - t;
        }
        h = engine_read_hdr(e->buf.xmsg, l);
        if (!r->in_root && l > 0 && (h.flags & WIRE_FLAG_SPEC_ON))
            e->sp.on[l - 1] = (h.flags & WIRE_FLAG_SPEC_NEXT) != 0; /* adaptive switch */
        h.flags = 0;
        if (h.cmd != WIRE_STEP)
            return h;
        attn_parts(e, l, payload(e->buf.xmsg), h.pos, h.n);
        if (r->g_comm)
            gather_post(e, l, &h, &g1);
        gather_finish(e, l, &g1, h.n);
        return h;
    }
    /* Speculation into layer l. The root of the input (the previous FFN rank) already knows
     * the decision; everyone else learns it from X''s header. */
    unsigned char *zin = r->in_root ? e->buf.zmsg : e->buf.zspec;
    int known_reject = 0;
    if (r->in_root) {
        WireHdr xh = engine_read_hdr(e->buf.xmsg, l);
        known_reject = !(xh.flags & WIRE_FLAG_ACCEPT);
    } else {
        t = time_now();
        engine_bcast_input(e, l, e->buf.zspec);
        tm[T_BCAST] += time_now() - t;
    }
    h = engine_read_hdr(zin, l);
    h.flags = 0;
    if (h.cmd != WIRE_STEP) {
        if (recv)
            engine_bcast_input(e, l, e->buf.xmsg);
        h = engine_read_hdr(e->buf.xmsg, l);
        h.flags = 0;
        return h;
    }
    double ts = time_now();
    if (!known_reject)
        attn_parts(e, l, payload(zin), h.pos, h.n);
    e->sp.attn_s[l] += time_now() - ts;
    if (r->g_comm)
        gather_post(e, l, &h, &g1);
    if (recv) {
        /* Post the receive of X' before completing the gather, so that neither side waits
         * for the other to finish first. */
        t = time_now();
        engine_bcast_input(e, l, e->buf.xmsg);
        tm[T_BCAST] += time_now() - t;
    }
    WireHdr xh = engine_read_hdr(e->buf.xmsg, l);
    const int accept = (xh.flags & WIRE_FLAG_ACCEPT) != 0;
    if (!r->in_root && (xh.flags & WIRE_FLAG_SPEC_ON))
        e->sp.on[l - 1] = (xh.flags & WIRE_FLAG_SPEC_NEXT) != 0; /* adaptive switch */
    gather_finish(e, l, &g1, h.n);
    if (!accept) {
        attn_parts(e, l, payload(e->buf.xmsg), xh.pos, xh.n); /* re-executed: K/V overwritten */
        if (r->g_comm)
            gather_post(e, l, &xh, &g2);
        gather_finish(e, l, &g2, xh.n);
    }
    xh.flags = 0;
    return xh;
}

/* The projection rank's Z of the pass h: broadcast now to the next layer's ranks when the
 * transition speculates (zreq completes after the FFN), else sent to the FFN rank unless it
 * is this one. */
static void pipe_send_z(DistEngine *e, int l, const WireHdr *h, int s_out, TransportReq *zreq,
                        double *tm)
{
    LayerRt *r = &e->lr[l];
    if (s_out) {
        /* Z goes to the next layer's ranks now; they start its attention while our
         * FFN runs (proj and FFN share this rank where speculation is allowed). */
        LayerRt *next = &e->lr[l + 1];
        memcpy(e->buf.zmsg, h, sizeof *h);
        transport_msg_stamp(e->tp, e->buf.zmsg, l);
        if (e->wire16) /* rounded on the wire only: our FFN takes Z as it is */
            transport_ibcast(e->tp, next->in_comm, e->buf.wzspec,
                             engine_wire_pack(e, l + 1, e->buf.zmsg, e->buf.wzspec, e->nb), zreq);
        else
            transport_ibcast(e->tp, next->in_comm, e->buf.zmsg, bcast_bytes(e), zreq);
    } else if (!r->is_ffn) {
        const double t = time_now();
        memcpy(e->buf.zmsg, h, sizeof *h);
        transport_msg_send(e->tp, e->buf.zmsg, rows_bytes(e, h->n), r->ffn_rank, WIRE_TAG_Z + l,
                           l);
        tm[T_ZSEND] += time_now() - t;
    }
}

/* The FFN rank's receive of Z from the projection rank (another rank). */
static void pipe_recv_z(DistEngine *e, int l, double *tm)
{
    LayerRt *r = &e->lr[l];
    const double t = time_now();
    TransportReq req;
    transport_irecv(e->tp, e->buf.zmsg, e->buf.msg_bytes, r->proj_rank, WIRE_TAG_Z + l, &req);
    transport_msg_wait(e->tp, &req, e->buf.zmsg, r->proj_rank, "Z", l, &r->ewma[W_Z]);
    WireHdr zh = engine_read_hdr(e->buf.zmsg, l);
    CHECK(zh.cmd != WIRE_STEP || (zh.n >= 1 && zh.n <= e->bmax),
          "layer %d: Z of %d rows from rank %d (at most %d)", l, zh.n, r->proj_rank, e->bmax);
    transport_deliver(e->tp, &zh, rows_bytes(e, zh.cmd == WIRE_STEP ? zh.n : 0));
    tm[T_ZSEND] += time_now() - t;
}

/* One PIPE layer on this rank; returns 1 if the message was a stop. */
int engine_pipe_layer(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    double *tm = e->stats.timers + (size_t)l * T_COUNT, t;
    WireHdr h = {.cmd = WIRE_STEP};
    const int s_out = e->sp.on[l];
    TransportReq zreq = {0};
    if (r->consumer) {
        h = pipe_attention(e, l);
        const int stop = h.cmd != WIRE_STEP;
        if (r->is_proj) {
            t = time_now();
            if (!stop)
            {
                model_proj_forward_n(c, &r->proj, &e->scratch, payload(e->buf.xmsg), e->buf.heads,
                                     payload(e->buf.zmsg), h.n);
                transport_streamed(e->tp, (double)model_proj_bytes(c, &r->proj));
            }
            memcpy(e->buf.zmsg, &h, sizeof h);
            tm[T_PROJ] += time_now() - t;
            pipe_send_z(e, l, &h, s_out, &zreq, tm);
        }
    }
    if (r->is_ffn) {
        if (!r->is_proj)
            pipe_recv_z(e, l, tm);
        h = engine_read_hdr(e->buf.zmsg, l);
        h.flags = 0;
        t = time_now();
        if (h.cmd == WIRE_STEP) {
            float ratio = model_ffn_forward_n(c, &r->ffn, &e->scratch, payload(e->buf.zmsg),
                                              payload(e->buf.xmsg), h.n);
            transport_streamed(e->tp, (double)model_ffn_bytes(c, &r->ffn));
            if (s_out || e->sp.adaptive)
                h.flags |= (uint16_t)engine_spec_decide(e, l, ratio, s_out);
            if (s_out)
                e->sp.ffn_s[l] += time_now() - t;
        }
        memcpy(e->buf.xmsg, &h, sizeof h);
        tm[T_FFN] += time_now() - t;
        if (zreq.active)
            transport_wait(e->tp, &zreq);
        LayerRt *next = &e->lr[l + 1];
        if (next->in_comm) {
            t = time_now();
            engine_bcast_input(e, l + 1, e->buf.xmsg);
            tm[T_BCAST] += time_now() - t;
        }
    }
    return h.cmd;
}
