/* quant_x86.c: AVX2 (with F16C, FMA) quantized kernels, VNNI where built.
 *
 * Each function computes exactly the order of its plain-C twin in quant_ref.c, which is
 * llama.cpp's AVX2 order (ggml_vec_dot_*): the integer lane sums are exact whatever the
 * instructions (vpmaddubsw pairs stay below 2^15, vpmaddwd and vpdpbusd sums below 2^31), and
 * the float steps after them are the same IEEE operations (FMA where ggml fuses) in the same
 * lanes.  So every result here equals the twin's bit for bit (for finite scales).
 *
 * Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K per row (vpmaddubsw + vpmaddwd, or vpdpbusd with VNNI);
 * F16, BF16 in the fp32 matvec's 32-lane order; the Q8_0 quantizers.  Other types use the
 * plain-C twins. */
#include "quant_impl.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(QUANT_HAVE_AVX2)
#include <immintrin.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* fp16 to float by F16C: exact, as quant_fp16_to_fp32, without the call. */
static ALWAYS_INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* ---------------------------------------------------------------- helpers */

/* Sum of the 8 int32 lanes (exact: integer). */
static ALWAYS_INLINE int hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* Lane b of the result = the sum of the 8 lanes of p[b] (eight blocks' partial sums). */
static ALWAYS_INLINE __m256i hsum8_i32(const __m256i *p)
{
    const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
    const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
    const __m256i h0123 = _mm256_hadd_epi32(h01, h23), h4567 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                            _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

/* 32 bytes, 0xFF where bit j of the 32-bit x is set. */
static ALWAYS_INLINE __m256i bits_to_bytes(uint32_t x)
{
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

/* The 32 4-bit quants of a 32-value block in value order: low nibbles, then high nibbles. */
static ALWAYS_INLINE __m256i nibbles32(const uint8_t *qs)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)qs);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
}

static ALWAYS_INLINE __m256i load32(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* sum over pairs of u * s as 8 int32 lanes: AVX2 vpmaddubsw + vpmaddwd, or VNNI vpdpbusd.
 * u * s pairs stay below 2^15 in magnitude for every use here (u <= 128, |s| <= 127). */
static ALWAYS_INLINE __m256i dot_us(int vnni, __m256i u, __m256i s)
{
#if defined(QUANT_HAVE_VNNI)
    if (vnni)
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#endif
    (void)vnni;
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* ---------------------------------------------------------------- 32-value blocks */

/* A block's 32 quants less their offset, as signed bytes. */
static ALWAYS_INLINE __m256i block_q(QType t, const uint8_t *blk)
{
    __m256i q;
    if (t == QTYPE_Q8_0) {
        q = load32(blk + 2);
    } else if (t == QTYPE_Q4_0) {
        q = _mm256_sub_epi8(nibbles32(blk + 2), _mm256_set1_epi8(8));
    } else { /* Q5_0: fifth bits in qh (blk + 2), nibbles at blk + 6 */
        uint32_t qh;
        memcpy(&qh, blk + 2, sizeof qh);
        const __m256i hb = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        q = _mm256_sub_epi8(_mm256_or_si256(nibbles32(blk + 6), hb), _mm256_set1_epi8(16));
    }
    return q;
}

/* Block b's 8 partial sums of q_j a_j (the quants q less their offset). */
static ALWAYS_INLINE __m256i block_partial(int vnni, QType t, const uint8_t *blk,
                                           const int8_t *a)
{
    const __m256i q = block_q(t, blk);
    /* |q| * (a with q's sign): the unsigned-by-signed product the instructions take. */
    return dot_us(vnni, _mm256_sign_epi8(q, q), _mm256_sign_epi8(load32(a), q));
}

/* hsum_float_8: lanes l + (l + 4), then (0 + 2) + (1 + 3). */
static ALWAYS_INLINE float hsum_f8(__m256 x)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* ggml_vec_dot_q8_0_q8_0's AVX2 order: per block acc = fma(dw * da, lanes, acc); Q4_0 as
 * llama.cpp's repacked gemv: sum = fma(S, dw * da, sum). */
static ALWAYS_INLINE float dot_q8_0_family(int vnni, QType t, const uint8_t *w,
                                           const BlockQ8_0 *a, int64_t nb)
{
    const size_t wb = t == QTYPE_Q8_0 ? sizeof(BlockQ8_0)
                    : t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    if (t == QTYPE_Q4_0) { /* the repacked gemv's order (the twin) */
        float sum = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = w + wb * (size_t)b;
            uint16_t dw;
            memcpy(&dw, blk, 2);
            sum = fmaf((float)hsum_i32(block_partial(vnni, t, blk, a[b].qs)),
                       h2f(dw) * h2f(a[b].d), sum);
        }
        return sum;
    }
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = w + wb * (size_t)b;
        uint16_t dw;
        memcpy(&dw, blk, 2);
        const __m256 d = _mm256_set1_ps(h2f(dw) * h2f(a[b].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(block_partial(vnni, t, blk, a[b].qs)), acc);
    }
    return hsum_f8(acc);
}

/* ---------------------------------------------------------------- prefetch */

/* Software prefetch PREFETCH_AHEAD bytes ahead of the weights being read (the rows of a
 * matrix are one stream): measured on this project's host, 4 KiB ahead lifts a q8_0/q4_0
 * layer from about 0.75 to 0.85 of the read roofline; prefetching past the end is harmless. */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 4096
#endif
static ALWAYS_INLINE void prefetch_ahead(const uint8_t *p, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)(p + PREFETCH_AHEAD + o), _MM_HINT_T0);
}

