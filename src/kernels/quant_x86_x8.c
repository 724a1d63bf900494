/* quant_x86_x8.c: Q4_0 and Q8_0 matrices in eight-row groups (quant_x8.c's layout) on the
 * x86 paths: whole matrices and several activations.  Each row's chain is the rows' kernels'
 * (rows8_q4_0, rows8_q8_0) and the twin's (quant_ref.c, dot_q8_0_family), bit for bit.
 * Q8_0 needs AVX-512 VNNI (its stored quants q + 128 are unsigned bytes for vpdpbusd; on
 * AVX2, vpmaddubsw's pairs of those bytes times the activation's would pass 2^15 and
 * saturate, so AVX2 keeps the rows and |q|, sign(a, q)). */
#include "quant_x86_impl.h"

#if defined(QUANT_HAVE_AVX2)

/* ---------------------------------------------------------------- Q4_0 in x8 groups
 * A group's block (quant_x8.c) is the eight fp16 scales (one load, one F16C conversion),
 * then the eight rows' 16 quant bytes: rows 0-3 and 4-7 as one 64-byte load each with
 * AVX-512 VNNI, rows 2h and 2h + 1 as one 32-byte load on AVX2; no scattered loads.  Per
 * block the eight rows' integer sums of n a (n = q + 8, the stored nibbles) come out in
 * lane r for row r, exact in any order; S = that less the activation's offset (once per
 * matrix, q4_0_offsets), then the eight chains sum = fma(S, dw * da, sum) as the lanes of
 * one FMA: the twin's order per row.  The groups are one stream, prefetched X8_PF bytes
 * ahead line by line (each line once).  Measured on this project's host (bench/matvec_bench
 * -q, TinyLlama's layers, 1 thread): 2048 bytes ahead, Q8_0 groups at 0.87-0.89 of the read
 * roofline against 0.81-0.83 at 4096 (Q4_0: 0.78-0.80, as with the three lines a block 4096
 * ahead it had before; 4096 ahead by the line gave Q4_0 0.61). */
#define X8_UNIT (8 * sizeof(BlockQ4_0))
#define X8_PF 2048

#if defined(QUANT_X86_ROWS8)
/* Block u's eight rows against activation block a with vpdpbusd: row r's sum in lane r. */
static ALWAYS_INLINE __m256i x8_sums_vnni(const uint8_t *u, const BlockQ8_0 *a)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512();
    const __m512i alo = _mm512_broadcast_i32x4(load16(a->qs));
    const __m512i ahi = _mm512_broadcast_i32x4(load16(a->qs + 16));
    __m512i s[2];
    for (int h = 0; h < 2; h++) { /* rows 4h .. 4h + 3, four lanes each */
        const __m512i n = _mm512_loadu_si512(u + 16 + 64 * h);
        const __m512i lo = _mm512_and_si512(n, m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(n, 4), m4);
        s[h] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, alo), hi, ahi);
    }
    return rows8_sums(s[0], s[1], 0);
}
#endif

/* The same with vpmaddubsw (nibble times activation byte, pairs below 2^13) and vpmaddwd. */
static ALWAYS_INLINE __m256i x8_sums_avx2(const uint8_t *u, const BlockQ8_0 *a)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i alo = _mm256_broadcastsi128_si256(load16(a->qs));
    const __m256i ahi = _mm256_broadcastsi128_si256(load16(a->qs + 16));
    __m256i p[4]; /* rows 2h and 2h + 1: lanes 0-3 and 4-7 */
    for (int h = 0; h < 4; h++) {
        const __m256i n = load32(u + 16 + 32 * h);
        const __m256i lo = _mm256_and_si256(n, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(n, 4), m4);
        const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo),
                                             _mm256_maddubs_epi16(hi, ahi));
        p[h] = _mm256_madd_epi16(s16, ones);
    }
    /* rows 0 2 4 6 | 1 3 5 7 after two rounds of pairwise adds, then in row order */
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]),
                                        _mm256_hadd_epi32(p[2], p[3]));
    return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Groups w (d / 8 of them, nb blocks each) against tb activations (tb <= 4, constant where
 * inlined): act k at act + astride k with offsets off[k]; y[k * ldy + r] = row r's chain for
 * activation k. */
