/* pool.c: a persistent pool of threads for the row-parallel kernels (--threads).
 *
 * The threads are made once (kernels_set_threads) and wait between calls: each spins for a
 * while (POOL_SPIN_NS: a token's matrix-vector products follow each other within
 * microseconds, and a futex wake-up costs tens of them), then sleeps on a condition
 * variable, so an idle rank leaves its cores to others.  With more threads than the
 * process's CPU affinity has cores, a waiting thread spins only 10 us and yields its core
 * (sched_yield) to the thread that has work; so does it on an emulated board, whose CPU
 * quota the spinning would spend.
 *
 * A job's rows are cut into chunks that every thread, the caller included, claims from one
 * counter until none is left (as ggml's threadpool does): a thread that the host's other
 * work delays, or that starts late, costs the job its current chunk, not half the matrix.
 * Every row is still computed whole by one thread in the kernel's canonical order, so the
 * results are bit-identical for any thread count and any claiming order.
 *
 * The job counter holds the job's generation, its chunk count and the next chunk in one
 * 64-bit word, so a thread claims a chunk of the job it saw and never one of a later job;
 * the caller waits for the chunks done, not for every thread to have seen the job.
 *
 * Only one job runs at a time: a caller that finds the pool busy (ranks as threads in the
 * in-process tests) computes its rows itself, which gives the same bits. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "kernels.h"

#include "util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POOL_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define POOL_RELAX() __asm__ __volatile__("yield")
#else
#define POOL_RELAX() ((void)0)
#endif

#define POOL_MAX 64
#define POOL_SPIN_NS 300000LL /* spin this long before sleeping (0.3 ms) */
#define POOL_SPIN_SHARED_NS 10000LL /* ... where the threads share cores or a CPU quota */
#define POOL_CHUNKS 8         /* chunks per thread of a large job */
#define POOL_ALIGN 8          /* rows per chunk a multiple of this where rows allow */

typedef struct {
    KernelsRowsFn fn;
    void *arg;
    int rows, chunk; /* rows in all, rows per chunk (the last may be short) */
} PoolJob;

/* The job word: generation (32 bits) | chunk count (16) | next chunk to claim (16). */
#define JW_GEN(w) ((unsigned)((w) >> 32))
#define JW_COUNT(w) ((unsigned)((w) >> 16) & 0xffffu)
#define JW_NEXT(w) ((unsigned)(w) & 0xffffu)

static struct {
    int n;                       /* threads in all, the caller included */
    pthread_t tid[POOL_MAX];
    pthread_mutex_t busy;        /* held by the caller of a parallel job */
    pthread_mutex_t mu;          /* guards the sleeping side */
    pthread_cond_t wake, done_cv;
    _Atomic unsigned long long word; /* the job word above */
    atomic_int done;             /* chunks of the current job finished */
    atomic_int sleepers;         /* helper threads asleep (or going to sleep) on wake */
    atomic_int caller_asleep;    /* the caller sleeps on done_cv */
    atomic_int quit;
    int yield;                   /* more threads than cores: a waiting thread yields its core */
    long long spin_ns;           /* how long a waiting thread spins before it sleeps */
    PoolJob job;
} pool = {.n = 1, .busy = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER, .done_cv = PTHREAD_COND_INITIALIZER,
          .spin_ns = POOL_SPIN_NS};

static long long pool_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Claims and runs chunks of job generation gen until none is left (the thread that
 * finishes the last chunk wakes a sleeping caller). */
static void pool_work(unsigned gen)
{
    unsigned long long w = atomic_load_explicit(&pool.word, memory_order_acquire);
    for (;;) {
        if (JW_GEN(w) != gen || JW_NEXT(w) >= JW_COUNT(w))
            return;
        if (!atomic_compare_exchange_weak_explicit(&pool.word, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* w now holds the current word */
        /* Chunk JW_NEXT(w) of job gen is ours and unfinished, so the job cannot change
         * under us until we report it done. */
        const PoolJob *j = &pool.job;
        const int c = (int)JW_NEXT(w), count = (int)JW_COUNT(w);
        const int lo = c * j->chunk, hi = c + 1 == count ? j->rows : lo + j->chunk;
        j->fn(j->arg, lo, hi);
        /* seq_cst, then the caller's flag: the caller sets its flag first, then looks at
         * done again, so one of the two sees the other */
        if (atomic_fetch_add(&pool.done, 1) + 1 == count && atomic_load(&pool.caller_asleep)) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done_cv);
            pthread_mutex_unlock(&pool.mu);
        }
        w = atomic_load_explicit(&pool.word, memory_order_acquire);
    }
}

