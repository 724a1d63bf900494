/* flow.c: the engine's per-token communication and compute pattern (src/engine/) as a
 * task graph for the event core.  Every message carries the 32-byte WireHdr.  Who holds and
 * who consumes each input, the broadcast groups, the gather's message sizes, the SLICE
 * members and the speculation rule come from the plan's schedule (plan_schedule), the same
 * one the engine steps through.
 *  - Layer input: the ranks that hold it ("holders": the controller for layer 0, the FFN rank
 *    of a PIPE layer, every member of a SLICE layer) serve the ranks that consume it (head and
 *    projection ranks, or SLICE members).  When a consumer is not a holder, the root (the
 *    previous FFN rank, or the controller) broadcasts it to [root, other consumers sorted].
 *  - PIPE layer: each head rank runs its parts, an Igatherv sends [header | head outputs] to
 *    the projection rank, Z goes point-to-point to the FFN rank when that is another rank.
 *  - SLICE layer: each member runs its parts and their columns of the output projection,
 *    sends its partial sum to every other member, runs its FFN slice, and exchanges again
 *    (in the plan's pattern); --exchange exact: four all-gathers of whole values instead.
 *  - After the last layer the output is broadcast to the controller.
 *  - Speculation into layer l (transition l-1 -> l, projection and FFN of l-1 on one rank):
 *    that rank broadcasts Z on layer l's input communicator before running the FFN; every
 *    other consumer runs its attention on Z and sends its gather contribution at once; X'
 *    follows with the decision; on rejection the attention runs again on X' and a second
 *    gather follows.  The FFN rank itself knows the decision and computes after its FFN. */
#include "sim_internal.h"

#include "schedule.h"
#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

void flow_init(SimFlow *f, SimDes *d, const ModelConfig *c, const Cluster *cl, int max_parts)
{
    memset(f, 0, sizeof *f);
    f->d = d;
    f->c = c;
    f->cl = cl;
    f->exchange = EXCHANGE_ALL; /* flow_token sets the plan's */
    f->cap = 2 * (cl->n + 1) + max_parts + 8;
    int **arrays[] = {&f->members, &f->cons, &f->recv, &f->spec_recv, &f->ready, &f->g1,
                      &f->tmp};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        *arrays[i] = xmalloc((size_t)f->cap * sizeof(int));
    f->hold = xmalloc((size_t)cl->n * sizeof(int));
    f->got = xmalloc((size_t)cl->n * sizeof(int));
    f->got_z = xmalloc((size_t)cl->n * sizeof(int));
}

void flow_free(SimFlow *f)
{
    if (!f)
        return;
    free(f->members);
    free(f->cons);
    free(f->recv);
    free(f->spec_recv);
    free(f->ready);
    free(f->g1);
    free(f->tmp);
    free(f->hold);
    free(f->got);
    free(f->got_z);
    memset(f, 0, sizeof *f);
}

static int bcast_binomial(const Cluster *cl, int n)
{
    if (cl->bcast == BCAST_AUTO)
        return n > 4;
    return cl->bcast == BCAST_BINOMIAL;
}

void flow_bcast(SimFlow *f, SimTag tag, int layer, const int *members, int n, int dep,
                double bytes, int *recv)
{
    recv[0] = dep;
    if (!bcast_binomial(f->cl, n)) {
        /* Linear: the root sends to each member in communicator order; its uplink queues. */
        for (int i = 1; i < n; i++) {
            recv[i] = des_msg(f->d, tag, layer, members[0], members[i], bytes);
            des_dep(f->d, dep, recv[i]);
        }
        return;
    }
    /* Binomial tree as Open MPI's libnbc builds it: member v receives from v minus its
     * highest set bit and sends to v + 2^r for every 2^r > v, nearest first; creating the
     * messages in member order keeps each sender's uplink queue in that order. */
    for (int v = 1; v < n; v++) {
        int hb = 1;
        while (hb * 2 <= v)
            hb *= 2;
        recv[v] = des_msg(f->d, tag, layer, members[v - hb], members[v], bytes);
        des_dep(f->d, recv[v - hb], recv[v]);
    }
}

/* Delivers a layer's input (held per f->hold) to the schedule's consumers: fills f->got.
 * Returns the size of the broadcast (0: every consumer holds it already). */
