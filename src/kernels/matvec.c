/* matvec.c: y = W x, the hot loop of token generation (memory-bandwidth bound).
 *
 * The own kernel computes every y[i] in one canonical order that depends only on n: the order
 * of ggml_vec_dot_f32 in llama.cpp's CPU backend built for AVX-512 (what llama.cpp computes for
 * an F32 matrix times one token: its llamafile sgemm serves only two or more columns), so F32
 * GGUF files give llama.cpp's logits bit for bit (docs/model-format.md):
 *   - four 16-lane accumulators A0..A3 start at +0; for every whole step of 64 values
 *     (t = 0, 1, ... up to np = n - n % 64), lane l of Aq takes fma(w[j], x[j], Aq[l]) for
 *     j = 64t + 16q + l;
 *   - c = (A0 + A2) + (A1 + A3) lane by lane, then the 16 lanes by the tree of
 *     _mm512_reduce_add_ps: c[l] += c[l + 8], c[l] += c[l + 4], (c0 + c2) + (c1 + c3)
 *     (s = +0 when there is no whole step);
 *   - the last t = n % 64 values added to s in order: s + w[j] * x[j] (the product rounded)
 *     for the first t - t % 4, fma(w[j], x[j], s) for the last t % 4.
 * The AVX-512 path (one register per accumulator), the AVX2 path (two) and the portable path
 * (four vectors of 4, GCC vector extensions: NEON on ARM) all implement exactly this order, for
 * several rows at a time and for a single row alike, so a row's result does not depend on d,
 * on which rows a rank holds, or on the instruction set (tests/unit/test_kernels.c).
 * --f32-order avx2 selects the order of llama.cpp's AVX2 build instead (f32_order.h: four
 * 8-lane accumulators over steps of 32, GGML_F32x8_REDUCE), computed by every path here as
 * well (the AVX-512 path keeps accumulators 0|1 and 2|3 in one register each). */
#include "kernels.h"
#include "f32_order.h"

#include <math.h>
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
#define MV_T256 __attribute__((target("avx2,fma"), unused))
#endif


static MatvecImpl matvec_impl = MATVEC_AUTO;
static KernelsF32Order f32_order = KERNELS_F32_ORDER_AVX512;

void kernels_set_f32_order(KernelsF32Order o) { f32_order = o; }
KernelsF32Order kernels_get_f32_order(void) { return f32_order; }

const char *kernels_f32_order_name(KernelsF32Order o)
{
    return o == KERNELS_F32_ORDER_AVX2 ? "avx2" : "avx512";
}

int kernels_parse_f32_order(const char *s, KernelsF32Order *o)
{
    if (s && strcmp(s, "avx512") == 0)
        *o = KERNELS_F32_ORDER_AVX512;
    else if (s && strcmp(s, "avx2") == 0)
        *o = KERNELS_F32_ORDER_AVX2;
    else
        return -1;
    return 0;
}

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
 * A 16-lane accumulator is four vectors of 4; elementwise vector arithmetic and FMA are IEEE
 * per lane, so this is the same order as the SIMD paths below on any target. */

typedef F32V4 MvV4;

#define MV_PROWS 1 /* rows per pass: 16 accumulators + 16 x vectors fill NEON's 32 registers */