/* One step of a wait's spin (spins: the steps so far, t0: 0 at the start): a pause, and every
 * 64th step a yield where the cores are shared and a look at the clock.  1 once the wait has
 * spun pool.spin_ns: the caller then sleeps. */
static int pool_spin_spent(int spins, long long *t0)
{
    POOL_RELAX();
    if ((spins & 63) != 0)
        return 0;
    if (pool.yield)
        sched_yield();
    if (*t0 == 0) {
        *t0 = pool_now_ns();
        return 0;
    }
    return pool_now_ns() - *t0 > pool.spin_ns;
}

static void *pool_main(void *p)
{
    (void)p;
    unsigned seen = JW_GEN(atomic_load(&pool.word));
    for (;;) {
        unsigned g;
        long long t0 = 0;
        for (int spins = 0;
             (g = JW_GEN(atomic_load_explicit(&pool.word, memory_order_acquire))) == seen &&
             !atomic_load_explicit(&pool.quit, memory_order_relaxed);
             spins++) {
            if (pool_spin_spent(spins, &t0)) {
                pthread_mutex_lock(&pool.mu);
                atomic_fetch_add(&pool.sleepers, 1);
                while (JW_GEN(atomic_load(&pool.word)) == seen && !atomic_load(&pool.quit))
                    pthread_cond_wait(&pool.wake, &pool.mu);
                atomic_fetch_sub(&pool.sleepers, 1);
                pthread_mutex_unlock(&pool.mu);
                t0 = 0;
            }
        }
        if (atomic_load(&pool.quit))
            return NULL;
        seen = g;
        pool_work(g);
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
    /* Threads that share cores, or an emulated board's CPU quota (scripts/emulate-device),
     * spin only briefly: a spinning thread would take the time of the one with work.  Set
     * before the threads start, which read them. */
    const char *board = getenv("HEADSPLIT_DEVICE_CORES");
    pool.yield = n > kernels_affinity_cores();
    pool.spin_ns = pool.yield || (board && board[0]) ? POOL_SPIN_SHARED_NS : POOL_SPIN_NS;
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

int kernels_affinity_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return kernels_host_cores();
    const int k = CPU_COUNT(&set);
    return k < 1 ? 1 : k;
}

int kernels_host_cores(void)
{
    const long k = sysconf(_SC_NPROCESSORS_ONLN);
    return k < 1 ? 1 : k > 1 << 20 ? 1 << 20 : (int)k;
}

/* Open MPI's count of ranks on this host (1 outside mpirun). */
static int pool_local_ranks(void)
{
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int ranks = local ? atoi(local) : 1;
    return ranks < 1 ? 1 : ranks;
}

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
    int cores = kernels_affinity_cores();
    /* Ranks started side by side on one host share its cores: an unbound rank takes its
     * share, a bound one the cores the launcher gave it. */
    const int ranks = pool_local_ranks();
    if (ranks > 1) {
        const int share = kernels_host_cores() / ranks;
        if (cores > share)
            cores = share;
    }
    return cores < 1 ? 1 : cores > POOL_MAX ? POOL_MAX : cores;
}

