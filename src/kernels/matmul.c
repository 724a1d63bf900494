/* matmul.c: Y = X W^T for several input rows at once (batched prompts, verified drafts).
 *
 * Every output Y[b][i] is computed in the canonical order of matvec.c (32 lanes, a separate
 * multiply and add per element, the zero-padded last block, the halving tree h = 16..1), so it
 * equals kernels_matvec_own(Y[b], W, X[b]) bit for bit on every path.  What changes is the
 * loop order: the rows go in chunks of about 128 KiB, read from memory once; every tile of TB
 * inputs (in L1) then passes over the chunk (in L2) in tiles of TR rows, the TR x TB
 * accumulators in registers.  The weights thus stream from memory once per call, however many
 * inputs there are, and the inputs are not re-read from L2 for every row.
 *
 * The three paths are one template over a GCC vector type: 16 lanes (AVX-512), 8 (AVX2) and
 * 4 (portable: NEON on ARM, SSE elsewhere).  Elementwise vector arithmetic is IEEE per lane,
 * so the vector width changes which instructions run, never the result. */
#include "kernels.h"

#include <string.h>

#define MM_LANES 32

#if defined(__x86_64__) || defined(__i386__)
#define MM_X86 1
#define MM_T512 __attribute__((target("avx512f")))
#define MM_T256 __attribute__((target("avx2")))
#endif

/* The halving tree over 32 lane sums (the order every path of matvec.c reduces in). */
static inline float mm_reduce32(float *a)
{
    for (int h = MM_LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++)
            a[l] = a[l] + a[l + h];
    return a[0];
}

/* Rows per chunk: about 128 KiB of weights, which stay in L2 while every tile of inputs
 * passes over them (so each weight comes from memory once and each input tile from L1). */
static inline int mm_chunk_rows(int n, int tr)
{
    int rc = (int)((size_t)(128 * 1024) / ((size_t)(n > 0 ? n : 1) * sizeof(float)));
    rc -= rc % tr;
    return rc > tr ? rc : tr;
}

/* MM_DEFINE makes, for one vector type VT of VL lanes, a tile function (tr <= TR rows by
 * tb <= TB inputs; always inlined with constant sizes so the accumulators are registers) and a
 * row-range function that walks the rows in tiles of TR and the inputs in tiles of TB. */
