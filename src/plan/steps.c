/* steps.c: a token's step program (steps.h) from a plan's schedule, and its sums.  One
 * emitter per kind of layer: PIPE (with speculation into it), SLICE with partial sums in each
 * exchange pattern, SLICE exact; then the way out (the controller's LM head, or the split
 * head's rows gathered). */
#include "steps.h"

#include "plan_internal.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* The emitter's state: the program, and the step after which each rank holds the current
 * layer input (hold; -1 from the start, -2 not a holder) or has it delivered (got). */
typedef struct {
    StepProgram *p;
    const Plan *plan;
    const ModelConfig *c;
    const StepOptions *o;
    int *hold, *got; /* [n_ranks] */
    int *tmp;        /* [n_ranks] scratch: steps of the members */
    int *tmp2;       /* [n_ranks] */
} Emit;

static int grow(void **v, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return 0;
    int c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    *v = xrealloc(*v, (size_t)c * size);
    *cap = c;
    return 1;
}

/* Appends a step; members and deps follow with member() and dep(). */
static int begin(Emit *e, StepOp op, StepWhat what, int layer)
{
    StepProgram *p = e->p;
    grow((void **)&p->steps, &p->cap_steps, p->n_steps + 1, sizeof(Step));
    Step *st = &p->steps[p->n_steps];
    memset(st, 0, sizeof *st);
    st->op = op;
    st->what = what;
    st->layer = layer;
    st->rank = -1;
    st->first_member = p->n_pool;
    st->first_dep = p->n_dep;
    st->wire = WIRE_FORM_F32;
    return p->n_steps++;
}

static Step *cur(Emit *e) { return &e->p->steps[e->p->n_steps - 1]; }

static void member(Emit *e, int rank, int64_t values)
{
    StepProgram *p = e->p;
    int cap = p->cap_pool;
    if (grow((void **)&p->members, &cap, p->n_pool + 1, sizeof(int)))
        p->values = xrealloc(p->values, (size_t)cap * sizeof(int64_t));
    p->cap_pool = cap;
    p->members[p->n_pool] = rank;
    p->values[p->n_pool++] = values;
    cur(e)->n_members++;
}

static void dep(Emit *e, int d)
{
    if (d < 0)
        return;
    StepProgram *p = e->p;
    grow((void **)&p->deps, &p->cap_dep, p->n_dep + 1, sizeof(int));
    p->deps[p->n_dep++] = d;
    cur(e)->n_deps++;
}

/* A compute step on rank: weights, KV groups read, kernel calls; after dependency d. */
static int compute(Emit *e, StepWhat what, int layer, int rank, double bytes, int kv, int ops,
                   int d)
{
    int k = begin(e, STEP_COMPUTE, what, layer);
    Step *st = cur(e);
    st->rank = rank;
    st->weight_bytes = bytes;
    st->kv_groups = kv;
    st->n_ops = ops;
    dep(e, d);
    return k;
}

/* Rank's attention parts of lp: their weights (by stored type), KV groups and calls. */
static double parts_on(const ModelConfig *c, const LayerPlan *lp, int rank, int *n_parts,
                       int *n_q)
{
    double b = 0;
    *n_parts = *n_q = 0;
    for (int k = 0; k < lp->n_parts; k++)
        if (lp->parts[k].rank == rank) {
            b += (double)config_attn_unit_bytes(c, lp->parts[k].q1 - lp->parts[k].q0);
            (*n_parts)++;
            *n_q += lp->parts[k].q1 - lp->parts[k].q0;
        }
    return b;
}

/* Delivers layer l's input (schedule entry sl) to its consumers: a broadcast from the
 * producer where some consumer does not hold it; fills got[]. */
static void input(Emit *e, const ScheduleLayer *sl, int l, StepWhat what)
{
    for (int i = 0; i < sl->n_consumers; i++)
        e->got[sl->consumers[i]] = e->hold[sl->consumers[i]];
    if (sl->n_bcast == 0)
        return;
    int b = begin(e, STEP_BCAST, what, l);
    cur(e)->wire = e->o->wire;
    for (int i = 0; i < sl->n_bcast; i++)
        member(e, sl->bcast[i], e->c->dim);
    dep(e, e->hold[sl->producer]);
    for (int i = 0; i < sl->n_bcast; i++)
        e->got[sl->bcast[i]] = b;
}

