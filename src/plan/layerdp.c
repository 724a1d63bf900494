/* layerdp.c: EdgeShard-style layer-wise placement.  Whole layers in contiguous blocks, one
 * block per device, devices visited in some order (skipping allowed).  For a fixed order a
 * dynamic program over (device position, layers covered) minimises the token time: a block
 * of layers [i, l) on device b after device a costs enter[a][b] + (l-i-1) self[b], where both
 * are the cost model's layer time (cost_layer_s: the simulator's sim_layer_time, or the
 * analytic critical path).  Memory: a block must fit its
 * device's budget with KV cache for kv_positions.  With at most SOLVER_DP_ALL_ORDERS devices
 * every order is tried (exact over all contiguous placements); beyond, a few orders (fastest
 * first, given order, nearest link first) improved by swapping pairs. */
#include "solver.h"

#include "util.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n, L;
    double *enter; /* [(n+1) * (n+1)]: layer on b, input from a */
    double *self;  /* [n+1] */
    double *out;   /* [n+1]: last output back to the controller */
    int *cap;      /* [n+1] layers that fit */
    double fixed;  /* embedding and LM head */
    double *dp;    /* [n][L+1] */
    int *from_j, *from_i;
} DpCtx;

static void whole_layer_on(LayerPlan *lp, int rank)
{
    for (int k = 0; k < lp->n_parts; k++)
        lp->parts[k].rank = rank;
    lp->proj_rank = lp->ffn_rank = rank;
}

/* The structure of a layer-wise plan for n workers (plan_build's own layer placement). */
static int template_plan(Plan *p, const ModelConfig *c, int n, int kv, char *err, size_t errlen)
{
    PlanRequest req = {.partition = PARTITION_LAYER, .placement = PLACEMENT_LAYER,
                       .n_workers = n, .kv_positions = kv};
    return plan_build(p, c, &req, err, errlen);
}

static void dp_costs(DpCtx *x, const ModelConfig *c, const Cluster *cl, const CostModel *m,
                     const Plan *tmpl, const SolverRequest *req)
{
    const int n = cl->n - 1;
    LayerPlan lp = tmpl->layers[0];
    lp.parts = xmalloc((size_t)lp.n_parts * sizeof(AttnPart));
    memcpy(lp.parts, tmpl->layers[0].parts, (size_t)lp.n_parts * sizeof(AttnPart));
    double layer_bytes = (double)config_layer_bytes(c) +
                         (double)c->n_kv_heads * (double)config_kv_bytes(c, req->kv_positions);
    for (int b = 1; b <= n; b++) {
        whole_layer_on(&lp, b);
        for (int a = 0; a <= n; a++)
            x->enter[a * (n + 1) + b] = cost_layer_s(m, &lp, a, c);
        x->self[b] = x->enter[b * (n + 1) + b];
        x->out[b] = cost_hop_s(m, b, 0, c);
        size_t bud = cl->dev[b].mem_budget;
        x->cap[b] = bud ? (int)((double)bud / layer_bytes) : x->L;
        if (x->cap[b] > x->L)
            x->cap[b] = x->L;
    }
    x->fixed = cost_controller_s(m, 1, c) + cost_controller_s(m, 0, c);
    free(lp.parts);
}

/* DP for one device order; returns the token time (DBL_MAX if nothing fits). */
static double dp_order(DpCtx *x, const int *ord)
{
    const int n = x->n, L = x->L, W = L + 1;
    for (int i = 0; i < n * W; i++) {
        x->dp[i] = DBL_MAX;
        x->from_j[i] = -2;
    }
    for (int j = 0; j < n; j++) {
        int b = ord[j];
        for (int l = 1; l <= L; l++) {
            double best = DBL_MAX;
            int bj = -2, bi = -1;
            int lo = l - x->cap[b] > 0 ? l - x->cap[b] : 0;
            for (int i = lo; i < l; i++) {
                double blk = (double)(l - i - 1) * x->self[b];
                if (i == 0) {
                    double v = x->enter[0 * (n + 1) + b] + blk;
                    if (v < best) {
                        best = v;
                        bj = -1;
                        bi = 0;
                    }
                    continue;
                }
                for (int jp = 0; jp < j; jp++) {
                    double prev = x->dp[jp * W + i];
                    if (prev == DBL_MAX)
                        continue;
                    double v = prev + x->enter[ord[jp] * (n + 1) + b] + blk;
                    if (v < best) {
                        best = v;
                        bj = jp;
                        bi = i;
                    }
                }
            }
            x->dp[j * W + l] = best;
            x->from_j[j * W + l] = bj;
            x->from_i[j * W + l] = bi;
        }
    }
    double best = DBL_MAX;
    for (int j = 0; j < n; j++)
        if (x->dp[j * W + L] < DBL_MAX && x->dp[j * W + L] + x->out[ord[j]] < best)
            best = x->dp[j * W + L] + x->out[ord[j]];
    return best == DBL_MAX ? best : best + x->fixed;
}

