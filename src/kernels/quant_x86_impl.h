/* quant_x86_impl.h: the inline AVX2 helpers shared by the x86 quantized kernels (quant_x86.c:
 * F16/BF16, the Q8_0 quantizers and the entry points; quant_x86_q8.c: the 32-value types;
 * quant_x86_k.c: the K-quants) and the functions they call across files.  Private to
 * src/kernels; only included where QUANT_HAVE_AVX2 holds. */
#ifndef HEADSPLIT_QUANT_X86_IMPL_H
#define HEADSPLIT_QUANT_X86_IMPL_H

#include "quant_impl.h"

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

static ALWAYS_INLINE __m128i load16(const void *p)
{
    return _mm_loadu_si128((const __m128i *)p);
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

/* hsum_float_8: lanes l + (l + 4), then (0 + 2) + (1 + 3). */
static ALWAYS_INLINE float hsum_f8(__m256 x)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
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

/* ---------------------------------------------------------------- across files
 * nb: blocks (32 values) or super-blocks (256) per row; a: the activation's blocks; every
 * result equals the plain-C twin's bit for bit. */

/* One 32-value-type row (Q8_0, Q4_0, Q5_0) with Q8_0 activation a. */
float quant_x86_q8_dot(int vnni, QType t, const void *w, const BlockQ8_0 *a, int64_t nb);

/* Q4_0's stored nibbles are q + 8: off[b] = 8 times the sum of block b's activation bytes,
 * the offset every row's block sum S loses at the end (once per matrix, not per row group).
 * Columns up to 32 * Q4_0_OFF_MAX (Llama-70B's FFN has 28672); longer rows take the kernels
 * without the table. */
#define Q4_0_OFF_MAX 2048
static ALWAYS_INLINE void q4_0_offsets(int vnni, const BlockQ8_0 *a, int64_t nb, int32_t *off)
{
    const __m256i eight = _mm256_set1_epi8(8);
    for (int64_t b = 0; b < nb; b++)
        off[b] = hsum_i32(dot_us(vnni, eight, load32(a[b].qs)));
}

/* ---------------------------------------------------------------- Q4_0, 512 bits
 * Shared by the rows' eight-row passes (quant_x86_q8.c) and the x8 groups (quant_x86_x8.c). */
#if defined(QUANT_HAVE_VNNI) && defined(__AVX512F__) && defined(__AVX512BW__)
#define QUANT_X86_ROWS8 1

/* s0, s1: the block's lanes of rows 0-3 and 4-7 (row 4g + k in lanes 4k .. 4k + 3 of sg);
 * lane r of the result: row r's whole sum less off (exact integers in any order).  32 lanes
 * to two per row by two permutes, then to one per row. */
static ALWAYS_INLINE __m256i rows8_sums(__m512i s0, __m512i s1, int32_t off)
{
    /* lane m of the pair sums: lanes 4 (m / 2) + m % 2 and that + 2 of s0:s1 */
    const __m512i pick0 = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25,
                                            28, 29);
    const __m512i pick2 = _mm512_add_epi32(pick0, _mm512_set1_epi32(2));
    const __m512i w2 = _mm512_add_epi32(_mm512_permutex2var_epi32(s0, pick0, s1),
                                        _mm512_permutex2var_epi32(s0, pick2, s1));
    const __m512i w1 = _mm512_add_epi32(w2, _mm512_srli_epi64(w2, 32));
    return _mm256_sub_epi32(_mm512_cvtepi64_epi32(w1), _mm256_set1_epi32(off));
}
#endif

/* K-quant matrices four rows per pass (quant_x86_k4.c) where the build has AVX-512 VNNI:
 * rows [0, returned) of y done, a multiple of 4 (0 without those kernels). */
#if defined(QUANT_HAVE_VNNI) && defined(__AVX512F__) && defined(__AVX512BW__)
#define QUANT_X86_K_ROWS4 1
#endif
int quant_x86_k_rows4(QType t, float *y, const uint8_t *w, size_t stride, const BlockQ8_K *a,
                      int64_t nb, int d);
/* The same passes against several activations (four at a time, each row's blocks unpacked
 * once for them): Y[k][i] for rows [0, returned), a multiple of 4 (0 without the kernels). */
int quant_x86_k_mm4(QType t, float *y, size_t ldy, const uint8_t *w, size_t stride,
                    const uint8_t *act, size_t astride, int64_t nb, int d, int nact);

/* y[d] = W a for a 32-value-type matrix of d rows, stride bytes apart. */
void quant_x86_q8_matvec(int vnni, QType t, float *y, const uint8_t *w, size_t stride,
                         const BlockQ8_0 *a, int64_t nb, int d);
/* Y[k][i] = W[i] . A[k] for nact activations astride bytes apart (quant_x86_matmul's). */
void quant_x86_q8_matmul(int vnni, QType t, float *y, size_t ldy, const uint8_t *w,
                         size_t stride, const uint8_t *act, size_t astride, int64_t nb, int d,
                         int nact);
/* The same product for Q8_0 in register tiles of rows x activations (quant_x86_mm.c). */
void quant_x86_mm_q8_0(int vnni, float *y, size_t ldy, const uint8_t *w, size_t stride,
                       const uint8_t *act, size_t astride, int64_t nb, int d, int nact);
/* The same on Q8_0 in eight-row groups (quant_x8.c; AVX-512 VNNI builds only): d rows. */
void quant_x86_mm_q8_0_x8(float *y, size_t ldy, const uint8_t *w, const uint8_t *act,
                          size_t astride, int64_t nb, int d, int nact);
/* A buffer of at least bytes, 64-byte aligned, this thread's own (kept for its next call,
 * freed when it ends): one user at a time (quant_x86_mm.c). */
void *quant_x86_scratch(size_t bytes);
/* The same three for Q4_K, Q5_K, Q6_K rows with Q8_K activations. */
float quant_x86_k_dot(QType t, const void *w, const BlockQ8_K *a, int64_t nb);
void quant_x86_k_matvec(QType t, float *y, const uint8_t *w, size_t stride, const BlockQ8_K *a,
                        int64_t nb, int d);
void quant_x86_k_matmul(QType t, float *y, size_t ldy, const uint8_t *w, size_t stride,
                        const uint8_t *act, size_t astride, int64_t nb, int d, int nact);

#endif
#endif
