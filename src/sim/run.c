/* run.c: the token loop of the simulator: builds the policy's placement, then for every token
 * draws the speculation outcomes, builds the token's task graph (flow.c or galaxy.c) and runs
 * it on the event core; the dynamic policy re-places (the engine's plan_replace, for the KV
 * cache grown so far) when a device passes its threshold, and pays for moving KV caches and
 * reloading weights before the token.  Also the jitter-free single-token and single-layer
 * times that the solvers use, and the CSV/JSON results. */
#include "sim_internal.h"
#include "solver.h"

#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void run_plan_copy(Plan *dst, const Plan *src)
{
    *dst = *src;
    dst->layers = xcalloc((size_t)src->n_layers, sizeof(LayerPlan));
    for (int l = 0; l < src->n_layers; l++) {
        dst->layers[l] = src->layers[l];
        dst->layers[l].parts = xmalloc((size_t)src->layers[l].n_parts * sizeof(AttnPart));
        memcpy(dst->layers[l].parts, src->layers[l].parts,
               (size_t)src->layers[l].n_parts * sizeof(AttnPart));
        dst->layers[l].slices = NULL;
        if (src->layers[l].n_slices > 0) {
            size_t b = (size_t)src->layers[l].n_slices * sizeof(FfnSlice);
            dst->layers[l].slices = xmalloc(b);
            memcpy(dst->layers[l].slices, src->layers[l].slices, b);
        }
    }
}

/* Highest (weights + KV for positions) / budget over the workers with a budget. */
static double mem_frac(const Plan *p, const ModelConfig *c, const Cluster *cl, int positions,
                       int *worst)
{
    double mx = 0;
    for (int r = 1; r < cl->n; r++) {
        if (!cl->dev[r].mem_budget)
            continue;
        double b = (double)(plan_rank_weight_bytes(p, c, r) +
                            plan_rank_kv_bytes(p, c, r, positions));
        double f = b / (double)cl->dev[r].mem_budget;
        if (f > mx) {
            mx = f;
            if (worst)
                *worst = r;
        }
    }
    return mx;
}

static int build_head_plan(Plan *p, const ModelConfig *c, const Cluster *cl, double frac,
                           int kv_positions, char *err, size_t errlen)
{
    PlanRequest req = {.partition = PARTITION_HEAD, .placement = PLACEMENT_GREEDY,
                       .kv_positions = kv_positions};
    return plan_build_cluster(p, c, &req, cl, frac, 1, err, errlen);
}

/* Migration from old to new before the token at pos: KV caches move over the links, the new
 * holder of a piece reloads its weights from storage.  Returns the seconds it takes. */
static double migrate(SimDes *d, const Plan *old, const Plan *nw, const ModelConfig *c,
                      const Cluster *cl, int pos, double now, SimResult *res)
{
    des_reset(d);
    for (int l = 0; l < nw->n_layers; l++) {
        const LayerPlan *a = &old->layers[l], *b = &nw->layers[l];
        for (int k = 0; k < b->n_parts && k < a->n_parts; k++) {
            int from = a->parts[k].rank, to = b->parts[k].rank;
            if (from == to)
                continue;
            double kv = (double)config_kv_bytes(c, pos);
            double w = (double)config_attn_unit_bytes(c, b->parts[k].q1 - b->parts[k].q0);
            if (kv > 0)
                des_msg(d, SIM_TAG_KV_MOVE, l, from, to, kv);
            des_compute(d, SIM_TAG_RELOAD, l, to, w / cl->dev[to].load_Bps);
            res->migrated_bytes += kv + w;
        }
        double pw = (double)config_proj_bytes(c),
               fw = (double)config_ffn_bytes(c, c->ffn_dim);
        if (a->proj_rank != b->proj_rank) {
            des_compute(d, SIM_TAG_RELOAD, l, b->proj_rank, pw / cl->dev[b->proj_rank].load_Bps);
            res->migrated_bytes += pw;
        }
        if (a->ffn_rank != b->ffn_rank) {
            des_compute(d, SIM_TAG_RELOAD, l, b->ffn_rank, fw / cl->dev[b->ffn_rank].load_Bps);
            res->migrated_bytes += fw;
        }
    }
    return des_run(d, now, res) - now;
}