static ALWAYS_INLINE void x8_groups_tile(int vnni, const uint8_t *w, int64_t nb, int d,
                                         const uint8_t *act, size_t astride,
                                         int32_t (*off)[Q4_0_OFF_MAX], int tb, float *y,
                                         size_t ldy)
{
    const size_t gb = X8_UNIT * (size_t)nb;
    size_t pf = X8_PF; /* the stream's next line to prefetch, from w */
    for (int g = 0; g < d / 8; g++) {
        const uint8_t *wg = w + gb * (size_t)g;
        __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                         _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *u = wg + X8_UNIT * (size_t)b;
            for (const size_t to = (size_t)(u - w) + X8_UNIT + X8_PF; pf < to; pf += 64)
                _mm_prefetch((const char *)(w + pf), _MM_HINT_T0);
            const __m256 dw = _mm256_cvtph_ps(load16(u));
            for (int k = 0; k < tb; k++) {
                const BlockQ8_0 *a =
                    (const BlockQ8_0 *)(const void *)(act + astride * (size_t)k) + b;
#if defined(QUANT_X86_ROWS8)
                const __m256i raw = vnni ? x8_sums_vnni(u, a) : x8_sums_avx2(u, a);
#else
                (void)vnni;
                const __m256i raw = x8_sums_avx2(u, a);
#endif
                const __m256i S = _mm256_sub_epi32(raw, _mm256_set1_epi32(off[k][b]));
                const __m256 d8 = _mm256_mul_ps(dw, _mm256_set1_ps(h2f(a->d)));
                sum[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), d8, sum[k]);
            }
        }
        for (int k = 0; k < tb; k++)
            _mm256_storeu_ps(y + ldy * (size_t)k + 8 * (size_t)g, sum[k]);
    }
}

/* Chunks of groups of about 64 KiB stay in L2 while each tile of activations passes. */
static ALWAYS_INLINE void x8_matmul(int vnni, float *y, size_t ldy, const uint8_t *w,
                                   const uint8_t *x, size_t act_stride, int64_t nbl, int d,
                                   int nb)
{
    const size_t gb = X8_UNIT * (size_t)nbl;
    const int cg = nb == 1 ? d / 8 : quant_chunk_rows(gb);
    int32_t off[4][Q4_0_OFF_MAX];
    for (int g0 = 0; g0 < d / 8; g0 += cg) {
        const int ng = d / 8 - g0 < cg ? d / 8 - g0 : cg;
        const uint8_t *wc = w + gb * (size_t)g0;
        for (int k = 0; k < nb; k += 4) {
            const int tb = nb - k < 4 ? nb - k : 4;
            const uint8_t *ak = x + act_stride * (size_t)k;
            for (int j = 0; j < tb; j++)
                q4_0_offsets(vnni, (const BlockQ8_0 *)(const void *)(ak + act_stride * (size_t)j),
                             nbl, off[j]);
            float *yk = y + ldy * (size_t)k + 8 * (size_t)g0;
            if (tb == 4)
                x8_groups_tile(vnni, wc, nbl, 8 * ng, ak, act_stride, off, 4, yk, ldy);
            else if (tb == 3)
                x8_groups_tile(vnni, wc, nbl, 8 * ng, ak, act_stride, off, 3, yk, ldy);
            else if (tb == 2)
                x8_groups_tile(vnni, wc, nbl, 8 * ng, ak, act_stride, off, 2, yk, ldy);
            else
                x8_groups_tile(vnni, wc, nbl, 8 * ng, ak, act_stride, off, 1, yk, ldy);
        }
    }
}

/* ---------------------------------------------------------------- Q8_0 in x8 groups
 * A group's block is the eight fp16 scales, then rows 2k and 2k + 1's 64 quant bytes, as
 * q + 128, at 16 + 64 k: one load each for vpdpbusd, nothing to flip.  Per block and row
 * pair the accumulator starts at the activation's -128 times each lane's four bytes (corr,
 * once per matrix and activation), so that every 32-bit lane ends as the exact sum of q a
 * over its four bytes: rows8_q8_0's lanes.  Then, as there, the eight scales by one F16C
 * conversion times the activation's (the twin's dw * da per row), and per lane
 * acc = fma(d, lanes, acc) for rows 2k (low half) and 2k + 1 (high half); hsum_float_8 at
 * the end.  The matrix is one stream, prefetched X8_PF bytes ahead line by line. */
#define X8_UNIT_Q8 (8 * sizeof(BlockQ8_0))

#if defined(QUANT_X86_ROWS8)
/* corr[8 b + l]: minus 128 times the sum of activation block b's bytes 4l .. 4l + 3. */
static void q8_0_corr(const BlockQ8_0 *a, int64_t nb, int32_t *corr)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80), zero = _mm256_setzero_si256();
    for (int64_t b = 0; b < nb; b++)
        _mm256_storeu_si256((__m256i *)(void *)(corr + 8 * b),
                            _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, flip,
                                                                       load32(a[b].qs))));
}

