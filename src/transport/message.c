/* message.c: the messages of the token loop, a WireHdr then the payload, as every sender and
 * receiver takes them: the header stamped in place, the send, the wait with the deadline, the
 * header read and checked, the emulated link's delivery.  Counted as the operations under
 * them are (transport.c). */
#include "transport.h"

#include "util.h"
#include "wire.h"

#include <string.h>

WireHdr transport_msg_stamp(Transport *t, void *msg, int layer)
{
    WireHdr h;
    memcpy(&h, msg, sizeof h);
    transport_stamp(t, &h);
    if (layer >= 0)
        h.layer = layer;
    memcpy(msg, &h, sizeof h);
    return h;
}

void transport_msg_send(Transport *t, void *msg, size_t bytes, int dst, int tag, int layer)
{
    transport_msg_stamp(t, msg, layer);
    TransportReq r;
    transport_isend(t, msg, bytes, dst, tag, &r);
    transport_wait(t, &r);
}

WireHdr transport_msg_wait(Transport *t, TransportReq *r, const void *msg, int peer,
                           const char *what, int layer, double *ewma)
{
    transport_wait_link(t, r, peer, what, layer, ewma);
    WireHdr h;
    memcpy(&h, msg, sizeof h);
    CHECK(h.magic == WIRE_MAGIC, "layer %d: %s from rank %d with a bad magic 0x%08x (protocol "
          "mismatch between ranks?)", layer, what ? what : "a message", peer, h.magic);
    return h;
}

WireHdr transport_msg_take(Transport *t, TransportReq *r, const void *msg, size_t bytes,
                           int peer, const char *what, int layer, double *ewma)
{
    WireHdr h = transport_msg_wait(t, r, msg, peer, what, layer, ewma);
    transport_deliver(t, &h, bytes);
    return h;
}

void transport_msg_gathered(Transport *t, TransportReq *r, const unsigned char *buf,
                            const int *counts, const int *displs, int n, int peer,
                            const char *what, int layer, double *ewma)
{
    transport_wait_link(t, r, peer, what, layer, ewma);
    for (int m = 1; m < n; m++) {
        WireHdr h;
        memcpy(&h, buf + displs[m], sizeof h);
        CHECK(h.magic == WIRE_MAGIC, "layer %d: %s of member %d of %d with a bad magic 0x%08x "
              "(protocol mismatch between ranks?)", layer, what ? what : "a gather", m, n,
              h.magic);
        transport_deliver(t, &h, (size_t)counts[m]);
    }
}
