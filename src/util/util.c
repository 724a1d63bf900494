/* util.c: fatal path, allocation, size arithmetic, timers, RNG, small file helpers. */
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>

static FatalHook fatal_hook;
static int log_rank = -1;
static int log_level = 1;

void util_set_fatal_hook(FatalHook hook) { fatal_hook = hook; }
void util_set_rank(int rank) { log_rank = rank; }
int util_rank(void) { return log_rank; }
void util_set_log_level(int level) { log_level = level; }
int util_log_level(void) { return log_level; }

void util_fatal(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (log_rank >= 0)
        fprintf(stderr, "headsplit: error: [rank %d] %s (%s:%d)\n", log_rank, msg, base, line);
    else
        fprintf(stderr, "headsplit: error: %s (%s:%d)\n", msg, base, line);
    fflush(stderr);
    fflush(stdout);
    if (fatal_hook)
        fatal_hook(1);
    exit(1);
}

void util_log(int level, const char *fmt, ...)
{
    if (level > log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (log_rank > 0)
        fprintf(stderr, "[rank %d] ", log_rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void *xmalloc(size_t n)
{
    void *p = NULL;
    if (n == 0)
        n = 1;
    size_t rounded = (n + 63) & ~(size_t)63;
    CHECK(rounded >= n, "allocation of %zu bytes overflows", n);
    p = aligned_alloc(64, rounded);
    CHECK(p, "out of memory allocating %zu bytes", n);
    return p;
}

void *xmalloc_big(size_t n)
{
    const size_t huge = (size_t)2 << 20;
    if (n < huge)
        return xmalloc(n);
    size_t rounded = (n + huge - 1) & ~(huge - 1);
    CHECK(rounded >= n, "allocation of %zu bytes overflows", n);
    void *p = aligned_alloc(huge, rounded);
    CHECK(p, "out of memory allocating %zu bytes", n);
#ifdef MADV_HUGEPAGE
    /* advice only: 4 KiB pages still work.  Only the whole huge pages of the n bytes: a
     * huge page over the rounded-up tail would make up to 2 MiB of it resident per buffer
     * (about 200 MB over a 7B slice worker's 270 matrices). */
    if (n & ~(huge - 1))
        madvise(p, n & ~(huge - 1), MADV_HUGEPAGE);
#endif
    return p;
}

/* count x size zeroed bytes from alloc, overflow checked. */
static void *zeroed(void *(*alloc)(size_t), size_t count, size_t size)
{
    size_t n;
    CHECK(size_mul(&n, count, size) == 0, "allocation of %zu x %zu bytes overflows", count, size);
    void *p = alloc(n);
    memset(p, 0, n);
    return p;
}

void *xcalloc_big(size_t count, size_t size) { return zeroed(xmalloc_big, count, size); }

void *xcalloc(size_t count, size_t size) { return zeroed(xmalloc, count, size); }

void *xcalloc_lazy(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    CHECK(p, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    CHECK(q, "out of memory reallocating %zu bytes", n);
    return q;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    CHECK(d, "out of memory");
    memcpy(d, s, n);
    return d;
}

int size_mul(size_t *out, size_t a, size_t b)
{
    if (a != 0 && b > SIZE_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

int size_add(size_t *out, size_t a, size_t b)
{
    if (b > SIZE_MAX - a)
        return -1;
    *out = a + b;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void util_sort_doubles(double *v, size_t n) { qsort(v, n, sizeof(double), cmp_double); }

double util_median(const double *v, size_t n)
{
    if (n < 1)
        return 0;
    double *s = xmalloc(n * sizeof(double));
    memcpy(s, v, n * sizeof(double));
    util_sort_doubles(s, n);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

int util_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

double time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double time_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t util_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = (size_t)strtoull(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}

int util_reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs("5", f) >= 0;
    ok &= fclose(f) == 0;
    return ok ? 0 : -1;
}

#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ull

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += SPLITMIX_GAMMA);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t rng_next(uint64_t *state) { return splitmix64(state); }

void rng_skip(uint64_t *state, uint64_t n) { *state += n * SPLITMIX_GAMMA; }

float rng_float(uint64_t *state) { return (float)(rng_next(state) >> 40) / 16777216.0f; }

float rng_normal(uint64_t *state)
{
    double u1 = ((double)(rng_next(state) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(rng_next(state) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

char *util_read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        util_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 131072;
            buf = xrealloc(buf, cap);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        util_err(err, errlen, "%s: read error", path);
        return NULL;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

int util_parse_bytes(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || !isfinite(v))
        return -1;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b' || (*end == 'i' && (end[1] == 'B' || end[1] == 'b')))
        end += (*end == 'i') ? 2 : 1;
    if (*end != '\0')
        return -1;
    v *= mult;
    if (v >= 1.8e19)
        return -1;
    *out = (size_t)v;
    return 0;
}
