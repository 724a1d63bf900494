/* headsplit-sim: discrete-event simulation of HeadSplit token generation over N devices,
 * the exact placement solver, and calibration against the engine's metrics.
 *   headsplit-sim --shape tinyllama-1.1b --devices 25 --hetero 1 --links wifi \
 *                 --policy greedy --tokens 1000 --csv t.csv --json s.json
 *   headsplit-sim --shape tinyllama-1.1b --devices 4 --hetero 3 --solve
 *   headsplit-sim --calibrate run.json --predict other.json --json cal.json
 * See docs/simulator.md. */
#include "version.h"
#include "convert.h"
#include "sim.h"
#include "solver.h"
#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *shape, *devices, *links, *csv, *json, *trace, *calibrate_out,
        *write_devices, *quantize;
    const char *calibrate[32], *predict[64];
    int n_calibrate, n_predict;
    int layers, tokens, solve, show_placement, kv_horizon, solve_pos;
    uint64_t seed, hetero, link_seed;
    int hetero_set, links_set;
    double mem_slack, replan_at, solve_limit_s;
    SimPolicy policy;
    PlacementKind engine_placement;
    int engine_placement_set;
    Partition engine_partition;
    int engine_partition_set;
    int engine_partition_auto; /* the candidate the simulator's cost model prefers */
    int speculate;
    double accept_all;
    double *accept;
    int n_accept;
    int bcast, medium; /* -1: the preset's */
} SimArgs;

static void usage(FILE *out)
{
    fprintf(out,
        "usage: headsplit-sim [options]\n"
        " model:\n"
        "  --model FILE.h5         read the config of a HeadSplit model file\n"
        "  --shape NAME            built-in shape: tinyllama-1.1b (default), gpt2-small,\n"
        "                          stories260k, llama2-7b, llama2-13b, llama3-8b\n"
        "  --layers N              override the number of layers\n"
        "  --quantize TYPE         stored types as headsplit-convert --quantize TYPE writes\n"
        "                          them (f32, f16, q8_0, q4_0, q4_k_m; default: the file's,\n"
        "                          or f32 for a --shape)\n"
        " devices and links:\n"
        "  --devices N|FILE.json   N generated devices (default 4) or a devices file\n"
        "  --hetero SEED           heterogeneous device classes drawn with SEED (0: identical)\n"
        "  --mem-slack X           budgets hold X times the model's layers (default 1.5;\n"
        "                          0: the classes' own memory)\n"
        "  --links wifi|gbit|loopback|SPEC   link preset (default gbit), or one link for\n"
        "                          every pair as headsplit --emulate-link describes it\n"
        "                          (rtt=10ms,bw=200mbit,medium=shared,relay=ap; ethernet);\n"
        "                          given with a devices file, it replaces the file's links\n"
        "  --link-seed S           seed of the link draws (default: the hetero seed)\n"
        "  --bcast linear|binomial|auto  broadcast model (default auto: libnbc's rule)\n"
        "  --medium switched|shared|ideal  override the preset's medium (ideal: no queueing)\n"
        "  --write-devices FILE    write the devices description used\n"
        " policy:\n"
        "  --policy layer-dp|galaxy|greedy|dynamic   (default greedy)\n"
        "  --engine-placement greedy|roundrobin|random|layer|waterfill   replay plan_build's\n"
        "                          placement\n"
        "  --engine-partition layer|head|slice|auto   its partition (default head; layer for\n"
        "                          layer); auto: the candidate (as headsplit --partition auto\n"
        "                          builds them) this simulator predicts fastest\n"
        "  --speculate P|P1,P2,..  speculate, keeping each layer's with probability P\n"
        "  --replan-at F           dynamic: re-place past this budget fraction (default 0.85)\n"
        "  --kv-horizon N          dynamic: KV positions the first plan reserves (default 128)\n"
        "  --show-placement        print the placement\n"
        " run and output:\n"
        "  --tokens N, --n-predict N  tokens to generate (default 256)\n"
        "  --seed S                jitter and speculation seed (default 1)\n"
        "  --csv FILE              per-token latency\n"
        "  --json FILE             summary (stdout when absent)\n"
        "  --trace FILE            event trace\n"
        " solver:\n"
        "  --solve                 exact head-level placement vs greedy and layer-dp\n"
        "  --solve-pos N           position whose KV reads the costs include (default tokens/2)\n"
        "  --solve-limit S         time limit of the search in seconds (default 120)\n"
        " calibration:\n"
        "  --calibrate METRICS     a headsplit --metrics run to fit the device speed and per-op\n"
        "                          overhead to (repeatable); links come from each run's RTTs\n"
        "  --predict METRICS       a run to predict with the fit (repeatable)\n"
        "  --calibrate-out FILE    write the calibrated devices description\n"
        "  --help\n");
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == '\0' || *end || errno || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int parse_accept(SimArgs *a, const char *s, char *err, size_t errlen)
{
    a->speculate = 1;
    if (!strchr(s, ','))
        return parse_num(s, 0, 1, &a->accept_all) < 0
                   ? util_err(err, errlen, "--speculate: '%s' is not a probability", s) : 0;
    char *buf = xstrdup(s);
    int rc = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        a->accept = xrealloc(a->accept, ((size_t)a->n_accept + 1) * sizeof(double));
        if (parse_num(t, 0, 1, &a->accept[a->n_accept++]) < 0) {
            rc = util_err(err, errlen, "--speculate: '%s' is not a probability", t);
            break;
        }
    }
    free(buf);
    return rc;
}

