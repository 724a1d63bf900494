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
 * the four passes are done.  Pass q reads only accumulator q's lanes of every step (one cache
 * line in four), so the inputs (once per call) and each chunk of weight rows (about 768 KiB,
 * then read from L2) are first packed with each accumulator's lanes side by side (mm_pack):
 * every pass then streams whole lines in order, which the prefetchers follow (at 128 inputs,
 * 1.6-2.4x the passes over the rows in place, AVX-512).  The loop order: rows in chunks, the next
 * chunk prefetched a few lines per pass; for every tile of TB inputs (split evenly), the steps
 * in blocks of ~16 KiB of the tile (which stays in L1; the chains go on from the lane buffer),
 * and for each block the four passes over the chunk's rows.
 * --f32-order avx2 (llama.cpp's AVX2 build: 8-lane accumulators over steps of 32, f32_order.h)
 * runs the same passes with 8-lane accumulators (AL = 8): one 8-lane register per output and
 * pass on x86 (the AVX-512 path too), two 4-lane vectors on the portable path. */
#include "kernels.h"
#include "f32_order.h"

#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define MM_X86 1
#define MM_T512 __attribute__((target("avx512f")))
#define MM_T256 __attribute__((target("avx2,fma")))
#endif

#define MM_CHUNK_MAX 128 /* rows per chunk at most */
#define MM_CHUNK_KB 768  /* weights per chunk (384-1024 KiB measured within noise) */
#define MM_KBLOCK_KB 16  /* an input tile's share of a block of steps, in L1 */
/* The next chunk is prefetched from the tile of inputs nt * MM_PF_FROM / 4 on: from the
 * first, at the lowest rate from memory (a prompt pass of 64 inputs computes a chunk in half
 * the time of 128; from the second half on measured within noise at 128). */
#define MM_PF_FROM 0

/* Rows per chunk: about 768 KiB of weights (in their packed form), which stay in L2 while
 * every tile of inputs passes over them, so each weight comes from memory once; a multiple
 * of tr, at most MM_CHUNK_MAX. */
static inline int mm_chunk_rows(int n, int tr)
{
    int rc = (int)((size_t)(MM_CHUNK_KB * 1024) / ((size_t)(n > 0 ? n : 1) * sizeof(float)));
    if (rc > MM_CHUNK_MAX)
        rc = MM_CHUNK_MAX;
    rc -= rc % tr;
    return rc > tr ? rc : tr;
}

#define MM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MM_MAX(a, b) ((a) > (b) ? (a) : (b))

/* A thread's scratch, grown as needed and freed when the thread ends (a pthread key's
 * destructor; the pool's threads keep theirs between calls): slot 0 the caller's packed
 * inputs (read by every thread during the job), slot 1 a worker's packed weight chunk and
 * lane buffer.  The first 64 bytes hold the capacity. */
static pthread_key_t mm_key[2];
static pthread_once_t mm_once = PTHREAD_ONCE_INIT;

static void mm_key_make(void)
{
    for (int i = 0; i < 2; i++)
        CHECK(pthread_key_create(&mm_key[i], free) == 0, "matmul: no thread key for scratch");
}

static float *mm_scratch(int slot, size_t floats)
{
    pthread_once(&mm_once, mm_key_make);
    unsigned char *buf = pthread_getspecific(mm_key[slot]);
    size_t cap = 0;
    if (buf)
        memcpy(&cap, buf, sizeof cap);
    if (floats > cap) {
        free(buf);
        cap = floats + floats / 4;
        void *p = NULL;
        CHECK(posix_memalign(&p, 64, 64 + cap * sizeof(float)) == 0,
              "matmul: %zu floats of scratch", cap);
        buf = p;
        memcpy(buf, &cap, sizeof cap);
        CHECK(pthread_setspecific(mm_key[slot], buf) == 0, "matmul: scratch not kept");
    }
    return (float *)(void *)(buf + 64);
}

/* The packed form of m rows (ld floats apart) over their np = kq 4 AL whole values:
 * accumulator q's AL lanes of every step side by side, one stream per row and q,
 * dst[(q m + r) kq AL + k AL + l] = a[r ld + 4 AL k + AL q + l].  Each pass of the kernel
 * then reads whole cache lines in order (rather than one line in four, 4 AL floats apart),
 * which the hardware prefetchers follow.  Only the memory layout changes: every
 * accumulator's chain of FMAs is the same. */
static inline __attribute__((always_inline)) void mm_pack(float *dst, const float *a, size_t ld,
                                                          int m, int kq, const int al)
{
    const size_t lq = (size_t)kq * (size_t)al;
    for (int r = 0; r < m; r++) {
        const float *src = a + (size_t)r * ld;
        float *d0 = dst + (size_t)r * lq, *d1 = d0 + (size_t)m * lq, *d2 = d1 + (size_t)m * lq,
              *d3 = d2 + (size_t)m * lq;
        for (int k = 0; k < kq; k++, src += 4 * al) {
            memcpy(d0 + (size_t)k * al, src, (size_t)al * sizeof(float));
            memcpy(d1 + (size_t)k * al, src + al, (size_t)al * sizeof(float));
            memcpy(d2 + (size_t)k * al, src + 2 * al, (size_t)al * sizeof(float));
            memcpy(d3 + (size_t)k * al, src + 3 * al, (size_t)al * sizeof(float));
        }
    }
}

static void mm_pack_al(float *dst, const float *a, size_t ld, int m, int kq, int al)
{
    if (al == 8)
        mm_pack(dst, a, ld, m, kq, 8);
    else
        mm_pack(dst, a, ld, m, kq, 16);
}

/* Tile b of nb inputs split into t = ceil(nb / TB) tiles as even as possible (nb = 128, TB = 6:
 * 18 of 6 and 4 of 5, not 21 of 6 and one of 2, whose accumulators would idle registers). */
static inline void mm_tile_of(int nb, int tbmax, int t, int *b0, int *tb)
{
    const int nt = (nb + tbmax - 1) / tbmax, base = nb / nt, extra = nb % nt;
    *b0 = t * base + MM_MIN(t, extra);
    *tb = base + (t < extra);
}

/* One pass over tr rows by tb < TBMAX inputs (TBMAX <= 6, the largest TB below) with tb a
 * constant in every branch, so every tile keeps its accumulators in registers (a branch
 * above TBMAX is never taken: clamped so that it compiles). */
#define MM_PASS_TB(SFX, pp, wq, xq, lq, k0, k1, q, tr, tb, TBMAX)                              \
    do {                                                                                       \
        switch (tb) {                                                                          \
        case 6: mm_pass_##SFX(pp, wq, xq, lq, k0, k1, q, tr, MM_MIN(6, TBMAX)); break;         \
        case 5: mm_pass_##SFX(pp, wq, xq, lq, k0, k1, q, tr, MM_MIN(5, TBMAX)); break;         \
        case 4: mm_pass_##SFX(pp, wq, xq, lq, k0, k1, q, tr, MM_MIN(4, TBMAX)); break;         \
        case 3: mm_pass_##SFX(pp, wq, xq, lq, k0, k1, q, tr, MM_MIN(3, TBMAX)); break;         \
        case 2: mm_pass_##SFX(pp, wq, xq, lq, k0, k1, q, tr, MM_MIN(2, TBMAX)); break;         \
        default: mm_pass_##SFX(pp, wq, xq, lq, k0, k1, q, tr, 1); break;                       \
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
 * of accumulator q for tr <= TR rows by tb <= TB inputs over their packed streams; always
 * inlined with constant sizes so the accumulators are registers) and a row-range function.
 * The loop order: rows in chunks (packed, then read from L2), for every tile of inputs the
 * four passes over the chunk's rows in tiles of TR (a pass reads a quarter of the input
 * tile, which stays in L1).  The lane buffer part holds, for row r of the chunk and input k
 * of the tile, accumulator q's AL lanes at part[(r TB + k) 4 AL + AL q]. */
#define MM_DEFINE(SFX, ATTR, VT, VL, FMA, RED, TR, TB, AL)                                           \
    static inline ATTR __attribute__((always_inline)) VT mm_load_##SFX(const float *p)         \
    {                                                                                          \
        VT v;                                                                                  \
        memcpy(&v, p, sizeof v);                                                               \
        return v;                                                                              \
    }                                                                                          \
    static inline ATTR __attribute__((always_inline)) void mm_pass_##SFX(                      \
        float *part, const float *w, const float *x, size_t lq, int k0, int k1, int q, int tr, \
        int tb)                                                                                \
    {                                                                                          \
        enum { S = AL / VL, ST = 4 * AL };                                                     \
        VT acc[TR][TB][S];                                                                     \
        memset(acc, 0, sizeof acc);                                                            \
        if (k0 > 0) /* the chains so far, from the lane buffer */                             \
            for (int r = 0; r < tr; r++)                                                       \
                for (int b = 0; b < tb; b++)                                                   \
                    for (int s = 0; s < S; s++)                                                \
                        acc[r][b][s] = mm_load_##SFX(part + ((size_t)r * TB + (size_t)b) * ST + \
                                                     AL * q + VL * s);                         \
        for (int k = k0; k < k1; k++) {                                                        \
            for (int s = 0; s < S; s++) {                                                      \
                VT wv[TR];                                                                     \
                for (int r = 0; r < tr; r++)                                                   \
                    wv[r] = mm_load_##SFX(w + (size_t)r * lq + (size_t)(AL * k + VL * s));     \
                for (int b = 0; b < tb; b++) {                                                 \
                    const VT xv = mm_load_##SFX(x + (size_t)b * lq + (size_t)(AL * k + VL * s)); \
                    for (int r = 0; r < tr; r++)                                               \
                        acc[r][b][s] = FMA(wv[r], xv, acc[r][b][s]);                           \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < tr; r++) /* each register stored where it goes */                 \
            for (int b = 0; b < tb; b++)                                                       \
                for (int s = 0; s < S; s++)                                                    \
                    memcpy(part + ((size_t)r * TB + (size_t)b) * ST + AL * q + VL * s,         \
                           &acc[r][b][s], sizeof acc[r][b][s]);                                \
    }                                                                                          \
    static ATTR void mm_rows_##SFX(float *y, const float *w, const float *xp, const float *x,  \
                                   int n, int d, int nb, size_t ldw, size_t ldx, size_t ldy,   \
                                   const float *wn, int dn)                                    \
    {                                                                                          \
        enum { ST = 4 * AL };                                                                  \
        const int np = n & ~(ST - 1), kq = np / ST;                                            \
        const size_t lq = (size_t)kq * AL;                                                     \
        if (np == 0) { /* no whole step: every output is its tail */                           \
            for (int b = 0; b < nb; b++)                                                       \
                for (int i = 0; i < d; i++)                                                    \
                    y[(size_t)b * ldy + (size_t)i] =                                           \
                        f32_tail(0.0f, w + (size_t)i * ldw, x + (size_t)b * ldx, 0, n);        \
            return;                                                                            \
        }                                                                                      \
        /* chunks of equal size: a pool chunk of 128 rows is 2 x 64, not 96 + 32 */            \
        const int rcmax = mm_chunk_rows(n, TR), nch = (d + rcmax - 1) / rcmax;                 \
        int rc = (d + nch - 1) / nch;                                                          \
        rc = (rc + TR - 1) / TR * TR;                                                          \
        float *wp = mm_scratch(1, (size_t)rc * (size_t)np + (size_t)rc * TB * ST);             \
        float *part = wp + (size_t)rc * (size_t)np;                                            \
        const int nt = (nb + TB - 1) / TB;                                                     \
        /* the steps in blocks whose share of an input tile (TB inputs x kbl AL floats, one   \
         * q) stays in L1 next to the rows' streams: about 16 KiB; the chains go on from the  \
         * lane buffer from one block to the next */                                           \
        const int kbmax = MM_MAX(1, (MM_KBLOCK_KB * 1024) / (TB * AL * (int)sizeof(float)));   \
        const int nkb = (kq + kbmax - 1) / kbmax, kbl = (kq + nkb - 1) / nkb;                  \
        /* the first chunk, whose weights nothing prefetched, a quarter of the others: its     \
         * misses are fewer, and its passes prefetch the next chunk (the pool's threads start \
         * every range of rows cold) */                                                        \
        const int rc1 = d > rc ? MM_MAX(TR, rc / 4 / TR * TR) : rc;                            \
        for (int i0 = 0, m; i0 < d; i0 += m) {                                                 \
            m = MM_MIN(i0 == 0 ? rc1 : rc, d - i0);                                            \
            mm_pack(wp, w + (size_t)i0 * ldw, ldw, m, kq, AL);                                 \
            /* the next chunk's weights, from memory into L2 while this one is computed: a     \
             * few of its lines before each pass (in bursts, the misses would stall the pass)  \
             */                                                                                \
            const char *nx = (const char *)(w + (size_t)(i0 + m) * ldw);                       \
            const char *nx_end =                                                               \
                (const char *)(w + (size_t)MM_MIN(d, i0 + m + rc) * ldw);                      \
            if (i0 + m == d && wn) { /* the last: the first chunk of the range expected next */ \
                nx = (const char *)wn;                                                         \
                nx_end = (const char *)(wn + (size_t)MM_MIN(dn, rc1) * ldw);                   \
            }                                                                                  \
            const int t_pf = nt * MM_PF_FROM / 4;                                              \
            const size_t npass =                                                               \
                (size_t)(nt - t_pf) * (size_t)nkb * 4 * (size_t)((m + TR - 1) / TR);           \
            const int nx_per =                                                                 \
                nx_end > nx ? (int)(((size_t)(nx_end - nx) / 64 + npass - 1) / npass) : 0;     \
            for (int t = 0; t < nt; t++) {                                                     \
                int b, tb;                                                                     \
                mm_tile_of(nb, TB, t, &b, &tb);                                                \
                for (int kb = 0; kb < nkb; kb++) {                                             \
                    const int k0 = kb * kbl, k1 = MM_MIN(kq, k0 + kbl);                        \
                    for (int q = 0; q < 4; q++) {                                              \
                        const float *xq = xp + ((size_t)q * (size_t)nb + (size_t)b) * lq;      \
                        const float *wq = wp + (size_t)q * (size_t)m * lq;                     \
                        int r = 0;                                                             \
                        for (; r + TR <= m; r += TR) {                                         \
                            for (int u = 0; t >= t_pf && u < nx_per && nx < nx_end;            \
                                 u++, nx += 64)                                                \
                                __builtin_prefetch(nx, 0, 2);                                  \
                            MM_PASS_TB(SFX, part + (size_t)r * TB * ST, wq + (size_t)r * lq,   \
                                       xq, lq, k0, k1, q, TR, tb, TB);                         \
                        }                                                                      \
                        for (; r < m; r++)                                                     \
                            MM_PASS_TB(SFX, part + (size_t)r * TB * ST, wq + (size_t)r * lq,   \
                                       xq, lq, k0, k1, q, 1, tb, TB);                          \
                    }                                                                          \
                }                                                                              \
                for (int r = 0; r < m; r++)                                                    \
                    for (int k = 0; k < tb; k++) {                                             \
                        const float *p = part + ((size_t)r * TB + (size_t)k) * ST;             \
                        const float v = RED(p);                                                \
                        const size_t i = (size_t)(i0 + r);                                     \
                        y[(size_t)(b + k) * ldy + i] =                                         \
                            np < n ? f32_tail(v, w + i * ldw, x + (size_t)(b + k) * ldx, np, n) \
                                   : v;                                                        \
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

static void mm_rows(MatmulPath p, float *y, const float *w, const float *xp, const float *x,
                    int n, int d, int nb, size_t ldw, size_t ldx, size_t ldy, const float *wn,
                    int dn)
{
    if (p == MATMUL_PATH_BEST)
        p = mm_best();
    if (f32_order_is8()) {
#if defined(MM_X86)
        if (p == MATMUL_PATH_AVX512 || p == MATMUL_PATH_AVX2) {
            mm_rows_v8o8(y, w, xp, x, n, d, nb, ldw, ldx, ldy, wn, dn);
            return;
        }
#endif
        mm_rows_v4o8(y, w, xp, x, n, d, nb, ldw, ldx, ldy, wn, dn);
        return;
    }
#if defined(MM_X86)
    if (p == MATMUL_PATH_AVX512) {
        mm_rows_v16(y, w, xp, x, n, d, nb, ldw, ldx, ldy, wn, dn);
        return;
    }
    if (p == MATMUL_PATH_AVX2) {
        mm_rows_v8(y, w, xp, x, n, d, nb, ldw, ldx, ldy, wn, dn);
        return;
    }
#endif
    mm_rows_v4(y, w, xp, x, n, d, nb, ldw, ldx, ldy, wn, dn);
}

/* A matrix-matrix job for the pool: rows [lo, hi) of W against every input (xp: the inputs'
 * packed form, made once by the caller). */
typedef struct {
    MatmulPath p;
    float *y;
    const float *w, *xp, *x;
    int n, d, nb;
    size_t ldw, ldx, ldy;
} MmJob;

/* The pool's threads claim ranges in order, so a thread's next range is likely the one
 * (threads - 1) ranges past this one: its first rows are prefetched while this one ends. */
static void mm_job_rows(void *arg, int lo, int hi)
{
    const MmJob *j = arg;
    const int nt = kernels_get_threads(), next = hi + (nt > 1 ? nt - 1 : 0) * (hi - lo);
    const float *wn = next < j->d ? j->w + (size_t)next * j->ldw : NULL;
    mm_rows(j->p, j->y + lo, j->w + (size_t)lo * j->ldw, j->xp, j->x, j->n, hi - lo, j->nb,
            j->ldw, j->ldx, j->ldy, wn, wn ? MM_MIN(hi - lo, j->d - next) : 0);
}

int kernels_matmul_path(MatmulPath p, float *y, const float *w, const float *x, int n, int d,
                        int nb, size_t ldw, size_t ldx, size_t ldy)
{
    if (!mm_path_ok(p))
        return 0;
    if (d <= 0 || nb <= 0)
        return 1;
    /* the inputs packed once for every thread and chunk (the accumulators' lanes: 8 in the
     * AVX2 build's order, else 16) */
    const int al = f32_order_is8() ? 8 : 16, kq = n / (4 * al);
    float *xp = NULL;
    if (kq > 0) {
        xp = mm_scratch(0, (size_t)nb * (size_t)kq * 4 * (size_t)al);
        mm_pack_al(xp, x, ldx, nb, kq, al);
    }
    MmJob j = {p, y, w, xp, x, n, d, nb, ldw, ldx, ldy};
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
