/* quant_x86_q8.c: the x86 kernels of the 32-value types with Q8_0 activations (Q8_0, Q4_0,
 * Q5_0): one row, whole matrices, several activations.  AVX2 with vpmaddubsw + vpmaddwd, or
 * VNNI's vpdpbusd where built.  Matrices: Q8_0 and Q4_0 eight rows per pass with AVX-512
 * VNNI (512-bit integer sums, the rows' scales in one vector), Q4_0 eight rows on AVX2, the
 * rest four rows; the weights prefetched a group or two ahead (prefetch_upto).  Q4_0 and
 * (AVX-512 VNNI) Q8_0 in eight-row groups (quant_x8.c's layout), the engine's layout for its
 * matrices where quant_x8_preferred: quant_x86_x8_matvec/matmul.
 *
 * Every function computes exactly the order of its plain-C twin in quant_ref.c
 * (dot_q8_0_family), llama.cpp's: the integer block sums are exact in any instruction order,
 * the float steps after them are the same IEEE operations in the same lanes. */
#include "quant_x86_impl.h"

#include <math.h>

#if defined(QUANT_HAVE_AVX2)

/* ---------------------------------------------------------------- one row */

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

/* ---------------------------------------------------------------- entry */

/* The rows of a group (four or eight) are one stretch of memory, read block by block across
 * the rows.  The prefetch sweeps the stretch 8 rows on for Q8_0 and 16 for Q4_0 and Q5_0
 * (about 17 KiB ahead for TinyLlama's 2048 columns), the same share of it per block, so that
 * it stays evenly ahead of the reads.  Measured on this project's host (bench/roofline.sh
 * -q, the eight-row passes): a q8_0/q4_0 layer from about 0.45 of the read roofline with the
 * whole group prefetched at its start (4 KiB on) to about 0.85; 8 KiB or 16 KiB ahead did
 * well on 2048 columns only.  Prefetches [p + done, p + to) by lines; returns the new
 * prefetched length. */
static ALWAYS_INLINE size_t prefetch_upto(const uint8_t *p, size_t done, size_t to)
{
    for (; done < to; done += 64)
        _mm_prefetch((const char *)(p + done), _MM_HINT_T0);
    return done;
}

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
    /* prefetched as in the eight-row passes: the stretch 8 (Q8_0) or 16 rows on */
    const uint8_t *pfw = w + (t == QTYPE_Q8_0 ? 8 : 16) * stride;
    size_t pf = 0;
    for (int64_t b = 0; b < nb; b++) {
        pf = prefetch_upto(pfw, pf, 4 * wb * (size_t)(b + 1));
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
    prefetch_upto(pfw, pf, 4 * stride);
    for (int r = 0; r < 4; r++)
        y[r] = t == QTYPE_Q4_0 ? sum[r] : hsum_f8(acc[r]);
}

/* ---------------------------------------------------------------- eight rows */

/* The fp16 scales at p + r stride (r = 0..7, the first two bytes of a block) as floats in
 * lane r: packed by integer shifts into two quadwords, then one F16C conversion. */
static ALWAYS_INLINE __m256 scales8(const uint8_t *p, size_t stride)
{
    uint64_t q[2] = {0, 0};
    for (int r = 0; r < 8; r++) {
        uint16_t h;
        memcpy(&h, p + stride * (size_t)r, 2);
        q[r / 4] |= (uint64_t)h << (16 * (r % 4));
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)q[1], (long long)q[0]));
}

/* Rows w .. w + 7 stride of Q4_0 on AVX2 (builds without VNNI): per row the stored nibbles
 * n = q + 8 (unsigned) times the activation by vpmaddubsw (pairs below 2^12) and vpmaddwd,
 * the eight rows' lanes summed by one horizontal-add tree (row r in lane r), less 8 times
 * the activation's byte sum: each row's exact S; then the eight chains sum = fma(S, d, sum)
 * as the lanes of one FMA, the twin's order per row. */
static ALWAYS_INLINE void rows8_q4_0_avx2(const uint8_t *w, size_t stride, const BlockQ8_0 *a,
                                          int64_t nb, float *y)
{
    const __m256i eight = _mm256_set1_epi8(8);
    __m256 sum = _mm256_setzero_ps();
    size_t pf = 0;
    for (int64_t b = 0; b < nb; b++) {
        pf = prefetch_upto(w + 16 * stride, pf, 8 * sizeof(BlockQ4_0) * (size_t)(b + 1));
        const uint8_t *blk = w + sizeof(BlockQ4_0) * (size_t)b;
        const __m256i av = load32(a[b].qs);
        __m256i p[8];
        for (int r = 0; r < 8; r++)
            p[r] = dot_us(0, nibbles32(blk + stride * (size_t)r + 2), av);
        const __m256i S = _mm256_sub_epi32(hsum8_i32(p),
                                           _mm256_set1_epi32(hsum_i32(dot_us(0, eight, av))));
        const __m256 d8 = _mm256_mul_ps(scales8(blk, stride), _mm256_set1_ps(h2f(a[b].d)));
        sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), d8, sum);
    }
    prefetch_upto(w + 16 * stride, pf, 8 * stride);
    _mm256_storeu_ps(y, sum);
}

