/* price.c: the simulator's deterministic costs of a plan: one token (sim_plan_token_time) and
 * one layer from a given producer (sim_layer_time), by the same event replay as a run without
 * jitter, offered with the per-operation costs behind the cost interface (cost.h) as the
 * "simulated" model, which the layer DP and the exact solver (src/plan/) price their
 * candidates with.  Calls go one way: run -> price -> flow -> des; the solvers reach the
 * simulator only through the CostModel they are given. */
#include "sim_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

int sim_plan_max_parts(const Plan *p)
{
    int m = 1;
    for (int l = 0; p->layers && l < p->n_layers; l++)
        if (p->layers[l].n_parts > m)
            m = p->layers[l].n_parts;
    return m;
}

double sim_plan_token_time(const ModelConfig *c, const Cluster *cl, const Plan *plan, int pos)
{
    SimDes d;
    des_init(&d, cl, NULL, NULL);
    SimFlow f;
    flow_init(&f, &d, c, cl, sim_plan_max_parts(plan));
    f.pos = pos;
    flow_token(&f, plan, NULL);
    double t = des_run(&d, 0, NULL);
    flow_free(&f);
    des_free(&d);
    return t;
}

double sim_plan_token_counts(const ModelConfig *c, const Cluster *cl, const Plan *plan,
                             int pos, WireForm wire, const unsigned char *spec,
                             const unsigned char *accept, double *bytes, double *messages)
{
    SimDes d;
    des_init(&d, cl, NULL, NULL);
    SimFlow f;
    flow_init(&f, &d, c, cl, sim_plan_max_parts(plan));
    f.pos = pos;
    f.wire = wire;
    unsigned char *fs = xcalloc((size_t)plan->n_layers + 1, 1);
    for (int l = 1; spec && l < plan->n_layers; l++)
        fs[l] = !spec[l] ? FLOW_SPEC_NONE
                : !accept || accept[l] ? FLOW_SPEC_KEEP : FLOW_SPEC_REJECT;
    flow_token(&f, plan, fs);
    SimResult acc;
    memset(&acc, 0, sizeof acc);
    double t = des_run(&d, 0, &acc);
    if (bytes)
        *bytes = acc.bytes_sent;
    if (messages)
        *messages = acc.messages;
    free(fs);
    flow_free(&f);
    des_free(&d);
    return t;
}

double sim_layer_time(const ModelConfig *c, const Cluster *cl, const LayerPlan *lp,
                      int producer, int pos)
{
    SimDes d;
    des_init(&d, cl, NULL, NULL);
    SimFlow f;
    flow_init(&f, &d, c, cl, lp->n_parts);
    f.pos = pos;
    flow_layer(&f, lp, 0, producer);
    double t = des_run(&d, 0, NULL);
    flow_free(&f);
    des_free(&d);
    return t;
}

static double simulated_token_ms(const void *ctx, const Plan *plan, const ModelConfig *c)
{
    const SimCostInputs *in = ctx;
    return sim_plan_token_time(c, in->cl, plan, in->pos) * 1e3;
}

static double simulated_token_s(const void *ctx, const Plan *plan, const ModelConfig *c)
{
    const SimCostInputs *in = ctx;
    return sim_plan_token_time(c, in->cl, plan, in->pos);
}

static double simulated_layer_s(const void *ctx, const LayerPlan *lp, int producer,
                                const ModelConfig *c)
{
    const SimCostInputs *in = ctx;
    return sim_layer_time(c, in->cl, lp, producer, in->pos);
}

static double simulated_hop_s(const void *ctx, int a, int b, const ModelConfig *c)
{
    return sim_cost_msg(((const SimCostInputs *)ctx)->cl, a, b, sim_msg_bytes(c));
}

static double simulated_controller_s(const void *ctx, int embed, const ModelConfig *c)
{
    return sim_cost_controller(c, ((const SimCostInputs *)ctx)->cl, embed);
}

static double simulated_ffn_s(const void *ctx, int rank, const ModelConfig *c)
{
    return sim_cost_ffn(c, ((const SimCostInputs *)ctx)->cl, rank);
}

CostModel sim_cost_model(const SimCostInputs *in)
{
    return (CostModel){.name = "simulated", .token_ms = simulated_token_ms,
                       .token_s = simulated_token_s, .layer_s = simulated_layer_s,
                       .hop_s = simulated_hop_s, .controller_s = simulated_controller_s,
                       .ffn_s = simulated_ffn_s, .ctx = in};
}
