/* cost.c: the analytic cost model shared by --partition auto and the link-aware placement:
 * predicted time of one token along the critical path of a plan; its pieces (one PIPE layer,
 * a hop, the controller's work) for the solvers; and the cost interface (cost.h) over any
 * model. */
#include "cost.h"
#include "netmodel.h"
#include "plan.h"
#include "plan_internal.h"
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
    int *order;  /* [n] scratch: ranks in order of readiness */
    int *members; /* [n] scratch: a SLICE layer's members */
    int *need;    /* [n] scratch: the consumers of a layer's input */
    double *arr, *at; /* [n] scratch: arrivals, readiness by rank */
} Cost;

NetLink plan_cost_net(const PlanRequest *req)
{
    return (NetLink){.bw_Bps = req->bw_Bps, .medium = req->medium, .relay_ap = req->relay_ap,
                     .frame_s = req->frame_s};
}

double plan_cost_work_ms(const PlanRequest *req, int rank, double bytes)
{
    double ref = req->ref_Bps > 0 ? req->ref_Bps : 10e9;
    double sp = rank > 0 && req->devices && req->devices[rank - 1].speed > 0
                    ? req->devices[rank - 1].speed : 1.0;
    return bytes / (ref * sp) * 1e3;
}

double plan_cost_hop_ms(const PlanRequest *req, int a, int b, double bytes)
{
    if (a == b)
        return 0;
    int n = req->n_workers + 1;
    double lat = req->lat_ms ? req->lat_ms[(size_t)a * (size_t)n + (size_t)b] : 0;
    NetLink net = plan_cost_net(req);
    return lat + net_airtime_s(&net, bytes) * 1e3;
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
    return a == b || !k->req->lat_ms ? 0 : k->req->lat_ms[(size_t)a * (size_t)k->n + (size_t)b];
}

/* Shared medium: a message from a to b ready at `ready` (ms) queues on the channel; returns
 * when it arrives. */
static double queued_ms(Cost *k, int a, int b, double ready, double bytes)
{
    if (a == b)
        return ready;
    return net_queue_s(&k->chan, ready, net_airtime_s(&k->net, bytes) * 1e3) + lat_ms(k, a, b);
}

/* Sorts the ranks r[0..n) by at[r] ascending, ties in the given order (insertion sort: n is
 * a layer's members). */
static void sort_by(int *r, int n, const double *at)
{
    for (int i = 1; i < n; i++) {
        int v = r[i], j = i;
        for (; j > 0 && at[r[j - 1]] > at[v]; j--)
            r[j] = r[j - 1];
        r[j] = v;
    }
}

static double part_bytes(const ModelConfig *c, const AttnPart *p, int slice)
{
    double b = (double)config_attn_unit_bytes(c, p->q1 - p->q0);
    if (slice)
        b += (double)c->dim * (double)((p->q1 - p->q0) * c->head_dim) * 4.0;
    return b;
}

/* One phase of messages: every rank of from[0..nf) sends `bytes` to every other rank of
 * to[0..nt) when it is ready (at[sender]); arr[receiver] becomes the last arrival (a rank in
 * both lists counts its own readiness).  Switched: each message its own hop; shared: the
 * transmissions queue on the channel in order of readiness.  Returns the last arrival. */
static double phase_ms(Cost *k, const int *from, int nf, const double *at, const int *to,
                       int nt, double bytes, double *arr)
{
    double t = 0;
    for (int j = 0; j < nt; j++)
        arr[to[j]] = 0;
    for (int i = 0; i < nf; i++)
        k->order[i] = from[i];
    if (k->shared)
        sort_by(k->order, nf, at);
    for (int i = 0; i < nf; i++)
        for (int j = 0; j < nt; j++) {
            int a = k->order[i], b = to[j];
            double v = a == b       ? at[a]
                       : k->shared ? queued_ms(k, a, b, at[a], bytes)
                                   : at[a] + hop_ms(k, a, b, bytes);
            arr[b] = v > arr[b] ? v : arr[b];
            t = v > t ? v : t;
        }
    return t;
}

/* A SLICE exchange of partial sums (xmsg bytes on the wire, payload wire_bytes per element,
 * the sums on their way back too): when the last member has the sum, without the spread of
 * the first wait (the caller's). */