/* ---------------------------------------------------------------- eight rows, 512 bits
 * With AVX-512 VNNI, Q8_0 and Q4_0 matrices go eight rows at a time.  The integer block sums
 * take the weights as unsigned bytes (Q8_0: q + 128 by flipping the top bit; Q4_0: the
 * nibbles n = q + 8 as stored) in vpdpbusd.  Q8_0's accumulator starts at minus 128 times the
 * activation's byte sums, so every 32-bit lane ends as the exact sum of q a over its bytes
 * (|sums| < 2^17); Q4_0's block sums lose 8 times the activation's block sum at the end,
 * computed once per matrix (q4_0_offsets).  The eight rows' fp16 scales are read into one vector and converted
 * by one F16C instruction, then multiplied by the activation's scale: the twin's
 * float(dw) * float(da) for each row.  The float steps stay per row in the twin's order:
 * Q8_0's per-lane fma(d, lanes, acc) runs for two rows in the two halves of one 512-bit
 * register; Q4_0's chain sum = fma(S, d, sum) runs for eight rows in the eight lanes of one
 * 256-bit register. */
#if defined(QUANT_X86_ROWS8) /* quant_x86_impl.h */

/* Rows w .. w + 7 stride of Q8_0: y[r] = dot_q8_0_family's result for row r, bit for bit. */
static ALWAYS_INLINE void rows8_q8_0(const uint8_t *w, size_t stride, const BlockQ8_0 *a,
                                     int64_t nb, float *y)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[4];
    __m512i dsel[4]; /* lanes 0..7 take row 2k's d, lanes 8..15 row 2k + 1's */
    for (int k = 0; k < 4; k++) {
        acc[k] = _mm512_setzero_ps();
        dsel[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * k)),
                                     _mm256_set1_epi32(2 * k + 1), 1);
    }
    size_t pf = 0;
    for (int64_t b = 0; b < nb; b++) {
        pf = prefetch_upto(w + 8 * stride, pf, 8 * sizeof(BlockQ8_0) * (size_t)(b + 1));
        const uint8_t *blk = w + sizeof(BlockQ8_0) * (size_t)b;
        const __m512i av = _mm512_broadcast_i64x4(load32(a[b].qs));
        /* minus 128 times each lane's four activation bytes: the offset of q + 128 */
        const __m512i corr =
            _mm512_sub_epi32(_mm512_setzero_si512(),
                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, av));
        const __m256 d8 = _mm256_mul_ps(scales8(blk, stride), _mm256_set1_ps(h2f(a[b].d)));
        const __m512 d16 = _mm512_castps256_ps512(d8);
        for (int k = 0; k < 4; k++) {
            const uint8_t *p = blk + 2 * stride * (size_t)k + 2;
            const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(load32(p)),
                                                 load32(p + stride), 1);
            const __m512i s = _mm512_dpbusd_epi32(corr, _mm512_xor_si512(q, flip), av);
            acc[k] = _mm512_fmadd_ps(_mm512_permutexvar_ps(dsel[k], d16), _mm512_cvtepi32_ps(s),
                                     acc[k]);
        }
    }
    prefetch_upto(w + 8 * stride, pf, 8 * stride);
    for (int k = 0; k < 4; k++) {
        y[2 * k] = hsum_f8(_mm512_castps512_ps256(acc[k]));
        const __m512d hi = _mm512_castps_pd(acc[k]);
        y[2 * k + 1] = hsum_f8(_mm256_castpd_ps(_mm512_extractf64x4_pd(hi, 1)));
    }
}

/* Rows w .. w + 7 stride of Q4_0: y[r] = the repacked gemv's chain of row r, bit for bit.
 * Per block, four rows' 16 nibble bytes fill one 512-bit register (128 bits each), low
 * nibbles against the activation's first 16 bytes, high nibbles against its last 16, so
 * that 16 lanes hold four per row; two permutes and adds then give each row's sum of n a in
 * lane r, and S = that less off[b] (exact integers in any order). */