/* Dynamic policy, before the token at pos: when a device passes the threshold because its
 * KV cache grew past what the plan reserved (*horizon positions), or passes its budget,
 * re-places with the engine's re-placement (plan_replace: attention parts, with their KV
 * caches, move off every device past threshold * budget onto the devices with the most room)
 * for twice the current positions (else for fewer).  Returns migration seconds, or -1 when
 * the cache no longer fits anywhere. */
static double dynamic_step(SimDes *d, Plan *plan, int *horizon, const ModelConfig *c,
                           const Cluster *cl, const SimOptions *o, int pos, double now,
                           SimResult *res)
{
    int worst = 0;
    double frac = mem_frac(plan, c, cl, pos + 1, &worst);
    if (frac <= o->replan_at || (pos + 1 <= *horizon && frac <= 1.0))
        return 0;
    char err[256];
    Plan np;
    /* Room for twice the positions; else for fewer. */
    const int need = pos + 1;
    const int hs[3] = {2 * need, need + need / 4, need + 1};
    const PlanRequest req = {.partition = plan->partition, .placement = plan->placement,
                             .n_workers = cl->n - 1, .cluster = cl, .kv_positions = need};
    int moved = -1, h = need;
    for (int i = 0; i < 3 && moved <= 0; i++) {
        h = hs[i] < c->context_length ? hs[i] : c->context_length;
        moved = plan_replace(&np, plan, c, &req, need, h, o->replan_at, err, sizeof err);
        if (moved == 0)
            plan_free(&np);
    }
    if (moved <= 0) {
        if (frac > 1.0) {
            snprintf(res->status, sizeof res->status, "out of memory at token %d: rank %d needs "
                     "%.0f%% of its budget and no re-placement fits", pos, worst, frac * 100);
            return -1;
        }
        *horizon = need + 8; /* try again a little later */
        return 0;
    }
    if (o->trace)
        fprintf(o->trace, "# replan token %d rank %d at %.1f%%\n", pos, worst, frac * 100);
    double t = migrate(d, plan, &np, c, cl, pos, now, res);
    plan_free(plan);
    *plan = np;
    *horizon = h;
    res->replans++;
    return t;
}

static int setup_policy(Plan *plan, const ModelConfig *c, const Cluster *cl,
                        const SimOptions *o, char *err, size_t errlen)
{
    SolverRequest req = {o->n_tokens, 0, 0};
    SimCostInputs in = {cl, o->n_tokens / 2};
    CostModel model = sim_cost_model(&in);
    int horizon = o->kv_horizon > 0 && o->kv_horizon < o->n_tokens ? o->kv_horizon : o->n_tokens;
    switch (o->policy) {
    case SIM_POLICY_LAYER_DP:
        return solver_layer_dp(plan, NULL, c, cl, &model, &req, err, errlen);
    case SIM_POLICY_GALAXY: return galaxy_build_plan(plan, c, cl, o->n_tokens, err, errlen);
    case SIM_POLICY_GREEDY: return build_head_plan(plan, c, cl, 1.0, o->n_tokens, err, errlen);
    case SIM_POLICY_DYNAMIC:
        /* Headroom for the KV cache to grow into; the whole budget if that does not fit. */
        if (build_head_plan(plan, c, cl, o->replan_at, horizon, err, errlen) == 0)
            return 0;
        return build_head_plan(plan, c, cl, 1.0, horizon, err, errlen);
    case SIM_POLICY_PLAN:
        if (!o->plan || o->plan->n_layers != c->n_layers || o->plan->n_workers != (cl->n - 1))
            return util_err(err, errlen, "the plan does not match the model and devices");
        run_plan_copy(plan, o->plan);
        return plan_validate(plan, c, err, errlen);
    default: return util_err(err, errlen, "unknown policy %d", (int)o->policy);
    }
}

