/* cost.h: one interface over the cost models, so that the planner, the simulator and the tools
 * compare plans the same way whichever model prices them: the analytic critical path
 * (src/plan/cost.c, plan_predict_ms) and the simulator's deterministic replay of the engine's
 * flow (sim_cost_model in sim.h, sim_plan_token_time).  Both count the same work: weights and
 * KV cache streamed per device, the LM head's rows plus the final norm on each split-head
 * member, one-way latency plus bytes over bandwidth per message. */
#ifndef HEADSPLIT_COST_H
#define HEADSPLIT_COST_H

#include "plan.h"

/* Milliseconds per token of plan under the model's inputs (ctx). */
typedef double (*CostTokenMs)(const void *ctx, const Plan *plan, const ModelConfig *c);

typedef struct {
    const char *name;     /* "analytic", "simulated" */
    CostTokenMs token_ms;
    const void *ctx;      /* the model's inputs, owned by the caller, alive while in use */
} CostModel;

/* The analytic model over req's devices and links (plan_predict_ms); req must outlive it. */
CostModel cost_model_analytic(const PlanRequest *req);
/* m's prediction for plan, ms per token. */
double cost_token_ms(const CostModel *m, const Plan *plan, const ModelConfig *c);

/* Builds the candidate plans (layer-wise, head-level greedy, slice) from req and keeps the one
 * m predicts fastest; a later (less simple) candidate must be predicted at least 1% faster.
 * *pred_ms (may be NULL) receives its prediction, preds[3] (may be NULL) every candidate's
 * (-1 where it does not fit).  Returns 0, or -1 with err when no candidate fits. */
int cost_build_best(Plan *plan, const ModelConfig *c, const PlanRequest *req,
                    const CostModel *m, double *pred_ms, double *preds, char *err,
                    size_t errlen);

#endif
