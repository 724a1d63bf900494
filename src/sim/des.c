/* des.c: the discrete-event core.  A token is a task graph of compute ops (on a device's one
 * compute unit, first come first served), messages (the sender's uplink, or the one shared
 * radio channel, for bytes/bandwidth; then latency plus jitter; the receiver's downlink takes
 * one message at a time) and joins.  Events are kept in a binary heap ordered by (time,
 * scheduling sequence), so the same inputs and seed give the same event trace, byte for byte. */
#include "sim_internal.h"

#include "netmodel.h"

#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { EV_READY = 0, EV_DONE = 1, EV_TXDONE = 2 };

void des_init(SimDes *d, const Cluster *cl, uint64_t *jitter_rng, FILE *trace)
{
    memset(d, 0, sizeof *d);
    d->cl = cl;
    d->n_res = 2 * cl->n + 1;
    d->q_head = xmalloc((size_t)d->n_res * sizeof(int));
    d->q_tail = xmalloc((size_t)d->n_res * sizeof(int));
    d->busy = xcalloc((size_t)d->n_res, 1);
    d->rx_free = xcalloc((size_t)cl->n, sizeof(double));
    d->jitter_rng = jitter_rng;
    d->trace = trace;
    d->cap_ops = 256;
    d->ops = xmalloc((size_t)d->cap_ops * sizeof(DesOp));
    d->cap_edges = 512;
    d->edges = xmalloc((size_t)d->cap_edges * sizeof(DesEdge));
    d->cap_heap = 256;
    d->heap = xmalloc((size_t)d->cap_heap * sizeof(DesEvent));
    des_reset(d);
}

void des_free(SimDes *d)
{
    if (!d)
        return;
    free(d->q_head);
    free(d->q_tail);
    free(d->busy);
    free(d->rx_free);
    free(d->ops);
    free(d->edges);
    free(d->heap);
    memset(d, 0, sizeof *d);
}

void des_reset(SimDes *d)
{
    d->n_ops = d->n_edges = d->n_heap = 0;
    for (int r = 0; r < d->n_res; r++)
        d->q_head[r] = d->q_tail[r] = -1;
    memset(d->busy, 0, (size_t)d->n_res);
    for (int r = 0; r < d->cl->n; r++)
        d->rx_free[r] = 0;
}

static int add_op(SimDes *d, DesKind kind, SimTag tag, int layer, int src, int dst,
                  double amount)
{
    if (d->n_ops == d->cap_ops) {
        d->cap_ops *= 2;
        d->ops = xrealloc(d->ops, (size_t)d->cap_ops * sizeof(DesOp));
    }
    DesOp *o = &d->ops[d->n_ops];
    *o = (DesOp){(unsigned char)kind, (unsigned char)tag, layer, src, dst, amount, 0, -1, -1,
                 -1, 0.0};
    return d->n_ops++;
}

int des_compute(SimDes *d, SimTag tag, int layer, int rank, double seconds)
{
    return add_op(d, DES_COMPUTE, tag, layer, rank, rank, seconds);
}

int des_msg(SimDes *d, SimTag tag, int layer, int src, int dst, double bytes)
{
    return add_op(d, DES_MSG, tag, layer, src, dst, bytes);
}

int des_join(SimDes *d, int layer) { return add_op(d, DES_JOIN, SIM_TAG_JOIN, layer, 0, 0, 0); }

void des_dep(SimDes *d, int before, int after)
{
    if (before < 0 || after < 0)
        return;
    if (d->n_edges == d->cap_edges) {
        d->cap_edges *= 2;
        d->edges = xrealloc(d->edges, (size_t)d->cap_edges * sizeof(DesEdge));
    }
    int e = d->n_edges++;
    d->edges[e] = (DesEdge){after, -1};
    DesOp *b = &d->ops[before];
    if (b->succ_tail < 0)
        b->succ_head = e;
    else
        d->edges[b->succ_tail].next = e;
    b->succ_tail = e;
    d->ops[after].deps++;
}

