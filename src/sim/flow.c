/* flow.c: the engine's per-token communication and compute pattern (src/dist/engine.c) as a
 * task graph for the event core.  Every message carries the 32-byte WireHdr.
 *  - Layer input: the ranks that hold it ("holders": the controller for layer 0, the FFN rank
 *    of a PIPE layer, every member of a SLICE layer) serve the ranks that consume it (head and
 *    projection ranks, or SLICE members).  When a consumer is not a holder, the root (the
 *    previous FFN rank, or the controller) broadcasts it to [root, other consumers sorted].
 *  - PIPE layer: each head rank runs its parts, an Igatherv sends [header | head outputs] to
 *    the projection rank, Z goes point-to-point to the FFN rank when that is another rank.
 *  - SLICE layer: each member runs its parts and their columns of the output projection,
 *    sends its partial sum to every other member, runs its FFN slice, and exchanges again.
 *  - After the last layer the output is broadcast to the controller.
 *  - Speculation into layer l (transition l-1 -> l, projection and FFN of l-1 on one rank):
 *    that rank broadcasts Z on layer l's input communicator before running the FFN; every
 *    other consumer runs its attention on Z and sends its gather contribution at once; X'
 *    follows with the decision; on rejection the attention runs again on X' and a second
 *    gather follows.  The FFN rank itself knows the decision and computes after its FFN. */
#include "sim_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

