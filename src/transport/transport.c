/* transport.c: the front of every transport (see transport.h): dispatch to the base, the
 * layers' hooks, accounting, sleeping waits with deadlines, RTT measurement and agreement on
 * errors.  Nothing here knows MPI. */
#include "transport.h"

#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BASE(t) (&(t)->layer[0])
/* Calls hook h of every layer that has it, top of the stack first. */
#define HOOKS(t, h, ...)                                                                    \
    do {                                                                                    \
        for (int i_ = (t)->n_layers - 1; i_ >= 0; i_--)                                     \
            if ((t)->layer[i_].ops->h)                                                      \
                (t)->layer[i_].ops->h((t)->layer[i_].self, __VA_ARGS__);                    \
    } while (0)

void transport_init(Transport *t, int rank, int size, const TransportOps *base, void *self)
{
    memset(t, 0, sizeof *t);
    t->rank = rank;
    t->size = size;
    t->margin = 0.15;
    t->timeout_s = 10.0;
    t->max_retries = 20;
    t->slowdown = 1;
    t->links = xcalloc((size_t)size, sizeof(LinkStats));
    t->rtt_ms = xcalloc((size_t)size * (size_t)size, sizeof(double));
    t->rtt_p95_ms = xcalloc((size_t)size * (size_t)size, sizeof(double));
    t->layer[0].ops = base;
    t->layer[0].self = self;
    t->n_layers = 1;
}

void transport_push(Transport *t, const TransportOps *ops, void *self)
{
    CHECK(t->n_layers < TRANSPORT_MAX_LAYERS, "transport: more than %d layers",
          TRANSPORT_MAX_LAYERS);
    t->layer[t->n_layers].ops = ops;
    t->layer[t->n_layers].self = self;
    t->n_layers++;
}

void transport_finalize(Transport *t)
{
    /* A sleeping barrier first, so ranks that finish early do not spin in the base's end. */
    transport_barrier(t);
    for (int i = t->n_layers - 1; i >= 1; i--)
        if (t->layer[i].ops->free)
            t->layer[i].ops->free(t->layer[i].self);
    free(t->links);
    free(t->rtt_ms);
    free(t->rtt_p95_ms);
    if (BASE(t)->ops->finalize)
        BASE(t)->ops->finalize(BASE(t)->self);
    t->n_layers = 0;
}

TransportGroup *transport_group_create(Transport *t, const int *members, int n)
{
    TransportGroup tmp = {n, (int *)(uintptr_t)members, -1, NULL};
    for (int i = 0; i < n; i++)
        if (members[i] == t->rank)
            tmp.me = i;
    TransportGroup *g = NULL;
    if (tmp.me >= 0) {
        g = xcalloc(1, sizeof *g);
        *g = tmp;
        g->members = xmalloc((size_t)n * sizeof(int));
        memcpy(g->members, members, (size_t)n * sizeof(int));
    }
    /* Every rank takes part, member or not (MPI_Comm_create is collective). */
    CHECK(BASE(t)->ops->group_create(BASE(t)->self, g ? g : &tmp) == 0,
          "transport: cannot create a group of %d ranks", n);
    return g;
}

void transport_group_free(Transport *t, TransportGroup *g)
{
    if (!g)
        return;
    if (BASE(t)->ops->group_free)
        BASE(t)->ops->group_free(BASE(t)->self, g);
    free(g->members);
    free(g);
}

void transport_isend(Transport *t, const void *buf, size_t bytes, int dst, int tag,
                     TransportReq *r)
{
    BASE(t)->ops->isend(BASE(t)->self, buf, bytes, dst, tag, r);
    t->bytes_sent += bytes;
    t->msgs_sent++;
}

void transport_irecv(Transport *t, void *buf, size_t bytes, int src, int tag, TransportReq *r)
{
    BASE(t)->ops->irecv(BASE(t)->self, buf, bytes, src, tag, r);
}