enum { O_MODEL = 256, O_SHAPE, O_LAYERS, O_DEVICES, O_HETERO, O_SLACK, O_LINKS, O_LSEED,
       O_BCAST, O_MEDIUM, O_WDEV, O_POLICY, O_EPLACE, O_SPEC, O_REPLAN, O_HORIZON, O_SHOW,
       O_TOKENS, O_SEED, O_CSV, O_JSON, O_TRACE, O_SOLVE, O_SPOS, O_SLIMIT, O_CAL, O_PRED,
       O_CALOUT, O_EPART, O_QUANT, O_HELP };

static const struct option lo[] = {
    {"model", 1, 0, O_MODEL}, {"shape", 1, 0, O_SHAPE}, {"layers", 1, 0, O_LAYERS},
    {"quantize", 1, 0, O_QUANT},
    {"devices", 1, 0, O_DEVICES}, {"hetero", 1, 0, O_HETERO}, {"mem-slack", 1, 0, O_SLACK},
    {"links", 1, 0, O_LINKS}, {"link-seed", 1, 0, O_LSEED}, {"bcast", 1, 0, O_BCAST},
    {"medium", 1, 0, O_MEDIUM}, {"write-devices", 1, 0, O_WDEV},
    {"policy", 1, 0, O_POLICY}, {"engine-placement", 1, 0, O_EPLACE},
    {"speculate", 1, 0, O_SPEC}, {"replan-at", 1, 0, O_REPLAN},
    {"kv-horizon", 1, 0, O_HORIZON}, {"show-placement", 0, 0, O_SHOW},
    {"tokens", 1, 0, O_TOKENS}, {"n-predict", 1, 0, O_TOKENS}, {"seed", 1, 0, O_SEED},
    {"csv", 1, 0, O_CSV},
    {"json", 1, 0, O_JSON}, {"trace", 1, 0, O_TRACE}, {"solve", 0, 0, O_SOLVE},
    {"solve-pos", 1, 0, O_SPOS}, {"solve-limit", 1, 0, O_SLIMIT},
    {"calibrate", 1, 0, O_CAL}, {"predict", 1, 0, O_PRED},
    {"calibrate-out", 1, 0, O_CALOUT}, {"engine-partition", 1, 0, O_EPART},
    {"help", 0, 0, O_HELP}, {0, 0, 0, 0}};