static void hold_only(Emit *e, const int *ranks, const int *steps, int n)
{
    for (int r = 0; r < e->p->n_ranks; r++)
        e->hold[r] = -2;
    for (int i = 0; i < n; i++)
        e->hold[ranks[i]] = steps[i];
}

/* A gather of head outputs at the projection rank after the steps a[] of its members (one
 * per member, -1: none), in branch br; -1 when the group is the projection rank alone. */
static int gather(Emit *e, const ScheduleLayer *sl, int l, const int *a, StepBranch br,
                  int extra_dep)
{
    if (sl->n_gather < 2)
        return -1;
    int g = begin(e, STEP_GATHER, STEP_MSG_HEADS, l);
    cur(e)->branch = br;
    for (int m = 0; m < sl->n_gather; m++)
        member(e, sl->gather[m], sl->g_floats[m]);
    for (int m = 0; m < sl->n_gather; m++)
        dep(e, a[m]);
    dep(e, extra_dep);
    return g;
}

/* A PIPE layer; spec_z: the speculative Z broadcast into it (-1: none).  Returns the one it
 * sends into the next layer (-1: none). */
static int pipe_layer(Emit *e, const Schedule *s, int l, int spec_z)
{
    const ModelConfig *c = e->c;
    const LayerPlan *lp = &e->plan->layers[l];
    const ScheduleLayer *sl = &s->layers[l];
    const int prev_ffn = spec_z >= 0 ? e->hold[sl->producer] : -1;
    int *a = e->tmp, *re = e->tmp2;
    input(e, sl, l, STEP_MSG_INPUT);
    int g1, g2 = -1;
    for (int m = 0; m < sl->n_gather; m++)
        a[m] = re[m] = -1;
    if (spec_z < 0) {
        for (int m = 0; m < sl->n_gather; m++) {
            int r = sl->gather[m], np, nq;
            double b = parts_on(c, lp, r, &np, &nq);
            if (np)
                a[m] = compute(e, STEP_WORK_ATTN, l, r, b, np, np, e->got[r]);
        }
        g1 = gather(e, sl, l, a, STEP_ALWAYS, -1);
    } else {
        /* on Z at once (the producer itself, knowing the decision, only when it is kept and
         * after its FFN); the gather at once, the producer's part after its FFN */
        for (int m = 0; m < sl->n_gather; m++) {
            int r = sl->gather[m], np, nq;
            double b = parts_on(c, lp, r, &np, &nq);
            if (!np)
                continue;
            const int root = r == sl->producer;
            a[m] = compute(e, STEP_WORK_SPEC_ATTN, l, r, b, np, np, root ? prev_ffn : spec_z);
            if (root)
                cur(e)->branch = STEP_ACCEPT;
        }
        g1 = gather(e, sl, l, a, STEP_ALWAYS, prev_ffn);
        for (int m = 0; m < sl->n_gather; m++) {
            int r = sl->gather[m], np, nq;
            double b = parts_on(c, lp, r, &np, &nq);
            if (!np)
                continue;
            re[m] = compute(e, STEP_WORK_REEXEC, l, r, b, np, np, e->got[r]);
            cur(e)->branch = STEP_REJECT;
            dep(e, a[m]);
        }
        g2 = gather(e, sl, l, re, STEP_REJECT, -1);
    }
    int pj = compute(e, STEP_WORK_PROJ, l, lp->proj_rank, (double)config_proj_bytes(c), 0, 1,
                     e->got[lp->proj_rank]);
    if (g1 >= 0) {
        dep(e, g1);
        dep(e, g2);
    } else { /* every head on the projection rank */
        dep(e, a[0]);
        dep(e, re[0]);
    }
    /* speculation out of this layer: Z to the next layer's consumers before the FFN */
    int zspec = -1;
    if (e->o->spec && l + 1 < e->plan->n_layers && e->o->spec[l + 1] && sl->spec_eligible) {
        const ScheduleLayer *nx = &s->layers[l + 1];
        zspec = begin(e, STEP_BCAST, STEP_MSG_SPEC_Z, l + 1);
        cur(e)->wire = e->o->wire;
        for (int i = 0; i < nx->n_bcast; i++)
            member(e, nx->bcast[i], c->dim);
        dep(e, pj);
    }
    int zin = pj;
    if (lp->ffn_rank != lp->proj_rank) {
        zin = begin(e, STEP_SEND, STEP_MSG_Z, l);
        member(e, lp->proj_rank, c->dim);
        member(e, lp->ffn_rank, c->dim);
        dep(e, pj);
    }
    int f = compute(e, STEP_WORK_FFN, l, lp->ffn_rank, (double)config_ffn_bytes(c, c->ffn_dim),
                    0, 1, zin);
    hold_only(e, &lp->ffn_rank, &f, 1);
    return zspec;
}

