/* matmul.c: Y = X W^T for several input rows at once (batched prompts, verified drafts).
 *
 * Every output Y[b][i] is computed in the canonical order of matvec.c (four 16-lane FMA
 * accumulators over steps of 64, combined (A0 + A2) + (A1 + A3), the 16-lane tree, the scalar
 * tail), so it equals kernels_matvec_own(Y[b], W, X[b]) bit for bit on every path.  The four
 * accumulators of an output are independent chains, so they are computed one at a time: pass q
 * (q = 0..3) runs, for a tile of TR rows x TB inputs, the chain of accumulator q, one register
 * (AVX-512) or two (AVX2) or four (4-lane vectors) per output, so a tile of 4 x 6 (AVX-512)
 * keeps 24 outputs in registers and loads each weight vector once for 6 inputs (as llamafile's
 * tinyBLAS does); the 16 lanes each pass leaves go to a small buffer, combined and reduced once
 * the four passes are done.  The loop order: rows in chunks of about 128 KiB (read from memory
 * once, then from L2), for every tile of TB inputs the four passes over the chunk (a pass
 * touches a quarter of the input tile's cache lines, which stay in L1).
 * --f32-order avx2 (llama.cpp's AVX2 build: 8-lane accumulators over steps of 32, f32_order.h)
 * runs the same passes with 8-lane accumulators (AL = 8): one 8-lane register per output and
 * pass on x86 (the AVX-512 path too), two 4-lane vectors on the portable path. */
#include "kernels.h"
#include "f32_order.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define MM_X86 1
#define MM_T512 __attribute__((target("avx512f")))
#define MM_T256 __attribute__((target("avx2,fma")))
#endif

#define MM_CHUNK_MAX 32 /* rows per chunk at most (the lane buffer: 32 x TB x 64 floats) */

/* Rows per chunk: about 128 KiB of weights, which stay in L2 while every tile of inputs
 * passes over them (so each weight comes from memory once and each input tile from L1). */
static inline int mm_chunk_rows(int n, int tr)
{
    int rc = (int)((size_t)(128 * 1024) / ((size_t)(n > 0 ? n : 1) * sizeof(float)));
    if (rc > MM_CHUNK_MAX)
        rc = MM_CHUNK_MAX;
    rc -= rc % tr;
    return rc > tr ? rc : tr;
}

#define MM_MIN(a, b) ((a) < (b) ? (a) : (b))

/* One pass over tr rows by tb < TBMAX inputs (TBMAX <= 6, the largest TB below) with tb a
 * constant in every branch, so the last, partial tile of inputs keeps its accumulators in
 * registers too (a branch above TBMAX is never taken: clamped so that it compiles). */
#define MM_PASS_TB(SFX, pp, wi, xb, np, q, tr, tb, ldw, ldx, TBMAX, first)                                  \
    do {                                                                                       \
        switch (tb) {                                                                          \
        case 6: mm_pass_##SFX(pp, wi, xb, np, q, tr, MM_MIN(6, TBMAX), ldw, ldx, first); break;      \
        case 5: mm_pass_##SFX(pp, wi, xb, np, q, tr, MM_MIN(5, TBMAX), ldw, ldx, first); break;      \
        case 4: mm_pass_##SFX(pp, wi, xb, np, q, tr, MM_MIN(4, TBMAX), ldw, ldx, first); break;      \
        case 3: mm_pass_##SFX(pp, wi, xb, np, q, tr, MM_MIN(3, TBMAX), ldw, ldx, first); break;      \
        case 2: mm_pass_##SFX(pp, wi, xb, np, q, tr, MM_MIN(2, TBMAX), ldw, ldx, first); break;      \
        default: mm_pass_##SFX(pp, wi, xb, np, q, tr, 1, ldw, ldx, first); break;                     \
        }                                                                                      \
    } while (0)

/* The 64 lanes of one output (accumulator q's 16 at 16 q): (A0 + A2) + (A1 + A3), then the
 * 16-lane tree (f32_reduce16), in portable C. */