void flow_init(SimFlow *f, SimDes *d, const ModelConfig *c, const SimCluster *cl, int max_parts)
{
    memset(f, 0, sizeof *f);
    f->d = d;
    f->c = c;
    f->cl = cl;
    f->cap = 2 * (cl->n_workers + 2) + max_parts + 8;
    int **arrays[] = {&f->members, &f->cons, &f->recv, &f->spec_recv, &f->ready, &f->g1,
                      &f->tmp};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        *arrays[i] = xmalloc((size_t)f->cap * sizeof(int));
    f->hold = xmalloc(((size_t)cl->n_workers + 1) * sizeof(int));
    f->got = xmalloc(((size_t)cl->n_workers + 1) * sizeof(int));
    f->got_z = xmalloc(((size_t)cl->n_workers + 1) * sizeof(int));
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

static int bcast_binomial(const SimCluster *cl, int n)
{
    if (cl->bcast == SIM_BCAST_AUTO)
        return n > 4;
    return cl->bcast == SIM_BCAST_BINOMIAL;
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

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Consumers of a layer's input, ascending: head and projection ranks, or SLICE members. */
static int flow_consumers(const LayerPlan *lp, int *out)
{
    if (lp->mode == LAYER_SLICE) {
        for (int k = 0; k < lp->n_slices; k++)
            out[k] = lp->slices[k].rank;
        return lp->n_slices;
    }
    int n = 0;
    for (int k = 0; k < lp->n_parts; k++)
        out[n++] = lp->parts[k].rank;
    out[n++] = lp->proj_rank;
    qsort(out, (size_t)n, sizeof(int), cmp_int);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || out[i] != out[i - 1])
            out[m++] = out[i];
    return m;
}

/* Delivers layer l's input (held per f->hold) to the consumers cons[0..nc): fills f->got.
 * Returns the size of the broadcast (0: every consumer holds it already). */
static int flow_input(SimFlow *f, int l, int root, const int *cons, int nc, SimTag tag)
{
    int all = 1;
    for (int i = 0; i < nc; i++)
        all &= f->hold[cons[i]] != -2;
    if (all) {
        for (int i = 0; i < nc; i++)
            f->got[cons[i]] = f->hold[cons[i]];
        return 0;
    }
    int n = 0;
    f->members[n++] = root;
    for (int i = 0; i < nc; i++)
        if (cons[i] != root)
            f->members[n++] = cons[i];
    flow_bcast(f, tag, l, f->members, n, f->hold[root], sim_msg_bytes(f->c), f->recv);
    for (int i = 0; i < n; i++)
        f->got[f->members[i]] = f->recv[i];
    return n;
}

int flow_spec_eligible(const Plan *p, int l)
{
    if (l + 1 >= p->n_layers)
        return 0;
    const LayerPlan *a = &p->layers[l], *b = &p->layers[l + 1];
    if (a->mode != LAYER_PIPE || b->mode != LAYER_PIPE || a->proj_rank != a->ffn_rank)
        return 0;
    if (b->proj_rank != a->ffn_rank)
        return 1;
    for (int k = 0; k < b->n_parts; k++)
        if (b->parts[k].rank != a->ffn_rank)
            return 1;
    return 0; /* every consumer of l+1 is the FFN rank of l: no broadcast, nothing to hide */
}

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

/* Sends rank's gather contribution (made by op dep) to the projection op, or hands it over
 * locally when rank is the projection rank. */
static void gather_to(SimFlow *f, int l, const LayerPlan *lp, int rank, int dep, int proj)
{
    if (rank == lp->proj_rank) {
        des_dep(f->d, dep, proj);
        return;
    }
    double bytes = (double)sizeof(float) * heads_on(lp, rank) * f->c->head_dim +
                   (sim_msg_bytes(f->c) - (double)f->c->dim * sizeof(float));
    int g = des_msg(f->d, SIM_TAG_GATHER, l, rank, lp->proj_rank, bytes);
    des_dep(f->d, dep, g);
    des_dep(f->d, g, proj);
}

/* A PIPE layer with input root root; spec into this layer (FLOW_SPEC_*) with the previous
 * projection op spec_dep.  Sets *proj_out; returns the FFN op. */
static int pipe_layer(SimFlow *f, const LayerPlan *lp, int l, int root, int spec, int spec_dep,
                      int *proj_out)
{
    SimDes *d = f->d;
    const int nc = flow_consumers(lp, f->cons);
    int nb = flow_input(f, l, root, f->cons, nc, SIM_TAG_BCAST);
    for (int i = 0; i < nc; i++)
        f->got_z[f->cons[i]] = -2;
    if (spec != FLOW_SPEC_NONE && nb > 1) {
        flow_bcast(f, SIM_TAG_SPEC_BCAST, l, f->members, nb, spec_dep, sim_msg_bytes(f->c),
                   f->spec_recv);
        for (int i = 1; i < nb; i++)
            f->got_z[f->members[i]] = f->spec_recv[i];
    } else {
        spec = FLOW_SPEC_NONE;
    }
    int proj = des_compute(d, SIM_TAG_PROJ, l, lp->proj_rank,
                           sim_cost_proj(f->c, f->cl, lp->proj_rank));
    des_dep(d, f->got[lp->proj_rank], proj);
    for (int i = 0; i < nc; i++) {
        int r = f->cons[i];
        if (!heads_on(lp, r))
            continue;
        double t = attn_time(f, lp, r);
        if (spec != FLOW_SPEC_NONE && f->got_z[r] != -2) {
            /* Attention on Z, its gather at once; again on X' if rejected. */
            int sa = des_compute(d, SIM_TAG_SPEC_ATTN, l, r, t);
            des_dep(d, f->got_z[r], sa);
            gather_to(f, l, lp, r, sa, proj);
            if (spec == FLOW_SPEC_REJECT) {
                int re = des_compute(d, SIM_TAG_REEXEC, l, r, t);
                des_dep(d, sa, re);
                des_dep(d, f->got[r], re);
                gather_to(f, l, lp, r, re, proj);
            }
        } else if (spec == FLOW_SPEC_REJECT) {
            /* The root knows: it sends the first gather round empty and computes on X'. */
            gather_to(f, l, lp, r, f->got[r], proj);
            int re = des_compute(d, SIM_TAG_REEXEC, l, r, t);
            des_dep(d, f->got[r], re);
            gather_to(f, l, lp, r, re, proj);
        } else {
            int a = des_compute(d, SIM_TAG_ATTN, l, r, t);
            des_dep(d, f->got[r], a);
            gather_to(f, l, lp, r, a, proj);
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
    for (int r = 0; r <= f->cl->n_workers; r++)
        f->hold[r] = -2;
    f->hold[lp->ffn_rank] = ffn;
    *proj_out = proj;
    return ffn;
}

/* Direct exchange of partial sums among the members m[0..n): member i's message leaves
 * after op from[i]; to[i] gets the op after which member i has every partial. */
static void exchange(SimFlow *f, int l, const int *m, int n, const int *from, int *to)
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
            int x = des_msg(d, SIM_TAG_EXCHANGE, l, m[i], m[j], sim_msg_bytes(f->c));
            des_dep(d, from[i], x);
            des_dep(d, x, to[j]);
        }
}

static void slice_layer(SimFlow *f, const LayerPlan *lp, int l, int root)
{
    SimDes *d = f->d;
    const ModelConfig *c = f->c;
    const int n = flow_consumers(lp, f->cons);
    flow_input(f, l, root, f->cons, n, SIM_TAG_BCAST);
    int *a = f->ready, *z = f->g1, *x = f->tmp;
    for (int i = 0; i < n; i++) {
        int r = f->cons[i];
        const SimDevice *dv = &f->cl->dev[r];
        int nq = heads_on(lp, r), calls = 0;
        for (int k = 0; k < lp->n_parts; k++)
            calls += lp->parts[k].rank == r;
        /* Its parts, then their columns of the output projection (one call per part). */
        double t = attn_time(f, lp, r) + (double)c->dim * nq * c->head_dim * sizeof(float) /
                   dv->speed + calls * dv->op_overhead;
        a[i] = des_compute(d, SIM_TAG_ATTN, l, r, t);
        des_dep(d, f->got[r], a[i]);
    }
    exchange(f, l, f->cons, n, a, z);
    for (int i = 0; i < n; i++) {
        int r = f->cons[i], cols = 0;
        for (int k = 0; k < lp->n_slices; k++)
            if (lp->slices[k].rank == r)
                cols += lp->slices[k].f1 - lp->slices[k].f0;
        const SimDevice *dv = &f->cl->dev[r];
        double t = (double)config_ffn_bytes(c, cols) / dv->speed +
                   dv->op_overhead;
        a[i] = des_compute(d, SIM_TAG_FFN, l, r, t);
        des_dep(d, z[i], a[i]);
    }
    exchange(f, l, f->cons, n, a, x);
    for (int r = 0; r <= f->cl->n_workers; r++)
        f->hold[r] = -2;
    for (int i = 0; i < n; i++)
        f->hold[f->cons[i]] = x[i];
}

int flow_layer(SimFlow *f, const LayerPlan *lp, int l, int producer, int in_op)
{
    for (int r = 0; r <= f->cl->n_workers; r++)
        f->hold[r] = -2;
    f->hold[producer] = in_op < 0 ? -1 : in_op;
    int proj;
    return pipe_layer(f, lp, l, producer, FLOW_SPEC_NONE, -1, &proj);
}

int flow_token(SimFlow *f, const Plan *p, const unsigned char *spec)
{
    SimDes *d = f->d;
    for (int r = 0; r <= f->cl->n_workers; r++)
        f->hold[r] = -2;
    f->hold[0] = des_compute(d, SIM_TAG_EMBED, -1, 0, sim_cost_controller(f->c, f->cl, 1));
    int proj_prev = -1;
    for (int l = 0; l < p->n_layers; l++) {
        const LayerPlan *lp = &p->layers[l];
        int root = l == 0 ? 0 : p->layers[l - 1].ffn_rank;
        if (lp->mode == LAYER_SLICE) {
            slice_layer(f, lp, l, root);
            proj_prev = -1;
        } else {
            int s = spec && l > 0 ? spec[l] : FLOW_SPEC_NONE;
            pipe_layer(f, lp, l, root, s, proj_prev, &proj_prev);
        }
    }
    /* A split LM head: every member of the last layer computes its rows and sends them. */
    if (p->head_split) {
        int join = des_join(d, p->n_layers), v0, v1;
        for (int r = 1; r <= f->cl->n_workers; r++)
            if (plan_head_rows(p, f->c, r, &v0, &v1)) {
                int op = des_compute(d, SIM_TAG_HEAD, p->n_layers, r,
                                     sim_cost_head_rows(f->c, f->cl, r, v1 - v0));
                des_dep(d, f->hold[r], op);
                int msg = des_msg(d, SIM_TAG_OUT, p->n_layers, r, 0,
                                  (double)sizeof(WireHdr) + (double)(v1 - v0) * sizeof(float));
                des_dep(d, op, msg);
                des_dep(d, msg, join);
            }
        return join;
    }
    /* The last layer's holders broadcast the output to the controller. */
    int ctrl = 0;
    flow_input(f, p->n_layers, p->layers[p->n_layers - 1].ffn_rank, &ctrl, 1, SIM_TAG_OUT);
    int head = des_compute(d, SIM_TAG_HEAD, p->n_layers, 0, sim_cost_controller(f->c, f->cl, 0));
    des_dep(d, f->got[0], head);
    return head;
}