/* Floats rank holds of the FFN's width in lp (its slices' columns). */
static int cols_on(const LayerPlan *lp, int rank)
{
    int f = 0;
    for (int k = 0; k < lp->n_slices; k++)
        if (lp->slices[k].rank == rank)
            f += lp->slices[k].f1 - lp->slices[k].f0;
    return f;
}

/* One exchange of partial sums among sl's members after their steps from[] (in member
 * order), in the plan's pattern; to[i]: the step after which member i has the sum. */
static void exchange(Emit *e, const ScheduleLayer *sl, int l, const int *from, int *to)
{
    const int n = sl->n_members, dim = e->c->dim;
    const SliceExchange x = e->plan->exchange;
    if (n < 2) {
        to[0] = from[0];
        return;
    }
    int k;
    if (x == EXCHANGE_REDUCE) {
        int r = begin(e, STEP_REDUCE, STEP_MSG_PARTIAL, l);
        cur(e)->wire = e->o->wire;
        for (int i = 0; i < n; i++)
            member(e, sl->members[i], dim);
        for (int i = 0; i < n; i++)
            dep(e, from[i]);
        k = begin(e, STEP_BCAST, STEP_MSG_SUM, l);
        cur(e)->wire = e->o->wire;
        for (int i = 0; i < n; i++)
            member(e, sl->members[i], dim);
        dep(e, r);
    } else if (x == EXCHANGE_RSAG) {
        /* chunk j of the width: [C0(j), C0(j+1)), whole blocks of the wire form */
        const int64_t blk = wire_form_block(e->o->wire);
#define C0(i) ((int64_t)(i) * dim / n / blk * blk)
        int r = begin(e, STEP_SCATTER, STEP_MSG_PARTIAL, l);
        cur(e)->wire = e->o->wire;
        for (int i = 0; i < n; i++)
            member(e, sl->members[i], (i == n - 1 ? dim : C0(i + 1)) - C0(i));
        for (int i = 0; i < n; i++)
            dep(e, from[i]);
        k = begin(e, STEP_ALLGATHER, STEP_MSG_SUM, l);
        cur(e)->wire = e->o->wire;
        for (int i = 0; i < n; i++)
            member(e, sl->members[i], (i == n - 1 ? dim : C0(i + 1)) - C0(i));
#undef C0
        dep(e, r);
    } else {
        k = begin(e, STEP_ALLGATHER, STEP_MSG_PARTIAL, l);
        cur(e)->wire = e->o->wire;
        for (int i = 0; i < n; i++)
            member(e, sl->members[i], dim);
        for (int i = 0; i < n; i++)
            dep(e, from[i]);
    }
    for (int i = 0; i < n; i++)
        to[i] = k;
}

/* An all-gather of whole values (exact) among the members after from[]: values[i] each. */
static int allgather_rows(Emit *e, const ScheduleLayer *sl, int l, StepWhat what,
                          const int *from, const int *values)
{
    int k = begin(e, STEP_ALLGATHER, what, l);
    for (int i = 0; i < sl->n_members; i++)
        member(e, sl->members[i], values[i]);
    for (int i = 0; i < sl->n_members; i++)
        dep(e, from[i]);
    return k;
}

