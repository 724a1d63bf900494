/* service.c: a request-reply service on one worker between passes (the draft model of
 * --draft-rank runs there).  The service rank waits for the controller's messages between
 * passes: requests, answered at once, and a go-ahead that says what comes next (a pass, or a
 * control command), so that it never waits for a pass and a request at the same time. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

void dist_set_service(DistEngine *e, int rank, DistServiceFn fn, void *ctx, size_t req_cap,
                      size_t resp_cap)
{
    CHECK(rank >= 1 && rank < e->tp->size, "service rank %d: must be a worker, 1..%d", rank,
          e->tp->size - 1);
    CHECK(req_cap <= 0x7fffffff && resp_cap <= 0x7fffffff, "service messages over 2 GB");
    e->svc.rank = rank;
    e->svc.fn = fn;
    e->svc.ctx = ctx;
    e->svc.req_cap = req_cap;
    e->svc.resp_cap = resp_cap;
    free(e->svc.req);
    free(e->svc.resp);
    e->svc.req = xcalloc(sizeof(WireHdr) + req_cap, 1);
    e->svc.resp = xcalloc(sizeof(WireHdr) + resp_cap, 1);
}

/* Sends [hdr | bytes of payload] (payload already in buf after the header). */
static void send_msg(DistEngine *e, unsigned char *buf, int cmd, int pos, size_t bytes, int dst,
                     int tag)
{
    WireHdr h = {.magic = WIRE_MAGIC, .cmd = cmd, .pos = pos, .layer = (int32_t)bytes};
    memcpy(buf, &h, sizeof h);
    transport_msg_send(e->tp, buf, sizeof h + bytes, dst, tag, -1);
}

void engine_service_go(DistEngine *e, int cmd)
{
    if (e->svc.rank <= 0 || e->tp->rank != 0)
        return;
    unsigned char buf[sizeof(WireHdr)];
    send_msg(e, buf, WIRE_SERVICE_GO, cmd, 0, e->svc.rank, WIRE_TAG_SERVICE);
}

size_t dist_service_call(DistEngine *e, const void *req, size_t req_bytes, void *resp,
                         size_t resp_cap)
{
    CHECK(e->svc.rank > 0 && e->tp->rank == 0, "service call without a service rank");
    CHECK(req_bytes <= e->svc.req_cap, "service request of %zu bytes (at most %zu)", req_bytes,
          e->svc.req_cap);
    memcpy(e->svc.req + sizeof(WireHdr), req, req_bytes);
    TransportReq rq;
    transport_irecv(e->tp, e->svc.resp, sizeof(WireHdr) + e->svc.resp_cap, e->svc.rank,
                    WIRE_TAG_SERVICE_REPLY, &rq);
    send_msg(e, e->svc.req, WIRE_SERVICE_CALL, 0, req_bytes, e->svc.rank, WIRE_TAG_SERVICE);
    double ewma = 0;
    WireHdr h = transport_msg_wait(e->tp, &rq, e->svc.resp, e->svc.rank,
                                   "the service's reply (draft tokens)", -1, &ewma);
    CHECK(h.cmd == WIRE_SERVICE_CALL && h.layer >= 0 &&
              (size_t)h.layer <= resp_cap,
          "rank %d: a bad service reply (%d bytes, at most %zu)", e->svc.rank, h.layer,
          resp_cap);
    transport_deliver(e->tp, &h, sizeof h + (size_t)h.layer);
    memcpy(resp, e->svc.resp + sizeof h, (size_t)h.layer);
    return (size_t)h.layer;
}

int engine_service_serve(DistEngine *e)
{
    for (;;) {
        TransportReq rq;
        transport_irecv(e->tp, e->svc.req, sizeof(WireHdr) + e->svc.req_cap, 0,
                        WIRE_TAG_SERVICE, &rq);
        transport_wait(e->tp, &rq); /* between passes: idle as long as the controller is */
        WireHdr h;
        memcpy(&h, e->svc.req, sizeof h);
        CHECK(h.magic == WIRE_MAGIC, "rank %d: a service message with a bad magic",
              e->tp->rank);
        transport_deliver(e->tp, &h, sizeof h + (size_t)(h.layer > 0 ? h.layer : 0));
        if (h.cmd == WIRE_SERVICE_GO)
            return h.pos;
        CHECK(h.cmd == WIRE_SERVICE_CALL && h.layer >= 0 && (size_t)h.layer <= e->svc.req_cap,
              "rank %d: unknown service message %d (%d bytes)", e->tp->rank, h.cmd, h.layer);
        char err[512] = "";
        long n = e->svc.fn(e->svc.ctx, e->svc.req + sizeof h, (size_t)h.layer,
                               e->svc.resp + sizeof h, e->svc.resp_cap, err, sizeof err);
        CHECK(n >= 0 && (size_t)n <= e->svc.resp_cap, "rank %d (service): %s", e->tp->rank,
              err[0] ? err : "reply too long");
        send_msg(e, e->svc.resp, WIRE_SERVICE_CALL, 0, (size_t)n, 0, WIRE_TAG_SERVICE_REPLY);
    }
}
