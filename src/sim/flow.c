/* flow.c: a token's step program (steps.h, emitted from the plan's schedule: the same one
 * the engine runs and the analytic cost model walks) as a task graph for the event core.
 * Every message carries the 32-byte WireHdr; its payload is in the step's wire form.
 *  - COMPUTE: one op on its rank, the step's bytes (weights by stored type, KV reads at the
 *    flow's position) at the device's speed plus its per-op overhead for each kernel call.
 *  - BCAST: from the root to every other member, linear or binomial as the cluster says.
 *  - GATHER, REDUCE: a message from every other member to the root; SEND: one message.
 *  - ALLGATHER: every member's values to every other; SCATTER: member j's chunk from every
 *    other member to j.
 * A step waits, on each rank, for its dependencies as that rank has them: its own computes,
 * the messages it received (steps.h).  Steps of a speculation branch not taken are left
 * out. */
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
    f->wire = WIRE_FORM_F32;
    f->cap = 2 * (cl->n + 1) + max_parts + 8;
    f->recv = xmalloc((size_t)f->cap * sizeof(int));
}

void flow_free(SimFlow *f)
{
    if (!f)
        return;
    free(f->recv);
    free(f->at);
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

int flow_spec_eligible(const Plan *p, int l) { return schedule_spec_eligible(p, l); }

static SimTag step_tag(const StepProgram *p, const Step *st)
{
    static const SimTag work[STEP_MSG_INPUT] = {SIM_TAG_EMBED, SIM_TAG_ATTN, SIM_TAG_SPEC_ATTN,
                                                SIM_TAG_REEXEC, SIM_TAG_PROJ, SIM_TAG_FFN,
                                                SIM_TAG_FFN, SIM_TAG_HEAD};
    switch (st->what) {
    case STEP_MSG_INPUT:
        return st->layer >= p->n_layers ? SIM_TAG_OUT : SIM_TAG_BCAST;
    case STEP_MSG_SPEC_Z:
        return SIM_TAG_SPEC_BCAST;
    case STEP_MSG_HEADS:
        return st->op == STEP_GATHER ? SIM_TAG_GATHER : SIM_TAG_EXCHANGE;
    case STEP_MSG_Z:
        return SIM_TAG_Z;
    case STEP_MSG_LOGITS:
        return SIM_TAG_OUT;
    case STEP_MSG_PARTIAL:
    case STEP_MSG_SUM:
    case STEP_MSG_ROWS:
        return SIM_TAG_EXCHANGE;
    default:
        return st->what < STEP_MSG_INPUT ? work[st->what] : SIM_TAG_JOIN;
    }
}

/* Makes op wait for step st's dependencies as rank r has them. */
static void deps_at(SimFlow *f, const StepProgram *p, const Step *st, int r, int op)
{
    const int *dv = steps_deps(p, st);
    for (int i = 0; i < st->n_deps; i++)
        des_dep(f->d, f->at[(size_t)dv[i] * (size_t)p->n_ranks + (size_t)r], op);
}

/* Number of dependency ops of st at rank r. */
static int n_deps_at(const SimFlow *f, const StepProgram *p, const Step *st, int r)
{
    const int *dv = steps_deps(p, st);
    int n = 0;
    for (int i = 0; i < st->n_deps; i++)
        n += f->at[(size_t)dv[i] * (size_t)p->n_ranks + (size_t)r] >= 0;
    return n;
}

/* One op after which rank r has st's dependencies (-1: none): the dependency itself, or a
 * join of several. */
static int ready_at(SimFlow *f, const StepProgram *p, const Step *st, int r)
{
    const int *dv = steps_deps(p, st);
    if (n_deps_at(f, p, st, r) == 1)
        for (int i = 0; i < st->n_deps; i++) {
            int op = f->at[(size_t)dv[i] * (size_t)p->n_ranks + (size_t)r];
            if (op >= 0)
                return op;
        }
    if (n_deps_at(f, p, st, r) == 0)
        return -1;
    int j = des_join(f->d, st->layer);
    deps_at(f, p, st, r, j);
    return j;
}

/* The events of message step st (index k): each message waits for its sender's
 * dependencies; each receiver's join waits for its messages and its own dependencies. */
static void flow_message(SimFlow *f, const StepProgram *p, const Step *st, int *at)
{
    SimDes *d = f->d;
    const int n = st->n_members, *m = steps_members(p, st);
    const SimTag tag = step_tag(p, st);
    if (st->op == STEP_BCAST) {
        flow_bcast(f, tag, st->layer, m, n, ready_at(f, p, st, m[0]),
                   (double)steps_msg_bytes(p, st, 0), f->recv);
        for (int i = 0; i < n; i++)
            at[m[i]] = f->recv[i];
        return;
    }
    if (st->op == STEP_SEND) {
        int x = des_msg(d, tag, st->layer, m[0], m[1], (double)steps_msg_bytes(p, st, 0));
        deps_at(f, p, st, m[0], x);
        at[m[0]] = ready_at(f, p, st, m[0]);
        at[m[1]] = x;
        return;
    }
    /* many to one (GATHER, REDUCE) or every member to every other (ALLGATHER, SCATTER) */
    const int to_all = st->op == STEP_ALLGATHER || st->op == STEP_SCATTER;
    for (int j = 0; j < n; j++) {
        if (!to_all && j > 0) {
            at[m[j]] = ready_at(f, p, st, m[j]);
            continue;
        }
        at[m[j]] = des_join(d, st->layer);
        deps_at(f, p, st, m[j], at[m[j]]);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j || (!to_all && (j != 0 || i == 0)))
                continue;
            const double b = (double)steps_msg_bytes(p, st, st->op == STEP_SCATTER ? j : i);
            int x = des_msg(d, tag, st->layer, m[i], m[j], b);
            deps_at(f, p, st, m[i], x);
            des_dep(d, x, at[m[j]]);
        }
}

