/* layers.c: the layers that stack on a base transport (see transport.h): link emulation,
 * compute dilation (device emulation) and fault / stall injection for tests. */
#include "transport.h"

#include "netmodel.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- Link emulation (the network model of netmodel.h).  A message from a to b counts as
 * delivered one-way latency (half the RTT, spread uniformly by the jitter) after its
 * transmission ends.  On a switched link the transmission is the link's own: it ends bytes /
 * bandwidth after the send.  On a shared medium every rank's transmissions take one channel
 * in turn: a reservation starts at max(send time, channel free), lasts the airtime (bytes /
 * bandwidth + per-frame overhead, doubled through an access point) and advances the
 * channel's schedule of transmissions.  The channel lives in a page of shared memory that
 * rank 0 creates under /dev/shm and every rank maps (ranks share a host, so CLOCK_MONOTONIC
 * send times are comparable); rank 0 unlinks it as soon as every rank has mapped it, so
 * nothing is left behind at exit or abort.  A transmission takes the first gap of the
 * schedule at or after its send time that is long enough (its sender transmits as soon as
 * the channel is free, whether or not the receiver is listening yet): the receiver books
 * it when it takes delivery, which may be long after the send when the receiver was busy,
 * so the schedule keeps the recent transmissions, not just the time the channel is next
 * free (which would queue a message taken late behind every one sent after it).  All
 * shared links of a run share the one channel. */
enum { CH_SLOTS = 512 };
typedef struct {
    _Atomic int lock;
    int n;                 /* transmissions booked, sorted by start, not overlapping */
    uint64_t reservations;
    double start[CH_SLOTS], end[CH_SLOTS];
} Channel;

typedef struct {
    NetLink *links; /* [size*size], links[src*size+dst] */
    uint64_t rng;
    Channel *ch;    /* the shared channel, NULL when no link is shared */
} Emulation;

/* Books `air` seconds of the channel in the first gap at or after ready; returns the end of
 * the transmission.  When the schedule is full its oldest transmission is forgotten. */
double transport_channel_book(void *channel, double ready, double air)
{
    Channel *ch = channel;
    int expect = 0;
    while (!atomic_compare_exchange_weak(&ch->lock, &expect, 1)) {
        expect = 0;
        sched_yield();
    }
    double t = ready;
    int i = 0;
    for (; i < ch->n; i++) {
        if (ch->end[i] <= t)
            continue;
        if (ch->start[i] >= t + air)
            break; /* fits before transmission i */
        t = ch->end[i];
    }
    if (ch->n == CH_SLOTS) { /* forget the oldest */
        memmove(ch->start, ch->start + 1, (CH_SLOTS - 1) * sizeof(double));
        memmove(ch->end, ch->end + 1, (CH_SLOTS - 1) * sizeof(double));
        ch->n--;
        i = i > 0 ? i - 1 : 0;
    }
    memmove(ch->start + i + 1, ch->start + i, (size_t)(ch->n - i) * sizeof(double));
    memmove(ch->end + i + 1, ch->end + i, (size_t)(ch->n - i) * sizeof(double));
    ch->start[i] = t;
    ch->end[i] = t + air;
    ch->n++;
    ch->reservations++;
    atomic_store(&ch->lock, 0);
    return t + air;
}

size_t transport_channel_size(void) { return sizeof(Channel); }

