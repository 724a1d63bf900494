/* matvec.c: y = W x, the hot loop of token generation (memory-bandwidth bound).
 *
 * The own kernel computes every y[i] in one canonical order that depends only on n:
 *   - 32 lanes: lane l (0..31) accumulates, starting from +0, the products w[j]*x[j] for
 *     j = 32t + l, t = 0, 1, ... in increasing t (a separate multiply, then an add: no FMA);
 *   - the last partial block of n % 32 elements is treated as zero-padded to 32 (lanes past
 *     the end add 0*0 = +0);
 *   - the 32 lane sums are reduced by the halving tree a[l] += a[l+h], h = 16, 8, 4, 2, 1,
 *     and y[i] = a[0].
 * The AVX-512 path (2 x 16 lanes), the AVX2 path (4 x 8 lanes) and the portable path (8 x 4
 * lanes, GCC vector extensions: NEON on ARM) all implement exactly this order, for several rows
 * at a time and for a single row alike, so a row's result does not depend on d, on which rows a
 * rank holds, or on the instruction set (tests/unit/test_kernels.c checks all of this).
 */
#include "kernels.h"

#include <string.h>
/* HEADSPLIT_NO_BLAS: a build without OpenBLAS (the aarch64 cross check, scripts/test-aarch64.sh);
 * MATVEC_BLAS then runs the own kernel. */
#if !defined(HEADSPLIT_NO_BLAS)
#include <cblas.h>
#endif

/* x86: the AVX-512 and AVX2 paths are compiled in every build (target attributes), so a
 * portable build (-DHEADSPLIT_NATIVE=OFF) chooses among them at run time by cpuid; a native
 * build calls the one its -march allows.  All paths give the same bits. */
#if defined(__x86_64__) || defined(__i386__)
#define MV_X86 1
#include <immintrin.h>
#define MV_T512 __attribute__((target("avx512f"), unused))
#define MV_T256 __attribute__((target("avx2"), unused))
#endif

#define MV_LANES 32

static MatvecImpl matvec_impl = MATVEC_AUTO;

/* Selecting BLAS also pins OpenBLAS to one thread: a rank is one core, parallelism is MPI's. */
void kernels_set_matvec(MatvecImpl impl)
{
    matvec_impl = impl;
#if !defined(HEADSPLIT_NO_BLAS)
    if (impl == MATVEC_BLAS)
        openblas_set_num_threads(1);
#endif
}

/* The implementation kernels_matvec uses now. */
MatvecImpl kernels_get_matvec(void) { return matvec_impl; }

/* OpenBLAS's core name (static storage; "unknown" if it gives none). */
const char *kernels_blas_corename(void)
{
#if defined(HEADSPLIT_NO_BLAS)
    return "none";
#else
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
#endif
}

/* ---- portable C (GCC/Clang vector extensions): the path on CPUs without AVX2, e.g. NEON ----
 * Lanes 4q..4q+3 live in vector q (q = 0..7); elementwise vector arithmetic is IEEE per lane,
 * so this is the same order as the SIMD paths below on any target. */

typedef float MvV4 __attribute__((vector_size(16)));

#define MV_PROWS 2 /* rows per pass: 16 accumulators + 8 x vectors fit NEON's 32 registers */

