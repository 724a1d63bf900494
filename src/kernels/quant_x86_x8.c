/* quant_x86_x8.c: Q4_0 matrices in eight-row groups (quant_x8.c's layout) on the AVX-512
 * VNNI path: whole matrices and several activations.  Each row's chain is rows8_q4_0's and
 * the twin's (quant_ref.c, dot_q8_0_family), bit for bit. */
#include "quant_x86_impl.h"

#if defined(QUANT_HAVE_AVX2)

#if defined(QUANT_X86_ROWS8)
/* ---------------------------------------------------------------- Q4_0 in x8 groups
 * A group's block (quant_x8.c) is the eight fp16 scales, then rows 0-3 and rows 4-7 as one
 * 64-byte load each: the lanes of rows8_q4_0 without its sixteen scattered loads.  The
 * groups are one stream; the weights X8_PF bytes on are prefetched, three lines a block. */
#define X8_UNIT (8 * sizeof(BlockQ4_0))
#define X8_PF 4096

static ALWAYS_INLINE __m512i load64(const void *p)
{
    return _mm512_loadu_si512(p);
}

/* Block u's nibbles: lo[h] and hi[h] for rows 4h .. 4h + 3. */
static ALWAYS_INLINE void x8_nibbles(const uint8_t *u, __m512i lo[2], __m512i hi[2])
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int h = 0; h < 2; h++) {
        const __m512i n = load64(u + 16 + 64 * h);
        lo[h] = _mm512_and_si512(n, m4);
        hi[h] = _mm512_and_si512(_mm512_srli_epi16(n, 4), m4);
    }
}

/* Groups w (d / 8 of them, nb blocks each) against tb activations (tb <= 4, constant where
 * inlined): act k at act + astride k with offsets off[k] (q4_0_offsets); y[k * ldy + r] =
 * row r's chain for activation k, the chain of rows8_q4_0 and of the twin. */
static ALWAYS_INLINE void x8_groups_tile(const uint8_t *w, int64_t nb, int d, const uint8_t *act,
                                         size_t astride, int32_t (*off)[Q4_0_OFF_MAX], int tb,
                                         float *y, size_t ldy)
{
    const __m512i zero = _mm512_setzero_si512();
    const size_t gb = X8_UNIT * (size_t)nb;
    for (int g = 0; g < d / 8; g++) {
        const uint8_t *wg = w + gb * (size_t)g;
        __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                         _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *u = wg + X8_UNIT * (size_t)b;
            _mm_prefetch((const char *)(u + X8_PF), _MM_HINT_T0);
            _mm_prefetch((const char *)(u + X8_PF + 64), _MM_HINT_T0);
            _mm_prefetch((const char *)(u + X8_PF + 128), _MM_HINT_T0);
            __m512i lo[2], hi[2];
            x8_nibbles(u, lo, hi);
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)u));
            for (int k = 0; k < tb; k++) {
                const BlockQ8_0 *a = (const BlockQ8_0 *)(const void *)(act + astride * (size_t)k) + b;
                const __m512i alo = _mm512_broadcast_i32x4(
                    _mm_loadu_si128((const __m128i *)(const void *)a->qs));
                const __m512i ahi = _mm512_broadcast_i32x4(
                    _mm_loadu_si128((const __m128i *)(const void *)(a->qs + 16)));
                const __m512i s0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo[0], alo),
                                                       hi[0], ahi);
                const __m512i s1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo[1], alo),
                                                       hi[1], ahi);
                const __m256i S = rows8_sums(s0, s1, off[k][b]);
                const __m256 d8 = _mm256_mul_ps(dw, _mm256_set1_ps(h2f(a->d)));
                sum[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), d8, sum[k]);
            }
        }
        for (int k = 0; k < tb; k++)
            _mm256_storeu_ps(y + ldy * (size_t)k + 8 * (size_t)g, sum[k]);
    }
}
#endif

/* quant_impl.h: the x8 groups on the VNNI path; 0 (nothing done) where this build or the
 * path lacks the kernels or the rows are longer than Q4_0_OFF_MAX blocks. */
int quant_x86_x8_matvec(int vnni, float *y, const void *w, const void *x, int64_t n, int d)
{
    return quant_x86_x8_matmul(vnni, y, 0, w, x, 0, n, d, 1);
}

int quant_x86_x8_matmul(int vnni, float *y, size_t ldy, const void *w, const void *x,
                        size_t act_stride, int64_t n, int d, int nb)
{
#if defined(QUANT_X86_ROWS8)
    const int64_t nbl = n / QK;
    if (!vnni || nbl > Q4_0_OFF_MAX)
        return 0;
    /* chunks of groups of about 64 KiB stay in L2 while each tile of activations passes */
    const size_t gb = X8_UNIT * (size_t)nbl;
    const int cg = nb == 1 ? d / 8 : quant_chunk_rows(gb);
    int32_t off[4][Q4_0_OFF_MAX];
    for (int g0 = 0; g0 < d / 8; g0 += cg) {
        const int ng = d / 8 - g0 < cg ? d / 8 - g0 : cg;
        const uint8_t *wc = (const uint8_t *)w + gb * (size_t)g0;
        for (int k = 0; k < nb; k += 4) {
            const int tb = nb - k < 4 ? nb - k : 4;
            const uint8_t *ak = (const uint8_t *)x + act_stride * (size_t)k;
            for (int j = 0; j < tb; j++)
                q4_0_offsets((const BlockQ8_0 *)(const void *)(ak + act_stride * (size_t)j),
                             nbl, off[j]);
            float *yk = y + ldy * (size_t)k + 8 * (size_t)g0;
            if (tb == 4)
                x8_groups_tile(wc, nbl, 8 * ng, ak, act_stride, off, 4, yk, ldy);
            else if (tb == 3)
                x8_groups_tile(wc, nbl, 8 * ng, ak, act_stride, off, 3, yk, ldy);
            else if (tb == 2)
                x8_groups_tile(wc, nbl, 8 * ng, ak, act_stride, off, 2, yk, ldy);
            else
                x8_groups_tile(wc, nbl, 8 * ng, ak, act_stride, off, 1, yk, ldy);
        }
    }
    return 1;
#else
    (void)vnni, (void)y, (void)ldy, (void)w, (void)x, (void)act_stride, (void)n, (void)d,
        (void)nb;
    return 0;
#endif
}

#else
typedef int quant_x86_x8_unused; /* ISO C wants a declaration in every file */
#endif