/* ---------------------------------------------------------------- K-quants */

/* The 8 scales (bytes 0..7) and 8 mins (8..15) of a Q4_K/Q5_K super-block's 12 packed bytes
 * (read as 16; the block goes on), in dwords u0..u2: [u0 & 3f, u2 & 0f | (u0 >> 6 & 3) << 4,
 * u1 & 3f, u2 >> 4 & 0f | (u1 >> 6 & 3) << 4], as ggml unpacks them, in vector registers. */
static ALWAYS_INLINE __m128i k_scales_mins(const uint8_t *scales)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)scales);
    const __m128i low = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)),
                                       _mm_setr_epi32(0, 0, 0, 4));
    const __m128i a = _mm_and_si128(low, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f,
                                                        0x0f0f0f0f));
    const __m128i top = _mm_slli_epi32(
        _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 6),
                      _mm_setr_epi32(0, 0x03030303, 0, 0x03030303)),
        4);
    return _mm_or_si128(a, top);
}

/* Super-block b of a Q4_K/Q5_K row in 256 bits: the 8 integer lanes of the scaled quant sums
 * (lane l: values with j % 32 in 4l..4l+3) and, in *mm, the mins times the activation's
 * 32-value sums in 4 lanes (lane k: sub-blocks 2k and 2k + 1), as ggml's AVX2 code. */
static ALWAYS_INLINE __m256i sb_q45_avx2(QType t, const void *vw, const BlockQ8_K *a, int64_t b,
                                         __m128i *mm)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const BlockQ4_K *w4 = (const BlockQ4_K *)vw + b;
    const BlockQ5_K *w5 = (const BlockQ5_K *)vw + b;
    const uint8_t *qs = t == QTYPE_Q4_K ? w4->qs : w5->qs;
    const __m128i sm = k_scales_mins(t == QTYPE_Q4_K ? w4->scales : w5->scales);
    const __m128i bs0 = _mm_loadu_si128((const __m128i *)(const void *)a[b].bsums);
    const __m128i bs1 = _mm_loadu_si128((const __m128i *)(const void *)(a[b].bsums + 8));
    *mm = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)),
                         _mm_hadd_epi16(bs0, bs1)); /* m_s (b_2s + b_2s+1) */
    const __m256i smb = _mm256_broadcastsi128_si256(sm);
    const __m256i hb = t == QTYPE_Q5_K ? load32(w5->qh) : _mm256_setzero_si256();
    __m256i acc = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i raw = load32(qs + 32 * c);
        __m256i lo = _mm256_and_si256(raw, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        if (t == QTYPE_Q5_K) { /* bit 2c of qh[l] for value 64c + l, bit 2c + 1 for +32 */
            const __m128i s0 = _mm_cvtsi32_si128(2 * c), s1 = _mm_cvtsi32_si128(2 * c + 1);
            lo = _mm256_or_si256(
                lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hb, s0), one), 4));
            hi = _mm256_or_si256(
                hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hb, s1), one), 4));
        }
        /* the sub-block scales as 16-bit lanes: byte 2c (2c + 1) of sm, zero-extended */
        const __m256i sc0 = _mm256_shuffle_epi8(smb, _mm256_set1_epi16((short)(0x8000 | (2 * c))));
        const __m256i sc1 =
            _mm256_shuffle_epi8(smb, _mm256_set1_epi16((short)(0x8000 | (2 * c + 1))));
        const __m256i p0 = _mm256_maddubs_epi16(lo, load32(a[b].qs + 64 * c));
        const __m256i p1 = _mm256_maddubs_epi16(hi, load32(a[b].qs + 64 * c + 32));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p0, sc0));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, sc1));
    }
    return acc;
}

/* Super-block b of a Q6_K row in 256 bits: 8 lanes whose sum is S = sum sc (q - 32) a. */
static ALWAYS_INLINE __m256i sb_q6_avx2(const BlockQ6_K *w, const BlockQ8_K *a, int64_t b)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    const __m256i k32 = _mm256_set1_epi8(32);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i ql0 = load32(w[b].ql + 64 * h), ql1 = load32(w[b].ql + 64 * h + 32);
        const __m256i qh = load32(w[b].qh + 32 * h);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                               _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
        q[1] = _mm256_or_si256(
            _mm256_and_si256(ql1, m4),
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
        q[2] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
        q[3] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
        for (int k = 0; k < 4; k++) {
            const __m256i av = load32(a[b].qs + 128 * h + 32 * k);
            /* (q - 32) a in pairs: q a < 16002 and 32 a <= 8128 keep both in int16 */
            const __m256i pr = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], av),
                                                _mm256_maddubs_epi16(k32, av));
            const int g = 8 * h + 2 * k; /* values 0..15 of the quarter, then 16..31 */
            const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(w[b].scales[g + 1]),
                                                 _mm_set1_epi16(w[b].scales[g]));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, scv));
        }
    }
    return acc;
}