static void sim_args_defaults(SimArgs *a)
{
    memset(a, 0, sizeof *a);
    a->shape = "tinyllama-1.1b";
    a->devices = "4";
    a->links = "gbit";
    a->tokens = 256;
    a->seed = 1;
    a->mem_slack = 1.5;
    a->replan_at = 0.85;
    a->kv_horizon = 128;
    a->solve_pos = -1;
    a->solve_limit_s = 120;
    a->policy = SIM_POLICY_GREEDY;
    a->bcast = a->medium = -1;
}

/* Model, device, count and seed options: 0 taken, -1 with err, 1 not one of these. */
static int parse_numbers(SimArgs *a, int ch, const char *arg, char *err, size_t errlen)
{
    double v;
    switch (ch) {
    case O_MODEL: a->model = arg; break;
    case O_SHAPE: a->shape = arg; break;
    case O_QUANT: a->quantize = arg; break;
    case O_LAYERS:
    case O_TOKENS:
    case O_HORIZON:
    case O_SPOS:
        if (parse_num(arg, 0, 1 << 22, &v) < 0 || v != (int)v)
            return util_err(err, errlen, "'%s' is not a count", arg);
        *(ch == O_LAYERS ? &a->layers : ch == O_TOKENS ? &a->tokens
          : ch == O_HORIZON ? &a->kv_horizon : &a->solve_pos) = (int)v;
        break;
    case O_DEVICES: a->devices = arg; break;
    case O_HETERO:
    case O_SEED:
    case O_LSEED:
        if (parse_num(arg, 0, 1e18, &v) < 0 || v != (double)(uint64_t)v)
            return util_err(err, errlen, "'%s' is not a non-negative integer seed", arg);
        if (ch == O_HETERO) {
            a->hetero = (uint64_t)v;
            a->hetero_set = 1;
        } else if (ch == O_SEED) {
            a->seed = (uint64_t)v;
        } else {
            a->link_seed = (uint64_t)v;
        }
        break;
    case O_SLACK:
        if (parse_num(arg, 0, 1000, &a->mem_slack) < 0)
            return util_err(err, errlen, "--mem-slack: '%s' is not in 0..1000", arg);
        break;
    case O_REPLAN:
        if (parse_num(arg, 0.05, 1, &a->replan_at) < 0)
            return util_err(err, errlen, "--replan-at: '%s' is not in 0.05..1", arg);
        break;
    case O_SLIMIT:
        if (parse_num(arg, 0, 1e6, &a->solve_limit_s) < 0)
            return util_err(err, errlen, "--solve-limit: '%s' is not seconds", arg);
        break;
    default: return 1;
    }
    return 0;
}

/* Links, policies, outputs, solver and calibration: 0 taken, -1 with err, 1 not one of
 * these. */
