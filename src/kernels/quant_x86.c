/* quant_x86.c: AVX2 (with F16C) and AVX-512 (BW, VNNI, VBMI where built) quantized kernels.
 *
 * Each function computes exactly the order of its plain-C twin in quant_ref.c: the integer
 * block sums are exact whatever the instructions (vpmaddubsw pairs stay below 2^15, vpmaddwd
 * and vpdpbusd sums below 2^31), and the float steps after them are the same IEEE operations
 * in the same order (no FMA), eight 32-value blocks side by side in the eight lanes of one
 * vector, block b in lane b % 8 as the twin's accumulators.  So every result here equals the
 * twin's bit for bit (for finite scales).
 *
 * AVX2 path: Q4_0, Q5_0 as a matvec over an activation laid out once per call; Q8_0, Q4_K,
 * Q5_K, Q6_K per row (vpmaddubsw + vpmaddwd); F16, BF16 in the fp32 matvec's 32-lane order;
 * the Q8_0 quantizer.  AVX-512 VNNI path: Q8_0, Q4_0, Q5_0 by 512-bit vpdpbusd, Q4_K, Q5_K,
 * Q6_K 128 values per step, both over laid-out activations; the rest as AVX2.  Other types use
 * the plain-C twins. */
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

/* Block b's 8 partial sums of q_j a_j (the quants q less their offset). */
static ALWAYS_INLINE __m256i block_partial(int vnni, QType t, const uint8_t *blk,
                                           const int8_t *a)
{
    const __m256i av = load32(a);
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
    /* |q| * (a with q's sign): the unsigned-by-signed product the instructions take. */
    return dot_us(vnni, _mm256_sign_epi8(q, q), _mm256_sign_epi8(av, q));
}

static ALWAYS_INLINE float dot_q8_0_family(int vnni, QType t, const uint8_t *w,
                                           const BlockQ8_0 *a, int64_t nb)
{
    const size_t wb = t == QTYPE_Q8_0 ? sizeof(BlockQ8_0)
                    : t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        __m256i p[8];
        uint16_t dw[8], da[8];
        for (int k = 0; k < 8; k++) {
            const uint8_t *blk = w + wb * (size_t)(b + k);
            p[k] = block_partial(vnni, t, blk, a[b + k].qs);
            memcpy(&dw[k], blk, 2);
            da[k] = a[b + k].d;
        }
        const __m256 sumf = _mm256_cvtepi32_ps(hsum8_i32(p));
        const __m256 dwf = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dw));
        const __m256 daf = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)da));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(sumf, _mm256_mul_ps(dwf, daf)));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (; b < nb; b++) { /* the last nb % 8 blocks, into their lanes as the twin does */
        const uint8_t *blk = w + wb * (size_t)b;
        const int sumi = hsum_i32(block_partial(vnni, t, blk, a[b].qs));
        uint16_t dw;
        memcpy(&dw, blk, 2);
        lanes[b % 8] = lanes[b % 8] +
                       (float)sumi * (h2f(dw) * h2f(a[b].d));
    }
    return quant_reduce8(lanes);
}

/* ---------------------------------------------------------------- the activation, laid out
 * once per matvec call for the 32-value types: its quants in the order the weight vectors meet
 * them, its scales as floats, its block sums times the weights' offset (ActPrep). */
#define PREP_MAX_BLOCKS 1024 /* rows of up to 32768 values; longer ones take the per-row path */

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

typedef struct {
    int8_t qs[PREP_MAX_BLOCKS * QK]; /* Q8_0: as stored; Q4_0/Q5_0: per g blocks the g first
                                      * halves (values 0..15), then the g second halves */
    float da[PREP_MAX_BLOCKS];       /* the scales as floats */
    int32_t off[PREP_MAX_BLOCKS];    /* the offset times the block's sum of quants */
} ActPrep;

/* g: blocks per weight vector (2 for 256-bit, 4 for 512-bit); offset: 128 for Q8_0's flipped
 * sign bit, 8 or 16 for Q4_0/Q5_0's stored quants. */
static void prep_act(ActPrep *p, QType t, int g, const BlockQ8_0 *a, int64_t nb)
{
    const int offset = t == QTYPE_Q8_0 ? 128 : t == QTYPE_Q4_0 ? 8 : 16;
    for (int64_t b = 0; b < nb; b++) {
        int sum = 0;
        for (int j = 0; j < QK; j++)
            sum += a[b].qs[j];
        p->da[b] = h2f(a[b].d);
        p->off[b] = offset * sum;
        if (t == QTYPE_Q8_0) {
            memcpy(p->qs + QK * b, a[b].qs, QK);
        } else {
            int8_t *q = p->qs + 32 * g * (b / g) + 16 * (b % g);
            memcpy(q, a[b].qs, 16);
            memcpy(q + 16 * g, a[b].qs + 16, 16);
        }
    }
}

