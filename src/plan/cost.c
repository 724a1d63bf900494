/* cost.c: the analytic cost model shared by --partition auto and the link-aware placement:
 * predicted time of one token along the critical path of a plan, a closed-form walk of the
 * token's step program (steps.h: the one the simulator's events and the engine's messages
 * come from); its pieces (one PIPE layer, a hop, the controller's work) for the solvers; and
 * the cost interface (cost.h) over any model. */
#include "cost.h"
#include "netmodel.h"
#include "plan.h"
#include "plan_internal.h"
#include "schedule.h"
#include "solver.h"
#include "steps.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const ModelConfig *c;
    const PlanRequest *req;
    int n; /* world size = n_workers + 1 */
    NetLink net; /* the medium and bandwidth of req (netmodel.h) */
    int shared;
    double chan; /* shared medium: ms at which the channel is next free */
    int pos;     /* the position whose KV reads the work includes */
    int *order;  /* [n] scratch: senders in order of readiness */
    double *ready, *arr, *free_at; /* [n] scratch: a step's readiness and arrivals by rank;
                                    * when each rank's compute is free */
    int *n_in;   /* [n] messages each rank receives in a step */
    double *at;  /* [n_steps * n] when rank r has step k's result (-1: not) */
    CostTally *tally;
} Cost;

/* The fastest worker's speed_Bps (0: no cluster, or no worker's speed known). */
static double fastest_Bps(const Cluster *cl)
{
    double ref = 0;
    for (int r = 1; cl && r < cl->n; r++)
        ref = cl->dev[r].speed_Bps > ref ? cl->dev[r].speed_Bps : ref;
    return ref;
}

double plan_req_speed(const PlanRequest *req, int rank)
{
    const Cluster *cl = req->cluster;
    if (!cl || rank < 1)
        return 1.0;
    double ref = fastest_Bps(cl), sp = ref > 0 ? cl->dev[rank].speed_Bps / ref : 0;
    return sp > 0 ? sp : 1.0;
}

double plan_req_ref_Bps(const PlanRequest *req)
{
    double ref = req->ref_Bps > 0 ? req->ref_Bps : fastest_Bps(req->cluster);
    return ref > 0 ? ref : 10e9;
}

size_t plan_req_budget(const PlanRequest *req, int rank)
{
    return req->cluster ? req->cluster->dev[rank].mem_budget : 0;
}

int plan_req_links(const PlanRequest *req)
{
    return req->cluster && req->cluster->link;
}

double plan_req_lat_ms(const PlanRequest *req, int a, int b)
{
    if (a == b || !plan_req_links(req))
        return 0;
    return net_latency_s(cluster_link(req->cluster, a, b)) * 1e3;
}

NetLink plan_cost_net(const PlanRequest *req)
{
    NetLink net = {0};
    if (!plan_req_links(req))
        return net;
    const Cluster *cl = req->cluster;
    const int n = cl->n;
    for (int a = 0; a < n; a++) /* the slowest link's bandwidth */
        for (int b = 0; b < n; b++) {
            const NetLink *lk = cluster_link(cl, a, b);
            if (a != b && lk->bw_Bps > 0 && (net.bw_Bps == 0 || lk->bw_Bps < net.bw_Bps))
                net.bw_Bps = lk->bw_Bps;
        }
    /* the medium of link 0 -> 1, so that the planner charges the airtime the event core
     * does */
    const NetLink *l01 = n > 1 ? cluster_link(cl, 0, 1) : NULL;
    if (l01 && l01->medium == MEDIUM_SHARED) {
        net.medium = MEDIUM_SHARED;
        net.relay_ap = l01->relay_ap;
        net.frame_s = l01->frame_s;
    }
    return net;
}

double plan_cost_work_ms(const PlanRequest *req, int rank, double bytes)
{
    return bytes / (plan_req_ref_Bps(req) * plan_req_speed(req, rank)) * 1e3;
}

