/* price.c: the simulator's deterministic costs of a plan: one token (sim_plan_token_time) and
 * one layer from a given producer (sim_layer_time), by the same event replay as a run without
 * jitter; the layer DP and the exact solver price their candidates with them, and the cost
 * interface (cost.h) offers them as the "simulated" model.  Kept apart from run.c so that the
 * calls go one way: run -> solvers -> price -> flow -> des. */
#include "sim_internal.h"

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

double sim_layer_time(const ModelConfig *c, const Cluster *cl, const LayerPlan *lp,
                      int producer, int pos)
{
    SimDes d;
    des_init(&d, cl, NULL, NULL);
    SimFlow f;
    flow_init(&f, &d, c, cl, lp->n_parts);
    f.pos = pos;
    flow_layer(&f, lp, 0, producer, -1);
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

CostModel sim_cost_model(const SimCostInputs *in)
{
    return (CostModel){"simulated", simulated_token_ms, in};
}