int kernels_binding_check(int asked, int affinity, int host, int local_ranks, int launched,
                          char *msg, size_t len)
{
    if (local_ranks < 1)
        local_ranks = 1;
    const int share = host / local_ranks > 0 ? host / local_ranks : 1;
    if (asked > affinity) {
        snprintf(msg, len, "--threads %d asks for more threads than the %d core%s this "
                 "process may run on (its CPU affinity; the host has %d): the threads share "
                 "%s and run slower than %d. %s", asked, affinity, affinity == 1 ? "" : "s",
                 host, affinity == 1 ? "one core" : "cores", affinity,
                 launched ? "Open MPI binds each rank to one core when np <= 2: run "
                            "mpirun --bind-to none (or --map-by ...:PE=N --bind-to core), or "
                            "headsplit alone without mpirun for one process"
                          : "Widen the affinity (taskset, the launcher's binding) or ask "
                            "fewer threads");
        return 1;
    }
    if (asked == 0 && launched && affinity < share) {
        snprintf(msg, len, "the launcher bound this rank to %d of the host's %d cores (Open "
                 "MPI binds each rank to one core when np <= 2), so --threads defaults to %d; "
                 "run mpirun --bind-to none (or --map-by ...:PE=N --bind-to core) to give it "
                 "the board's cores, or headsplit alone without mpirun for one process",
                 affinity, host, affinity);
        return 1;
    }
    return 0;
}

int kernels_binding_advice(int asked, char *msg, size_t len)
{
    const char *board = getenv("HEADSPLIT_DEVICE_CORES");
    if (board && board[0]) /* an emulated board: its cores are its own business */
        return 0;
    /* Started by mpirun (a singleton has no OMPI_COMM_WORLD_LOCAL_SIZE). */
    const int launched = getenv("OMPI_COMM_WORLD_LOCAL_SIZE") != NULL;
    return kernels_binding_check(asked, kernels_affinity_cores(), kernels_host_cores(),
                                 pool_local_ranks(), launched, msg, len);
}

/* Rows per chunk of a job of rows rows and work multiply-adds on n threads: about
 * POOL_CHUNKS chunks per thread, a multiple of POOL_ALIGN rows where there are enough, and
 * no chunk under ~32 K multiply-adds (a claim costs a cache line passed between cores). */
static int pool_chunk_rows(int rows, long long work, int n)
{
    long long c = ((long long)rows + (long long)n * POOL_CHUNKS - 1) / ((long long)n * POOL_CHUNKS);
    const long long floor_rows = ((long long)rows * 32768 + work - 1) / work;
    if (c < floor_rows)
        c = floor_rows;
    if (rows >= n * POOL_ALIGN)
        c = (c + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
    const long long max_count = 0xffff;
    if ((rows + c - 1) / c > max_count)
        c = (rows + max_count - 1) / max_count;
    return (int)(c < 1 ? 1 : c > rows ? rows : c);
}

void kernels_parallel_rows(KernelsRowsFn fn, void *arg, int rows, long long work)
{
    /* Small jobs are not worth a wake-up: ~64 K multiply-adds. */
    if (pool.n <= 1 || rows < 2 || work < 65536 || pthread_mutex_trylock(&pool.busy) != 0) {
        if (rows > 0)
            fn(arg, 0, rows);
        return;
    }
    const int chunk = pool.n > 1 ? pool_chunk_rows(rows, work, pool.n) : rows;
    const int count = (rows + chunk - 1) / chunk;
    if (count < 2) { /* one chunk, or the pool was shrunk while we waited for the lock */
        pthread_mutex_unlock(&pool.busy);
        fn(arg, 0, rows);
        return;
    }
    pool.job = (PoolJob){fn, arg, rows, chunk};
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    const unsigned gen = JW_GEN(atomic_load_explicit(&pool.word, memory_order_relaxed)) + 1;
    /* seq_cst store, then the sleepers' count: a helper going to sleep counts itself first,
     * then looks at the word again, so one of the two sees the other. */
    atomic_store(&pool.word, (unsigned long long)gen << 32 | (unsigned long long)count << 16);
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.mu);
    }
    pool_work(gen);
    long long t0 = 0;
    for (int spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < count; spins++) {
        if (pool_spin_spent(spins, &t0)) {
            /* a helper was descheduled inside a chunk: sleep until the last chunk is done */
            atomic_store(&pool.caller_asleep, 1);
            pthread_mutex_lock(&pool.mu);
            while (atomic_load(&pool.done) < count)
                pthread_cond_wait(&pool.done_cv, &pool.mu);
            pthread_mutex_unlock(&pool.mu);
            atomic_store(&pool.caller_asleep, 0);
        }
    }
    pthread_mutex_unlock(&pool.busy);
}