/* ---------------------------------------------------------------- Q4_0, Q5_0 in 256 bits
 * Two blocks per vector: the 16 quant bytes of each in one 128-bit lane, their low nibbles
 * (values 0..15) and high nibbles (16..31) meeting the laid-out activation; the stored quants
 * are unsigned, so vpmaddubsw takes them as they are (pairs <= 2 * 31 * 127, two pairs' sum
 * below 2^15) and the offset comes back with the block sums. */
static ALWAYS_INLINE float row_q45_0_avx2(QType t, const uint8_t *w, const ActPrep *p,
                                          const BlockQ8_0 *a, int64_t nb)
{
    const size_t wb = t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    const size_t qoff = t == QTYPE_Q4_0 ? 2 : 6;
    const __m256i m4 = _mm256_set1_epi8(0x0F), x10 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *blk = w + wb * (size_t)b;
        prefetch_ahead(blk, wb * 8);
        __m256i part[4];
        for (int k = 0; k < 4; k++) {
            const uint8_t *b0 = blk + 2 * wb * (size_t)k;
            const __m256i raw = _mm256_set_m128i(
                _mm_loadu_si128((const __m128i *)(const void *)(b0 + wb + qoff)),
                _mm_loadu_si128((const __m128i *)(const void *)(b0 + qoff)));
            __m256i lo = _mm256_and_si256(raw, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            if (t == QTYPE_Q5_0) { /* bit j of a block's qh: its value j */
                uint32_t h0, h1;
                memcpy(&h0, b0 + 2, 4);
                memcpy(&h1, b0 + wb + 2, 4);
                lo = _mm256_or_si256(lo, _mm256_and_si256(
                                             bits_to_bytes((h0 & 0xFFFFu) | (h1 << 16)), x10));
                hi = _mm256_or_si256(hi, _mm256_and_si256(
                                             bits_to_bytes((h0 >> 16) | (h1 & 0xFFFF0000u)), x10));
            }
            const int8_t *ag = p->qs + QK * (b + 2 * k);
            const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, load32(ag)),
                                                 _mm256_maddubs_epi16(hi, load32(ag + 32)));
            part[k] = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
        }
        /* lane 0..3 of part[k]: block 2k, lanes 4..7: block 2k + 1 */
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(part[0], part[1]),
                                            _mm256_hadd_epi32(part[2], part[3]));
        __m256i sumi = _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        sumi = _mm256_sub_epi32(sumi,
                                _mm256_loadu_si256((const __m256i *)(const void *)(p->off + b)));
        uint16_t dh[8];
        for (int k = 0; k < 8; k++)
            memcpy(&dh[k], blk + wb * (size_t)k, 2);
        const __m256 dwf = _mm256_cvtph_ps(_mm_setr_epi16((short)dh[0], (short)dh[1], (short)dh[2],
                                                          (short)dh[3], (short)dh[4], (short)dh[5],
                                                          (short)dh[6], (short)dh[7]));
        const __m256 prod = _mm256_mul_ps(dwf, _mm256_loadu_ps(p->da + b));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), prod));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (; b < nb; b++) { /* the last nb % 8 blocks, into their lanes as the twin does */
        const uint8_t *blk = w + wb * (size_t)b;
        const int sumi = hsum_i32(block_partial(0, t, blk, a[b].qs));
        uint16_t dw;
        memcpy(&dw, blk, 2);
        lanes[b % 8] = lanes[b % 8] + (float)sumi * (h2f(dw) * p->da[b]);
    }
    return quant_reduce8(lanes);
}

/* y[d] for Q4_0/Q5_0 on the 256-bit path; 0 if the row is too long for ActPrep.  Not inlined:
 * the ActPrep of each matvec keeps to its own stack frame. */
__attribute__((noinline)) static int matvec_q45_0_avx2(QType t, float *y, const uint8_t *w,
                                                        size_t stride, const BlockQ8_0 *a,
                                                        int64_t nb, int d)
{
    if (nb > PREP_MAX_BLOCKS)
        return 0;
    ActPrep p;
    prep_act(&p, t, 2, a, nb);
    for (int i = 0; i < d; i++)
        y[i] = t == QTYPE_Q4_0 ? row_q45_0_avx2(QTYPE_Q4_0, w + stride * (size_t)i, &p, a, nb)
                               : row_q45_0_avx2(QTYPE_Q5_0, w + stride * (size_t)i, &p, a, nb);
    return 1;
}

