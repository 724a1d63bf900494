/* matvec.c: y = W x, the hot loop of token generation (memory-bandwidth bound).
 *
 * The own kernel computes every y[i] in one canonical order that depends only on n:
 *   - 32 lanes: lane l (0..31) accumulates, starting from +0, the products w[j]*x[j] for
 *     j = 32t + l, t = 0, 1, ... in increasing t (a separate multiply, then an add: no FMA);
 *   - the last partial block of n % 32 elements is treated as zero-padded to 32 (lanes past
 *     the end add 0*0 = +0);
 *   - the 32 lane sums are reduced by the halving tree a[l] += a[l+h], h = 16, 8, 4, 2, 1,
 *     and y[i] = a[0].
 * The AVX-512 path (2 x 16 lanes), the AVX2 path (4 x 8 lanes) and the plain-C path all
 * implement exactly this order, for several rows at a time and for a single row alike, so a
 * row's result does not depend on d, on which rows a rank holds, or on the instruction set.
 */
#include "kernels.h"

#include <cblas.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#define MV_LANES 32

static MatvecImpl matvec_impl = MATVEC_AUTO;

void kernels_set_matvec(MatvecImpl impl) { matvec_impl = impl; }

MatvecImpl kernels_get_matvec(void) { return matvec_impl; }

const char *kernels_blas_corename(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

/* ---- plain C: the definition of the order, also the path on CPUs without AVX2 ---- */

/* Adds one 32-lane block (k valid elements, the rest zero-padded) of one row into acc. */
static inline void mv_block_generic(float *restrict acc, const float *restrict w,
                                    const float *restrict x, int k)
{
    if (k == MV_LANES) {
        for (int l = 0; l < MV_LANES; l++) {
            float p = w[l] * x[l];
            acc[l] = acc[l] + p;
        }
    } else {
        for (int l = 0; l < MV_LANES; l++) {
            float p = l < k ? w[l] * x[l] : 0.0f * 0.0f;
            acc[l] = acc[l] + p;
        }
    }
}

/* The halving-tree reduction of 32 lanes (destroys acc). */
static inline float mv_reduce_generic(float *acc)
{
    for (int h = MV_LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++)
            acc[l] = acc[l] + acc[l + h];
    return acc[0];
}

/* Canonical-order matvec in plain C; two rows per pass so x is reused. */
void kernels_matvec_portable(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    int i = 0;
    for (; i + 2 <= d; i += 2) {
        const float *w0 = w + (size_t)i * ld, *w1 = w0 + ld;
        float a0[MV_LANES] = {0}, a1[MV_LANES] = {0};
        for (int j = 0; j < n; j += MV_LANES) {
            int k = n - j < MV_LANES ? n - j : MV_LANES;
            mv_block_generic(a0, w0 + j, x + j, k);
            mv_block_generic(a1, w1 + j, x + j, k);
        }
        y[i] = mv_reduce_generic(a0);
        y[i + 1] = mv_reduce_generic(a1);
    }
    for (; i < d; i++) {
        const float *w0 = w + (size_t)i * ld;
        float a0[MV_LANES] = {0};
        for (int j = 0; j < n; j += MV_LANES) {
            int k = n - j < MV_LANES ? n - j : MV_LANES;
            mv_block_generic(a0, w0 + j, x + j, k);
        }
        y[i] = mv_reduce_generic(a0);
    }
}

#if defined(__AVX512F__)

/* ---- AVX-512: lanes 0..15 in the first register, 16..31 in the second ---- */

#define MV_ROWS 4 /* rows per pass: 8 accumulators, x reused from registers */

static inline float mv_reduce512(__m512 a0, __m512 a1)
{
    __m512 s = _mm512_add_ps(a0, a1); /* h = 16 */
    __m256 lo = _mm512_castps512_ps256(s);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1));
    __m256 t = _mm256_add_ps(lo, hi); /* h = 8 */
    __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)); /* h = 4 */
    u = _mm_add_ps(u, _mm_movehl_ps(u, u));                                       /* h = 2 */
    u = _mm_add_ss(u, _mm_shuffle_ps(u, u, 1));                                   /* h = 1 */
    return _mm_cvtss_f32(u);
}