static inline MvV4 mv_load4(const float *p)
{
    MvV4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* acc[q] += w[4q..4q+4) * x[4q..4q+4) for one full 32-lane block. */
static inline void mv_step_v4(MvV4 *acc, const float *w, const MvV4 *xv)
{
    for (int q = 0; q < MV_LANES / 4; q++)
        acc[q] = acc[q] + mv_load4(w + 4 * q) * xv[q];
}

/* The halving tree h = 16, 8, 4, 2, 1 over the 32 lanes. */
static inline float mv_reduce_v4(const MvV4 *a)
{
    const MvV4 b0 = a[0] + a[4], b1 = a[1] + a[5], b2 = a[2] + a[6], b3 = a[3] + a[7];
    const MvV4 c0 = b0 + b2, c1 = b1 + b3;
    const MvV4 e = c0 + c1;
    const float f0 = e[0] + e[2], f1 = e[1] + e[3];
    return f0 + f1;
}

/* y[d] = W x in the canonical order with portable vector code; rows ld floats apart. */
void kernels_matvec_portable(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    const int nb = n & ~(MV_LANES - 1);
    const int rem = n - nb;
    float xpad[MV_LANES] = {0}, wpad[MV_LANES] = {0};
    for (int l = 0; l < rem; l++)
        xpad[l] = x[nb + l];
    MvV4 xt[MV_LANES / 4];
    for (int q = 0; q < MV_LANES / 4; q++)
        xt[q] = mv_load4(xpad + 4 * q);
    int i = 0;
    for (; i + MV_PROWS <= d; i += MV_PROWS) {
        MvV4 acc[MV_PROWS][MV_LANES / 4];
        memset(acc, 0, sizeof acc);
        for (int j = 0; j < nb; j += MV_LANES) {
            MvV4 xv[MV_LANES / 4];
            for (int q = 0; q < MV_LANES / 4; q++)
                xv[q] = mv_load4(x + j + 4 * q);
            for (int r = 0; r < MV_PROWS; r++)
                mv_step_v4(acc[r], w + (size_t)(i + r) * ld + j, xv);
        }
        for (int r = 0; r < MV_PROWS; r++) {
            if (rem) {
                for (int l = 0; l < rem; l++)
                    wpad[l] = w[(size_t)(i + r) * ld + (size_t)(nb + l)];
                mv_step_v4(acc[r], wpad, xt);
            }
            y[i + r] = mv_reduce_v4(acc[r]);
        }
    }
    for (; i < d; i++) {
        MvV4 acc[MV_LANES / 4];
        memset(acc, 0, sizeof acc);
        const float *w0 = w + (size_t)i * ld;
        for (int j = 0; j < nb; j += MV_LANES) {
            MvV4 xv[MV_LANES / 4];
            for (int q = 0; q < MV_LANES / 4; q++)
                xv[q] = mv_load4(x + j + 4 * q);
            mv_step_v4(acc, w0 + j, xv);
        }
        if (rem) {
            for (int l = 0; l < rem; l++)
                wpad[l] = w0[nb + l];
            mv_step_v4(acc, wpad, xt);
        }
        y[i] = mv_reduce_v4(acc);
    }
}

#if defined(MV_X86)

/* ---- AVX-512: lanes 0..15 in the first register, 16..31 in the second ---- */

/* Rows per pass: 16 accumulators + 2 x registers of 32.  Eight concurrent row streams reach
 * ~0.9 of a plain read's bandwidth on Zen 5; four reach ~0.83 (bench/matvec_bench.c). */
#define MV_ROWS 8

static inline MV_T512 float mv_reduce512(__m512 a0, __m512 a1)
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

/* One full 32-lane block of one row: a0 += w[j..j+16) * x0, a1 += w[j+16..j+32) * x1. */
#define MV_STEP512(a0, a1, wr, x0, x1, j)                                                    \
    do {                                                                                     \
        a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_loadu_ps((wr) + (j)), x0));              \
        a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_loadu_ps((wr) + (j) + 16), x1));         \
    } while (0)

/* The zero-padded last block (masked loads do not touch memory past the row). */
#define MV_TAIL512(a0, a1, wr, x0, x1, j, m0, m1)                                            \
    do {                                                                                     \
        a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, (wr) + (j)), x0));    \
        a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, (wr) + (j) + 16), x1)); \
    } while (0)

static MV_T512 void matvec_512(float *restrict y, const float *restrict w,
                               const float *restrict x, int n, int d, size_t ld)
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
        const float *wr[MV_ROWS];
        __m512 a0[MV_ROWS], a1[MV_ROWS];
        for (int r = 0; r < MV_ROWS; r++) {
            wr[r] = w + (size_t)(i + r) * ld;
            a0[r] = a1[r] = _mm512_setzero_ps();
        }
        for (int j = 0; j < nb; j += MV_LANES) {
            const __m512 x0 = _mm512_loadu_ps(x + j), x1 = _mm512_loadu_ps(x + j + 16);
            for (int r = 0; r < MV_ROWS; r++)
                MV_STEP512(a0[r], a1[r], wr[r], x0, x1, j);
        }
        if (rem)
            for (int r = 0; r < MV_ROWS; r++)
                MV_TAIL512(a0[r], a1[r], wr[r], xt0, xt1, nb, m0, m1);
        for (int r = 0; r < MV_ROWS; r++)
            y[i + r] = mv_reduce512(a0[r], a1[r]);
    }
    for (; i < d; i++) { /* remainder rows: the same steps, one row at a time */
        const float *w0 = w + (size_t)i * ld;
        __m512 a00 = _mm512_setzero_ps(), a01 = _mm512_setzero_ps();
        for (int j = 0; j < nb; j += MV_LANES) {
            const __m512 x0 = _mm512_loadu_ps(x + j), x1 = _mm512_loadu_ps(x + j + 16);
            MV_STEP512(a00, a01, w0, x0, x1, j);
        }
        if (rem)
            MV_TAIL512(a00, a01, w0, xt0, xt1, nb, m0, m1);
        y[i] = mv_reduce512(a00, a01);
    }
}

/* ---- AVX2: lanes 0..7, 8..15, 16..23, 24..31 in four registers ---- */