int sim_run(SimResult *res, const ModelConfig *c, const Cluster *cl, const SimOptions *o,
            char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (o->n_tokens < 1 || o->n_tokens > c->context_length)
        return util_err(err, errlen, "--tokens: %d is outside 1..%d (the model's context)",
                        o->n_tokens, c->context_length);
    Plan plan;
    memset(&plan, 0, sizeof plan);
    if (setup_policy(&plan, c, cl, o, err, errlen) < 0)
        return -1;
    if (o->policy != SIM_POLICY_DYNAMIC && mem_frac(&plan, c, cl, o->n_tokens, NULL) > 1.0) {
        plan_free(&plan);
        return util_err(err, errlen, "the %s placement does not fit the memory budgets with KV "
                        "cache for %d tokens", sim_policy_name(o->policy), o->n_tokens);
    }
    uint64_t jit = o->seed ^ 0x6a09e667f3bcc908ull, spc = o->seed ^ 0xbb67ae8584caa73bull;
    SimDes d;
    des_init(&d, cl, &jit, o->trace);
    SimFlow f;
    flow_init(&f, &d, c, cl, sim_plan_max_parts(&plan));
    unsigned char *spec = xcalloc((size_t)c->n_layers, 1);
    res->token_ms = xcalloc((size_t)o->n_tokens, sizeof(double));
    res->migrate_ms = xcalloc((size_t)o->n_tokens, sizeof(double));
    snprintf(res->status, sizeof res->status, "ok");
    double now = 0;
    int horizon = o->kv_horizon > 0 && o->kv_horizon < o->n_tokens ? o->kv_horizon : o->n_tokens;
    for (int t = 0; t < o->n_tokens; t++) {
        double t_start = now, mig = 0;
        if (o->policy == SIM_POLICY_DYNAMIC) {
            mig = dynamic_step(&d, &plan, &horizon, c, cl, o, t, now, res);
            if (mig < 0)
                break;
            now += mig;
        }
        if (o->trace)
            fprintf(o->trace, "# token %d start %.9f\n", t, now);
        /* One draw per transition and token, whatever the policy: common random numbers. */
        for (int l = 1; l < c->n_layers; l++) {
            double u = (double)(rng_next(&spc) >> 11) / 9007199254740992.0;
            double p = o->accept ? o->accept[l - 1] : o->accept_all;
            spec[l] = FLOW_SPEC_NONE;
            if (o->speculate && p >= 0 && flow_spec_eligible(&plan, l - 1)) {
                spec[l] = u < p ? FLOW_SPEC_KEEP : FLOW_SPEC_REJECT;
                res->spec_tried++;
                res->spec_rejected += spec[l] == FLOW_SPEC_REJECT;
            }
        }
        des_reset(&d);
        f.pos = t;
        flow_token(&f, &plan, spec);
        now = des_run(&d, now, res);
        res->token_ms[t] = (now - t_start) * 1e3;
        res->migrate_ms[t] = mig * 1e3;
        res->n_tokens = t + 1;
        double mf = mem_frac(&plan, c, cl, t + 1, NULL);
        if (mf > res->peak_mem_frac)
            res->peak_mem_frac = mf;
    }
    res->total_s = now;
    for (int r = 1; r < cl->n; r++)
        for (int l = 0; l < plan.n_layers; l++)
            if (plan_rank_in_layer(&plan, l, r)) {
                res->devices_used++;
                break;
            }
    res->plan = plan;
    free(spec);
    flow_free(&f);
    des_free(&d);
    return 0;
}

void sim_result_free(SimResult *res)
{
    if (!res)
        return;
    free(res->token_ms);
    free(res->migrate_ms);
    plan_free(&res->plan);
    memset(res, 0, sizeof *res);
}

