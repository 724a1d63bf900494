/* pipemsg.c: the engine's pipeline messages: a received header checked, the wire form of a
 * layer input packed and unpacked, the broadcast of a layer input on its group (stamped by
 * the root, waited out on the emulated link by the others) as the controller's passes and
 * the program's input steps send it, and a control command sent down the pipeline.  Every
 * message starts with a WireHdr, which carries commands and the send time used by link
 * emulation. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <string.h>

WireHdr engine_read_hdr(const unsigned char *msg, int layer)
{
    WireHdr h;
    memcpy(&h, msg, sizeof h);
    CHECK(h.magic == WIRE_MAGIC, "layer %d: message with a bad magic 0x%08x (protocol "
          "mismatch between ranks?)", layer, h.magic);
    CHECK(h.cmd == WIRE_STEP || h.cmd == WIRE_STOP || h.cmd == WIRE_REPLAN,
          "layer %d: unknown command %d", layer, h.cmd);
    CHECK((h.flags & ~WIRE_FLAGS_ALL) == 0, "layer %d: unknown flags 0x%x", layer, h.flags);
    return h;
}

WireHdr engine_walk_took(DistEngine *e, EngineWalk *w, int l, const unsigned char *msg)
{
    WireHdr h = engine_read_hdr(msg, l);
    engine_table_take(e, msg, &h, l);
    w->h = h;
    w->h.flags = 0;
    w->stop = h.cmd != WIRE_STEP;
    w->known = l;
    return h;
}

/* Bytes of a broadcast of nb rows on the wire: the header and the rows in form f. */
static size_t wire_bcast_bytes(const DistEngine *e, WireForm f, int nb)
{
    return e->sl.hdr + engine_wire_len(f, (int64_t)nb * e->c->dim);
}

/* Rows a message of layer l's input carries: a pass's n, or, to the controller (l == L),
 * the `out` rows it reads; none for a command. */
static int msg_rows(const DistEngine *e, int l, const WireHdr *h)
{
    if (h->cmd != WIRE_STEP || h->n < 1)
        return 0;
    return l == e->L && h->out >= 0 && h->out < h->n ? h->out : h->n;
}

size_t engine_wire_pack(const DistEngine *e, WireForm f, int l, const unsigned char *msg,
                        unsigned char *out, int nb)
{
    WireHdr h;
    memcpy(&h, msg, sizeof h);
    memcpy(out, msg, e->sl.hdr); /* the header and the segment table */
    const int64_t vals = (int64_t)msg_rows(e, l, &h) * e->c->dim;
    engine_wire_put(f, (const float *)(const void *)(msg + e->sl.hdr), out + e->sl.hdr, vals);
    return wire_bcast_bytes(e, f, nb);
}

/* The rows of a packed message of layer l back to floats in msg's payload (header too). */
static void wire_unpack(const DistEngine *e, WireForm f, int l, const unsigned char *in,
                        unsigned char *msg)
{
    WireHdr h;
    memcpy(&h, in, sizeof h);
    memcpy(msg, in, e->sl.hdr);
    const int64_t vals = (int64_t)msg_rows(e, l, &h) * e->c->dim;
    engine_wire_get(f, in + e->sl.hdr, (float *)(void *)(msg + e->sl.hdr), vals);
}

/* Posts the broadcast of a pipeline message on layer l's input group, sized for *nb rows:
 * the root stamps msg (to the controller: only the rows it reads, *nb shrinks to them) and
 * sends; a member posts the receive.  In form f (f16, q8) the rows travel rounded, and the
 * root rounds its own copy the same way, so every member holds the same values. */
static void bcast_post(DistEngine *e, int l, unsigned char *msg, int *nb, WireForm f,
                       TransportReq *req)
{
    LayerRt *r = &e->lr[l];
    if (r->in_root)
        transport_msg_stamp(e->tp, msg, -1);
    if (r->in_root && l == e->L) { /* to the controller: only the rows it reads */
        WireHdr h;
        memcpy(&h, msg, sizeof h);
        if (h.cmd == WIRE_STEP && h.out >= 0 && h.out < h.n) {
            const size_t row = (size_t)e->c->dim * sizeof(float);
            unsigned char *rows = (unsigned char *)payload(e, msg);
            memmove(rows, rows + (size_t)(h.n - h.out) * row, (size_t)h.out * row);
            *nb = h.out;
        }
    }
    unsigned char *buf = msg;
    if (f != WIRE_FORM_F32) {
        buf = e->buf.wbcast;
        if (r->in_root) {
            engine_wire_pack(e, f, l, msg, buf, *nb);
            wire_unpack(e, f, l, buf, msg);
        }
    }
    transport_ibcast(e->tp, r->in_comm, buf, wire_bcast_bytes(e, f, *nb), req);
}

/* Completes it: the root's send; a member's receive, waited out on the link and unpacked. */
static void bcast_done(DistEngine *e, int l, unsigned char *msg, int nb, WireForm f,
                       TransportReq *req)
{
    LayerRt *r = &e->lr[l];
    if (r->in_root) {
        transport_wait(e->tp, req);
        return;
    }
    unsigned char *buf = f != WIRE_FORM_F32 ? e->buf.wbcast : msg;
    const size_t bytes = wire_bcast_bytes(e, f, nb);
    transport_msg_wait(e->tp, req, buf, r->in_peer, "layer input", l, &r->ewma[W_IN]);
    WireHdr h = engine_read_hdr(buf, l);
    const int rows = msg_rows(e, l, &h);
    CHECK(h.cmd != WIRE_STEP || (h.n >= 1 && rows <= nb),
          "layer %d: a pass of %d rows in a broadcast sized for %d (protocol mismatch)", l,
          rows, nb);
    transport_deliver(e->tp, &h, bytes);
    if (f != WIRE_FORM_F32)
        wire_unpack(e, f, l, buf, msg);
}

