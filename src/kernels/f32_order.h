/* f32_order.h: the scalar parts of the fp32 dot product's canonical order (matvec.c's header
 * comment: ggml_vec_dot_f32 as llama.cpp's AVX-512 build computes it), shared by the matvec,
 * the batched matmul and the plain twin so that all three finish every row the same way. */
#ifndef HEADSPLIT_F32_ORDER_H
#define HEADSPLIT_F32_ORDER_H

#include "kernels.h"

#include <math.h>
#include <string.h>

#if defined(__ARM_NEON)
#include <arm_neon.h>
#elif defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#define F32_STEP 64 /* values per step: four accumulators of 16 lanes */

/* _mm512_reduce_add_ps's tree over 16 lanes: halves 8, 4, then (c0 + c2) + (c1 + c3). */
static inline float f32_reduce16(float *c)
{
    for (int h = 8; h >= 4; h /= 2)
        for (int l = 0; l < h; l++)
            c[l] = c[l] + c[l + h];
    return (c[0] + c[2]) + (c[1] + c[3]);
}

/* The values past the last whole step, added one by one to the reduced sum s (ggml's scalar
 * loop as GCC compiles it: separate products for the first t - t % 4, FMA for the last t % 4,
 * t = n - np). */
static inline float f32_tail(float s, const float *w, const float *x, int np, int n)
{
    const int m4 = np + ((n - np) & ~3);
    for (int j = np; j < m4; j++)
        s = s + w[j] * x[j];
    for (int j = m4; j < n; j++)
        s = fmaf(w[j], x[j], s);
    return s;
}

/* ---- llama.cpp's AVX2 build (--f32-order avx2): GGML_F32_STEP 32, GGML_F32_EPR 8 ----
 * Four 8-lane accumulators over whole steps of 32 values (value j: accumulator (j / 8) % 4,
 * lane j % 8, by FMA), combined c = (A0 + A2) + (A1 + A3) lane by lane as above, then
 * GGML_F32x8_REDUCE across the 8 lanes: t[l] = c[l] + c[l + 4] (the two 128-bit halves), then
 * two _mm_hadd_ps: (t0 + t1) + (t2 + t3); the tail as f32_tail. */
#define F32_STEP8 32

static inline float f32_reduce8(const float *c)
{
    const float t0 = c[0] + c[4], t1 = c[1] + c[5], t2 = c[2] + c[6], t3 = c[3] + c[7];
    return (t0 + t1) + (t2 + t3);
}

/* One row's result from its 8 combined lanes (np > 0), or from +0 (np == 0). */
static inline float f32_finish8(const float *c, const float *w, const float *x, int np, int n)
{
    return f32_tail(np > 0 ? f32_reduce8(c) : 0.0f, w, x, np, n);
}

/* The order chosen now (matvec.c). */
static inline int f32_order_is8(void) { return kernels_get_f32_order() == KERNELS_F32_ORDER_AVX2; }

/* One row's result from its 16 combined lanes c = (A0 + A2) + (A1 + A3) (np > 0), or from +0
 * when there is no whole step (np == 0). */
static inline float f32_finish(float *c, const float *w, const float *x, int np, int n)
{
    return f32_tail(np > 0 ? f32_reduce16(c) : 0.0f, w, x, np, n);
}

typedef float F32V4 __attribute__((vector_size(16)));

/* a * b + c with one rounding per lane, for 4-lane GCC vectors (the portable paths). */
static inline F32V4 f32_fma4(F32V4 a, F32V4 b, F32V4 c)
{
#if defined(__ARM_NEON)
    return vfmaq_f32(c, a, b);
#elif defined(__FMA__)
    return _mm_fmadd_ps(a, b, c);
#else
    F32V4 r;
    for (int l = 0; l < 4; l++)
        r[l] = fmaf(a[l], b[l], c[l]);
    return r;
#endif
}

#endif
