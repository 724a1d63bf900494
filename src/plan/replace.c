/* replace.c: memory accounting over time and re-placement of attention parts when the KV
 * cache of a device grows past its budget. */
#include "plan.h"
#include "plan_internal.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

size_t plan_rank_buffer_bytes(const ModelConfig *c)
{
    /* Pipeline messages (x, z, exchange), head outputs (own, staging, assembled), scratch. */
    size_t dim = (size_t)c->dim, qd = (size_t)c->n_heads * (size_t)c->head_dim;
    return (8 * dim + 4 * qd + 2 * (size_t)c->ffn_dim + 64) * sizeof(float);
}

size_t plan_rank_accounted_bytes(const Plan *plan, const ModelConfig *c, int rank,
                                 int kv_positions)
{
    return plan_rank_weight_bytes(plan, c, rank) +
           plan_rank_kv_bytes(plan, c, rank, kv_positions) + plan_rank_buffer_bytes(c);
}

int plan_rank_crossing(const Plan *plan, const ModelConfig *c, int rank, size_t budget,
                       double frac, int max_positions)
{
    if (budget == 0)
        return -1;
    double limit = frac * (double)budget;
    size_t base = plan_rank_accounted_bytes(plan, c, rank, 0);
    size_t per = plan_rank_kv_bytes(plan, c, rank, 1);
    if ((double)base > limit)
        return 0;
    if (per == 0)
        return -1;
    double n = ((limit - (double)base) / (double)per);
    int first = (int)n + 1; /* the first count that is strictly above the limit */
    return first <= max_positions ? first : -1;
}

void plan_copy(Plan *out, const Plan *in)
{
    *out = *in;
    out->layers = xcalloc((size_t)in->n_layers, sizeof(LayerPlan));
    for (int l = 0; l < in->n_layers; l++) {
        out->layers[l] = in->layers[l];
        out->layers[l].parts = xmalloc(((size_t)in->layers[l].n_parts + 1) * sizeof(AttnPart));
        memcpy(out->layers[l].parts, in->layers[l].parts,
               (size_t)in->layers[l].n_parts * sizeof(AttnPart));
        out->layers[l].slices = NULL;
        if (in->layers[l].n_slices) {
            out->layers[l].slices = xmalloc((size_t)in->layers[l].n_slices * sizeof(FfnSlice));
            memcpy(out->layers[l].slices, in->layers[l].slices,
                   (size_t)in->layers[l].n_slices * sizeof(FfnSlice));
        }
    }
}

static size_t budget_at(const PlanRequest *req, int rank)
{
    return plan_req_budget(req, rank);
}

int plan_replace(Plan *out, const Plan *cur, const ModelConfig *c, const PlanRequest *req,
                 int positions, int horizon, double threshold, char *err, size_t errlen)
{
    double t0 = time_now();
    plan_copy(out, cur);
    int moved = 0;
    const int n = cur->n_workers;
    for (int r = 1; r <= n; r++) {
        size_t b = budget_at(req, r);
        if (!b || (double)plan_rank_accounted_bytes(out, c, r, positions) <= threshold * (double)b)
            continue;
        /* Move parts, last layers first, until r has room for the horizon. */
        for (int l = out->n_layers - 1; l >= 0; l--) {
            LayerPlan *lp = &out->layers[l];
            if (lp->mode == LAYER_SLICE)
                continue; /* a slice member keeps its heads: its columns of wo stay with them */
            for (int k = 0; k < lp->n_parts; k++) {
                if ((double)plan_rank_accounted_bytes(out, c, r, horizon) <= threshold * (double)b)
                    goto next_rank;
                if (lp->parts[k].rank != r)
                    continue;
                size_t need = config_attn_unit_bytes(c, lp->parts[k].q1 - lp->parts[k].q0) +
                              config_kv_bytes(c, horizon);
                int best = -1;
                double best_room = 0;
                for (int t = 1; t <= n; t++) {
                    if (t == r)
                        continue;
                    size_t bt = budget_at(req, t);
                    double room = bt ? threshold * (double)bt -
                                       (double)plan_rank_accounted_bytes(out, c, t, horizon)
                                     : 1e30;
                    if (room >= (double)need && (best < 0 || room > best_room)) {
                        best = t;
                        best_room = room;
                    }
                }
                if (best < 0)
                    continue;
                lp->parts[k].rank = best;
                moved++;
            }
        }
        if ((double)plan_rank_accounted_bytes(out, c, r, positions + 1) > (double)b) {
            plan_free(out);
            return util_err(err, errlen, "re-placement: no device has room for the attention "
                            "parts of rank %d (%.1f MB budget)", r, (double)b / 1e6);
        }
    next_rank:;
    }
    out->build_ms = (time_now() - t0) * 1e3;
    return moved;
}