int sim_result_write_csv(const SimResult *res, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return util_err(err, errlen, "%s: cannot write the CSV", path);
    fprintf(f, "token,latency_ms,migrate_ms,time_s\n");
    double t = 0;
    for (int i = 0; i < res->n_tokens; i++) {
        t += res->token_ms[i] / 1e3;
        fprintf(f, "%d,%.6f,%.6f,%.6f\n", i + 1, res->token_ms[i], res->migrate_ms[i], t);
    }
    return fclose(f) == 0 ? 0 : util_err(err, errlen, "%s: write failed", path);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

json_t *sim_result_to_json(const SimResult *res, const SimOptions *o)
{
    json_t *j = json_object();
    int n = res->n_tokens;
    double *v = xmalloc(((size_t)n + 1) * sizeof(double)), mean = 0, mig = 0;
    for (int i = 0; i < n; i++) {
        v[i] = res->token_ms[i];
        mean += v[i] / n;
        mig += res->migrate_ms[i];
    }
    /* The engine's median leaves out the first token; so does this one. */
    int skip = n > 1;
    qsort(v + skip, (size_t)(n - skip), sizeof(double), cmp_double);
    double med = n ? v[skip + (n - skip) / 2] : 0, p95 = n ? v[skip + (int)((n - skip - 1) * 0.95)]
                                                          : 0;
    json_object_set_new(j, "policy", json_string(sim_policy_name(o->policy)));
    json_object_set_new(j, "speculate", json_boolean(o->speculate));
    json_object_set_new(j, "accept", json_real(o->accept_all));
    json_object_set_new(j, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(j, "status", json_string(res->status));
    json_object_set_new(j, "tokens", json_integer(n));
    json_object_set_new(j, "ms_per_token_mean", json_real(mean));
    json_object_set_new(j, "ms_per_token_median", json_real(med));
    json_object_set_new(j, "ms_per_token_p95", json_real(p95));
    json_object_set_new(j, "ms_first", json_real(n ? res->token_ms[0] : 0));
    json_object_set_new(j, "ms_last", json_real(n ? res->token_ms[n - 1] : 0));
    json_object_set_new(j, "total_s", json_real(res->total_s));
    json_t *ops = json_object(), *busy = json_object();
    for (int t = 0; t < SIM_TAG_COUNT; t++)
        if (res->ops[t] && t != SIM_TAG_JOIN) {
            json_object_set_new(ops, sim_tag_name((SimTag)t), json_real((double)res->ops[t] / n));
            json_object_set_new(busy, sim_tag_name((SimTag)t), json_real(res->busy_s[t] * 1e3 / n));
        }
    json_object_set_new(j, "ops_per_token", ops);
    json_object_set_new(j, "busy_ms_per_token", busy);
    json_object_set_new(j, "bytes_per_token", json_real(n ? res->bytes_sent / n : 0));
    json_object_set_new(j, "messages_per_token", json_real(n ? res->messages / n : 0));
    json_object_set_new(j, "spec_tried", json_integer(res->spec_tried));
    json_object_set_new(j, "spec_rejected", json_integer(res->spec_rejected));
    json_object_set_new(j, "replans", json_integer(res->replans));
    json_object_set_new(j, "migrated_bytes", json_real(res->migrated_bytes));
    json_object_set_new(j, "migrate_ms_total", json_real(mig));
    json_object_set_new(j, "peak_mem_frac", json_real(res->peak_mem_frac));
    json_object_set_new(j, "devices_used", json_integer(res->devices_used));
    free(v);
    return j;
}

static const char *policy_names[SIM_POLICY_COUNT] = {"layer-dp", "galaxy", "greedy", "dynamic",
                                                     "plan"};

const char *sim_policy_name(SimPolicy p)
{
    return (unsigned)p < SIM_POLICY_COUNT ? policy_names[p] : "?";
}

int sim_parse_policy(const char *s, SimPolicy *out)
{
    for (int p = 0; p < SIM_POLICY_COUNT; p++)
        if (strcmp(s, policy_names[p]) == 0) {
            *out = (SimPolicy)p;
            return 0;
        }
    return -1;
}

