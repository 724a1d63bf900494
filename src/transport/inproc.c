/* inproc.c: the in-process base transport (see transport.h): n ranks as n threads.
 *
 * A send copies the message into the receiver's mailbox and is complete at once.  A receive,
 * broadcast or gather is a list of expected messages (source, channel, tag); testing it takes
 * the first matching message of each from the mailbox, so messages of one source, channel
 * and tag arrive in the order they were sent (as MPI's do).  Point-to-point messages travel
 * on channel -1; a group's collectives on the group's number (groups are numbered in the
 * order they are created, which every rank does in the same order), the world's on 0. */
#include "transport.h"

#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Msg {
    struct Msg *next;
    int src, chan, tag;
    size_t len;
    unsigned char data[]; /* [len] */
} Msg;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when a message arrives */
    Msg *head, *tail;
} Mailbox;

struct InprocWorld {
    int n;
    Mailbox *box; /* [n] by receiver */
    pthread_mutex_t exclusive;
};

typedef struct {
    InprocWorld *w;
    int rank;
    int next_group; /* number of the next group created (0: the world) */
} Inproc;

/* One expected message. */
typedef struct {
    int src, chan, tag;
    unsigned char *dst;
    size_t cap;
    int done;
} Expect;

typedef struct {
    int n, left;
    Expect e[]; /* [n] */
} Op;

enum { CHAN_P2P = -1, CHAN_WORLD = 0, TAG_BCAST = 0, TAG_GATHER = 1, TAG_ALLGATHER = 2 };

static void post(Inproc *ip, int dst, int chan, int tag, const void *buf, size_t len)
{
    CHECK(dst >= 0 && dst < ip->w->n, "in-process transport: rank %d sends to rank %d of %d",
          ip->rank, dst, ip->w->n);
    Msg *m = xmalloc(sizeof *m + len + 1);
    m->next = NULL;
    m->src = ip->rank;
    m->chan = chan;
    m->tag = tag;
    m->len = len;
    if (len)
        memcpy(m->data, buf, len);
    Mailbox *b = &ip->w->box[dst];
    pthread_mutex_lock(&b->mu);
    if (b->tail)
        b->tail->next = m;
    else
        b->head = m;
    b->tail = m;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static Op *op_new(int n)
{
    Op *op = xcalloc(1, sizeof *op + (size_t)(n > 0 ? n : 1) * sizeof(Expect));
    op->n = n;
    return op;
}

static void expect(Op *op, int src, int chan, int tag, void *dst, size_t cap)
{
    Expect *e = &op->e[op->left++];
    *e = (Expect){src, chan, tag, dst, cap, 0};
}

/* Starts r on op (complete at once when it expects nothing). */
static void start(TransportReq *r, Op *op)
{
    memset(r, 0, sizeof *r);
    if (op->left == 0) {
        free(op);
        return;
    }
    r->h.p = op;
    r->active = 1;
}

static void done_at_once(TransportReq *r) { memset(r, 0, sizeof *r); }

static int chan_of(const TransportGroup *g) { return g ? (int)(intptr_t)g->impl : CHAN_WORLD; }

static int ip_group_create(void *self, TransportGroup *g)
{
    Inproc *ip = self;
    g->impl = (void *)(intptr_t)++ip->next_group;
    return 0;
}

static void ip_isend(void *self, const void *buf, size_t bytes, int dst, int tag,
                     TransportReq *r)
{
    post(self, dst, CHAN_P2P, tag, buf, bytes);
    done_at_once(r);
}

static void ip_irecv(void *self, void *buf, size_t bytes, int src, int tag, TransportReq *r)
{
    (void)self;
    Op *op = op_new(1);
    expect(op, src, CHAN_P2P, tag, buf, bytes);
    start(r, op);
}

static void ip_ibcast(void *self, TransportGroup *g, void *buf, size_t bytes, TransportReq *r)
{
    Inproc *ip = self;
    const int n = g ? g->n : ip->w->n, me = g ? g->me : ip->rank;
    const int root = g ? g->members[0] : 0;
    if (me == 0) {
        for (int i = 1; i < n; i++)
            post(ip, g ? g->members[i] : i, chan_of(g), TAG_BCAST, buf, bytes);
        done_at_once(r);
        return;
    }
    Op *op = op_new(1);
    expect(op, root, chan_of(g), TAG_BCAST, buf, bytes);
    start(r, op);
}

static void ip_igatherv(void *self, TransportGroup *g, const void *sbuf, size_t bytes,
                        void *rbuf, const int *counts, const int *displs, TransportReq *r)
{
    Inproc *ip = self;
    if (g->me != 0) {
        post(ip, g->members[0], chan_of(g), TAG_GATHER, sbuf, bytes);
        done_at_once(r);
        return;
    }
    unsigned char *out = rbuf;
    if (bytes)
        memcpy(out + displs[0], sbuf, bytes);
    Op *op = op_new(g->n - 1);
    for (int m = 1; m < g->n; m++)
        expect(op, g->members[m], chan_of(g), TAG_GATHER, out + displs[m], (size_t)counts[m]);
    start(r, op);
}

static void ip_iallgather(void *self, const void *sbuf, size_t bytes, void *rbuf,
                          TransportReq *r)
{
    Inproc *ip = self;
    unsigned char *out = rbuf;
    const int n = ip->w->n;
    for (int d = 0; d < n; d++)
        if (d != ip->rank)
            post(ip, d, CHAN_WORLD, TAG_ALLGATHER, sbuf, bytes);
    memcpy(out + (size_t)ip->rank * bytes, sbuf, bytes);
    Op *op = op_new(n - 1);
    for (int s = 0; s < n; s++)
        if (s != ip->rank)
            expect(op, s, CHAN_WORLD, TAG_ALLGATHER, out + (size_t)s * bytes, bytes);
    start(r, op);
}

/* Takes the first message matching e out of the mailbox (lock held); 1 if one was there. */
static int take(Mailbox *b, Expect *e, int rank)
{
    for (Msg **pp = &b->head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        Msg *m = *pp;
        if (m->src != e->src || m->chan != e->chan || m->tag != e->tag)
            continue;
        CHECK(m->len <= e->cap, "in-process transport: rank %d got %zu bytes from rank %d "
              "where %zu fit", rank, m->len, m->src, e->cap);
        if (m->len)
            memcpy(e->dst, m->data, m->len);
        *pp = m->next;
        if (b->tail == m)
            b->tail = prev;
        free(m);
        e->done = 1;
        return 1;
    }
    return 0;
}

static int ip_test(void *self, TransportReq *r)
{
    Inproc *ip = self;
    Op *op = r->h.p;
    Mailbox *b = &ip->w->box[ip->rank];
    pthread_mutex_lock(&b->mu);
    for (int pass = 0; pass < 2 && op->left > 0; pass++) {
        for (int i = 0; i < op->n; i++)
            if (!op->e[i].done && take(b, &op->e[i], ip->rank))
                op->left--;
        if (op->left > 0 && pass == 0) {
            /* Not there yet: sleep until a message arrives, 50 us at most (the front's
             * back-off and deadlines stay in charge). */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 50000;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&b->cv, &b->mu, &until);
        }
    }
    pthread_mutex_unlock(&b->mu);
    if (op->left > 0)
        return 0;
    free(op);
    memset(r, 0, sizeof *r);
    return 1;
}

