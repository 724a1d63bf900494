/* replicas.c: data parallel plans (--replicas K).  Where the model fits one board or a few,
 * the workers are cut into K groups of consecutive ranks and each group holds a whole copy
 * of the decoder layers, placed by the placement asked for within the group (layer-wise
 * only: head and slice plans inside a copy are refused).  A copy is an ordinary plan over
 * every rank in which only its group's workers have roles, so the engine runs each copy as
 * it runs any plan and every worker loads only its own copy's slices; the controller
 * spreads sequences over the copies.  Also the choice --partition auto makes when serving
 * several slots: copies x stages for the predicted aggregate tokens/s. */
#include "plan.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int plan_copy_workers(int n_workers, int copies, int k, int *first)
{
    const int base = n_workers / copies, extra = n_workers % copies;
    *first = 1 + k * base + (k < extra ? k : extra);
    return base + (k < extra);
}

/* The planner's view of workers [first, first + n) as a cluster of its own: rank 0 the
 * controller, ranks 1..n those workers, their devices and links. */
static void sub_cluster(Cluster *out, const Cluster *in, int first, int n)
{
    cluster_init(out, n + 1);
    for (int i = 0; i <= n; i++) {
        const int a = i ? first + i - 1 : 0;
        out->dev[i] = in->dev[a];
        for (int j = 0; j <= n && in->link; j++)
            *cluster_link(out, i, j) = *cluster_link(in, a, j ? first + j - 1 : 0);
    }
    if (!in->link) {
        free(out->link);
        out->link = NULL;
    }
    out->jitter = in->jitter;
    out->bcast = in->bcast;
    memcpy(out->links_name, in->links_name, sizeof out->links_name);
}

/* A copy's ranks 1..n become the world's first..first+n-1 (rank 0, the controller, stays). */
static void shift_ranks(Plan *p, int first, int n_workers)
{
    const int d = first - 1;
    for (int l = 0; l < p->n_layers; l++) {
        LayerPlan *lp = &p->layers[l];
        for (int k = 0; k < lp->n_parts; k++)
            lp->parts[k].rank += lp->parts[k].rank > 0 ? d : 0;
        lp->proj_rank += lp->proj_rank > 0 ? d : 0;
        lp->ffn_rank += lp->ffn_rank > 0 ? d : 0;
        for (int k = 0; k < lp->n_slices; k++)
            lp->slices[k].rank += lp->slices[k].rank > 0 ? d : 0;
    }
    p->n_workers = n_workers;
}

int plan_replicas_check(const PlanRequest *req, int copies, char *err, size_t errlen)
{
    if (copies < 1)
        return util_err(err, errlen, "--replicas %d: give at least 1 copy", copies);
    if (copies > req->n_workers)
        return util_err(err, errlen, "--replicas %d: more copies than workers (%d); each copy "
                        "needs a worker of its own", copies, req->n_workers);
    if (copies > 1 && req->partition != PARTITION_LAYER)
        return util_err(err, errlen, "--replicas %d with --partition %s: a copy is placed "
                        "layer-wise only (give --partition layer)", copies,
                        plan_partition_name(req->partition));
    if (copies > 1 && req->placement != PLACEMENT_LAYER && req->placement != PLACEMENT_GREEDY &&
        req->placement != PLACEMENT_ROUNDROBIN && req->placement != PLACEMENT_RANDOM)
        return util_err(err, errlen, "--replicas %d with --placement %s: a copy takes "
                        "--placement layer, greedy, roundrobin or random", copies,
                        plan_placement_name(req->placement));
    return 0;
}

int plan_build_replicas(Plan *plans, const ModelConfig *c, const PlanRequest *req, int copies,
                        char *err, size_t errlen)
{
    if (plan_replicas_check(req, copies, err, errlen) < 0)
        return -1;
    for (int k = 0; k < copies; k++) {
        int first;
        const int n = plan_copy_workers(req->n_workers, copies, k, &first);
        PlanRequest sub = *req;
        sub.n_workers = n;
        Cluster view;
        memset(&view, 0, sizeof view);
        if (req->cluster) {
            sub_cluster(&view, req->cluster, first, n);
            sub.cluster = &view;
        }
        char why[400];
        const int rc = plan_build(&plans[k], c, &sub, why, sizeof why);
        cluster_free(&view);
        if (rc < 0) {
            for (int j = 0; j < k; j++)
                plan_free(&plans[j]);
            char at[32];
            if (n > 1)
                snprintf(at, sizeof at, "workers %d..%d", first, first + n - 1);
            else
                snprintf(at, sizeof at, "worker %d", first);
            return util_err(err, errlen, "--replicas %d: copy %d on %s does not fit: %s "
                            "(ranks counted within the copy; give fewer --replicas or more "
                            "memory)", copies, k, at, why);
        }
        shift_ranks(&plans[k], first, req->n_workers);
    }
    return 0;
}