double plan_cost_hop_ms(const PlanRequest *req, int a, int b, double bytes)
{
    if (a == b)
        return 0;
    NetLink net = plan_cost_net(req);
    return plan_req_lat_ms(req, a, b) + net_airtime_s(&net, bytes) * 1e3;
}

double plan_expected_max_normal(int n)
{
    /* Exact values to 16 (order statistics of the normal), then 0.75 sqrt(2 ln n), which
     * meets the table at 16 and stays within 6% of the true value to a few hundred. */
    static const double t[17] = {0,      0,      0.5642, 0.8463, 1.0294, 1.1630,
                                 1.2672, 1.3522, 1.4236, 1.4850, 1.5388, 1.5864,
                                 1.6292, 1.6680, 1.7034, 1.7359, 1.7660};
    if (n <= 16)
        return n < 1 ? 0 : t[n];
    return 0.75 * sqrt(2.0 * log((double)n));
}

/* Expected extra wait, beyond the mean latency, for the slowest of n messages. */
static double spread_ms(const Cost *k, int n)
{
    return k->req->lat_sd_ms > 0 ? k->req->lat_sd_ms * plan_expected_max_normal(n) : 0;
}

static double work_ms(const Cost *k, int rank, double bytes)
{
    return plan_cost_work_ms(k->req, rank, bytes);
}

static double hop_ms(const Cost *k, int a, int b, double bytes)
{
    return plan_cost_hop_ms(k->req, a, b, bytes);
}

static double lat_ms(const Cost *k, int a, int b)
{
    return plan_req_lat_ms(k->req, a, b);
}

/* Shared medium: a message from a to b ready at `ready` (ms) queues on the channel; returns
 * when it arrives. */
static double queued_ms(Cost *k, int a, int b, double ready, double bytes)
{
    if (a == b)
        return ready;
    return net_queue_s(&k->chan, ready, net_airtime_s(&k->net, bytes) * 1e3) + lat_ms(k, a, b);
}

/* A walk over n ranks (scratch allocated; cost_free frees it). */
static void cost_init(Cost *k, const ModelConfig *c, const PlanRequest *req, int n)
{
    memset(k, 0, sizeof *k);
    k->c = c;
    k->req = req;
    k->n = n;
    k->net = plan_cost_net(req);
    k->shared = net_is_shared(&k->net);
    k->order = xcalloc((size_t)n, sizeof(int));
    k->n_in = xcalloc((size_t)n, sizeof(int));
    k->ready = xcalloc((size_t)n, sizeof(double));
    k->arr = xcalloc((size_t)n, sizeof(double));
    k->free_at = xcalloc((size_t)n, sizeof(double));
}

static void cost_free(Cost *k)
{
    free(k->order);
    free(k->n_in);
    free(k->ready);
    free(k->arr);
    free(k->free_at);
    free(k->at);
}

/* When rank r has step st's dependencies (0: from the start). */
static double ready_at(const Cost *k, const StepProgram *p, const Step *st, int r)
{
    const int *d = steps_deps(p, st);
    double t = 0;
    for (int i = 0; i < st->n_deps; i++) {
        double v = k->at[(size_t)d[i] * (size_t)k->n + (size_t)r];
        t = v > t ? v : t;
    }
    return t;
}

/* Ms of a compute step on its rank: the controller's LM head is req->fixed_ms (its measured
 * speed), its embedding free; a worker streams the step's bytes (weights by stored type and
 * KV reads) at its speed and pays req->op_ms per kernel call. */
static double step_work_ms(const Cost *k, const Step *st)
{
    if (st->rank == 0 && st->what == STEP_WORK_HEAD)
        return k->req->fixed_ms > 0 ? k->req->fixed_ms : 0;
    if (st->rank == 0 && st->what == STEP_WORK_EMBED)
        return 0;
    const double op = k->req->op_ms > 0 ? k->req->op_ms : 0;
    return work_ms(k, st->rank, steps_work_bytes(st, k->c, k->pos)) + st->n_ops * op;
}