/* A K-quant row in ggml's AVX2 order: per super-block acc = fma(da * dw, lanes, acc); the mins
 * (Q4_K) acc_m = fma(-da * dminw, mins lanes, acc_m), Q5_K's as one running fma sum; then
 * hsum_float_8(acc) plus the mins' sum. */
static ALWAYS_INLINE float row_k_avx2(QType t, const void *vw, const BlockQ8_K *a, int64_t nb)
{
    const size_t wb = t == QTYPE_Q4_K ? sizeof(BlockQ4_K)
                    : t == QTYPE_Q5_K ? sizeof(BlockQ5_K) : sizeof(BlockQ6_K);
    const size_t doff = t == QTYPE_Q6_K ? offsetof(BlockQ6_K, d) : 0;
    const uint8_t *w = vw;
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    float summs = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        uint16_t dh;
        memcpy(&dh, w + wb * (size_t)b + doff, 2);
        const float d = a[b].d * h2f(dh);
        if (t == QTYPE_Q6_K) {
            const __m256i s = sb_q6_avx2((const BlockQ6_K *)vw, a, b);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(s), acc);
        } else {
            uint16_t dmh;
            memcpy(&dmh, w + wb * (size_t)b + 2, 2);
            const float dmin = -a[b].d * h2f(dmh);
            __m128i mm;
            const __m256i s = sb_q45_avx2(t, vw, a, b, &mm);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(s), acc);
            if (t == QTYPE_Q4_K) {
                acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mm), acc_m);
            } else {
                __m128i ms = _mm_add_epi32(mm, _mm_shuffle_epi32(mm, _MM_SHUFFLE(1, 0, 3, 2)));
                ms = _mm_add_epi32(ms, _mm_shuffle_epi32(ms, _MM_SHUFFLE(2, 3, 0, 1)));
                summs = fmaf(dmin, (float)_mm_cvtsi128_si32(ms), summs);
            }
        }
    }
    if (t == QTYPE_Q4_K) {
        acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
        acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
        return hsum_f8(acc) + _mm_cvtss_f32(acc_m);
    }
    return hsum_f8(acc) + summs;
}

/* Rows of a K-quant matrix one after another, the weights prefetched ahead. */
__attribute__((noinline)) static int matvec_k(QType t, float *y, const uint8_t *w,
                                              size_t stride, const BlockQ8_K *a, int64_t nb,
                                              int d)
{
    for (int i = 0; i < d; i++) {
        const uint8_t *row = w + stride * (size_t)i;
        prefetch_ahead(row, stride);
        y[i] = t == QTYPE_Q4_K   ? row_k_avx2(QTYPE_Q4_K, row, a, nb)
             : t == QTYPE_Q5_K ? row_k_avx2(QTYPE_Q5_K, row, a, nb)
                               : row_k_avx2(QTYPE_Q6_K, row, a, nb);
    }
    return 1;
}

/* ---------------------------------------------------------------- F16, BF16 */

static ALWAYS_INLINE __m256 load8_half(int bf16, const uint16_t *p)
{
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (bf16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

/* The fp32 matvec's order: lanes 8q..8q+7 in acc[q], tail zero-padded, halving tree. */
static ALWAYS_INLINE float dot_half(int bf16, const uint16_t *w, const uint16_t *x, int64_t n)
{
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    int64_t j = 0;
    for (; j + 32 <= n; j += 32)
        for (int q = 0; q < 4; q++)
            acc[q] = _mm256_add_ps(acc[q], _mm256_mul_ps(load8_half(bf16, w + j + 8 * q),
                                                         load8_half(bf16, x + j + 8 * q)));
    if (j < n) {
        uint16_t wp[32] = {0}, xp[32] = {0}; /* +0 in both formats */
        memcpy(wp, w + j, (size_t)(n - j) * 2);
        memcpy(xp, x + j, (size_t)(n - j) * 2);
        for (int q = 0; q < 4; q++)
            acc[q] = _mm256_add_ps(acc[q], _mm256_mul_ps(load8_half(bf16, wp + 8 * q),
                                                         load8_half(bf16, xp + 8 * q)));
    }
    /* h = 16: lanes l and l + 16; h = 8: l and l + 8; then 4, 2, 1 within one vector */
    const __m256 c = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    float l8[8];
    _mm256_storeu_ps(l8, c);
    const float e0 = l8[0] + l8[4], e1 = l8[1] + l8[5], e2 = l8[2] + l8[6], e3 = l8[3] + l8[7];
    return (e0 + e2) + (e1 + e3);
}

/* ---------------------------------------------------------------- Q8_0 quantizer
 * block_amax loads a block's 32 values into v and returns their largest magnitude (exact);
 * store_q8 packs 32 int32 (in range) to the block's 32 int8 in order. */
static ALWAYS_INLINE float block_amax(__m256 v[4], const float *x, __m256 absmask)
{
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        m = _mm256_max_ps(m, _mm256_and_ps(v[k], absmask));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

static ALWAYS_INLINE void store_q8(int8_t *qs, const __m256i q[4])
{
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)qs, p);
}

/* The reference quantizer (quant_quantize_row), bit-identical to the twin: the
 * block's largest magnitude by max (exact), d and 1/d by the same scalar operations, x * id by
 * the same multiply, and roundf (half away from zero) as trunc plus one step away from zero
 * where the cut-off fraction is at least one half (exact for these magnitudes). */
static void quantize_q8_0_avx2(BlockQ8_0 *y, const float *x, int64_t nb)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 half = _mm256_set1_ps(0.5f), onev = _mm256_set1_ps(1.0f);
    for (int64_t b = 0; b < nb; b++, x += QK) {
        __m256 v[4];
        const float amax = block_amax(v, x, absmask);
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = quant_fp32_to_fp16(d);
        const __m256 idv = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            const __m256 s = _mm256_mul_ps(v[k], idv);
            const __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __m256 up = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(s, t), absmask), half,
                                            _CMP_GE_OQ);
            const __m256 one_signed = _mm256_or_ps(onev, _mm256_andnot_ps(absmask, s));
            q[k] = _mm256_cvtps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one_signed)));
        }
        store_q8(y[b].qs, q);
    }
}

