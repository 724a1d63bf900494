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

/* ---------------------------------------------------------------- four rows, 512 bits
 * With AVX-512 VNNI, K-quant matrices go four rows per pass, two rows in the two 256-bit
 * halves of each 512-bit register, so that each of the activation's 32-byte pieces is loaded
 * (broadcast) once for four rows.  Integer lanes as sb_q45_avx2 / sb_q6_avx2, the same exact
 * sums by other instructions: Q4_K/Q5_K's two sub-blocks of a 64-value chunk by vpdpbusd,
 * interleaved as 16-bit pairs and scaled by one vpdpwssd; Q6_K's vpmaddubsw pairs by
 * vpdpwssd (vpmaddwd and the add in one); the four rows' scales and mins unpacked side by
 * side in the four 128-bit lanes of one register.  The float steps stay per row in
 * row_k_avx2's order: the fma(da * dw, lanes, acc) of two rows in the two halves of one
 * register, Q4_K's mins fma in four lanes per row (row r in lanes 4r .. 4r + 3), Q5_K's
 * running sums in lane r. */
#if defined(QUANT_HAVE_VNNI) && defined(__AVX512F__) && defined(__AVX512BW__)
#define QUANT_X86_K_ROWS4 1

/* Prefetches [p + done, p + to) by lines; returns the new prefetched length (the 32-value
 * types' prefetch_upto: a stretch of rows some rows ahead, swept evenly per super-block). */
static ALWAYS_INLINE size_t k_prefetch_upto(const uint8_t *p, size_t done, size_t to)
{
    for (; done < to; done += 64)
        _mm_prefetch((const char *)(p + done), _MM_HINT_T0);
    return done;
}

/* Rows ahead whose stretch the four-row passes prefetch: about 18 KiB (Q4_K) and 27 KiB
 * (Q6_K) on 2048 columns.  Measured on this project's host with huge pages: 8, 16 and 24
 * rows were within the noise of each other; Q4_K layers went from about 0.55 of the read
 * roofline (one row at a time, 4 KiB ahead) to about 0.8. */
#define K_PF_ROWS 16

/* 256 bits at p in the low half, at q in the high half. */
static ALWAYS_INLINE __m512i load_pair(const uint8_t *p, const uint8_t *q)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(load32(p)), load32(q), 1);
}

/* 16 bytes at p + r stride in 128-bit lane r (r = 0..3). */
static ALWAYS_INLINE __m512i load16_x4(const uint8_t *p, size_t stride)
{
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)p));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)(p + stride)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)(p + 2 * stride)),
                           2);
    return _mm512_inserti32x4(
        v, _mm_loadu_si128((const __m128i *)(const void *)(p + 3 * stride)), 3);
}