/* One message a -> b of `bytes` ready at `ready`: when it arrives (switched: its own hop;
 * shared: queued on the channel). */
static double send_ms(Cost *k, int a, int b, double ready, double bytes)
{
    if (k->tally) {
        k->tally->bytes += bytes;
        k->tally->messages += 1;
    }
    return k->shared ? queued_ms(k, a, b, ready, bytes) : ready + hop_ms(k, a, b, bytes);
}

/* A message step: every sender's messages leave when it has the step's dependencies (on a
 * shared medium the senders take the channel in order of readiness, each to its receivers in
 * member order); a receiver has the step when it has its own dependencies and every message
 * to it, plus the expected spread of the slowest of several.  at[]: by rank. */
static void walk_message(Cost *k, const StepProgram *p, const Step *st, double *at)
{
    const int n = st->n_members, *m = steps_members(p, st);
    const int to_all = st->op == STEP_ALLGATHER || st->op == STEP_SCATTER;
    const int one_to_many = st->op == STEP_BCAST || st->op == STEP_SEND;
    for (int i = 0; i < n; i++) {
        k->ready[m[i]] = ready_at(k, p, st, m[i]);
        k->arr[m[i]] = k->ready[m[i]];
        k->n_in[m[i]] = 0;
        k->order[i] = i;
    }
    /* senders by readiness on a shared medium (insertion sort: stable, n is a group) */
    for (int i = 1; k->shared && i < n; i++) {
        int v = k->order[i], j = i;
        for (; j > 0 && k->ready[m[k->order[j - 1]]] > k->ready[m[v]]; j--)
            k->order[j] = k->order[j - 1];
        k->order[j] = v;
    }
    for (int oi = 0; oi < n; oi++) {
        const int i = k->order[oi];
        if (one_to_many ? i != 0 : !to_all && i == 0)
            continue;
        for (int j = 0; j < n; j++) {
            if (j == i || (!to_all && !one_to_many && j != 0))
                continue;
            const int vi = one_to_many ? 0 : st->op == STEP_SCATTER ? j : i;
            double v = send_ms(k, m[i], m[j], k->ready[m[i]],
                               (double)steps_msg_bytes(p, st, vi));
            k->arr[m[j]] = v > k->arr[m[j]] ? v : k->arr[m[j]];
            k->n_in[m[j]]++;
        }
    }
    for (int i = 0; i < n; i++)
        at[m[i]] = k->arr[m[i]] + spread_ms(k, k->n_in[m[i]]);
}

/* Walks a step program: each step ends at its dependencies as its ranks have them (computes
 * one after another on a rank); accept[l]: speculation into l kept (NULL: kept).  Returns
 * when the controller has the last step's result, ms from 0. */
static double walk(Cost *k, const StepProgram *p, const unsigned char *accept)
{
    const size_t n = (size_t)k->n;
    free(k->at);
    k->at = xmalloc(((size_t)p->n_steps * n + 1) * sizeof(double));
    for (size_t i = 0; i < (size_t)p->n_steps * n; i++)
        k->at[i] = -1;
    memset(k->free_at, 0, n * sizeof(double));
    for (int s = 0; s < p->n_steps; s++) {
        const Step *st = &p->steps[s];
        const int acc = !accept || st->layer < 0 || st->layer >= p->n_layers ||
                        accept[st->layer];
        if (!steps_taken(st, acc))
            continue;
        double *at = k->at + (size_t)s * n;
        if (st->op != STEP_COMPUTE) {
            walk_message(k, p, st, at);
            if (k->tally)
                k->tally->hops += steps_step_hops(p, st);
            continue;
        }
        const int r = st->rank;
        double t0 = ready_at(k, p, st, r);
        t0 = t0 > k->free_at[r] ? t0 : k->free_at[r];
        at[r] = k->free_at[r] = t0 + step_work_ms(k, st);
    }
    const Step *last = &p->steps[p->last];
    const int r = last->op == STEP_COMPUTE ? last->rank : steps_members(p, last)[0];
    return k->at[(size_t)p->last * n + (size_t)r];
}

