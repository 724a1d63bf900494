/* wire.h: the wire protocol between controller and workers, in one place. */
#ifndef HEADSPLIT_WIRE_H
#define HEADSPLIT_WIRE_H

#include <stdint.h>

#define WIRE_MAGIC 0x48530002u /* "HS", protocol version 2 */

/* STEP carries a token through the layers; STOP and REPLAN pass through the pipeline without
 * computing and are then confirmed to every rank by the controller. */
typedef enum { WIRE_STEP = 1, WIRE_STOP = 2, WIRE_PING = 3, WIRE_REPLAN = 4 } WireCmd;
/* Flags above the command byte of WireHdr.cmd, set by the FFN rank that decides speculation
 * for the transition out of its layer. */
enum {
    WIRE_FLAG_ACCEPT = 0x100,    /* keep the attention computed on Z */
    WIRE_FLAG_SPEC_ON = 0x200,   /* adaptive: the next bit sets the next token's state */
    WIRE_FLAG_SPEC_NEXT = 0x400, /* adaptive: speculate at this transition next token */
};

/* Precedes every message of the engine: activations along the pipeline, head outputs in a
 * gather, partial sums in an exchange.  t_send lets a receiver on the same host emulate the
 * link the message would have crossed (--emulate-link). */
typedef struct {
    uint32_t magic;
    int32_t cmd;    /* WireCmd in the low byte, WIRE_FLAG_* above */
    int32_t pos;    /* position of the token in the sequence */
    int32_t token;  /* token id (informational) */
    int32_t src;    /* sending world rank */
    int32_t layer;  /* layer the payload belongs to */
    double t_send;  /* sender's CLOCK_MONOTONIC seconds when it posted the message */
} WireHdr;
_Static_assert(sizeof(WireHdr) == 32, "the header keeps the payload 32-byte aligned");

/* Message tags of point-to-point messages; collectives use per-layer communicators. */
enum { WIRE_TAG_Z = 1000, WIRE_TAG_PING = 900, WIRE_TAG_XCHG = 10000, WIRE_TAG_XSUM = 15000,
       WIRE_TAG_MIG = 20000 };

#endif