/* ---------------------------------------------------------------- 32-value blocks, AVX-512
 * Four (Q4_0, Q5_0) or two (Q8_0) blocks per 512-bit vpdpbusd, the weights as unsigned bytes
 * (Q8_0: w + 128 by flipping the sign bit; Q4_0/Q5_0: the stored quants before the offset) and
 * the offset taken back with the activation's block sums: sum (q - o) a = sum q a - o sum a,
 * exact. */
#if defined(QUANT_HAVE_VNNI) && defined(__AVX512F__) && defined(__AVX512BW__)
#define QUANT_X86_ZMM 1

/* Lane k of the result (k < 8) = block b + k's sum, from the four vectors of 8 lanes that
 * hold blocks b + 2i (lanes 0..7) and b + 2i + 1 (lanes 8..15). */
static ALWAYS_INLINE __m256i reduce_pairs(const __m512i *z)
{
    const __m512i u01 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]),
                                         _mm512_unpackhi_epi32(z[0], z[1]));
    const __m512i u23 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]),
                                         _mm512_unpackhi_epi32(z[2], z[3]));
    const __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi64(u01, u23),
                                       _mm512_unpackhi_epi64(u01, u23));
    const __m512i s = _mm512_add_epi32(v, _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512i idx = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, s));
}

/* Same for two vectors whose 128-bit lane k holds block b + k (z[0]) and b + 4 + k (z[1]). */
static ALWAYS_INLINE __m256i reduce_quads(const __m512i *z)
{
    const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]),
                                       _mm512_unpackhi_epi32(z[0], z[1]));
    const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, v));
}

/* Four blocks' 16-byte quant fields (at q, stride bytes apart) in the four 128-bit lanes. */
static ALWAYS_INLINE __m512i load4x16(const uint8_t *q, size_t stride)
{
    __m512i r = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)q));
    r = _mm512_inserti32x4(r, _mm_loadu_si128((const __m128i *)(const void *)(q + stride)), 1);
    r = _mm512_inserti32x4(r, _mm_loadu_si128((const __m128i *)(const void *)(q + 2 * stride)),
                           2);
    return _mm512_inserti32x4(
        r, _mm_loadu_si128((const __m128i *)(const void *)(q + 3 * stride)), 3);
}

#if defined(__AVX512VBMI__)
/* Byte indices for vpermt2b over the first 128 bytes of 8 consecutive Q4_0 blocks that pick
 * out their quants and scales: one permute replaces eight scalar loads of the scales.  (For
 * Q8_0 the same trick measured slower than plain loads, so it has none.) */
typedef struct {
    uint8_t q4a[64], q4b[64], q4d[64]; /* Q4_0: quants of blocks 0-3, 4-6; scales 0-7 */
} PermIdx;

static void perm_idx_init(PermIdx *x)
{
    memset(x, 0, sizeof *x);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 16; i++) {
            x->q4a[16 * k + i] = (uint8_t)(18 * k + 2 + i);
            if (k < 3)
                x->q4b[16 * k + i] = (uint8_t)(18 * (k + 4) + 2 + i);
        }
    for (int m = 0; m < 8; m++)
        for (int i = 0; i < 2; i++)
            x->q4d[2 * m + i] = (uint8_t)(18 * m + i);
}
#endif

/* 8 blocks' quant sums less the offsets (lane k: block b + k) and their weight scales. */
static ALWAYS_INLINE void eight_blocks(QType t, const uint8_t *blk, size_t wb, const int8_t *ag,
                                       const void *px, __m256i *sumi, __m256 *dwf)
{
    const __m512i zero = _mm512_setzero_si512(), m4 = _mm512_set1_epi8(0x0F);
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
#if defined(__AVX512VBMI__)
    const PermIdx *ix = px;
    if (t == QTYPE_Q4_0) { /* the 144 bytes of 8 blocks in three registers */
        const __m512i A = _mm512_loadu_si512(blk), B = _mm512_loadu_si512(blk + 64);
        const __m128i C = _mm_loadu_si128((const __m128i *)(const void *)(blk + 128));
        const __m512i raw[2] = {
            _mm512_permutex2var_epi8(A, _mm512_loadu_si512(ix->q4a), B),
            _mm512_inserti32x4(_mm512_permutex2var_epi8(A, _mm512_loadu_si512(ix->q4b), B), C,
                               3)};
        __m512i z[2];
        for (int h = 0; h < 2; h++) {
            const __m512i lo = _mm512_and_si512(raw[h], m4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw[h], 4), m4);
            z[h] = _mm512_dpbusd_epi32(
                _mm512_dpbusd_epi32(zero, lo, _mm512_loadu_si512(ag + 128 * h)), hi,
                _mm512_loadu_si512(ag + 128 * h + 64));
        }
        *sumi = reduce_quads(z);
        *dwf = _mm256_cvtph_ps(_mm512_castsi512_si128(
            _mm512_permutex2var_epi8(A, _mm512_loadu_si512(ix->q4d), B)));
        return;
    }
