/* half.c: IEEE 754 binary16 conversion for the 16-bit wire format.  Round to nearest even,
 * overflow to infinity, subnormals kept, NaN stays NaN; the F16C path (x86) and the portable
 * one give the same bits. */
#include "kernels.h"

#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

uint16_t kernels_f32_to_f16_one(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, keeping the top payload bits */
        return (uint16_t)(sign | 0x7c00u | 0x200u | ((ax >> 13) & 0x3ffu));
    if (ax == 0x7f800000u)
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x477ff000u) /* rounds to 65536 or more: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x33000001u) /* below half the smallest subnormal (ties to even: zero) */
        return (uint16_t)sign;
    uint32_t e = ax >> 23, m = ax & 0x7fffffu;
    if (e < 113) { /* subnormal half: shift the full significand */
        m |= 0x800000u;
        const uint32_t shift = 126 - e; /* 14..24 */
        const uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1);
        uint32_t r = m >> shift;
        if (rest > half || (rest == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((e - 112) << 10) | (m >> 13);
    const uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (r & 1u)))
        r++; /* may carry into the exponent, up to infinity: correct */
    return (uint16_t)(sign | r);
}

float kernels_f16_to_f32_one(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1f) {
        x = sign | 0x7f800000u | (m << 13);
    } else if (e == 0) {
        if (m == 0) {
            x = sign;
        } else { /* subnormal: normalise */
            e = 113;
            while (!(m & 0x400u)) {
                m <<= 1;
                e--;
            }
            x = sign | (e << 23) | ((m & 0x3ffu) << 13);
        }
    } else {
        x = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

void kernels_f32_to_f16(uint16_t *restrict y, const float *restrict x, int n)
{
    int i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++)
        y[i] = kernels_f32_to_f16_one(x[i]);
}

void kernels_f16_to_f32(float *restrict y, const uint16_t *restrict x, int n)
{
    int i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i))));
#endif
    for (; i < n; i++)
        y[i] = kernels_f16_to_f32_one(x[i]);
}
