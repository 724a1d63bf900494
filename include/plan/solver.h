/* solver.h: placements chosen by optimisation over a cost model (cost.h), each returned as the
 * same Plan struct plan_build produces:
 *  - solver_layer_dp: EdgeShard-style contiguous blocks of whole layers, one block per device,
 *    by dynamic programming over layers and devices (exact over every device order when
 *    n_workers <= SOLVER_DP_ALL_ORDERS, else over a few orders);
 *  - solver_exact: head-level placement (which rank holds each attention part, projection and
 *    FFN of every layer), exhaustive branch and bound for 1-6 devices, exact under the cost
 *    model's layer costs, memory budgets respected.
 * The cluster gives the devices (count, budgets, speeds) and the links the greedy incumbent
 * is built with; the model m prices every candidate through its layer-cost calls (layer_s,
 * hop_s, controller_s, ffn_s; token_s for whole plans), so a plan's solver cost is m's token
 * time (to rounding).  headsplit-sim and headsplit --placement dp|exact pass the simulator's
 * model (sim_cost_model) over the cluster; the analytic one (cost_model_analytic) serves
 * too.  Pure: no MPI, no I/O. */
#ifndef HEADSPLIT_SOLVER_H
#define HEADSPLIT_SOLVER_H

#include "cluster.h"
#include "cost.h"
#include "plan.h"

#define SOLVER_DP_ALL_ORDERS 6

typedef struct {
    int kv_positions; /* KV cache reserved in the memory budgets */
    long max_nodes;   /* branch-and-bound node limit (0: none with max_s, else 200 million) */
    double max_s;     /* time limit in seconds (0: none) */
} SolverRequest;

typedef struct SolverStats {
    double cost_s;        /* the model's token time of the plan found */
    double bound_s;       /* proven lower bound (== cost_s when optimal) */
    int optimal;          /* 1 when the search finished */
    long nodes;           /* branch-and-bound nodes visited */
    long configs;         /* distinct layer configurations evaluated */
    double elapsed_s;
} SolverStats;

/* Layer-wise DP; -1 with err when no contiguous split fits the budgets. */
int solver_layer_dp(Plan *plan, SolverStats *st, const ModelConfig *c, const Cluster *cl,
                    const CostModel *m, const SolverRequest *req, char *err, size_t errlen);
/* Layer-wise brute force over every sequence of blocks (tests; tiny cases only). */
double solver_layer_brute(const ModelConfig *c, const Cluster *cl, const CostModel *m,
                          const SolverRequest *req);
/* Exact head-level placement; -1 with err when nothing fits or n_workers > 6. */
int solver_exact(Plan *plan, SolverStats *st, const ModelConfig *c, const Cluster *cl,
                 const CostModel *m, const SolverRequest *req, char *err, size_t errlen);
/* Head-level brute force over every assignment (tests; a layer or two, 2-3 devices). */
double solver_exact_brute(const ModelConfig *c, const Cluster *cl, const CostModel *m,
                          const SolverRequest *req);
/* 1 if plan's weights plus KV for kv_positions fit every budget of cl. */
int solver_plan_fits(const Plan *plan, const ModelConfig *c, const Cluster *cl,
                     int kv_positions);

#endif
