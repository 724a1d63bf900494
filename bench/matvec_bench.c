/* matvec_bench.c: single-core roofline of the matrix-vector product.
 *
 * (a) measures this core's memory read bandwidth (streaming sums over a buffer far larger than
 *     the caches, one stream and four interleaved streams, best of several runs) and a
 *     STREAM-style copy;
 * (b) times kernels_matvec, own kernel and OpenBLAS (one thread), on TinyLlama-shaped matrices,
 *     rotating through enough distinct matrices (a 262 MB pool) that nothing stays in cache,
 *     and reports GB/s of weights read and the fraction of the measured read bandwidth
 *     (median of the repeats);
 * (c) prints OpenBLAS's core name;
 * (d) times quant_matvec on q8_0, q4_0 and q4_K weights, and q4_0 again in the eight-row groups
 *     the engine keeps it in where quant_x8_preferred (the activation already quantized,
 *     as the engine shares it between matrices; its quantization is timed apart) on the same
 *     shapes, through a 256 MiB pool of random blocks, as GB/s of weight bytes read and the
 *     fraction of the roofline, beside fp32.
 * A readable table goes to stdout, then one JSON line.
 *
 * usage: matvec_bench [-r repeats] [-m read_buffer_MiB] [-n] [-q] (-n: no transparent huge
 *        pages; -q: quantized kernels only, no fp32/OpenBLAS section)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels.h"
#include "quant.h"
#include "util.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);

static volatile float sink;
static int use_hugepages = 1;

/* Page-aligned anonymous memory, huge pages requested, every page touched. */
static float *big_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap of %zu bytes failed", bytes);
#ifdef MADV_HUGEPAGE
    if (use_hugepages)
        madvise(p, bytes, MADV_HUGEPAGE);
#endif
    memset(p, 0, bytes);
    return p;
}

static void big_free(float *p, size_t bytes) { munmap(p, bytes); }

