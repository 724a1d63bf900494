/* quant_neon.c: NEON (ARMv8.0, no dot-product extension) row dots of the quantized types.
 * Placeholder until the NEON paths land: no type handled, the dispatcher uses the C twins. */
#include "quant_impl.h"

int quant_neon_dot(QType t, const void *w, const void *x, int64_t n, float *out)
{
    (void)t, (void)w, (void)x, (void)n, (void)out;
    return 0;
}