static inline float mm_red_c(const float *p)
{
    float c[16];
    for (int l = 0; l < 16; l++)
        c[l] = (p[l] + p[32 + l]) + (p[16 + l] + p[48 + l]);
    return f32_reduce16(c);
}

/* The 32 lanes of one output in the AVX2 build's order (accumulator q's 8 at 8 q):
 * (A0 + A2) + (A1 + A3), then GGML_F32x8_REDUCE's lanes (f32_reduce8). */
static inline float mm_red8_c(const float *p)
{
    float c[8];
    for (int l = 0; l < 8; l++)
        c[l] = (p[l] + p[16 + l]) + (p[8 + l] + p[24 + l]);
    return f32_reduce8(c);
}

/* MM_DEFINE makes, for one vector type VT of VL lanes and its FMA, a pass function (the chain
 * of accumulator q for tr <= TR rows by tb <= TB inputs; always inlined with constant sizes so
 * the accumulators are registers) and a row-range function.  The lane buffer part holds, for
 * row r of the chunk and input k of the tile, accumulator q's 16 lanes at
 * part[(r * TB + k) * 64 + 16 q]. */
#define MM_DEFINE(SFX, ATTR, VT, VL, FMA, RED, TR, TB, AL)                                           \
    static inline ATTR __attribute__((always_inline)) VT mm_load_##SFX(const float *p)         \
    {                                                                                          \
        VT v;                                                                                  \
        memcpy(&v, p, sizeof v);                                                               \
        return v;                                                                              \
    }                                                                                          \
    static inline ATTR __attribute__((always_inline)) void mm_pass_##SFX(                      \
        float *part, const float *w, const float *x, int np, int q, int tr, int tb,            \
        size_t ldw, size_t ldx, int first)                                                     \
    {                                                                                          \
        enum { S = AL / VL, ST = 4 * AL };                                                     \
        VT acc[TR][TB][S];                                                                     \
        memset(acc, 0, sizeof acc);                                                            \
        for (int j = AL * q; j < np; j += ST) {                                                \
            if (first) /* the chunk's first pass: its rows' whole step, in order */            \
                for (int r = 0; r < tr; r++)                                                   \
                    for (int l = 16; l < ST; l += 16)                                          \
                        __builtin_prefetch(w + (size_t)r * ldw + (size_t)(j + l), 0, 2);       \
            for (int s = 0; s < S; s++) {                                                      \
                VT wv[TR];                                                                     \
                for (int r = 0; r < tr; r++)                                                   \
                    wv[r] = mm_load_##SFX(w + (size_t)r * ldw + (size_t)(j + VL * s));         \
                for (int b = 0; b < tb; b++) {                                                 \
                    const VT xv = mm_load_##SFX(x + (size_t)b * ldx + (size_t)(j + VL * s));   \
                    for (int r = 0; r < tr; r++)                                               \
                        acc[r][b][s] = FMA(wv[r], xv, acc[r][b][s]);                           \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < tr; r++)                                                           \
            for (int b = 0; b < tb; b++)                                                       \
                memcpy(part + ((size_t)r * TB + (size_t)b) * ST + AL * q, acc[r][b],           \
                       sizeof acc[r][b]);                                                      \
    }                                                                                          \
    static ATTR void mm_rows_##SFX(float *y, const float *w, const float *x, int n, int d,     \
                                   int nb, size_t ldw, size_t ldx, size_t ldy)                 \
    {                                                                                          \
        enum { ST = 4 * AL };                                                                  \
        const int np = n & ~(ST - 1);                                                          \
        const int rc = mm_chunk_rows(n, TR);                                                   \
        float part[MM_CHUNK_MAX * TB * F32_STEP] __attribute__((aligned(64)));                 \
        for (int i0 = 0; i0 < d; i0 += rc) {                                                   \
            const int i1 = d - i0 < rc ? d : i0 + rc;                                          \
            for (int b = 0; b < nb; b += TB) {                                                 \
                const int tb = nb - b < TB ? nb - b : TB;                                      \
                const float *xb = x + (size_t)b * ldx;                                         \
                for (int q = 0; q < 4 && np > 0; q++) {                                        \
                    int i = i0;                                                                \
                    for (; i + TR <= i1; i += TR) {                                            \
                        float *pp = part + (size_t)(i - i0) * TB * ST;                         \
                        const float *wi = w + (size_t)i * ldw;                                 \
                        MM_PASS_TB(SFX, pp, wi, xb, np, q, TR, tb, ldw, ldx, TB, b == 0 && q == 0);              \
                    }                                                                          \
                    for (; i < i1; i++) {                                                      \
                        float *pp = part + (size_t)(i - i0) * TB * ST;                         \
                        const float *wi = w + (size_t)i * ldw;                                 \
                        MM_PASS_TB(SFX, pp, wi, xb, np, q, 1, tb, ldw, ldx, TB, b == 0 && q == 0);               \
                    }                                                                          \
                }                                                                              \
                for (int i = i0; i < i1; i++)                                                  \
                    for (int k = 0; k < tb; k++) {                                             \
                        const float *p = part + ((size_t)(i - i0) * TB + (size_t)k) * ST;       \
                        const float r = np > 0 ? RED(p) : 0.0f;                                \
                        y[(size_t)(b + k) * ldy + (size_t)i] =                                 \
                            np < n ? f32_tail(r, w + (size_t)i * ldw, xb + (size_t)k * ldx,    \
                                              np, n)                                           \
                                   : r;                                                        \
                    }                                                                          \
            }                                                                                  \
        }                                                                                      \
    }

/* Portable: 4-lane vectors, four per output and pass; 2 rows x 3 inputs take 24 of NEON's 32
 * registers. */
MM_DEFINE(v4, , F32V4, 4, f32_fma4, mm_red_c, 2, 3, 16)
/* The AVX2 build's order (--f32-order avx2): 8-lane accumulators, steps of 32. */
MM_DEFINE(v4o8, , F32V4, 4, f32_fma4, mm_red8_c, 2, 3, 8)
#if defined(MM_X86)
typedef float MmV8 __attribute__((vector_size(32)));
typedef float MmV16 __attribute__((vector_size(64)));
static inline MM_T256 __attribute__((always_inline)) MmV8 mm_fma8(MmV8 a, MmV8 b, MmV8 c)
{
    return (MmV8)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
}
static inline MM_T512 __attribute__((always_inline)) MmV16 mm_fma16(MmV16 a, MmV16 b, MmV16 c)
{
    return (MmV16)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
}
/* The same combination and tree in AVX-512 registers: c = (A0 + A2) + (A1 + A3), halves 8
 * and 4, then (c0 + c2) + (c1 + c3). */
static inline MM_T512 __attribute__((always_inline)) float mm_red16(const float *p)
{
    const __m512 c = _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 32)),
                                   _mm512_add_ps(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p + 48)));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(c),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c), 1)));
    __m128 u = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    u = _mm_add_ps(u, _mm_movehl_ps(u, u));     /* c0 + c2, c1 + c3 */
    u = _mm_add_ss(u, _mm_shuffle_ps(u, u, 1)); /* (c0 + c2) + (c1 + c3) */
    return _mm_cvtss_f32(u);
}
/* AVX2: two registers per output and pass; 2 rows x 3 inputs take 12 of the 16. */
MM_DEFINE(v8, MM_T256, MmV8, 8, mm_fma8, mm_red_c, 2, 3, 16)
/* The AVX2 build's order: one register per output and pass, 4 rows x 3 inputs (12 of 16);
 * also the AVX-512 path's for this order (an accumulator is 8 lanes). */