void transport_ibcast(Transport *t, TransportGroup *g, void *buf, size_t bytes,
                      TransportReq *r)
{
    BASE(t)->ops->ibcast(BASE(t)->self, g, buf, bytes, r);
    if (g->me == 0) {
        t->bytes_sent += bytes * (uint64_t)(g->n - 1);
        t->msgs_sent += (uint64_t)(g->n - 1);
    }
}

void transport_igatherv(Transport *t, TransportGroup *g, const void *sbuf, size_t bytes,
                        void *rbuf, const int *counts, const int *displs, TransportReq *r)
{
    BASE(t)->ops->igatherv(BASE(t)->self, g, sbuf, bytes, rbuf, counts, displs, r);
    if (g->me != 0) {
        t->bytes_sent += bytes;
        t->msgs_sent++;
    }
}

/* Tests r until done or until the time `until` (0: forever); returns 1 when done. */
static int wait_until(Transport *t, TransportReq *r, double until)
{
    long sleep_ns = 2000;
    for (int spins = 0;; spins++) {
        if (!r->active || BASE(t)->ops->test(BASE(t)->self, r))
            return 1;
        if (until > 0 && time_now() >= until)
            return 0;
        if (t->wait_mode == WAIT_SPIN || spins < 16)
            continue;
        /* Bounded back-off: 2 us doubling to 200 us, well under one layer's work. */
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 200000)
            sleep_ns *= 2;
    }
}

void transport_wait(Transport *t, TransportReq *r)
{
    HOOKS(t, on_wait, t);
    double t0 = time_now();
    t->waits++;
    t->wait_t0 = t0;
    t->wait_limit_s = 0;
    wait_until(t, r, 0);
    t->wait_s += time_now() - t0;
    HOOKS(t, on_resume, t);
}

void transport_bcast_all(Transport *t, void *buf, size_t bytes)
{
    TransportReq r = {0};
    BASE(t)->ops->ibcast(BASE(t)->self, NULL, buf, bytes, &r);
    transport_wait(t, &r);
}

void transport_allgather(Transport *t, const void *sbuf, size_t bytes, void *rbuf)
{
    TransportReq r = {0};
    BASE(t)->ops->iallgather(BASE(t)->self, sbuf, bytes, rbuf, &r);
    transport_wait(t, &r);
}

void transport_barrier(Transport *t)
{
    char none = 0, *all = xmalloc((size_t)t->size);
    transport_allgather(t, &none, 1, all);
    free(all);
}

/* Ends the run: nothing came from peer for `waited` seconds (what, layer: the wait's site). */
static void stall_fatal(const Transport *t, int peer, double waited, const char *what,
                        int layer)
{
    FATAL("no message from rank %d for %.1f s (%s, layer %d, link %d->%d): the peer has "
          "failed or stalled (a peer whose pass takes longer, e.g. a large model's prompt on a "
          "slow board, needs a larger --timeout)", peer, waited, what ? what : "message", layer,
          peer, t->rank);
}

void transport_wait_link(Transport *t, TransportReq *r, int peer, const char *what, int layer,
                         double *ewma)
{
    HOOKS(t, on_wait, t);
    double t0 = time_now();
    t->waits++;
    double one_way = 0;
    if (peer >= 0 && peer < t->size)
        one_way = 0.5e-3 * t->rtt_p95_ms[(size_t)t->rank * (size_t)t->size + (size_t)peer];
    double slot = one_way * (1.0 + t->margin) + 2.0 * (ewma ? *ewma : 0) + 1e-3;
    double deadline = t0 + slot;
    const double limit = t->rank == 0 ? 1.25 * t->timeout_s + 0.5 : 1.1 * t->timeout_s + 0.2;
    t->wait_t0 = t0;
    t->wait_limit_s = t->timeout_s;
    t->wait_what = what;
    t->wait_layer = layer;
    int retries = 0;
    LinkStats *ls = peer >= 0 && peer < t->size ? &t->links[peer] : NULL;
    while (!wait_until(t, r, deadline < t0 + limit ? deadline : t0 + limit)) {
        double now = time_now();
        if (now - t0 >= limit)
            stall_fatal(t, peer, now - t0, what, layer);
        if (ls && retries == 0)
            ls->misses++;
        /* Waited for again: a fresh deadline, up to the retry limit, then only the timeout. */
        if (retries < t->max_retries) {
            retries++;
            if (ls)
                ls->retries++;
            deadline = now + slot;
        } else {
            deadline = t0 + limit;
        }
    }
    double w = time_now() - t0;
    if (ls && w > ls->max_wait_s)
        ls->max_wait_s = w;
    if (ewma)
        *ewma = *ewma == 0 ? w : 0.8 * *ewma + 0.2 * w;
    t->wait_s += w;
    HOOKS(t, on_resume, t);
}