static ALWAYS_INLINE void rows8_q4_0(const uint8_t *w, size_t stride, const BlockQ8_0 *a,
                                     const int32_t *off, int64_t nb, float *y)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512();
    __m256 sum = _mm256_setzero_ps();
    size_t pf = 0;
    for (int64_t b = 0; b < nb; b++) {
        pf = prefetch_upto(w + 16 * stride, pf, 8 * sizeof(BlockQ4_0) * (size_t)(b + 1));
        const __m512i alo = _mm512_broadcast_i32x4(
            _mm_loadu_si128((const __m128i *)(const void *)a[b].qs));
        const __m512i ahi = _mm512_broadcast_i32x4(
            _mm_loadu_si128((const __m128i *)(const void *)(a[b].qs + 16)));
        const __m256 da = _mm256_set1_ps(h2f(a[b].d));
        const uint8_t *blk = w + sizeof(BlockQ4_0) * (size_t)b;
        __m512i s[2]; /* rows 4g .. 4g + 3: row 4g + k in lanes 4k .. 4k + 3 of s[g] */
        for (int g = 0; g < 2; g++) {
            const uint8_t *p = blk + 4 * stride * (size_t)g + 2;
            __m512i n = _mm512_castsi128_si512(load16(p));
            n = _mm512_inserti32x4(n, load16(p + stride), 1);
            n = _mm512_inserti32x4(n, load16(p + 2 * stride), 2);
            n = _mm512_inserti32x4(n, load16(p + 3 * stride), 3);
            const __m512i lo = _mm512_and_si512(n, m4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(n, 4), m4);
            s[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, alo), hi, ahi);
        }
        const __m256i S = rows8_sums(s[0], s[1], off[b]);
        const __m256 d8 = _mm256_mul_ps(scales8(blk, stride), da);
        sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), d8, sum);
    }
    prefetch_upto(w + 16 * stride, pf, 8 * stride);
    _mm256_storeu_ps(y, sum);
}

#endif

/* Rows of the 32-value types four at a time, the weights prefetched ahead. */
__attribute__((noinline)) static int matvec_q8_0_family(int vnni, QType t, float *y,
                                                        const uint8_t *w, size_t stride,
                                                        const BlockQ8_0 *a, int64_t nb, int d)
{
    int i = 0;
#if defined(QUANT_X86_ROWS8)
    if (vnni && t == QTYPE_Q8_0)
        for (; i + 8 <= d; i += 8)
            rows8_q8_0(w + stride * (size_t)i, stride, a, nb, y + i);
    if (vnni && t == QTYPE_Q4_0 && nb <= Q4_0_OFF_MAX) {
        int32_t off[Q4_0_OFF_MAX];
        q4_0_offsets(1, a, nb, off);
        for (; i + 8 <= d; i += 8)
            rows8_q4_0(w + stride * (size_t)i, stride, a, off, nb, y + i);
    }
#endif
    if (!vnni && t == QTYPE_Q4_0)
        for (; i + 8 <= d; i += 8)
            rows8_q4_0_avx2(w + stride * (size_t)i, stride, a, nb, y + i);
    for (; i + 4 <= d; i += 4) {
        const uint8_t *row = w + stride * (size_t)i;
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

float quant_x86_q8_dot(int vnni, QType t, const void *w, const BlockQ8_0 *a, int64_t nb)
{
    if (vnni)
        return t == QTYPE_Q4_0   ? dot_q8_0_family(1, QTYPE_Q4_0, w, a, nb)
             : t == QTYPE_Q8_0 ? dot_q8_0_family(1, QTYPE_Q8_0, w, a, nb)
                               : dot_q8_0_family(1, QTYPE_Q5_0, w, a, nb);
    return t == QTYPE_Q4_0   ? dot_q8_0_family(0, QTYPE_Q4_0, w, a, nb)
         : t == QTYPE_Q8_0 ? dot_q8_0_family(0, QTYPE_Q8_0, w, a, nb)
                           : dot_q8_0_family(0, QTYPE_Q5_0, w, a, nb);
}

void quant_x86_q8_matvec(int vnni, QType t, float *y, const uint8_t *w, size_t stride,
                         const BlockQ8_0 *a, int64_t nb, int d)
{
    matvec_q8_0_family(vnni, t, y, w, stride, a, nb, d);
}

void quant_x86_q8_matmul(int vnni, QType t, float *y, size_t ldy, const uint8_t *w,
                         size_t stride, const uint8_t *act, size_t astride, int64_t nb, int d,
                         int nact)
{
    if (t == QTYPE_Q8_0) { /* register tiles (quant_x86_mm.c) */
        quant_x86_mm_q8_0(vnni, y, ldy, w, stride, act, astride, nb, d, nact);
        return;
    }
    matmul_q8_0_family(vnni, t, y, ldy, w, stride, act, astride, nb, d, nact);
}

#else
typedef int quant_x86_q8_unused; /* ISO C wants a declaration in every file */
#endif