/* Rows per pass: as on AVX-512, eight row streams beat two (0.5 -> ~0.8 of a plain read); the
 * 32 accumulators partly live in L1, which costs nothing next to the memory stream. */

static inline MV_T256 float mv_reduce256(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
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

static MV_T256 void matvec_256(float *restrict y, const float *restrict w,
                               const float *restrict x, int n, int d, size_t ld)
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
        const float *wr[MV_ROWS];
        __m256 a[MV_ROWS][4];
        for (int r = 0; r < MV_ROWS; r++) {
            wr[r] = w + (size_t)(i + r) * ld;
            for (int q = 0; q < 4; q++)
                a[r][q] = _mm256_setzero_ps();
        }
        for (int j = 0; j < nb; j += MV_LANES) {
            __m256 xv[4];
            for (int q = 0; q < 4; q++)
                xv[q] = _mm256_loadu_ps(x + j + 8 * q);
            for (int r = 0; r < MV_ROWS; r++)
                MV_STEP256(a[r], wr[r], xv, j);
        }
        if (rem)
            for (int r = 0; r < MV_ROWS; r++)
                MV_TAIL256(a[r], wr[r], xt, nb, mk);
        for (int r = 0; r < MV_ROWS; r++)
            y[i + r] = mv_reduce256(a[r][0], a[r][1], a[r][2], a[r][3]);
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

#endif

/* The fastest path this CPU has: fixed at compile time in a native build, by cpuid in a
 * portable one. */
static void matvec_own(float *restrict y, const float *restrict w, const float *restrict x,
                       int n, int d, size_t ld)
{
#if defined(__AVX512F__)
    matvec_512(y, w, x, n, d, ld);
#elif defined(__AVX2__)
    matvec_256(y, w, x, n, d, ld);
#elif defined(MV_X86)
    if (__builtin_cpu_supports("avx512f"))
        matvec_512(y, w, x, n, d, ld);
    else if (__builtin_cpu_supports("avx2"))
        matvec_256(y, w, x, n, d, ld);
    else
        kernels_matvec_portable(y, w, x, n, d, ld);
#else
    kernels_matvec_portable(y, w, x, n, d, ld);
#endif
}

const char *kernels_matvec_path(void)
{
#if defined(__AVX512F__)
    return "avx512 (native)";
#elif defined(__AVX2__)
    return "avx2 (native)";
#elif defined(MV_X86)
    return __builtin_cpu_supports("avx512f") ? "avx512 (chosen at run time)"
           : __builtin_cpu_supports("avx2")  ? "avx2 (chosen at run time)"
                                             : "portable C (chosen at run time)";
#elif defined(__ARM_NEON)
    return "neon (portable C vectors)";
#else
    return "portable C vectors";
#endif
}

/* OpenBLAS sgemv: fast, but its summation order may depend on d and on the slice, so the
 * row-slice bit-identity promised by kernels.h holds only for the own kernel. */
static void matvec_blas(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    if (d <= 0)
        return;
    if (n <= 0) {
        for (int i = 0; i < d; i++)
            y[i] = 0.0f;
        return;
    }
#if defined(HEADSPLIT_NO_BLAS)
    matvec_own(y, w, x, n, d, ld);
#else
    cblas_sgemv(CblasRowMajor, CblasNoTrans, d, n, 1.0f, w, (int)ld, x, 1, 0.0f, y, 1);
#endif
}

/* A matrix-vector job for the pool: rows [lo, hi) of y = W x. */
typedef struct {
    float *y;
    const float *w, *x;
    int n;
    size_t ld;
} MvJob;

static void mv_rows(void *arg, int lo, int hi)
{
    const MvJob *j = arg;
    matvec_own(j->y + lo, j->w + (size_t)lo * j->ld, j->x, j->n, hi - lo, j->ld);
}

/* y[d] = W x by the own kernel, whatever the switch says; rows ld floats apart.  Rows are
 * split over the kernel threads; each row's order depends only on n, so any split gives
 * the same bits. */
void kernels_matvec_own(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    MvJob j = {y, w, x, n, ld};
    kernels_parallel_rows(mv_rows, &j, d, (long long)n * d);
}

/* y[d] = W x by the selected implementation; rows ld floats apart. */
void kernels_matvec_ld(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    if (matvec_impl == MATVEC_BLAS)
        matvec_blas(y, w, x, n, d, ld);
    else
        kernels_matvec_own(y, w, x, n, d, ld);
}

/* y[d] = W x for a contiguous W[d][n] by the selected implementation. */
void kernels_matvec(float *y, const float *w, const float *x, int n, int d)
{
    kernels_matvec_ld(y, w, x, n, d, (size_t)n);
}