#endif
    (void)px;
    if (t == QTYPE_Q8_0) {
        __m512i z[4];
        for (int k = 0; k < 4; k++) {
            const uint8_t *b0 = blk + 2 * wb * (size_t)k;
            const __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(load32(b0 + 2)),
                                                  load32(b0 + wb + 2), 1);
            z[k] = _mm512_dpbusd_epi32(zero, _mm512_xor_si512(wv, x80),
                                       _mm512_loadu_si512(ag + 64 * k));
        }
        *sumi = reduce_pairs(z);
    } else {
        __m512i z[2];
        for (int h = 0; h < 2; h++) {
            const uint8_t *b0 = blk + 4 * wb * (size_t)h;
            const __m512i raw = load4x16(b0 + (t == QTYPE_Q4_0 ? 2 : 6), wb);
            __m512i lo = _mm512_and_si512(raw, m4);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            if (t == QTYPE_Q5_0) { /* fifth bits: value j of block k is bit j of its qh */
                uint64_t mlo = 0, mhi = 0;
                for (int k = 0; k < 4; k++) {
                    uint32_t qh;
                    memcpy(&qh, b0 + wb * (size_t)k + 2, sizeof qh);
                    mlo |= (uint64_t)(qh & 0xFFFFu) << (16 * k);
                    mhi |= (uint64_t)(qh >> 16) << (16 * k);
                }
                lo = _mm512_mask_add_epi8(lo, (__mmask64)mlo, lo, _mm512_set1_epi8(16));
                hi = _mm512_mask_add_epi8(hi, (__mmask64)mhi, hi, _mm512_set1_epi8(16));
            }
            z[h] = _mm512_dpbusd_epi32(
                _mm512_dpbusd_epi32(zero, lo, _mm512_loadu_si512(ag + 128 * h)), hi,
                _mm512_loadu_si512(ag + 128 * h + 64));
        }
        *sumi = reduce_quads(z);
    }
    uint16_t dh[8]; /* the 8 weight scales, one 16-bit load each */
    for (int k = 0; k < 8; k++)
        memcpy(&dh[k], blk + wb * (size_t)k, 2);
    *dwf = _mm256_cvtph_ps(_mm_setr_epi16((short)dh[0], (short)dh[1], (short)dh[2],
                                          (short)dh[3], (short)dh[4], (short)dh[5],
                                          (short)dh[6], (short)dh[7]));
}

static ALWAYS_INLINE float row_zmm(QType t, const uint8_t *w, const ActPrep *p,
                                   const BlockQ8_0 *a, int64_t nb, const void *px)
{
    const size_t wb = t == QTYPE_Q8_0 ? sizeof(BlockQ8_0)
                    : t == QTYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ5_0);
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        __m256i sumi;
        __m256 dwf;
        prefetch_ahead(w + wb * (size_t)b, wb * 8);
        eight_blocks(t, w + wb * (size_t)b, wb, p->qs + QK * b, px, &sumi, &dwf);
        sumi = _mm256_sub_epi32(sumi,
                                _mm256_loadu_si256((const __m256i *)(const void *)(p->off + b)));
        const __m256 prod = _mm256_mul_ps(dwf, _mm256_loadu_ps(p->da + b));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), prod));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (; b < nb; b++) { /* the last nb % 8 blocks, into their lanes as the twin does */
        const uint8_t *blk = w + wb * (size_t)b;
        const int sumi = hsum_i32(block_partial(1, t, blk, a[b].qs));
        uint16_t dw;
        memcpy(&dw, blk, 2);
        lanes[b % 8] = lanes[b % 8] + (float)sumi * (h2f(dw) * p->da[b]);
    }
    return quant_reduce8(lanes);
}

/* y[d] for the 32-value types on the 512-bit path; 0 if the row is too long for ActPrep.
 * Not inlined: its 40 KiB ActPrep and ActPrepK below never share one stack frame. */
__attribute__((noinline)) static int matvec_zmm(QType t, float *y, const uint8_t *w, size_t stride, const BlockQ8_0 *a,
                      int64_t nb, int d)
{
    if (nb > PREP_MAX_BLOCKS)
        return 0;
    ActPrep p;
    prep_act(&p, t, 4, a, nb);
#if defined(__AVX512VBMI__)
    PermIdx px;
    perm_idx_init(&px);
#else
    const void *px = NULL;
#endif
    for (int i = 0; i < d; i++) {
        const uint8_t *row = w + stride * (size_t)i;
        y[i] = t == QTYPE_Q8_0   ? row_zmm(QTYPE_Q8_0, row, &p, a, nb, &px)
             : t == QTYPE_Q4_0 ? row_zmm(QTYPE_Q4_0, row, &p, a, nb, &px)
                               : row_zmm(QTYPE_Q5_0, row, &p, a, nb, &px);
    }
    return 1;
}
#endif

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