/* The activation's Q8_0 blocks as llama.cpp's x86 backend makes them (quant_quantize_act_ref):
 * id = 127 / amax, x * id rounded to nearest even. */
static void act_q8_0_avx2(BlockQ8_0 *y, const float *x, int64_t nb)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < nb; b++, x += QK) {
        __m256 v[4];
        const float amax = block_amax(v, x, absmask);
        y[b].d = quant_fp32_to_fp16(amax / 127.f);
        const __m256 idv = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], idv),
                                                      _MM_FROUND_TO_NEAREST_INT |
                                                          _MM_FROUND_NO_EXC));
        store_q8(y[b].qs, q);
    }
}

int quant_x86_quantize(QType t, void *y, const float *x, int64_t n)
{
    if (t != QTYPE_Q8_0)
        return 0;
    quantize_q8_0_avx2(y, x, n / QK);
    return 1;
}

int quant_x86_quantize_act(QType t, void *y, const float *x, int64_t n)
{
    if (t != QTYPE_Q8_0)
        return 0;
    act_q8_0_avx2(y, x, n / QK);
    return 1;
}

/* ---------------------------------------------------------------- entry */

/* Rows of the 32-value types one after another, the weights prefetched ahead. */
/* Four rows side by side, each in its own order (dot_q8_0_family's): the four dependency
 * chains overlap in the pipeline; no row's arithmetic depends on the others. */
static ALWAYS_INLINE void dot4_q8_0_family(int vnni, QType t, const uint8_t *w, size_t stride,
                                           const BlockQ8_0 *a, int64_t nb, float *y)
{
    const size_t wb = t == QTYPE_Q8_0 ? sizeof(BlockQ8_0)
                    : t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < nb; b++) {
        const float da = h2f(a[b].d);
        for (int r = 0; r < 4; r++) {
            const uint8_t *blk = w + stride * (size_t)r + wb * (size_t)b;
            uint16_t dw;
            memcpy(&dw, blk, 2);
            const __m256i p = block_partial(vnni, t, blk, a[b].qs);
            if (t == QTYPE_Q4_0)
                sum[r] = fmaf((float)hsum_i32(p), h2f(dw) * da, sum[r]);
            else
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(dw) * da), _mm256_cvtepi32_ps(p),
                                         acc[r]);
        }
    }
    for (int r = 0; r < 4; r++)
        y[r] = t == QTYPE_Q4_0 ? sum[r] : hsum_f8(acc[r]);
}

/* Rows of the 32-value types four at a time, the weights prefetched ahead. */
__attribute__((noinline)) static int matvec_q8_0_family(int vnni, QType t, float *y,
                                                        const uint8_t *w, size_t stride,
                                                        const BlockQ8_0 *a, int64_t nb, int d)
{
    int i = 0;
    for (; i + 4 <= d; i += 4) {
        const uint8_t *row = w + stride * (size_t)i;
        prefetch_ahead(row, 4 * stride);
#define DOT4(V, T) dot4_q8_0_family(V, T, row, stride, a, nb, y + i)
        if (vnni)
            t == QTYPE_Q4_0 ? DOT4(1, QTYPE_Q4_0) : t == QTYPE_Q8_0 ? DOT4(1, QTYPE_Q8_0)
                                                                     : DOT4(1, QTYPE_Q5_0);
        else
            t == QTYPE_Q4_0 ? DOT4(0, QTYPE_Q4_0) : t == QTYPE_Q8_0 ? DOT4(0, QTYPE_Q8_0)
                                                                     : DOT4(0, QTYPE_Q5_0);
#undef DOT4
    }
    for (; i < d; i++) {
        const uint8_t *row = w + stride * (size_t)i;
        prefetch_ahead(row, stride);
        y[i] = vnni ? dot_q8_0_family(1, t, row, a, nb) : dot_q8_0_family(0, t, row, a, nb);
    }
    return 1;
}