static int flow_input(SimFlow *f, int l, const ScheduleLayer *sl, SimTag tag)
{
    if (sl->n_bcast == 0) {
        for (int i = 0; i < sl->n_consumers; i++)
            f->got[sl->consumers[i]] = f->hold[sl->consumers[i]];
        return 0;
    }
    flow_bcast(f, tag, l, sl->bcast, sl->n_bcast, f->hold[sl->producer], sim_msg_bytes(f->c),
               f->recv);
    for (int i = 0; i < sl->n_bcast; i++)
        f->got[sl->bcast[i]] = f->recv[i];
    return sl->n_bcast;
}

int flow_spec_eligible(const Plan *p, int l) { return schedule_spec_eligible(p, l); }

/* Query heads rank holds in the layer. */
static int heads_on(const LayerPlan *lp, int rank)
{
    int nq = 0;
    for (int k = 0; k < lp->n_parts; k++)
        if (lp->parts[k].rank == rank)
            nq += lp->parts[k].q1 - lp->parts[k].q0;
    return nq;
}

static double attn_time(const SimFlow *f, const LayerPlan *lp, int rank)
{
    double t = 0;
    for (int k = 0; k < lp->n_parts; k++)
        if (lp->parts[k].rank == rank)
            t += sim_cost_attn(f->c, f->cl, rank, lp->parts[k].q1 - lp->parts[k].q0, f->pos);
    return t;
}

/* Sends member m's gather contribution (made by op dep) to the projection op, or hands it
 * over locally from the projection rank (member 0). */
static void gather_to(SimFlow *f, int l, const ScheduleLayer *sl, int m, int dep, int proj)
{
    if (m == 0) {
        des_dep(f->d, dep, proj);
        return;
    }
    int g = des_msg(f->d, SIM_TAG_GATHER, l, sl->gather[m], sl->proj_rank,
                    (double)sl->g_counts[m]);
    des_dep(f->d, dep, g);
    des_dep(f->d, g, proj);
}

/* Index of rank in the gather group (-1: none). */
static int gather_index(const ScheduleLayer *sl, int rank)
{
    for (int m = 0; m < sl->n_gather; m++)
        if (sl->gather[m] == rank)
            return m;
    return -1;
}

/* A PIPE layer with input root root; spec into this layer (FLOW_SPEC_*) with the previous
 * projection op spec_dep.  Sets *proj_out; returns the FFN op. */
static int pipe_layer(SimFlow *f, const LayerPlan *lp, const ScheduleLayer *sl, int l,
                      int spec, int spec_dep, int *proj_out)
{
    SimDes *d = f->d;
    const int nc = sl->n_consumers;
    int nb = flow_input(f, l, sl, SIM_TAG_BCAST);
    for (int i = 0; i < nc; i++)
        f->got_z[sl->consumers[i]] = -2;
    if (spec != FLOW_SPEC_NONE && nb > 1) {
        flow_bcast(f, SIM_TAG_SPEC_BCAST, l, sl->bcast, nb, spec_dep, sim_msg_bytes(f->c),
                   f->spec_recv);
        for (int i = 1; i < nb; i++)
            f->got_z[sl->bcast[i]] = f->spec_recv[i];
    } else {
        spec = FLOW_SPEC_NONE;
    }
    int proj = des_compute(d, SIM_TAG_PROJ, l, lp->proj_rank,
                           sim_cost_proj(f->c, f->cl, lp->proj_rank));
    des_dep(d, f->got[lp->proj_rank], proj);
    for (int i = 0; i < nc; i++) {
        int r = sl->consumers[i], m = gather_index(sl, r);
        if (m < 0 || sl->g_floats[m] == 0)
            continue;
        double t = attn_time(f, lp, r);
        if (spec != FLOW_SPEC_NONE && f->got_z[r] != -2) {
            /* Attention on Z, its gather at once; again on X' if rejected. */
            int sa = des_compute(d, SIM_TAG_SPEC_ATTN, l, r, t);
            des_dep(d, f->got_z[r], sa);
            gather_to(f, l, sl, m, sa, proj);
            if (spec == FLOW_SPEC_REJECT) {
                int re = des_compute(d, SIM_TAG_REEXEC, l, r, t);
                des_dep(d, sa, re);
                des_dep(d, f->got[r], re);
                gather_to(f, l, sl, m, re, proj);
            }
        } else if (spec == FLOW_SPEC_REJECT) {
            /* The root knows: it sends the first gather round empty and computes on X'. */
            gather_to(f, l, sl, m, f->got[r], proj);
            int re = des_compute(d, SIM_TAG_REEXEC, l, r, t);
            des_dep(d, f->got[r], re);
            gather_to(f, l, sl, m, re, proj);
        } else {
            int a = des_compute(d, SIM_TAG_ATTN, l, r, t);
            des_dep(d, f->got[r], a);
            gather_to(f, l, sl, m, a, proj);
        }
    }
    int ffn_in = proj;
    if (lp->ffn_rank != lp->proj_rank) {
        ffn_in = des_msg(d, SIM_TAG_Z, l, lp->proj_rank, lp->ffn_rank, sim_msg_bytes(f->c));
        des_dep(d, proj, ffn_in);
    }
    int ffn = des_compute(d, SIM_TAG_FFN, l, lp->ffn_rank,
                          sim_cost_ffn(f->c, f->cl, lp->ffn_rank));
    des_dep(d, ffn_in, ffn);
    for (int r = 0; r < f->cl->n; r++)
        f->hold[r] = -2;
    f->hold[lp->ffn_rank] = ffn;
    *proj_out = proj;
    return ffn;
}