/* A SLICE layer whose members add partial sums. */
static void slice_layer(Emit *e, const Schedule *s, int l)
{
    const ModelConfig *c = e->c;
    const LayerPlan *lp = &e->plan->layers[l];
    const ScheduleLayer *sl = &s->layers[l];
    const int n = sl->n_members;
    int *a = e->tmp, *z = e->tmp2;
    input(e, sl, l, STEP_MSG_INPUT);
    for (int i = 0; i < n; i++) {
        int r = sl->members[i], np, nq;
        /* its parts, then their columns of wo (one call per part), by the stored type */
        double b = parts_on(c, lp, r, &np, &nq) +
                   (nq ? (double)config_proj_cols_bytes(c, nq * c->head_dim) : 0);
        a[i] = compute(e, STEP_WORK_ATTN, l, r, b, np, 2 * np, e->got[r]);
    }
    exchange(e, sl, l, a, z);
    for (int i = 0; i < n; i++) {
        int r = sl->members[i];
        a[i] = compute(e, STEP_WORK_FFN, l, r, (double)config_ffn_bytes(c, cols_on(lp, r)), 0,
                       1, z[i]);
    }
    exchange(e, sl, l, a, z);
    hold_only(e, sl->members, z, n);
}

/* A SLICE layer under --exchange exact: four all-gathers of whole values. */
static void exact_layer(Emit *e, const Schedule *s, int l)
{
    const ModelConfig *c = e->c;
    const LayerPlan *lp = &e->plan->layers[l];
    const ScheduleLayer *sl = &s->layers[l];
    const int n = sl->n_members, qd = c->n_heads * c->head_dim;
    int *a = e->tmp, *v = e->tmp2;
    int *rows = xmalloc(2 * (size_t)n * sizeof(int)), *cols = rows + n;
    for (int i = 0; i < n; i++) {
        int d0 = 0, d1 = 0;
        plan_exact_rows(e->plan, c, l, sl->members[i], &d0, &d1);
        rows[i] = d1 - d0;
        cols[i] = cols_on(lp, sl->members[i]);
    }
    input(e, sl, l, STEP_MSG_INPUT);
    for (int i = 0; i < n; i++) {
        int r = sl->members[i], np, nq;
        double b = parts_on(c, lp, r, &np, &nq);
        a[i] = compute(e, STEP_WORK_ATTN, l, r, b, np, np, e->got[r]);
        v[i] = nq * c->head_dim;
    }
    int g = allgather_rows(e, sl, l, STEP_MSG_HEADS, a, v);
    for (int i = 0; i < n; i++) {
        double b = (double)plan_rows_bytes(c, WKIND_WO, rows[i], qd);
        a[i] = compute(e, STEP_WORK_PROJ, l, sl->members[i], b, 0, 1, g);
    }
    g = allgather_rows(e, sl, l, STEP_MSG_ROWS, a, rows);
    for (int i = 0; i < n; i++) {
        double b = (double)plan_rows_bytes(c, WKIND_W_UP, cols[i], c->dim) +
                   (c->arch == ARCH_GPT2 ? 0
                                         : (double)plan_rows_bytes(c, WKIND_W_GATE, cols[i],
                                                                   c->dim));
        a[i] = compute(e, STEP_WORK_FFN, l, sl->members[i], b, 0, 1, g);
    }
    g = allgather_rows(e, sl, l, STEP_MSG_ROWS, a, cols);
    for (int i = 0; i < n; i++) {
        double b = (double)plan_rows_bytes(c, WKIND_W_DOWN, rows[i], c->ffn_dim);
        a[i] = compute(e, STEP_WORK_FFN_DOWN, l, sl->members[i], b, 0, 1, g);
    }
    g = allgather_rows(e, sl, l, STEP_MSG_ROWS, a, rows);
    for (int i = 0; i < n; i++)
        a[i] = g;
    hold_only(e, sl->members, a, n);
    free(rows);
}

/* The final norm's weights (GPT-2: and its bias). */
static double norm_bytes(const ModelConfig *c)
{
    return (c->arch == ARCH_GPT2 ? 2.0 : 1.0) * (double)c->dim * sizeof(float);
}

static void emit_init(Emit *e, StepProgram *prog, const Plan *p, const ModelConfig *c,
                      const StepOptions *o)
{
    memset(prog, 0, sizeof *prog);
    prog->n_layers = p->n_layers;
    prog->n_ranks = p->n_workers + 1;
    prog->last = -1;
    const size_t n = (size_t)prog->n_ranks + (size_t)c->n_heads + 1;
    *e = (Emit){prog, p, c, o, xmalloc(n * sizeof(int)), xmalloc(n * sizeof(int)),
                xmalloc(n * sizeof(int)), xmalloc(n * sizeof(int))};
    for (int r = 0; r < prog->n_ranks; r++)
        e->hold[r] = e->got[r] = -2;
}