int quant_x86_matvec(int vnni, QType t, float *y, const void *w, size_t stride,
                     const void *x, int64_t n, int d)
{
#if !defined(QUANT_HAVE_VNNI)
    vnni = 0;
#endif
    if (stride && (t == QTYPE_Q8_0 || t == QTYPE_Q4_0 || t == QTYPE_Q5_0))
        return matvec_q8_0_family(vnni, t, y, w, stride, x, n / QK, d);
    if (stride && (t == QTYPE_Q4_K || t == QTYPE_Q5_K || t == QTYPE_Q6_K))
        return matvec_k(t, y, w, stride, x, n / QK_K, d);
    (void)vnni, (void)t, (void)y, (void)w, (void)stride, (void)x, (void)n, (void)d;
    return 0;
}

/* ---------------------------------------------------------------- several activations */

/* One row against tb activations (tb <= 4; constant where inlined): each block's quants are
 * unpacked once and dotted with every activation; each (row, activation) keeps
 * dot_q8_0_family's own accumulator and order. */
static ALWAYS_INLINE void mm_q8_0_tile(int vnni, QType t, const uint8_t *row, const uint8_t *act,
                                      size_t astride, int64_t nb, int tb, float *y, size_t ldy)
{
    const size_t wb = t == QTYPE_Q8_0 ? sizeof(BlockQ8_0)
                    : t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    if (t == QTYPE_Q4_0 && tb == 4) {
        /* Q4_0's four scalar chains sum = fma(S, dw * da, sum) as the lanes of one vector:
         * the four block sums S by one horizontal-add tree (exact integers), then one fused
         * multiply-add per lane, the same IEEE operation as fmaf. */
        __m128 sum4 = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + wb * (size_t)b;
            uint16_t dw;
            memcpy(&dw, blk, 2);
            const float fw = h2f(dw);
            const __m256i q = block_q(t, blk);
            const __m256i qa = _mm256_sign_epi8(q, q);
            __m256i p[4];
            float dk[4];
            for (int k = 0; k < 4; k++) {
                const BlockQ8_0 *a = (const BlockQ8_0 *)(const void *)(act + astride * (size_t)k) + b;
                p[k] = dot_us(vnni, qa, _mm256_sign_epi8(load32(a->qs), q));
                dk[k] = fw * h2f(a->d);
            }
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]),
                                                _mm256_hadd_epi32(p[2], p[3]));
            const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(h),
                                             _mm256_extracti128_si256(h, 1));
            sum4 = _mm_fmadd_ps(_mm_cvtepi32_ps(s4), _mm_loadu_ps(dk), sum4);
        }
        float out[4];
        _mm_storeu_ps(out, sum4);
        for (int k = 0; k < 4; k++)
            y[ldy * (size_t)k] = out[k];
        return;
    }
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + wb * (size_t)b;
        uint16_t dw;
        memcpy(&dw, blk, 2);
        const float fw = h2f(dw);
        const __m256i q = block_q(t, blk);
        const __m256i qa = _mm256_sign_epi8(q, q);
        for (int k = 0; k < tb; k++) {
            const BlockQ8_0 *a = (const BlockQ8_0 *)(const void *)(act + astride * (size_t)k) + b;
            const __m256i p = dot_us(vnni, qa, _mm256_sign_epi8(load32(a->qs), q));
            if (t == QTYPE_Q4_0)
                sum[k] = fmaf((float)hsum_i32(p), fw * h2f(a->d), sum[k]);
            else
                acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(fw * h2f(a->d)), _mm256_cvtepi32_ps(p),
                                         acc[k]);
        }
    }
    for (int k = 0; k < tb; k++)
        y[ldy * (size_t)k] = t == QTYPE_Q4_0 ? sum[k] : hsum_f8(acc[k]);
}

/* Rows [0, d) in chunks (quant_chunk_rows); each tile of up to 4 activations passes over a
 * chunk row by row, the tile in L1 and the chunk in L2. */
static ALWAYS_INLINE void mm_q8_0_rows(int vnni, QType t, float *y, size_t ldy, const uint8_t *w,
                                       size_t stride, const uint8_t *act, size_t astride,
                                       int64_t nb, int d, int nact)
{
    const int rc = quant_chunk_rows(stride);
    for (int i0 = 0; i0 < d; i0 += rc) {
        const int i1 = d - i0 < rc ? d : i0 + rc;
        for (int k = 0; k < nact; k += 4) {
            const uint8_t *ak = act + astride * (size_t)k;
            for (int i = i0; i < i1; i++) {
                const uint8_t *row = w + stride * (size_t)i;
                float *yk = y + ldy * (size_t)k + (size_t)i;
                if (k == 0)
                    prefetch_ahead(row, stride);
                const int tb = nact - k; /* a constant tile size for each specialisation */
                if (tb >= 4)
                    mm_q8_0_tile(vnni, t, row, ak, astride, nb, 4, yk, ldy);
                else if (tb == 3)
                    mm_q8_0_tile(vnni, t, row, ak, astride, nb, 3, yk, ldy);
                else if (tb == 2)
                    mm_q8_0_tile(vnni, t, row, ak, astride, nb, 2, yk, ldy);
                else
                    mm_q8_0_tile(vnni, t, row, ak, astride, nb, 1, yk, ldy);
            }
        }
    }
}