/* Writes the blocks of the best DP solution for ord into plan. */
static void dp_extract(DpCtx *x, const int *ord, Plan *plan)
{
    const int n = x->n, L = x->L, W = L + 1;
    int j = -1;
    double best = DBL_MAX;
    for (int jj = 0; jj < n; jj++)
        if (x->dp[jj * W + L] < DBL_MAX && x->dp[jj * W + L] + x->out[ord[jj]] < best) {
            best = x->dp[jj * W + L] + x->out[ord[jj]];
            j = jj;
        }
    int l = L;
    while (j >= 0 && l > 0) {
        int i = x->from_i[j * W + l], pj = x->from_j[j * W + l];
        for (int k = i; k < l; k++)
            whole_layer_on(&plan->layers[k], ord[j]);
        l = i;
        j = pj;
    }
}

/* Next permutation in lexicographic order; 0 after the last. */
static int next_perm(int *a, int n)
{
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1])
        i--;
    if (i < 0)
        return 0;
    int j = n - 1;
    while (a[j] <= a[i])
        j--;
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int lo = i + 1, hi = n - 1; lo < hi; lo++, hi--) {
        t = a[lo];
        a[lo] = a[hi];
        a[hi] = t;
    }
    return 1;
}

/* Insertion sort of device ranks, fastest first (ties: lower rank first). */
static void sort_by_speed(int *ord, int n, const Cluster *cl)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && cl->dev[ord[j]].speed_Bps > cl->dev[ord[j - 1]].speed_Bps; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
}