/* Sum of a[0..n) with 64 independent lanes (n a multiple of 64). */
static float bench_read1(const float *a, size_t n)
{
#if defined(__AVX512F__)
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n; i += 64) {
        s0 = _mm512_add_ps(s0, _mm512_load_ps(a + i));
        s1 = _mm512_add_ps(s1, _mm512_load_ps(a + i + 16));
        s2 = _mm512_add_ps(s2, _mm512_load_ps(a + i + 32));
        s3 = _mm512_add_ps(s3, _mm512_load_ps(a + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
#else
    float acc[64] = {0};
    for (size_t i = 0; i < n; i += 64)
        for (int l = 0; l < 64; l++)
            acc[l] += a[i + l];
    float s = 0;
    for (int l = 0; l < 64; l++)
        s += acc[l];
    return s;
#endif
}

/* Same bytes read as four interleaved streams over the four quarters (like 4 matrix rows). */
static float bench_read4(const float *a, size_t n)
{
    const size_t q = n / 4;
    const float *b = a + q, *c = a + 2 * q, *d = a + 3 * q;
#if defined(__AVX512F__)
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < q; i += 32) {
        s0 = _mm512_add_ps(s0, _mm512_add_ps(_mm512_load_ps(a + i), _mm512_load_ps(a + i + 16)));
        s1 = _mm512_add_ps(s1, _mm512_add_ps(_mm512_load_ps(b + i), _mm512_load_ps(b + i + 16)));
        s2 = _mm512_add_ps(s2, _mm512_add_ps(_mm512_load_ps(c + i), _mm512_load_ps(c + i + 16)));
        s3 = _mm512_add_ps(s3, _mm512_add_ps(_mm512_load_ps(d + i), _mm512_load_ps(d + i + 16)));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
#else
    float acc[4][16] = {{0}};
    for (size_t i = 0; i < q; i += 16)
        for (int l = 0; l < 16; l++) {
            acc[0][l] += a[i + l];
            acc[1][l] += b[i + l];
            acc[2][l] += c[i + l];
            acc[3][l] += d[i + l];
        }
    float s = 0;
    for (int r = 0; r < 4; r++)
        for (int l = 0; l < 16; l++)
            s += acc[r][l];
    return s;
#endif
}

static void bench_copy(float *restrict dst, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    const char *name;
    int d, n; /* rows, columns */
} Shape;

typedef struct {
    char label[48];
    int d, n, mats;
    double mb;
    double med[2], best[2]; /* GB/s, [0] own, [1] OpenBLAS: median and best of the repeats */
    double paired[2];       /* median of the ratio to a read of the same bytes just before */
} Result;

static double read_best_seen; /* best GB/s of the paired reads, part of the roofline */

/* Seconds of one pass of impl over the mats x nshapes matrices laid out from pool. */
static double run_pass(MatvecImpl impl, const float *pool, const Shape *shapes, int nshapes,
                       int mats, const float *x, float *y)
{
    kernels_set_matvec(impl);
    const float *w = pool;
    double t0 = time_now();
    for (int m = 0; m < mats; m++) {
        for (int s = 0; s < nshapes; s++) {
            kernels_matvec(y, w, x, shapes[s].n, shapes[s].d);
            w += (size_t)shapes[s].d * (size_t)shapes[s].n;
        }
    }
    double t = time_now() - t0;
    kernels_set_matvec(MATVEC_AUTO);
    sink += y[0];
    return t;
}

/* Times reps passes of own and BLAS (alternating which goes first), each repeat next to a
 * plain read of the same bytes, so that the paired ratio is immune to the bandwidth drifting
 * over time on a shared host.  sm: scratch of 4 * reps doubles. */
static void bench_shapes(Result *r, const float *pool, const Shape *shapes, int nshapes,
                         const float *x, float *y, int reps, double *sm)
{
    size_t nfl = 0;
    for (int s = 0; s < nshapes; s++)
        nfl += (size_t)shapes[s].d * (size_t)shapes[s].n;
    nfl *= (size_t)r->mats;
    const double bytes = (double)nfl * sizeof(float);
    const size_t nread = nfl & ~(size_t)127;
    double *gbs[2] = {sm, sm + reps}, *rel[2] = {sm + 2 * reps, sm + 3 * reps};
    for (int k = -1; k < reps; k++) { /* k = -1: warm-up */
        double t0 = time_now();
        sink += bench_read4(pool, nread);
        double gr = (double)nread * sizeof(float) / (time_now() - t0) / 1e9;
        double t[2];
        int first = k & 1;
        t[first] = run_pass(first ? MATVEC_BLAS : MATVEC_OWN, pool, shapes, nshapes, r->mats, x, y);
        t[!first] = run_pass(first ? MATVEC_OWN : MATVEC_BLAS, pool, shapes, nshapes, r->mats, x,
                             y);
        if (k < 0)
            continue;
        read_best_seen = fmax(read_best_seen, gr);
        for (int m = 0; m < 2; m++) {
            gbs[m][k] = bytes / t[m] / 1e9;
            rel[m][k] = gbs[m][k] / gr;
        }
    }
    r->mb = bytes / 1e6;
    for (int m = 0; m < 2; m++) {
        r->med[m] = median(gbs[m], reps); /* sorts: the last is the best */
        r->best[m] = gbs[m][reps - 1];
        r->paired[m] = median(rel[m], reps);
    }
}

/* ---- (d) quantized weights ---- */

typedef struct {
    char label[48];
    QType type;
    int x8; /* the matrices in eight-row groups (quant_x8_pack), as the engine keeps them */
    int d, n, mats;
    double mb;
    double med, best, paired;
} QResult;

/* Fills a pool of quantized blocks with random quants and finite scales (speed does not depend
 * on the values; quantizing 256 MiB of floats with the reference quantizers would take long). */
static void fill_quant_pool(uint8_t *pool, size_t bytes, QType t, uint64_t *rng)
{
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        const uint64_t r = rng_next(rng);
        memcpy(pool + i, &r, 8);
    }
    const size_t bb = quant_block_bytes(t);
    const uint16_t h = kernels_f32_to_f16_one(0.001f);
    for (size_t b = 0; b + bb <= bytes; b += bb) {
        if (t == QTYPE_Q6_K) {
            memcpy(pool + b + 208, &h, 2);
        } else {
            memcpy(pool + b, &h, 2);
            if (t == QTYPE_Q4_K || t == QTYPE_Q5_K)
                memcpy(pool + b + 2, &h, 2);
        }
    }
}

/* Seconds of one quant_matvec pass over mats x nshapes matrices of type t from pool. */
/* Packs (or unpacks) the mats x nshapes matrices laid out from pool into eight-row groups. */
static void pool_x8(uint8_t *pool, QType t, const Shape *shapes, int nshapes, int mats, int pack)
{
    uint8_t *w = pool;
    for (int m = 0; m < mats; m++) {
        for (int s = 0; s < nshapes; s++) {
            if (pack)
                quant_x8_pack(w, t, shapes[s].n, shapes[s].d);
            else
                quant_x8_unpack(w, t, shapes[s].n, shapes[s].d);
            w += quant_row_bytes(t, shapes[s].n) * (size_t)shapes[s].d;
        }
    }
}

static double qrun_pass(const uint8_t *pool, QType t, int x8, const Shape *shapes, int nshapes,
                        int mats, const void *xa, float *y)
{
    const uint8_t *w = pool;
    double t0 = time_now();
    for (int m = 0; m < mats; m++) {
        for (int s = 0; s < nshapes; s++) {
            const size_t rb = quant_row_bytes(t, shapes[s].n);
            if (x8)
                quant_matvec_x8(y, w, t, xa, shapes[s].n, shapes[s].d);
            else
                quant_matvec(y, w, t, rb, xa, shapes[s].n, shapes[s].d);
            w += rb * (size_t)shapes[s].d;
        }
    }
    double tt = time_now() - t0;
    sink += y[0];
    return tt;
}

static void qbench_shapes(QResult *r, uint8_t *pool, const Shape *shapes, int nshapes,
                          const void *xa, float *y, int reps, double *sm)
{
    if (r->x8)
        pool_x8(pool, r->type, shapes, nshapes, r->mats, 1);
    size_t bytes = 0;
    for (int s = 0; s < nshapes; s++)
        bytes += quant_row_bytes(r->type, shapes[s].n) * (size_t)shapes[s].d;
    bytes *= (size_t)r->mats;
    const size_t nread = (bytes / sizeof(float)) & ~(size_t)127;
    double *gbs = sm, *rel = sm + reps;
    for (int k = -1; k < reps; k++) {
        double t0 = time_now();
        sink += bench_read4((const float *)(const void *)pool, nread);
        const double gr = (double)nread * sizeof(float) / (time_now() - t0) / 1e9;
        const double t = qrun_pass(pool, r->type, r->x8, shapes, nshapes, r->mats, xa, y);
        if (k < 0)
            continue;
        read_best_seen = fmax(read_best_seen, gr);
        gbs[k] = (double)bytes / t / 1e9;
        rel[k] = gbs[k] / gr;
    }
    r->mb = (double)bytes / 1e6;
    r->med = median(gbs, reps);
    r->best = gbs[reps - 1];
    r->paired = median(rel, reps);
    if (r->x8)
        pool_x8(pool, r->type, shapes, nshapes, r->mats, 0);
}

/* The table's type column: "q4_0", or "q4_0x8" for the eight-row groups. */
static const char *qlabel(const QResult *r)
{
    static char buf[16];
    snprintf(buf, sizeof buf, "%s%s", quant_type_name(r->type), r->x8 ? "x8" : "");
    return buf;
}

/* Median microseconds of quant_quantize_act for a row of n values. */
static double qact_us(QType t, int n, const float *x, void *out, int reps, double *sm)
{
    for (int k = 0; k < reps; k++) {
        double t0 = time_now();
        for (int i = 0; i < 100; i++)
            quant_quantize_act(out, x, t, n);
        sm[k] = (time_now() - t0) / 100 * 1e6;
    }
    return median(sm, reps);
}

int main(int argc, char **argv)
{
    int reps = 21;
    size_t read_mib = 1024;
    int opt, quant_only = 0;
    while ((opt = getopt(argc, argv, "r:m:nq")) != -1) {
        switch (opt) {
        case 'r': reps = atoi(optarg); break;
        case 'm': read_mib = (size_t)atol(optarg); break;
        case 'n': use_hugepages = 0; break;
        case 'q': quant_only = 1; break;
        default:
            fprintf(stderr, "usage: %s [-r repeats] [-m read_buffer_MiB] [-n] [-q]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    if (read_mib < 64)
        read_mib = 64;
    openblas_set_num_threads(1);

    /* (a) memory bandwidth */
    const size_t rbytes = read_mib << 20, rn = rbytes / sizeof(float);
    float *buf = big_alloc(rbytes);
    for (size_t i = 0; i < rn; i++)
        buf[i] = (float)(i & 1023);
    const int bw_runs = 7;
    double best1 = 0, best4 = 0, bestc = 0;
    for (int r = 0; r < bw_runs; r++) {
        double t0 = time_now();
        sink += bench_read1(buf, rn);
        double t1 = time_now();
        sink += bench_read4(buf, rn);
        double t2 = time_now();
        best1 = fmax(best1, (double)rbytes / (t1 - t0) / 1e9);
        best4 = fmax(best4, (double)rbytes / (t2 - t1) / 1e9);
    }
    const size_t cn = rn / 2;
    for (int r = 0; r < bw_runs; r++) {
        double t0 = time_now();
        bench_copy(buf + cn, buf, cn);
        double t = time_now() - t0;
        sink += buf[cn + (size_t)r];
        bestc = fmax(bestc, 2.0 * (double)cn * sizeof(float) / t / 1e9);
    }
    big_free(buf, rbytes);

    /* (b) matvec */
    static const Shape shapes[] = {{"wq/wo", 2048, 2048},  {"wk/wv", 256, 2048},
                                   {"w1/w3", 5632, 2048},  {"w2", 2048, 5632},
                                   {"classifier", 32000, 2048}};
    static const Shape layer[] = {{"wq", 2048, 2048}, {"wk", 256, 2048},  {"wv", 256, 2048},
                                  {"wo", 2048, 2048}, {"w1", 5632, 2048}, {"w3", 5632, 2048},
                                  {"w2", 2048, 5632}};
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    const int nlayer = (int)(sizeof layer / sizeof layer[0]);
    const size_t pool_n = (size_t)32000 * 2048;
    float *pool = big_alloc(pool_n * sizeof(float));
    uint64_t rng = 42;
    for (size_t i = 0; i < pool_n; i++)
        pool[i] = rng_float(&rng) - 0.5f;
    float *x = xmalloc(5632 * sizeof *x);
    float *y = xmalloc(32000 * sizeof *y);
    for (int i = 0; i < 5632; i++)
        x[i] = rng_float(&rng) - 0.5f;
    double *sm = xmalloc(4 * (size_t)reps * sizeof *sm);

    Result res[8];
    int nres = 0;
    for (int s = 0; s < nshapes && !quant_only; s++) {
        Result *r = &res[nres++];
        size_t per = (size_t)shapes[s].d * (size_t)shapes[s].n;
        r->d = shapes[s].d;
        r->n = shapes[s].n;
        r->mats = (int)(pool_n / per);
        snprintf(r->label, sizeof r->label, "%dx%d %s", r->d, r->n, shapes[s].name);
        bench_shapes(r, pool, &shapes[s], 1, x, y, reps, sm);
    }
    if (!quant_only) {
        Result *r = &res[nres++];
        r->d = 0;
        r->n = 0;
        r->mats = 1;
        snprintf(r->label, sizeof r->label, "TinyLlama layer (x7)");
        bench_shapes(r, pool, layer, nlayer, x, y, reps, sm);
    }

    /* (d) quantized weights, the pool's memory reused as blocks */
    static const QType qtypes[] = {QTYPE_Q8_0, QTYPE_Q4_0, QTYPE_Q4_K};
    static const Shape qshapes[] = {{"wq/wo", 2048, 2048}, {"w1/w3", 5632, 2048},
                                    {"w2", 2048, 5632}};
    const int nqt = (int)(sizeof qtypes / sizeof qtypes[0]);
    const int nqs = (int)(sizeof qshapes / sizeof qshapes[0]);
    const size_t qpool_bytes = pool_n * sizeof(float);
    uint8_t *qpool = (uint8_t *)(void *)pool;
    void *xa = xmalloc(quant_row_bytes(QTYPE_Q8_0, 5632) + quant_row_bytes(QTYPE_Q8_K, 5632));
    QResult qres[32];
    double act_us[3][2];
    int nq = 0;
    for (int k = 0; k < nqt; k++) {
        const QType t = qtypes[k];
        fill_quant_pool(qpool, qpool_bytes, t, &rng);
        quant_quantize_act(xa, x, t, 5632); /* its prefix is the activation of 2048 columns */
        /* both layouts where the engine keeps this type in eight-row groups */
        const int layouts = quant_x8_preferred(t, 2048, 8) ? 2 : 1;
        for (int x8 = 0; x8 < layouts; x8++) {
            for (int s = 0; s <= nqs; s++) {
                QResult *r = &qres[nq++];
                r->type = t;
                r->x8 = x8;
                if (s < nqs) {
                    r->d = qshapes[s].d;
                    r->n = qshapes[s].n;
                    r->mats = (int)(qpool_bytes / (quant_row_bytes(t, r->n) * (size_t)r->d));
                    snprintf(r->label, sizeof r->label, "%dx%d %s", r->d, r->n,
                             qshapes[s].name);
                    qbench_shapes(r, qpool, &qshapes[s], 1, xa, y, reps, sm);
                } else {
                    size_t lb = 0;
                    for (int l = 0; l < nlayer; l++)
                        lb += quant_row_bytes(t, layer[l].n) * (size_t)layer[l].d;
                    r->d = r->n = 0;
                    r->mats = (int)(qpool_bytes / lb);
                    snprintf(r->label, sizeof r->label, "TinyLlama layers (x%d)", r->mats);
                    qbench_shapes(r, qpool, layer, nlayer, xa, y, reps, sm);
                }
            }
        }
        act_us[k][0] = qact_us(t, 2048, x, xa, reps, sm);
        act_us[k][1] = qact_us(t, 5632, x, xa, reps, sm);
    }

    /* (c) report */
    const double roof = fmax(fmax(best1, best4), read_best_seen);
    const char *core = kernels_blas_corename();
    printf("HeadSplit matvec benchmark: one core, fp32, GB = 1e9 bytes, %d repeats\n", reps);
    printf("OpenBLAS core: %s (threads %d)   huge pages: %s\n", core, openblas_get_num_threads(),
           use_hugepages ? "requested" : "off");
    printf("memory read, 1 stream : %7.2f GB/s  (best of %d over %zu MiB)\n", best1, bw_runs,
           read_mib);
    printf("memory read, 4 streams: %7.2f GB/s  (same; %.2f GB/s best during the matvec runs)\n",
           best4, read_best_seen);
    printf("memory copy (STREAM)  : %7.2f GB/s  (read + write bytes)\n", bestc);
    printf("roofline (best read)  : %7.2f GB/s\n\n", roof);
    printf("med/best: median/best GB/s of weights read; b/roof: best over the roofline;\n"
           "paired: median over repeats of GB/s over a 4-stream read of the same bytes timed\n"
           "just before (the fraction of the bandwidth available at that moment)\n\n");
    printf("%-22s %6s | %-27s | %-27s | %s\n", "", "", "own kernel", "OpenBLAS sgemv", "own/");
    printf("%-22s %6s | %6s %6s %6s %6s | %6s %6s %6s %6s | %s\n", "matrix (rows x cols)",
           "MB", "med", "best", "b/roof", "paired", "med", "best", "b/roof", "paired", "blas");
    for (int i = 0; i < nres; i++) {
        const Result *r = &res[i];
        printf("%-22s %6.1f | %6.2f %6.2f %6.3f %6.3f | %6.2f %6.2f %6.3f %6.3f | %4.2f\n",
               r->label, r->mb, r->med[0], r->best[0], r->best[0] / roof, r->paired[0],
               r->med[1], r->best[1], r->best[1] / roof, r->paired[1], r->med[0] / r->med[1]);
    }
    printf("\nquantized weights (quant_matvec, SIMD path %s): GB/s of weight bytes read\n",
           quant_simd_name());
    printf("%-8s %-24s %6s | %6s %6s %6s %6s %6s | %s\n", "type", "matrix (rows x cols)", "MB",
           "med", "best", "m/roof", "b/roof", "paired", "fp32 own med");
    for (int i = 0; i < nq; i++) {
        const QResult *r = &qres[i];
        double f32 = 0;
        for (int j = 0; j < nres; j++)
            if (res[j].d == r->d && res[j].n == r->n)
                f32 = res[j].med[0];
        printf("%-8s %-24s %6.1f | %6.2f %6.2f %6.3f %6.3f %6.3f | %6.2f\n",
               qlabel(r), r->label, r->mb, r->med, r->best, r->med / roof,
               r->best / roof, r->paired, f32);
    }
    for (int k = 0; k < nqt; k++)
        printf("activation to %s: %.2f us (2048 values), %.2f us (5632)\n",
               quant_type_name(quant_vec_dot_type(qtypes[k])), act_us[k][0], act_us[k][1]);
    printf("\n{\"bench\":\"matvec\",\"reps\":%d,\"openblas_core\":\"%s\",\"hugepages\":%s,"
           "\"read1_gbs\":%.3f,\"read4_gbs\":%.3f,\"read_paired_best_gbs\":%.3f,"
           "\"copy_gbs\":%.3f,\"roofline_gbs\":%.3f,\"results\":[",
           reps, core, use_hugepages ? "true" : "false", best1, best4, read_best_seen, bestc,
           roof);
    for (int i = 0; i < nres; i++) {
        const Result *r = &res[i];
        printf("%s{\"matrix\":\"%s\",\"rows\":%d,\"cols\":%d,\"mats\":%d,\"mb\":%.1f",
               i ? "," : "", r->label, r->d, r->n, r->mats, r->mb);
        static const char *const impl[2] = {"own", "blas"};
        for (int m = 0; m < 2; m++)
            printf(",\"%s_med_gbs\":%.3f,\"%s_best_gbs\":%.3f,\"%s_best_frac\":%.4f,"
                   "\"%s_paired_frac\":%.4f",
                   impl[m], r->med[m], impl[m], r->best[m], impl[m], r->best[m] / roof, impl[m],
                   r->paired[m]);
        printf("}");
    }
    printf("],\"quant_simd\":\"%s\",\"quant\":[", quant_simd_name());
    for (int i = 0; i < nq; i++) {
        const QResult *r = &qres[i];
        printf("%s{\"type\":\"%s\",\"matrix\":\"%s\",\"rows\":%d,\"cols\":%d,\"mats\":%d,"
               "\"mb\":%.1f,\"med_gbs\":%.3f,\"best_gbs\":%.3f,\"med_frac\":%.4f,"
               "\"best_frac\":%.4f,\"paired_frac\":%.4f,\"layout\":\"%s\"}",
               i ? "," : "", quant_type_name(r->type), r->label, r->d, r->n, r->mats, r->mb,
               r->med, r->best, r->med / roof, r->best / roof, r->paired,
               r->x8 ? "x8" : "rows");
    }
    printf("]}\n");

    free(sm);
    free(xa);
    free(x);
    free(y);
    big_free(pool, pool_n * sizeof(float));
    return 0;
}