/* Exchange of partial sums among the members m[0..n) in the plan's pattern (as the engine's
 * src/engine/slice.c): member i's messages leave after op from[i]; to[i] gets the op after
 * which member i has the sum.  All-to-all: every partial to every other member.  Reduce: the
 * partials to m[0], the sum back.  RSAG: chunk j of every partial to m[j], m[j]'s chunk of
 * the sum to every other member. */
static void exchange(SimFlow *f, int l, const int *m, int n, const int *from, int *to)
{
    SimDes *d = f->d;
    const double full = sim_msg_bytes(f->c);
    for (int j = 0; j < n; j++) {
        to[j] = des_join(d, l);
        des_dep(d, from[j], to[j]);
    }
    if (n > 1 && f->exchange == EXCHANGE_REDUCE) {
        int root = des_join(d, l);
        des_dep(d, from[0], root);
        for (int i = 1; i < n; i++) {
            int x = des_msg(d, SIM_TAG_EXCHANGE, l, m[i], m[0], full);
            des_dep(d, from[i], x);
            des_dep(d, x, root);
        }
        des_dep(d, root, to[0]);
        for (int j = 1; j < n; j++) {
            int x = des_msg(d, SIM_TAG_EXCHANGE, l, m[0], m[j], full);
            des_dep(d, root, x);
            des_dep(d, x, to[j]);
        }
        return;
    }
    if (n > 1 && f->exchange == EXCHANGE_RSAG) {
        const double chunk = (double)sizeof(WireHdr) + (full - (double)sizeof(WireHdr)) / n;
        for (int j = 0; j < n; j++) { /* owner j adds chunk j, then sends it to all */
            int own = des_join(d, l);
            des_dep(d, from[j], own);
            for (int i = 0; i < n; i++)
                if (i != j) {
                    int x = des_msg(d, SIM_TAG_EXCHANGE, l, m[i], m[j], chunk);
                    des_dep(d, from[i], x);
                    des_dep(d, x, own);
                }
            des_dep(d, own, to[j]);
            for (int i = 0; i < n; i++)
                if (i != j) {
                    int y = des_msg(d, SIM_TAG_EXCHANGE, l, m[j], m[i], chunk);
                    des_dep(d, own, y);
                    des_dep(d, y, to[i]);
                }
        }
        return;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            int x = des_msg(d, SIM_TAG_EXCHANGE, l, m[i], m[j], full);
            des_dep(d, from[i], x);
            des_dep(d, x, to[j]);
        }
}

/* An all-gather among the members m[0..n): member i's bytes[i] (header included) leave after
 * op from[i] for every other member; to[j] gets the op after which member j holds them all. */
static void allgather(SimFlow *f, int l, const int *m, int n, const int *from,
                      const double *bytes, int *to)
{
    SimDes *d = f->d;
    for (int j = 0; j < n; j++) {
        to[j] = des_join(d, l);
        des_dep(d, from[j], to[j]);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            int x = des_msg(d, SIM_TAG_EXCHANGE, l, m[i], m[j], bytes[i]);
            des_dep(d, from[i], x);
            des_dep(d, x, to[j]);
        }
}