#define MV_STEP512(a0, a1, wr, x0, x1, j)                                                    \
    do {                                                                                     \
        a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_loadu_ps((wr) + (j)), x0));              \
        a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_loadu_ps((wr) + (j) + 16), x1));         \
    } while (0)

#define MV_TAIL512(a0, a1, wr, x0, x1, j, m0, m1)                                            \
    do {                                                                                     \
        a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, (wr) + (j)), x0));    \
        a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, (wr) + (j) + 16), x1)); \
    } while (0)

static void matvec_own(float *restrict y, const float *restrict w, const float *restrict x,
                       int n, int d, size_t ld)
{
    const int nb = n & ~(MV_LANES - 1);
    const int rem = n - nb;
    const __mmask16 m0 = (__mmask16)(rem >= 16 ? 0xFFFFu : (1u << rem) - 1u);
    const __mmask16 m1 = (__mmask16)(rem > 16 ? (1u << (rem - 16)) - 1u : 0u);
    __m512 xt0 = _mm512_setzero_ps(), xt1 = _mm512_setzero_ps();
    if (rem) {
        xt0 = _mm512_maskz_loadu_ps(m0, x + nb);
        xt1 = _mm512_maskz_loadu_ps(m1, x + nb + 16);
    }
    int i = 0;
    for (; i + MV_ROWS <= d; i += MV_ROWS) {
        const float *w0 = w + (size_t)i * ld, *w1 = w0 + ld, *w2 = w1 + ld, *w3 = w2 + ld;
        __m512 a00 = _mm512_setzero_ps(), a01 = _mm512_setzero_ps();
        __m512 a10 = _mm512_setzero_ps(), a11 = _mm512_setzero_ps();
        __m512 a20 = _mm512_setzero_ps(), a21 = _mm512_setzero_ps();
        __m512 a30 = _mm512_setzero_ps(), a31 = _mm512_setzero_ps();
        for (int j = 0; j < nb; j += MV_LANES) {
            __m512 x0 = _mm512_loadu_ps(x + j), x1 = _mm512_loadu_ps(x + j + 16);
            MV_STEP512(a00, a01, w0, x0, x1, j);
            MV_STEP512(a10, a11, w1, x0, x1, j);
            MV_STEP512(a20, a21, w2, x0, x1, j);
            MV_STEP512(a30, a31, w3, x0, x1, j);
        }
        if (rem) {
            MV_TAIL512(a00, a01, w0, xt0, xt1, nb, m0, m1);
            MV_TAIL512(a10, a11, w1, xt0, xt1, nb, m0, m1);
            MV_TAIL512(a20, a21, w2, xt0, xt1, nb, m0, m1);
            MV_TAIL512(a30, a31, w3, xt0, xt1, nb, m0, m1);
        }
        y[i] = mv_reduce512(a00, a01);
        y[i + 1] = mv_reduce512(a10, a11);
        y[i + 2] = mv_reduce512(a20, a21);
        y[i + 3] = mv_reduce512(a30, a31);
    }
    for (; i < d; i++) {
        const float *w0 = w + (size_t)i * ld;
        __m512 a00 = _mm512_setzero_ps(), a01 = _mm512_setzero_ps();
        for (int j = 0; j < nb; j += MV_LANES) {
            __m512 x0 = _mm512_loadu_ps(x + j), x1 = _mm512_loadu_ps(x + j + 16);
            MV_STEP512(a00, a01, w0, x0, x1, j);
        }
        if (rem)
            MV_TAIL512(a00, a01, w0, xt0, xt1, nb, m0, m1);
        y[i] = mv_reduce512(a00, a01);
    }
}

#elif defined(__AVX2__)

/* ---- AVX2: lanes 0..7, 8..15, 16..23, 24..31 in four registers ---- */

#define MV_ROWS 2 /* rows per pass: 8 accumulators + 4 x registers of 16 */

static inline float mv_reduce256(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 b0 = _mm256_add_ps(a0, a2); /* h = 16, lanes 0..7 */
    __m256 b1 = _mm256_add_ps(a1, a3); /* h = 16, lanes 8..15 */
    __m256 t = _mm256_add_ps(b0, b1);  /* h = 8 */
    __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)); /* h = 4 */
    u = _mm_add_ps(u, _mm_movehl_ps(u, u));                                       /* h = 2 */
    u = _mm_add_ss(u, _mm_shuffle_ps(u, u, 1));                                   /* h = 1 */
    return _mm_cvtss_f32(u);
}

