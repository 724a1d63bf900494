/* pool.c: a persistent pool of threads for the row-parallel kernels (--threads).
 *
 * The threads are made once (kernels_set_threads) and wait between calls: each spins on a
 * generation counter for a short while (a token's matrix-vector products follow each other
 * within microseconds), then sleeps on a condition variable, so an idle rank leaves its cores
 * to others.  A job is split into contiguous row ranges, one per thread, by a rule that
 * depends only on the row count and the thread count; every row is computed whole by one
 * thread in the kernel's canonical order, so results are bit-identical for any N.
 *
 * Only one job runs at a time: a caller that finds the pool busy (ranks as threads in the
 * in-process tests) computes its rows itself, which gives the same bits. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "kernels.h"

#include "util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#define POOL_MAX 64
#define POOL_SPIN 20000 /* polls before a waiting thread sleeps */

typedef struct {
    KernelsRowsFn fn;
    void *arg;
    int rows;
} PoolJob;

static struct {
    int n;                       /* threads in all, the caller included */
    pthread_t tid[POOL_MAX];
    pthread_mutex_t busy;        /* held by the caller of a parallel job */
    pthread_mutex_t mu;          /* guards the sleeping side */
    pthread_cond_t wake, done_cv;
    atomic_uint gen;             /* bumped per job; threads run the job of a new value */
    atomic_int pending;          /* helper threads still working on the current job */
    atomic_int quit;
    unsigned start_gen;          /* gen when the threads were made (jobs before are done) */
    PoolJob job;
} pool = {.n = 1, .busy = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER, .done_cv = PTHREAD_COND_INITIALIZER};

/* Thread t's rows [lo, hi) of rows split over n threads. */
static void pool_range(int rows, int n, int t, int *lo, int *hi)
{
    *lo = (int)((long long)rows * t / n);
    *hi = (int)((long long)rows * (t + 1) / n);
}

static void *pool_main(void *p)
{
    const int t = (int)(intptr_t)p;
    unsigned seen = pool.start_gen;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen &&
               !atomic_load(&pool.quit)) {
            if (++spins < POOL_SPIN)
                continue;
            pthread_mutex_lock(&pool.mu);
            while (atomic_load(&pool.gen) == seen && !atomic_load(&pool.quit))
                pthread_cond_wait(&pool.wake, &pool.mu);
            pthread_mutex_unlock(&pool.mu);
        }
        if (atomic_load(&pool.quit))
            return NULL;
        seen = g;
        int lo, hi;
        pool_range(pool.job.rows, pool.n, t, &lo, &hi);
        if (hi > lo)
            pool.job.fn(pool.job.arg, lo, hi);
        if (atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done_cv);
            pthread_mutex_unlock(&pool.mu);
        }
    }
}

static void pool_stop(void)
{
    if (pool.n <= 1)
        return;
    pthread_mutex_lock(&pool.mu);
    atomic_store(&pool.quit, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    for (int t = 1; t < pool.n; t++)
        pthread_join(pool.tid[t], NULL);
    atomic_store(&pool.quit, 0);
    pool.n = 1;
}

int kernels_set_threads(int n)
{
    if (n < 1)
        n = 1;
    if (n > POOL_MAX)
        n = POOL_MAX;
    pthread_mutex_lock(&pool.busy);
    pool_stop();
    pool.start_gen = atomic_load(&pool.gen);
    int made = 1;
    for (int t = 1; t < n; t++) {
        if (pthread_create(&pool.tid[t], NULL, pool_main, (void *)(intptr_t)t) != 0)
            break;
        made++;
    }
    pool.n = made;
    pthread_mutex_unlock(&pool.busy);
    return made;
}

int kernels_get_threads(void) { return pool.n; }

int kernels_default_threads(void)
{
    /* An emulated board (scripts/emulate-device) runs as many threads as it has cores. */
    const char *board = getenv("HEADSPLIT_DEVICE_CORES");
    if (board && board[0]) {
        char *end;
        long k = strtol(board, &end, 10);
        if (!*end && k >= 1)
            return k > POOL_MAX ? POOL_MAX : (int)k;
    }
    cpu_set_t set;
    int cores = 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cores = CPU_COUNT(&set);
    /* Ranks started side by side on one host share its cores (Open MPI says how many). */
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int ranks = local ? atoi(local) : 1;
    if (ranks > 1)
        cores /= ranks;
    return cores < 1 ? 1 : cores > POOL_MAX ? POOL_MAX : cores;
}

void kernels_parallel_rows(KernelsRowsFn fn, void *arg, int rows, long long work)
{
    /* Small jobs are not worth a wake-up: ~64 K multiply-adds. */
    if (pool.n <= 1 || rows < 2 * pool.n || work < 65536 ||
        pthread_mutex_trylock(&pool.busy) != 0) {
        if (rows > 0)
            fn(arg, 0, rows);
        return;
    }
    if (pool.n <= 1) { /* the pool was shrunk while we waited for the lock */
        pthread_mutex_unlock(&pool.busy);
        fn(arg, 0, rows);
        return;
    }
    pool.job = (PoolJob){fn, arg, rows};
    atomic_store_explicit(&pool.pending, pool.n - 1, memory_order_relaxed);
    pthread_mutex_lock(&pool.mu);
    atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    int lo, hi;
    pool_range(rows, pool.n, 0, &lo, &hi);
    if (hi > lo)
        fn(arg, lo, hi);
    int spins = 0;
    while (atomic_load_explicit(&pool.pending, memory_order_acquire) > 0) {
        if (++spins < POOL_SPIN)
            continue;
        pthread_mutex_lock(&pool.mu);
        while (atomic_load(&pool.pending) > 0)
            pthread_cond_wait(&pool.done_cv, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
    pthread_mutex_unlock(&pool.busy);
}