/* Super-block b of a Q4_K/Q5_K row in 256 bits: 8 lanes whose sum is S (the scaled quant sums)
 * and, in *M, the mins times the activation's sub-block sums. */
static ALWAYS_INLINE __m256i sb_q45_avx2(QType t, const void *vw, const BlockQ8_K *a, int64_t b,
                                         int *M)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const BlockQ4_K *w4 = (const BlockQ4_K *)vw + b;
    const BlockQ5_K *w5 = (const BlockQ5_K *)vw + b;
    const uint8_t *qs = t == QTYPE_Q4_K ? w4->qs : w5->qs;
    const __m128i sm = k_scales_mins(t == QTYPE_Q4_K ? w4->scales : w5->scales);
    const __m128i bs0 = _mm_loadu_si128((const __m128i *)(const void *)a[b].bsums);
    const __m128i bs1 = _mm_loadu_si128((const __m128i *)(const void *)(a[b].bsums + 8));
    const __m128i mm = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)),
                                      _mm_hadd_epi16(bs0, bs1)); /* m_s (b_2s + b_2s+1) */
    __m128i ms = _mm_add_epi32(mm, _mm_shuffle_epi32(mm, _MM_SHUFFLE(1, 0, 3, 2)));
    ms = _mm_add_epi32(ms, _mm_shuffle_epi32(ms, _MM_SHUFFLE(2, 3, 0, 1)));
    *M = _mm_cvtsi128_si32(ms);
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

/* A K-quant row in 256 bits: eight super-blocks' integer parts, one reduction for the eight,
 * their float steps as eight lanes (the twin's operations on each), then added into the sum in
 * block order as the twin does. */
static ALWAYS_INLINE float row_k_avx2(QType t, const void *vw, const BlockQ8_K *a, int64_t nb)
{
    const size_t wb = t == QTYPE_Q4_K ? sizeof(BlockQ4_K)
                    : t == QTYPE_Q5_K ? sizeof(BlockQ5_K) : sizeof(BlockQ6_K);
    const size_t doff = t == QTYPE_Q6_K ? offsetof(BlockQ6_K, d) : 0;
    const uint8_t *w = vw;
    float sum = 0;
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        __m256i s8[8];
        int corr[8] = {0};
        uint16_t dh[8], dmh[8];
        float da[8];
        for (int k = 0; k < 8; k++) {
            prefetch_ahead(w + wb * (size_t)(b + k), wb);
            s8[k] = t == QTYPE_Q6_K ? sb_q6_avx2((const BlockQ6_K *)vw, a, b + k)
                                    : sb_q45_avx2(t, vw, a, b + k, &corr[k]);
            memcpy(&dh[k], w + wb * (size_t)(b + k) + doff, 2);
            memcpy(&dmh[k], w + wb * (size_t)(b + k) + 2, 2); /* Q6_K: unused */
            da[k] = a[b + k].d;
        }
        const __m256 pd = _mm256_loadu_ps(da);
        const __m256 d8 = _mm256_mul_ps(
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dh)), pd);
        const __m256 S = _mm256_cvtepi32_ps(hsum8_i32(s8));
        __m256 p8;
        if (t == QTYPE_Q6_K) {
            p8 = _mm256_mul_ps(d8, S);
        } else {
            const __m256 dm8 = _mm256_mul_ps(
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dmh)), pd);
            const __m256 Mf = _mm256_cvtepi32_ps(
                _mm256_loadu_si256((const __m256i *)(const void *)corr));
            p8 = _mm256_sub_ps(_mm256_mul_ps(d8, S), _mm256_mul_ps(dm8, Mf));
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, p8);
        for (int k = 0; k < 8; k++)
            sum = sum + lanes[k];
    }
    for (; b < nb; b++) {
        uint16_t dh, dmh;
        memcpy(&dh, w + wb * (size_t)b + doff, 2);
        memcpy(&dmh, w + wb * (size_t)b + 2, 2);
        const float d = h2f(dh) * a[b].d;
        if (t == QTYPE_Q6_K) {
            const int S = hsum_i32(sb_q6_avx2((const BlockQ6_K *)vw, a, b));
            sum = sum + d * (float)S;
        } else {
            int M;
            const int S = hsum_i32(sb_q45_avx2(t, vw, a, b, &M));
            sum = sum + (d * (float)S - (h2f(dmh) * a[b].d) * (float)M);
        }
    }
    return sum;
}