double cost_predict_tally(const Plan *plan, const ModelConfig *c, const PlanRequest *req,
                          const unsigned char *accept, CostTally *tally)
{
    Cost k;
    cost_init(&k, c, req, plan->n_workers + 1);
    k.tally = tally;
    if (tally)
        memset(tally, 0, sizeof *tally);
    Schedule s;
    plan_schedule(&s, plan, c);
    const StepOptions o = {steps_wire_of_bytes(req->wire_bytes), req->speculate};
    StepProgram prog;
    steps_build(&prog, plan, &s, c, &o);
    double t = walk(&k, &prog, accept);
    steps_free(&prog);
    schedule_free(&s);
    cost_free(&k);
    return t;
}

double plan_predict_ms(const Plan *plan, const ModelConfig *c, const PlanRequest *req)
{
    if (!req->speculate)
        return cost_predict_tally(plan, c, req, NULL, NULL);
    /* speculation: kept with probability spec_accept at every transition that speculates,
     * priced as the mixture of all kept and all rejected */
    unsigned char *rej = xcalloc((size_t)plan->n_layers + 1, 1);
    const double p = req->spec_accept >= 0 && req->spec_accept <= 1 ? req->spec_accept : 1;
    double t = p * cost_predict_tally(plan, c, req, NULL, NULL) +
               (1 - p) * cost_predict_tally(plan, c, req, rej, NULL);
    free(rej);
    return t;
}

static double analytic_token_ms(const void *ctx, const Plan *plan, const ModelConfig *c)
{
    return plan_predict_ms(plan, c, (const PlanRequest *)ctx);
}

static double analytic_token_s(const void *ctx, const Plan *plan, const ModelConfig *c)
{
    return plan_predict_ms(plan, c, (const PlanRequest *)ctx) / 1e3;
}

/* One PIPE layer from producer, as plan_predict_ms walks it (the channel free at 0). */
static double analytic_layer_s(const void *ctx, const LayerPlan *lp, int producer,
                               const ModelConfig *c)
{
    const PlanRequest *req = ctx;
    Cost k;
    cost_init(&k, c, req, req->n_workers + 1);
    ScheduleLayer sl;
    schedule_layer(&sl, lp, 0, &producer, 1, producer, c);
    const StepOptions o = {steps_wire_of_bytes(req->wire_bytes), NULL};
    StepProgram prog;
    steps_build_layer(&prog, lp, &sl, 0, k.n, c, &o);
    double t = walk(&k, &prog, NULL);
    steps_free(&prog);
    schedule_layer_free(&sl);
    cost_free(&k);
    return t / 1e3;
}

static double analytic_hop_s(const void *ctx, int a, int b, const ModelConfig *c)
{
    return plan_cost_hop_ms((const PlanRequest *)ctx, a, b, 32.0 + 4.0 * c->dim) / 1e3;
}

static double analytic_controller_s(const void *ctx, int embed, const ModelConfig *c)
{
    (void)c;
    const PlanRequest *req = ctx;
    return embed || !(req->fixed_ms > 0) ? 0 : req->fixed_ms / 1e3;
}

static double analytic_ffn_s(const void *ctx, int rank, const ModelConfig *c)
{
    return plan_cost_work_ms((const PlanRequest *)ctx, rank,
                             (double)config_ffn_bytes(c, c->ffn_dim)) / 1e3;
}

CostModel cost_model_analytic(const PlanRequest *req)
{
    return (CostModel){.name = "analytic", .token_ms = analytic_token_ms,
                       .token_s = analytic_token_s, .layer_s = analytic_layer_s,
                       .hop_s = analytic_hop_s, .controller_s = analytic_controller_s,
                       .ffn_s = analytic_ffn_s, .ctx = req};
}

double cost_token_ms(const CostModel *m, const Plan *plan, const ModelConfig *c)
{
    return m->token_ms(m->ctx, plan, c);
}

double cost_token_s(const CostModel *m, const Plan *plan, const ModelConfig *c)
{
    return m->token_s(m->ctx, plan, c);
}