double des_jitter(uint64_t *state, double s)
{
    if (s <= 0)
        return 0;
    double u1 = ((double)(rng_next(state) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(rng_next(state) >> 11) / 9007199254740992.0;
    return fabs(s * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static int ev_less(const DesEvent *a, const DesEvent *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void push(SimDes *d, double t, int type, int op)
{
    if (d->n_heap == d->cap_heap) {
        d->cap_heap *= 2;
        d->heap = xrealloc(d->heap, (size_t)d->cap_heap * sizeof(DesEvent));
    }
    int i = d->n_heap++;
    DesEvent ev = {t, d->seq++, type, op};
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!ev_less(&ev, &d->heap[p]))
            break;
        d->heap[i] = d->heap[p];
        i = p;
    }
    d->heap[i] = ev;
}

static DesEvent pop(SimDes *d)
{
    DesEvent top = d->heap[0], last = d->heap[--d->n_heap];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const DesEvent *best = &last;
        if (l < d->n_heap && ev_less(&d->heap[l], best)) {
            m = l;
            best = &d->heap[l];
        }
        if (r < d->n_heap && ev_less(&d->heap[r], best))
            m = r;
        if (m == i)
            break;
        d->heap[i] = d->heap[m];
        i = m;
    }
    if (d->n_heap > 0)
        d->heap[i] = last;
    return top;
}

static const NetLink *link_of(const SimDes *d, int a, int b)
{
    return cluster_link(d->cl, a, b);
}

/* The resource an op occupies; -1: none (messages on ideal links). */
static int resource_of(const SimDes *d, const DesOp *o)
{
    if (o->kind == DES_COMPUTE)
        return 2 * o->src;
    const Medium m = link_of(d, o->src, o->dst)->medium;
    if (m == MEDIUM_IDEAL)
        return -1;
    return m == MEDIUM_SHARED ? d->n_res - 1 : 2 * o->src + 1;
}

static void trace_op(const SimDes *d, const char *what, int op)
{
    if (!d->trace)
        return;
    const DesOp *o = &d->ops[op];
    if (o->kind == DES_MSG)
        fprintf(d->trace, "%.9f %s %s L%d %d>%d %.0f\n", d->now, what, sim_tag_name(o->tag),
                o->layer, o->src, o->dst, o->amount);
    else if (o->kind == DES_COMPUTE)
        fprintf(d->trace, "%.9f %s %s L%d r%d %.9f\n", d->now, what, sim_tag_name(o->tag),
                o->layer, o->src, o->amount);
}

/* Seconds a message occupies its resource (netmodel.h): bytes over bandwidth, and on the
 * shared medium plus the per-frame overhead, twice through an access point. */
static double tx_s(const SimDes *d, const DesOp *o)
{
    return net_airtime_s(link_of(d, o->src, o->dst), o->amount);
}

/* Starts the first waiting op of resource r if it is idle. */
static void start_next(SimDes *d, int r)
{
    if (d->busy[r] || d->q_head[r] < 0)
        return;
    int op = d->q_head[r];
    DesOp *o = &d->ops[op];
    d->q_head[r] = o->qnext;
    if (d->q_head[r] < 0)
        d->q_tail[r] = -1;
    d->busy[r] = 1;
    trace_op(d, "start", op);
    if (o->kind == DES_COMPUTE)
        push(d, d->now + o->amount, EV_DONE, op);
    else
        push(d, d->now + tx_s(d, o), EV_TXDONE, op);
}

static void on_ready(SimDes *d, int op)
{
    DesOp *o = &d->ops[op];
    if (o->kind == DES_JOIN || (o->kind == DES_MSG && o->src == o->dst) ||
        (o->kind == DES_COMPUTE && o->amount <= 0)) {
        push(d, d->now, EV_DONE, op);
        return;
    }
    int r = resource_of(d, o);
    if (r < 0) {
        trace_op(d, "start", op);
        push(d, d->now + o->amount / link_of(d, o->src, o->dst)->bw_Bps, EV_TXDONE, op);
        return;
    }
    o->qnext = -1;
    if (d->q_tail[r] < 0)
        d->q_head[r] = op;
    else
        d->ops[d->q_tail[r]].qnext = op;
    d->q_tail[r] = op;
    start_next(d, r);
}

static void on_txdone(SimDes *d, int op)
{
    DesOp *o = &d->ops[op];
    int r = resource_of(d, o);
    if (r >= 0) {
        d->busy[r] = 0;
        start_next(d, r);
    }
    const NetLink *lk = link_of(d, o->src, o->dst);
    double delay = net_latency_s(lk);
    if (d->jitter_rng && lk->jitter_s > 0) {
        if (d->cl->jitter == JITTER_UNIFORM) {
            double u = (double)(rng_next(d->jitter_rng) >> 11) / 9007199254740992.0;
            delay += lk->jitter_s * (u - 0.5);
            delay = delay > 0 ? delay : 0;
        } else {
            delay += des_jitter(d->jitter_rng, lk->jitter_s);
        }
    }
    double arrive = d->now + delay;
    if (lk->medium == MEDIUM_SWITCHED) {
        /* The receiver's downlink takes the bytes of one message at a time. */
        double rx = d->rx_free[o->dst] + o->amount / lk->bw_Bps;
        if (rx > arrive)
            arrive = rx;
        d->rx_free[o->dst] = arrive;
    }
    push(d, arrive, EV_DONE, op);
}

static void on_done(SimDes *d, int op, SimResult *acc)
{
    DesOp *o = &d->ops[op];
    o->t_end = d->now;
    if (o->kind == DES_COMPUTE && o->amount > 0) {
        d->busy[resource_of(d, o)] = 0;
        start_next(d, resource_of(d, o));
    }
    if (o->kind != DES_JOIN && !(o->kind == DES_MSG && o->src == o->dst))
        trace_op(d, "end", op);
    if (acc && o->kind != DES_JOIN) {
        acc->ops[o->tag]++;
        if (o->kind == DES_MSG && o->src != o->dst) {
            acc->bytes_sent += o->amount;
            acc->messages += 1;
            acc->busy_s[o->tag] += o->amount / link_of(d, o->src, o->dst)->bw_Bps;
        } else if (o->kind == DES_COMPUTE) {
            acc->busy_s[o->tag] += o->amount;
        }
    }
    for (int e = o->succ_head; e >= 0; e = d->edges[e].next)
        if (--d->ops[d->edges[e].to].deps == 0)
            push(d, d->now, EV_READY, d->edges[e].to);
}

double des_run(SimDes *d, double t0, SimResult *acc)
{
    d->now = t0;
    d->n_heap = 0;
    for (int r = 0; r < d->cl->n; r++)
        if (d->rx_free[r] < t0)
            d->rx_free[r] = t0;
    for (int i = 0; i < d->n_ops; i++)
        if (d->ops[i].deps == 0)
            push(d, t0, EV_READY, i);
    double end = t0;
    int done = 0;
    while (d->n_heap > 0) {
        DesEvent ev = pop(d);
        d->now = ev.t;
        if (ev.type == EV_READY) {
            on_ready(d, ev.op);
        } else if (ev.type == EV_TXDONE) {
            on_txdone(d, ev.op);
        } else {
            on_done(d, ev.op, acc);
            done++;
            if (d->now > end)
                end = d->now;
        }
    }
    CHECK(done == d->n_ops, "simulator: %d of %d operations never ran (a dependency cycle)",
          d->n_ops - done, d->n_ops);
    return end;
}

/* The event kinds' names, for traces and the results' JSON. */
const char *sim_tag_name(SimTag t)
{
    static const char *names[SIM_TAG_COUNT] = {
        "embed", "head", "attn", "spec_attn", "reexec", "proj", "ffn", "bcast", "spec_bcast",
        "gather", "z", "out", "exchange", "kv_move", "reload", "join"};
    return (unsigned)t < SIM_TAG_COUNT ? names[t] : "?";
}