/* ---------------------------------------------------------------- K-quants, AVX-512
 * 128 values per 512-bit step.  The activation is laid out once per call so that the low and
 * the high nibbles of 64 weight bytes meet their values in one load each: per 128 values
 * [0..31, 64..95] then [32..63, 96..127] for Q4_K/Q5_K (Q6_K's layout already matches).  The
 * sub-block scales multiply the pair sums by vpmaddwd (16-bit scales broadcast by a permute),
 * Q6_K's offset 32 is taken back with the activation's group sums: all exact integers. */
#if defined(QUANT_X86_ZMM)
#define PREPK_MAX 128 /* super-blocks: rows of up to 32768 values */

typedef struct {
    int8_t qs[PREPK_MAX * QK_K];
    int16_t gs[PREPK_MAX * 16]; /* Q4_K/Q5_K: bsums[2s] + bsums[2s + 1] (8); Q6_K: the sums of
                                 * the 16 groups of 16 quants (16) */
    float d[PREPK_MAX];
} ActPrepK;

static void prep_act_k(ActPrepK *p, QType t, const BlockQ8_K *a, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++) {
        int8_t *q = p->qs + QK_K * b;
        int16_t *g = p->gs + 16 * b;
        p->d[b] = a[b].d;
        if (t == QTYPE_Q6_K) {
            memcpy(q, a[b].qs, QK_K);
            for (int k = 0; k < 16; k++) {
                int s = 0;
                for (int j = 0; j < 16; j++)
                    s += a[b].qs[16 * k + j];
                g[k] = (int16_t)s;
            }
        } else {
            for (int h = 0; h < 2; h++) {
                const int8_t *src = a[b].qs + 128 * h;
                int8_t *dst = q + 128 * h;
                memcpy(dst, src, 32);
                memcpy(dst + 32, src + 64, 32);
                memcpy(dst + 64, src + 32, 32);
                memcpy(dst + 96, src + 96, 32);
            }
            for (int k = 0; k < 8; k++)
                g[k] = (int16_t)(a[b].bsums[2 * k] + a[b].bsums[2 * k + 1]);
            for (int k = 8; k < 16; k++)
                g[k] = 0;
        }
    }
}

/* 16-bit lanes: lanes 0..15 take byte i0 of every 128-bit lane of v (zero-extended), lanes
 * 16..31 byte i1 (one in-lane byte shuffle). */
static ALWAYS_INLINE __m512i bcast2_u8(__m512i v, int i0, int i1)
{
    const __m512i ctl = _mm512_inserti64x4(_mm512_set1_epi16((short)(0x8000 | i0)),
                                           _mm256_set1_epi16((short)(0x8000 | i1)), 1);
    return _mm512_shuffle_epi8(v, ctl);
}

/* Super-block b of a Q4_K/Q5_K row: the 16 lanes whose sum is S (the scaled quant sums) and,
 * in *M, the mins times the activation's sub-block sums. */
static ALWAYS_INLINE __m512i sb_q45(QType t, const void *vw, const ActPrepK *p, int64_t b, int *M)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
    const BlockQ4_K *w4 = (const BlockQ4_K *)vw + b;
    const BlockQ5_K *w5 = (const BlockQ5_K *)vw + b;
    const uint8_t *scales = t == QTYPE_Q4_K ? w4->scales : w5->scales;
    const uint8_t *qs = t == QTYPE_Q4_K ? w4->qs : w5->qs;
    prefetch_ahead((const uint8_t *)(t == QTYPE_Q4_K ? (const void *)w4 : (const void *)w5),
                   t == QTYPE_Q4_K ? sizeof *w4 : sizeof *w5);
    const __m128i sm = k_scales_mins(scales);
    const __m512i smb = _mm512_broadcast_i32x4(sm);
    const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
    const __m128i gsum = _mm_loadu_si128((const __m128i *)(const void *)(p->gs + 16 * b));
    const __m128i mm = _mm_madd_epi16(mins, gsum);
    __m128i ms = _mm_add_epi32(mm, _mm_shuffle_epi32(mm, _MM_SHUFFLE(1, 0, 3, 2)));
    ms = _mm_add_epi32(ms, _mm_shuffle_epi32(ms, _MM_SHUFFLE(2, 3, 0, 1)));
    *M = _mm_cvtsi128_si32(ms);
    __m512i hb = _mm512_setzero_si512();
    if (t == QTYPE_Q5_K)
        hb = _mm512_broadcast_i64x4(load32(w5->qh));
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) { /* chunks 2h, 2h + 1: sub-blocks 4h .. 4h + 3 */
        const __m512i raw = _mm512_loadu_si512(qs + 64 * h);
        __m512i lo = _mm512_and_si512(raw, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        if (t == QTYPE_Q5_K) { /* value 64c + l: bit 2c of qh[l] (low), 2c + 1 (high) */
            const __m512i s0 = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * h)),
                                                  _mm256_set1_epi16((short)(4 * h + 2)), 1);
            const __m512i s1 = _mm512_add_epi16(s0, _mm512_set1_epi16(1));
            lo = _mm512_or_si512(lo, _mm512_slli_epi16(
                                         _mm512_and_si512(_mm512_srlv_epi16(hb, s0), one), 4));
            hi = _mm512_or_si512(hi, _mm512_slli_epi16(
                                         _mm512_and_si512(_mm512_srlv_epi16(hb, s1), one), 4));
        }
        const int8_t *ag = p->qs + QK_K * b + 128 * h;
        const __m512i plo = _mm512_maddubs_epi16(lo, _mm512_loadu_si512(ag));
        const __m512i phi = _mm512_maddubs_epi16(hi, _mm512_loadu_si512(ag + 64));
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(plo, bcast2_u8(smb, 4 * h, 4 * h + 2)));
        acc = _mm512_add_epi32(acc,
                               _mm512_madd_epi16(phi, bcast2_u8(smb, 4 * h + 1, 4 * h + 3)));
    }
    return acc;
}

