/* cost.h: one interface over the cost models, so that the planner, the solvers, the simulator
 * and the tools compare plans the same way whichever model prices them: the analytic critical
 * path (src/plan/cost.c, plan_predict_ms) and the simulator's deterministic replay of the
 * engine's flow (sim_cost_model in sim.h, sim_plan_token_time).  Both count the same work:
 * weights and KV cache streamed per device, the LM head's rows plus the final norm on each
 * split-head member, one-way latency plus bytes over bandwidth per message.
 *
 * Besides a whole token (token_ms), a model prices the pieces that the layer-wise solvers
 * (solver.h: the layer DP, the exact head-level search) add up, in seconds.  With one token
 * in flight a PIPE plan's token is
 *     controller_s(embed 1) + sum over layers l of layer_s(l, producer: the FFN rank of l-1,
 *     the controller for l = 0) + hop_s(last FFN rank, 0) + controller_s(embed 0),
 * which token_s gives whole (equal to rounding). */
#ifndef HEADSPLIT_COST_H
#define HEADSPLIT_COST_H

#include "plan.h"

/* Milliseconds per token of plan under the model's inputs (ctx). */
typedef double (*CostTokenMs)(const void *ctx, const Plan *plan, const ModelConfig *c);
/* Seconds of one token of plan (the solvers' unit). */
typedef double (*CostTokenS)(const void *ctx, const Plan *plan, const ModelConfig *c);
/* Seconds of one PIPE layer lp whose input rank producer holds at time 0: until its FFN rank
 * holds the output. */
typedef double (*CostLayerS)(const void *ctx, const LayerPlan *lp, int producer,
                             const ModelConfig *c);
/* Seconds of one activation message (a layer's input or output) from rank a to rank b (0 for
 * a == b). */
typedef double (*CostHopS)(const void *ctx, int a, int b, const ModelConfig *c);
/* Seconds of the controller's work per token: the embedding (embed 1), or the final norm and
 * LM head (embed 0). */
typedef double (*CostControllerS)(const void *ctx, int embed, const ModelConfig *c);
/* Seconds of a whole FFN on rank (every layer's is at least this on that rank: a bound). */
typedef double (*CostFfnS)(const void *ctx, int rank, const ModelConfig *c);

typedef struct CostModel {
    const char *name;     /* "analytic", "simulated" */
    CostTokenMs token_ms;
    CostTokenS token_s;
    CostLayerS layer_s;
    CostHopS hop_s;
    CostControllerS controller_s;
    CostFfnS ffn_s;
    const void *ctx;      /* the model's inputs, owned by the caller, alive while in use */
} CostModel;

/* The analytic model over req's devices and links (plan_predict_ms); req must outlive it.
 * Its pieces: layer_s the critical path of one PIPE layer as plan_predict_ms walks it, hop_s a message's latency and airtime, controller_s no embedding and req->fixed_ms
 * for the head, ffn_s the FFN's weights at the rank's speed. */
CostModel cost_model_analytic(const PlanRequest *req);
/* What a walk of a token's steps charged: bytes and messages put on the wire (WireHdr
 * included), hops of its critical path. */
typedef struct {
    double bytes, messages;
    int hops;
} CostTally;

/* The analytic model's walk of plan's step program (req's wire form and speculation mask;
 * accept[l]: speculation into l kept, NULL: kept): ms of the token, and what it charged into
 * *tally (may be NULL). */
double cost_predict_tally(const Plan *plan, const ModelConfig *c, const PlanRequest *req,
                          const unsigned char *accept, CostTally *tally);
/* m's prediction for plan, ms per token. */
double cost_token_ms(const CostModel *m, const Plan *plan, const ModelConfig *c);
/* m's pieces (above), in seconds. */
double cost_token_s(const CostModel *m, const Plan *plan, const ModelConfig *c);
double cost_layer_s(const CostModel *m, const LayerPlan *lp, int producer, const ModelConfig *c);
double cost_hop_s(const CostModel *m, int a, int b, const ModelConfig *c);
double cost_controller_s(const CostModel *m, int embed, const ModelConfig *c);
double cost_ffn_s(const CostModel *m, int rank, const ModelConfig *c);

/* Builds the candidate plans (layer-wise, head-level greedy, slice) from req and keeps the one
 * m predicts fastest; a later (less simple) candidate must be predicted at least 1% faster.
 * With a cluster cl (may be NULL) the layer-wise candidate is the better of req's naive
 * stages and the best layer-wise plan over subsets of cl's devices (solver_layer_dp under m,
 * KV for kv_positions in the budgets): one board when the model fits it and nothing faster
 * does.  *pred_ms (may be NULL) receives its prediction, preds[3] (may be NULL) every
 * candidate's (-1 where it does not fit); *layer_dp (may be NULL) is 1 when the layer-wise
 * candidate is the solver's.  Returns 0, or -1 with err when no candidate fits. */
int cost_build_best(Plan *plan, const ModelConfig *c, const PlanRequest *req,
                    const CostModel *m, const Cluster *cl, int kv_positions, double *pred_ms,
                    double *preds, int *layer_dp, char *err, size_t errlen);

#endif
