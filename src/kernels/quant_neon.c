/* quant_neon.c: NEON row dots of the quantized types for ARMv8.0 (Cortex-A72: no dot-product
 * extension), by vmull_s8 (8 x 8 -> 16-bit products, exact) and pairwise adds into 32-bit
 * lanes (exact).
 *
 * As on x86, the integer lane sums are exact and the float steps after them are the plain-C
 * twin's operations in its order (quant_ref.c, llama.cpp's AVX2 order): 8 lanes (lane l:
 * values 4l..4l+3 of a 32-value block or chunk) in two float32x4 accumulators, advanced by
 * vfmaq_f32 (one rounding, as the twin's fmaf); AArch64 NEON arithmetic is IEEE with
 * subnormals kept, and -ffp-contract=off keeps every other multiply and add apart.  So every
 * result equals the twin's bit for bit (tests/aarch64/quant_check.c checks it under qemu).
 *
 * Types: Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, F16, BF16; the rest use the C twins. */
#include "quant_impl.h"

#include <math.h>
#include <string.h>

#if defined(QUANT_HAVE_NEON)
#include <arm_neon.h>

/* ---------------------------------------------------------------- helpers */

/* 16 bytes, 0x10 where bit j of the 16-bit x is set (byte j), 0 elsewhere. */
static inline int8x16_t bits16_to_0x10(uint32_t x)
{
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bytes = vcombine_u8(vdup_n_u8((uint8_t)(x & 0xFF)),
                                         vdup_n_u8((uint8_t)((x >> 8) & 0xFF)));
    const uint8x16_t set = vtstq_u8(bytes, vld1q_u8(bit));
    return vreinterpretq_s8_u8(vandq_u8(set, vdupq_n_u8(0x10)));
}

/* The 8 integer lanes of 32 signed quants q0 (values 0..15), q1 (16..31) times the 32
 * activation quants a: lane l = sum of values 4l..4l+3, lanes 0..3 in *lo, 4..7 in *hi.  Each
 * 16-bit product is at most 128 * 127: exact. */
static inline void lanes32(int8x16_t q0, int8x16_t q1, const int8_t *a, int32x4_t *lo,
                           int32x4_t *hi)
{
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    *lo = vpaddq_s32(vpaddlq_s16(vmull_s8(vget_low_s8(q0), vget_low_s8(a0))),
                     vpaddlq_s16(vmull_s8(vget_high_s8(q0), vget_high_s8(a0))));
    *hi = vpaddq_s32(vpaddlq_s16(vmull_s8(vget_low_s8(q1), vget_low_s8(a1))),
                     vpaddlq_s16(vmull_s8(vget_high_s8(q1), vget_high_s8(a1))));
}

/* A 32-value block's quants less their offset: values 0..15 in *q0, 16..31 in *q1. */
static inline void block_quants(QType t, const uint8_t *blk, int8x16_t *q0, int8x16_t *q1)
{
    if (t == QTYPE_Q8_0) {
        *q0 = vld1q_s8((const int8_t *)(blk + 2));
        *q1 = vld1q_s8((const int8_t *)(blk + 18));
        return;
    }
    const uint8x16_t q = vld1q_u8(blk + (t == QTYPE_Q4_0 ? 2 : 6));
    int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F)));
    int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
    if (t == QTYPE_Q5_0) { /* fifth bits of value j in bit j of qh */
        uint32_t qh;
        memcpy(&qh, blk + 2, sizeof qh);
        lo = vorrq_s8(lo, bits16_to_0x10(qh & 0xFFFF));
        hi = vorrq_s8(hi, bits16_to_0x10(qh >> 16));
    }
    const int8x16_t off = vdupq_n_s8(t == QTYPE_Q4_0 ? 8 : 16);
    *q0 = vsubq_s8(lo, off);
    *q1 = vsubq_s8(hi, off);
}

/* 4 halves (fp16 bit patterns) to floats, exactly. */
static inline float32x4_t half4(const uint16_t *h)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

/* hsum_float_8 of lanes 0..3 in a, 4..7 in b: l + (l + 4), then (0 + 2) + (1 + 3). */
static inline float hsum8(float32x4_t a, float32x4_t b)
{
    const float32x4_t r = vaddq_f32(a, b);
    const float32x2_t s = vadd_f32(vget_low_f32(r), vget_high_f32(r));
    return vget_lane_f32(s, 0) + vget_lane_f32(s, 1);
}

/* ---------------------------------------------------------------- 32-value blocks */

/* Q5_0, Q8_0: acc = fma(dw * da, lanes, acc) per block; Q4_0: the repacked gemv's
 * sum = fma(S, dw * da, sum) (the twin's orders). */
