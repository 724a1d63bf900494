/* calibrate.c: per-operation costs from the engine's own metrics (headsplit --metrics).
 * The engine reports, per layer and per token, the slowest rank's attention, projection and
 * FFN time; each is (weight and KV bytes streamed) / speed + calls * overhead on one machine,
 * so a least-squares fit gives the device speed and the per-call overhead.  The link latency
 * (MPI over loopback, waits included) is then the value that makes the simulated median
 * ms/token of that run equal the measured one. */
#include "sim.h"

#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int get_int(json_t *o, const char *key, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        return -1;
    *out = (int)json_integer_value(v);
    return 0;
}

static double get_num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int read_model(ModelConfig *c, json_t *m, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    json_t *arch = json_object_get(m, "architecture"), *rope = json_object_get(m, "rope_style");
    c->arch = json_is_string(arch) && strcmp(json_string_value(arch), "gpt2") == 0 ? ARCH_GPT2
                                                                                  : ARCH_LLAMA;
    const char *rs = json_is_string(rope) ? json_string_value(rope) : "half";
    c->rope_style = strcmp(rs, "none") == 0 ? ROPE_NONE
                    : strcmp(rs, "interleaved") == 0 ? ROPE_INTERLEAVED : ROPE_HALF;
    if (!m || get_int(m, "dim", &c->dim) || get_int(m, "n_layers", &c->n_layers) ||
        get_int(m, "n_heads", &c->n_heads) || get_int(m, "n_kv_heads", &c->n_kv_heads) ||
        get_int(m, "head_dim", &c->head_dim) || get_int(m, "ffn_dim", &c->ffn_dim) ||
        get_int(m, "vocab_size", &c->vocab_size) ||
        get_int(m, "context_length", &c->context_length))
        return util_err(err, errlen, "metrics: field model lacks a dimension");
    c->norm_eps = (float)get_num(m, "norm_eps");
    c->rope_theta = (float)get_num(m, "rope_theta");
    c->bos_id = c->eos_id = -1;
    return config_validate(c, err, errlen);
}

static int read_plan(Plan *p, json_t *pj, const ModelConfig *c, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    json_t *layers = json_object_get(pj, "layers");
    if (!pj || get_int(pj, "n_workers", &p->n_workers) || !json_is_array(layers) ||
        (int)json_array_size(layers) != c->n_layers)
        return util_err(err, errlen, "metrics: field plan is missing or does not match the "
                        "model (a single-process run has no plan to replay)");
    json_t *part = json_object_get(pj, "partition"), *place = json_object_get(pj, "placement");
    if (json_is_string(part))
        plan_parse_partition(json_string_value(part), &p->partition);
    if (json_is_string(place))
        plan_parse_placement(json_string_value(place), &p->placement);
    p->n_layers = c->n_layers;
    p->layers = xcalloc((size_t)c->n_layers, sizeof(LayerPlan));
    for (int l = 0; l < c->n_layers; l++) {
        json_t *lo = json_array_get(layers, (size_t)l), *parts = json_object_get(lo, "parts");
        LayerPlan *lp = &p->layers[l];
        if (get_int(lo, "proj_rank", &lp->proj_rank) || get_int(lo, "ffn_rank", &lp->ffn_rank) ||
            !json_is_array(parts) || json_array_size(parts) == 0)
            return util_err(err, errlen, "metrics: plan layer %d is malformed", l);
        lp->n_parts = (int)json_array_size(parts);
        lp->parts = xcalloc((size_t)lp->n_parts, sizeof(AttnPart));
        for (int k = 0; k < lp->n_parts; k++) {
            json_t *po = json_array_get(parts, (size_t)k);
            AttnPart *a = &lp->parts[k];
            if (get_int(po, "rank", &a->rank) || get_int(po, "unit", &a->unit) ||
                get_int(po, "q0", &a->q0) || get_int(po, "q1", &a->q1))
                return util_err(err, errlen, "metrics: plan layer %d part %d is malformed", l, k);
        }
    }
    return plan_validate(p, c, err, errlen);
}