MM_DEFINE(v8o8, MM_T256, MmV8, 8, mm_fma8, mm_red8_c, 4, 3, 8)
/* AVX-512: one register per output and pass; 4 rows x 6 inputs take 24 of the 32. */
MM_DEFINE(v16, MM_T512, MmV16, 16, mm_fma16, mm_red16, 4, 6, 16)
#endif

/* Which paths this CPU runs. */
static int mm_path_ok(MatmulPath p)
{
    switch (p) {
    case MATMUL_PATH_BEST:
    case MATMUL_PATH_PORTABLE:
        return 1;
#if defined(MM_X86)
    case MATMUL_PATH_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case MATMUL_PATH_AVX512:
        return __builtin_cpu_supports("avx512f");
#else
    case MATMUL_PATH_AVX2:
    case MATMUL_PATH_AVX512:
        return 0;
#endif
    }
    return 0;
}

/* The best path: fixed at compile time in a native build, by cpuid in a portable one. */
static MatmulPath mm_best(void)
{
#if defined(__AVX512F__)
    return MATMUL_PATH_AVX512;
#elif defined(__AVX2__) && defined(__FMA__)
    return MATMUL_PATH_AVX2;
#elif defined(MM_X86)
    return __builtin_cpu_supports("avx512f") ? MATMUL_PATH_AVX512
         : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? MATMUL_PATH_AVX2
                                             : MATMUL_PATH_PORTABLE;
#else
    return MATMUL_PATH_PORTABLE;
#endif
}