static double exchange_ms(Cost *k, SliceExchange x, const LayerPlan *lp, const double *busy,
                          double wire_bytes)
{
    const int n = lp->n_slices;
    const double dim = (double)k->c->dim;
    int *m = k->members;
    for (int j = 0; j < n; j++)
        m[j] = lp->slices[j].rank;
    if (n < 2 || x == EXCHANGE_AUTO || x == EXCHANGE_ALL)
        return phase_ms(k, m, n, busy, m, n, 32.0 + wire_bytes * dim, k->arr);
    if (x == EXCHANGE_REDUCE) {
        /* to the first member, which adds once all have arrived and sends the sum back */
        double root = phase_ms(k, m + 1, n - 1, busy, m, 1, 32.0 + wire_bytes * dim, k->arr);
        root = root > busy[m[0]] ? root : busy[m[0]];
        k->at[m[0]] = root + spread_ms(k, n - 1);
        return phase_ms(k, m, 1, k->at, m, n, 32.0 + wire_bytes * dim, k->arr);
    }
    /* RSAG: chunks of dim/n to their owners, each owner's sum to every member */
    phase_ms(k, m, n, busy, m, n, 32.0 + wire_bytes * dim / n, k->arr);
    for (int j = 0; j < n; j++)
        k->at[m[j]] = k->arr[m[j]] + spread_ms(k, n - 1);
    return phase_ms(k, m, n, k->at, m, n, 32.0 + wire_bytes * dim / n, k->arr);
}

/* An --exchange exact SLICE layer whose members have its input at busy[] (in: ready; out:
 * scratch): attention, then four all-gather rounds (head outputs, Z rows, the FFN's hidden
 * slices, X' rows; every member sends its 1/n to every other), each after the member's
 * work (wo rows, gate/up rows, w_down rows).  Returns when the last member has X'. */
static double exact_layer_ms(Cost *k, const Plan *plan, int l, double *busy)
{
    const ModelConfig *c = k->c;
    const LayerPlan *lp = &plan->layers[l];
    const int n = lp->n_slices, qd = c->n_heads * c->head_dim;
    const double width[4] = {qd, c->dim, c->ffn_dim, c->dim}; /* the rounds' rows */
    int *m = k->members;
    for (int j = 0; j < n; j++)
        m[j] = lp->slices[j].rank;
    double t = 0;
    for (int round = 0; round < 4; round++) {
        if (round > 0)
            for (int j = 0; j < n; j++) {
                const int f = lp->slices[j].f1 - lp->slices[j].f0;
                int d0 = 0, d1 = 0;
                plan_exact_rows(plan, c, l, m[j], &d0, &d1);
                double b = round == 1 ? (double)plan_rows_bytes(c, WKIND_WO, d1 - d0, qd)
                           : round == 2
                               ? (double)plan_rows_bytes(c, WKIND_W_UP, f, c->dim) +
                                     (c->arch == ARCH_GPT2
                                          ? 0
                                          : (double)plan_rows_bytes(c, WKIND_W_GATE, f, c->dim))
                               : (double)plan_rows_bytes(c, WKIND_W_DOWN, d1 - d0, c->ffn_dim);
                busy[m[j]] = t + work_ms(k, m[j], b);
            }
        t = phase_ms(k, m, n, busy, m, n, 32.0 + 4.0 * width[round] / n, k->arr) +
            spread_ms(k, n - 1);
    }
    return t;
}

/* A cost walk over n ranks (scratch allocated; cost_free frees it). */
static void cost_init(Cost *k, const ModelConfig *c, const PlanRequest *req, int n)
{
    *k = (Cost){c, req, n, plan_cost_net(req), 0, 0, NULL, NULL, NULL, NULL, NULL};
    k->shared = net_is_shared(&k->net);
    k->order = xcalloc((size_t)n, sizeof(int));
    k->members = xcalloc((size_t)n, sizeof(int));
    k->need = xcalloc((size_t)n, sizeof(int));
    k->arr = xcalloc((size_t)n, sizeof(double));
    k->at = xcalloc((size_t)n, sizeof(double));
}

static void cost_free(Cost *k)
{
    free(k->order);
    free(k->members);
    free(k->need);
    free(k->arr);
    free(k->at);
}

/* When each rank has layer lp's input (ready[]): the holders (has[]) at t, the others from
 * root, the designated holder (on a shared medium the root's transmissions to the consumers
 * queue, in rank order). */
