/* quant_x86_k4.c: the K-quants (Q4_K, Q5_K, Q6_K) four rows per pass with AVX-512 VNNI, for
 * quant_x86_k.c's whole-matrix kernels (quant_x86_k_rows4).  Every row's result equals the
 * one-row kernel's (row_k_avx2) and so the twin's (quant_ref.c, dot_k) bit for bit. */
#include "quant_x86_impl.h"

#include <math.h>

#if defined(QUANT_HAVE_AVX2)

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
#if defined(QUANT_X86_K_ROWS4)

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

/* Rows w .. w + 3 stride of Q4_K or Q5_K against C activations a[0..C) (C <= 4, a constant
 * where inlined; C = 1 is the matvec): y[k ldy + r] = row_k_avx2's result for row r and
 * activation k, bit for bit.  Each row's quants, scales and mins are unpacked once per
 * super-block for the C activations; each (row, activation) keeps its own accumulators. */
static ALWAYS_INLINE void rows4_q45(QType t, const uint8_t *w, size_t stride,
                                    const BlockQ8_K *const *a, int C, int64_t nb, float *y,
                                    size_t ldy)
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
    __m512 acc[4][2], acc_m[4]; /* acc_m: Q4_K */
    __m128 summs[4];             /* Q5_K: row r in lane r */
    for (int k = 0; k < C; k++) {
        acc[k][0] = acc[k][1] = acc_m[k] = _mm512_setzero_ps();
        summs[k] = _mm_setzero_ps();
    }
    const uint8_t *pfw = w + K_PF_ROWS * stride;
    size_t pf = 0;
    for (int64_t b = 0; b < nb; b++) {
        pf = k_prefetch_upto(pfw, pf, 4 * wb * (size_t)(b + 1));
        const uint8_t *blk = w + wb * (size_t)b;
        const __m512i sm = k_scales_mins_x4(load16_x4(blk + 4, stride));
        /* each row's scales in both 128-bit lanes of its half: rows 0, 1 and rows 2, 3 */
        const __m512i smp[2] = {_mm512_shuffle_i64x2(sm, sm, _MM_SHUFFLE(1, 1, 0, 0)),
                                _mm512_shuffle_i64x2(sm, sm, _MM_SHUFFLE(3, 3, 2, 2))};
        __m512i hb[2];
        if (t == QTYPE_Q5_K)
            for (int p = 0; p < 2; p++)
                hb[p] = load_pair(blk + stride * (size_t)(2 * p) + offsetof(BlockQ5_K, qh),
                                  blk + stride * (size_t)(2 * p + 1) + offsetof(BlockQ5_K, qh));
        __m512i is[4][2];
        for (int k = 0; k < C; k++)
            is[k][0] = is[k][1] = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            /* the 16-bit pairs (scale 2c, scale 2c + 1), zero-extended bytes of each row's */
            const __m512i ssel =
                _mm512_set1_epi32((int)(0x80008000u | (uint32_t)(2 * c + 1) << 16 |
                                        (uint32_t)(2 * c)));
            __m512i lo[2], hi[2], sc[2];
            for (int p = 0; p < 2; p++) {
                const uint8_t *q = blk + stride * (size_t)(2 * p) + qso + 32 * c;
                const __m512i raw = load_pair(q, q + stride);
                if (t == QTYPE_Q5_K) { /* bit 2c of qh[l] for value 64c + l, 2c + 1 for +32 */
                    lo[p] = low_nibble_or(raw, bit_to_4(hb[p], 2 * c));
                    hi[p] = low_nibble_or(_mm512_srli_epi16(raw, 4), bit_to_4(hb[p], 2 * c + 1));
                } else {
                    lo[p] = _mm512_and_si512(raw, m4);
                    hi[p] = high_nibbles(raw);
                }
                sc[p] = _mm512_shuffle_epi8(smp[p], ssel);
            }
            for (int k = 0; k < C; k++) {
                const __m512i a0 = _mm512_broadcast_i64x4(load32(a[k][b].qs + 64 * c));
                const __m512i a1 = _mm512_broadcast_i64x4(load32(a[k][b].qs + 64 * c + 32));
                for (int p = 0; p < 2; p++) {
                    /* sub-blocks 2c and 2c + 1 by vpdpbusd (lane l: values 4l .. 4l + 3,
                     * |sum| <= 4 * 31 * 128 < 2^15), interleaved as 16-bit pairs, then both
                     * scaled and added by one vpdpwssd: the twin's exact lane sums */
                    const __m512i s0 = _mm512_dpbusd_epi32(zero, lo[p], a0);
                    const __m512i s1 = _mm512_dpbusd_epi32(zero, hi[p], a1);
                    const __m512i s01 = _mm512_ternarylogic_epi32(
                        s0, low16, _mm512_slli_epi32(s1, 16), 0xEA); /* (A & B) | C */
                    is[k][p] = _mm512_dpwssd_epi32(is[k][p], s01, sc[p]);
                }
            }
        }
        const __m512i msm = _mm512_shuffle_epi8(sm, mins_sel);
        for (int k = 0; k < C; k++) {
            const BlockQ8_K *ak = &a[k][b];
            const __m256 dd = k_d_dmin_x4(blk, stride, ak->d);
            /* the activation's sub-block sums b_2s + b_2s+1 in every 128-bit lane */
            const __m128i bs0 = _mm_loadu_si128((const __m128i *)(const void *)ak->bsums);
            const __m128i bs1 = _mm_loadu_si128((const __m128i *)(const void *)(ak->bsums + 8));
            const __m512i mm =
                _mm512_madd_epi16(msm, _mm512_broadcast_i32x4(_mm_hadd_epi16(bs0, bs1)));
            const __m512 d16 = _mm512_castps256_ps512(dd);
            acc[k][0] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel0, d16),
                                        _mm512_cvtepi32_ps(is[k][0]), acc[k][0]);
            acc[k][1] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel1, d16),
                                        _mm512_cvtepi32_ps(is[k][1]), acc[k][1]);
            if (t == QTYPE_Q4_K) {
                acc_m[k] = _mm512_fmadd_ps(_mm512_permutexvar_ps(msel, d16),
                                           _mm512_cvtepi32_ps(mm), acc_m[k]);
            } else { /* each row's four mins sums to one (exact), row r in lane r */
                const __m512i h = _mm512_add_epi32(mm, _mm512_shuffle_epi32(mm, _MM_PERM_BADC));
                const __m512i m1 = _mm512_add_epi32(h, _mm512_shuffle_epi32(h, _MM_PERM_CDAB));
                const __m128i m4r = _mm512_castsi512_si128(_mm512_permutexvar_epi32(
                    _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), m1));
                const __m128 dmin4 = _mm256_castps256_ps128(
                    _mm256_permutevar8x32_ps(dd, _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7)));
                summs[k] = _mm_fmadd_ps(dmin4, _mm_cvtepi32_ps(m4r), summs[k]);
            }
        }
    }
    k_prefetch_upto(pfw, pf, 4 * stride);
    for (int k = 0; k < C; k++) {
        float fa[32], fm[16], sm4[4]; /* row r's lanes at fa + 8r, its mins at fm + 4r */
        _mm512_storeu_ps(fa, acc[k][0]);
        _mm512_storeu_ps(fa + 16, acc[k][1]);
        _mm512_storeu_ps(fm, acc_m[k]);
        _mm_storeu_ps(sm4, summs[k]);
        for (int r = 0; r < 4; r++) {
            if (t == QTYPE_Q4_K) {
                __m128 m = _mm_loadu_ps(fm + 4 * r);
                m = _mm_add_ps(m, _mm_movehl_ps(m, m));
                m = _mm_add_ss(m, _mm_movehdup_ps(m));
                y[ldy * (size_t)k + (size_t)r] = hsum_f8(_mm256_loadu_ps(fa + 8 * r)) +
                                                 _mm_cvtss_f32(m);
            } else {
                y[ldy * (size_t)k + (size_t)r] = hsum_f8(_mm256_loadu_ps(fa + 8 * r)) + sm4[r];
            }
        }
    }
}