/* 16-bit lanes in 4 runs of 8: run r takes word i + r of v. */
static ALWAYS_INLINE __m512i bcast4_epi16(__m512i v, int i)
{
    const __m512i idx = _mm512_add_epi16(
        _mm512_set1_epi16((short)i),
        _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002,
                         0x0002000200020002, 0x0001000100010001, 0x0001000100010001, 0, 0));
    return _mm512_permutexvar_epi16(idx, v);
}

/* Super-block b of a Q6_K row: the 16 lanes whose sum is sum sc q a (quants before their
 * offset) and, in *G, sum sc times the activation's group sums. */
static ALWAYS_INLINE __m512i sb_q6(const BlockQ6_K *w, const ActPrepK *p, int64_t b, int *G)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3);
    /* the high 2 bits of value 128h + 32k + l sit at bits 2k of qh[32h + l] */
    const __m512i sh_lo = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh_hi = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    prefetch_ahead((const uint8_t *)&w[b], sizeof w[b]);
    const __m512i sc16 = _mm512_cvtepi8_epi16(
        _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)w[b].scales)));
    const __m256i gs = _mm256_loadu_si256((const __m256i *)(const void *)(p->gs + 16 * b));
    *G = hsum_i32(_mm256_madd_epi16(_mm512_castsi512_si256(sc16), gs));
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        const __m512i ql = _mm512_loadu_si512(w[b].ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(load32(w[b].qh + 32 * h));
        const __m512i lo = _mm512_or_si512(
            _mm512_and_si512(ql, m4),
            _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh_lo), m2), 4));
        const __m512i hi = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
            _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh_hi), m2), 4));
        const int8_t *ag = p->qs + QK_K * b + 128 * h;
        const __m512i plo = _mm512_maddubs_epi16(lo, _mm512_loadu_si512(ag));
        const __m512i phi = _mm512_maddubs_epi16(hi, _mm512_loadu_si512(ag + 64));
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(plo, bcast4_epi16(sc16, 8 * h)));
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(phi, bcast4_epi16(sc16, 8 * h + 4)));
    }
    return acc;
}

/* A K-quant row: eight super-blocks' integer parts side by side, then their float steps as
 * eight lanes (the twin's operations on each), then added into the sum in block order. */