/* ng groups from w (nb blocks each) against activation a: y[8 g + r] for row r of group g. */
static void x8_q8_0_matvec(const uint8_t *w, int64_t nb, int ng, const BlockQ8_0 *a,
                           const int32_t *corr, float *y)
{
    __m512i dsel[4]; /* lanes 0..7 take row 2k's d, lanes 8..15 row 2k + 1's */
    for (int k = 0; k < 4; k++)
        dsel[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * k)),
                                     _mm256_set1_epi32(2 * k + 1), 1);
    const size_t gb = X8_UNIT_Q8 * (size_t)nb;
    size_t pf = X8_PF; /* the stream's next line to prefetch, from w */
    for (int g = 0; g < ng; g++) {
        const uint8_t *wg = w + gb * (size_t)g;
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *u = wg + X8_UNIT_Q8 * (size_t)b;
            for (const size_t to = (size_t)(u - w) + X8_UNIT_Q8 + X8_PF; pf < to; pf += 64)
                _mm_prefetch((const char *)(w + pf), _MM_HINT_T0);
            const __m256 d8 = _mm256_mul_ps(_mm256_cvtph_ps(load16(u)),
                                            _mm256_set1_ps(h2f(a[b].d)));
            const __m512 d16 = _mm512_castps256_ps512(d8);
            const __m512i av = _mm512_broadcast_i64x4(load32(a[b].qs));
            const __m512i c = _mm512_broadcast_i64x4(load32(corr + 8 * b));
            for (int k = 0; k < 4; k++) {
                const __m512i s = _mm512_dpbusd_epi32(c, _mm512_loadu_si512(u + 16 + 64 * k), av);
                acc[k] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel[k], d16),
                                         _mm512_cvtepi32_ps(s), acc[k]);
            }
        }
        for (int k = 0; k < 4; k++) {
            y[8 * g + 2 * k] = hsum_f8(_mm512_castps512_ps256(acc[k]));
            y[8 * g + 2 * k + 1] = hsum_f8(_mm512_extractf32x8_ps(acc[k], 1));
        }
    }
}
#endif

/* quant_x8.c: whether Q8_0 groups have kernels in this build. */
int quant_x86_x8_q8_0_built(void)
{
#if defined(QUANT_X86_ROWS8)
    return 1;
#else
    return 0;
#endif
}

/* quant_impl.h: the x8 groups on the x86 paths; 0 (nothing done) where the rows are longer
 * than Q4_0_OFF_MAX blocks (Q4_0) or the path has no kernel (Q8_0 without AVX-512 VNNI). */
int quant_x86_x8_matvec(int vnni, QType t, float *y, const void *w, const void *x, int64_t n,
                        int d)
{
    if (t == QTYPE_Q8_0) {
#if defined(QUANT_X86_ROWS8)
        if (!vnni)
            return 0;
        const int64_t nbl = n / QK;
        int32_t *corr = quant_x86_scratch(sizeof(int32_t) * 8 * (size_t)nbl);
        q8_0_corr(x, nbl, corr);
        x8_q8_0_matvec(w, nbl, d / 8, x, corr, y);
        return 1;
#else
        return 0;
#endif
    }
    return quant_x86_x8_matmul(vnni, t, y, 0, w, x, 0, n, d, 1);
}

int quant_x86_x8_matmul(int vnni, QType t, float *y, size_t ldy, const void *w, const void *x,
                        size_t act_stride, int64_t n, int d, int nb)
{
    const int64_t nbl = n / QK;
    if (t == QTYPE_Q8_0) {
#if defined(QUANT_X86_ROWS8)
        if (!vnni)
            return 0;
        if (nb == 1)
            return quant_x86_x8_matvec(vnni, t, y, w, x, n, d);
        quant_x86_mm_q8_0_x8(y, ldy, w, x, act_stride, nbl, d, nb);
        return 1;
#else
        return 0;
#endif
    }
    if (nbl > Q4_0_OFF_MAX)
        return 0;
#if defined(QUANT_X86_ROWS8)
    if (vnni) {
        x8_matmul(1, y, ldy, w, x, act_stride, nbl, d, nb);
        return 1;
    }
#else
    (void)vnni;
#endif
    x8_matmul(0, y, ldy, w, x, act_stride, nbl, d, nb);
    return 1;
}

#else
typedef int quant_x86_x8_unused; /* ISO C wants a declaration in every file */
#endif