static float dot_q8_0_family(QType t, const uint8_t *w, const BlockQ8_0 *a, int64_t nb)
{
    const size_t wb = t == QTYPE_Q8_0 ? sizeof(BlockQ8_0)
                    : t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = w + wb * (size_t)b;
        uint16_t dw;
        memcpy(&dw, blk, 2);
        const float d = quant_fp16_to_fp32(dw) * quant_fp16_to_fp32(a[b].d);
        int8x16_t q0, q1;
        int32x4_t lo, hi;
        block_quants(t, blk, &q0, &q1);
        lanes32(q0, q1, a[b].qs, &lo, &hi);
        if (t == QTYPE_Q4_0) {
            sum = fmaf((float)vaddvq_s32(vaddq_s32(lo, hi)), d, sum);
        } else {
            acc0 = vfmaq_f32(acc0, vcvtq_f32_s32(lo), vdupq_n_f32(d));
            acc1 = vfmaq_f32(acc1, vcvtq_f32_s32(hi), vdupq_n_f32(d));
        }
    }
    return t == QTYPE_Q4_0 ? sum : hsum8(acc0, acc1);
}

static int matvec_q8_0_family(QType t, float *y, const uint8_t *w, size_t stride,
                              const BlockQ8_0 *a, int64_t nb, int d)
{
    for (int i = 0; i < d; i++)
        y[i] = dot_q8_0_family(t, w + stride * (size_t)i, a, nb);
    return 1;
}

/* ---------------------------------------------------------------- K-quants */

static float dot_q45_k(QType t, const void *vw, const BlockQ8_K *a, int64_t nb)
{
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f), accm = vdupq_n_f32(0.0f);
    float summs = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const BlockQ4_K *w4 = (const BlockQ4_K *)vw + b;
        const BlockQ5_K *w5 = (const BlockQ5_K *)vw + b;
        const uint8_t *scales = t == QTYPE_Q4_K ? w4->scales : w5->scales;
        const uint8_t *qs = t == QTYPE_Q4_K ? w4->qs : w5->qs;
        const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
        uint8x16_t hb[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
        if (t == QTYPE_Q5_K) {
            hb[0] = vld1q_u8(w5->qh);
            hb[1] = vld1q_u8(w5->qh + 16);
        }
        int32x4_t L0 = vdupq_n_s32(0), L1 = vdupq_n_s32(0);
        int32_t mk[4] = {0, 0, 0, 0};
        for (int s = 0; s < 8; s++) { /* sub-block s: values 32s..32s+31 */
            const int c = s / 2;
            uint8_t sc, m;
            quant_scale_min_k4(s, scales, &sc, &m);
            uint8x16_t v[2];
            for (int half = 0; half < 2; half++) {
                const uint8x16_t raw = vld1q_u8(qs + 32 * c + 16 * half);
                v[half] = s % 2 ? vshrq_n_u8(raw, 4) : vandq_u8(raw, m4);
                if (t == QTYPE_Q5_K) { /* bit s of qh[l] for value 32s + l */
                    const int8x16_t sh = vdupq_n_s8((int8_t)-s);
                    v[half] = vorrq_u8(v[half],
                                       vshlq_n_u8(vandq_u8(vshlq_u8(hb[half], sh), one), 4));
                }
            }
            int32x4_t lo, hi;
            lanes32(vreinterpretq_s8_u8(v[0]), vreinterpretq_s8_u8(v[1]), a[b].qs + 32 * s,
                    &lo, &hi);
            L0 = vmlaq_n_s32(L0, lo, sc);
            L1 = vmlaq_n_s32(L1, hi, sc);
            mk[s / 2] += m * (a[b].bsums[2 * s] + a[b].bsums[2 * s + 1]);
        }
        const float d = a[b].d * quant_fp16_to_fp32(t == QTYPE_Q4_K ? w4->d : w5->d);
        const float dmin = -a[b].d * quant_fp16_to_fp32(t == QTYPE_Q4_K ? w4->dmin : w5->dmin);
        acc0 = vfmaq_f32(acc0, vcvtq_f32_s32(L0), vdupq_n_f32(d));
        acc1 = vfmaq_f32(acc1, vcvtq_f32_s32(L1), vdupq_n_f32(d));
        if (t == QTYPE_Q4_K)
            accm = vfmaq_f32(accm, vcvtq_f32_s32(vld1q_s32(mk)), vdupq_n_f32(dmin));
        else
            summs = fmaf(dmin, (float)((mk[0] + mk[1]) + (mk[2] + mk[3])), summs);
    }
    if (t == QTYPE_Q4_K) {
        const float32x2_t m2 = vadd_f32(vget_low_f32(accm), vget_high_f32(accm));
        return hsum8(acc0, acc1) + (vget_lane_f32(m2, 0) + vget_lane_f32(m2, 1));
    }
    return hsum8(acc0, acc1) + summs;
}