/* k_scales_mins of four rows' packed bytes, row r in 128-bit lane r. */
static ALWAYS_INLINE __m512i k_scales_mins_x4(__m512i v)
{
    const __m512i low = _mm512_srlv_epi32(_mm512_shuffle_epi32(v, _MM_PERM_CBCA),
                                          _mm512_set4_epi32(4, 0, 0, 0));
    const __m512i a = _mm512_and_si512(
        low, _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m512i top = _mm512_slli_epi32(
        _mm512_and_si512(_mm512_srli_epi32(_mm512_shuffle_epi32(v, _MM_PERM_BBAA), 6),
                         _mm512_set4_epi32(0x03030303, 0, 0x03030303, 0)),
        4);
    return _mm512_or_si512(a, top);
}

/* The fp16 pairs at p + r stride (r = 0..3; Q4_K/Q5_K's d, dmin) times da, -da: lanes
 * 2r, 2r + 1 = row r's da * dw, -da * dminw (row_k_avx2's d and dmin, the same products). */
static ALWAYS_INLINE __m256 k_d_dmin_x4(const uint8_t *p, size_t stride, float da)
{
    uint32_t h[4];
    for (int r = 0; r < 4; r++)
        memcpy(&h[r], p + stride * (size_t)r, 4);
    const __m128i v = _mm_setr_epi32((int)h[0], (int)h[1], (int)h[2], (int)h[3]);
    return _mm256_mul_ps(_mm256_cvtph_ps(v), _mm256_setr_ps(da, -da, da, -da, da, -da, da, -da));
}

/* Bits 2k and 2k + 1 of every byte of qh moved to bits 4 and 5, the rest zero: one GF(2)
 * affine step where built (the bit matrix's byte 7 - i picks the input bits of output bit i),
 * else shift and mask. */
static ALWAYS_INLINE __m512i q6_high(__m512i qh, int k)
{
#if defined(__GFNI__)
    const long long m = (long long)((1ull << (2 * k)) << 24 | (1ull << (2 * k + 1)) << 16);
    return _mm512_gf2p8affine_epi64_epi8(qh, _mm512_set1_epi64(m), 0);
#else
    const __m512i s = _mm512_srl_epi16(qh, _mm_cvtsi32_si128(2 * k));
    return _mm512_slli_epi16(_mm512_and_si512(s, _mm512_set1_epi8(3)), 4);
#endif
}

/* (a & 0x0F) | h for bytes h with only bits 4 and 5 set: one ternary-logic instruction. */
static ALWAYS_INLINE __m512i low_nibble_or(__m512i a, __m512i h)
{
    return _mm512_ternarylogic_epi32(a, _mm512_set1_epi8(0x0F), h, 0xEA); /* (A & B) | C */
}

/* The high nibble of every byte (bits 4..7 to 0..3, the rest zero). */
static ALWAYS_INLINE __m512i high_nibbles(__m512i v)
{
#if defined(__GFNI__)
    return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(0x1020408000000000ll), 0);
#else
    return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
#endif
}

/* Bit j of every byte moved to bit 4, the rest zero (Q5_K's fifth bits). */
static ALWAYS_INLINE __m512i bit_to_4(__m512i v, int j)
{
#if defined(__GFNI__)
    return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64((long long)((1ull << j) << 24)),
                                         0);
#else
    const __m512i s = _mm512_srl_epi16(v, _mm_cvtsi32_si128(j));
    return _mm512_slli_epi16(_mm512_and_si512(s, _mm512_set1_epi8(1)), 4);
#endif
}