static int parse_choices(SimArgs *a, int ch, const char *arg, char *err, size_t errlen)
{
    switch (ch) {
    case O_LINKS:
        a->links = arg;
        a->links_set = 1;
        break;
    case O_BCAST:
        a->bcast = strcmp(arg, "linear") == 0 ? BCAST_LINEAR
                   : strcmp(arg, "binomial") == 0 ? BCAST_BINOMIAL
                   : strcmp(arg, "auto") == 0 ? BCAST_AUTO : -2;
        if (a->bcast == -2)
            return util_err(err, errlen, "--bcast: '%s' is not linear, binomial or auto",
                            arg);
        break;
    case O_MEDIUM:
        a->medium = strcmp(arg, "switched") == 0 ? MEDIUM_SWITCHED
                    : strcmp(arg, "shared") == 0 ? MEDIUM_SHARED
                    : strcmp(arg, "ideal") == 0 ? MEDIUM_IDEAL : -2;
        if (a->medium == -2)
            return util_err(err, errlen, "--medium: '%s' is not switched, shared or ideal",
                            arg);
        break;
    case O_WDEV: a->write_devices = arg; break;
    case O_POLICY:
        if (sim_parse_policy(arg, &a->policy) < 0 || a->policy == SIM_POLICY_PLAN)
            return util_err(err, errlen, "--policy: '%s' is not layer-dp, galaxy, greedy or "
                            "dynamic", arg);
        break;
    case O_EPLACE:
        if (plan_parse_placement(arg, &a->engine_placement) < 0 ||
            a->engine_placement == PLACEMENT_DP || a->engine_placement == PLACEMENT_EXACT)
            return util_err(err, errlen, "--engine-placement: '%s' is not greedy, roundrobin,"
                            " random, layer or waterfill", arg);
        a->engine_placement_set = 1;
        break;
    case O_EPART:
        a->engine_partition_auto = strcmp(arg, "auto") == 0;
        if (!a->engine_partition_auto && plan_parse_partition(arg, &a->engine_partition) < 0)
            return util_err(err, errlen, "--engine-partition: '%s' is not layer, head, slice "
                            "or auto", arg);
        a->engine_partition_set = a->engine_placement_set = 1;
        break;
    case O_SPEC:
        if (parse_accept(a, arg, err, errlen) < 0)
            return -1;
        break;
    case O_SHOW: a->show_placement = 1; break;
    case O_CSV: a->csv = arg; break;
    case O_JSON: a->json = arg; break;
    case O_TRACE: a->trace = arg; break;
    case O_SOLVE: a->solve = 1; break;
    case O_CAL:
        if (a->n_calibrate == 32)
            return util_err(err, errlen, "--calibrate: at most 32 files");
        a->calibrate[a->n_calibrate++] = arg;
        break;
    case O_PRED:
        if (a->n_predict == 64)
            return util_err(err, errlen, "--predict: at most 64 files");
        a->predict[a->n_predict++] = arg;
        break;
    case O_CALOUT: a->calibrate_out = arg; break;
    default: return 1;
    }
    return 0;
}

static int parse_args(SimArgs *a, int argc, char **argv, char *err, size_t errlen)
{
    sim_args_defaults(a);
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (ch == O_HELP)
            return 1;
        int rc = parse_numbers(a, ch, optarg, err, errlen);
        if (rc == 1)
            rc = parse_choices(a, ch, optarg, err, errlen);
        if (rc < 0)
            return -1;
        if (rc == 1)
            return util_err(err, errlen, "unknown or incomplete option '%s' (see --help)",
                            argv[optind - 1]);
    }
    if (optind < argc)
        return util_err(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!a->link_seed)
        a->link_seed = a->hetero ? a->hetero : 1;
    return 0;
}

/* Writes j to path, or to stdout when path is NULL. */
static int emit_json(json_t *j, const char *path, char *err, size_t errlen)
{
    int rc = path ? json_dump_file(j, path, JSON_INDENT(1)) : json_dumpf(j, stdout, JSON_INDENT(1));
    if (!path)
        fputc('\n', stdout);
    return rc == 0 ? 0 : util_err(err, errlen, "%s: cannot write the JSON", path ? path : "stdout");
}

static int setup_cluster(Cluster *cl, const SimArgs *a, const ModelConfig *c, char *err,
                         size_t errlen)
{
    char *end;
    long n = strtol(a->devices, &end, 10);
    int rc;
    if (*a->devices && !*end) {
        rc = sim_cluster_generate(cl, (int)n, a->hetero, c, a->mem_slack, a->tokens, err, errlen);
        if (rc == 0)
            rc = sim_cluster_set_links(cl, a->links, a->link_seed, err, errlen);
    } else {
        rc = sim_cluster_read(cl, a->devices, err, errlen);
        /* an explicit --links replaces the file's links */
        if (rc == 0 && a->links_set)
            rc = sim_cluster_set_links(cl, a->links, a->link_seed, err, errlen);
    }
    if (rc < 0)
        return -1;
    if (a->bcast >= 0)
        cl->bcast = (BcastShape)a->bcast;
    if (a->medium >= 0)
        cluster_set_medium(cl, (Medium)a->medium);
    if (a->write_devices)
        return sim_cluster_write(cl, a->write_devices, err, errlen);
    return 0;
}

