/* wireform.c: the form floats take on the wire (WireForm, --wire f32|f16|q8): as they are,
 * IEEE halves, or Q8_0 blocks of 32.  The payload's size is wire_form_bytes (wire.h); the
 * broadcasts of layer inputs, the speculative Z and the SLICE sums pack and unpack through
 * these, in the form their step carries, so that every member rounds the same way. */
#include "engine_internal.h"

#include "kernels.h"
#include "quant.h"
#include "wire.h"

#include <string.h>

size_t engine_wire_len(WireForm f, int64_t n)
{
    if (f == WIRE_FORM_Q8)
        (void)quant_row_bytes(QTYPE_Q8_0, n); /* checks n against the block size */
    return (size_t)wire_form_bytes(f, n);
}

size_t engine_wire_put(WireForm f, const float *x, unsigned char *out, int64_t n)
{
    if (f == WIRE_FORM_Q8)
        quant_quantize_row(out, x, QTYPE_Q8_0, n);
    else if (f == WIRE_FORM_F16)
        kernels_f32_to_f16((uint16_t *)(void *)out, x, (int)n);
    else
        memcpy(out, x, (size_t)n * sizeof(float));
    return engine_wire_len(f, n);
}

void engine_wire_get(WireForm f, const unsigned char *in, float *x, int64_t n)
{
    if (f == WIRE_FORM_Q8)
        quant_dequantize_row(x, in, QTYPE_Q8_0, n);
    else if (f == WIRE_FORM_F16)
        kernels_f16_to_f32(x, (const uint16_t *)(const void *)in, (int)n);
    else if ((const unsigned char *)x != in)
        memcpy(x, in, (size_t)n * sizeof(float));
}

void engine_wire_round(WireForm f, float *x, unsigned char *scratch, int64_t n)
{
    if (f == WIRE_FORM_F32)
        return;
    engine_wire_put(f, x, scratch, n);
    engine_wire_get(f, scratch, x, n);
}
