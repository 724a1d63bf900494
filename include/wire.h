/* wire.h: the wire protocol between controller and workers, in one place. */
#ifndef HEADSPLIT_WIRE_H
#define HEADSPLIT_WIRE_H

#include <stdint.h>

#define WIRE_MAGIC 0x48530001u /* "HS", protocol version 1 */

typedef enum { WIRE_STEP = 1, WIRE_STOP = 2 } WireCmd;

/* Precedes every activation vector that travels along the pipeline (layer inputs and Z). */
typedef struct {
    uint32_t magic;
    int32_t cmd;   /* WireCmd */
    int32_t pos;   /* position of the token in the sequence */
    int32_t token; /* token id (informational) */
} WireHdr;
_Static_assert(sizeof(WireHdr) == 16, "the header keeps the payload 16-byte aligned");

/* Message tags of point-to-point messages; collectives use per-layer communicators. */
enum { WIRE_TAG_Z = 100 };

#endif