int flow_steps(SimFlow *f, const StepProgram *prog, const unsigned char *accept)
{
    const size_t n = (size_t)prog->n_ranks, need = (size_t)prog->n_steps * n;
    CHECK(prog->n_ranks <= f->cl->n, "a plan of %d ranks on a cluster of %d", prog->n_ranks,
          f->cl->n);
    if ((size_t)f->cap_at < need) {
        f->cap_at = (int)need;
        f->at = xrealloc(f->at, need * sizeof(int));
    }
    for (size_t i = 0; i < need; i++)
        f->at[i] = -1;
    for (int k = 0; k < prog->n_steps; k++) {
        const Step *st = &prog->steps[k];
        const int acc = !accept || st->layer < 0 || st->layer >= prog->n_layers ||
                        accept[st->layer];
        if (!steps_taken(st, acc))
            continue;
        int *at = f->at + (size_t)k * n;
        if (st->op != STEP_COMPUTE) {
            flow_message(f, prog, st, at);
            continue;
        }
        const ClusterDevice *dv = &f->cl->dev[st->rank];
        const double t = steps_work_bytes(st, f->c, f->pos) / dv->speed_Bps +
                         st->n_ops * dv->op_overhead_s;
        at[st->rank] = des_compute(f->d, step_tag(prog, st), st->layer, st->rank, t);
        deps_at(f, prog, st, st->rank, at[st->rank]);
    }
    const Step *last = &prog->steps[prog->last];
    const int r = last->op == STEP_COMPUTE ? last->rank : steps_members(prog, last)[0];
    return f->at[(size_t)prog->last * n + (size_t)r];
}

int flow_layer(SimFlow *f, const LayerPlan *lp, int l, int producer)
{
    ScheduleLayer sl;
    schedule_layer(&sl, lp, l, &producer, 1, producer, f->c);
    StepProgram prog;
    const StepOptions o = {f->wire, NULL};
    steps_build_layer(&prog, lp, &sl, l, f->cl->n, f->c, &o);
    int op = flow_steps(f, &prog, NULL);
    steps_free(&prog);
    schedule_layer_free(&sl);
    return op;
}

int flow_token(SimFlow *f, const Plan *p, const unsigned char *spec)
{
    Schedule s;
    plan_schedule(&s, p, f->c);
    unsigned char *mask = xcalloc((size_t)p->n_layers + 1, 2);
    unsigned char *accept = mask + p->n_layers + 1;
    for (int l = 0; l < p->n_layers; l++) {
        mask[l] = spec && l > 0 && spec[l] != FLOW_SPEC_NONE;
        accept[l] = !spec || spec[l] != FLOW_SPEC_REJECT;
    }
    StepProgram prog;
    const StepOptions o = {f->wire, mask};
    steps_build(&prog, p, &s, f->c, &o);
    int last = flow_steps(f, &prog, accept);
    steps_free(&prog);
    free(mask);
    schedule_free(&s);
    return last;
}
