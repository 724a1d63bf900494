/* waterfill.c: the budget-aware SLICE placement (--placement waterfill; the simulator's galaxy
 * policy): every layer SLICE, attention parts (with their output-projection columns and KV
 * cache) and FFN columns dealt in proportion to device speed, each device capped by its
 * memory budget (water-filling), so that faster devices take more and none overflows. */
#include "plan_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

static double speed_of(const PlanRequest *r, int rank) { return plan_req_speed(r, rank); }

/* Shares proportional to speed, none above its cap; returns the total given (< 1: the caps
 * cannot hold everything). */
static double water_fill(double *share, const double *cap, const PlanRequest *req)
{
    const int n = req->n_workers;
    char *fixed = xcalloc((size_t)n + 1, 1);
    double left = 1.0;
    for (int it = 0; it <= n; it++) {
        double w = 0;
        for (int d = 1; d <= n; d++)
            if (!fixed[d])
                w += speed_of(req, d);
        int changed = 0;
        for (int d = 1; d <= n; d++) {
            if (fixed[d])
                continue;
            share[d] = w > 0 ? left * speed_of(req, d) / w : 0;
            if (share[d] > cap[d]) {
                share[d] = cap[d];
                fixed[d] = 1;
                changed = 1;
            }
        }
        left = 1.0;
        for (int d = 1; d <= n; d++)
            if (fixed[d])
                left -= share[d];
        if (!changed)
            break;
    }
    free(fixed);
    double sum = 0;
    for (int d = 1; d <= n; d++)
        sum += share[d];
    return sum;
}

/* Integer shares of total proportional to share[1..n] (largest remainder, ties: low rank). */
static void apportion(int *out, const double *share, int n, int total)
{
    int given = 0;
    for (int d = 1; d <= n; d++) {
        out[d] = (int)(share[d] * total);
        given += out[d];
    }
    while (given < total) {
        int best = 1;
        double bestrem = -1;
        for (int d = 1; d <= n; d++) {
            double rem = share[d] * total - out[d];
            if (rem > bestrem) {
                bestrem = rem;
                best = d;
            }
        }
        out[best]++;
        given++;
    }
}

/* Deals parts and FFN columns of every layer by share[]. */
static void deal(Plan *p, const ModelConfig *c, int n, const double *share, int kv)
{
    double *given = xcalloc((size_t)n + 1, sizeof(double)), total = 0;
    int *cols = xcalloc((size_t)n + 1, sizeof(int));
    /* A quantized model's column cuts fall on blocks: FFN columns are dealt in blocks of
     * w_down, and a part whose output-projection columns do not end on a block of wo keeps
     * the next part on its device (float32: blocks of 1, no constraint). */
    const int bd = config_wkind_block(c, WKIND_W_DOWN), bw = config_wkind_block(c, WKIND_WO);
    apportion(cols, share, n, c->ffn_dim / bd);
    for (int d = 1; d <= n; d++)
        cols[d] *= bd;
    for (int l = 0; l < p->n_layers; l++) {
        LayerPlan *lp = &p->layers[l];
        for (int k = 0, run_cols = 0; k < lp->n_parts; k++) {
            int nq = lp->parts[k].q1 - lp->parts[k].q0;
            double b = (double)config_attn_unit_bytes(c, nq) +
                       (double)config_proj_cols_bytes(c, nq * c->head_dim) +
                       (double)config_kv_bytes(c, kv);
            total += b;
            /* The device furthest below its share of everything dealt so far. */
            int best = 1;
            double deficit = -1e300;
            for (int d = 1; d <= n; d++) {
                double v = share[d] * total - given[d];
                if (v > deficit) {
                    deficit = v;
                    best = d;
                }
            }
            if (run_cols % bw != 0)
                best = lp->parts[k - 1].rank; /* inside a block of wo */
            run_cols += nq * c->head_dim;
            lp->parts[k].rank = best;
            given[best] += b;
        }
        /* Members: devices with a part or FFN columns, in rank order. */
        int m = 0, f = 0;
        for (int d = 1; d <= n; d++) {
            int has = cols[d] > 0;
            for (int k = 0; k < lp->n_parts && !has; k++)
                has = lp->parts[k].rank == d;
            if (!has)
                continue;
            lp->slices[m++] = (FfnSlice){d, f, f + cols[d]};
            f += cols[d];
        }
        lp->n_slices = m;
        lp->proj_rank = lp->ffn_rank = lp->slices[0].rank;
    }
    free(given);
    free(cols);
}

int slice_deal_waterfill(Plan *p, const ModelConfig *c, const PlanRequest *req, char *err,
                         size_t errlen)
{
    const int n = req->n_workers, kv = req->kv_positions;
    double *share = xcalloc((size_t)n + 1, sizeof(double));
    double *cap = xcalloc((size_t)n + 1, sizeof(double));
    double total = (double)c->n_layers *
                   ((double)config_layer_bytes(c) +
                    (double)c->n_kv_heads * (double)config_kv_bytes(c, kv));
    for (int d = 1; d <= n; d++) {
        size_t b = plan_req_budget(req, d);
        cap[d] = b ? (double)b / total : 1e30;
    }
    int rc = -1;
    for (int attempt = 0; attempt < 80 && rc < 0; attempt++) {
        if (water_fill(share, cap, req) < 1 - 1e-9)
            break; /* the budgets together cannot hold the model */
        deal(p, c, n, share, kv);
        rc = 0;
        for (int d = 1; d <= n; d++) {
            size_t b = plan_req_budget(req, d);
            if (b && plan_rank_weight_bytes(p, c, d) + plan_rank_kv_bytes(p, c, d, kv) > b) {
                cap[d] = share[d] * 0.96; /* dealing in whole parts overshot: shrink, retry */
                rc = -1;
            }
        }
    }
    free(share);
    free(cap);
    if (rc < 0)
        util_err(err, errlen, "the memory budgets cannot hold the model split in proportion to "
                 "speed");
    return rc;
}