/* Rows w .. w + 3 stride of Q4_K or Q5_K: y[r] = row_k_avx2's result for row r, bit for bit. */
static ALWAYS_INLINE void rows4_q45(QType t, const uint8_t *w, size_t stride,
                                    const BlockQ8_K *a, int64_t nb, float *y)
{
    const size_t wb = t == QTYPE_Q4_K ? sizeof(BlockQ4_K) : sizeof(BlockQ5_K);
    const size_t qso = t == QTYPE_Q4_K ? offsetof(BlockQ4_K, qs) : offsetof(BlockQ5_K, qs);
    const __m512i m4 = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512();
    const __m512i low16 = _mm512_set1_epi32(0xFFFF);
    /* bytes 8..15 of each 128-bit lane (the mins) zero-extended to 16 bits */
    const __m512i mins_sel = _mm512_broadcast_i32x4(
        _mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1));
    /* the d of rows 2p (lanes 0..7) and 2p + 1 (lanes 8..15); the dmin of row r in 4r..4r+3 */
    const __m512i dsel0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    const __m512i dsel1 = _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6);
    const __m512i msel = _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    __m512 acc_m = _mm512_setzero_ps(); /* Q4_K */
    __m128 summs = _mm_setzero_ps();    /* Q5_K: row r in lane r */
    const uint8_t *pfw = w + K_PF_ROWS * stride;
    size_t pf = 0;
    for (int64_t b = 0; b < nb; b++) {
        pf = k_prefetch_upto(pfw, pf, 4 * wb * (size_t)(b + 1));
        const uint8_t *blk = w + wb * (size_t)b;
        const __m512i sm = k_scales_mins_x4(load16_x4(blk + 4, stride));
        /* each row's scales in both 128-bit lanes of its half: rows 0, 1 and rows 2, 3 */
        const __m512i smp[2] = {_mm512_shuffle_i64x2(sm, sm, _MM_SHUFFLE(1, 1, 0, 0)),
                                _mm512_shuffle_i64x2(sm, sm, _MM_SHUFFLE(3, 3, 2, 2))};
        const __m256 dd = k_d_dmin_x4(blk, stride, a[b].d);
        /* the activation's sub-block sums b_2s + b_2s+1 in every 128-bit lane */
        const __m128i bs0 = _mm_loadu_si128((const __m128i *)(const void *)a[b].bsums);
        const __m128i bs1 = _mm_loadu_si128((const __m128i *)(const void *)(a[b].bsums + 8));
        const __m512i mm = _mm512_madd_epi16(_mm512_shuffle_epi8(sm, mins_sel),
                                             _mm512_broadcast_i32x4(_mm_hadd_epi16(bs0, bs1)));
        __m512i hb[2];
        if (t == QTYPE_Q5_K)
            for (int p = 0; p < 2; p++)
                hb[p] = load_pair(blk + stride * (size_t)(2 * p) + offsetof(BlockQ5_K, qh),
                                  blk + stride * (size_t)(2 * p + 1) + offsetof(BlockQ5_K, qh));
        __m512i is[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int c = 0; c < 4; c++) {
            const __m512i a0 = _mm512_broadcast_i64x4(load32(a[b].qs + 64 * c));
            const __m512i a1 = _mm512_broadcast_i64x4(load32(a[b].qs + 64 * c + 32));
            /* the 16-bit pairs (scale 2c, scale 2c + 1), zero-extended bytes of each row's */
            const __m512i ssel =
                _mm512_set1_epi32((int)(0x80008000u | (uint32_t)(2 * c + 1) << 16 |
                                        (uint32_t)(2 * c)));
            for (int p = 0; p < 2; p++) {
                const uint8_t *q = blk + stride * (size_t)(2 * p) + qso + 32 * c;
                const __m512i raw = load_pair(q, q + stride);
                __m512i lo, hi;
                if (t == QTYPE_Q5_K) { /* bit 2c of qh[l] for value 64c + l, 2c + 1 for +32 */
                    lo = low_nibble_or(raw, bit_to_4(hb[p], 2 * c));
                    hi = low_nibble_or(_mm512_srli_epi16(raw, 4), bit_to_4(hb[p], 2 * c + 1));
                } else {
                    lo = _mm512_and_si512(raw, m4);
                    hi = high_nibbles(raw);
                }
                /* sub-blocks 2c and 2c + 1 by vpdpbusd (lane l: values 4l .. 4l + 3, |sum| <=
                 * 4 * 31 * 128 < 2^15), interleaved as 16-bit pairs, then both scaled and
                 * added by one vpdpwssd: the same exact lane sums as the twin's */
                const __m512i s0 = _mm512_dpbusd_epi32(zero, lo, a0);
                const __m512i s1 = _mm512_dpbusd_epi32(zero, hi, a1);
                const __m512i s01 = _mm512_ternarylogic_epi32(s0, low16, _mm512_slli_epi32(s1, 16),
                                                              0xEA); /* (A & B) | C */
                is[p] = _mm512_dpwssd_epi32(is[p], s01, _mm512_shuffle_epi8(smp[p], ssel));
            }
        }
        const __m512 d16 = _mm512_castps256_ps512(dd);
        acc[0] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel0, d16), _mm512_cvtepi32_ps(is[0]),
                                 acc[0]);
        acc[1] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel1, d16), _mm512_cvtepi32_ps(is[1]),
                                 acc[1]);
        if (t == QTYPE_Q4_K) {
            acc_m = _mm512_fmadd_ps(_mm512_permutexvar_ps(msel, d16), _mm512_cvtepi32_ps(mm),
                                    acc_m);
        } else { /* each row's four mins sums to one (exact), row r in lane r */
            const __m512i h = _mm512_add_epi32(mm, _mm512_shuffle_epi32(mm, _MM_PERM_BADC));
            const __m512i m1 = _mm512_add_epi32(h, _mm512_shuffle_epi32(h, _MM_PERM_CDAB));
            const __m128i m4r = _mm512_castsi512_si128(_mm512_permutexvar_epi32(
                _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), m1));
            const __m128 dmin4 = _mm256_castps256_ps128(
                _mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7)));
            summs = _mm_fmadd_ps(dmin4, _mm_cvtepi32_ps(m4r), summs);
        }
    }
    k_prefetch_upto(pfw, pf, 4 * stride);
    float fa[32], fm[16], sm4[4]; /* row r's lanes at fa + 8r, its mins at fm + 4r */
    _mm512_storeu_ps(fa, acc[0]);
    _mm512_storeu_ps(fa + 16, acc[1]);
    _mm512_storeu_ps(fm, acc_m);
    _mm_storeu_ps(sm4, summs);
    for (int r = 0; r < 4; r++) {
        if (t == QTYPE_Q4_K) {
            __m128 m = _mm_loadu_ps(fm + 4 * r);
            m = _mm_add_ps(m, _mm_movehl_ps(m, m));
            m = _mm_add_ss(m, _mm_movehdup_ps(m));
            y[r] = hsum_f8(_mm256_loadu_ps(fa + 8 * r)) + _mm_cvtss_f32(m);
        } else {
            y[r] = hsum_f8(_mm256_loadu_ps(fa + 8 * r)) + sm4[r];
        }
    }
}