/* Rows w .. w + 3 stride of Q6_K against C activations (as rows4_q45): y[k ldy + r] =
 * row_k_avx2's result for row r and activation k, bit for bit. */
static ALWAYS_INLINE void rows4_q6(const uint8_t *w, size_t stride, const BlockQ8_K *const *a,
                                   int C, int64_t nb, float *y, size_t ldy)
{
    const size_t wb = sizeof(BlockQ6_K);
    const __m512i k32 = _mm512_set1_epi8(32);
    const __m512i dsel0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i dsel1 = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    __m512 acc[4][2];
    for (int k = 0; k < C; k++)
        acc[k][0] = acc[k][1] = _mm512_setzero_ps();
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
        __m512i is[4][2];
        for (int k = 0; k < C; k++)
            is[k][0] = is[k][1] = _mm512_setzero_si512();
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
            for (int g = 0; g < 4; g++) {
                /* scale 2g of the half in the low 128 bits of each row, 2g + 1 in the high */
                const __m512i ssel = _mm512_broadcast_i32x4(_mm_setr_epi8(
                    (char)(4 * g), (char)(4 * g + 1), (char)(4 * g), (char)(4 * g + 1),
                    (char)(4 * g), (char)(4 * g + 1), (char)(4 * g), (char)(4 * g + 1),
                    (char)(4 * g), (char)(4 * g + 1), (char)(4 * g), (char)(4 * g + 1),
                    (char)(4 * g), (char)(4 * g + 1), (char)(4 * g), (char)(4 * g + 1)));
                const __m512i sel = _mm512_add_epi8(
                    ssel, _mm512_setr_epi64(0, 0, 0x0202020202020202, 0x0202020202020202, 0, 0,
                                            0x0202020202020202, 0x0202020202020202));
                const __m512i sg[2] = {_mm512_shuffle_epi8(sch[0], sel),
                                       _mm512_shuffle_epi8(sch[1], sel)};
                for (int k = 0; k < C; k++) {
                    const __m512i av =
                        _mm512_broadcast_i64x4(load32(a[k][b].qs + 128 * h + 32 * g));
                    const __m512i a32 = _mm512_maddubs_epi16(k32, av); /* shared by the rows */
                    for (int p = 0; p < 2; p++) {
                        const __m512i pr =
                            _mm512_sub_epi16(_mm512_maddubs_epi16(q[p][g], av), a32);
                        is[k][p] = _mm512_dpwssd_epi32(is[k][p], pr, sg[p]);
                    }
                }
            }
        }
        uint16_t dh[4];
        for (int r = 0; r < 4; r++)
            memcpy(&dh[r], blk + stride * (size_t)r + offsetof(BlockQ6_K, d), 2);
        const __m128 dw4 = _mm_cvtph_ps(_mm_setr_epi16((short)dh[0], (short)dh[1], (short)dh[2],
                                                       (short)dh[3], 0, 0, 0, 0));
        for (int k = 0; k < C; k++) {
            const __m512 d16 = _mm512_castps128_ps512(_mm_mul_ps(dw4, _mm_set1_ps(a[k][b].d)));
            acc[k][0] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel0, d16),
                                        _mm512_cvtepi32_ps(is[k][0]), acc[k][0]);
            acc[k][1] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel1, d16),
                                        _mm512_cvtepi32_ps(is[k][1]), acc[k][1]);
        }
    }
    k_prefetch_upto(pfw, pf, 4 * stride);
    for (int k = 0; k < C; k++) {
        float fa[32]; /* row r's lanes at fa + 8r */
        _mm512_storeu_ps(fa, acc[k][0]);
        _mm512_storeu_ps(fa + 16, acc[k][1]);
        for (int r = 0; r < 4; r++)
            y[ldy * (size_t)k + (size_t)r] = hsum_f8(_mm256_loadu_ps(fa + 8 * r));
    }
}