void transport_stamp(Transport *t, WireHdr *h)
{
    HOOKS(t, on_send, t);
    h->magic = WIRE_MAGIC;
    h->src = (int16_t)t->rank;
    h->t_send = time_now();
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void transport_deliver(Transport *t, const WireHdr *h, size_t bytes)
{
    double target = h->t_send;
    int delayed = 0;
    for (int i = t->n_layers - 1; i >= 0; i--)
        if (t->layer[i].ops->deliver)
            delayed |= t->layer[i].ops->deliver(t->layer[i].self, t, h, bytes, &target);
    if (!delayed)
        return;
    /* The message is still in transit (emulated): past the wait's timeout it never came. */
    const double give_up = t->wait_limit_s > 0 ? t->wait_t0 + t->wait_limit_s : INFINITY;
    const int held = target > give_up;
    if (held)
        target = give_up;
    sleep_s(target - time_now());
    if (held)
        stall_fatal(t, h->src, time_now() - t->wait_t0, t->wait_what, t->wait_layer);
    /* noticed after it was due and after the wait began: the host's scheduling (a core
     * shared with other ranks, the poll's back-off, the sleep's overshoot), not the link */
    const double due = target > t->wait_t0 ? target : t->wait_t0, late = time_now() - due;
    if (late > 0)
        t->late_s += late;
    HOOKS(t, on_resume, t); /* the transit was waiting, not work */
}

void transport_compute(Transport *t, int on) { HOOKS(t, on_compute, t, on); }

void transport_exclusive(Transport *t, int on)
{
    if (BASE(t)->ops->exclusive)
        BASE(t)->ops->exclusive(BASE(t)->self, on);
}

/* The ping-pong of one pair, uncounted: n timed rounds after a warm-up round that also
 * waits until both ranks reached this pair.  i sends first; s receives i's times (ms). */
static void ping_pair(Transport *t, int i, int peer, int n, double *s)
{
    WireHdr h;
    memset(&h, 0, sizeof h);
    for (int k = -1; k < n; k++) {
        TransportReq r = {0};
        double t0 = time_now();
        if (t->rank == i) {
            h.cmd = WIRE_PING;
            transport_stamp(t, &h);
            BASE(t)->ops->isend(BASE(t)->self, &h, sizeof h, peer, WIRE_TAG_PING, &r);
            transport_wait(t, &r);
        }
        BASE(t)->ops->irecv(BASE(t)->self, &h, sizeof h, peer, WIRE_TAG_PING, &r);
        transport_wait(t, &r);
        transport_deliver(t, &h, sizeof h);
        if (t->rank != i) {
            transport_stamp(t, &h);
            BASE(t)->ops->isend(BASE(t)->self, &h, sizeof h, peer, WIRE_TAG_PING, &r);
            transport_wait(t, &r);
        }
        if (k >= 0)
            s[k] = (time_now() - t0) * 1e3;
    }
}

void transport_measure_rtt(Transport *t, int n)
{
    const size_t P = (size_t)t->size, PP = P * P;
    double *mine = xcalloc(2 * PP, sizeof(double)), *all = xmalloc(P * 2 * PP * sizeof(double));
    double *s = xmalloc((size_t)n * sizeof(double));
    for (size_t i = 0; i < P; i++)
        for (size_t j = i + 1; j < P; j++) {
            if ((size_t)t->rank != i && (size_t)t->rank != j)
                continue;
            ping_pair(t, (int)i, (size_t)t->rank == i ? (int)j : (int)i, n, s);
            if ((size_t)t->rank == i) {
                util_sort_doubles(s, (size_t)n);
                double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
                double q = s[(int)ceil(0.95 * n) - 1];
                mine[i * P + j] = mine[j * P + i] = m;
                mine[PP + i * P + j] = mine[PP + j * P + i] = q;
            }
        }
    /* Each pair is measured by one rank: the maximum over ranks is its value. */
    transport_allgather(t, mine, 2 * PP * sizeof(double), all);
    for (size_t k = 0; k < PP; k++) {
        double m = 0, q = 0;
        for (size_t r = 0; r < P; r++) {
            m = fmax(m, all[r * 2 * PP + k]);
            q = fmax(q, all[r * 2 * PP + PP + k]);
        }
        t->rtt_ms[k] = m;
        t->rtt_p95_ms[k] = q;
    }
    free(mine);
    free(all);
    free(s);
}

json_t *transport_rtt_json(const Transport *t)
{
    const int P = t->size;
    json_t *o = json_object(), *m = json_array(), *q = json_array();
    for (int i = 0; i < P; i++) {
        json_t *r = json_array(), *r2 = json_array();
        for (int j = 0; j < P; j++) {
            json_array_append_new(r, json_real(t->rtt_ms[(size_t)i * (size_t)P + (size_t)j]));
            json_array_append_new(r2,
                                  json_real(t->rtt_p95_ms[(size_t)i * (size_t)P + (size_t)j]));
        }
        json_array_append_new(m, r);
        json_array_append_new(q, r2);
    }
    json_object_set_new(o, "rtt_ms", m);
    json_object_set_new(o, "rtt_p95_ms", q);
    json_object_set_new(o, "deadline_margin", json_real(t->margin));
    return o;
}

void transport_print_rtt(const Transport *t, FILE *out)
{
    const int P = t->size;
    fprintf(out, "RTT (ms, median / p95; deadlines add %.0f%%):\n      ", t->margin * 100);
    for (int j = 0; j < P; j++)
        fprintf(out, "%13d", j);
    fputc('\n', out);
    for (int i = 0; i < P; i++) {
        fprintf(out, "%5d ", i);
        for (int j = 0; j < P; j++) {
            if (i == j)
                fprintf(out, "%13s", "-");
            else
                fprintf(out, "%6.2f/%6.2f", t->rtt_ms[(size_t)i * (size_t)P + (size_t)j],
                        t->rtt_p95_ms[(size_t)i * (size_t)P + (size_t)j]);
        }
        fputc('\n', out);
    }
}

#define ERR_LEN 512

int transport_agree_errors(Transport *t, const char *local_err)
{
    char mine[ERR_LEN] = {0};
    if (local_err)
        snprintf(mine, sizeof mine, "%s", local_err);
    char *all = xcalloc((size_t)t->size, ERR_LEN);
    transport_allgather(t, mine, ERR_LEN, all);
    int nfail = 0, first = -1;
    for (int r = 0; r < t->size; r++)
        if (all[(size_t)r * ERR_LEN]) {
            if (first < 0)
                first = r;
            nfail++;
        }
    if (first >= 0 && t->rank == 0) {
        fprintf(stderr, "headsplit: error: [rank %d] %s", first, all + (size_t)first * ERR_LEN);
        if (nfail > 1)
            fprintf(stderr, " (and %d more rank%s failed)", nfail - 1, nfail > 2 ? "s" : "");
        fputc('\n', stderr);
    }
    free(all);
    return first >= 0;
}