void engine_bcast_form(DistEngine *e, int l, unsigned char *msg, int nb, WireForm f)
{
    TransportReq req;
    bcast_post(e, l, msg, &nb, f, &req);
    bcast_done(e, l, msg, nb, f, &req);
}

void engine_bcast_input_nb(DistEngine *e, int l, unsigned char *msg, int nb)
{
    engine_bcast_form(e, l, msg, nb, e->wire);
}

void engine_bcast_input(DistEngine *e, int l, unsigned char *msg)
{
    engine_bcast_input_nb(e, l, msg, e->nb);
}

/* BCAST of a layer input (st->layer; L: the last output, to the controller). */
void engine_input_run(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    const double t = time_now();
    if (!e->lr[l].in_comm) /* a group of the root alone */
        return;
    if (e->lr[l].in_root) { /* X' with the decision's flags; the next layer's are clear */
        engine_hdr_put(e, e->buf.xmsg, &w->h);
        engine_bcast_form(e, l, e->buf.xmsg, e->nb, st->wire);
        w->h.flags = 0;
        if (l > 0)
            engine_timers(e, l - 1)[T_BCAST] += time_now() - t;
        return;
    }
    int nb = e->nb;
    if (w->known == l) { /* the pass came with a speculative Z: X' is waited for later */
        bcast_post(e, l, e->buf.xmsg, &nb, st->wire, engine_walk_post(e, w, st));
        engine_timers(e, l)[T_BCAST] += time_now() - t;
        return;
    }
    TransportReq req;
    bcast_post(e, l, e->buf.xmsg, &nb, st->wire, &req);
    engine_timers(e, l)[T_BCAST] += time_now() - t;
    /* A copy of --replicas idles while the others decode: the first message of its next
     * pass may be long in coming, so each of its workers waits for it without a deadline
     * (a stalled controller is the controller's to report; later messages keep theirs). */
    if (e->ctl && w->known == -2)
        transport_wait(e->tp, &req);
    engine_input_done(e, w, st, &req);
}

void engine_input_done(DistEngine *e, EngineWalk *w, const Step *st, TransportReq *req)
{
    const int l = st->layer;
    const double t = time_now();
    bcast_done(e, l, e->buf.xmsg, e->nb, st->wire, req);
    engine_timers(e, l)[T_BCAST] += time_now() - t;
    const WireHdr h = engine_walk_took(e, w, l, e->buf.xmsg);
    if (l > 0 && (h.flags & WIRE_FLAG_SPEC_ON)) /* adaptive switch, from the next token on */
        e->sp.on[l - 1] = (h.flags & WIRE_FLAG_SPEC_NEXT) != 0;
}

void engine_output_take(DistEngine *e, EngineWalk *w, const Step *st)
{
    const EnginePass *p = w->pass;
    const int L = e->L;
    engine_bcast_form(e, L, e->buf.xout, p->out < p->n ? p->out : p->nb, st->wire);
    WireHdr h = engine_read_hdr(e->buf.xout, L);
    CHECK(h.cmd == WIRE_STEP && h.n == p->n && h.pos == p->pos && h.out == p->out,
          "the pass of %d rows at position %d came back as %d rows at %d (protocol mismatch)",
          p->n, p->pos, h.n, h.pos);
    memcpy(p->y + (size_t)(p->n - p->out) * (size_t)e->c->dim, payload(e, e->buf.xout),
           (size_t)p->out * (size_t)e->c->dim * sizeof(float));
}

void engine_caller_step(DistEngine *e, EngineWalk *w, const Step *st)
{
    (void)e;
    (void)w;
    (void)st;
}

void engine_control_out(DistEngine *e, EngineWalk *w)
{
    LayerRt *r = &e->lr[e->L];
    if (!w->stop || e->sched.n_head == 0 || !r->in_root || !r->in_comm)
        return;
    engine_hdr_put(e, e->buf.xmsg, &w->h);
    engine_bcast_input(e, e->L, e->buf.xmsg);
}

void engine_controller_control(DistEngine *e, int cmd, int pos)
{
    WireHdr h = {.magic = WIRE_MAGIC, .cmd = cmd, .pos = pos, .next_n = (int16_t)e->nb};
    engine_service_go(e, cmd);
    engine_hdr_put(e, e->buf.xmsg, &h);
    engine_bcast_input(e, 0, e->buf.xmsg);
    engine_bcast_input(e, e->L, e->buf.xmsg);
    engine_control_bcast(e, &h);
}

void engine_control_bcast(DistEngine *e, WireHdr *h)
{
    if (!e->ctl) {
        transport_bcast_all(e->tp, h, sizeof *h);
        return;
    }
    TransportReq r = {0};
    transport_ibcast(e->tp, e->ctl, h, sizeof *h, &r);
    transport_wait(e->tp, &r);
}

void dist_set_control(DistEngine *e, const int *members, int n)
{
    CHECK(!e->ctl && n >= 1 && members[0] == 0, "a copy's control group is set once, the "
          "controller first");
    e->ctl = transport_group_create(e->tp, members, n);
}
