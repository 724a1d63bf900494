/* wireform.c: the form floats take on the wire (--wire f32|f16|q8): as they are, IEEE halves,
 * or Q8_0 blocks of 32.  The broadcasts of layer inputs (loop.c, pipe.c) and the SLICE sums
 * (slice.c) pack and unpack through these, so that every member rounds the same way. */
#include "engine_internal.h"

#include "kernels.h"
#include "quant.h"
#include "wire.h"

#include <string.h>

size_t engine_wire_len(const DistEngine *e, int64_t n)
{
    if (e->wire16 == 2)
        (void)quant_row_bytes(QTYPE_Q8_0, n); /* checks n against the block size */
    return (size_t)wire_form_bytes((WireForm)e->wire16, n);
}

size_t engine_wire_put(const DistEngine *e, const float *x, unsigned char *out, int64_t n)
{
    if (e->wire16 == 2)
        quant_quantize_row(out, x, QTYPE_Q8_0, n);
    else if (e->wire16)
        kernels_f32_to_f16((uint16_t *)(void *)out, x, (int)n);
    else
        memcpy(out, x, (size_t)n * sizeof(float));
    return engine_wire_len(e, n);
}

void engine_wire_get(const DistEngine *e, const unsigned char *in, float *x, int64_t n)
{
    if (e->wire16 == 2)
        quant_dequantize_row(x, in, QTYPE_Q8_0, n);
    else if (e->wire16)
        kernels_f16_to_f32(x, (const uint16_t *)(const void *)in, (int)n);
    else if ((const unsigned char *)x != in)
        memcpy(x, in, (size_t)n * sizeof(float));
}

void engine_wire_round(const DistEngine *e, float *x, unsigned char *scratch, int64_t n)
{
    if (!e->wire16)
        return;
    engine_wire_put(e, x, scratch, n);
    engine_wire_get(e, scratch, x, n);
}
