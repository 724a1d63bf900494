/* calibrate.c: the simulator against the engine's own measurements (headsplit --metrics).
 * A run's metrics carry the model, the plan it ran (replayed as is), the per-token latencies,
 * the --emulate-link spec (one-way latency rtt/2, uniform jitter, bandwidth) or else the
 * start-up RTT matrix (one-way = RTT / 2), and the speculation outcomes.  What remains is one
 * number: the device speed (bytes/s streamed, every rank of the host alike, small per-op
 * and software costs folded in), fitted so that the simulated median ms/token of the fit
 * runs matches theirs.  The other runs are then predictions.  (Fitting a per-message or
 * per-op overhead as well was tried: on a busy host the fit runs are too noisy to tell the
 * two apart, and the extra term made predictions worse.)  The per-layer timers are kept
 * for reference only: they average over every token, the slow first one included. */
#include "sim.h"

#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CAL_SKIP 2 /* warm-up tokens (the first one pays start-up costs) */

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
        return util_err(err, errlen, "field model lacks a dimension");
    /* the stored types (runs before they were recorded: fp32) */
    json_t *types = json_object_get(m, "weight_types");
    for (int k = 0; json_is_object(types) && k < WKIND_COUNT; k++) {
        json_t *t = json_object_get(types, config_wkind_name((WeightKind)k));
        const int q = json_is_string(t) ? quant_type_from_name(json_string_value(t)) : -1;
        if (json_is_string(t) && q < 0)
            return util_err(err, errlen, "field model.weight_types.%s: unknown type '%s'",
                            config_wkind_name((WeightKind)k), json_string_value(t));
        if (q >= 0)
            c->wtype[k] = q;
    }
    c->norm_eps = (float)get_num(m, "norm_eps");
    c->rope_theta = (float)get_num(m, "rope_theta");
    c->bos_id = c->eos_id = -1;
    return config_validate(c, err, errlen);
}

static int read_layer(LayerPlan *lp, json_t *lo, int l, char *err, size_t errlen)
{
    json_t *parts = json_object_get(lo, "parts"), *mode = json_object_get(lo, "mode");
    json_t *sl = json_object_get(lo, "ffn_slices");
    if (get_int(lo, "proj_rank", &lp->proj_rank) || get_int(lo, "ffn_rank", &lp->ffn_rank) ||
        !json_is_array(parts) || json_array_size(parts) == 0)
        return util_err(err, errlen, "plan layer %d is malformed", l);
    lp->mode = json_is_string(mode) && strcmp(json_string_value(mode), "slice") == 0
                   ? LAYER_SLICE : LAYER_PIPE;
    lp->n_parts = (int)json_array_size(parts);
    lp->parts = xcalloc((size_t)lp->n_parts, sizeof(AttnPart));
    for (int k = 0; k < lp->n_parts; k++) {
        json_t *po = json_array_get(parts, (size_t)k);
        AttnPart *a = &lp->parts[k];
        if (get_int(po, "rank", &a->rank) || get_int(po, "unit", &a->unit) ||
            get_int(po, "q0", &a->q0) || get_int(po, "q1", &a->q1))
            return util_err(err, errlen, "plan layer %d part %d is malformed", l, k);
    }
    if (lp->mode == LAYER_SLICE) {
        if (!json_is_array(sl) || json_array_size(sl) == 0)
            return util_err(err, errlen, "plan layer %d: a slice layer without ffn_slices", l);
        lp->n_slices = (int)json_array_size(sl);
        lp->slices = xcalloc((size_t)lp->n_slices, sizeof(FfnSlice));
        for (int k = 0; k < lp->n_slices; k++) {
            json_t *so = json_array_get(sl, (size_t)k);
            if (get_int(so, "rank", &lp->slices[k].rank) || get_int(so, "f0", &lp->slices[k].f0) ||
                get_int(so, "f1", &lp->slices[k].f1))
                return util_err(err, errlen, "plan layer %d slice %d is malformed", l, k);
        }
    }
    return 0;
}

static int read_plan(Plan *p, json_t *pj, const ModelConfig *c, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    json_t *layers = json_object_get(pj, "layers");
    if (!pj || get_int(pj, "n_workers", &p->n_workers) || !json_is_array(layers) ||
        (int)json_array_size(layers) != c->n_layers)
        return util_err(err, errlen, "field plan is missing or does not match the model (a "
                        "single-process run has no plan to replay)");
    json_t *part = json_object_get(pj, "partition"), *place = json_object_get(pj, "placement");
    if (json_is_string(part))
        plan_parse_partition(json_string_value(part), &p->partition);
    if (json_is_string(place))
        plan_parse_placement(json_string_value(place), &p->placement);
    json_t *lmh = json_object_get(pj, "lm_head"); /* absent in runs before the split head */
    p->head_split = json_is_string(lmh) && strcmp(json_string_value(lmh), "split") == 0;
    p->n_layers = c->n_layers;
    p->layers = xcalloc((size_t)c->n_layers, sizeof(LayerPlan));
    for (int l = 0; l < c->n_layers; l++)
        if (read_layer(&p->layers[l], json_array_get(layers, (size_t)l), l, err, errlen) < 0)
            return -1;
    return plan_validate(p, c, err, errlen);
}