static inline MvV4 mv_load4(const float *p)
{
    MvV4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The AVX2 build's order (f32_order.h) with portable vectors: accumulator q is vectors 2q
 * (lanes 0-3) and 2q + 1 (lanes 4-7). */
static void matvec8_portable(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    const int np = n & ~(F32_STEP8 - 1);
    for (int i = 0; i < d; i++) {
        const float *wr = w + (size_t)i * ld;
        MvV4 acc[8];
        memset(acc, 0, sizeof acc);
        for (int j = 0; j < np; j += F32_STEP8)
            for (int v = 0; v < 8; v++)
                acc[v] = f32_fma4(mv_load4(wr + j + 4 * v), mv_load4(x + j + 4 * v), acc[v]);
        float c[8];
        for (int s = 0; s < 2; s++) {
            const MvV4 cs = (acc[s] + acc[4 + s]) + (acc[2 + s] + acc[6 + s]);
            memcpy(c + 4 * s, &cs, sizeof cs);
        }
        y[i] = f32_finish8(c, wr, x, np, n);
    }
}

/* y[d] = W x in the canonical order with portable vector code; rows ld floats apart. */
void kernels_matvec_portable(float *y, const float *w, const float *x, int n, int d, size_t ld)
{
    if (f32_order == KERNELS_F32_ORDER_AVX2) {
        matvec8_portable(y, w, x, n, d, ld);
        return;
    }
    const int np = n & ~(F32_STEP - 1);
    for (int i = 0; i < d; i += MV_PROWS) {
        const int nr = d - i < MV_PROWS ? d - i : MV_PROWS;
        MvV4 acc[MV_PROWS][16];
        memset(acc, 0, sizeof acc);
        for (int j = 0; j < np; j += F32_STEP)
            for (int r = 0; r < nr; r++) {
                const float *wr = w + (size_t)(i + r) * ld + j;
                for (int v = 0; v < 16; v++)
                    acc[r][v] = f32_fma4(mv_load4(wr + 4 * v), mv_load4(x + j + 4 * v), acc[r][v]);
            }
        for (int r = 0; r < nr; r++) {
            float c[16];
            for (int s = 0; s < 4; s++) {
                const MvV4 cs = (acc[r][s] + acc[r][8 + s]) + (acc[r][4 + s] + acc[r][12 + s]);
                memcpy(c + 4 * s, &cs, sizeof cs);
            }
            y[i + r] = f32_finish(c, w + (size_t)(i + r) * ld, x, np, n);
        }
    }
}

#if defined(MV_X86)

/* ---- AVX-512: one register per 16-lane accumulator, four per row ---- */

/* Rows per pass: 24 accumulators + 4 x registers (the weights are FMA memory operands), six
 * concurrent row streams, each read in whole 256-byte steps (more streams reach more of a
 * core's read bandwidth: ~0.83 of it with four, ~0.9 with eight on Zen 5; eight would need
 * 32 accumulators, more than the 32 registers leave). */
#define MV_ROWS 6

static MV_T512 void matvec_512(float *restrict y, const float *restrict w,
                               const float *restrict x, int n, int d, size_t ld)
{
    const int np = n & ~(F32_STEP - 1);
    for (int i = 0; i < d; i += MV_ROWS) {
        const int nr = d - i < MV_ROWS ? d - i : MV_ROWS;
        const float *wr[MV_ROWS];
        __m512 a[MV_ROWS][4];
        for (int r = 0; r < MV_ROWS; r++) {
            wr[r] = w + (size_t)(i + (r < nr ? r : 0)) * ld;
            for (int q = 0; q < 4; q++)
                a[r][q] = _mm512_setzero_ps();
        }
        if (nr == MV_ROWS) {
            for (int j = 0; j < np; j += F32_STEP) {
                __m512 xv[4];
                for (int q = 0; q < 4; q++)
                    xv[q] = _mm512_loadu_ps(x + j + 16 * q);
                for (int r = 0; r < MV_ROWS; r++)
                    for (int q = 0; q < 4; q++)
                        a[r][q] = _mm512_fmadd_ps(_mm512_loadu_ps(wr[r] + j + 16 * q), xv[q],
                                                  a[r][q]);
            }
        } else {
            for (int r = 0; r < nr; r++)
                for (int j = 0; j < np; j += F32_STEP)
                    for (int q = 0; q < 4; q++)
                        a[r][q] = _mm512_fmadd_ps(_mm512_loadu_ps(wr[r] + j + 16 * q),
                                                  _mm512_loadu_ps(x + j + 16 * q), a[r][q]);
        }
        for (int r = 0; r < nr; r++) {
            float c[16];
            _mm512_storeu_ps(c, _mm512_add_ps(_mm512_add_ps(a[r][0], a[r][2]),
                                              _mm512_add_ps(a[r][1], a[r][3])));
            y[i + r] = f32_finish(c, wr[r], x, np, n);
        }
    }
}

/* ---- AVX2 + FMA: two registers per 16-lane accumulator, eight per row ---- */

/* Rows per pass: two rows' 16 accumulators; the x vectors come from L1 as memory operands. */
#define MV_ROWS256 2

static MV_T256 void matvec_256(float *restrict y, const float *restrict w,
                               const float *restrict x, int n, int d, size_t ld)
{
    const int np = n & ~(F32_STEP - 1);
    for (int i = 0; i < d; i += MV_ROWS256) {
        const int nr = d - i < MV_ROWS256 ? d - i : MV_ROWS256;
        const float *wr[MV_ROWS256];
        __m256 a[MV_ROWS256][8];
        for (int r = 0; r < MV_ROWS256; r++) {
            wr[r] = w + (size_t)(i + (r < nr ? r : 0)) * ld;
            for (int v = 0; v < 8; v++)
                a[r][v] = _mm256_setzero_ps();
        }
        if (nr == MV_ROWS256) {
            for (int j = 0; j < np; j += F32_STEP)
                for (int v = 0; v < 8; v++) {
                    const __m256 xv = _mm256_loadu_ps(x + j + 8 * v);
                    for (int r = 0; r < MV_ROWS256; r++)
                        a[r][v] = _mm256_fmadd_ps(_mm256_loadu_ps(wr[r] + j + 8 * v), xv, a[r][v]);
                }
        } else {
            for (int j = 0; j < np; j += F32_STEP)
                for (int v = 0; v < 8; v++)
                    a[0][v] = _mm256_fmadd_ps(_mm256_loadu_ps(wr[0] + j + 8 * v),
                                              _mm256_loadu_ps(x + j + 8 * v), a[0][v]);
        }
        for (int r = 0; r < nr; r++) {
            float c[16]; /* vector v holds lanes 8(v % 2).. of accumulator v / 2 */
            for (int s = 0; s < 2; s++)
                _mm256_storeu_ps(c + 8 * s,
                                 _mm256_add_ps(_mm256_add_ps(a[r][s], a[r][4 + s]),
                                               _mm256_add_ps(a[r][2 + s], a[r][6 + s])));
            y[i + r] = f32_finish(c, wr[r], x, np, n);
        }
    }
}

/* ---- the AVX2 build's order (--f32-order avx2) ---- */

/* AVX-512: register 0 of a row holds accumulators 0 | 1 (values j .. j + 15 of a 32-value
 * step), register 1 accumulators 2 | 3; (A0 + A2) + (A1 + A3) is then the sum of the two
 * registers' halves.  Eight rows per pass: 16 accumulators, eight row streams. */
#define MV8_ROWS 8

static MV_T512 void matvec8_512(float *restrict y, const float *restrict w,
                                const float *restrict x, int n, int d, size_t ld)
{
    const int np = n & ~(F32_STEP8 - 1);
    for (int i = 0; i < d; i += MV8_ROWS) {
        const int nr = d - i < MV8_ROWS ? d - i : MV8_ROWS;
        const float *wr[MV8_ROWS];
        __m512 a[MV8_ROWS][2];
        for (int r = 0; r < MV8_ROWS; r++) {
            wr[r] = w + (size_t)(i + (r < nr ? r : 0)) * ld;
            a[r][0] = a[r][1] = _mm512_setzero_ps();
        }
        if (nr == MV8_ROWS) {
            for (int j = 0; j < np; j += F32_STEP8) {
                const __m512 x0 = _mm512_loadu_ps(x + j), x1 = _mm512_loadu_ps(x + j + 16);
                for (int r = 0; r < MV8_ROWS; r++) {
                    a[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(wr[r] + j), x0, a[r][0]);
                    a[r][1] = _mm512_fmadd_ps(_mm512_loadu_ps(wr[r] + j + 16), x1, a[r][1]);
                }
            }
        } else {
            for (int r = 0; r < nr; r++)
                for (int j = 0; j < np; j += F32_STEP8) {
                    a[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(wr[r] + j), _mm512_loadu_ps(x + j),
                                              a[r][0]);
                    a[r][1] = _mm512_fmadd_ps(_mm512_loadu_ps(wr[r] + j + 16),
                                              _mm512_loadu_ps(x + j + 16), a[r][1]);
                }
        }
        for (int r = 0; r < nr; r++) {
            const __m512 s = _mm512_add_ps(a[r][0], a[r][1]); /* A0 + A2 | A1 + A3 */
            float c[8];
            _mm256_storeu_ps(c, _mm256_add_ps(_mm512_castps512_ps256(s),
                                              _mm256_castpd_ps(_mm512_extractf64x4_pd(
                                                  _mm512_castps_pd(s), 1))));
            y[i + r] = f32_finish8(c, wr[r], x, np, n);
        }
    }
}

/* AVX2: one register per accumulator, four per row, three rows per pass. */
#define MV8_ROWS256 3

static MV_T256 void matvec8_256(float *restrict y, const float *restrict w,
                                const float *restrict x, int n, int d, size_t ld)
{
    const int np = n & ~(F32_STEP8 - 1);
    for (int i = 0; i < d; i += MV8_ROWS256) {
        const int nr = d - i < MV8_ROWS256 ? d - i : MV8_ROWS256;
        const float *wr[MV8_ROWS256];
        __m256 a[MV8_ROWS256][4];
        for (int r = 0; r < MV8_ROWS256; r++) {
            wr[r] = w + (size_t)(i + (r < nr ? r : 0)) * ld;
            for (int q = 0; q < 4; q++)
                a[r][q] = _mm256_setzero_ps();
        }
        if (nr == MV8_ROWS256) {
            for (int j = 0; j < np; j += F32_STEP8)
                for (int q = 0; q < 4; q++) {
                    const __m256 xv = _mm256_loadu_ps(x + j + 8 * q);
                    for (int r = 0; r < MV8_ROWS256; r++)
                        a[r][q] = _mm256_fmadd_ps(_mm256_loadu_ps(wr[r] + j + 8 * q), xv, a[r][q]);
                }
        } else {
            for (int r = 0; r < nr; r++)
                for (int j = 0; j < np; j += F32_STEP8)
                    for (int q = 0; q < 4; q++)
                        a[r][q] = _mm256_fmadd_ps(_mm256_loadu_ps(wr[r] + j + 8 * q),
                                                  _mm256_loadu_ps(x + j + 8 * q), a[r][q]);
        }
        for (int r = 0; r < nr; r++) {
            float c[8];
            _mm256_storeu_ps(c, _mm256_add_ps(_mm256_add_ps(a[r][0], a[r][2]),
                                              _mm256_add_ps(a[r][1], a[r][3])));
            y[i + r] = f32_finish8(c, wr[r], x, np, n);
        }
    }
}

#endif

/* The AVX2 build's order on the fastest path this CPU has. */
static void matvec8_own(float *restrict y, const float *restrict w, const float *restrict x,
                        int n, int d, size_t ld)
{
#if defined(__AVX512F__)
    matvec8_512(y, w, x, n, d, ld);
#elif defined(__AVX2__) && defined(__FMA__)
    matvec8_256(y, w, x, n, d, ld);
#elif defined(MV_X86)
    if (__builtin_cpu_supports("avx512f"))
        matvec8_512(y, w, x, n, d, ld);
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        matvec8_256(y, w, x, n, d, ld);
    else
        matvec8_portable(y, w, x, n, d, ld);
#else
    matvec8_portable(y, w, x, n, d, ld);
#endif
}

/* The fastest path this CPU has: fixed at compile time in a native build, by cpuid in a
 * portable one; the order --f32-order chose. */
static void matvec_own(float *restrict y, const float *restrict w, const float *restrict x,
                       int n, int d, size_t ld)
{
    if (f32_order == KERNELS_F32_ORDER_AVX2) {
        matvec8_own(y, w, x, n, d, ld);
        return;
    }
#if defined(__AVX512F__)
    matvec_512(y, w, x, n, d, ld);
#elif defined(__AVX2__) && defined(__FMA__)
    matvec_256(y, w, x, n, d, ld);
#elif defined(MV_X86)
    if (__builtin_cpu_supports("avx512f"))
        matvec_512(y, w, x, n, d, ld);
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
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
#elif defined(__AVX2__) && defined(__FMA__)
    return "avx2 (native)";
#elif defined(MV_X86)
    return __builtin_cpu_supports("avx512f") ? "avx512 (chosen at run time)"
           : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
               ? "avx2 (chosen at run time)"
                                             : "portable C (chosen at run time)";
#elif defined(__ARM_NEON)
    return "neon (portable C vectors)";
#else
    return "portable C vectors";
#endif
}

int kernels_matvec_on_path(MatmulPath p, float *y, const float *w, const float *x, int n, int d,
                           size_t ld)
{
    switch (p) {
    case MATMUL_PATH_BEST:
        matvec_own(y, w, x, n, d, ld);
        return 1;
    case MATMUL_PATH_PORTABLE:
        kernels_matvec_portable(y, w, x, n, d, ld);
        return 1;
#if defined(MV_X86)
    case MATMUL_PATH_AVX2:
        if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
            return 0;
        if (f32_order == KERNELS_F32_ORDER_AVX2)
            matvec8_256(y, w, x, n, d, ld);
        else
            matvec_256(y, w, x, n, d, ld);
        return 1;
    case MATMUL_PATH_AVX512:
        if (!__builtin_cpu_supports("avx512f"))
            return 0;
        if (f32_order == KERNELS_F32_ORDER_AVX2)
            matvec8_512(y, w, x, n, d, ld);
        else
            matvec_512(y, w, x, n, d, ld);
        return 1;
#else
    case MATMUL_PATH_AVX2:
    case MATMUL_PATH_AVX512:
        return 0;
#endif
    }
    return 0;
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
