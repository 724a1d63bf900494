/* pipe.c: the step handlers of a PIPE layer: attention parts on the layer input (or,
 * speculating, on the previous layer's Z, and again on X' when the speculation was
 * rejected), the gather of head outputs at the projection rank, the projection, Z to the
 * FFN rank (or, speculating, to the next layer's ranks before the FFN), and the FFN with
 * the speculation decision in X''s header. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* Computes this rank's attention parts of layer l on the rows of input x of the pass (header
 * h) into gbuf's payload, [n][my_floats] (each row: the parts in plan order). */
static void attn_parts(DistEngine *e, int l, const float *x, const WireHdr *h)
{
    LayerRt *r = &e->lr[l];
    float *mine = payload(e, e->buf.gbuf);
    double t = time_now();
    for (int k = 0, off = 0; k < r->n_parts; k++) {
        transport_streamed(e->tp, engine_attn_part(e, l, k, x, h, mine + off, r->my_floats));
        off += (r->parts[k].q1 - r->parts[k].q0) * e->c->head_dim;
    }
    engine_timers(e, l)[T_ATTN] += time_now() - t;
}

/* ATTN on the layer input; REEXEC, the same on X' (K/V of the speculative round
 * overwritten). */
void engine_pipe_attn(DistEngine *e, EngineWalk *w, const Step *st)
{
    attn_parts(e, st->layer, payload(e, e->buf.xmsg), &w->h);
}

/* SPEC_ATTN: on Z of the previous layer; the root of the input (the previous FFN rank) has
 * Z as it computed it. */
void engine_pipe_spec_attn(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    unsigned char *zin = e->lr[l].in_root ? e->buf.zmsg : e->buf.zspec;
    const double t = time_now();
    attn_parts(e, l, payload(e, zin), &w->h);
    e->sp.attn_s[l] += time_now() - t;
}

/* GATHER of head outputs: posts this rank's contribution (the projection rank: the receive
 * of every member's) for the pass's rows. */
void engine_heads_post(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    LayerRt *r = &e->lr[l];
    const WireHdr *h = &w->h;
    engine_hdr_put(e, e->buf.gbuf, h);
    transport_msg_stamp(e->tp, e->buf.gbuf, l);
    const int hdr = (int)e->sl.hdr;
    int bytes = hdr + h->n * r->my_floats * (int)sizeof(float);
    const int64_t *v = steps_values(&e->prog.prog, st);
    for (int m = 0, off = 0; m < st->n_members; m++) { /* member m: [hdr | n rows of its floats] */
        e->buf.g_counts_n[m] = hdr + h->n * (int)v[m] * (int)sizeof(float);
        e->buf.g_displs_n[m] = off;
        off += e->buf.g_counts_n[m];
    }
    transport_igatherv(e->tp, r->g_comm, e->buf.gbuf, (size_t)bytes, e->buf.staging,
                       e->buf.g_counts_n, e->buf.g_displs_n, engine_walk_post(e, w, st));
}

/* The projection rank's head outputs of n rows in head order into e->buf.heads [n][qd]: from
 * the gathered messages, or from its own gbuf when it holds every head. */
static void assemble_heads(DistEngine *e, int l, int n, int gathered)
{
    const ScheduleLayer *sl = &e->sched.layers[l];
    const size_t hdr = e->sl.hdr, qd = (size_t)e->c->n_heads * (size_t)e->c->head_dim;
    for (int k = 0, m = 0; k < sl->n_gparts; k++) {
        while (m + 1 < sl->n_gather && sl->g_part_src[k] >= sl->g_displs[m + 1])
            m++;
        /* part k: byte g_part_src[k] of member m's one-row message (the schedule's, with a
         * bare WireHdr) */
        const size_t in_row =
            (size_t)sl->g_part_src[k] - (size_t)sl->g_displs[m] - sizeof(WireHdr);
        const unsigned char *base = gathered ? e->buf.staging + e->buf.g_displs_n[m] : e->buf.gbuf;
        for (int i = 0; i < n; i++)
            memcpy(e->buf.heads + (size_t)i * qd + sl->g_part_dst[k],
                   base + hdr + (size_t)i * (size_t)sl->g_floats[m] * sizeof(float) + in_row,
                   (size_t)sl->g_part_len[k] * sizeof(float));
    }
}

/* Completes the gather; the projection rank waits out the emulated links and assembles the
 * head outputs. */