static void layer_input(Cost *k, const LayerPlan *lp, int root, double t, const int *has,
                        double *ready)
{
    const double msg = 32.0 + 4.0 * k->c->dim;
    int *need = k->need;
    if (!k->shared) {
        for (int r = 0; r < k->n; r++)
            ready[r] = has[r] ? t : t + hop_ms(k, root, r, msg);
        return;
    }
    memset(need, 0, (size_t)k->n * sizeof(int));
    if (lp->mode == LAYER_SLICE)
        for (int j = 0; j < lp->n_slices; j++)
            need[lp->slices[j].rank] = 1;
    else
        for (int p = 0; p < lp->n_parts; p++)
            need[lp->parts[p].rank] = 1;
    if (lp->mode != LAYER_SLICE)
        need[lp->proj_rank] = 1;
    for (int r = 0; r < k->n; r++)
        ready[r] = has[r] || !need[r] ? t : queued_ms(k, root, r, t, msg);
}

/* A PIPE layer whose ranks have its input at ready[] (busy[]: scratch, zeroed): parts in
 * parallel across ranks, serial on one rank; the gather at the projection rank (on a shared
 * medium the senders' transmissions queue in order of readiness), Z, the FFN.  Returns when
 * the FFN ends. */
static double pipe_layer(Cost *k, const LayerPlan *lp, const double *ready, double *busy)
{
    const ModelConfig *c = k->c;
    const double msg = 32.0 + 4.0 * c->dim;
    double gathered = ready[lp->proj_rank];
    int senders = 0;
    for (int r = 1; r < k->n; r++) {
        double done = ready[r];
        int any = 0;
        for (int p = 0; p < lp->n_parts; p++)
            if (lp->parts[p].rank == r) {
                done += work_ms(k, r, part_bytes(c, &lp->parts[p], 0));
                any = 1;
            }
        busy[r] = done;
        if (!any)
            continue;
        if (k->shared && r != lp->proj_rank) {
            k->order[senders++] = r;
            continue;
        }
        double v = done + hop_ms(k, r, lp->proj_rank, msg);
        gathered = v > gathered ? v : gathered;
        senders += r != lp->proj_rank;
    }
    if (k->shared) {
        sort_by(k->order, senders, busy);
        for (int i = 0; i < senders; i++) {
            double v = queued_ms(k, k->order[i], lp->proj_rank, busy[k->order[i]], msg);
            gathered = v > gathered ? v : gathered;
        }
    }
    gathered += spread_ms(k, senders);
    double z = gathered + work_ms(k, lp->proj_rank, (double)config_proj_bytes(c));
    z = k->shared ? queued_ms(k, lp->proj_rank, lp->ffn_rank, z, msg)
                  : z + hop_ms(k, lp->proj_rank, lp->ffn_rank, msg);
    return z + work_ms(k, lp->ffn_rank, (double)config_ffn_bytes(c, c->ffn_dim));
}