static void ip_exclusive(void *self, int on)
{
    Inproc *ip = self;
    if (on)
        pthread_mutex_lock(&ip->w->exclusive);
    else
        pthread_mutex_unlock(&ip->w->exclusive);
}

static const TransportOps inproc_ops = {
    .name = "inproc",
    .group_create = ip_group_create,
    .isend = ip_isend,
    .irecv = ip_irecv,
    .ibcast = ip_ibcast,
    .igatherv = ip_igatherv,
    .iallgather = ip_iallgather,
    .test = ip_test,
    .exclusive = ip_exclusive,
    .finalize = free,
};

InprocWorld *transport_inproc_world(int n)
{
    InprocWorld *w = xcalloc(1, sizeof *w);
    w->n = n;
    w->box = xcalloc((size_t)n, sizeof(Mailbox));
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&w->box[i].mu, NULL);
        pthread_cond_init(&w->box[i].cv, NULL);
    }
    pthread_mutex_init(&w->exclusive, NULL);
    return w;
}

void transport_inproc_world_free(InprocWorld *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n; i++) {
        for (Msg *m = w->box[i].head, *next; m; m = next) {
            next = m->next;
            free(m);
        }
        pthread_mutex_destroy(&w->box[i].mu);
        pthread_cond_destroy(&w->box[i].cv);
    }
    pthread_mutex_destroy(&w->exclusive);
    free(w->box);
    free(w);
}

void transport_inproc_init(Transport *t, InprocWorld *w, int rank)
{
    Inproc *ip = xcalloc(1, sizeof *ip);
    ip->w = w;
    ip->rank = rank;
    transport_init(t, rank, w->n, &inproc_ops, ip);
}
