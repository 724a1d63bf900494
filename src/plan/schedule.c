/* schedule.c: the consequences of a plan for one token (see schedule.h), derived in one place.
 *
 * The input of layer l is held by the ranks that produced it (the controller for layer 0, the
 * FFN rank of a PIPE layer, every member of a SLICE layer).  When the ranks that consume it
 * (attention and projection ranks, or the members of a SLICE layer) are not all holders, the
 * producer broadcasts it to [producer, the other consumers ascending]. */
#include "schedule.h"

#include "steps.h"
#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) and drops repeats; returns the new count. */
static int sort_unique(int *v, int n)
{
    qsort(v, (size_t)n, sizeof(int), cmp_int);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || v[i] != v[m - 1])
            v[m++] = v[i];
    return m;
}

int schedule_has(const int *v, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (v[i] == rank)
            return 1;
    return 0;
}

static int *dup_ints(const int *v, int n)
{
    int *o = xmalloc(((size_t)n + 1) * sizeof(int));
    if (n > 0)
        memcpy(o, v, (size_t)n * sizeof(int));
    return o;
}

/* Consumers of a layer's input, ascending, into a new array; returns the count. */
static int layer_consumers(const LayerPlan *lp, int **out)
{
    int *v = xmalloc(((size_t)lp->n_parts + (size_t)lp->n_slices + 1) * sizeof(int)), n = 0;
    if (lp->mode == LAYER_SLICE) {
        for (int k = 0; k < lp->n_slices; k++)
            v[n++] = lp->slices[k].rank;
    } else {
        for (int k = 0; k < lp->n_parts; k++)
            v[n++] = lp->parts[k].rank;
        v[n++] = lp->proj_rank;
    }
    *out = v;
    return sort_unique(v, n);
}

/* Holders of layer l's input (the output of layer l-1), ascending, into a new array. */
static int plan_holders(const Plan *p, int l, int **out)
{
    if (l == 0) {
        *out = dup_ints((int[]){0}, 1);
        return 1;
    }
    const LayerPlan *prev = &p->layers[l - 1];
    if (prev->mode == LAYER_SLICE) {
        int *v = xmalloc(((size_t)prev->n_slices + 1) * sizeof(int));
        int n = plan_slice_members(p, l - 1, v);
        *out = v;
        return sort_unique(v, n);
    }
    *out = dup_ints(&prev->ffn_rank, 1);
    return 1;
}

/* The input part of an entry: holders (taken over), consumers (taken over), broadcast. */
static void fill_input(ScheduleLayer *sl, int *holders, int nh, int *cons, int nc, int producer)
{
    sl->producer = producer;
    sl->holders = holders;
    sl->n_holders = nh;
    sl->consumers = cons;
    sl->n_consumers = nc;
    int all = 1;
    for (int i = 0; i < nc; i++)
        all &= schedule_has(holders, nh, cons[i]);
    sl->bcast = xmalloc(((size_t)nc + 1) * sizeof(int));
    sl->n_bcast = 0;
    if (all)
        return;
    sl->bcast[sl->n_bcast++] = producer;
    for (int i = 0; i < nc; i++)
        if (cons[i] != producer)
            sl->bcast[sl->n_bcast++] = cons[i];
}