int solver_layer_dp(Plan *plan, SolverStats *st, const ModelConfig *c, const Cluster *cl,
                    const CostModel *m, const SolverRequest *req, char *err, size_t errlen)
{
    double t0 = time_now();
    const int n = cl->n - 1, L = c->n_layers;
    if (template_plan(plan, c, n, req->kv_positions, err, errlen) < 0)
        return -1;
    DpCtx x = {n, L, xcalloc((size_t)(n + 1) * (size_t)(n + 1), sizeof(double)),
               xcalloc((size_t)n + 1, sizeof(double)), xcalloc((size_t)n + 1, sizeof(double)),
               xcalloc((size_t)n + 1, sizeof(int)), 0,
               xmalloc((size_t)n * (size_t)(L + 1) * sizeof(double)),
               xmalloc((size_t)n * (size_t)(L + 1) * sizeof(int)),
               xmalloc((size_t)n * (size_t)(L + 1) * sizeof(int))};
    dp_costs(&x, c, cl, m, plan, req);
    int *ord = xmalloc((size_t)n * sizeof(int)), *best_ord = xmalloc((size_t)n * sizeof(int));
    double best = DBL_MAX;
    long tried = 0;
    for (int j = 0; j < n; j++)
        ord[j] = j + 1;
    if (n <= SOLVER_DP_ALL_ORDERS) {
        do {
            double v = dp_order(&x, ord);
            tried++;
            if (v < best) {
                best = v;
                memcpy(best_ord, ord, (size_t)n * sizeof(int));
            }
        } while (next_perm(ord, n));
    } else {
        /* Seeds: given order, fastest first, nearest link first; then pairwise swaps. */
        for (int s = 0; s < 3; s++) {
            for (int j = 0; j < n; j++)
                ord[j] = j + 1;
            if (s == 1) {
                sort_by_speed(ord, n, cl);
            } else if (s == 2) {
                for (int j = 0, prev = 0; j < n; j++) {
                    int bk = j;
                    for (int k = j; k < n; k++)
                        if (x.enter[prev * (n + 1) + ord[k]] < x.enter[prev * (n + 1) + ord[bk]])
                            bk = k;
                    int t = ord[j];
                    ord[j] = ord[bk];
                    ord[bk] = t;
                    prev = ord[j];
                }
            }
            double v = dp_order(&x, ord);
            tried++;
            if (v < best) {
                best = v;
                memcpy(best_ord, ord, (size_t)n * sizeof(int));
            }
        }
        for (int pass = 0, improved = 1; pass < 3 && improved && best < DBL_MAX; pass++) {
            improved = 0;
            memcpy(ord, best_ord, (size_t)n * sizeof(int));
            for (int a = 0; a < n; a++)
                for (int b = a + 1; b < n; b++) {
                    int t = ord[a];
                    ord[a] = ord[b];
                    ord[b] = t;
                    double v = dp_order(&x, ord);
                    tried++;
                    if (v < best - 1e-15) {
                        best = v;
                        memcpy(best_ord, ord, (size_t)n * sizeof(int));
                        improved = 1;
                    } else {
                        ord[b] = ord[a];
                        ord[a] = t;
                    }
                }
        }
    }
    int rc = 0;
    if (best == DBL_MAX) {
        rc = util_err(err, errlen, "layer-dp: no split into contiguous blocks fits the memory "
                      "budgets");
    } else {
        dp_order(&x, best_ord);
        dp_extract(&x, best_ord, plan);
        rc = plan_validate(plan, c, err, errlen);
    }
    if (st)
        *st = (SolverStats){best, best, n <= SOLVER_DP_ALL_ORDERS, tried, tried,
                            time_now() - t0};
    free(x.enter);
    free(x.self);
    free(x.out);
    free(x.cap);
    free(x.dp);
    free(x.from_j);
    free(x.from_i);
    free(ord);
    free(best_ord);
    if (rc < 0)
        plan_free(plan);
    return rc;
}

/* Brute force: every sequence of blocks on distinct devices. */
static double brute_rec(const DpCtx *x, int l, int prev, unsigned used, double acc)
{
    if (l == x->L)
        return acc + x->out[prev];
    double best = DBL_MAX;
    for (int b = 1; b <= x->n; b++) {
        if (used & (1u << b))
            continue;
        for (int len = 1; l + len <= x->L && len <= x->cap[b]; len++) {
            double v = brute_rec(x, l + len, b, used | (1u << b),
                                 acc + x->enter[prev * (x->n + 1) + b] + (len - 1) * x->self[b]);
            if (v < best)
                best = v;
        }
    }
    return best;
}

double solver_layer_brute(const ModelConfig *c, const Cluster *cl, const CostModel *m,
                          const SolverRequest *req)
{
    const int n = cl->n - 1;
    Plan tmpl;
    char err[256];
    if (n > 16 || template_plan(&tmpl, c, n, req->kv_positions, err, sizeof err) < 0)
        return DBL_MAX;
    DpCtx x = {n, c->n_layers, xcalloc((size_t)(n + 1) * (size_t)(n + 1), sizeof(double)),
               xcalloc((size_t)n + 1, sizeof(double)), xcalloc((size_t)n + 1, sizeof(double)),
               xcalloc((size_t)n + 1, sizeof(int)), 0, NULL, NULL, NULL};
    dp_costs(&x, c, cl, m, &tmpl, req);
    double v = brute_rec(&x, 0, 0, 0, 0);
    if (v < DBL_MAX)
        v += x.fixed;
    free(x.enter);
    free(x.self);
    free(x.out);
    free(x.cap);
    plan_free(&tmpl);
    return v;
}

int solver_plan_fits(const Plan *plan, const ModelConfig *c, const Cluster *cl,
                     int kv_positions)
{
    for (int r = 1; r < cl->n; r++) {
        size_t b = cl->dev[r].mem_budget;
        if (b && plan_rank_weight_bytes(plan, c, r) +
                         plan_rank_kv_bytes(plan, c, r, kv_positions) > b)
            return 0;
    }
    return 1;
}
