/* flow.c: the engine's per-token communication and compute pattern (src/dist/engine.c) as a
 * task graph for the event core.  Per layer: the producer (controller for layer 0, else the
 * previous FFN rank) broadcasts X to the head and projection ranks (members ordered as the
 * engine's communicator: producer first, the others sorted); each head rank runs its parts;
 * an Igatherv sends head outputs to the projection rank; Z goes to the FFN rank when it is
 * another; after the last layer the FFN rank broadcasts X back to the controller.
 * Speculation: the projection rank also broadcasts Z to the next layer's head ranks, which run
 * their attention on it while the FFN runs (not on the FFN's own rank, which is busy); when
 * X' arrives the result is kept, or the attention is executed again on X'. */
#include "sim_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

void flow_init(SimFlow *f, SimDes *d, const ModelConfig *c, const SimCluster *cl, int max_parts)
{
    memset(f, 0, sizeof *f);
    f->d = d;
    f->c = c;
    f->cl = cl;
    f->cap = 2 * (cl->n_workers + 2) + max_parts;
    f->members = xmalloc((size_t)f->cap * sizeof(int));
    f->others = xmalloc((size_t)f->cap * sizeof(int));
    f->recv = xmalloc((size_t)f->cap * sizeof(int));
    f->ready = xmalloc((size_t)f->cap * sizeof(int));
    f->scratch = xmalloc((size_t)f->cap * sizeof(int));
}

