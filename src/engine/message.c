/* message.c: the engine's pipeline messages, which the token loop and the per-layer files
 * (pipe.c, slice.c, slice_exact.c, head.c) share: a received header checked, the wire form
 * of a layer input packed and unpacked, the broadcast of a layer input on its group (stamped
 * by the root, waited out on the emulated link by the others), and a control command sent
 * down the pipeline.  Every message starts with a WireHdr, which carries commands and the
 * send time used by link emulation. */
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
    if (h->cmd != WIRE_STEP || h->n < 1)
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
void engine_bcast_input_nb(DistEngine *e, int l, unsigned char *msg, int nb)
{
    LayerRt *r = &e->lr[l];
    TransportReq req;
    if (r->in_root)
        transport_msg_stamp(e->tp, msg, -1);
    if (r->in_root && l == e->L) { /* to the controller: only the rows it reads */
        WireHdr h;
        memcpy(&h, msg, sizeof h);
        if (h.cmd == WIRE_STEP && h.out >= 0 && h.out < h.n) {
            const size_t row = (size_t)e->c->dim * sizeof(float);
            memmove(payload(msg), (unsigned char *)payload(msg) + (size_t)(h.n - h.out) * row,
                    (size_t)h.out * row);
            nb = h.out;
        }
    }
    const size_t bytes = wire_bcast_bytes(e, nb);
    unsigned char *buf = msg;
    if (e->wire16) {
        buf = e->buf.wbcast;
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
    transport_msg_wait(e->tp, &req, buf, r->in_peer, "layer input", l, &r->ewma[W_IN]);
    WireHdr h = engine_read_hdr(buf, l);
    const int rows = msg_rows(e, l, &h);
    CHECK(h.cmd != WIRE_STEP || (h.n >= 1 && rows <= nb),
          "layer %d: a pass of %d rows in a broadcast sized for %d (protocol mismatch)", l,
          rows, nb);
    transport_deliver(e->tp, &h, bytes);
    if (e->wire16)
        wire_unpack(e, l, buf, msg);
}

void engine_bcast_input(DistEngine *e, int l, unsigned char *msg)
{
    engine_bcast_input_nb(e, l, msg, e->nb);
}

void engine_controller_control(DistEngine *e, int cmd, int pos)
{
    WireHdr h = {.magic = WIRE_MAGIC, .cmd = cmd, .pos = pos, .next_n = (int16_t)e->nb};
    engine_service_go(e, cmd);
    memcpy(e->buf.xmsg, &h, sizeof h);
    engine_bcast_input(e, 0, e->buf.xmsg);
    engine_bcast_input(e, e->L, e->buf.xmsg);
    transport_bcast_all(e->tp, &h, sizeof h);
}