/* One row of the calibration table: measured vs simulated median ms/token of a run. */
static json_t *predict_row(const SimCalibration *cal, const SimMeasuredRun *run, BcastShape bc,
                           int fit, char *err, size_t errlen)
{
    double sim_ms, tok_err;
    if (sim_calibrate_predict(cal, run, bc, &sim_ms, &tok_err, err, errlen) < 0)
        return NULL;
    double rtt = 0;
    int n1 = run->plan.n_workers + 1;
    for (int i = 1; run->rtt_ms && i < n1; i++)
        rtt += run->rtt_ms[i] / (n1 - 1); /* controller to each worker */
    json_t *j = json_pack("{s:s,s:b,s:s,s:s,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:b}", "file",
                          run->file, "fit", fit, "partition", run->partition, "placement",
                          run->placement, "workers", run->plan.n_workers, "layers",
                          run->model.n_layers, "tokens", run->n_tokens, "rtt_ms", rtt,
                          "measured_ms", run->measured_ms, "simulated_ms", sim_ms, "error_pct",
                          (sim_ms - run->measured_ms) / run->measured_ms * 100,
                          "token_error_pct", tok_err * 100, "speculated", run->speculated);
    json_object_set_new(j, "dim", json_integer(run->model.dim));
    return j;
}

static int sim_app_calibrate(const SimArgs *a, char *err, size_t errlen)
{
    BcastShape bc = a->bcast >= 0 ? (BcastShape)a->bcast : BCAST_AUTO;
    const int n_fit = a->n_calibrate, n = n_fit + a->n_predict;
    SimMeasuredRun *runs = xcalloc((size_t)n, sizeof(SimMeasuredRun));
    int rc = 0, n_read = 0;
    for (int i = 0; i < n && rc == 0; i++, n_read++)
        rc = sim_calibrate_read(&runs[i], i < n_fit ? a->calibrate[i] : a->predict[i - n_fit],
                                err, errlen);
    if (rc < 0)
        n_read--;
    SimCalibration cal;
    if (rc == 0)
        rc = sim_calibrate_fit(&cal, runs, n_fit, bc, err, errlen);
    json_t *j = json_object(), *rows = json_array();
    double abs_err = 0, worst = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        json_t *row = predict_row(&cal, &runs[i], bc, i < n_fit, err, errlen);
        if (!row) {
            rc = -1;
            break;
        }
        double e = fabs(json_real_value(json_object_get(row, "error_pct")));
        if (i >= n_fit) {
            abs_err += e / a->n_predict;
            worst = e > worst ? e : worst;
        }
        json_array_append_new(rows, row);
    }
    if (rc == 0) {
        json_object_set_new(j, "calibration", json_pack("{s:f,s:f,s:f,s:i}", "speed_gbs",
                            cal.speed / 1e9, "op_overhead_us", cal.op_overhead * 1e6,
                            "fit_rms_log_error", cal.rms_log_err, "fit_runs", n_fit));
        json_object_set_new(j, "runs", rows);
        json_object_set_new(j, "predicted_runs", json_integer(a->n_predict));
        json_object_set_new(j, "mean_abs_error_pct", json_real(abs_err));
        json_object_set_new(j, "max_abs_error_pct", json_real(worst));
    } else {
        json_decref(rows);
    }
    if (rc == 0 && a->calibrate_out) {
        Cluster cl;
        sim_calibrate_cluster(&cal, &runs[0], &cl, bc);
        rc = sim_cluster_write(&cl, a->calibrate_out, err, errlen);
        cluster_free(&cl);
    }
    if (rc == 0)
        rc = emit_json(j, a->json, err, errlen);
    json_decref(j);
    for (int i = 0; i < n_read; i++)
        sim_calibrate_free(&runs[i]);
    free(runs);
    return rc;
}