static ALWAYS_INLINE float row_k_zmm(QType t, const void *vw, const ActPrepK *p, int64_t nb)
{
    const size_t wb = t == QTYPE_Q4_K ? sizeof(BlockQ4_K)
                    : t == QTYPE_Q5_K ? sizeof(BlockQ5_K) : sizeof(BlockQ6_K);
    const size_t doff = t == QTYPE_Q6_K ? offsetof(BlockQ6_K, d) : 0;
    const uint8_t *w = vw;
    float sum = 0;
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        __m256i s8[8];
        int corr[8];
        uint16_t dh[8], dmh[8];
        for (int k = 0; k < 8; k++) {
            const __m512i acc = t == QTYPE_Q6_K
                                    ? sb_q6((const BlockQ6_K *)vw, p, b + k, &corr[k])
                                    : sb_q45(t, vw, p, b + k, &corr[k]);
            s8[k] = _mm256_add_epi32(_mm512_castsi512_si256(acc),
                                     _mm512_extracti64x4_epi64(acc, 1));
            memcpy(&dh[k], w + wb * (size_t)(b + k) + doff, 2);
            memcpy(&dmh[k], w + wb * (size_t)(b + k) + 2, 2); /* Q6_K: unused */
        }
        __m256i S = hsum8_i32(s8);
        const __m256i cv = _mm256_loadu_si256((const __m256i *)(const void *)corr);
        const __m256 pd = _mm256_loadu_ps(p->d + b);
        const __m256 d8 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dh)), pd);
        __m256 p8;
        if (t == QTYPE_Q6_K) {
            S = _mm256_sub_epi32(S, _mm256_slli_epi32(cv, 5)); /* less 32 * G */
            p8 = _mm256_mul_ps(d8, _mm256_cvtepi32_ps(S));
        } else {
            const __m256 dm8 = _mm256_mul_ps(
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dmh)), pd);
            p8 = _mm256_sub_ps(_mm256_mul_ps(d8, _mm256_cvtepi32_ps(S)),
                               _mm256_mul_ps(dm8, _mm256_cvtepi32_ps(cv)));
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, p8);
        for (int k = 0; k < 8; k++)
            sum = sum + lanes[k];
    }
    for (; b < nb; b++) {
        int c;
        if (t == QTYPE_Q6_K) {
            const BlockQ6_K *w6 = (const BlockQ6_K *)vw + b;
            const int S = _mm512_reduce_add_epi32(sb_q6((const BlockQ6_K *)vw, p, b, &c)) - 32 * c;
            sum = sum + (h2f(w6->d) * p->d[b]) * (float)S;
        } else {
            const int S = _mm512_reduce_add_epi32(sb_q45(t, vw, p, b, &c));
            uint16_t dh, dmh;
            memcpy(&dh, w + wb * (size_t)b, 2);
            memcpy(&dmh, w + wb * (size_t)b + 2, 2);
            const float d = h2f(dh) * p->d[b], dmin = h2f(dmh) * p->d[b];
            sum = sum + (d * (float)S - dmin * (float)c);
        }
    }
    return sum;
}

/* y[d] for the K-quants on the 512-bit path; 0 if the row is too long for ActPrepK. */
__attribute__((noinline)) static int matvec_k_zmm(QType t, float *y, const uint8_t *w, size_t stride, const BlockQ8_K *a,
                        int64_t nb, int d)
{
    if (nb > PREPK_MAX)
        return 0;
    ActPrepK p;
    prep_act_k(&p, t, a, nb);
    for (int i = 0; i < d; i++) {
        const uint8_t *row = w + stride * (size_t)i;
        y[i] = t == QTYPE_Q4_K   ? row_k_zmm(QTYPE_Q4_K, row, &p, nb)
             : t == QTYPE_Q5_K ? row_k_zmm(QTYPE_Q5_K, row, &p, nb)
                               : row_k_zmm(QTYPE_Q6_K, row, &p, nb);
    }
    return 1;
}
#endif

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
 * The activation's quantizer (run once per matvec input), bit-identical to the twin: the
 * block's largest magnitude by max (exact), d and 1/d by the same scalar operations, x * id by
 * the same multiply, and roundf (half away from zero) as trunc plus one step away from zero
 * where the cut-off fraction is at least one half (exact for these magnitudes). */
static void quantize_q8_0_avx2(BlockQ8_0 *y, const float *x, int64_t nb)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 half = _mm256_set1_ps(0.5f), onev = _mm256_set1_ps(1.0f);
    for (int64_t b = 0; b < nb; b++, x += QK) {
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_and_ps(v[k], absmask));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
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
        /* pack 32 int32 to 32 int8 in order */
        const __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
        __m256i p = _mm256_packs_epi16(p01, p23);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(void *)y[b].qs, p);
    }
}

int quant_x86_quantize(QType t, void *y, const float *x, int64_t n)
{
    if (t != QTYPE_Q8_0)
        return 0;
    quantize_q8_0_avx2(y, x, n / QK);
    return 1;
}

/* ---------------------------------------------------------------- entry */

int quant_x86_matvec(int vnni, QType t, float *y, const void *w, size_t stride,
                     const void *x, int64_t n, int d)
{
    if (!vnni && (t == QTYPE_Q4_0 || t == QTYPE_Q5_0))
        return matvec_q45_0_avx2(t, y, w, stride, x, n / QK, d);
#if defined(QUANT_X86_ZMM)
    if (vnni && (t == QTYPE_Q8_0 || t == QTYPE_Q4_0 || t == QTYPE_Q5_0))
        return matvec_zmm(t, y, w, stride, x, n / QK, d);
    if (vnni && (t == QTYPE_Q4_K || t == QTYPE_Q5_K || t == QTYPE_Q6_K))
        return matvec_k_zmm(t, y, w, stride, x, n / QK_K, d);
#endif
    (void)vnni, (void)t, (void)y, (void)w, (void)stride, (void)x, (void)n, (void)d;
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

#endif