#define MV_STEP256(a, wr, xv, j)                                                             \
    do {                                                                                     \
        a[0] = _mm256_add_ps(a[0], _mm256_mul_ps(_mm256_loadu_ps((wr) + (j)), xv[0]));       \
        a[1] = _mm256_add_ps(a[1], _mm256_mul_ps(_mm256_loadu_ps((wr) + (j) + 8), xv[1]));   \
        a[2] = _mm256_add_ps(a[2], _mm256_mul_ps(_mm256_loadu_ps((wr) + (j) + 16), xv[2]));  \
        a[3] = _mm256_add_ps(a[3], _mm256_mul_ps(_mm256_loadu_ps((wr) + (j) + 24), xv[3]));  \
    } while (0)

#define MV_TAIL256(a, wr, xv, j, mk)                                                         \
    do {                                                                                     \
        for (int q_ = 0; q_ < 4; q_++)                                                       \
            a[q_] = _mm256_add_ps(                                                           \
                a[q_], _mm256_mul_ps(_mm256_maskload_ps((wr) + (j) + 8 * q_, mk[q_]), xv[q_])); \
    } while (0)

static void matvec_own(float *restrict y, const float *restrict w, const float *restrict x,
                       int n, int d, size_t ld)
{
    const int nb = n & ~(MV_LANES - 1);
    const int rem = n - nb;
    __m256i mk[4];
    __m256 xt[4];
    for (int q = 0; q < 4; q++) {
        const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        mk[q] = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem - 8 * q), idx);
        xt[q] = rem ? _mm256_maskload_ps(x + nb + 8 * q, mk[q]) : _mm256_setzero_ps();
    }
    int i = 0;
    for (; i + MV_ROWS <= d; i += MV_ROWS) {
        const float *w0 = w + (size_t)i * ld, *w1 = w0 + ld;
        __m256 a[4], b[4];
        for (int q = 0; q < 4; q++)
            a[q] = b[q] = _mm256_setzero_ps();
        for (int j = 0; j < nb; j += MV_LANES) {
            __m256 xv[4];
            for (int q = 0; q < 4; q++)
                xv[q] = _mm256_loadu_ps(x + j + 8 * q);
            MV_STEP256(a, w0, xv, j);
            MV_STEP256(b, w1, xv, j);
        }
        if (rem) {
            MV_TAIL256(a, w0, xt, nb, mk);
            MV_TAIL256(b, w1, xt, nb, mk);
        }
        y[i] = mv_reduce256(a[0], a[1], a[2], a[3]);
        y[i + 1] = mv_reduce256(b[0], b[1], b[2], b[3]);
    }
    for (; i < d; i++) {
        const float *w0 = w + (size_t)i * ld;
        __m256 a[4];
        for (int q = 0; q < 4; q++)
            a[q] = _mm256_setzero_ps();
        for (int j = 0; j < nb; j += MV_LANES) {
            __m256 xv[4];
            for (int q = 0; q < 4; q++)
                xv[q] = _mm256_loadu_ps(x + j + 8 * q);
            MV_STEP256(a, w0, xv, j);
        }
        if (rem)
            MV_TAIL256(a, w0, xt, nb, mk);
        y[i] = mv_reduce256(a[0], a[1], a[2], a[3]);
    }
}

#else

static void matvec_own(float *restrict y, const float *restrict w, const float *restrict x,
                       int n, int d, size_t ld)
{
    kernels_matvec_portable(y, w, x, n, d, ld);
}

#endif

static void matvec_blas(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    if (d <= 0)
        return;
    if (n <= 0) {
        for (int i = 0; i < d; i++)
            y[i] = 0.0f;
        return;
    }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, d, n, 1.0f, w, (int)ld, x, 1, 0.0f, y, 1);
}

void kernels_matvec_own(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    matvec_own(y, w, x, n, d, ld);
}

void kernels_matvec_ld(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    if (matvec_impl == MATVEC_BLAS)
        matvec_blas(y, w, x, n, d, ld);
    else
        matvec_own(y, w, x, n, d, ld);
}

void kernels_matvec(float *y, const float *w, const float *x, int n, int d)
{
    kernels_matvec_ld(y, w, x, n, d, (size_t)n);
}