double plan_predict_ms(const Plan *plan, const ModelConfig *c, const PlanRequest *req)
{
    Cost k;
    cost_init(&k, c, req, plan->n_workers + 1);
    const double msg = 32.0 + 4.0 * c->dim;
    /* a SLICE partial sum's elements as --wire sends them */
    const double wire = req->wire_bytes > 0 ? req->wire_bytes : 4.0;
    double *ready = xcalloc((size_t)k.n, sizeof(double)); /* when each rank has X */
    double *busy = xcalloc((size_t)k.n, sizeof(double));  /* when each rank is free */
    int *has = xcalloc((size_t)k.n, sizeof(int));         /* holds the current X */
    has[0] = 1;
    double t = 0; /* time X of the current layer exists at its holders */
    for (int l = 0; l < plan->n_layers; l++) {
        const LayerPlan *lp = &plan->layers[l];
        layer_input(&k, lp, l == 0 ? 0 : plan->layers[l - 1].ffn_rank, t, has, ready);
        memset(busy, 0, (size_t)k.n * sizeof(double));
        if (lp->mode == LAYER_SLICE) {
            double t1, t2;
            const int exact = plan->exchange == EXCHANGE_EXACT; /* wo by rows, not columns */
            for (int j = 0; j < lp->n_slices; j++) {
                int r = lp->slices[j].rank;
                busy[r] = ready[r];
                for (int p = 0; p < lp->n_parts; p++)
                    if (lp->parts[p].rank == r)
                        busy[r] += work_ms(&k, r, part_bytes(c, &lp->parts[p], !exact));
            }
            if (exact) {
                t = exact_layer_ms(&k, plan, l, busy);
                memset(has, 0, (size_t)k.n * sizeof(int));
                for (int j = 0; j < lp->n_slices; j++)
                    has[lp->slices[j].rank] = 1;
                continue;
            }
            t1 = exchange_ms(&k, plan->exchange, lp, busy, wire) +
                 spread_ms(&k, lp->n_slices - 1);
            for (int j = 0; j < lp->n_slices; j++) {
                int r = lp->slices[j].rank;
                busy[r] = t1 + work_ms(&k, r, (double)config_ffn_bytes(c, lp->slices[j].f1 -
                                                                       lp->slices[j].f0));
            }
            t2 = exchange_ms(&k, plan->exchange, lp, busy, wire) +
                 spread_ms(&k, lp->n_slices - 1);
            memset(has, 0, (size_t)k.n * sizeof(int));
            for (int j = 0; j < lp->n_slices; j++)
                has[lp->slices[j].rank] = 1;
            t = t2;
            continue;
        }
        t = pipe_layer(&k, lp, ready, busy);
        memset(has, 0, (size_t)k.n * sizeof(int));
        has[lp->ffn_rank] = 1;
    }
    /* Back to the controller: X' for its LM head, or each member's rows of logits. */
    int last = plan->layers[plan->n_layers - 1].ffn_rank, v0, v1, members = 0;
    if (plan->head_split) {
        double done = t;
        for (int r = 1; r < k.n; r++)
            if (plan_head_rows(plan, c, r, &v0, &v1)) {
                /* its rows and the final norm's weights, as the simulator counts
                 * (sim_cost_head_rows) and the memory accounting holds */
                double rows = (double)(v1 - v0);
                double w = t + work_ms(&k, r, (rows + 1.0) * c->dim * 4.0);
                double v = k.shared ? queued_ms(&k, r, 0, w, 32.0 + 4.0 * rows)
                                    : w + hop_ms(&k, r, 0, 32.0 + 4.0 * rows);
                done = v > done ? v : done;
                members++;
            }
        t = done + spread_ms(&k, members);
    } else {
        t = has[0] ? t : k.shared ? queued_ms(&k, last, 0, t, msg) : t + hop_ms(&k, last, 0, msg);
        t += req->fixed_ms > 0 ? req->fixed_ms : 0;
    }
    free(ready);
    free(busy);
    free(has);
    cost_free(&k);
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
    double *ready = xcalloc((size_t)k.n, sizeof(double));
    double *busy = xcalloc((size_t)k.n, sizeof(double));
    int *has = xcalloc((size_t)k.n, sizeof(int));
    has[producer] = 1;
    layer_input(&k, lp, producer, 0, has, ready);
    double t = pipe_layer(&k, lp, ready, busy);
    free(ready);
    free(busy);
    free(has);
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

int cost_build_best(Plan *plan, const ModelConfig *c, const PlanRequest *req,
                    const CostModel *m, double *pred_ms, double *preds, char *err,
                    size_t errlen)
{
    static const Partition parts[3] = {PARTITION_LAYER, PARTITION_HEAD, PARTITION_SLICE};
    static const PlacementKind places[3] = {PLACEMENT_LAYER, PLACEMENT_GREEDY, PLACEMENT_GREEDY};
    double t0 = time_now(), best = -1;
    int have = 0;
    char last_err[256] = "";
    memset(plan, 0, sizeof *plan);
    for (int i = 0; i < 3; i++) {
        PlanRequest r = *req;
        r.partition = parts[i];
        r.placement = places[i];
        Plan p;
        double v = -1;
        if (plan_build(&p, c, &r, last_err, sizeof last_err) == 0) {
            v = cost_token_ms(m, &p, c);
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
    plan->build_ms = (time_now() - t0) * 1e3;
    if (pred_ms)
        *pred_ms = best;
    return 0;
}

int plan_build_auto(Plan *plan, const ModelConfig *c, const PlanRequest *req, double *pred_ms,
                    double *preds, char *err, size_t errlen)
{
    /* The analytic model reads only req's devices and links, which every candidate shares. */
    CostModel m = cost_model_analytic(req);
    return cost_build_best(plan, c, req, &m, pred_ms, preds, err, errlen);
}