/* Collective: rank 0 creates the channel's page, every rank maps it, rank 0 unlinks it. */
static Channel *channel_attach(Transport *t)
{
    char name[160] = "", err[400] = "";
    int fd = -1;
    if (t->rank == 0) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(name, sizeof name, "%s/headsplit-channel-%ld-XXXXXX", dir, (long)getpid());
        fd = mkstemp(name);
        if (fd < 0 || ftruncate(fd, (off_t)sizeof(Channel)) != 0) {
            snprintf(err, sizeof err, "emulation: cannot create the shared channel %s: %s",
                     name, strerror(errno));
            if (fd >= 0) {
                close(fd);
                unlink(name);
                fd = -1;
            }
            name[0] = 0;
        }
    }
    transport_bcast_all(t, name, sizeof name);
    if (t->rank != 0) {
        if (!name[0])
            snprintf(err, sizeof err, "emulation: rank 0 has no shared channel");
        else if ((fd = open(name, O_RDWR)) < 0)
            snprintf(err, sizeof err, "emulation: cannot open the shared channel %s: %s "
                     "(emulated ranks must share a host)", name, strerror(errno));
    }
    Channel *ch = NULL;
    if (fd >= 0) {
        void *p = mmap(NULL, sizeof(Channel), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            snprintf(err, sizeof err, "emulation: cannot map the shared channel %s: %s", name,
                     strerror(errno));
        else
            ch = p;
        close(fd);
    }
    int bad = transport_agree_errors(t, err[0] ? err : NULL);
    if (t->rank == 0 && name[0])
        unlink(name);
    CHECK(!bad, "emulation: no shared channel on every rank (see rank 0's message)");
    return ch;
}

static int emu_deliver(void *self, Transport *t, const WireHdr *h, size_t bytes,
                       double *target)
{
    Emulation *em = self;
    const int src = h->src;
    if (src < 0 || src >= t->size || src == t->rank)
        return 0;
    const NetLink *l = &em->links[(size_t)src * (size_t)t->size + (size_t)t->rank];
    double j = l->jitter_s * (rng_float(&em->rng) - 0.5);
    double d = 0.5 * l->rtt_s + j;
    double air = net_airtime_s(l, (double)bytes);
    if (em->ch && net_is_shared(l))
        air = transport_channel_book(em->ch, h->t_send, air) - h->t_send;
    *target += (d > 0 ? d : 0) + air;
    return 1;
}

static void emu_free(void *self)
{
    Emulation *em = self;
    if (em->ch)
        munmap(em->ch, sizeof(Channel));
    free(em->links);
    free(em);
}

static const TransportOps emulation_ops = {
    .name = "emulation", .deliver = emu_deliver, .free = emu_free};

void transport_push_emulation(Transport *t, const NetLink *links, uint64_t seed)
{
    size_t n = (size_t)t->size * (size_t)t->size;
    Emulation *em = xcalloc(1, sizeof *em);
    em->links = xmalloc(n * sizeof(NetLink));
    memcpy(em->links, links, n * sizeof(NetLink));
    em->rng = seed * 7919u + (uint64_t)t->rank;
    int shared = 0;
    for (size_t i = 0; i < n; i++)
        shared |= i / (size_t)t->size != i % (size_t)t->size && net_is_shared(&links[i]);
    if (shared && t->size > 1)
        em->ch = channel_attach(t);
    t->emulated = em->links;
    transport_push(t, &emulation_ops, em);
}

/* ---- Compute dilation: from transport_compute(t, 1) on, every stretch of work between two
 * communication points (the end of a wait or delivery, and the next wait or stamped send)
 * lasts `factor` times its CPU time of wall time; the rank sleeps out the difference.  A
 * sleeping rank uses no host core, so concurrent ranks do not slow each other as CPU quotas
 * on a shared host would (as long as the host has a core per factor-th of the ranks). */
typedef struct {
    double factor;
    int on;
    double cpu0, wall0; /* start of the current stretch of work */
    int cores, threads; /* the board model (transport_set_board) */
    double bw_Bps;
} Dilation;

double transport_dilation_owed(double factor, double cpu_s, double wall_s, int threads,
                               int cores, double bytes, double bw_Bps)
{
    int par = threads < cores ? threads : cores;
    if (par < 1)
        par = 1;
    double need = factor * cpu_s / par;
    if (bw_Bps > 0 && bytes / bw_Bps > need)
        need = bytes / bw_Bps;
    return need - wall_s;
}

