/* qmatmul_bench.c: the quantized matrix-matrix product of a prompt pass (quant_matmul and
 * quant_matmul_x8: nb activations against one matrix) on one kernel thread, against nb
 * matvecs of the same matrix, on TinyLlama's shapes.  Prints, per type and shape, the median
 * ms of one product, G multiply-adds per second and the speed-up over nb matvecs; then one
 * JSON line.  The activations are quantized once, apart (the engine shares them between
 * matrices).  Speed does not depend on the values: random quants, small finite scales.
 *
 * usage: qmatmul_bench [-r repeats] [-b activations] [-t threads] [-s shape] [-m] [TYPE...]
 *        TYPE: q8_0 q8_0x8 q4_0 q4_0x8 q4_K q5_K q6_K (default: all); -s 0|1|2|3: one shape
 *        only (3, k/v, is not in the default set: its matrix fits L2, so that its matvecs
 *        time the kernel's arithmetic, not the memory hierarchy);
 *        -m: the matmul only, no matvecs; -c: time by the thread's CPU clock (one thread;
 *        steadier on a host shared with other work) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels.h"
#include "quant.h"
#include "util.h"

static volatile float sink;
static int cpu_clock; /* -c: the calling thread's CPU time, not the wall clock */

/* Seconds: the wall clock, or with -c this thread's CPU time (one kernel thread runs on the
 * caller; time the scheduler gives to other processes on a busy host is not counted). */
static double now_s(void)
{
    if (!cpu_clock)
        return time_now();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    const char *name;
    QType type;
    int x8;
} QKind;

static const QKind kinds[] = {
    {"q8_0", QTYPE_Q8_0, 0}, {"q8_0x8", QTYPE_Q8_0, 1}, {"q4_0", QTYPE_Q4_0, 0},
    {"q4_0x8", QTYPE_Q4_0, 1},
    {"q4_K", QTYPE_Q4_K, 0}, {"q5_K", QTYPE_Q5_K, 0}, {"q6_K", QTYPE_Q6_K, 0},
};

/* Random quants, then a small finite fp16 scale (and min) in every block. */
static void fill_blocks(uint8_t *w, size_t bytes, QType t, uint64_t *rng)
{
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        const uint64_t r = rng_next(rng);
        memcpy(w + i, &r, 8);
    }
    const size_t bb = quant_block_bytes(t);
    const uint16_t h = kernels_f32_to_f16_one(0.001f);
    for (size_t b = 0; b + bb <= bytes; b += bb) {
        memcpy(w + b + (t == QTYPE_Q6_K ? 208 : 0), &h, 2);
        if (t == QTYPE_Q4_K || t == QTYPE_Q5_K)
            memcpy(w + b + 2, &h, 2);
    }
}

static double run_once(const QKind *k, float *y, const uint8_t *w, size_t rb, const uint8_t *act,
                       size_t ab, int n, int d, int nb, int as_matvecs)
{
    const double t0 = now_s();
    if (as_matvecs) {
        for (int b = 0; b < nb; b++) {
            if (k->x8)
                quant_matvec_x8(y + (size_t)b * d, w, k->type, act + ab * (size_t)b, n, d);
            else
                quant_matvec(y + (size_t)b * d, w, k->type, rb, act + ab * (size_t)b, n, d);
        }
    } else if (k->x8) {
        quant_matmul_x8(y, w, k->type, act, ab, n, d, nb, (size_t)d);
    } else {
        quant_matmul(y, w, k->type, rb, act, ab, n, d, nb, (size_t)d);
    }
    const double t = now_s() - t0;
    sink += y[(size_t)(nb - 1) * d];
    return t;
}