static double median_from(const double *v, int n, int skip)
{
    if (n - skip < 1)
        skip = 0;
    return util_median(v + skip, (size_t)(n - skip));
}

static int read_run(SimMeasuredRun *run, json_t *o, char *err, size_t errlen)
{
    if (read_model(&run->model, json_object_get(o, "model"), err, errlen) < 0 ||
        read_plan(&run->plan, json_object_get(o, "plan"), &run->model, err, errlen) < 0)
        return -1;
    const int L = run->model.n_layers, n1 = run->plan.n_workers + 1;
    json_t *tms = json_object_get(o, "token_ms"), *layers = json_object_get(o, "layers");
    if (!json_is_array(tms) || json_array_size(tms) < 2 || !json_is_array(layers) ||
        (int)json_array_size(layers) != L)
        return util_err(err, errlen, "token_ms or layers missing (run headsplit with 2+ ranks "
                        "and --metrics)");
    run->n_tokens = (int)json_array_size(tms);
    run->skip = run->n_tokens > CAL_SKIP + 2 ? CAL_SKIP : 0;
    run->token_ms = xcalloc((size_t)run->n_tokens, sizeof(double));
    for (int i = 0; i < run->n_tokens; i++)
        run->token_ms[i] = json_number_value(json_array_get(tms, (size_t)i));
    run->measured_ms = median_from(run->token_ms, run->n_tokens, run->skip);
    run->layer_ms = xcalloc((size_t)L * 3, sizeof(double));
    run->accept = xcalloc((size_t)L, sizeof(double));
    for (int l = 0; l < L; l++) {
        json_t *lo = json_array_get(layers, (size_t)l);
        run->layer_ms[l * 3 + 0] = get_num(lo, "attention_ms");
        run->layer_ms[l * 3 + 1] = get_num(lo, "projection_ms");
        run->layer_ms[l * 3 + 2] = get_num(lo, "ffn_ms");
        double tried = get_num(lo, "spec_tried"), kept = get_num(lo, "spec_kept");
        run->accept[l] = tried > 0 ? kept / tried : -1;
        run->speculated |= tried > 0;
    }
    json_t *rtt = json_object_get(o, "rtt_ms");
    if (json_is_array(rtt) && (int)json_array_size(rtt) == n1) {
        run->rtt_ms = xcalloc((size_t)n1 * (size_t)n1, sizeof(double));
        for (int a = 0; a < n1; a++)
            for (int b = 0; b < n1; b++)
                run->rtt_ms[a * n1 + b] =
                    json_number_value(json_array_get(json_array_get(rtt, (size_t)a), (size_t)b));
    }
    json_t *cfg = json_object_get(o, "config"), *emu = json_object_get(cfg, "emulate_link");
    /* the emulated link as the engine parsed it (a preset or a spec, the medium included) */
    if (json_is_string(emu)) {
        char why[256];
        if (cluster_parse_link(json_string_value(emu), &run->emu, why, sizeof why) != 0)
            return util_err(err, errlen, "config.emulate_link: %s", why);
        run->emulated = 1;
    }
    json_t *pl = json_object_get(cfg, "placement"), *pa = json_object_get(cfg, "partition");
    snprintf(run->placement, sizeof run->placement, "%s",
             json_is_string(pl) ? json_string_value(pl) : "?");
    snprintf(run->partition, sizeof run->partition, "%s",
             plan_partition_name(run->plan.partition));
    if (json_is_string(pa) && strcmp(json_string_value(pa), "auto") != 0)
        snprintf(run->partition, sizeof run->partition, "%s", json_string_value(pa));
    return 0;
}

int sim_calibrate_read(SimMeasuredRun *run, const char *path, char *err, size_t errlen)
{
    memset(run, 0, sizeof *run);
    snprintf(run->file, sizeof run->file, "%s", path);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o)
        return util_err(err, errlen, "%s:%d: %s", path, je.line, je.text);
    char e2[400];
    int rc = read_run(run, o, e2, sizeof e2);
    json_decref(o);
    if (rc < 0) {
        util_err(err, errlen, "%s: %s", path, e2);
        sim_calibrate_free(run);
    }
    return rc;
}

