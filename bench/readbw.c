/* readbw.c: the host's read bandwidth with 1..T threads, each summing its own contiguous part
 * of one buffer (64-bit integer adds, which the compiler vectorises), so that the ceiling of
 * a row-parallel matrix-vector product at T threads is known: decode of an fp32 model that
 * does not fit in cache cannot run faster than its bytes over this bandwidth.  Medians of
 * repeats, interleaved over the thread counts.  One line per count, then one JSON line.
 *
 * usage: readbw [-m MiB] [-r repeats] [-t max_threads]     (defaults: 1024, 7, 2) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
    double t0, t1; /* the thread's own start (after the barrier) and end */
    pthread_barrier_t *start;
} Part;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *reader(void *arg)
{
    Part *w = arg;
    pthread_barrier_wait(w->start);
    w->t0 = now();
    uint64_t s = 0;
    for (size_t i = 0; i < w->n; i++)
        s += w->p[i];
    w->sum = s;
    w->t1 = now();
    return NULL;
}

/* One timed read of the whole buffer by t threads; GB/s.  The time runs from the first
 * reader's start to the last one's end, as the readers see them: the caller's own clock
 * would miss reads done before it runs again (under chrt -f a reader that shares the
 * caller's core finishes before the caller is scheduled). */
static double read_once(const uint64_t *buf, size_t n, int t, uint64_t *check)
{
    pthread_t th[64];
    Part w[64];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)t + 1);
    for (int i = 0; i < t; i++) {
        size_t a = n * (size_t)i / (size_t)t, b = n * (size_t)(i + 1) / (size_t)t;
        w[i] = (Part){buf + a, b - a, 0, 0, 0, &start};
        if (pthread_create(&th[i], NULL, reader, &w[i]) != 0) {
            fprintf(stderr, "readbw: cannot start thread %d\n", i);
            exit(1);
        }
    }
    pthread_barrier_wait(&start);
    uint64_t s = 0;
    double t0 = 0, t1 = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(th[i], NULL);
        s += w[i].sum;
        if (i == 0 || w[i].t0 < t0)
            t0 = w[i].t0;
        if (i == 0 || w[i].t1 > t1)
            t1 = w[i].t1;
    }
    pthread_barrier_destroy(&start);
    *check = s;
    return (double)n * sizeof(uint64_t) / (t1 - t0) / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long mib = 1024, reps = 7, tmax = 2;
    for (int i = 1; i < argc; i++) {
        long *dst = !strcmp(argv[i], "-m") ? &mib : !strcmp(argv[i], "-r") ? &reps
                    : !strcmp(argv[i], "-t") ? &tmax : NULL;
        if (!dst || i + 1 >= argc || (*dst = strtol(argv[++i], NULL, 10)) < 1) {
            fprintf(stderr, "usage: readbw [-m MiB] [-r repeats] [-t max_threads (1..64)]\n");
            return 2;
        }
    }
    if (tmax > 64)
        tmax = 64;
    const size_t n = (size_t)mib * 1024 * 1024 / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof(uint64_t));
    if (!buf) {
        fprintf(stderr, "readbw: cannot allocate %ld MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = i;
    const uint64_t want = (uint64_t)n * ((uint64_t)n - 1) / 2;
    double *gbs = calloc((size_t)(tmax * reps), sizeof(double));
    for (long r = 0; r < reps; r++)
        for (long t = 1; t <= tmax; t++) {
            uint64_t s;
            gbs[(t - 1) * reps + r] = read_once(buf, n, (int)t, &s);
            if (s != want) {
                fprintf(stderr, "readbw: wrong sum (%llu, expected %llu)\n",
                        (unsigned long long)s, (unsigned long long)want);
                return 1;
            }
        }
    printf("threads\tGB/s (median)\tmin\tmax\tratio to 1 thread\n");
    double one = 0;
    char json[4096];
    int len = snprintf(json, sizeof json, "{\"bench\":\"readbw\",\"mib\":%ld,\"reps\":%ld,\"gbs\":[", mib,
                       reps);
    for (long t = 1; t <= tmax; t++) {
        double *v = gbs + (t - 1) * reps;
        qsort(v, (size_t)reps, sizeof(double), cmp_double);
        double med = v[reps / 2];
        if (t == 1)
            one = med;
        printf("%ld\t%.2f\t%.2f\t%.2f\t%.2f\n", t, med, v[0], v[reps - 1], med / one);
        if (len < (int)sizeof json)
            len += snprintf(json + len, sizeof json - (size_t)len, "%s%.3f", t > 1 ? "," : "", med);
    }
    printf("%s]}\n", json);
    free(gbs);
    free(buf);
    return 0;
}