/* Token time of an engine placement, or -1 when it does not build or fit. */
static double engine_cost(const ModelConfig *c, const Cluster *cl, const CostModel *m,
                          PlacementKind k, const SolverRequest *req, int show)
{
    PlanRequest pr = {.partition = k == PLACEMENT_LAYER ? PARTITION_LAYER : PARTITION_HEAD,
                      .placement = k, .seed = 1, .n_workers = cl->n - 1, .cluster = cl,
                      .kv_positions = req->kv_positions};
    Plan p;
    char e[256];
    double t = -1;
    if (plan_build(&p, c, &pr, e, sizeof e) == 0) {
        if (solver_plan_fits(&p, c, cl, req->kv_positions))
            t = cost_token_s(m, &p, c);
        if (show)
            plan_print(&p, c, stderr);
        plan_free(&p);
    }
    return t;
}

static int sim_app_solve(const SimArgs *a, const ModelConfig *c, const Cluster *cl,
                         char *err, size_t errlen)
{
    SolverRequest req = {a->tokens, 0, a->solve_limit_s};
    const int pos = a->solve_pos >= 0 ? a->solve_pos : a->tokens / 2;
    SimCostInputs in = {cl, pos};
    CostModel model = sim_cost_model(&in);
    double fixed = sim_cost_controller(c, cl, 1) + sim_cost_controller(c, cl, 0);
    double greedy = engine_cost(c, cl, &model, PLACEMENT_GREEDY, &req, a->show_placement);
    double rr = engine_cost(c, cl, &model, PLACEMENT_ROUNDROBIN, &req, 0);
    Plan p;
    SolverStats dst, xst;
    double dp = -1;
    if (solver_layer_dp(&p, &dst, c, cl, &model, &req, err, errlen) == 0) {
        dp = dst.cost_s;
        plan_free(&p);
    }
    if (solver_exact(&p, &xst, c, cl, &model, &req, err, errlen) < 0)
        return -1;
    if (a->show_placement)
        plan_print(&p, c, stderr);
    plan_free(&p);
    double opt = xst.cost_s;
    json_t *j = json_pack("{s:i,s:s,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:b,s:I,s:I,s:f}",
                          "devices", cl->n - 1, "links", cl->links_name, "model_layers",
                          c->n_layers, "pos", pos, "kv_positions", req.kv_positions,
                          "fixed_ms", fixed * 1e3, "exact_ms", opt * 1e3, "bound_ms",
                          xst.bound_s * 1e3, "greedy_ms", greedy * 1e3, "layer_dp_ms", dp * 1e3,
                          "optimal", xst.optimal, "nodes", (json_int_t)xst.nodes, "configs",
                          (json_int_t)xst.configs, "solve_s", xst.elapsed_s);
    json_object_set_new(j, "roundrobin_ms", json_real(rr * 1e3));
    /* Gap of the whole token, and of the part placement decides (controller excluded). */
    json_object_set_new(j, "greedy_gap_pct", greedy > 0 ? json_real((greedy / opt - 1) * 100)
                                                        : json_null());
    json_object_set_new(j, "greedy_gap_pipeline_pct",
                        greedy > 0 ? json_real(((greedy - fixed) / (opt - fixed) - 1) * 100)
                                   : json_null());
    json_object_set_new(j, "layer_dp_gap_pct", dp > 0 ? json_real((dp / opt - 1) * 100)
                                                      : json_null());
    int rc = emit_json(j, a->json, err, errlen);
    json_decref(j);
    return rc;
}