void engine_heads_done(DistEngine *e, EngineWalk *w, const Step *st, TransportReq *req)
{
    const int l = st->layer;
    LayerRt *r = &e->lr[l];
    const int *m = steps_members(&e->prog.prog, st);
    const double t = time_now();
    if (m[0] != e->tp->rank) {
        transport_wait(e->tp, req);
    } else {
        transport_msg_gathered(e->tp, req, e->buf.staging, e->buf.g_counts_n,
                               e->buf.g_displs_n, st->n_members, m[st->n_members - 1],
                               "head outputs", l, &r->ewma[W_GATHER]);
        for (int i = 1; i < st->n_members; i++)
            engine_read_hdr(e->buf.staging + e->buf.g_displs_n[i], l);
    }
    engine_timers(e, l)[T_GATHER] += time_now() - t;
    if (m[0] == e->tp->rank)
        assemble_heads(e, l, w->h.n, 1);
}

/* PROJ: Z = X + wo (heads) (+ bo) into zmsg's payload. */
void engine_pipe_proj(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    if (!r->g_comm) /* every head on this rank: no gather */
        assemble_heads(e, l, w->h.n, 0);
    const double t = time_now();
    model_proj_forward_n(c, &r->proj, &e->scratch, payload(e, e->buf.xmsg), e->buf.heads,
                         payload(e, e->buf.zmsg), w->h.n);
    transport_streamed(e->tp, (double)model_proj_bytes(c, &r->proj));
    engine_timers(e, l)[T_PROJ] += time_now() - t;
}

/* SEND of Z from the projection rank to the FFN rank (members[0] to members[1]). */
void engine_z_run(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    LayerRt *r = &e->lr[l];
    const int *m = steps_members(&e->prog.prog, st);
    const double t = time_now();
    if (m[0] == e->tp->rank) {
        engine_hdr_put(e, e->buf.zmsg, &w->h);
        transport_msg_send(e->tp, e->buf.zmsg, rows_bytes(e, w->h.n), m[1], WIRE_TAG_Z + l, l);
    } else {
        TransportReq req;
        transport_irecv(e->tp, e->buf.zmsg, e->buf.msg_bytes, m[0], WIRE_TAG_Z + l, &req);
        transport_msg_wait(e->tp, &req, e->buf.zmsg, m[0], "Z", l, &r->ewma[W_Z]);
        WireHdr zh = engine_walk_took(e, w, l, e->buf.zmsg);
        CHECK(zh.cmd != WIRE_STEP || (zh.n >= 1 && zh.n <= e->bmax),
              "layer %d: Z of %d rows from rank %d (at most %d)", l, zh.n, m[0], e->bmax);
        transport_deliver(e->tp, &zh, rows_bytes(e, zh.cmd == WIRE_STEP ? zh.n : 0));
    }
    engine_timers(e, l)[T_ZSEND] += time_now() - t;
}

/* BCAST of the speculative Z into layer st->layer: the projection rank of the layer before
 * posts it before its FFN (rounded on the wire only: its FFN takes Z as it is); the next
 * layer's ranks receive it and start their attention on it. */
void engine_spec_z_run(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    LayerRt *next = &e->lr[l];
    if (next->in_root) {
        engine_hdr_put(e, e->buf.zmsg, &w->h);
        transport_msg_stamp(e->tp, e->buf.zmsg, l - 1);
        TransportReq *req = engine_walk_post(e, w, st);
        if (st->wire != WIRE_FORM_F32)
            transport_ibcast(e->tp, next->in_comm, e->buf.wzspec,
                             engine_wire_pack(e, st->wire, l, e->buf.zmsg, e->buf.wzspec, e->nb),
                             req);
        else
            transport_ibcast(e->tp, next->in_comm, e->buf.zmsg, bcast_bytes(e), req);
        return;
    }
    const double t = time_now();
    engine_bcast_form(e, l, e->buf.zspec, e->nb, st->wire);
    engine_timers(e, l)[T_BCAST] += time_now() - t;
    engine_walk_took(e, w, l, e->buf.zspec);
}

void engine_spec_z_done(DistEngine *e, EngineWalk *w, const Step *st, TransportReq *req)
{
    (void)w;
    (void)st;
    transport_wait(e->tp, req);
}

/* FFN: X' = Z + FFN(Z) into xmsg's payload; the decision on speculation into the next layer
 * (and the adaptive switch) goes into the pass's header, which X' carries. */
void engine_pipe_ffn(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    const int s_out = e->sp.on[l];
    const double t = time_now();
    float ratio = model_ffn_forward_n(c, &r->ffn, &e->scratch, payload(e, e->buf.zmsg),
                                      payload(e, e->buf.xmsg), w->h.n);
    transport_streamed(e->tp, (double)model_ffn_bytes(c, &r->ffn));
    if (s_out || e->sp.adaptive)
        w->h.flags |= (uint16_t)engine_spec_decide(e, l, ratio, s_out);
    if (s_out)
        e->sp.ffn_s[l] += time_now() - t;
    engine_hdr_put(e, e->buf.xmsg, &w->h);
    engine_timers(e, l)[T_FFN] += time_now() - t;
}