/* PIPE: the gather group and the layout of the head outputs at the projection rank. */
static void fill_gather(ScheduleLayer *sl, const LayerPlan *lp, const ModelConfig *c)
{
    const int hd = c->head_dim, Q = config_q_per_kv(c);
    int *g = xmalloc(((size_t)lp->n_parts + 1) * sizeof(int)), n = 0;
    g[n++] = lp->proj_rank;
    for (int k = 0; k < lp->n_parts; k++)
        if (!schedule_has(g, n, lp->parts[k].rank))
            g[n++] = lp->parts[k].rank;
    qsort(g + 1, (size_t)n - 1, sizeof(int), cmp_int);
    sl->gather = g;
    sl->n_gather = n;
    sl->g_floats = xcalloc((size_t)n, sizeof(int));
    sl->g_counts = xcalloc((size_t)n, sizeof(int));
    sl->g_displs = xcalloc((size_t)n, sizeof(int));
    sl->g_part_dst = xcalloc((size_t)lp->n_parts + 1, sizeof(int));
    sl->g_part_src = xcalloc((size_t)lp->n_parts + 1, sizeof(int));
    sl->g_part_len = xcalloc((size_t)lp->n_parts + 1, sizeof(int));
    int off = 0, np = 0;
    for (int m = 0; m < n; m++) {
        sl->g_displs[m] = off;
        off += (int)sizeof(WireHdr);
        for (int k = 0; k < lp->n_parts; k++)
            if (lp->parts[k].rank == g[m]) {
                int len = (lp->parts[k].q1 - lp->parts[k].q0) * hd;
                sl->g_part_dst[np] = (lp->parts[k].unit * Q + lp->parts[k].q0) * hd;
                sl->g_part_src[np] = off;
                sl->g_part_len[np++] = len;
                sl->g_floats[m] += len;
                off += len * (int)sizeof(float);
            }
        sl->g_counts[m] = off - sl->g_displs[m];
    }
    sl->n_gparts = np;
}

/* Adds a step's hops and bytes to its layer's entry (as steps_hops and steps_bytes count). */
static void add_step(ScheduleLayer *sl, const StepProgram *prog, const Step *st)
{
    sl->bytes += steps_step_bytes(prog, st);
    sl->hops += steps_step_hops(prog, st);
}

/* Ranks a one-layer program spans: one past the highest rank it names. */
static int n_ranks_of(const int *holders, int n_holders, const ScheduleLayer *sl,
                      const LayerPlan *lp)
{
    int n = lp->ffn_rank + 1;
    for (int i = 0; i < n_holders; i++)
        n = holders[i] + 1 > n ? holders[i] + 1 : n;
    for (int i = 0; i < sl->n_consumers; i++)
        n = sl->consumers[i] + 1 > n ? sl->consumers[i] + 1 : n;
    for (int i = 0; i < sl->n_bcast; i++)
        n = sl->bcast[i] + 1 > n ? sl->bcast[i] + 1 : n;
    return n;
}

static void fill_layer(ScheduleLayer *sl, const LayerPlan *lp, const ModelConfig *c)
{
    sl->mode = lp->mode;
    sl->proj_rank = lp->proj_rank;
    sl->ffn_rank = lp->ffn_rank;
    if (lp->mode == LAYER_SLICE) {
        sl->members = dup_ints(sl->consumers, sl->n_consumers);
        sl->n_members = sl->n_consumers;
    } else {
        fill_gather(sl, lp, c);
    }
}

void schedule_layer(ScheduleLayer *out, const LayerPlan *lp, int layer, const int *holders,
                    int n_holders, int producer, const ModelConfig *c)
{
    memset(out, 0, sizeof *out);
    int *cons, nc = layer_consumers(lp, &cons);
    fill_input(out, dup_ints(holders, n_holders), n_holders, cons, nc, producer);
    fill_layer(out, lp, c);
    /* its hops and bytes: the sums over its steps (partial sums exchanged all-to-all) */
    StepProgram prog;
    steps_build_layer(&prog, lp, out, layer, n_ranks_of(holders, n_holders, out, lp), c, NULL);
    for (int k = 0; k < prog.n_steps; k++)
        add_step(out, &prog, &prog.steps[k]);
    steps_free(&prog);
}

void schedule_layer_free(ScheduleLayer *sl)
{
    if (!sl)
        return;
    int **arrays[] = {&sl->holders, &sl->consumers, &sl->bcast, &sl->gather, &sl->g_floats,
                      &sl->g_counts, &sl->g_displs, &sl->g_part_dst, &sl->g_part_src,
                      &sl->g_part_len, &sl->members};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        free(*arrays[i]);
        *arrays[i] = NULL;
    }
}