static float dot_q6_k(const BlockQ6_K *w, const BlockQ8_K *a, int64_t nb)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(3);
    const int8x16_t k32 = vdupq_n_s8(32);
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int32x4_t L[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int h = 0; h < 2; h++) {
            for (int g = 0; g < 2; g++) { /* l = 16g .. 16g + 15 of the 32 in this half */
                const uint8x16_t ql0 = vld1q_u8(w[b].ql + 64 * h + 16 * g);
                const uint8x16_t ql1 = vld1q_u8(w[b].ql + 64 * h + 32 + 16 * g);
                const uint8x16_t qh = vld1q_u8(w[b].qh + 32 * h + 16 * g);
                uint8x16_t q[4];
                q[0] = vorrq_u8(vandq_u8(ql0, m4), vshlq_n_u8(vandq_u8(qh, m2), 4));
                q[1] = vorrq_u8(vandq_u8(ql1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), m2), 4));
                q[2] = vorrq_u8(vshrq_n_u8(ql0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), m2), 4));
                q[3] = vorrq_u8(vshrq_n_u8(ql1, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4));
                for (int k = 0; k < 4; k++) { /* values 128h + 32k + 16g + (0..15): group */
                    const int grp = 8 * h + 2 * k + g;
                    const int8x16_t qv = vsubq_s8(vreinterpretq_s8_u8(q[k]), k32);
                    const int8x16_t av = vld1q_s8(a[b].qs + 16 * grp);
                    const int32x4_t quad =
                        vpaddq_s32(vpaddlq_s16(vmull_s8(vget_low_s8(qv), vget_low_s8(av))),
                                   vpaddlq_s16(vmull_s8(vget_high_s8(qv), vget_high_s8(av))));
                    L[g] = vmlaq_n_s32(L[g], quad, w[b].scales[grp]);
                }
            }
        }
        const float d = a[b].d * quant_fp16_to_fp32(w[b].d);
        acc0 = vfmaq_f32(acc0, vcvtq_f32_s32(L[0]), vdupq_n_f32(d));
        acc1 = vfmaq_f32(acc1, vcvtq_f32_s32(L[1]), vdupq_n_f32(d));
    }
    return hsum8(acc0, acc1);
}

/* ---------------------------------------------------------------- F16, BF16 */

static inline float32x4_t load4_half(int bf16, const uint16_t *p)
{
    if (bf16)
        return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
    return half4(p);
}

/* The fp32 matvec's order: lanes 4q..4q+3 in acc[q], the tail zero-padded, halving tree. */
static float dot_half(int bf16, const uint16_t *w, const uint16_t *x, int64_t n)
{
    float32x4_t acc[8];
    for (int q = 0; q < 8; q++)
        acc[q] = vdupq_n_f32(0.0f);
    int64_t j = 0;
    for (; j + 32 <= n; j += 32)
        for (int q = 0; q < 8; q++)
            acc[q] = vaddq_f32(acc[q], vmulq_f32(load4_half(bf16, w + j + 4 * q),
                                                 load4_half(bf16, x + j + 4 * q)));
    if (j < n) {
        uint16_t wp[32] = {0}, xp[32] = {0};
        memcpy(wp, w + j, (size_t)(n - j) * 2);
        memcpy(xp, x + j, (size_t)(n - j) * 2);
        for (int q = 0; q < 8; q++)
            acc[q] = vaddq_f32(acc[q], vmulq_f32(load4_half(bf16, wp + 4 * q),
                                                 load4_half(bf16, xp + 4 * q)));
    }
    const float32x4_t b0 = vaddq_f32(acc[0], acc[4]), b1 = vaddq_f32(acc[1], acc[5]);
    const float32x4_t b2 = vaddq_f32(acc[2], acc[6]), b3 = vaddq_f32(acc[3], acc[7]);
    const float32x4_t e = vaddq_f32(vaddq_f32(b0, b2), vaddq_f32(b1, b3));
    const float f0 = vgetq_lane_f32(e, 0) + vgetq_lane_f32(e, 2);
    const float f1 = vgetq_lane_f32(e, 1) + vgetq_lane_f32(e, 3);
    return f0 + f1;
}

/* ---------------------------------------------------------------- several activations */

/* One row of a 32-value type against up to 4 activations: each block's quants unpacked once,
 * each (row, activation) in dot_q8_0_family's own accumulators and order. */