int main(int argc, char **argv)
{
    int reps = 7, nb = 128, threads = 1, only_shape = -1, only_mm = 0, opt;
    while ((opt = getopt(argc, argv, "r:b:t:s:mc")) != -1) {
        switch (opt) {
        case 's': only_shape = atoi(optarg); break;
        case 'm': only_mm = 1; break;
        case 'c': cpu_clock = 1; break;
        case 'r': reps = atoi(optarg); break;
        case 'b': nb = atoi(optarg); break;
        case 't': threads = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-r repeats] [-b activations] [-t threads] [-s shape] "
                    "[-m] [-c] [TYPE...]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || nb < 1 || threads < 1 || (cpu_clock && threads > 1)) {
        fprintf(stderr, "qmatmul_bench: -r, -b and -t take positive numbers; -c wants -t 1\n");
        return 2;
    }
    kernels_set_threads(threads);
    /* TinyLlama: q/o (2048 x 2048), gate/up (5632 x 2048), down (2048 x 5632); k/v
     * (256 x 2048) with -s 3 only */
    static const int shapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {256, 2048}};
    uint64_t rng = 1;
    printf("qmatmul_bench: %d activations, %d thread(s), %s path, median of %d, %s\n", nb,
           threads, quant_simd_name(), reps, cpu_clock ? "thread CPU time" : "wall clock");
    printf("%-7s %-11s %9s %9s %9s %9s %8s\n", "type", "d x n", "matmul ms", "GMAC/s", "best",
           "matvecs", "speedup");
    char json[4096];
    int jl = snprintf(json, sizeof json, "{\"bench\":\"qmatmul\",\"nb\":%d,\"threads\":%d,"
                      "\"results\":[", nb, threads);
    int first = 1;
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        const QKind *k = &kinds[ki];
        int want = optind >= argc;
        for (int a = optind; a < argc; a++)
            want |= strcmp(argv[a], k->name) == 0;
        if (!want)
            continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            if (only_shape >= 0 ? (size_t)only_shape != s : s == 3)
                continue;
            const int d = shapes[s][0], n = shapes[s][1];
            const size_t rb = quant_row_bytes(k->type, n);
            const QType at = quant_vec_dot_type(k->type);
            const size_t ab = quant_row_bytes(at, n);
            uint8_t *w = xmalloc(rb * (size_t)d);
            fill_blocks(w, rb * (size_t)d, k->type, &rng);
            if (k->x8)
                quant_x8_pack(w, k->type, n, d);
            float *x = xmalloc(sizeof(float) * (size_t)n);
            uint8_t *act = xmalloc(ab * (size_t)nb);
            for (int b = 0; b < nb; b++) {
                for (int j = 0; j < n; j++)
                    x[j] = (float)((int64_t)(rng_next(&rng) % 2001) - 1000) / 1000.0f;
                quant_quantize_act(act + ab * (size_t)b, x, k->type, n);
            }
            float *y = xmalloc(sizeof(float) * (size_t)d * (size_t)nb);
            double *tm = xmalloc(sizeof(double) * (size_t)reps);
            double *tv = xmalloc(sizeof(double) * (size_t)reps);
            run_once(k, y, w, rb, act, ab, n, d, nb, 0); /* warm-up */
            for (int r = 0; r < reps; r++) { /* interleaved */
                tm[r] = run_once(k, y, w, rb, act, ab, n, d, nb, 0);
                tv[r] = only_mm ? tm[r] : run_once(k, y, w, rb, act, ab, n, d, nb, 1);
            }
            double best = tm[0];
            for (int r = 1; r < reps; r++)
                best = tm[r] < best ? tm[r] : best;
            const double mm = util_median(tm, (size_t)reps), mv = util_median(tv, (size_t)reps);
            const double gmac = (double)d * n * nb / mm / 1e9;
            char shape[24];
            snprintf(shape, sizeof shape, "%dx%d", d, n);
            printf("%-7s %-11s %9.2f %9.1f %9.1f %9.2f %7.2fx\n", k->name, shape, mm * 1e3, gmac,
                   (double)d * n * nb / best / 1e9, mv * 1e3, mv / mm);
            if (jl < (int)sizeof json - 200)
                jl += snprintf(json + jl, sizeof json - (size_t)jl,
                               "%s{\"type\":\"%s\",\"d\":%d,\"n\":%d,\"matmul_ms\":%.3f,"
                               "\"gmac_s\":%.2f,\"best_gmac_s\":%.2f,\"matvecs_ms\":%.3f}",
                               first ? "" : ",", k->name, d, n, mm * 1e3, gmac,
                               (double)d * n * nb / best / 1e9, mv * 1e3);
            first = 0;
            free(tm), free(tv), free(y), free(act), free(x), free(w);
        }
    }
    printf("%s]}\n", json);
    return 0;
}