/* Four rows against C activations, the type and C constants in each specialisation. */
static ALWAYS_INLINE void rows4_c(QType t, const uint8_t *w, size_t stride,
                                  const BlockQ8_K *const *a, int C, int64_t nb, float *y,
                                  size_t ldy)
{
    if (t == QTYPE_Q4_K)
        rows4_q45(QTYPE_Q4_K, w, stride, a, C, nb, y, ldy);
    else if (t == QTYPE_Q5_K)
        rows4_q45(QTYPE_Q5_K, w, stride, a, C, nb, y, ldy);
    else
        rows4_q6(w, stride, a, C, nb, y, ldy);
}
#endif

int quant_x86_k_rows4(QType t, float *y, const uint8_t *w, size_t stride, const BlockQ8_K *a,
                      int64_t nb, int d)
{
    int i = 0;
#if defined(QUANT_X86_K_ROWS4)
    for (; i + 4 <= d; i += 4)
        rows4_c(t, w + stride * (size_t)i, stride, &a, 1, nb, y + i, 0);
#else
    (void)t, (void)y, (void)w, (void)stride, (void)a, (void)nb, (void)d;
#endif
    return i;
}

/* Rows [0, returned) of a K-quant matrix against nact activations (astride bytes apart):
 * four rows by four activations per pass, the rows in chunks (a multiple of 4, about 64 KiB)
 * that stay in L2 while the tiles of activations pass over them. */
int quant_x86_k_mm4(QType t, float *y, size_t ldy, const uint8_t *w, size_t stride,
                    const uint8_t *act, size_t astride, int64_t nb, int d, int nact)
{
#if defined(QUANT_X86_K_ROWS4)
    const int d4 = d / 4 * 4;
    const int rc = quant_chunk_rows(stride) < 8 ? 4 : quant_chunk_rows(stride) / 4 * 4;
    for (int i0 = 0; i0 < d4; i0 += rc) {
        const int i1 = d4 - i0 < rc ? d4 : i0 + rc;
        for (int k = 0; k < nact; k += 4) {
            const BlockQ8_K *a[4];
            const int C = nact - k < 4 ? nact - k : 4;
            for (int j = 0; j < 4; j++)
                a[j] = (const BlockQ8_K *)(const void *)(act + astride * (size_t)(k + (j < C ? j : 0)));
            float *yk = y + ldy * (size_t)k;
            for (int i = i0; i < i1; i += 4) {
                const uint8_t *r4 = w + stride * (size_t)i;
                if (C == 4)
                    rows4_c(t, r4, stride, a, 4, nb, yk + i, ldy);
                else if (C == 3)
                    rows4_c(t, r4, stride, a, 3, nb, yk + i, ldy);
                else if (C == 2)
                    rows4_c(t, r4, stride, a, 2, nb, yk + i, ldy);
                else
                    rows4_c(t, r4, stride, a, 1, nb, yk + i, ldy);
            }
        }
    }
    return d4;
#else
    (void)t, (void)y, (void)ldy, (void)w, (void)stride, (void)act, (void)astride, (void)nb;
    (void)d, (void)nact;
    return 0;
#endif
}

#else
typedef int quant_x86_k4_unused; /* ISO C wants a declaration in every file */
#endif