int sim_calibrate_read(SimCalibration *cal, const char *path, char *err, size_t errlen)
{
    memset(cal, 0, sizeof *cal);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o)
        return util_err(err, errlen, "%s:%d: %s", path, je.line, je.text);
    char e2[384];
    int rc = read_model(&cal->model, json_object_get(o, "model"), e2, sizeof e2);
    if (rc == 0)
        rc = read_plan(&cal->plan, json_object_get(o, "plan"), &cal->model, e2, sizeof e2);
    json_t *tms = json_object_get(o, "token_ms"), *layers = json_object_get(o, "layers");
    if (rc == 0 && (!json_is_array(tms) || json_array_size(tms) < 2 || !json_is_array(layers) ||
                    (int)json_array_size(layers) != cal->model.n_layers))
        rc = util_err(e2, sizeof e2, "metrics: token_ms or layers missing (run headsplit with "
                      "2+ ranks and --metrics)");
    if (rc == 0) {
        cal->n_tokens = (int)json_array_size(tms);
        cal->token_ms = xcalloc((size_t)cal->n_tokens, sizeof(double));
        for (int i = 0; i < cal->n_tokens; i++)
            cal->token_ms[i] = json_number_value(json_array_get(tms, (size_t)i));
        cal->measured_ms = get_num(o, "ms_per_token");
        json_t *pj = json_object_get(json_object_get(o, "plan"), "placement");
        snprintf(cal->placement, sizeof cal->placement, "%s",
                 json_is_string(pj) ? json_string_value(pj) : "?");
    }
    if (rc == 0) {
        cal->layer_ms = xcalloc((size_t)cal->model.n_layers * 3, sizeof(double));
        for (int l = 0; l < cal->model.n_layers; l++) {
            json_t *lo = json_array_get(layers, (size_t)l);
            cal->layer_ms[l * 3 + 0] = get_num(lo, "attention_ms");
            cal->layer_ms[l * 3 + 1] = get_num(lo, "projection_ms");
            cal->layer_ms[l * 3 + 2] = get_num(lo, "ffn_ms");
        }
    }
    json_decref(o);
    if (rc < 0) {
        util_err(err, errlen, "%s: %s", path, e2);
        sim_calibrate_free(cal);
        return -1;
    }
    return 0;
}

void sim_calibrate_free(SimCalibration *cal)
{
    if (!cal)
        return;
    free(cal->token_ms);
    free(cal->layer_ms);
    plan_free(&cal->plan);
    memset(cal, 0, sizeof *cal);
}

void sim_calibrate_cluster(const SimCalibration *cal, SimCluster *cl, int n_workers,
                           SimBcast bcast)
{
    sim_cluster_init(cl, n_workers);
    for (int r = 0; r <= n_workers; r++)
        cl->dev[r] = (SimDevice){"calibrated", cal->speed, cal->op_overhead, 0, 1e9};
    snprintf(cl->dev[0].name, sizeof cl->dev[0].name, "controller");
    for (size_t i = 0; i < (size_t)(n_workers + 1) * (size_t)(n_workers + 1); i++)
        cl->link[i] = (SimLink){cal->latency, 0, cal->bandwidth};
    cl->bcast = bcast;
    cl->medium = SIM_MEDIUM_SWITCHED;
    snprintf(cl->links_name, sizeof cl->links_name, "calibrated");
}

/* Median simulated ms/token (first token left out, as the engine does). */
static double sim_median(const SimCalibration *cal, const SimCluster *cl)
{
    SimOptions o = {SIM_POLICY_PLAN, &cal->plan, cal->n_tokens, 1, 0, NULL, 1.0, 0.85, 0, NULL};
    SimResult r;
    char err[256];
    if (sim_run(&r, &cal->model, cl, &o, err, sizeof err) < 0)
        return NAN;
    json_t *j = sim_result_to_json(&r, &o);
    double m = get_num(j, "ms_per_token_median");
    json_decref(j);
    sim_result_free(&r);
    return m;
}