__attribute__((noinline)) static void matmul_q8_0_family(int vnni, QType t, float *y,
                                                         size_t ldy, const uint8_t *w,
                                                         size_t stride, const uint8_t *act,
                                                         size_t astride, int64_t nb, int d,
                                                         int nact)
{
#define MMROWS(V, T) mm_q8_0_rows(V, T, y, ldy, w, stride, act, astride, nb, d, nact)
    if (vnni)
        t == QTYPE_Q4_0 ? MMROWS(1, QTYPE_Q4_0) : t == QTYPE_Q8_0 ? MMROWS(1, QTYPE_Q8_0)
                                                                   : MMROWS(1, QTYPE_Q5_0);
    else
        t == QTYPE_Q4_0 ? MMROWS(0, QTYPE_Q4_0) : t == QTYPE_Q8_0 ? MMROWS(0, QTYPE_Q8_0)
                                                                   : MMROWS(0, QTYPE_Q5_0);
#undef MMROWS
}

/* One K-quant row against tb activations (tb <= 4): each super-block's quants, scales and mins
 * unpacked once, then the integer lanes of every activation (the same exact integer sums as
 * sb_q45_avx2 / sb_q6_avx2) and row_k_avx2's float steps per activation, in its order. */
static ALWAYS_INLINE void mm_k_tile(QType t, const uint8_t *row, const uint8_t *act,
                                    size_t astride, int64_t nsb, int tb, float *y, size_t ldy)
{
    const size_t wb = t == QTYPE_Q4_K ? sizeof(BlockQ4_K)
                    : t == QTYPE_Q5_K ? sizeof(BlockQ5_K) : sizeof(BlockQ6_K);
    const size_t doff = t == QTYPE_Q6_K ? offsetof(BlockQ6_K, d) : 0;
    __m256 acc[4];
    __m128 acc_m[4];
    float summs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < 4; k++) {
        acc[k] = _mm256_setzero_ps();
        acc_m[k] = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < nsb; b++) {
        const uint8_t *blk = row + wb * (size_t)b;
        uint16_t dh;
        memcpy(&dh, blk + doff, 2);
        const float dw = h2f(dh);
        __m256i is[4];
        for (int k = 0; k < 4; k++)
            is[k] = _mm256_setzero_si256();
        if (t == QTYPE_Q6_K) {
            const BlockQ6_K *w = (const BlockQ6_K *)(const void *)blk;
            const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
            const __m256i k32 = _mm256_set1_epi8(32);
            for (int h = 0; h < 2; h++) {
                const __m256i ql0 = load32(w->ql + 64 * h), ql1 = load32(w->ql + 64 * h + 32);
                const __m256i qh = load32(w->qh + 32 * h);
                __m256i q[4], scv[4];
                q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                                       _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
                q[1] = _mm256_or_si256(
                    _mm256_and_si256(ql1, m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
                q[2] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
                q[3] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
                for (int g4 = 0; g4 < 4; g4++) {
                    const int g = 8 * h + 2 * g4;
                    scv[g4] = _mm256_set_m128i(_mm_set1_epi16(w->scales[g + 1]),
                                               _mm_set1_epi16(w->scales[g]));
                }
                for (int k = 0; k < tb; k++) {
                    const BlockQ8_K *a = (const BlockQ8_K *)(const void *)(act + astride * (size_t)k) + b;
                    for (int g4 = 0; g4 < 4; g4++) {
                        const __m256i av = load32(a->qs + 128 * h + 32 * g4);
                        const __m256i pr = _mm256_sub_epi16(_mm256_maddubs_epi16(q[g4], av),
                                                            _mm256_maddubs_epi16(k32, av));
                        is[k] = _mm256_add_epi32(is[k], _mm256_madd_epi16(pr, scv[g4]));
                    }
                }
            }
            for (int k = 0; k < tb; k++) {
                const BlockQ8_K *a = (const BlockQ8_K *)(const void *)(act + astride * (size_t)k) + b;
                acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(a->d * dw), _mm256_cvtepi32_ps(is[k]),
                                         acc[k]);
            }
            continue;
        }
        const BlockQ4_K *w4 = (const BlockQ4_K *)(const void *)blk;
        const BlockQ5_K *w5 = (const BlockQ5_K *)(const void *)blk;
        uint16_t dmh;
        memcpy(&dmh, blk + 2, 2);
        const float dmw = h2f(dmh);
        const uint8_t *qs = t == QTYPE_Q4_K ? w4->qs : w5->qs;
        const __m128i sm = k_scales_mins(t == QTYPE_Q4_K ? w4->scales : w5->scales);
        const __m256i smb = _mm256_broadcastsi128_si256(sm);
        const __m256i hb = t == QTYPE_Q5_K ? load32(w5->qh) : _mm256_setzero_si256();
        const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
        for (int c = 0; c < 4; c++) {
            const __m256i raw = load32(qs + 32 * c);
            __m256i lo = _mm256_and_si256(raw, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            if (t == QTYPE_Q5_K) {
                const __m128i s0 = _mm_cvtsi32_si128(2 * c), s1 = _mm_cvtsi32_si128(2 * c + 1);
                lo = _mm256_or_si256(
                    lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hb, s0), one), 4));
                hi = _mm256_or_si256(
                    hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hb, s1), one), 4));
            }
            const __m256i sc0 =
                _mm256_shuffle_epi8(smb, _mm256_set1_epi16((short)(0x8000 | (2 * c))));
            const __m256i sc1 =
                _mm256_shuffle_epi8(smb, _mm256_set1_epi16((short)(0x8000 | (2 * c + 1))));
            for (int k = 0; k < tb; k++) {
                const BlockQ8_K *a = (const BlockQ8_K *)(const void *)(act + astride * (size_t)k) + b;
                const __m256i p0 = _mm256_maddubs_epi16(lo, load32(a->qs + 64 * c));
                const __m256i p1 = _mm256_maddubs_epi16(hi, load32(a->qs + 64 * c + 32));
                is[k] = _mm256_add_epi32(is[k], _mm256_madd_epi16(p0, sc0));
                is[k] = _mm256_add_epi32(is[k], _mm256_madd_epi16(p1, sc1));
            }
        }
        const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
        for (int k = 0; k < tb; k++) {
            const BlockQ8_K *a = (const BlockQ8_K *)(const void *)(act + astride * (size_t)k) + b;
            const __m128i bs0 = _mm_loadu_si128((const __m128i *)(const void *)a->bsums);
            const __m128i bs1 = _mm_loadu_si128((const __m128i *)(const void *)(a->bsums + 8));
            const __m128i mm = _mm_madd_epi16(mins, _mm_hadd_epi16(bs0, bs1));
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(a->d * dw), _mm256_cvtepi32_ps(is[k]), acc[k]);
            const float dmin = -a->d * dmw;
            if (t == QTYPE_Q4_K) {
                acc_m[k] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mm), acc_m[k]);
            } else {
                __m128i ms = _mm_add_epi32(mm, _mm_shuffle_epi32(mm, _MM_SHUFFLE(1, 0, 3, 2)));
                ms = _mm_add_epi32(ms, _mm_shuffle_epi32(ms, _MM_SHUFFLE(2, 3, 0, 1)));
                summs[k] = fmaf(dmin, (float)_mm_cvtsi128_si32(ms), summs[k]);
            }
        }
    }
    for (int k = 0; k < tb; k++) {
        if (t == QTYPE_Q4_K) {
            __m128 m = _mm_add_ps(acc_m[k], _mm_movehl_ps(acc_m[k], acc_m[k]));
            m = _mm_add_ss(m, _mm_movehdup_ps(m));
            y[ldy * (size_t)k] = hsum_f8(acc[k]) + _mm_cvtss_f32(m);
        } else {
            y[ldy * (size_t)k] = hsum_f8(acc[k]) + summs[k];
        }
    }
}