static void sleep_for(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void dil_mark(void *self, Transport *t)
{
    Dilation *d = self;
    d->cpu0 = time_cpu();
    d->wall0 = time_now();
    t->streamed = 0;
}

/* Ends a stretch of work: sleeps until it has lasted factor x its CPU time. */
static void dil_pay(void *self, Transport *t)
{
    Dilation *d = self;
    if (!d->on)
        return;
    const double wall = time_now() - d->wall0;
    double owed = transport_dilation_owed(d->factor, time_cpu() - d->cpu0, wall, d->threads,
                                          d->cores, t->streamed, d->bw_Bps);
    t->board_s += wall + owed;
    if (owed > 0) {
        sleep_for(owed);
        t->dilated_s += owed;
    } else {
        t->host_over_s -= owed;
    }
}

static void dil_send(void *self, Transport *t)
{
    dil_pay(self, t);
    dil_mark(self, t);
}

static void dil_compute(void *self, Transport *t, int on)
{
    Dilation *d = self;
    if (on) {
        d->on = d->factor > 1;
        dil_mark(self, t);
    } else {
        dil_pay(self, t);
        d->on = 0;
    }
}

static const TransportOps dilation_ops = {
    .name = "dilation", .on_send = dil_send, .on_wait = dil_pay, .on_resume = dil_mark,
    .on_compute = dil_compute, .free = free};

void transport_push_dilation(Transport *t, double factor)
{
    Dilation *d = xcalloc(1, sizeof *d);
    d->factor = factor;
    d->cores = d->threads = 1;
    t->slowdown = factor > 1 ? factor : 1;
    transport_push(t, &dilation_ops, d);
}

void transport_set_board(Transport *t, int cores, double bw_Bps, int threads)
{
    for (int i = 0; i < t->n_layers; i++)
        if (t->layer[i].ops == &dilation_ops) {
            Dilation *d = t->layer[i].self;
            d->cores = cores > 1 ? cores : 1;
            d->threads = threads > 1 ? threads : 1;
            d->bw_Bps = bw_Bps > 0 ? bw_Bps : 0;
            return;
        }
    FATAL("transport_set_board before transport_push_dilation");
}

void transport_streamed(Transport *t, double bytes) { t->streamed += bytes; }

/* ---- Faults for tests: a stall (messages of one rank at one position arrive late, once) and
 * a kill (a rank ends itself with SIGKILL on the first message of a position). */
typedef struct {
    int stall_rank, stall_pos;
    double stall_s;
    int kill_rank, kill_pos;
} Faults;

static int fault_deliver(void *self, Transport *t, const WireHdr *h, size_t bytes,
                         double *target)
{
    Faults *f = self;
    (void)bytes;
    if (f->kill_rank == t->rank && h->pos >= f->kill_pos && h->cmd == WIRE_STEP) {
        fprintf(stderr, "headsplit: [rank %d] --inject-kill: killing myself at position %d\n",
                t->rank, h->pos);
        fflush(stderr);
        kill(getpid(), SIGKILL);
    }
    if (h->src < 0 || h->src >= t->size || h->src == t->rank)
        return 0;
    if (h->src == f->stall_rank && h->pos == f->stall_pos && h->cmd == WIRE_STEP) {
        f->stall_rank = -1; /* one stall per run */
        *target += f->stall_s;
        return f->stall_s != 0;
    }
    return 0;
}

static const TransportOps faults_ops = {.name = "faults", .deliver = fault_deliver, .free = free};

void transport_push_faults(Transport *t, int stall_rank, int stall_pos, double stall_s,
                           int kill_rank, int kill_pos)
{
    Faults *f = xcalloc(1, sizeof *f);
    *f = (Faults){stall_rank, stall_pos, stall_s, kill_rank, kill_pos};
    transport_push(t, &faults_ops, f);
}