int sim_calibrate_fit(SimCalibration *cal, SimBcast bcast, char *err, size_t errlen)
{
    const ModelConfig *c = &cal->model;
    const Plan *p = &cal->plan;
    const double *ms = cal->layer_ms;
    /* The timers average over the run's positions: KV reads at the mean position. */
    int avg_pos = (cal->n_tokens - 1) / 2;
    double sxx = 0, sxy = 0, syy = 0, sx = 0, sy = 0;
    int ns = 0;
    double (*smp)[3] = xcalloc((size_t)c->n_layers * 3, sizeof *smp); /* calls, bytes, s */
    for (int l = 0; l < c->n_layers; l++) {
        const LayerPlan *lp = &p->layers[l];
        /* Attention: the rank with the most work sets the reported maximum. */
        double best_b = 0, best_calls = 0;
        for (int r = 1; r <= p->n_workers; r++) {
            double b = 0, calls = 0;
            for (int k = 0; k < lp->n_parts; k++)
                if (lp->parts[k].rank == r) {
                    b += (double)config_attn_unit_floats(c, lp->parts[k].q1 - lp->parts[k].q0) *
                         sizeof(float) + (double)config_kv_bytes(c, avg_pos + 1);
                    calls++;
                }
            if (b > best_b) {
                best_b = b;
                best_calls = calls;
            }
        }
        double row[3][3] = {
            {best_calls, best_b, ms[l * 3 + 0] / 1e3},
            {1, (double)config_proj_floats(c) * sizeof(float), ms[l * 3 + 1] / 1e3},
            {1, (double)config_ffn_floats(c, c->ffn_dim) * sizeof(float), ms[l * 3 + 2] / 1e3}};
        for (int k = 0; k < 3; k++)
            if (isfinite(row[k][2]) && row[k][1] > 0) {
                memcpy(smp[ns++], row[k], sizeof row[k]);
            }
    }
    /* Least squares t = calls * o + bytes * u (u = 1/speed). */
    for (int i = 0; i < ns; i++) {
        sxx += smp[i][0] * smp[i][0];
        sxy += smp[i][0] * smp[i][1];
        syy += smp[i][1] * smp[i][1];
        sx += smp[i][0] * smp[i][2];
        sy += smp[i][1] * smp[i][2];
    }
    double det = sxx * syy - sxy * sxy, o = 0, u = 0;
    if (ns >= 2 && det > 0) {
        o = (sx * syy - sy * sxy) / det;
        u = (sxx * sy - sxy * sx) / det;
    }
    if (o < 0 || u <= 0) {
        o = 0;
        u = syy > 0 ? sy / syy : 0;
    }
    if (!(u > 0)) {
        free(smp);
        return util_err(err, errlen, "calibration: the per-layer timers are empty or zero");
    }
    double rss = 0;
    for (int i = 0; i < ns; i++) {
        double e = smp[i][0] * o + smp[i][1] * u - smp[i][2];
        rss += e * e;
    }
    free(smp);
    cal->speed = 1.0 / u;
    cal->op_overhead = o;
    cal->fit_rms_ms = ns ? sqrt(rss / ns) * 1e3 : 0;
    cal->bandwidth = 5e9; /* shared-memory transport: small messages are latency-bound */
    /* Link latency: bisection on the simulated median of this very run. */
    double lo = 0, hi = 0.05;
    SimCluster cl;
    cal->latency = 0;
    sim_calibrate_cluster(cal, &cl, p->n_workers, bcast);
    double t_lo = sim_median(cal, &cl);
    sim_cluster_free(&cl);
    if (!(t_lo < cal->measured_ms)) {
        cal->latency = 0; /* compute alone already reaches the measured time */
        return 0;
    }
    for (int it = 0; it < 60; it++) {
        cal->latency = (lo + hi) / 2;
        sim_calibrate_cluster(cal, &cl, p->n_workers, bcast);
        double t = sim_median(cal, &cl);
        sim_cluster_free(&cl);
        if (t < cal->measured_ms)
            lo = cal->latency;
        else
            hi = cal->latency;
    }
    cal->latency = (lo + hi) / 2;
    return 0;
}