static void mm_q8_0_tile(QType t, const uint8_t *row, const uint8_t *act, size_t astride,
                         int64_t nb, int tb, float *y, size_t ldy)
{
    const size_t wb = t == QTYPE_Q8_0 ? sizeof(BlockQ8_0)
                    : t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    float32x4_t acc0[4], acc1[4];
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < 4; k++)
        acc0[k] = acc1[k] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + wb * (size_t)b;
        uint16_t dw;
        memcpy(&dw, blk, 2);
        const float fw = quant_fp16_to_fp32(dw);
        int8x16_t q0, q1;
        block_quants(t, blk, &q0, &q1);
        for (int k = 0; k < tb; k++) {
            const BlockQ8_0 *a = (const BlockQ8_0 *)(const void *)(act + astride * (size_t)k) + b;
            const float d = fw * quant_fp16_to_fp32(a->d);
            int32x4_t lo, hi;
            lanes32(q0, q1, a->qs, &lo, &hi);
            if (t == QTYPE_Q4_0) {
                sum[k] = fmaf((float)vaddvq_s32(vaddq_s32(lo, hi)), d, sum[k]);
            } else {
                acc0[k] = vfmaq_f32(acc0[k], vcvtq_f32_s32(lo), vdupq_n_f32(d));
                acc1[k] = vfmaq_f32(acc1[k], vcvtq_f32_s32(hi), vdupq_n_f32(d));
            }
        }
    }
    for (int k = 0; k < tb; k++)
        y[ldy * (size_t)k] = t == QTYPE_Q4_0 ? sum[k] : hsum8(acc0[k], acc1[k]);
}

int quant_neon_matmul(QType t, float *y, size_t ldy, const void *w, size_t stride,
                      const void *x, size_t act_stride, int64_t n, int d, int nb)
{
    if (t != QTYPE_Q8_0 && t != QTYPE_Q4_0 && t != QTYPE_Q5_0)
        return 0;
    const uint8_t *act = x;
    const int rc = quant_chunk_rows(stride); /* rows in L2, each tile of activations over them */
    for (int i0 = 0; i0 < d; i0 += rc) {
        const int i1 = d - i0 < rc ? d : i0 + rc;
        for (int k = 0; k < nb; k += 4)
            for (int i = i0; i < i1; i++)
                mm_q8_0_tile(t, (const uint8_t *)w + stride * (size_t)i,
                             act + act_stride * (size_t)k, act_stride, n / QK,
                             nb - k < 4 ? nb - k : 4, y + ldy * (size_t)k + i, ldy);
    }
    return 1;
}

/* ---------------------------------------------------------------- entry */

int quant_neon_matvec(QType t, float *y, const void *w, size_t stride, const void *x,
                      int64_t n, int d)
{
    if (t != QTYPE_Q8_0 && t != QTYPE_Q4_0 && t != QTYPE_Q5_0)
        return 0;
    return matvec_q8_0_family(t, y, w, stride, x, n / QK, d);
}

int quant_neon_dot(QType t, const void *w, const void *x, int64_t n, float *out)
{
    switch (t) {
    case QTYPE_Q8_0:
    case QTYPE_Q4_0:
    case QTYPE_Q5_0:
        *out = dot_q8_0_family(t, w, x, n / QK);
        return 1;
    case QTYPE_Q4_K:
    case QTYPE_Q5_K:
        *out = dot_q45_k(t, w, x, n / QK_K);
        return 1;
    case QTYPE_Q6_K:
        *out = dot_q6_k(w, x, n / QK_K);
        return 1;
    case QTYPE_F16:
        *out = dot_half(0, w, x, n);
        return 1;
    case QTYPE_BF16:
        *out = dot_half(1, w, x, n);
        return 1;
    default:
        return 0;
    }
}

#else /* not aarch64: the dispatcher never calls this */

int quant_neon_dot(QType t, const void *w, const void *x, int64_t n, float *out)
{
    (void)t, (void)w, (void)x, (void)n, (void)out;
    return 0;
}

int quant_neon_matvec(QType t, float *y, const void *w, size_t stride, const void *x,
                      int64_t n, int d)
{
    (void)t, (void)y, (void)w, (void)stride, (void)x, (void)n, (void)d;
    return 0;
}

int quant_neon_matmul(QType t, float *y, size_t ldy, const void *w, size_t stride,
                      const void *x, size_t act_stride, int64_t n, int d, int nb)
{
    (void)t, (void)y, (void)ldy, (void)w, (void)stride, (void)x, (void)act_stride, (void)n;
    (void)d, (void)nb;
    return 0;
}

#endif