/* Rows [0, d) in chunks, tiles of up to 4 activations over each chunk (as mm_q8_0_rows). */
static ALWAYS_INLINE void mm_k_rows(QType t, float *y, size_t ldy, const uint8_t *w,
                                    size_t stride, const uint8_t *act, size_t astride,
                                    int64_t nsb, int d, int nact)
{
    const int rc = quant_chunk_rows(stride);
    for (int i0 = 0; i0 < d; i0 += rc) {
        const int i1 = d - i0 < rc ? d : i0 + rc;
        for (int k = 0; k < nact; k += 4) {
            const uint8_t *ak = act + astride * (size_t)k;
            for (int i = i0; i < i1; i++) {
                const uint8_t *row = w + stride * (size_t)i;
                float *yk = y + ldy * (size_t)k + (size_t)i;
                if (k == 0)
                    prefetch_ahead(row, stride);
                const int tb = nact - k;
                if (tb >= 4)
                    mm_k_tile(t, row, ak, astride, nsb, 4, yk, ldy);
                else if (tb == 3)
                    mm_k_tile(t, row, ak, astride, nsb, 3, yk, ldy);
                else if (tb == 2)
                    mm_k_tile(t, row, ak, astride, nsb, 2, yk, ldy);
                else
                    mm_k_tile(t, row, ak, astride, nsb, 1, yk, ldy);
            }
        }
    }
}

__attribute__((noinline)) static void matmul_k(QType t, float *y, size_t ldy, const uint8_t *w,
                                               size_t stride, const uint8_t *act,
                                               size_t astride, int64_t nsb, int d, int nact)
{
    if (t == QTYPE_Q4_K)
        mm_k_rows(QTYPE_Q4_K, y, ldy, w, stride, act, astride, nsb, d, nact);
    else if (t == QTYPE_Q5_K)
        mm_k_rows(QTYPE_Q5_K, y, ldy, w, stride, act, astride, nsb, d, nact);
    else
        mm_k_rows(QTYPE_Q6_K, y, ldy, w, stride, act, astride, nsb, d, nact);
}

