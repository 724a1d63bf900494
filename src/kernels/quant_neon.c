/* quant_neon.c: NEON row dots of the quantized types for ARMv8.0 (Cortex-A72: no dot-product
 * extension), by vmull_s8 (8 x 8 -> 16-bit products, exact) and vpadalq_s16 (pairwise sums into
 * 32-bit lanes, exact).
 *
 * As on x86, the integer block sums are exact and the float steps after them are the plain-C
 * twin's operations in its order (quant_ref.c): blocks b..b+3 and b+4..b+7 side by side in two
 * float32x4 accumulators, lane b % 8 as the twin's; AArch64 NEON arithmetic is IEEE with
 * subnormals kept, and -ffp-contract=off keeps multiply and add apart.  So every result equals
 * the twin's bit for bit (tests/aarch64/quant_check.c checks it under qemu).
 *
 * Types: Q8_0, Q4_0, Q5_0 (a matvec over the activation's scales and block sums taken once
 * per call; the stored quants of Q4_0/Q5_0 multiplied as they are, the offset taken back with
 * those sums), Q4_K, Q5_K, Q6_K, F16, BF16; the rest use the C twins. */
#include "quant_impl.h"

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

/* sum_j q_j a_j of a 32-value block, the quants as stored (Q4_0/Q5_0: before their offset,
 * which the caller takes back with the activation's block sum).  vmlal_s8 accumulates in 16
 * bits: four products of a 5-bit quant (<= 4 * 31 * 127) or two of Q8_0's (<= 2 * 128 * 127)
 * stay below 2^15, so the sums are exact. */
static inline int32x4_t block_dot(QType t, const uint8_t *blk, const int8_t *a)
{
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    if (t == QTYPE_Q8_0) {
        const int8x16_t w0 = vld1q_s8((const int8_t *)(blk + 2));
        const int8x16_t w1 = vld1q_s8((const int8_t *)(blk + 18));
        int16x8_t p0 = vmull_s8(vget_low_s8(w0), vget_low_s8(a0));
        p0 = vmlal_s8(p0, vget_high_s8(w0), vget_high_s8(a0));
        int16x8_t p1 = vmull_s8(vget_low_s8(w1), vget_low_s8(a1));
        p1 = vmlal_s8(p1, vget_high_s8(w1), vget_high_s8(a1));
        return vpadalq_s16(vpaddlq_s16(p0), p1);
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
    int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(a0));
    p = vmlal_s8(p, vget_high_s8(lo), vget_high_s8(a0));
    p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(a1));
    p = vmlal_s8(p, vget_high_s8(hi), vget_high_s8(a1));
    return vpaddlq_s16(p);
}

/* 4 halves (fp16 bit patterns) to floats, exactly. */
static inline float32x4_t half4(const uint16_t *h)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

/* ---------------------------------------------------------------- 32-value blocks */

#define NPREP_MAX 1024 /* blocks: rows of up to 32768 values; longer ones go block by block */

/* The activation's scales as floats and block sums times the weights' offset, once per call. */
typedef struct {
    float da[NPREP_MAX];
    int32_t off[NPREP_MAX];
} NeonPrep;

static void neon_prep(NeonPrep *p, QType t, const BlockQ8_0 *a, int64_t nb)
{
    const int offset = t == QTYPE_Q4_0 ? 8 : t == QTYPE_Q5_0 ? 16 : 0;
    for (int64_t b = 0; b < nb; b++) {
        p->da[b] = quant_fp16_to_fp32(a[b].d);
        p->off[b] = offset ? offset * (vaddlvq_s8(vld1q_s8(a[b].qs)) +
                                       vaddlvq_s8(vld1q_s8(a[b].qs + 16)))
                           : 0;
    }
}

static float row_q8_0_family(QType t, const uint8_t *w, const NeonPrep *p, const BlockQ8_0 *a,
                             int64_t nb)
{
    const size_t wb = t == QTYPE_Q8_0 ? sizeof(BlockQ8_0)
                    : t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        for (int h = 0; h < 2; h++) { /* blocks b + 4h .. b + 4h + 3 in acc[h] */
            const int64_t b0 = b + 4 * h;
            int32x4_t s[4];
            uint16x4_t dw = vdup_n_u16(0);
            for (int k = 0; k < 4; k++) {
                const uint8_t *blk = w + wb * (size_t)(b0 + k);
                s[k] = block_dot(t, blk, a[b0 + k].qs);
                dw = vld1_lane_u16((const uint16_t *)(const void *)blk, dw, 0);
                dw = vext_u16(dw, dw, 1); /* rotate: lane k ends in place after 4 loads */
            }
            const int32x4_t sumi = vsubq_s32(vpaddq_s32(vpaddq_s32(s[0], s[1]),
                                                        vpaddq_s32(s[2], s[3])),
                                             vld1q_s32(p->off + b0));
            const float32x4_t dwf = vcvt_f32_f16(vreinterpret_f16_u16(dw));
            const float32x4_t prod = vmulq_f32(dwf, vld1q_f32(p->da + b0));
            acc[h] = vaddq_f32(acc[h], vmulq_f32(vcvtq_f32_s32(sumi), prod));
        }
    }
    float lanes[8];
    vst1q_f32(lanes, acc[0]);
    vst1q_f32(lanes + 4, acc[1]);
    for (; b < nb; b++) {
        const uint8_t *blk = w + wb * (size_t)b;
        const int sumi = vaddvq_s32(block_dot(t, blk, a[b].qs)) - p->off[b];
        uint16_t dw;
        memcpy(&dw, blk, 2);
        lanes[b % 8] = lanes[b % 8] + (float)sumi * (quant_fp16_to_fp32(dw) * p->da[b]);
    }
    return quant_reduce8(lanes);
}