static void emit_free(Emit *e)
{
    free(e->hold);
    free(e->got);
    free(e->tmp);
    free(e->tmp2);
}

static void layer(Emit *e, const Schedule *s, int l, int *spec_z)
{
    const LayerPlan *lp = &e->plan->layers[l];
    if (lp->mode == LAYER_SLICE) {
        if (e->plan->exchange == EXCHANGE_EXACT)
            exact_layer(e, s, l);
        else
            slice_layer(e, s, l);
        *spec_z = -1;
        return;
    }
    *spec_z = pipe_layer(e, s, l, *spec_z);
}

void steps_build(StepProgram *prog, const Plan *p, const Schedule *s, const ModelConfig *c,
                 const StepOptions *o)
{
    static const StepOptions none = {WIRE_FORM_F32, NULL};
    Emit e;
    emit_init(&e, prog, p, c, o ? o : &none);
    const int L = p->n_layers;
    e.hold[0] = compute(&e, STEP_WORK_EMBED, -1, 0,
                        (double)plan_rows_bytes(c, WKIND_EMBED, 1, c->dim), 0, 1, -1);
    int spec_z = -1;
    for (int l = 0; l < L; l++)
        layer(&e, s, l, &spec_z);
    if (s->n_head > 0) {
        /* every member of the last layer: the final norm and its rows; gathered at 0 */
        int *h = e.tmp;
        h[0] = -1;
        for (int m = 1; m < s->n_head; m++) {
            const int r = s->head_members[m], rows = s->head_v1[m] - s->head_v0[m];
            h[m] = compute(&e, STEP_WORK_HEAD, L, r,
                           (double)config_head_rows_bytes(c, rows) + norm_bytes(c), 0, 1,
                           e.hold[r]);
        }
        prog->last = begin(&e, STEP_GATHER, STEP_MSG_LOGITS, L);
        member(&e, 0, 0);
        for (int m = 1; m < s->n_head; m++)
            member(&e, s->head_members[m], s->head_v1[m] - s->head_v0[m]);
        for (int m = 1; m < s->n_head; m++)
            dep(&e, h[m]);
    } else {
        input(&e, &s->layers[L], L, STEP_MSG_INPUT);
        prog->last = compute(&e, STEP_WORK_HEAD, L, 0,
                             (double)config_head_rows_bytes(c, c->vocab_size) + norm_bytes(c),
                             0, 1, e.got[0]);
    }
    emit_free(&e);
}

void steps_build_layer(StepProgram *prog, const LayerPlan *lp, const ScheduleLayer *sl,
                       int layer_index, int n_ranks, const ModelConfig *c, const StepOptions *o)
{
    /* a view of one layer: the plan's layer `layer_index` is lp, its schedule entry sl */
    LayerPlan *lps = xcalloc((size_t)layer_index + 1, sizeof(LayerPlan));
    lps[layer_index] = *lp;
    Plan one = {.n_layers = layer_index + 1, .n_workers = n_ranks - 1,
                .exchange = EXCHANGE_ALL, .layers = lps};
    ScheduleLayer *sls = xcalloc((size_t)layer_index + 2, sizeof(ScheduleLayer));
    sls[layer_index] = *sl;
    sls[layer_index].spec_eligible = 0;
    Schedule s = {.n_layers = layer_index + 1, .n_workers = n_ranks - 1, .layers = sls};
    const StepOptions plain = {o ? o->wire : WIRE_FORM_F32, NULL};
    Emit e;
    emit_init(&e, prog, &one, c, &plain);
    for (int i = 0; i < sl->n_holders; i++)
        e.hold[sl->holders[i]] = -1;
    int spec_z = -1;
    layer(&e, &s, layer_index, &spec_z);
    prog->last = prog->n_steps - 1;
    emit_free(&e);
    free(lps);
    free(sls);
}

void steps_free(StepProgram *prog)
{
    if (!prog)
        return;
    free(prog->steps);
    free(prog->members);
    free(prog->values);
    free(prog->deps);
    memset(prog, 0, sizeof *prog);
}

int steps_taken(const Step *st, int accept)
{
    return st->branch == STEP_ALWAYS || (st->branch == STEP_ACCEPT) == (accept != 0);
}

