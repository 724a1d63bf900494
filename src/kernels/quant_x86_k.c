/* quant_x86_k.c: the x86 kernels of the K-quants (Q4_K, Q5_K, Q6_K) with Q8_K activations, in
 * ggml's AVX2 order (ggml_vec_dot_q*_K_q8_K): one row, whole matrices (four rows per pass
 * with AVX-512 VNNI), several activations.  The integer sums are exact; the float steps are
 * the twin's (quant_ref.c, dot_k) in its lanes, so every result equals it bit for bit. */
#include "quant_x86_impl.h"

#include <math.h>

#if defined(QUANT_HAVE_AVX2)

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

/* Half h (128 values) of a Q6_K super-block: its 6-bit quants (0..63, before the - 32) in
 * four registers of 32 bytes, values 32k .. 32k+31 of the half in q[k]. */
static ALWAYS_INLINE void q6_quants(const BlockQ6_K *w, int h, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    const __m256i ql0 = load32(w->ql + 64 * h), ql1 = load32(w->ql + 64 * h + 32);
    const __m256i qh = load32(w->qh + 32 * h);
    q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                           _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
}

/* Super-block b of a Q6_K row in 256 bits: 8 lanes whose sum is S = sum sc (q - 32) a. */
static ALWAYS_INLINE __m256i sb_q6_avx2(const BlockQ6_K *w, const BlockQ8_K *a, int64_t b)
{
    const __m256i k32 = _mm256_set1_epi8(32);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i q[4];
        q6_quants(&w[b], h, q);
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
    int i = quant_x86_k_rows4(t, y, w, stride, a, nb, d); /* quant_x86_k4.c */
    for (; i < d; i++) {
        const uint8_t *row = w + stride * (size_t)i;
        prefetch_ahead(row, stride);
        y[i] = t == QTYPE_Q4_K   ? row_k_avx2(QTYPE_Q4_K, row, a, nb)
             : t == QTYPE_Q5_K ? row_k_avx2(QTYPE_Q5_K, row, a, nb)
                               : row_k_avx2(QTYPE_Q6_K, row, a, nb);
    }
    return 1;
}

/* ---------------------------------------------------------------- several activations */


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
            const __m256i k32 = _mm256_set1_epi8(32);
            for (int h = 0; h < 2; h++) {
                __m256i q[4], scv[4];
                q6_quants(w, h, q);
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
#if defined(QUANT_X86_K_ROWS4)
    /* Four rows by four activations per pass (quant_x86_k4.c), the last d % 4 rows by the
     * one-row kernel once per activation: each Y[k] is matvec_k's, bit for bit. */
    const int i4 = quant_x86_k_mm4(t, y, ldy, w, stride, act, astride, nsb, d, nact);
    if (i4 < d)
        for (int k = 0; k < nact; k++)
            matvec_k(t, y + ldy * (size_t)k + (size_t)i4, w + stride * (size_t)i4, stride,
                     (const BlockQ8_K *)(const void *)(act + astride * (size_t)k), nsb, d - i4);
    return;
#endif
    if (t == QTYPE_Q4_K)
        mm_k_rows(QTYPE_Q4_K, y, ldy, w, stride, act, astride, nsb, d, nact);
    else if (t == QTYPE_Q5_K)
        mm_k_rows(QTYPE_Q5_K, y, ldy, w, stride, act, astride, nsb, d, nact);
    else
        mm_k_rows(QTYPE_Q6_K, y, ldy, w, stride, act, astride, nsb, d, nact);
}

float quant_x86_k_dot(QType t, const void *w, const BlockQ8_K *a, int64_t nb)
{
    return t == QTYPE_Q4_K   ? row_k_avx2(QTYPE_Q4_K, w, a, nb)
         : t == QTYPE_Q5_K ? row_k_avx2(QTYPE_Q5_K, w, a, nb)
                           : row_k_avx2(QTYPE_Q6_K, w, a, nb);
}

void quant_x86_k_matvec(QType t, float *y, const uint8_t *w, size_t stride, const BlockQ8_K *a,
                        int64_t nb, int d)
{
    matvec_k(t, y, w, stride, a, nb, d);
}

void quant_x86_k_matmul(QType t, float *y, size_t ldy, const uint8_t *w, size_t stride,
                        const uint8_t *act, size_t astride, int64_t nb, int d, int nact)
{
    matmul_k(t, y, ldy, w, stride, act, astride, nb, d, nact);
}

#else
typedef int quant_x86_k_unused; /* ISO C wants a declaration in every file */
#endif
