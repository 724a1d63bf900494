/* batch_bench.c: time per position of a multi-position pass (issue 17) through every layer of
 * a model file on this process: the in-process backend's forward_n on B positions at once,
 * for each B given, against B = 1.  Each pass starts at position 0 (the KV cache is simply
 * overwritten), so every B attends over at most B positions and the weights dominate.  The
 * first pass of each B is a warm-up; then `repeats` timed passes, whose median, min and max
 * are printed as ms per position, with the median of this process's CPU time per position
 * (on a shared host the wall time also counts the other jobs; with one kernel thread the CPU
 * time does not).  One line per B (tab-separated), then one JSON line.
 *
 * usage: batch_bench MODEL.h5 [-r repeats] [-t threads] B...   (default B: 1 8 32 64) */
#include "config_io.h"
#include "generate.h"
#include "h5io.h"
#include "kernels.h"
#include "model.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_B 16

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int repeats = 5, threads = 1, bs[MAX_B], nbs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!path)
            path = argv[i];
        else if (nbs < MAX_B && atoi(argv[i]) > 0)
            bs[nbs++] = atoi(argv[i]);
        else {
            fprintf(stderr, "batch_bench: bad argument %s (B must be a positive integer; at "
                            "most %d of them)\n", argv[i], MAX_B);
            return 1;
        }
    }
    if (!path || repeats < 1) {
        fprintf(stderr, "usage: batch_bench MODEL.h5 [-r repeats] [-t threads] B...\n");
        return 1;
    }
    if (!nbs) {
        const int def[] = {1, 8, 32, 64};
        for (nbs = 0; nbs < 4; nbs++)
            bs[nbs] = def[nbs];
    }
    int bmax = 1;
    for (int k = 0; k < nbs; k++)
        bmax = bs[k] > bmax ? bs[k] : bmax;
    char err[512];
    hid_t f = h5io_open_read(path, err, sizeof err);
    ModelConfig c;
    if (f < 0 || config_read(&c, f, path, err, sizeof err) != 0) {
        fprintf(stderr, "batch_bench: %s\n", err);
        return 1;
    }
    if (bmax > c.context_length) {
        fprintf(stderr, "batch_bench: B = %d exceeds %s's context of %d positions\n", bmax, path,
                c.context_length);
        return 1;
    }
    kernels_set_threads(threads);
    LocalModel *m;
    double t0 = time_now();
    if (local_model_load(&m, &c, f, path, bmax, err, sizeof err) != 0) {
        fprintf(stderr, "batch_bench: %s\n", err);
        return 1;
    }
    const double load_s = time_now() - t0;
    float *x = xcalloc((size_t)bmax * (size_t)c.dim, sizeof(float));
    float *x0 = xcalloc((size_t)bmax * (size_t)c.dim, sizeof(float));
    uint64_t rng = 3;
    for (size_t i = 0; i < (size_t)bmax * (size_t)c.dim; i++)
        x0[i] = 0.1f * rng_normal(&rng);
    int *tokens = xcalloc((size_t)bmax, sizeof(int));
    double *t = xcalloc((size_t)repeats, sizeof(double));
    double *tc = xcalloc((size_t)repeats, sizeof(double));
    double med[MAX_B], lo[MAX_B], hi[MAX_B], cmed[MAX_B], base = 0, cbase = 0;
    printf("# %s: %s, dim %d, %d layers, %.0f MB of layer weights, %d thread(s), load %.1f s\n",
           path, c.quantization[0] ? c.quantization : "f32", c.dim, c.n_layers,
           (double)local_model_weight_bytes(m) / 1e6, threads, load_s);
    printf("B\tms_per_pos_median\tmin\tmax\tratio_to_B1\tcpu_ms_per_pos\tcpu_ratio\n");
    for (int k = 0; k < nbs; k++) {
        const int B = bs[k];
        local_model_set_max_batch(m, B);
        LayerBackend be = local_model_backend(m);
        for (int r = -1; r < repeats; r++) {
            memcpy(x, x0, (size_t)B * (size_t)c.dim * sizeof(float));
            const double s = time_now(), sc = time_cpu();
            be.forward_n(be.ctx, x, 0, B, tokens, B);
            if (r >= 0) { /* pass -1 warms the caches and the pool */
                t[r] = (time_now() - s) * 1e3 / B;
                tc[r] = (time_cpu() - sc) * 1e3 / B;
            }
        }
        qsort(t, (size_t)repeats, sizeof *t, cmp_double);
        qsort(tc, (size_t)repeats, sizeof *tc, cmp_double);
        cmed[k] = tc[repeats / 2];
        med[k] = t[repeats / 2];
        lo[k] = t[0];
        hi[k] = t[repeats - 1];
        if (B == 1)
            base = med[k], cbase = cmed[k];
        printf("%d\t%.3f\t%.3f\t%.3f\t", B, med[k], lo[k], hi[k]);
        if (base > 0)
            printf("%.3f\t%.3f\t%.3f\n", med[k] / base, cmed[k], cmed[k] / cbase);
        else
            printf("-\t%.3f\t-\n", cmed[k]);
        fflush(stdout);
    }
    printf("{\"model\":\"%s\",\"type\":\"%s\",\"threads\":%d,\"repeats\":%d,\"rows\":[", path,
           c.quantization[0] ? c.quantization : "f32", threads, repeats);
    for (int k = 0; k < nbs; k++)
        printf("%s{\"B\":%d,\"ms_per_pos\":%.4f,\"min\":%.4f,\"max\":%.4f,\"cpu_ms_per_pos\":%.4f}",
               k ? "," : "", bs[k], med[k], lo[k], hi[k], cmed[k]);
    printf("]}\n");
    free(x), free(x0), free(tokens), free(t), free(tc);
    local_model_free(m);
    H5Fclose(f);
    return 0;
}
