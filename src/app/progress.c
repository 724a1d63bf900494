/* progress.c: the progress bar of progress.h, a thread sampling /proc/self/io: redrawn in
 * place on a terminal, a line every few seconds in a log. */
#include "progress.h"

#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct Progress {
    char label[128];
    uint64_t total, base;
    int writes;
    int log;        /* stderr is not a terminal: whole lines, not a redrawn bar */
    double every;   /* log: seconds between lines (0: every tick, and always a last line) */
    double next;    /* log: when the next line is due, seconds after t0 */
    int lines;      /* log: lines printed so far */
    double t0;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
};

/* rchar or wchar of this process (bytes through read/write calls), or -1. */
static int64_t io_bytes(int writes)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return -1;
    char line[128];
    int64_t v = -1;
    const char *key = writes ? "wchar:" : "rchar:";
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, 6) == 0)
            v = strtoll(line + 6, NULL, 10);
    fclose(f);
    return v;
}

/* A log's line: what a bar shows, ended by a newline, never redrawn.  The line is formatted first
 * and written with one write(2): under mpirun every rank's stderr is forwarded through its own
 * pipe, and a line written in pieces lets another rank's line land in the middle of it. */
static void progress_line(Progress *p, uint64_t done, double dt, int final)
{
    double rate = dt > 0 ? done / dt : 0;
    double unit = (p->total ? p->total : done) >= 1000000000 ? 1e9 : 1e6;
    const char *un = unit > 1e6 ? "GB" : "MB";
    char line[512];
    int n;
    if (p->total)
        n = snprintf(line, sizeof line, "%s: %3d%%  %.2f / %.2f %s  %.1f MB/s", p->label,
                     (int)(100.0 * (double)done / (double)p->total), done / unit,
                     p->total / unit, un, rate / 1e6);
    else
        n = snprintf(line, sizeof line, "%s: %.2f %s  %.1f MB/s", p->label, done / unit, un,
                     rate / 1e6);
    if (n < 0 || (size_t)n >= sizeof line)
        n = (int)sizeof line - 40; /* a label too long: cut it, keep the line's end */
    n += snprintf(line + n, sizeof line - (size_t)n,
                  final == 2 ? ", done in %.1f s\n" : final ? ", stopped after %.1f s\n"
                                                          : "  (%.0f s)\n", dt);
    fflush(stderr);
    for (size_t off = 0; off < (size_t)n;) {
        ssize_t w = write(STDERR_FILENO, line + off, (size_t)n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    p->lines++;
}

/* final: 1 the last line, 2 the last line of completed work (the total reached). */
static void progress_draw(Progress *p, int final)
{
    int64_t now = io_bytes(p->writes);
    uint64_t done = now > 0 && (uint64_t)now > p->base ? (uint64_t)now - p->base : 0;
    if (p->total && (done > p->total || final == 2))
        done = p->total;
    double dt = time_now() - p->t0;
    if (p->log) {
        if (final ? p->lines > 0 || p->every == 0 : dt >= p->next) {
            progress_line(p, done, dt, final);
            while (p->next <= dt)
                p->next += p->every > 0 ? p->every : 1e9;
        }
        return;
    }
    double rate = dt > 0 ? done / dt : 0;
    char bar[32] = "";
    if (p->total) {
        int fill = (int)(20.0 * (double)done / (double)p->total);
        for (int i = 0; i < 20; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[20] = '\0';
        /* GB from a gigabyte on, else MB */
        double unit = p->total >= 1000000000 ? 1e9 : 1e6;
        fprintf(stderr, "\r%s: [%s] %3d%%  %6.2f / %.2f %s  %6.1f MB/s%s", p->label, bar,
                (int)(100.0 * (double)done / (double)p->total), done / unit, p->total / unit,
                unit > 1e6 ? "GB" : "MB", rate / 1e6, final ? "\n" : "  ");
    } else {
        double unit = done >= 1000000000 ? 1e9 : 1e6;
        fprintf(stderr, "\r%s: %6.2f %s  %6.1f MB/s%s", p->label, done / unit,
                unit > 1e6 ? "GB" : "MB", rate / 1e6, final ? "\n" : "  ");
    }
    fflush(stderr);
}

static void *progress_main(void *arg)
{
    Progress *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (!p->stop)
            progress_draw(p, 0);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* A log's interval: HEADSPLIT_PROGRESS_EVERY seconds (0: every tick), else 5; negative or
 * "off": no lines. */
static double log_every(void)
{
    const char *v = getenv("HEADSPLIT_PROGRESS_EVERY");
    if (!v || !*v)
        return 5.0;
    char *end;
    double s = strtod(v, &end);
    return end == v || *end ? -1 : s;
}

Progress *progress_start(const char *label, uint64_t total, int writes)
{
    int log = !isatty(STDERR_FILENO);
    double every = log ? log_every() : 0;
    if (every < 0)
        return NULL;
    int64_t base = io_bytes(writes);
    if (base < 0)
        return NULL;
    Progress *p = xcalloc(1, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    p->total = total;
    p->writes = writes;
    p->log = log;
    p->every = every;
    p->next = every;
    p->base = (uint64_t)base;
    p->t0 = time_now();
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->tid, NULL, progress_main, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void progress_stop(Progress *p, int complete)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->tid, NULL);
    progress_draw(p, complete ? 2 : 1);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