static int run_sim(const SimArgs *a, const ModelConfig *c, const Cluster *cl, char *err,
                   size_t errlen)
{
    if (a->n_accept && a->n_accept != c->n_layers - 1)
        return util_err(err, errlen, "--speculate: %d probabilities for %d layer transitions",
                        a->n_accept, c->n_layers - 1);
    Plan eplan;
    memset(&eplan, 0, sizeof eplan);
    SimOptions o = {a->policy, NULL, a->tokens, a->seed, a->speculate, a->accept,
                    a->accept_all, a->replan_at, a->kv_horizon, NULL};
    if (a->engine_placement_set) {
        /* The engine's own plan_build, as headsplit --placement would build it. */
        Partition part = a->engine_partition_set ? a->engine_partition
                         : a->engine_placement == PLACEMENT_LAYER ? PARTITION_LAYER
                                                                  : PARTITION_HEAD;
        PlanRequest req = {.partition = part, .placement = a->engine_placement,
                           .seed = a->seed, .n_workers = cl->n - 1, .cluster = cl,
                           .kv_positions = a->tokens};
        SimCostInputs in = {cl, a->tokens / 2};
        CostModel model = sim_cost_model(&in);
        int rc = a->engine_partition_auto
                     ? cost_build_best(&eplan, c, &req, &model, cl, a->tokens, NULL, NULL,
                                       NULL, err, errlen)
                     : plan_build(&eplan, c, &req, err, errlen);
        if (rc < 0)
            return -1;
        o.policy = SIM_POLICY_PLAN;
        o.plan = &eplan;
    }
    if (a->trace && !(o.trace = fopen(a->trace, "w"))) {
        plan_free(&eplan);
        return util_err(err, errlen, "--trace: cannot write %s", a->trace);
    }
    SimResult r;
    int rc = sim_run(&r, c, cl, &o, err, errlen);
    if (o.trace)
        fclose(o.trace);
    plan_free(&eplan);
    if (rc < 0)
        return -1;
    if (a->show_placement && r.plan.layers)
        plan_print(&r.plan, c, stderr);
    if (a->csv)
        rc = sim_result_write_csv(&r, a->csv, err, errlen);
    json_t *j = sim_result_to_json(&r, &o);
    json_object_set_new(j, "devices", json_integer(cl->n - 1));
    json_object_set_new(j, "links", json_string(cl->links_name));
    json_object_set_new(j, "model_layers", json_integer(c->n_layers));
    if (a->engine_placement_set)
        json_object_set_new(j, "engine_placement",
                            json_string(plan_placement_name(a->engine_placement)));
    if (a->engine_partition_auto)
        json_object_set_new(j, "engine_partition_chosen",
                            json_string(plan_partition_name(r.plan.partition)));
    if (rc == 0)
        rc = emit_json(j, a->json, err, errlen);
    json_decref(j);
    sim_result_free(&r);
    return rc;
}

int main(int argc, char **argv)
{
    if (app_wants_version(argc, argv)) {
        app_version(stdout, "headsplit-sim");
        return 0;
    }
    SimArgs a;
    char err[1024] = "";
    int prc = parse_args(&a, argc, argv, err, sizeof err);
    if (prc != 0) {
        if (prc > 0)
            usage(stdout);
        else
            fprintf(stderr, "headsplit-sim: error: %s\n", err);
        free(a.accept);
        return prc > 0 ? 0 : 2;
    }
    int rc = 0;
    if (a.n_calibrate) {
        rc = sim_app_calibrate(&a, err, sizeof err);
    } else {
        ModelConfig c;
        Cluster cl;
        memset(&cl, 0, sizeof cl);
        rc = a.model ? sim_model_read(&c, a.model, err, sizeof err)
                     : sim_model_preset(&c, a.shape, a.layers, err, sizeof err);
        if (rc == 0 && a.model && a.layers > 0)
            c.n_layers = a.layers;
        if (rc == 0 && a.quantize)
            rc = convert_stored_types(&c, a.quantize, err, sizeof err);
        if (rc == 0)
            rc = setup_cluster(&cl, &a, &c, err, sizeof err);
        if (rc == 0)
            rc = a.solve ? sim_app_solve(&a, &c, &cl, err, sizeof err)
                         : run_sim(&a, &c, &cl, err, sizeof err);
        cluster_free(&cl);
    }
    if (rc < 0)
        fprintf(stderr, "headsplit-sim: error: %s\n", err);
    free(a.accept);
    return rc < 0 ? 1 : 0;
}
