/* quant_x86.c: AVX2 (with F16C, FMA) quantized kernels, VNNI where built: the entry points
 * and their dispatch, F16 and BF16 rows, the Q8_0 quantizers.  The 32-value types live in
 * quant_x86_q8.c, the K-quants in quant_x86_k.c, their shared inline helpers in
 * quant_x86_impl.h.
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
#include "quant_x86_impl.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(QUANT_HAVE_AVX2)

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

int quant_x86_matvec(int vnni, QType t, float *y, const void *w, size_t stride,
                     const void *x, int64_t n, int d)
{
#if !defined(QUANT_HAVE_VNNI)
    vnni = 0;
#endif
    if (stride && (t == QTYPE_Q8_0 || t == QTYPE_Q4_0 || t == QTYPE_Q5_0)) {
        quant_x86_q8_matvec(vnni, t, y, w, stride, x, n / QK, d);
        return 1;
    }
    if (stride && (t == QTYPE_Q4_K || t == QTYPE_Q5_K || t == QTYPE_Q6_K)) {
        quant_x86_k_matvec(t, y, w, stride, x, n / QK_K, d);
        return 1;
    }
    return 0;
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
        quant_x86_q8_matmul(vnni, t, y, ldy, w, stride, x, act_stride, n / QK, d, nb);
        return 1;
    }
    if (t == QTYPE_Q4_K || t == QTYPE_Q5_K || t == QTYPE_Q6_K) {
        quant_x86_k_matmul(t, y, ldy, w, stride, x, act_stride, n / QK_K, d, nb);
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
    switch (t) {
    case QTYPE_Q8_0:
    case QTYPE_Q4_0:
    case QTYPE_Q5_0:
        *out = quant_x86_q8_dot(vnni, t, w, x, n / QK);
        return 1;
    case QTYPE_Q4_K:
    case QTYPE_Q5_K:
    case QTYPE_Q6_K:
        *out = quant_x86_k_dot(t, w, x, n / QK_K);
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