/* Rows w .. w + 3 stride of Q6_K: y[r] = row_k_avx2's result for row r, bit for bit. */
static ALWAYS_INLINE void rows4_q6(const uint8_t *w, size_t stride, const BlockQ8_K *a,
                                   int64_t nb, float *y)
{
    const size_t wb = sizeof(BlockQ6_K);
    const __m512i k32 = _mm512_set1_epi8(32);
    const __m512i dsel0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i dsel1 = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    const uint8_t *pfw = w + K_PF_ROWS * stride;
    size_t pf = 0;
    for (int64_t b = 0; b < nb; b++) {
        pf = k_prefetch_upto(pfw, pf, 4 * wb * (size_t)(b + 1));
        const uint8_t *blk = w + wb * (size_t)b;
        /* each row's 16 scales as int16: rows 2p, 2p + 1 in the halves of sc[p] */
        __m512i sc[2];
        for (int p = 0; p < 2; p++) {
            const uint8_t *s = blk + stride * (size_t)(2 * p) + offsetof(BlockQ6_K, scales);
            sc[p] = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_cvtepi8_epi16(
                    _mm_loadu_si128((const __m128i *)(const void *)s))),
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(s + stride))),
                1);
        }
        __m512i is[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int h = 0; h < 2; h++) {
            __m512i q[2][4], sch[2];
            for (int p = 0; p < 2; p++) {
                /* the half's eight scales (int16) in both 128-bit lanes of each row's half */
                sch[p] = h ? _mm512_shuffle_i64x2(sc[p], sc[p], _MM_SHUFFLE(3, 3, 1, 1))
                           : _mm512_shuffle_i64x2(sc[p], sc[p], _MM_SHUFFLE(2, 2, 0, 0));
                const uint8_t *r0 = blk + stride * (size_t)(2 * p);
                const __m512i ql0 = load_pair(r0 + 64 * h, r0 + stride + 64 * h);
                const __m512i ql1 = load_pair(r0 + 64 * h + 32, r0 + stride + 64 * h + 32);
                const __m512i qh = load_pair(r0 + offsetof(BlockQ6_K, qh) + 32 * h,
                                             r0 + stride + offsetof(BlockQ6_K, qh) + 32 * h);
                /* q6_quants: low nibbles of ql0, ql1, then their high nibbles */
                q[p][0] = low_nibble_or(ql0, q6_high(qh, 0));
                q[p][1] = low_nibble_or(ql1, q6_high(qh, 1));
                q[p][2] = low_nibble_or(_mm512_srli_epi16(ql0, 4), q6_high(qh, 2));
                q[p][3] = low_nibble_or(_mm512_srli_epi16(ql1, 4), q6_high(qh, 3));
            }
            for (int k = 0; k < 4; k++) {
                const __m512i av = _mm512_broadcast_i64x4(load32(a[b].qs + 128 * h + 32 * k));
                const __m512i a32 = _mm512_maddubs_epi16(k32, av); /* shared by the rows */
                /* scale 2k of the half in the low 128 bits of each row, 2k + 1 in the high */
                const __m512i ssel = _mm512_broadcast_i32x4(_mm_setr_epi8(
                    (char)(4 * k), (char)(4 * k + 1), (char)(4 * k), (char)(4 * k + 1),
                    (char)(4 * k), (char)(4 * k + 1), (char)(4 * k), (char)(4 * k + 1),
                    (char)(4 * k), (char)(4 * k + 1), (char)(4 * k), (char)(4 * k + 1),
                    (char)(4 * k), (char)(4 * k + 1), (char)(4 * k), (char)(4 * k + 1)));
                const __m512i sel = _mm512_add_epi8(
                    ssel, _mm512_setr_epi64(0, 0, 0x0202020202020202, 0x0202020202020202, 0, 0,
                                            0x0202020202020202, 0x0202020202020202));
                for (int p = 0; p < 2; p++) {
                    const __m512i pr = _mm512_sub_epi16(_mm512_maddubs_epi16(q[p][k], av), a32);
                    is[p] = _mm512_dpwssd_epi32(is[p], pr, _mm512_shuffle_epi8(sch[p], sel));
                }
            }
        }
        uint16_t dh[4];
        for (int r = 0; r < 4; r++)
            memcpy(&dh[r], blk + stride * (size_t)r + offsetof(BlockQ6_K, d), 2);
        const __m128 d4 = _mm_mul_ps(
            _mm_cvtph_ps(_mm_setr_epi16((short)dh[0], (short)dh[1], (short)dh[2], (short)dh[3],
                                        0, 0, 0, 0)),
            _mm_set1_ps(a[b].d));
        const __m512 d16 = _mm512_castps128_ps512(d4);
        acc[0] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel0, d16), _mm512_cvtepi32_ps(is[0]),
                                 acc[0]);
        acc[1] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel1, d16), _mm512_cvtepi32_ps(is[1]),
                                 acc[1]);
    }
    k_prefetch_upto(pfw, pf, 4 * stride);
    float fa[32]; /* row r's lanes at fa + 8r */
    _mm512_storeu_ps(fa, acc[0]);
    _mm512_storeu_ps(fa + 16, acc[1]);
    for (int r = 0; r < 4; r++)
        y[r] = hsum_f8(_mm256_loadu_ps(fa + 8 * r));
}
#endif