/* Rule of speculation for transition l -> l+1, given layer l+1's broadcast size. */
static int spec_rule(const Plan *p, int l, int n_bcast_next)
{
    if (l + 1 >= p->n_layers)
        return 0;
    const LayerPlan *a = &p->layers[l], *b = &p->layers[l + 1];
    return a->mode == LAYER_PIPE && b->mode == LAYER_PIPE && a->proj_rank == a->ffn_rank &&
           n_bcast_next > 1;
}

int schedule_spec_eligible(const Plan *p, int l)
{
    if (l < 0 || l + 1 >= p->n_layers)
        return 0;
    ScheduleLayer sl;
    memset(&sl, 0, sizeof sl);
    int *h, nh = plan_holders(p, l + 1, &h);
    int *cons, nc = layer_consumers(&p->layers[l + 1], &cons);
    fill_input(&sl, h, nh, cons, nc, p->layers[l].ffn_rank);
    int ok = spec_rule(p, l, sl.n_bcast);
    schedule_layer_free(&sl);
    return ok;
}

/* Split LM head: the group, each member's rows and the controller's receive layout. */
static void fill_head(Schedule *s, const Plan *p, const ModelConfig *c)
{
    if (!p->head_split)
        return;
    const int n = p->n_workers + 1;
    s->head_members = xcalloc((size_t)n, sizeof(int));
    s->head_v0 = xcalloc((size_t)n, sizeof(int));
    s->head_v1 = xcalloc((size_t)n, sizeof(int));
    s->h_counts = xcalloc((size_t)n, sizeof(int));
    s->h_displs = xcalloc((size_t)n, sizeof(int));
    int m = 1, off = 0, v0, v1;
    for (int r = 1; r <= p->n_workers; r++)
        if (plan_head_rows(p, c, r, &v0, &v1)) {
            s->head_members[m] = r;
            s->head_v0[m] = v0;
            s->head_v1[m] = v1;
            s->h_displs[m] = off;
            s->h_counts[m] = (int)(sizeof(WireHdr) + (size_t)(v1 - v0) * sizeof(float));
            off += s->h_counts[m];
            m++;
        }
    s->n_head = m;
}

void plan_schedule(Schedule *s, const Plan *p, const ModelConfig *c)
{
    memset(s, 0, sizeof *s);
    const int L = p->n_layers;
    s->n_layers = L;
    s->n_workers = p->n_workers;
    s->msg_bytes = sizeof(WireHdr) + (size_t)c->dim * sizeof(float);
    s->layers = xcalloc((size_t)L + 1, sizeof(ScheduleLayer));
    for (int l = 0; l <= L; l++) {
        ScheduleLayer *sl = &s->layers[l];
        int *h, nh = plan_holders(p, l, &h);
        int producer = l == 0 ? 0 : p->layers[l - 1].ffn_rank;
        if (l < L) {
            int *cons, nc = layer_consumers(&p->layers[l], &cons);
            fill_input(sl, h, nh, cons, nc, producer);
            fill_layer(sl, &p->layers[l], c);
        } else {
            fill_input(sl, h, nh, dup_ints((int[]){0}, 1), 1, producer);
        }
    }
    for (int l = 0; l < L; l++)
        s->layers[l].spec_eligible = spec_rule(p, l, s->layers[l + 1].n_bcast);
    fill_head(s, p, c);
    /* hops and bytes: sums over the token's steps (f32, no speculation), by layer */
    StepProgram prog;
    steps_build(&prog, p, s, c, NULL);
    for (int k = 0; k < prog.n_steps; k++)
        if (prog.steps[k].layer >= 0)
            add_step(&s->layers[prog.steps[k].layer], &prog, &prog.steps[k]);
    s->bytes_per_token = steps_bytes(&prog, NULL);
    s->hops_per_token = steps_hops(&prog);
    steps_free(&prog);
}

void schedule_free(Schedule *s)
{
    if (!s)
        return;
    for (int l = 0; s->layers && l <= s->n_layers; l++)
        schedule_layer_free(&s->layers[l]);
    free(s->layers);
    free(s->head_members);
    free(s->head_v0);
    free(s->head_v1);
    free(s->h_counts);
    free(s->h_displs);
    memset(s, 0, sizeof *s);
}