/* F16 and BF16 rows in chunks, each activation over a chunk (in L2). */
__attribute__((noinline)) static void matmul_half(int bf16, float *y, size_t ldy,
                                                  const uint8_t *w, size_t stride,
                                                  const uint8_t *act, size_t astride, int64_t n,
                                                  int d, int nact)
{
    const int rc = quant_chunk_rows(stride);
    for (int i0 = 0; i0 < d; i0 += rc) {
        const int i1 = d - i0 < rc ? d : i0 + rc;
        for (int k = 0; k < nact; k++) {
            const uint16_t *a = (const uint16_t *)(const void *)(act + astride * (size_t)k);
            for (int i = i0; i < i1; i++) {
                const uint16_t *row = (const uint16_t *)(const void *)(w + stride * (size_t)i);
                if (k == 0)
                    prefetch_ahead((const uint8_t *)row, stride);
                y[ldy * (size_t)k + (size_t)i] =
                    bf16 ? dot_half(1, row, a, n) : dot_half(0, row, a, n);
            }
        }
    }
}

int quant_x86_matmul(int vnni, QType t, float *y, size_t ldy, const void *w, size_t stride,
                     const void *x, size_t act_stride, int64_t n, int d, int nb)
{
#if !defined(QUANT_HAVE_VNNI)
    vnni = 0;
#endif
    if (t == QTYPE_Q8_0 || t == QTYPE_Q4_0 || t == QTYPE_Q5_0) {
        matmul_q8_0_family(vnni, t, y, ldy, w, stride, x, act_stride, n / QK, d, nb);
        return 1;
    }
    if (t == QTYPE_Q4_K || t == QTYPE_Q5_K || t == QTYPE_Q6_K) {
        matmul_k(t, y, ldy, w, stride, x, act_stride, n / QK_K, d, nb);
        return 1;
    }
    if (t == QTYPE_F16 || t == QTYPE_BF16) {
        matmul_half(t == QTYPE_BF16, y, ldy, w, stride, x, act_stride, n, d, nb);
        return 1;
    }
    return 0;
}

int quant_x86_dot(int vnni, QType t, const void *w, const void *x, int64_t n, float *out)
{
#if !defined(QUANT_HAVE_VNNI)
    vnni = 0;
#endif
    if (quant_x86_matvec(vnni, t, out, w, 0, x, n, 1))
        return 1;
    switch (t) {
    case QTYPE_Q8_0:
        *out = vnni ? dot_q8_0_family(1, QTYPE_Q8_0, w, x, n / QK)
                    : dot_q8_0_family(0, QTYPE_Q8_0, w, x, n / QK);
        return 1;
    case QTYPE_Q4_0:
        *out = vnni ? dot_q8_0_family(1, QTYPE_Q4_0, w, x, n / QK)
                    : dot_q8_0_family(0, QTYPE_Q4_0, w, x, n / QK);
        return 1;
    case QTYPE_Q5_0:
        *out = vnni ? dot_q8_0_family(1, QTYPE_Q5_0, w, x, n / QK)
                    : dot_q8_0_family(0, QTYPE_Q5_0, w, x, n / QK);
        return 1;
    case QTYPE_Q4_K:
        *out = row_k_avx2(QTYPE_Q4_K, w, x, n / QK_K);
        return 1;
    case QTYPE_Q5_K:
        *out = row_k_avx2(QTYPE_Q5_K, w, x, n / QK_K);
        return 1;
    case QTYPE_Q6_K:
        *out = row_k_avx2(QTYPE_Q6_K, w, x, n / QK_K);
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

#else /* no AVX2: the dispatcher never calls these */

int quant_x86_matmul(int vnni, QType t, float *y, size_t ldy, const void *w, size_t stride,
                     const void *x, size_t act_stride, int64_t n, int d, int nb)
{
    (void)vnni, (void)t, (void)y, (void)ldy, (void)w, (void)stride, (void)x, (void)act_stride;
    (void)n, (void)d, (void)nb;
    return 0;
}

int quant_x86_matvec(int vnni, QType t, float *y, const void *w, size_t stride,
                     const void *x, int64_t n, int d)
{
    (void)vnni, (void)t, (void)y, (void)w, (void)stride, (void)x, (void)n, (void)d;
    return 0;
}

int quant_x86_dot(int vnni, QType t, const void *w, const void *x, int64_t n, float *out)
{
    (void)vnni, (void)t, (void)w, (void)x, (void)n, (void)out;
    return 0;
}

int quant_x86_quantize(QType t, void *y, const float *x, int64_t n)
{
    (void)t, (void)y, (void)x, (void)n;
    return 0;
}

int quant_x86_quantize_act(QType t, void *y, const float *x, int64_t n)
{
    (void)t, (void)y, (void)x, (void)n;
    return 0;
}

#endif