/* Rows of a K-quant matrix one after another, the weights prefetched ahead. */
__attribute__((noinline)) static int matvec_k(QType t, float *y, const uint8_t *w,
                                              size_t stride, const BlockQ8_K *a, int64_t nb,
                                              int d)
{
    int i = 0;
#if defined(QUANT_X86_K_ROWS4)
    for (; i + 4 <= d; i += 4) {
        const uint8_t *r4 = w + stride * (size_t)i;
        if (t == QTYPE_Q4_K)
            rows4_q45(QTYPE_Q4_K, r4, stride, a, nb, y + i);
        else if (t == QTYPE_Q5_K)
            rows4_q45(QTYPE_Q5_K, r4, stride, a, nb, y + i);
        else
            rows4_q6(r4, stride, a, nb, y + i);
    }
#endif
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
    /* The four-row passes, once per activation, over chunks of rows (a multiple of 4) that
     * stay in L2 while the activations pass: each Y[k] is matvec_k's, bit for bit. */
    const int rc = quant_chunk_rows(stride) < 8 ? 4 : quant_chunk_rows(stride) / 4 * 4;
    for (int i0 = 0; i0 < d; i0 += rc) {
        const int n = d - i0 < rc ? d - i0 : rc;
        for (int k = 0; k < nact; k++)
            matvec_k(t, y + ldy * (size_t)k + (size_t)i0, w + stride * (size_t)i0, stride,
                     (const BlockQ8_K *)(const void *)(act + astride * (size_t)k), nsb, n);
    }
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