/* --exchange exact (src/engine/slice_exact.c): heads, all-gather of their outputs, rows
 * [d0, d1) of wo, all-gather of Z, the FFN slice's gate and up rows, all-gather of the
 * hidden slices, rows [d0, d1) of w_down, all-gather of X'. */
static void slice_exact_layer(SimFlow *f, const LayerPlan *lp, const ScheduleLayer *sl, int l)
{
    SimDes *d = f->d;
    const ModelConfig *c = f->c;
    const int n = sl->n_members;
    const double hdr = (double)sizeof(WireHdr), fl = (double)sizeof(float);
    int *a = f->ready, *g = f->g1, *x = f->tmp;
    int *rows = xmalloc(2 * (size_t)n * sizeof(int)), *cols = rows + n;
    double *bytes = xmalloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) {
        int r = sl->members[i], d0 = 0, d1 = 0;
        plan_exact_rows(f->plan, c, l, r, &d0, &d1);
        rows[i] = d1 - d0;
        cols[i] = 0;
        for (int k = 0; k < lp->n_slices; k++)
            if (lp->slices[k].rank == r)
                cols[i] += lp->slices[k].f1 - lp->slices[k].f0;
    }
    flow_input(f, l, sl, SIM_TAG_BCAST);
    /* 1: heads, their outputs to every member */
    for (int i = 0; i < n; i++) {
        int r = sl->members[i];
        a[i] = des_compute(d, SIM_TAG_ATTN, l, r, attn_time(f, lp, r));
        des_dep(d, f->got[r], a[i]);
        bytes[i] = hdr + heads_on(lp, r) * c->head_dim * fl;
    }
    allgather(f, l, sl->members, n, a, bytes, g);
    /* 2: rows of wo (whole rows of qd values), Z's rows to every member */
    for (int i = 0; i < n; i++) {
        const ClusterDevice *dv = &f->cl->dev[sl->members[i]];
        double t = (double)config_proj_bytes(c) * rows[i] / c->dim / dv->speed_Bps +
                   dv->op_overhead_s;
        a[i] = des_compute(d, SIM_TAG_PROJ, l, sl->members[i], t);
        des_dep(d, g[i], a[i]);
        bytes[i] = hdr + rows[i] * fl;
    }
    allgather(f, l, sl->members, n, a, bytes, x);
    /* 3: gate and up rows of the slice (two thirds of its FFN bytes), hidden slices out */
    for (int i = 0; i < n; i++) {
        const ClusterDevice *dv = &f->cl->dev[sl->members[i]];
        double t = (double)config_ffn_bytes(c, cols[i]) * 2 / 3 / dv->speed_Bps +
                   dv->op_overhead_s;
        a[i] = des_compute(d, SIM_TAG_FFN, l, sl->members[i], t);
        des_dep(d, x[i], a[i]);
        bytes[i] = hdr + cols[i] * fl;
    }
    allgather(f, l, sl->members, n, a, bytes, g);
    /* 4: rows of w_down (whole rows of ffn_dim values), X''s rows out */
    for (int i = 0; i < n; i++) {
        const ClusterDevice *dv = &f->cl->dev[sl->members[i]];
        double t = (double)config_ffn_bytes(c, c->ffn_dim) / 3 * rows[i] / c->dim /
                       dv->speed_Bps + dv->op_overhead_s;
        a[i] = des_compute(d, SIM_TAG_FFN, l, sl->members[i], t);
        des_dep(d, g[i], a[i]);
        bytes[i] = hdr + rows[i] * fl;
    }
    allgather(f, l, sl->members, n, a, bytes, x);
    for (int r = 0; r < f->cl->n; r++)
        f->hold[r] = -2;
    for (int i = 0; i < n; i++)
        f->hold[sl->members[i]] = x[i];
    free(rows);
    free(bytes);
}