static void mm_rows(MatmulPath p, float *y, const float *w, const float *x, int n, int d, int nb,
                    size_t ldw, size_t ldx, size_t ldy)
{
    if (p == MATMUL_PATH_BEST)
        p = mm_best();
    if (f32_order_is8()) {
#if defined(MM_X86)
        if (p == MATMUL_PATH_AVX512 || p == MATMUL_PATH_AVX2) {
            mm_rows_v8o8(y, w, x, n, d, nb, ldw, ldx, ldy);
            return;
        }
#endif
        mm_rows_v4o8(y, w, x, n, d, nb, ldw, ldx, ldy);
        return;
    }
#if defined(MM_X86)
    if (p == MATMUL_PATH_AVX512) {
        mm_rows_v16(y, w, x, n, d, nb, ldw, ldx, ldy);
        return;
    }
    if (p == MATMUL_PATH_AVX2) {
        mm_rows_v8(y, w, x, n, d, nb, ldw, ldx, ldy);
        return;
    }
#endif
    mm_rows_v4(y, w, x, n, d, nb, ldw, ldx, ldy);
}

/* A matrix-matrix job for the pool: rows [lo, hi) of W against every input. */
typedef struct {
    MatmulPath p;
    float *y;
    const float *w, *x;
    int n, nb;
    size_t ldw, ldx, ldy;
} MmJob;

static void mm_job_rows(void *arg, int lo, int hi)
{
    const MmJob *j = arg;
    mm_rows(j->p, j->y + lo, j->w + (size_t)lo * j->ldw, j->x, j->n, hi - lo, j->nb, j->ldw,
            j->ldx, j->ldy);
}

int kernels_matmul_path(MatmulPath p, float *y, const float *w, const float *x, int n, int d,
                        int nb, size_t ldw, size_t ldx, size_t ldy)
{
    if (!mm_path_ok(p))
        return 0;
    if (d <= 0 || nb <= 0)
        return 1;
    MmJob j = {p, y, w, x, n, nb, ldw, ldx, ldy};
    kernels_parallel_rows(mm_job_rows, &j, d, (long long)n * d * nb);
    return 1;
}

void kernels_matmul(float *y, const float *w, const float *x, int n, int d, int nb, size_t ldw,
                    size_t ldx, size_t ldy)
{
    if (nb == 1) { /* one input: the matvec (eight row streams in flight, the same bits) */
        kernels_matvec_own(y, w, x, n, d, ldw);
        return;
    }
    (void)kernels_matmul_path(MATMUL_PATH_BEST, y, w, x, n, d, nb, ldw, ldx, ldy);
}

/* The canonical order in scalar C, one output at a time (kernels_dot_f32_ref). */
void kernels_matmul_ref(float *y, const float *w, const float *x, int n, int d, int nb,
                        size_t ldw, size_t ldx, size_t ldy)
{
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < d; i++)
            y[(size_t)b * ldy + (size_t)i] =
                kernels_dot_f32_ref(w + (size_t)i * ldw, x + (size_t)b * ldx, n);
}