void sim_calibrate_free(SimMeasuredRun *run)
{
    if (!run)
        return;
    free(run->token_ms);
    free(run->rtt_ms);
    free(run->accept);
    free(run->layer_ms);
    plan_free(&run->plan);
    memset(run, 0, sizeof *run);
}

void sim_calibrate_cluster(const SimCalibration *cal, const SimMeasuredRun *run, Cluster *cl,
                           BcastShape bcast)
{
    const int n = run->plan.n_workers, n1 = n + 1;
    sim_cluster_init(cl, n);
    for (int r = 0; r <= n; r++)
        cl->dev[r] = (ClusterDevice){.name = "calibrated", .speed_Bps = cal->speed,
                                     .op_overhead_s = cal->op_overhead, .load_Bps = 1e9};
    snprintf(cl->dev[0].name, sizeof cl->dev[0].name, "controller");
    for (int a = 0; a < n1; a++)
        for (int b = 0; b < n1; b++) {
            /* The emulated link (its medium: a shared channel queues as the engine's
             * emulation does), else half the measured round trip over loopback MPI, which
             * does not queue. */
            double rtt = run->rtt_ms ? run->rtt_ms[a * n1 + b] : 0;
            cl->link[a * n1 + b] =
                a == b ? (NetLink){.rtt_s = 40e-6, .bw_Bps = 5e9, .medium = MEDIUM_IDEAL}
                : run->emulated ? run->emu
                                : (NetLink){.rtt_s = rtt > 0 ? rtt / 1e3 : 40e-6,
                                            .bw_Bps = 5e9, .medium = MEDIUM_IDEAL};
        }
    cl->bcast = bcast;
    cl->jitter = JITTER_UNIFORM; /* the engine's emulation: uniform +-jitter/2 */
    snprintf(cl->links_name, sizeof cl->links_name, "measured");
}

int sim_calibrate_predict(const SimCalibration *cal, const SimMeasuredRun *run, BcastShape bcast,
                          double *median_ms, double *token_err, char *err, size_t errlen)
{
    Cluster cl;
    sim_calibrate_cluster(cal, run, &cl, bcast);
    SimOptions o = {SIM_POLICY_PLAN, &run->plan, run->n_tokens, 1, run->speculated,
                    run->speculated ? run->accept : NULL, 1.0, 0.85, 0, NULL};
    SimResult r;
    int rc = sim_run(&r, &run->model, &cl, &o, err, errlen);
    cluster_free(&cl);
    if (rc < 0)
        return -1;
    *median_ms = median_from(r.token_ms, r.n_tokens, run->skip);
    double e = 0;
    for (int i = run->skip; i < r.n_tokens; i++)
        e += fabs(r.token_ms[i] - run->token_ms[i]) / run->token_ms[i];
    if (token_err)
        *token_err = e / (r.n_tokens - run->skip);
    sim_result_free(&r);
    return 0;
}

#define CAL_OP_OVERHEAD 2e-6 /* per kernel call group; small next to the fitted term */

/* Sum over the fit runs of log(simulated / measured)^2 at speed exp(x). */
static double objective(double x, const SimMeasuredRun *runs, int n, BcastShape bcast)
{
    SimCalibration cal = {exp(x), CAL_OP_OVERHEAD, 0, 0};
    double s = 0;
    char err[256];
    for (int i = 0; i < n; i++) {
        double m;
        if (sim_calibrate_predict(&cal, &runs[i], bcast, &m, NULL, err, sizeof err) < 0 ||
            !(m > 0))
            return 1e30;
        double d = log(m / runs[i].measured_ms);
        s += d * d;
    }
    return s;
}

int sim_calibrate_fit(SimCalibration *cal, const SimMeasuredRun *runs, int n, BcastShape bcast,
                      char *err, size_t errlen)
{
    if (n < 1)
        return util_err(err, errlen, "calibration needs at least one measured run");
    /* Golden-section search on ln(speed) over 1 MB/s .. 1 TB/s (the objective is unimodal:
     * every simulated time falls as the speed grows). */
    const double g = 0.6180339887498949;
    double a = log(1e6), b = log(1e12), c = b - g * (b - a), d = a + g * (b - a);
    double fc = objective(c, runs, n, bcast), fd = objective(d, runs, n, bcast);
    for (int it = 0; it < 80 && b - a > 1e-7; it++) {
        if (fc < fd) {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = objective(c, runs, n, bcast);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = objective(d, runs, n, bcast);
        }
    }
    double x = 0.5 * (a + b);
    *cal = (SimCalibration){exp(x), CAL_OP_OVERHEAD, sqrt(objective(x, runs, n, bcast) / n), n};
    return 0;
}