/* y[d] for the 32-value types; 0 if the row is too long for NeonPrep (then row by row). */
static int matvec_q8_0_family(QType t, float *y, const uint8_t *w, size_t stride,
                              const BlockQ8_0 *a, int64_t nb, int d)
{
    if (nb > NPREP_MAX)
        return 0;
    NeonPrep p;
    neon_prep(&p, t, a, nb);
    for (int i = 0; i < d; i++)
        y[i] = row_q8_0_family(t, w + stride * (size_t)i, &p, a, nb);
    return 1;
}

/* One row of a 32-value type whatever its length. */
static float dot_q8_0_family(QType t, const uint8_t *w, const BlockQ8_0 *a, int64_t nb)
{
    float y = 0;
    if (matvec_q8_0_family(t, &y, w, 0, a, nb, 1))
        return y;
    float lanes[8] = {0}; /* rows past NeonPrep: block by block, the same lanes */
    const size_t wb = t == QTYPE_Q8_0 ? sizeof(BlockQ8_0)
                    : t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    const int offset = t == QTYPE_Q4_0 ? 8 : t == QTYPE_Q5_0 ? 16 : 0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = w + wb * (size_t)b;
        const int off = offset ? offset * (vaddlvq_s8(vld1q_s8(a[b].qs)) +
                                           vaddlvq_s8(vld1q_s8(a[b].qs + 16)))
                               : 0;
        const int sumi = vaddvq_s32(block_dot(t, blk, a[b].qs)) - off;
        uint16_t dw;
        memcpy(&dw, blk, 2);
        lanes[b % 8] = lanes[b % 8] +
                       (float)sumi * (quant_fp16_to_fp32(dw) * quant_fp16_to_fp32(a[b].d));
    }
    return quant_reduce8(lanes);
}

/* ---------------------------------------------------------------- K-quants */

static float dot_q45_k(QType t, const void *vw, const BlockQ8_K *a, int64_t nb)
{
    float sum = 0;
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
        int S = 0, M = 0;
        for (int c = 0; c < 4; c++) { /* values 64c..64c+31 (low nibbles), +32..+63 (high) */
            uint8_t sc0, m0, sc1, m1;
            quant_scale_min_k4(2 * c, scales, &sc0, &m0);
            quant_scale_min_k4(2 * c + 1, scales, &sc1, &m1);
            /* 16-bit sums of four products (<= 4 * 31 * 127) per lane: exact */
            int16x8_t p0 = vdupq_n_s16(0), p1 = vdupq_n_s16(0);
            for (int half = 0; half < 2; half++) {
                const uint8x16_t raw = vld1q_u8(qs + 32 * c + 16 * half);
                uint8x16_t lo = vandq_u8(raw, m4), hi = vshrq_n_u8(raw, 4);
                if (t == QTYPE_Q5_K) {
                    const int8x16_t s0 = vdupq_n_s8((int8_t)-(2 * c));
                    const int8x16_t s1 = vdupq_n_s8((int8_t)-(2 * c + 1));
                    lo = vorrq_u8(lo, vshlq_n_u8(vandq_u8(vshlq_u8(hb[half], s0), one), 4));
                    hi = vorrq_u8(hi, vshlq_n_u8(vandq_u8(vshlq_u8(hb[half], s1), one), 4));
                }
                const int8x16_t al = vld1q_s8(a[b].qs + 64 * c + 16 * half);
                const int8x16_t ah = vld1q_s8(a[b].qs + 64 * c + 32 + 16 * half);
                const int8x16_t sl = vreinterpretq_s8_u8(lo), sh = vreinterpretq_s8_u8(hi);
                p0 = vmlal_s8(p0, vget_low_s8(sl), vget_low_s8(al));
                p0 = vmlal_s8(p0, vget_high_s8(sl), vget_high_s8(al));
                p1 = vmlal_s8(p1, vget_low_s8(sh), vget_low_s8(ah));
                p1 = vmlal_s8(p1, vget_high_s8(sh), vget_high_s8(ah));
            }
            S += sc0 * vaddlvq_s16(p0) + sc1 * vaddlvq_s16(p1);
            M += m0 * (a[b].bsums[4 * c] + a[b].bsums[4 * c + 1]);
            M += m1 * (a[b].bsums[4 * c + 2] + a[b].bsums[4 * c + 3]);
        }
        const float d = quant_fp16_to_fp32(t == QTYPE_Q4_K ? w4->d : w5->d) * a[b].d;
        const float dmin = quant_fp16_to_fp32(t == QTYPE_Q4_K ? w4->dmin : w5->dmin) * a[b].d;
        sum = sum + (d * (float)S - dmin * (float)M);
    }
    return sum;
}

static float dot_q6_k(const BlockQ6_K *w, const BlockQ8_K *a, int64_t nb)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(3);
    const int8x16_t k32 = vdupq_n_s8(32);
    float sum = 0;
    for (int64_t b = 0; b < nb; b++) {
        int S = 0;
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
                    /* two products (<= 2 * 32 * 127) per 16-bit lane: exact */
                    const int16x8_t dd = vmlal_s8(vmull_s8(vget_low_s8(qv), vget_low_s8(av)),
                                                  vget_high_s8(qv), vget_high_s8(av));
                    S += w[b].scales[grp] * vaddlvq_s16(dd);
                }
            }
        }
        sum = sum + (quant_fp16_to_fp32(w[b].d) * a[b].d) * (float)S;
    }
    return sum;
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

#endif