static void slice_layer(SimFlow *f, const LayerPlan *lp, const ScheduleLayer *sl, int l)
{
    if (f->exchange == EXCHANGE_EXACT && f->plan) {
        slice_exact_layer(f, lp, sl, l);
        return;
    }
    SimDes *d = f->d;
    const ModelConfig *c = f->c;
    const int n = sl->n_members;
    flow_input(f, l, sl, SIM_TAG_BCAST);
    int *a = f->ready, *z = f->g1, *x = f->tmp;
    for (int i = 0; i < n; i++) {
        int r = sl->members[i];
        const ClusterDevice *dv = &f->cl->dev[r];
        int nq = heads_on(lp, r), calls = 0;
        for (int k = 0; k < lp->n_parts; k++)
            calls += lp->parts[k].rank == r;
        /* Its parts, then their columns of the output projection (one call per part). */
        double t = attn_time(f, lp, r) + (double)c->dim * nq * c->head_dim * sizeof(float) /
                   dv->speed_Bps + calls * dv->op_overhead_s;
        a[i] = des_compute(d, SIM_TAG_ATTN, l, r, t);
        des_dep(d, f->got[r], a[i]);
    }
    exchange(f, l, sl->members, n, a, z);
    for (int i = 0; i < n; i++) {
        int r = sl->members[i], cols = 0;
        for (int k = 0; k < lp->n_slices; k++)
            if (lp->slices[k].rank == r)
                cols += lp->slices[k].f1 - lp->slices[k].f0;
        const ClusterDevice *dv = &f->cl->dev[r];
        double t = (double)config_ffn_bytes(c, cols) / dv->speed_Bps +
                   dv->op_overhead_s;
        a[i] = des_compute(d, SIM_TAG_FFN, l, r, t);
        des_dep(d, z[i], a[i]);
    }
    exchange(f, l, sl->members, n, a, x);
    for (int r = 0; r < f->cl->n; r++)
        f->hold[r] = -2;
    for (int i = 0; i < n; i++)
        f->hold[sl->members[i]] = x[i];
}

int flow_layer(SimFlow *f, const LayerPlan *lp, int l, int producer, int in_op)
{
    for (int r = 0; r < f->cl->n; r++)
        f->hold[r] = -2;
    f->hold[producer] = in_op < 0 ? -1 : in_op;
    ScheduleLayer sl;
    schedule_layer(&sl, lp, l, &producer, 1, producer, f->c);
    int proj, ffn = pipe_layer(f, lp, &sl, l, FLOW_SPEC_NONE, -1, &proj);
    schedule_layer_free(&sl);
    return ffn;
}

int flow_token(SimFlow *f, const Plan *p, const unsigned char *spec)
{
    SimDes *d = f->d;
    Schedule s;
    plan_schedule(&s, p, f->c);
    f->exchange = p->exchange;
    f->plan = p;
    for (int r = 0; r < f->cl->n; r++)
        f->hold[r] = -2;
    f->hold[0] = des_compute(d, SIM_TAG_EMBED, -1, 0, sim_cost_controller(f->c, f->cl, 1));
    int proj_prev = -1, last;
    for (int l = 0; l < p->n_layers; l++) {
        const LayerPlan *lp = &p->layers[l];
        if (lp->mode == LAYER_SLICE) {
            slice_layer(f, lp, &s.layers[l], l);
            proj_prev = -1;
        } else {
            int sp = spec && l > 0 ? spec[l] : FLOW_SPEC_NONE;
            pipe_layer(f, lp, &s.layers[l], l, sp, proj_prev, &proj_prev);
        }
    }
    if (s.n_head > 0) {
        /* A split LM head: every member of the last layer computes its rows and sends them. */
        last = des_join(d, p->n_layers);
        for (int m = 1; m < s.n_head; m++) {
            int r = s.head_members[m];
            int op = des_compute(d, SIM_TAG_HEAD, p->n_layers, r,
                                 sim_cost_head_rows(f->c, f->cl, r, s.head_v1[m] - s.head_v0[m]));
            des_dep(d, f->hold[r], op);
            int msg = des_msg(d, SIM_TAG_OUT, p->n_layers, r, 0, (double)s.h_counts[m]);
            des_dep(d, op, msg);
            des_dep(d, msg, last);
        }
    } else {
        /* The last layer's holders broadcast the output to the controller. */
        flow_input(f, p->n_layers, &s.layers[p->n_layers], SIM_TAG_OUT);
        last = des_compute(d, SIM_TAG_HEAD, p->n_layers, 0,
                           sim_cost_controller(f->c, f->cl, 0));
        des_dep(d, f->got[0], last);
    }
    schedule_free(&s);
    return last;
}