uint64_t steps_step_messages(const StepProgram *prog, const Step *st)
{
    (void)prog;
    const uint64_t n = (uint64_t)st->n_members;
    switch (st->op) {
    case STEP_SEND:
        return 1;
    case STEP_BCAST:
    case STEP_GATHER:
    case STEP_REDUCE:
        return n > 0 ? n - 1 : 0;
    case STEP_ALLGATHER:
    case STEP_SCATTER:
        return n * (n > 0 ? n - 1 : 0);
    default:
        return 0;
    }
}

uint64_t steps_msg_bytes(const StepProgram *prog, const Step *st, int m)
{
    const int64_t *v = steps_values(prog, st);
    const int64_t n = st->op == STEP_SEND || st->op == STEP_BCAST ? v[0] : v[m];
    return sizeof(WireHdr) + wire_form_bytes(st->wire, n);
}

uint64_t steps_step_bytes(const StepProgram *prog, const Step *st)
{
    const uint64_t k = st->n_members > 0 ? (uint64_t)st->n_members - 1 : 0;
    uint64_t b = 0;
    switch (st->op) {
    case STEP_SEND:
        return steps_msg_bytes(prog, st, 0);
    case STEP_BCAST:
        return k * steps_msg_bytes(prog, st, 0);
    case STEP_GATHER:
    case STEP_REDUCE:
        for (int m = 1; m < st->n_members; m++)
            b += steps_msg_bytes(prog, st, m);
        return b;
    case STEP_ALLGATHER: /* each member's to every other */
    case STEP_SCATTER:   /* member m's chunk from every other */
        for (int m = 0; m < st->n_members; m++)
            b += k * steps_msg_bytes(prog, st, m);
        return b;
    default:
        return 0;
    }
}

uint64_t steps_messages(const StepProgram *prog, const unsigned char *accept)
{
    uint64_t n = 0;
    for (int k = 0; k < prog->n_steps; k++) {
        const Step *st = &prog->steps[k];
        int acc = !accept || st->layer < 0 || st->layer >= prog->n_layers || accept[st->layer];
        if (steps_taken(st, acc))
            n += steps_step_messages(prog, st);
    }
    return n;
}

uint64_t steps_bytes(const StepProgram *prog, const unsigned char *accept)
{
    uint64_t n = 0;
    for (int k = 0; k < prog->n_steps; k++) {
        const Step *st = &prog->steps[k];
        int acc = !accept || st->layer < 0 || st->layer >= prog->n_layers || accept[st->layer];
        if (steps_taken(st, acc))
            n += steps_step_bytes(prog, st);
    }
    return n;
}

int steps_step_hops(const StepProgram *prog, const Step *st)
{
    return st->op != STEP_COMPUTE && st->branch == STEP_ALWAYS && st->what != STEP_MSG_SPEC_Z &&
           steps_step_messages(prog, st) > 0;
}

int steps_hops(const StepProgram *prog)
{
    int h = 0;
    for (int k = 0; k < prog->n_steps; k++)
        h += steps_step_hops(prog, &prog->steps[k]);
    return h;
}

double steps_work_bytes(const Step *st, const ModelConfig *c, int pos)
{
    return st->weight_bytes + (double)st->kv_groups * (double)config_kv_bytes(c, pos + 1);
}

const char *steps_op_name(StepOp op)
{
    static const char *n[STEP_OP_COUNT] = {"compute", "send",   "bcast",  "gather",
                                           "allgather", "reduce", "scatter"};
    return op >= 0 && op < STEP_OP_COUNT ? n[op] : "?";
}

const char *steps_what_name(StepWhat w)
{
    static const char *n[STEP_WHAT_COUNT] = {
        "embed", "attn", "spec_attn", "reexec", "proj", "ffn", "ffn_down", "head",
        "input", "spec_z", "heads", "z", "partial", "sum", "rows", "logits"};
    return w >= 0 && w < STEP_WHAT_COUNT ? n[w] : "?";
}

WireForm steps_wire_of_bytes(double wire_bytes)
{
    if (wire_bytes > 0 && wire_bytes < 1.5)
        return WIRE_FORM_Q8;
    if (wire_bytes > 0 && wire_bytes < 3)
        return WIRE_FORM_F16;
    return WIRE_FORM_F32;
}