/* Stages of a layer-wise copy: its workers that hold layers. */
static int copy_stages(const Plan *p, int first, int n)
{
    int stages = 0;
    for (int r = first; r < first + n; r++)
        for (int l = 0; l < p->n_layers; l++)
            if (plan_rank_in_layer(p, l, r)) {
                stages++;
                break;
            }
    return stages > 0 ? stages : 1;
}

double plan_replicas_tokens_per_s(const Plan *plans, int copies, const ModelConfig *c,
                                  const PlanRequest *req, int slots)
{
    double tps = 0;
    for (int k = 0; k < copies; k++) {
        int first;
        const int n = plan_copy_workers(req->n_workers, copies, k, &first);
        const int mine = slots / copies + (k < slots % copies);
        const int stages = copy_stages(&plans[k], first, n);
        const int groups = mine < stages ? mine : stages;
        const double ms = plan_predict_ms(&plans[k], c, req);
        tps += ms > 0 ? groups * 1e3 / ms : 0;
    }
    return tps;
}

/* Within this share of the best prediction, more copies win: the prediction counts a chain's
 * groups as if every stage were always busy, which uneven stages and the batcher's groups
 * do not reach, and a copy's sequences share no hops. */
#define REPLICA_MARGIN 0.10

int plan_choose_replicas(const ModelConfig *c, const PlanRequest *req, int slots,
                         int kv_positions, int *copies, char *why, size_t whylen)
{
    PlanRequest lr = *req;
    lr.partition = PARTITION_LAYER;
    lr.placement = PLACEMENT_LAYER;
    const int max_k = req->n_workers < slots ? req->n_workers : slots;
    double *tps = xcalloc((size_t)max_k + 1, sizeof *tps);
    size_t off = (size_t)snprintf(why, whylen, "--partition auto for %d slots: aggregate "
                                  "tokens/s predicted (copies x workers each)", slots);
    double best = 0;
    for (int k = 1; k <= max_k; k++) {
        Plan *plans = xcalloc((size_t)k, sizeof *plans);
        char err[600];
        /* every copy holds the KV caches of its share of the slots */
        lr.kv_positions = kv_positions * ((slots + k - 1) / k);
        const int ok = plan_build_replicas(plans, c, &lr, k, err, sizeof err) == 0;
        double ms = 0;
        if (ok) {
            tps[k] = plan_replicas_tokens_per_s(plans, k, c, &lr, slots);
            ms = plan_predict_ms(&plans[0], c, &lr);
            for (int j = 0; j < k; j++)
                plan_free(&plans[j]);
        }
        free(plans);
        best = tps[k] > best ? tps[k] : best;
        int first;
        const int big = plan_copy_workers(req->n_workers, k, 0, &first);
        const int small = plan_copy_workers(req->n_workers, k, k - 1, &first);
        char each[16];
        if (big == small)
            snprintf(each, sizeof each, "%d", big);
        else
            snprintf(each, sizeof each, "%d-%d", small, big);
        if (off < whylen && ok)
            off += (size_t)snprintf(why + off, whylen - off, "%s %d x %s: %.0f (%.2f ms/token "
                                    "a copy)", k > 1 ? ";" : "", k, each, tps[k], ms);
        else if (off < whylen)
            off += (size_t)snprintf(why + off, whylen - off, "%s %d x %s: does not fit",
                                    k > 1 ? ";" : "", k, each);
    }
    *copies = 1;
    for (int k = 1; k <= max_k; k++)
        if (tps[k] > 0 && tps[k] >= (1 - REPLICA_MARGIN) * best)
            *copies = k;
    free(tps);
    if (off < whylen)
        snprintf(why + off, whylen - off, " -> %d cop%s (the most copies within %.0f%% of the "
                 "best)", *copies, *copies == 1 ? "y" : "ies", REPLICA_MARGIN * 100);
    return best > 0 ? 0 : -1;
}