double cost_layer_s(const CostModel *m, const LayerPlan *lp, int producer, const ModelConfig *c)
{
    return m->layer_s(m->ctx, lp, producer, c);
}

double cost_hop_s(const CostModel *m, int a, int b, const ModelConfig *c)
{
    return m->hop_s(m->ctx, a, b, c);
}

double cost_controller_s(const CostModel *m, int embed, const ModelConfig *c)
{
    return m->controller_s(m->ctx, embed, c);
}

double cost_ffn_s(const CostModel *m, int rank, const ModelConfig *c)
{
    return m->ffn_s(m->ctx, rank, c);
}

/* The best layer-wise plan over subsets of cl's devices, by m (solver_layer_dp); -1 when
 * none fits. */
static double best_layer_dp(Plan *p, const ModelConfig *c, const CostModel *m,
                            const Cluster *cl, int kv_positions)
{
    SolverRequest sreq = {kv_positions, 2000000, 0};
    SolverStats st;
    char e[256];
    if (solver_layer_dp(p, &st, c, cl, m, &sreq, e, sizeof e) < 0)
        return -1;
    return cost_token_ms(m, p, c);
}

int cost_build_best(Plan *plan, const ModelConfig *c, const PlanRequest *req,
                    const CostModel *m, const Cluster *cl, int kv_positions, double *pred_ms,
                    double *preds, int *layer_dp, char *err, size_t errlen)
{
    static const Partition parts[3] = {PARTITION_LAYER, PARTITION_HEAD, PARTITION_SLICE};
    static const PlacementKind places[3] = {PLACEMENT_LAYER, PLACEMENT_GREEDY, PLACEMENT_GREEDY};
    double t0 = time_now(), best = -1;
    int have = 0;
    char last_err[256] = "";
    memset(plan, 0, sizeof *plan);
    if (layer_dp)
        *layer_dp = 0;
    for (int i = 0; i < 3; i++) {
        PlanRequest r = *req;
        r.partition = parts[i];
        r.placement = places[i];
        Plan p;
        double v = -1;
        if (plan_build(&p, c, &r, last_err, sizeof last_err) == 0)
            v = cost_token_ms(m, &p, c);
        else
            memset(&p, 0, sizeof p);
        if (i == 0 && cl) { /* the best layer-wise plan where it beats the naive stages */
            Plan d;
            double vd = best_layer_dp(&d, c, m, cl, kv_positions);
            if (vd >= 0 && (v < 0 || vd < v)) {
                plan_free(&p);
                p = d;
                v = vd;
                if (layer_dp)
                    *layer_dp = 1;
            } else if (vd >= 0) {
                plan_free(&d);
            }
        }
        if (v >= 0) {
            /* Candidates come simplest first: another must be predicted 1% faster, so that
             * near-identical plans (heads kept with their FFN on a slow network) stay
             * layer-wise. */
            if (!have || v < best * 0.99) {
                if (have)
                    plan_free(plan);
                *plan = p;
                best = v;
                have = 1;
            } else {
                plan_free(&p);
            }
        }
        if (preds)
            preds[i] = v;
    }
    if (!have)
        return util_err(err, errlen, "no candidate placement fits: %s", last_err);
    if (layer_dp && plan->partition != PARTITION_LAYER)
        *layer_dp = 0;
    plan->build_ms = (time_now() - t0) * 1e3;
    if (pred_ms)
        *pred_ms = best;
    return 0;
}

int plan_build_auto(Plan *plan, const ModelConfig *c, const PlanRequest *req,
                    const Cluster *cl, int kv_positions, double *pred_ms, double *preds,
                    int *layer_dp, char *err, size_t errlen)
{
    /* The analytic model reads only req's devices and links, which every candidate shares. */
    CostModel m = cost_model_analytic(req);
    return cost_build_best(plan, c, req, &m, cl, kv_positions, pred_ms, preds, layer_dp, err,
                           errlen);
}