#define MM_DEFINE(SFX, ATTR, VT, VL, TR, TB)                                                    \
    typedef float VT __attribute__((vector_size(VL * 4)));                                     \
    static inline ATTR __attribute__((always_inline)) VT mm_load_##SFX(const float *p)         \
    {                                                                                          \
        VT v;                                                                                  \
        memcpy(&v, p, sizeof v);                                                               \
        return v;                                                                              \
    }                                                                                          \
    static inline ATTR __attribute__((always_inline)) void mm_tile_##SFX(                      \
        float *y, const float *w, const float *x, int n, int tr, int tb, size_t ldw,           \
        size_t ldx, size_t ldy)                                                                \
    {                                                                                          \
        enum { NV = MM_LANES / VL };                                                           \
        const int nbk = n & ~(MM_LANES - 1), rem = n - nbk;                                    \
        VT acc[TR][TB][NV];                                                                    \
        memset(acc, 0, sizeof acc);                                                            \
        for (int j = 0; j < nbk; j += MM_LANES)                                                \
            for (int r = 0; r < tr; r++)                                                       \
                for (int q = 0; q < NV; q++) {                                                 \
                    const VT wv = mm_load_##SFX(w + (size_t)r * ldw + (size_t)(j + VL * q));  \
                    for (int b = 0; b < tb; b++)                                               \
                        acc[r][b][q] = acc[r][b][q] +                                          \
                                       wv * mm_load_##SFX(x + (size_t)b * ldx +                \
                                                          (size_t)(j + VL * q));               \
                }                                                                              \
        if (rem) { /* the last block, zero-padded to 32 lanes */                               \
            float wp[TR][MM_LANES], xp[TB][MM_LANES];                                          \
            memset(wp, 0, sizeof wp);                                                          \
            memset(xp, 0, sizeof xp);                                                          \
            for (int r = 0; r < tr; r++)                                                       \
                memcpy(wp[r], w + (size_t)r * ldw + (size_t)nbk, (size_t)rem * sizeof(float)); \
            for (int b = 0; b < tb; b++)                                                       \
                memcpy(xp[b], x + (size_t)b * ldx + (size_t)nbk, (size_t)rem * sizeof(float)); \
            for (int r = 0; r < tr; r++)                                                       \
                for (int q = 0; q < NV; q++)                                                   \
                    for (int b = 0; b < tb; b++)                                               \
                        acc[r][b][q] = acc[r][b][q] + mm_load_##SFX(wp[r] + VL * q) *          \
                                                          mm_load_##SFX(xp[b] + VL * q);       \
        }                                                                                      \
        for (int r = 0; r < tr; r++)                                                           \
            for (int b = 0; b < tb; b++) {                                                     \
                float a[MM_LANES];                                                             \
                memcpy(a, acc[r][b], sizeof a);                                                \
                y[(size_t)b * ldy + (size_t)r] = mm_reduce32(a);                               \
            }                                                                                  \
    }                                                                                          \
    static ATTR void mm_rows_##SFX(float *y, const float *w, const float *x, int n, int d,     \
                                   int nb, size_t ldw, size_t ldx, size_t ldy)                 \
    {                                                                                          \
        const int rc = mm_chunk_rows(n, TR);                                                   \
        for (int i0 = 0; i0 < d; i0 += rc) {                                                   \
            const int i1 = d - i0 < rc ? d : i0 + rc;                                          \
            for (int b = 0; b < nb; b += TB) {                                                 \
                const int full = nb - b >= TB;                                                 \
                const float *xb = x + (size_t)b * ldx;                                         \
                int i = i0;                                                                    \
                for (; i + TR <= i1; i += TR) {                                                \
                    float *yb = y + (size_t)b * ldy + (size_t)i;                               \
                    if (full)                                                                  \
                        mm_tile_##SFX(yb, w + (size_t)i * ldw, xb, n, TR, TB, ldw, ldx, ldy);  \
                    else                                                                       \
                        for (int k = 0; k < nb - b; k++)                                       \
                            mm_tile_##SFX(yb + (size_t)k * ldy, w + (size_t)i * ldw,           \
                                          xb + (size_t)k * ldx, n, TR, 1, ldw, ldx, ldy);      \
                }                                                                              \
                for (; i < i1; i++) {                                                          \
                    float *yb = y + (size_t)b * ldy + (size_t)i;                               \
                    if (full)                                                                  \
                        mm_tile_##SFX(yb, w + (size_t)i * ldw, xb, n, 1, TB, ldw, ldx, ldy);   \
                    else                                                                       \
                        for (int k = 0; k < nb - b; k++)                                       \
                            mm_tile_##SFX(yb + (size_t)k * ldy, w + (size_t)i * ldw,           \
                                          xb + (size_t)k * ldx, n, 1, 1, ldw, ldx, ldy);       \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

/* Portable: 8 vectors of 4 per accumulator; 1 row x 3 inputs = 24 of NEON's 32 registers. */
MM_DEFINE(v4, , MmV4, 4, 1, 3)
#if defined(MM_X86)
/* AVX2: 4 registers per accumulator; 3 inputs take 12 of the 16. */
MM_DEFINE(v8, MM_T256, MmV8, 8, 1, 3)
/* AVX-512: 2 registers per accumulator; 2 rows x 4 inputs take 16 of the 32. */
MM_DEFINE(v16, MM_T512, MmV16, 16, 2, 4)
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
        return __builtin_cpu_supports("avx2");
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
#elif defined(__AVX2__)
    return MATMUL_PATH_AVX2;
#elif defined(MM_X86)
    return __builtin_cpu_supports("avx512f") ? MATMUL_PATH_AVX512
         : __builtin_cpu_supports("avx2")    ? MATMUL_PATH_AVX2
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

/* The canonical order in scalar C, one output at a time. */
void kernels_matmul_ref(float *y, const float *w, const float *x, int n, int d, int nb,
                        size_t ldw, size_t ldx, size_t ldy)
{
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < d; i++) {
            const float *wr = w + (size_t)i * ldw, *xr = x + (size_t)b * ldx;
            float a[MM_LANES] = {0};
            for (int j = 0; j < n; j++)
                a[j % MM_LANES] = a[j % MM_LANES] + wr[j] * xr[j];
            y[(size_t)b * ldy + (size_t)i] = mm_reduce32(a);
        }
}
