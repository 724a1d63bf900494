/* util.h: the one fatal path, checked allocation and size arithmetic, timers, RNG.
 * Everything here is MPI-free; the MPI transport registers MPI_Abort as the fatal hook. */
#ifndef HEADSPLIT_UTIL_H
#define HEADSPLIT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Called by FATAL after the message is printed; must not return.  The default
 * hook calls exit(1).  transport_mpi_init installs one that calls MPI_Abort. */
typedef void (*FatalHook)(int code);
void util_set_fatal_hook(FatalHook hook);
/* Rank printed in front of every fatal message and log line (-1: none). */
void util_set_rank(int rank);
int util_rank(void);

/* Prints "[rank r] file:line: message" to stderr and calls the hook. */
void util_fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define FATAL(...) util_fatal(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(cond, ...) do { if (!(cond)) FATAL(__VA_ARGS__); } while (0)

/* Log levels: 0 errors only, 1 info (default), 2 debug. */
void util_set_log_level(int level);
int util_log_level(void);
void util_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define LOG_INFO(...) util_log(1, __VA_ARGS__)
#define LOG_DEBUG(...) util_log(2, __VA_ARGS__)

/* Allocation that never returns NULL (fatal on failure).  64-byte aligned. */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
/* For weights: buffers of 2 MiB or more are 2 MiB-aligned and ask for
 * transparent huge pages (MADV_HUGEPAGE), so that streaming them through the matrix-vector
 * kernel is not limited by TLB misses on 4 KiB pages (the whole huge pages of the n bytes;
 * the tail past them keeps 4 KiB pages).  Freed with free(). */
void *xmalloc_big(size_t n);
void *xcalloc_big(size_t count, size_t size);
/* For KV caches: zeroed memory whose pages become resident only as they are written (calloc:
 * glibc maps a large block fresh and does not clear it), so that a cache for the whole
 * context costs the positions used; no huge pages (one write would fault in 2 MiB).  Freed
 * with free(). */
void *xcalloc_lazy(size_t count, size_t size);
char *xstrdup(const char *s);

/* Overflow-checked size arithmetic: return 0 on success, -1 on overflow. */
int size_mul(size_t *out, size_t a, size_t b);
int size_add(size_t *out, size_t a, size_t b);

/* Sorts v ascending in place; the median of v[0..n) (the mean of the middle two for even n,
 * 0 for n < 1), v left unchanged. */
void util_sort_doubles(double *v, size_t n);
double util_median(const double *v, size_t n);

/* Formats into err (capacity errlen) and returns -1: for "return fail(...)". */
int util_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Monotonic wall-clock seconds and this process's CPU seconds. */
double time_now(void);
double time_cpu(void);
/* Peak resident set size of this process in bytes (from /proc/self/status). */
size_t util_peak_rss(void);
/* Resets the peak to the present resident size (Linux's /proc/self/clear_refs "5"), so that
 * a transient buffer already freed no longer counts; 0, or -1 where the kernel refuses. */
int util_reset_peak_rss(void);

/* SplitMix64-seeded xoshiro-style generator; state passed explicitly. */
uint64_t rng_next(uint64_t *state);
/* Advances state by n draws of rng_next at once (SplitMix64 steps by a constant), so that a
 * stream can be cut into pieces generated apart, bit for bit as drawn in order. */
void rng_skip(uint64_t *state, uint64_t n);
/* Uniform float in [0, 1). */
float rng_float(uint64_t *state);
/* Standard normal (Box-Muller). */
float rng_normal(uint64_t *state);

/* Reads a whole file into a NUL-terminated buffer; NULL with err set on failure. */
char *util_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* Parses a size such as "4G", "512M", "1.5GB", "1000000" into bytes; -1 on error. */
int util_parse_bytes(const char *s, size_t *out);

#endif
