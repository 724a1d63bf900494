/* cost.c: the cost model shared by --partition auto and the link-aware placement: predicted
 * time of one token along the critical path of a plan. */
#include "plan.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const ModelConfig *c;
    const PlanRequest *req;
    int n; /* world size = n_workers + 1 */
} Cost;

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
    return lat + (req->bw_Bps > 0 ? bytes / req->bw_Bps * 1e3 : 0);
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

static double part_bytes(const ModelConfig *c, const AttnPart *p, int slice)
{
    double b = (double)config_attn_unit_bytes(c, p->q1 - p->q0);
    if (slice)
        b += (double)c->dim * (double)((p->q1 - p->q0) * c->head_dim) * 4.0;
    return b;
}

double plan_predict_ms(const Plan *plan, const ModelConfig *c, const PlanRequest *req)
{
    Cost k = {c, req, plan->n_workers + 1};
    const double msg = 32.0 + 4.0 * c->dim;
    double *ready = xcalloc((size_t)k.n, sizeof(double)); /* when each rank has X */
    double *busy = xcalloc((size_t)k.n, sizeof(double));  /* when each rank is free */
    int *has = xcalloc((size_t)k.n, sizeof(int));         /* holds the current X */
    has[0] = 1;
    double t = 0; /* time X of the current layer exists at its holders */
    for (int l = 0; l < plan->n_layers; l++) {
        const LayerPlan *lp = &plan->layers[l];
        /* Input: holders have it at t; others get it from the designated holder. */
        int root = l == 0 ? 0 : plan->layers[l - 1].ffn_rank;
        for (int r = 0; r < k.n; r++)
            ready[r] = has[r] ? t : t + hop_ms(&k, root, r, msg);
        memset(busy, 0, (size_t)k.n * sizeof(double));
        if (lp->mode == LAYER_SLICE) {
            double t1 = 0, t2 = 0;
            for (int j = 0; j < lp->n_slices; j++) {
                int r = lp->slices[j].rank;
                busy[r] = ready[r];
                for (int p = 0; p < lp->n_parts; p++)
                    if (lp->parts[p].rank == r)
                        busy[r] += work_ms(&k, r, part_bytes(c, &lp->parts[p], 1));
            }
            for (int a = 0; a < lp->n_slices; a++)
                for (int b = 0; b < lp->n_slices; b++) {
                    int ra = lp->slices[a].rank, rb = lp->slices[b].rank;
                    double v = busy[ra] + hop_ms(&k, ra, rb, msg);
                    t1 = v > t1 ? v : t1;
                }
            t1 += spread_ms(&k, lp->n_slices - 1);
            for (int j = 0; j < lp->n_slices; j++) {
                int r = lp->slices[j].rank;
                busy[r] = t1 + work_ms(&k, r, (double)config_ffn_bytes(c, lp->slices[j].f1 -
                                                                       lp->slices[j].f0));
            }
            for (int a = 0; a < lp->n_slices; a++)
                for (int b = 0; b < lp->n_slices; b++) {
                    int ra = lp->slices[a].rank, rb = lp->slices[b].rank;
                    double v = busy[ra] + hop_ms(&k, ra, rb, msg);
                    t2 = v > t2 ? v : t2;
                }
            t2 += spread_ms(&k, lp->n_slices - 1);
            memset(has, 0, (size_t)k.n * sizeof(int));
            for (int j = 0; j < lp->n_slices; j++)
                has[lp->slices[j].rank] = 1;
            t = t2;
            continue;
        }
        /* PIPE: parts in parallel across ranks, serial on one rank; gather at proj. */
        double gathered = ready[lp->proj_rank];
        int senders = 0;
        for (int r = 1; r < k.n; r++) {
            double done = ready[r];
            int any = 0;
            for (int p = 0; p < lp->n_parts; p++)
                if (lp->parts[p].rank == r) {
                    done += work_ms(&k, r, part_bytes(c, &lp->parts[p], 0));
                    any = 1;
                }
            if (any) {
                double v = done + hop_ms(&k, r, lp->proj_rank, msg);
                gathered = v > gathered ? v : gathered;
                senders += r != lp->proj_rank;
            }
        }
        gathered += spread_ms(&k, senders);
        double z = gathered + work_ms(&k, lp->proj_rank, (double)config_proj_bytes(c));
        z += hop_ms(&k, lp->proj_rank, lp->ffn_rank, msg);
        t = z + work_ms(&k, lp->ffn_rank, (double)config_ffn_bytes(c, c->ffn_dim));
        memset(has, 0, (size_t)k.n * sizeof(int));
        has[lp->ffn_rank] = 1;
    }
    /* Back to the controller: X' for its LM head, or each member's rows of logits. */
    int last = plan->layers[plan->n_layers - 1].ffn_rank, v0, v1, members = 0;
    if (plan->head_split) {
        double done = t;
        for (int r = 1; r < k.n; r++)
            if (plan_head_rows(plan, c, r, &v0, &v1)) {
                double rows = (double)(v1 - v0);
                double v = t + work_ms(&k, r, rows * c->dim * 4.0) +
                           hop_ms(&k, r, 0, 32.0 + 4.0 * rows);
                done = v > done ? v : done;
                members++;
            }
        t = done + spread_ms(&k, members);
    } else {
        t += has[0] ? 0 : hop_ms(&k, last, 0, msg);
        t += req->fixed_ms > 0 ? req->fixed_ms : 0;
    }
    free(ready);
    free(busy);
    free(has);
    return t;
}

int plan_build_auto(Plan *plan, const ModelConfig *c, const PlanRequest *req, double *pred_ms,
                    double *preds, char *err, size_t errlen)
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
            v = plan_predict_ms(&p, c, &r);
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