void flow_free(SimFlow *f)
{
    if (!f)
        return;
    free(f->members);
    free(f->others);
    free(f->recv);
    free(f->ready);
    free(f->scratch);
    memset(f, 0, sizeof *f);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The engine's member_list: first, then the sorted unique others without first. */
static int flow_member_list(int *out, int first, int *others, int n_others)
{
    int n = 0;
    out[n++] = first;
    qsort(others, (size_t)n_others, sizeof(int), cmp_int);
    for (int i = 0; i < n_others; i++)
        if (others[i] != first && (i == 0 || others[i] != others[i - 1]))
            out[n++] = others[i];
    return n;
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
    /* Binomial tree: relative rank r gets it from r with its lowest set bit cleared; each
     * node sends to its children largest subtree first (MPICH, libnbc). */
    int top = 1;
    while (top < n)
        top <<= 1;
    for (int mask = top >> 1; mask >= 1; mask >>= 1)
        for (int r = 0; r + mask < n; r += 2 * mask) {
            int child = r + mask;
            recv[child] = des_msg(f->d, tag, layer, members[r], members[child], bytes);
            des_dep(f->d, recv[r], recv[child]);
        }
}

/* Index of rank in members[0..n), or -1. */
static int index_of(const int *members, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (members[i] == rank)
            return i;
    return -1;
}

int flow_layer(SimFlow *f, const LayerPlan *lp, int l, int producer, int in_op, int spec,
               int spec_src, int spec_op, int *proj_op)
{
    SimDes *d = f->d;
    const ModelConfig *c = f->c;
    const double msg = sim_msg_bytes(c);
    int n_o = 0;
    for (int k = 0; k < lp->n_parts; k++)
        f->others[n_o++] = lp->parts[k].rank;
    f->others[n_o++] = lp->proj_rank;
    int n = flow_member_list(f->members, producer, f->others, n_o);
    flow_bcast(f, SIM_TAG_BCAST, l, f->members, n, in_op, msg, f->recv);

    /* Speculative input: Z from the previous projection rank to this layer's head ranks
     * other than the producer (the FFN rank, whose compute unit is taken). */
    int *spec_recv = f->scratch; /* [n], by member index; -1: not speculating */
    for (int i = 0; i < n; i++)
        spec_recv[i] = -1;
    if (spec != FLOW_SPEC_NONE) {
        int *sm = f->ready, ns = 0; /* borrowed: spec members, root first */
        sm[ns++] = spec_src;
        for (int i = 1; i < n; i++) {
            int has_part = 0;
            for (int k = 0; k < lp->n_parts && !has_part; k++)
                has_part = lp->parts[k].rank == f->members[i];
            if (has_part && f->members[i] != spec_src)
                sm[ns++] = f->members[i];
        }
        int spec_on_src = 0;
        for (int k = 0; k < lp->n_parts; k++)
            spec_on_src |= lp->parts[k].rank == spec_src && spec_src != producer;
        int *srecv = f->others; /* the member list is built; others is free again */
        flow_bcast(f, SIM_TAG_SPEC_BCAST, l, sm, ns, spec_op, msg, srecv);
        for (int j = 1; j < ns; j++)
            spec_recv[index_of(f->members, n, sm[j])] = srecv[j];
        int is = index_of(f->members, n, spec_src);
        if (spec_on_src && is >= 0)
            spec_recv[is] = spec_op;
    }

    /* Attention: one op per head rank (its parts in plan order, one call each). */
    int *ready = f->ready;
    for (int i = 0; i < n; i++) {
        int rank = f->members[i];
        double t = 0;
        int nq = 0;
        for (int k = 0; k < lp->n_parts; k++)
            if (lp->parts[k].rank == rank) {
                t += sim_cost_attn(c, f->cl, rank, lp->parts[k].q1 - lp->parts[k].q0, f->pos);
                nq += lp->parts[k].q1 - lp->parts[k].q0;
            }
        ready[i] = -1;
        if (nq == 0)
            continue;
        if (spec_recv[i] >= 0) {
            int sa = des_compute(d, SIM_TAG_SPEC_ATTN, l, rank, t);
            des_dep(d, spec_recv[i], sa);
            int done;
            if (spec == FLOW_SPEC_KEEP)
                done = des_join(d, l);
            else
                done = des_compute(d, SIM_TAG_REEXEC, l, rank, t);
            des_dep(d, sa, done);
            des_dep(d, f->recv[i], done);
            ready[i] = done;
        } else {
            ready[i] = des_compute(d, SIM_TAG_ATTN, l, rank, t);
            des_dep(d, f->recv[i], ready[i]);
        }
    }

    /* Igatherv to the projection rank, then the projection (it also needs X). */
    int ip = index_of(f->members, n, lp->proj_rank);
    int proj = des_compute(d, SIM_TAG_PROJ, l, lp->proj_rank,
                           sim_cost_proj(c, f->cl, lp->proj_rank));
    des_dep(d, f->recv[ip], proj);
    for (int i = 0; i < n; i++) {
        if (ready[i] < 0)
            continue;
        if (i == ip) {
            des_dep(d, ready[i], proj);
            continue;
        }
        int nq = 0;
        for (int k = 0; k < lp->n_parts; k++)
            if (lp->parts[k].rank == f->members[i])
                nq += lp->parts[k].q1 - lp->parts[k].q0;
        int g = des_msg(d, SIM_TAG_GATHER, l, f->members[i], lp->proj_rank,
                        (double)nq * c->head_dim * (double)sizeof(float));
        des_dep(d, ready[i], g);
        des_dep(d, g, proj);
    }
    int ffn_in = proj;
    if (lp->ffn_rank != lp->proj_rank) {
        ffn_in = des_msg(d, SIM_TAG_Z, l, lp->proj_rank, lp->ffn_rank, msg);
        des_dep(d, proj, ffn_in);
    }
    int ffn = des_compute(d, SIM_TAG_FFN, l, lp->ffn_rank, sim_cost_ffn(c, f->cl, lp->ffn_rank));
    des_dep(d, ffn_in, ffn);
    if (proj_op)
        *proj_op = proj;
    return ffn;
}

int flow_token(SimFlow *f, const Plan *p, const unsigned char *spec)
{
    SimDes *d = f->d;
    int op = des_compute(d, SIM_TAG_EMBED, -1, 0, sim_cost_controller(f->c, f->cl, 1));
    int producer = 0, proj_prev = -1, proj_rank_prev = 0;
    for (int l = 0; l < p->n_layers; l++) {
        int s = spec && l > 0 ? spec[l] : FLOW_SPEC_NONE;
        int proj_op;
        op = flow_layer(f, &p->layers[l], l, producer, op, s, proj_rank_prev, proj_prev,
                        &proj_op);
        producer = p->layers[l].ffn_rank;
        proj_prev = proj_op;
        proj_rank_prev = p->layers[l].proj_rank;
    }
    /* lr[L]: the last FFN rank broadcasts the output to the controller. */
    if (producer != 0) {
        int out = des_msg(d, SIM_TAG_OUT, p->n_layers, producer, 0, sim_msg_bytes(f->c));
        des_dep(d, op, out);
        op = out;
    }
    int head = des_compute(d, SIM_TAG_HEAD, p->n_layers, 0, sim_cost_controller(f->c, f->cl, 0));
    des_dep(d, op, head);
    return head;
}
