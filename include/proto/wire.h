/* wire.h: the wire protocol between controller and workers, in one place. */
#ifndef HEADSPLIT_WIRE_H
#define HEADSPLIT_WIRE_H

#include <stdint.h>

#define WIRE_MAGIC 0x48530006u /* "HS", protocol version 6 */

/* STEP carries a token through the layers; STOP and REPLAN pass through the pipeline without
 * computing and are then confirmed to every rank by the controller. */
typedef enum { WIRE_STEP = 1, WIRE_STOP = 2, WIRE_PING = 3, WIRE_REPLAN = 4,
               WIRE_SERVICE_CALL = 5, WIRE_SERVICE_GO = 6 } WireCmd;
/* The service rank (dist_set_service: the draft model of --draft-rank) takes point-to-point
 * messages from the controller between passes: CALL (a request; the header's layer field holds
 * the payload's bytes; answered on WIRE_TAG_SERVICE_REPLY the same way) or GO (pos holds the
 * command that follows: WIRE_STEP for a pass, or the control command). */
/* WireHdr.flags, set by the FFN rank that decides speculation for the transition out of its
 * layer (a command carries none otherwise). */
enum {
    WIRE_FLAG_ACCEPT = 0x1,    /* keep the attention computed on Z */
    WIRE_FLAG_SPEC_ON = 0x2,   /* adaptive: the next bit sets the next token's state */
    WIRE_FLAG_SPEC_NEXT = 0x4, /* adaptive: speculate at this transition next token */
    WIRE_FLAGS_ALL = 0x7,
};

/* Precedes every message of the engine: activations along the pipeline, head outputs in a
 * gather, partial sums in an exchange.  t_send lets a receiver on the same host emulate the
 * link the message would have crossed (--emulate-link).
 *
 * A pass carries n positions pos .. pos+n-1, their rows packed after the header.  Messages
 * whose size every receiver knows from an earlier header (gathers, point-to-point sends,
 * exchanges) are exactly that long.  Broadcasts must have one size agreed in advance: every
 * rank sizes them for the positions the previous pass announced in next_n (1 at start), so a
 * pass carries at most that many rows (fewer: the rest of the message is padding). */
typedef struct {
    uint32_t magic;
    int16_t cmd;    /* WireCmd */
    uint16_t flags; /* WIRE_FLAG_* */
    int32_t pos;    /* position of the first row in the sequence */
    int16_t n;      /* positions (rows) this pass carries */
    int16_t next_n; /* rows the broadcasts of the next pass are sized for */
    int16_t src;    /* sending world rank */
    int16_t out;    /* STEP: rows of the result the controller reads, the pass's last ones
                     * (0..n); the last layer sends only those back */
    int32_t layer;  /* layer the payload belongs to */
    double t_send;  /* sender's CLOCK_MONOTONIC seconds when it posted the message */
} WireHdr;
_Static_assert(sizeof(WireHdr) == 32, "the header keeps the payload 32-byte aligned");

/* Rows one pass may carry at most. */
#define WIRE_MAX_ROWS 4096

/* Several sequences per pass (--parallel's slots, dist_set_slots with more than one slot):
 * every message of the engine then carries, right after its WireHdr, a segment table of one
 * entry per slot: the pass's rows are entries[0]'s n rows, then entries[1]'s, ... (the
 * header's n is their sum), entry i's rows are positions pos .. pos+n-1 of the sequence in
 * slot `slot`, whose KV caches they use; entries with n = 0 end the table.  Its size is
 * fixed for a run (every rank knows the slots), padded so the payload stays 32-byte aligned;
 * with one slot there is no table and messages are as before. */
typedef struct {
    int16_t slot; /* the sequence's slot, 0 .. slots-1 */
    int16_t n;    /* rows (0: past the table's last entry) */
    int32_t pos;  /* position of its first row in that sequence */
} WireSeg;
_Static_assert(sizeof(WireSeg) == 8, "a segment is 8 bytes on the wire");

/* Slots a run may have at most (the table's entries). */
#define WIRE_MAX_SLOTS 64

/* Bytes of the segment table of a run with `slots` slots (0 for one slot). */
static inline uint64_t wire_table_bytes(int slots)
{
    return slots > 1 ? ((uint64_t)slots * sizeof(WireSeg) + 31u) / 32u * 32u : 0;
}

/* Message tags of point-to-point messages; collectives use per-layer communicators. */
enum { WIRE_TAG_Z = 1000, WIRE_TAG_PING = 900, WIRE_TAG_XCHG = 10000, WIRE_TAG_XSUM = 15000,
       WIRE_TAG_MIG = 20000, WIRE_TAG_SERVICE = 25000, WIRE_TAG_SERVICE_REPLY = 25001 };

/* The form floats take on the wire (--wire f32|f16|q8): as they are, IEEE halves, or Q8_0
 * blocks of 32 (a half scale and 32 int8: 34 bytes).  wire_form_bytes is the one size of a
 * payload of n values in that form: the plan's steps, the simulator, the cost model and the
 * engine's packers all take it from here. */
typedef enum { WIRE_FORM_F32 = 0, WIRE_FORM_F16 = 1, WIRE_FORM_Q8 = 2 } WireForm;

/* Bytes of n values in form f (q8: n a multiple of 32, as every dimension it carries is). */
static inline uint64_t wire_form_bytes(WireForm f, int64_t n)
{
    if (n <= 0)
        return 0;
    return f == WIRE_FORM_Q8 ? (uint64_t)(n / 32) * 34u
                             : (uint64_t)n * (f == WIRE_FORM_F16 ? 2u : 4u);
}

/* Values per block of form f: a payload cut into pieces is cut at multiples of this. */
static inline int wire_form_block(WireForm f) { return f == WIRE_FORM_Q8 ? 32 : 1; }

#endif
