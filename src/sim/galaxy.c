/* galaxy.c: the Galaxy-style hybrid as a plan: the engine's SLICE layers over every device.
 * Each device holds attention parts with their columns of the output projection and a slice
 * of the FFN; per layer the members exchange partial sums twice (after attention and after
 * the FFN), which is the engine's all-reduce.  plan_build(PARTITION_SLICE) gives the
 * structure (parts per layer, one slice per worker); here the parts and FFN columns are
 * re-dealt in proportion to device speed within the memory budgets (water-filling), so the
 * result is the same Plan struct the engine runs.  Speculation does not apply to SLICE
 * layers (the engine's rule). */
#include "sim_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Shares proportional to speed, none above its cap; returns the total given (< 1: the caps
 * cannot hold everything). */
static double water_fill(double *share, const double *cap, const SimCluster *cl)
{
    const int n = cl->n_workers;
    char *fixed = xcalloc((size_t)n + 1, 1);
    double left = 1.0;
    for (int it = 0; it <= n; it++) {
        double w = 0;
        for (int d = 1; d <= n; d++)
            if (!fixed[d])
                w += cl->dev[d].speed;
        int changed = 0;
        for (int d = 1; d <= n; d++) {
            if (fixed[d])
                continue;
            share[d] = w > 0 ? left * cl->dev[d].speed / w : 0;
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
static void deal(Plan *p, const ModelConfig *c, const SimCluster *cl, const double *share,
                 int kv)
{
    const int n = cl->n_workers;
    double *given = xcalloc((size_t)n + 1, sizeof(double)), total = 0;
    int *cols = xcalloc((size_t)n + 1, sizeof(int));
    apportion(cols, share, n, c->ffn_dim);
    for (int l = 0; l < p->n_layers; l++) {
        LayerPlan *lp = &p->layers[l];
        for (int k = 0; k < lp->n_parts; k++) {
            int nq = lp->parts[k].q1 - lp->parts[k].q0;
            double b = (double)config_attn_unit_bytes(c, nq) +
                       (double)c->dim * nq * c->head_dim * sizeof(float) +
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

int galaxy_build_plan(Plan *p, const ModelConfig *c, const SimCluster *cl, int kv_positions,
                      char *err, size_t errlen)
{
    const int n = cl->n_workers;
    Device *dv = sim_cluster_plan_devices(cl, 1.0);
    for (int d = 0; d < n; d++)
        dv[d].mem_budget = 0; /* structure only; budgets are enforced below */
    PlanRequest req = {.partition = PARTITION_SLICE, .placement = PLACEMENT_GREEDY,
                       .n_workers = n, .devices = dv, .kv_positions = kv_positions};
    int rc = plan_build(p, c, &req, err, errlen);
    free(dv);
    if (rc < 0)
        return -1;
    double *share = xcalloc((size_t)n + 1, sizeof(double));
    double *cap = xcalloc((size_t)n + 1, sizeof(double));
    double total = (double)c->n_layers *
                   ((double)config_layer_bytes(c) +
                    (double)c->n_kv_heads * (double)config_kv_bytes(c, kv_positions));
    for (int d = 1; d <= n; d++)
        cap[d] = cl->dev[d].mem_budget ? (double)cl->dev[d].mem_budget / total : 1e30;
    rc = -1;
    for (int attempt = 0; attempt < 80 && rc < 0; attempt++) {
        if (water_fill(share, cap, cl) < 1 - 1e-9)
            break; /* the budgets together cannot hold the model */
        deal(p, c, cl, share, kv_positions);
        rc = 0;
        for (int d = 1; d <= n; d++) {
            size_t b = cl->dev[d].mem_budget;
            if (b && plan_rank_weight_bytes(p, c, d) + plan_rank_kv_bytes(p, c, d, kv_positions) >
                         b) {
                cap[d] = share[d] * 0.96; /* dealing in whole parts overshot: shrink, retry */
                rc = -1;
            }
        }
    }
    free(share);
    free(cap);
    if (rc == 0)
        rc = plan_validate(p, c, err, errlen);
    else
        util_err(err, errlen, "galaxy: the memory budgets cannot hold the model split in "
                 "proportion to speed");
    if (rc < 0)
        plan_free(p);
    return rc;
}
