/* headsplit: generate text with a model spread over MPI ranks.
 *   mpirun -np 1 headsplit --model M.h5 --prompt TEXT --steps N          (single process)
 *   mpirun -np 5 headsplit --model M.h5 --partition head --placement greedy ...
 * Rank 0 is the controller (embeddings, final norm, LM head, sampling, token loop); ranks
 * 1..N are workers holding attention parts, projections and FFNs of the plan. */
#include "comm.h"
#include "config_io.h"
#include "dist.h"
#include "energy.h"
#include "generate.h"
#include "h5io.h"
#include "kernels.h"
#include "plan.h"
#include "profile.h"
#include "tokenizer.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#ifndef HEADSPLIT_GIT_REV
#define HEADSPLIT_GIT_REV "unknown"
#endif

typedef struct {
    const char *model;
    const char *prompt;
    int steps;
    float temperature, top_p;
    uint64_t seed;
    const char *metrics;
    const char *logits_out;
    const char *transcript;
    Partition partition;
    PlacementKind placement;
    int partition_set, placement_set;
    int partition_auto;
    int show_placement;
    WaitMode wait_mode;
    size_t mem_budget;
    MatvecImpl matvec;
    int quiet;
    const char *emulate_link;  /* uniform link spec */
    const char *link_matrix;   /* per-pair link file */
    int rtt_pings;
    double timeout_s;
    int stall_rank, stall_pos;
    double stall_s;
    const char *speculate; /* auto | all | none */
    float tolerance, min_acceptance;
    int adaptive;
    const char *profile;
    int verbose;
    const char *resume;
    int kill_rank, kill_pos;
    const char *devices_file;
    double assume_rtt_ms; /* < 0: plan with the measured RTTs */
    double slowdown;      /* --emulate-slowdown (0: HEADSPLIT_DEVICE_SLOWDOWN, else none) */
    int wire16;           /* --wire f16 */
    int head_on_controller; /* --lm-head controller */
    int static_plan;
    double replace_threshold;
} Options;

static void usage(FILE *out)
{
    fprintf(out,
        "usage: mpirun -np N headsplit --model M.h5 [options]\n"
        "  --model FILE          model in HeadSplit HDF5 format (headsplit-convert)\n"
        "  --prompt TEXT         prompt (default empty)\n"
        "  --steps N             positions to run, prompt included (default 256)\n"
        "  --temperature T       0 = greedy, lowest id on ties (default 0)\n"
        "  --top-p P             nucleus sampling mass (default 1 = off)\n"
        "  --seed N              sampling and random-placement seed (default 42)\n"
        "  --partition layer|head|slice|auto  how the model is split over workers (default head):\n"
        "                        layer = whole layers (EdgeShard-style blocks), head = heads\n"
        "                        spread, FFN whole; slice = heads + FFN slices on every worker;\n"
        "                        auto = the fastest predicted from measured speeds and RTTs\n"
        "  --placement greedy|roundrobin|random|layer   (default greedy)\n"
        "  --show-placement      print the placement table\n"
        "  --wait sleep|spin     how ranks wait for messages (default sleep)\n"
        "  --mem-budget SIZE     memory budget per worker, e.g. 1.5G (default: the emulated\n"
        "                        device's, HEADSPLIT_DEVICE_MEM_BYTES, else none)\n"
        "  --devices FILE        per-worker budgets and speeds: lines 'RANK mem=SIZE speed=X'\n"
        "  --replace-threshold F re-place when a worker passes F of its budget (default 0.85)\n"
        "  --assume-rtt MS       plan for this RTT between all ranks instead of the measured\n"
        "                        one (deadlines still use the measurement)\n"
        "  --static              keep the start-up placement (exceeding a budget ends the run)\n"
        "  --matvec own|blas     matrix-vector kernel (default own)\n"
        "  --emulate-link SPEC   delay every message as a link would: rtt=10ms,jitter=2ms,bw=200mbit\n"
        "  --wire f32|f16        SLICE partial sums on the wire: f32 (default, exact) or IEEE\n"
        "                        half (half the bytes; tokens may differ)\n"
        "  --lm-head split|controller  where the last layer is sliced, its members compute the\n"
        "                        final norm and LM head by vocabulary rows and send the\n"
        "                        controller logits (split, the default; exact) or the\n"
        "                        controller does (controller)\n"
        "  --emulate-slowdown K  (distributed runs) compute as a device K times slower than this\n"
        "                        host's core: each stretch of work lasts K x its CPU time\n"
        "                        (default each rank's HEADSPLIT_DEVICE_SLOWDOWN, set by\n"
        "                        scripts/emulate-device)\n"
        "  --link-matrix FILE    per-pair links: lines 'SRC DST rtt=..,jitter=..,bw=..' (* = any)\n"
        "  --rtt-pings N         ping-pongs per rank pair at start-up (default 5)\n"
        "  --timeout SECONDS     end the run when a peer sends nothing this long (default 10:\n"
        "                        workers allow 10%% + 0.2 s more, the controller 25%% + 0.5 s)\n"
        "  --inject-stall R:P:S  test aid: delay rank R's messages at position P by S seconds\n"
        "  --speculate auto|all|none      inter-layer speculation (default none): auto follows\n"
        "                        the profile's decision table, all tries every transition\n"
        "  --tolerance T         keep speculative attention when ||FFN(Z)||/||Z|| < T (0.05);\n"
        "                        0 is bit-identical to exact execution\n"
        "  --min-acceptance A    auto: speculate where profiled acceptance >= A (0.7)\n"
        "  --adaptive            switch transitions on/off from the acceptance observed\n"
        "  --profile FILE        speculation profile (default MODEL.profile.json)\n"
        "  --verbose             debug log (each speculation decision)\n"
        "  --metrics FILE        write one JSON object of results and measurements\n"
        "  --logits-out FILE     write raw float32 logits of every position\n"
        "  --transcript FILE     write prompt and token ids as they are produced (flushed)\n"
        "  --resume FILE         continue from a transcript (same text as an uninterrupted run)\n"
        "  --inject-kill R:P     test aid: rank R kills itself at position P\n"
        "  --quiet               do not stream the text\n"
        "  --help\n");
}

/* Parses argv; returns 0, 1 for --help, or -1 with err naming the option. */
static int parse_args(Options *o, int argc, char **argv, char *err, size_t errlen)
{
    enum { O_MODEL = 256, O_PROMPT, O_STEPS, O_TEMP, O_TOPP, O_SEED, O_METRICS, O_PART, O_PLACE,
           O_SHOW, O_WAIT, O_BUDGET, O_MATVEC, O_LOGITS, O_QUIET, O_HELP, O_TRANSCRIPT,
           O_EMU, O_MATRIX, O_PINGS, O_TIMEOUT, O_STALL, O_SPEC, O_TOL, O_MINACC, O_ADAPT,
           O_PROFILE, O_VERBOSE, O_RESUME, O_KILL, O_DEVICES, O_STATIC, O_THRESH,
           O_ASSUME_RTT, O_SLOWDOWN, O_WIRE, O_LMHEAD };
    static const struct option longopts[] = {
        {"model", required_argument, 0, O_MODEL}, {"prompt", required_argument, 0, O_PROMPT},
        {"steps", required_argument, 0, O_STEPS}, {"temperature", required_argument, 0, O_TEMP},
        {"top-p", required_argument, 0, O_TOPP}, {"seed", required_argument, 0, O_SEED},
        {"metrics", required_argument, 0, O_METRICS},
        {"partition", required_argument, 0, O_PART},
        {"placement", required_argument, 0, O_PLACE},
        {"show-placement", no_argument, 0, O_SHOW}, {"wait", required_argument, 0, O_WAIT},
        {"mem-budget", required_argument, 0, O_BUDGET},
        {"matvec", required_argument, 0, O_MATVEC},
        {"logits-out", required_argument, 0, O_LOGITS},
        {"transcript", required_argument, 0, O_TRANSCRIPT},
        {"emulate-link", required_argument, 0, O_EMU},
        {"link-matrix", required_argument, 0, O_MATRIX},
        {"rtt-pings", required_argument, 0, O_PINGS},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"inject-stall", required_argument, 0, O_STALL},
        {"speculate", required_argument, 0, O_SPEC}, {"tolerance", required_argument, 0, O_TOL},
        {"min-acceptance", required_argument, 0, O_MINACC},
        {"adaptive", no_argument, 0, O_ADAPT}, {"profile", required_argument, 0, O_PROFILE},
        {"verbose", no_argument, 0, O_VERBOSE},
        {"resume", required_argument, 0, O_RESUME},
        {"inject-kill", required_argument, 0, O_KILL},
        {"devices", required_argument, 0, O_DEVICES}, {"static", no_argument, 0, O_STATIC},
        {"replace-threshold", required_argument, 0, O_THRESH},
        {"assume-rtt", required_argument, 0, O_ASSUME_RTT},
        {"emulate-slowdown", required_argument, 0, O_SLOWDOWN},
        {"wire", required_argument, 0, O_WIRE}, {"lm-head", required_argument, 0, O_LMHEAD},
        {"quiet", no_argument, 0, O_QUIET}, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->prompt = "";
    o->steps = 256;
    o->top_p = 1.0f;
    o->seed = 42;
    o->partition = PARTITION_HEAD;
    o->placement = PLACEMENT_GREEDY;
    o->rtt_pings = 5;
    o->timeout_s = 10.0;
    o->stall_rank = -1;
    o->kill_rank = -1;
    o->replace_threshold = 0.85;
    o->assume_rtt_ms = -1;
    o->speculate = "none";
    o->tolerance = 0.05f;
    o->min_acceptance = 0.7f;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        char *end = NULL;
        errno = 0;
        switch (ch) {
        case O_MODEL: o->model = optarg; break;
        case O_PROMPT: o->prompt = optarg; break;
        case O_STEPS: {
            long v = strtol(optarg, &end, 10);
            if (*end || errno || v < 1 || v > 1 << 22)
                return util_err(err, errlen, "--steps: '%s' is not a count of 1..4194304", optarg);
            o->steps = (int)v;
            break;
        }
        case O_TEMP:
            o->temperature = strtof(optarg, &end);
            if (*end || errno || !(o->temperature >= 0 && o->temperature <= 100))
                return util_err(err, errlen, "--temperature: '%s' is not in 0..100", optarg);
            break;
        case O_TOPP:
            o->top_p = strtof(optarg, &end);
            if (*end || errno || !(o->top_p > 0 && o->top_p <= 1))
                return util_err(err, errlen, "--top-p: '%s' is not in (0, 1]", optarg);
            break;
        case O_SEED:
            o->seed = strtoull(optarg, &end, 10);
            if (*end || errno || optarg[0] == '-')
                return util_err(err, errlen, "--seed: '%s' is not a non-negative integer", optarg);
            break;
        case O_METRICS: o->metrics = optarg; break;
        case O_LOGITS: o->logits_out = optarg; break;
        case O_TRANSCRIPT: o->transcript = optarg; break;
        case O_PART:
            o->partition_auto = strcmp(optarg, "auto") == 0;
            if (!o->partition_auto && plan_parse_partition(optarg, &o->partition) < 0)
                return util_err(err, errlen, "--partition: '%s' is not layer, head, slice or "
                                "auto", optarg);
            o->partition_set = 1;
            break;
        case O_PLACE:
            if (plan_parse_placement(optarg, &o->placement) < 0)
                return util_err(err, errlen, "--placement: '%s' is not greedy, roundrobin, "
                                "random or layer", optarg);
            o->placement_set = 1;
            break;
        case O_SHOW: o->show_placement = 1; break;
        case O_WAIT:
            if (strcmp(optarg, "sleep") == 0)
                o->wait_mode = WAIT_SLEEP;
            else if (strcmp(optarg, "spin") == 0)
                o->wait_mode = WAIT_SPIN;
            else
                return util_err(err, errlen, "--wait: '%s' is not sleep or spin", optarg);
            break;
        case O_BUDGET:
            if (util_parse_bytes(optarg, &o->mem_budget) < 0 || o->mem_budget == 0)
                return util_err(err, errlen, "--mem-budget: '%s' is not a size such as 1.5G",
                                optarg);
            break;
        case O_MATVEC:
            if (strcmp(optarg, "own") == 0)
                o->matvec = MATVEC_OWN;
            else if (strcmp(optarg, "blas") == 0)
                o->matvec = MATVEC_BLAS;
            else
                return util_err(err, errlen, "--matvec: '%s' is not own or blas", optarg);
            break;
        case O_QUIET: o->quiet = 1; break;
        case O_SPEC:
            if (strcmp(optarg, "auto") && strcmp(optarg, "all") && strcmp(optarg, "none"))
                return util_err(err, errlen, "--speculate: '%s' is not auto, all or none",
                                optarg);
            o->speculate = optarg;
            break;
        case O_TOL:
            o->tolerance = strtof(optarg, &end);
            if (*end || errno || !(o->tolerance >= 0 && o->tolerance < 1e6))
                return util_err(err, errlen, "--tolerance: '%s' is not a number >= 0", optarg);
            break;
        case O_MINACC:
            o->min_acceptance = strtof(optarg, &end);
            if (*end || errno || !(o->min_acceptance >= 0 && o->min_acceptance <= 1))
                return util_err(err, errlen, "--min-acceptance: '%s' is not in 0..1", optarg);
            break;
        case O_ADAPT: o->adaptive = 1; break;
        case O_PROFILE: o->profile = optarg; break;
        case O_VERBOSE: o->verbose = 1; break;
        case O_RESUME: o->resume = optarg; break;
        case O_DEVICES: o->devices_file = optarg; break;
        case O_STATIC: o->static_plan = 1; break;
        case O_ASSUME_RTT:
            o->assume_rtt_ms = strtod(optarg, &end);
            if (*end || errno || !(o->assume_rtt_ms >= 0 && o->assume_rtt_ms < 1e6))
                return util_err(err, errlen, "--assume-rtt: '%s' is not milliseconds >= 0",
                                optarg);
            break;
        case O_WIRE:
            if (strcmp(optarg, "f32") && strcmp(optarg, "f16"))
                return util_err(err, errlen, "--wire: '%s' is not f32 or f16", optarg);
            o->wire16 = strcmp(optarg, "f16") == 0;
            break;
        case O_LMHEAD:
            if (strcmp(optarg, "split") && strcmp(optarg, "controller"))
                return util_err(err, errlen, "--lm-head: '%s' is not split or controller",
                                optarg);
            o->head_on_controller = strcmp(optarg, "controller") == 0;
            break;
        case O_SLOWDOWN:
            o->slowdown = strtod(optarg, &end);
            if (*end || errno || !(o->slowdown >= 1 && o->slowdown <= 1000))
                return util_err(err, errlen, "--emulate-slowdown: '%s' is not a factor from 1 "
                                "to 1000", optarg);
            break;
        case O_THRESH:
            o->replace_threshold = strtod(optarg, &end);
            if (*end || errno || !(o->replace_threshold > 0 && o->replace_threshold <= 1))
                return util_err(err, errlen, "--replace-threshold: '%s' is not in (0, 1]",
                                optarg);
            break;
        case O_KILL:
            if (sscanf(optarg, "%d:%d", &o->kill_rank, &o->kill_pos) != 2 || o->kill_rank < 1 ||
                o->kill_pos < 0)
                return util_err(err, errlen, "--inject-kill: '%s' is not WORKER_RANK:POS",
                                optarg);
            break;
        case O_EMU: o->emulate_link = optarg; break;
        case O_MATRIX: o->link_matrix = optarg; break;
        case O_PINGS: {
            long v = strtol(optarg, &end, 10);
            if (*end || errno || v < 1 || v > 1000)
                return util_err(err, errlen, "--rtt-pings: '%s' is not a count of 1..1000",
                                optarg);
            o->rtt_pings = (int)v;
            break;
        }
        case O_TIMEOUT:
            o->timeout_s = strtod(optarg, &end);
            if (*end || errno || !(o->timeout_s > 0 && o->timeout_s <= 86400))
                return util_err(err, errlen, "--timeout: '%s' is not a number of seconds",
                                optarg);
            break;
        case O_STALL:
            if (sscanf(optarg, "%d:%d:%lf", &o->stall_rank, &o->stall_pos, &o->stall_s) != 3 ||
                o->stall_rank < 0 || o->stall_pos < 0 || !(o->stall_s >= 0))
                return util_err(err, errlen, "--inject-stall: '%s' is not RANK:POS:SECONDS",
                                optarg);
            break;
        case O_HELP: return 1;
        default:
            return util_err(err, errlen, "unknown or incomplete option '%s' (see --help)",
                            argv[optind - 1]);
        }
    }
    if (optind < argc)
        return util_err(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->model)
        return util_err(err, errlen, "--model is required (see --help)");
    if (o->placement == PLACEMENT_LAYER)
        o->partition = PARTITION_LAYER;
    return 0;
}

static json_t *options_json(const Options *o, int n_ranks)
{
    json_t *j = json_pack("{s:s,s:s,s:i,s:f,s:f,s:I,s:s,s:s,s:s,s:I,s:s,s:i,s:s}",
                     "model", o->model, "prompt", o->prompt, "steps", o->steps,
                     "temperature", (double)o->temperature, "top_p", (double)o->top_p,
                     "seed", (json_int_t)o->seed,
                     "partition", plan_partition_name(o->partition),
                     "placement", plan_placement_name(o->placement),
                     "wait", o->wait_mode == WAIT_SPIN ? "spin" : "sleep",
                     "mem_budget", (json_int_t)o->mem_budget,
                     "matvec", o->matvec == MATVEC_BLAS ? "blas" : "own",
                     "ranks", n_ranks, "git_revision", HEADSPLIT_GIT_REV);
    if (o->partition_auto) {
        json_object_set_new(j, "partition_chosen", json_string(plan_partition_name(o->partition)));
        json_object_set_new(j, "partition", json_string("auto"));
    }
    json_object_set_new(j, "speculate", json_string(o->speculate));
    json_object_set_new(j, "tolerance", json_real(o->tolerance));
    json_object_set_new(j, "min_acceptance", json_real(o->min_acceptance));
    json_object_set_new(j, "adaptive", json_boolean(o->adaptive));
    json_object_set_new(j, "emulate_link", o->emulate_link ? json_string(o->emulate_link)
                                                           : json_null());
    json_object_set_new(j, "link_matrix", o->link_matrix ? json_string(o->link_matrix)
                                                         : json_null());
    json_object_set_new(j, "timeout_s", json_real(o->timeout_s));
    json_object_set_new(j, "wire", json_string(o->wire16 ? "f16" : "f32"));
    json_object_set_new(j, "lm_head", json_string(o->head_on_controller ? "controller"
                                                                          : "split"));
    json_object_set_new(j, "emulate_slowdown", o->slowdown > 0 ? json_real(o->slowdown)
                                                               : json_null());
    return j;
}

static json_t *model_json(const ModelConfig *c)
{
    return json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:s,s:b}",
                     "architecture", config_arch_name(c->arch), "dim", c->dim,
                     "n_layers", c->n_layers, "n_heads", c->n_heads, "n_kv_heads", c->n_kv_heads,
                     "head_dim", c->head_dim, "ffn_dim", c->ffn_dim, "vocab_size", c->vocab_size,
                     "context_length", c->context_length, "norm_eps", (double)c->norm_eps,
                     "rope_theta", (double)c->rope_theta, "rope_style",
                     config_rope_name(c->rope_style), "tied_embeddings", c->tied_embeddings);
}

/* FNV-1a over the token ids: 1, 2 and 4 workers must print the same checksum. */
static uint64_t tokens_checksum(const int *t, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        uint32_t v = (uint32_t)t[i];
        for (int b = 0; b < 4; b++) {
            h ^= (v >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    return h;
}

static int write_metrics(const char *path, json_t *m)
{
    if (json_dump_file(m, path, JSON_INDENT(1) | JSON_ENSURE_ASCII) != 0) {
        fprintf(stderr, "headsplit: error: --metrics: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

static FILE *open_out(const char *path, const char *opt, char *err, size_t errlen)
{
    if (!path)
        return NULL;
    FILE *f = fopen(path, "wb");
    if (!f)
        util_err(err, errlen, "%s: cannot write %s: %s", opt, path, strerror(errno));
    return f;
}

/* All ranks must hold the same model: a checksum of the configuration and the file's size,
 * compared with rank 0's.  Returns 1 on every rank when one differs (rank 0 has said which). */
static int check_same_model(Comm *cm, const ModelConfig *c, const char *path)
{
    uint64_t h = 1469598103934665603ull;
    const int f[] = {c->arch, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
                     c->ffn_dim, c->vocab_size, c->context_length, c->rope_style,
                     c->tied_embeddings, c->bos_id, c->eos_id};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        h = (h ^ (uint64_t)(uint32_t)f[i]) * 1099511628211ull;
    uint32_t bits[2];
    memcpy(&bits[0], &c->norm_eps, 4);
    memcpy(&bits[1], &c->rope_theta, 4);
    h = (h ^ bits[0]) * 1099511628211ull;
    h = (h ^ bits[1]) * 1099511628211ull;
    struct stat st;
    uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    h = (h ^ size) * 1099511628211ull;
    uint64_t *all = xcalloc((size_t)cm->size, sizeof(uint64_t));
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    char err[600] = "";
    if (all[cm->rank] != all[0])
        snprintf(err, sizeof err, "%s: this rank's model differs from rank 0's (config and file "
                 "size checksum %016llx, rank 0 has %016llx): every rank needs the same file",
                 path, (unsigned long long)all[cm->rank], (unsigned long long)all[0]);
    free(all);
    return comm_agree_errors(cm, MPI_COMM_WORLD, err);
}

/* Measurements are noisy; placement must not change with the noise.  Device speeds within 30%
 * of each other count as equal (identical boards), others are rounded to 5%; when the median
 * latency is under 1 ms all count as 0 (a LAN: placement ignores them), latencies within a factor 2 of each other
 * become their median (a uniform network), others are rounded to 0.1 ms.  Either may be NULL. */
static void stabilise_inputs(Device *dev, int n, double *lat, int size)
{
    if (dev && n > 0) {
        double lo = 1e300, hi = 0;
        for (int i = 0; i < n; i++) {
            lo = dev[i].speed < lo ? dev[i].speed : lo;
            hi = dev[i].speed > hi ? dev[i].speed : hi;
        }
        for (int i = 0; i < n; i++)
            dev[i].speed = lo >= 0.7 * hi ? 1.0 : floor(dev[i].speed / hi * 20 + 0.5) / 20;
    }
    if (lat && size > 1) {
        int m = 0;
        double *v = xmalloc((size_t)size * (size_t)size * sizeof(double)), lo = 1e300, hi = 0;
        for (int i = 0; i < size; i++)
            for (int j = 0; j < size; j++)
                if (i != j) {
                    double x = lat[(size_t)i * (size_t)size + (size_t)j];
                    v[m++] = x;
                    lo = x < lo ? x : lo;
                    hi = x > hi ? x : hi;
                }
        for (int a = 1; a < m; a++) /* insertion sort: small matrices */
            for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
                double t = v[b];
                v[b] = v[b - 1];
                v[b - 1] = t;
            }
        double med = v[m / 2];
        for (int i = 0; i < size; i++)
            for (int j = 0; j < size; j++) {
                double *x = &lat[(size_t)i * (size_t)size + (size_t)j];
                if (i == j || med < 1.0)
                    *x = 0;
                else
                    *x = hi <= 2 * lo + 0.05 ? floor(med * 10 + 0.5) / 10
                                             : floor(*x * 10 + 0.5) / 10;
            }
        free(v);
    }
}

/* Per-worker budgets (bytes) and relative speeds: --devices FILE (read by rank 0) over
 * --mem-budget over the emulated device's HEADSPLIT_DEVICE_MEM_BYTES.  speeds[] are kept
 * unless the file gives them.  Returns 1 on every rank on a bad file (rank 0 has said why). */
static int gather_budgets(const Options *o, Comm *cm, size_t *budgets, double *speeds,
                          char *err, size_t errlen)
{
    size_t mine = o->mem_budget;
    const char *env = getenv("HEADSPLIT_DEVICE_MEM_BYTES");
    if (!mine && env && strcmp(env, "max") != 0) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (!*end && v > 0)
            mine = (size_t)v;
    }
    unsigned long long m64 = mine, *all = xcalloc((size_t)cm->size, sizeof(*all));
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(&m64, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG,
                             MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    for (int r = 0; r < cm->size; r++)
        budgets[r] = (size_t)all[r];
    free(all);
    double *file_speed = xcalloc((size_t)cm->size, sizeof(double));
    size_t *file_mem = xcalloc((size_t)cm->size, sizeof(size_t));
    err[0] = '\0';
    if (cm->rank == 0 && o->devices_file) {
        FILE *f = fopen(o->devices_file, "r");
        if (!f)
            util_err(err, errlen, "--devices: cannot open %s", o->devices_file);
        char line[256];
        for (int ln = 1; f && !err[0] && fgets(line, sizeof line, f); ln++) {
            char *hash = strchr(line, '#');
            if (hash)
                *hash = '\0';
            char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
            if (!tok)
                continue;
            char *end;
            long r = strtol(tok, &end, 10);
            if (*end || r < 1 || r >= cm->size) {
                util_err(err, errlen, "%s:%d: '%s' is not a worker rank 1..%d", o->devices_file,
                         ln, tok, cm->size - 1);
                break;
            }
            while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
                if (strncmp(tok, "mem=", 4) == 0 && util_parse_bytes(tok + 4, &file_mem[r]) == 0)
                    continue;
                if (strncmp(tok, "speed=", 6) == 0) {
                    file_speed[r] = strtod(tok + 6, &end);
                    if (!*end && file_speed[r] > 0)
                        continue;
                }
                util_err(err, errlen, "%s:%d: '%s' is not mem=SIZE or speed=X", o->devices_file,
                         ln, tok);
                break;
            }
        }
        if (f)
            fclose(f);
    }
    int bad = comm_agree_errors(cm, MPI_COMM_WORLD, err);
    if (!bad && o->devices_file) {
        MPI_CHECK(MPI_Ibcast(file_mem, (int)(cm->size * sizeof(size_t)), MPI_BYTE, 0,
                             MPI_COMM_WORLD, &req));
        comm_wait(cm, &req);
        MPI_CHECK(MPI_Ibcast(file_speed, cm->size, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
        comm_wait(cm, &req);
        double maxs = 0;
        for (int r = 1; r < cm->size; r++)
            maxs = speeds[r] > maxs ? speeds[r] : maxs;
        for (int r = 1; r < cm->size; r++) {
            if (file_mem[r])
                budgets[r] = file_mem[r];
            if (file_speed[r] > 0)
                speeds[r] = file_speed[r] * maxs; /* relative to the fastest measured */
        }
    }
    free(file_speed);
    free(file_mem);
    return bad;
}

/* One-way latency standard deviation (ms) of the network, for predictions: the median over
 * links of (p95 - median RTT) / 1.645 / sqrt 2, rounded to 0.1 ms; 0 where the stabilised
 * latencies are (a LAN). */
static double latency_sd_ms(const Comm *cm, const double *lat)
{
    const int n = cm->size;
    double *sd = xmalloc((size_t)n * (size_t)n * sizeof(double));
    int m = 0, lan = 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j) {
                size_t k = (size_t)i * (size_t)n + (size_t)j;
                double d = cm->rtt_p95_ms[k] - cm->rtt_ms[k];
                sd[m++] = d > 0 ? d / 1.645 / sqrt(2.0) : 0;
                lan &= lat[k] == 0;
            }
    double v = m && !lan ? floor(util_median(sd, (size_t)m) * 10 + 0.5) / 10 : 0;
    free(sd);
    return v;
}

/* The controller's work per token in ms at its measured speed: final norm and LM head. */
static double controller_ms(const ModelConfig *c, double speed_Bps)
{
    double bytes = ((double)c->vocab_size + 2.0) * (double)c->dim * sizeof(float);
    return speed_Bps > 0 ? bytes / speed_Bps * 1e3 : 0;
}

/* This rank's speed in bytes of weights per second through the model's own layer code (norms,
 * RoPE and attention included; a bare matrix-vector probe overrated the engine by about 20%):
 * synthetic layers of the model's shapes, at least 256 MiB of them so that they stream from
 * memory as the real ones do, the median of three passes. */
static double measure_speed(const ModelConfig *c)
{
    return model_probe_layer_Bps(c, (size_t)256 << 20, 3);
}

/* This rank's HEADSPLIT_DEVICE_SLOWDOWN (1 when unset); a bad value ends the run. */
static double device_slowdown(int rank)
{
    const char *v = getenv("HEADSPLIT_DEVICE_SLOWDOWN");
    if (!v || !v[0])
        return 1;
    char *end;
    errno = 0;
    double k = strtod(v, &end);
    if (*end || errno || !(k >= 1 && k <= 1000))
        FATAL("rank %d: HEADSPLIT_DEVICE_SLOWDOWN='%s' is not a factor from 1 to 1000", rank, v);
    return k;
}

/* Every rank's speed, measured one rank at a time so that they do not compete; a dilated
 * rank (--emulate-slowdown) reports its emulated device's speed. */
static void measure_speeds(Comm *cm, const ModelConfig *c, double *speeds)
{
    double mine = 0;
    for (int r = 0; r < cm->size; r++) {
        if (r == cm->rank)
            mine = measure_speed(c) / (cm->dilate > 1 ? cm->dilate : 1);
        MPI_Request req;
        MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
        comm_wait(cm, &req);
    }
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(&mine, 1, MPI_DOUBLE, speeds, 1, MPI_DOUBLE, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
}

/* Which transitions speculate (--speculate): all, none, or auto from the profile's decision
 * table.  Returns 0, or -1 with err (an explicit --profile that cannot be used). */
static int decide_mask(const Options *o, const ModelConfig *c, unsigned char *mask, char *err,
                       size_t errlen)
{
    const int L = c->n_layers;
    memset(mask, 0, (size_t)L);
    if (strcmp(o->speculate, "all") == 0) {
        memset(mask, 1, (size_t)L - 1);
        return 0;
    }
    if (strcmp(o->speculate, "auto") != 0)
        return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s%s", o->profile ? o->profile : o->model,
             o->profile ? "" : ".profile.json");
    Profile p;
    if (profile_load(&p, path, c, err, errlen) < 0) {
        if (o->profile)
            return -1;
        LOG_INFO("headsplit: no speculation profile (%s): speculation off; run "
                 "headsplit-profile to make one", err);
        err[0] = '\0';
        return 0;
    }
    double *attn = xcalloc((size_t)L, sizeof(double)), *ffn = xcalloc((size_t)L, sizeof(double));
    double *re = xcalloc((size_t)L, sizeof(double));
    profile_default_costs(&p, 0.01, attn, ffn, re);
    for (int l = 0; l + 1 < L; l++)
        mask[l] = (unsigned char)profile_decide(&p, l, o->tolerance, o->min_acceptance, attn[l],
                                                ffn[l], re[l], NULL);
    if (!o->quiet)
        profile_print_decisions(&p, stderr, o->tolerance, o->min_acceptance, attn, ffn, re);
    free(attn);
    free(ffn);
    free(re);
    profile_free(&p);
    return 0;
}

/* Decides at rank 0 which transitions speculate, then tells every rank. */
static int setup_speculation(const Options *o, Comm *cm, const ModelConfig *c, DistEngine *d)
{
    const int L = c->n_layers;
    unsigned char *mask = xcalloc((size_t)L, 1);
    char err[600] = "";
    if (cm->rank == 0)
        decide_mask(o, c, mask, err, sizeof err);
    if (comm_agree_errors(cm, MPI_COMM_WORLD, err)) {
        free(mask);
        return -1;
    }
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(mask, L, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    int n = dist_set_speculation(d, mask, o->tolerance, o->min_acceptance, o->adaptive);
    if (cm->rank == 0 && strcmp(o->speculate, "none") != 0)
        LOG_INFO("headsplit: speculation at %d of %d layer transitions (tolerance %g%s)", n,
                 L - 1, (double)o->tolerance, o->adaptive ? ", adaptive" : "");
    free(mask);
    return 0;
}

int main(int argc, char **argv)
{
    Comm cm;
    comm_init(&cm, &argc, &argv);
    Options o;
    char err[1024] = "";
    int prc = parse_args(&o, argc, argv, err, sizeof err);
    if (prc != 0) {
        /* Every rank parsed the same argv; rank 0 speaks for all. */
        if (cm.rank == 0) {
            if (prc > 0)
                usage(stdout);
            else
                fprintf(stderr, "headsplit: error: %s\n", err);
        }
        MPI_Finalize();
        return prc > 0 ? 0 : 2;
    }
    cm.wait_mode = o.wait_mode;
    if (o.verbose)
        util_set_log_level(2);
    kernels_set_matvec(o.matvec);
    const int distributed = cm.size > 1;
    if (!distributed && (o.partition_set || o.placement_set)) {
        if (cm.rank == 0)
            fprintf(stderr, "headsplit: error: --partition/--placement need at least 2 ranks "
                    "(a controller and a worker); run with mpirun -np 2 or more\n");
        MPI_Finalize();
        return 2;
    }

    double t_start = time_now();
    ModelConfig cfg;
    hid_t file = h5io_open_read(o.model, err, sizeof err);
    if (file >= 0 && config_read(&cfg, file, o.model, err, sizeof err) < 0) {
        H5Fclose(file);
        file = -1;
    }
    if (distributed ? comm_agree_errors(&cm, MPI_COMM_WORLD, file < 0 ? err : NULL) : file < 0) {
        if (!distributed)
            fprintf(stderr, "headsplit: error: %s\n", err);
        MPI_Finalize();
        return 1;
    }
    if (distributed && check_same_model(&cm, &cfg, o.model)) {
        MPI_Finalize();
        return 1;
    }
    int kv_cap = o.steps < cfg.context_length ? o.steps : cfg.context_length;

    /* Controller state: tokenizer, embeddings, LM head. */
    Tokenizer *tok = NULL;
    HeadW head;
    memset(&head, 0, sizeof head);
    err[0] = '\0';
    if (cm.rank == 0) {
        if (tokenizer_h5_read(&tok, file, o.model, err, sizeof err) == 0 &&
            tokenizer_vocab_size(tok) != cfg.vocab_size)
            util_err(err, sizeof err, "%s: tokenizer has %d pieces, config vocab_size is %d",
                     o.model, tokenizer_vocab_size(tok), cfg.vocab_size);
        if (!err[0])
            model_load_head(&head, &cfg, file, o.model, err, sizeof err);
    }

    Plan plan;
    memset(&plan, 0, sizeof plan);
    double predicted_ms = 0;
    json_t *speeds_json = NULL;
    PlanRequest req_saved;
    double *lat_saved = NULL;
    memset(&req_saved, 0, sizeof req_saved);
    LocalModel *local = NULL;
    DistEngine *dist = NULL;
    Device *devices = NULL;
    if (!distributed) {
        if (!err[0])
            local_model_load(&local, &cfg, file, o.model, kv_cap, err, sizeof err);
        if (err[0]) {
            fprintf(stderr, "headsplit: error: %s\n", err);
            MPI_Finalize();
            return 1;
        }
        plan_build_local(&plan, &cfg, 0);
        if (strcmp(o.speculate, "none") != 0) {
            /* One process has nothing to overlap, but computes exactly what speculation would,
             * which is the reference the distributed runs are tested against. */
            unsigned char *mask = xcalloc((size_t)cfg.n_layers, 1);
            if (decide_mask(&o, &cfg, mask, err, sizeof err) < 0) {
                fprintf(stderr, "headsplit: error: %s\n", err);
                MPI_Finalize();
                return 1;
            }
            local_model_set_speculation(local, mask, o.tolerance);
            free(mask);
        }
    } else {
        if (comm_agree_errors(&cm, MPI_COMM_WORLD, err)) {
            MPI_Finalize();
            return 1;
        }
        /* Links: emulated on one host, then measured (through the emulation, if any). */
        if (o.emulate_link || o.link_matrix) {
            Link *links = xcalloc((size_t)cm.size * (size_t)cm.size, sizeof(Link));
            Link uni;
            char lerr[512] = "";
            if (o.emulate_link && comm_parse_link(o.emulate_link, &uni, lerr, sizeof lerr) == 0)
                for (int i = 0; i < cm.size * cm.size; i++)
                    links[i] = uni;
            if (!lerr[0] && o.link_matrix)
                comm_load_link_matrix(o.link_matrix, cm.size, links, lerr, sizeof lerr);
            if (lerr[0]) {
                if (cm.rank == 0)
                    fprintf(stderr, "headsplit: error: %s\n", lerr);
                MPI_Finalize();
                return 2;
            }
            comm_set_emulation(&cm, links, o.seed);
            free(links);
        }
        cm.timeout_s = o.timeout_s;
        cm.dilate = o.slowdown > 0 ? o.slowdown : device_slowdown(cm.rank);
        cm.stall_rank = o.stall_rank;
        cm.stall_pos = o.stall_pos;
        cm.stall_s = o.stall_s;
        cm.kill_rank = o.kill_rank;
        cm.kill_pos = o.kill_pos;
        comm_measure_rtt(&cm, o.rtt_pings);
        if (cm.rank == 0 && util_log_level() >= 1)
            comm_print_rtt(&cm, stderr);
        /* The plan is a pure function of config and request: every rank builds the same. */
        /* Measured inputs of the cost model: every rank's streaming speed and the one-way
         * latencies (RTT/2 with the margin); identical on every rank after the allgather. */
        double *speeds = xcalloc((size_t)cm.size, sizeof(double));
        measure_speeds(&cm, &cfg, speeds);
        double ref = 0;
        for (int r = 1; r < cm.size; r++)
            ref = speeds[r] > ref ? speeds[r] : ref;
        devices = xcalloc((size_t)cm.size, sizeof(Device));
        size_t *budgets = xcalloc((size_t)cm.size, sizeof(size_t));
        char derr[600] = "";
        if (gather_budgets(&o, &cm, budgets, speeds, derr, sizeof derr)) {
            MPI_Finalize();
            return 1;
        }
        for (int r = 0; r < cm.size - 1; r++)
            devices[r] = (Device){budgets[r + 1], ref > 0 ? speeds[r + 1] / ref : 1.0};
        free(budgets);
        stabilise_inputs(devices, cm.size - 1, NULL, 0);
        int identical = 1;
        for (int r = 0; r < cm.size - 1; r++)
            identical &= devices[r].speed == 1.0;
        if (identical) /* boards alike: they run at their median speed, not the fastest's */
            ref = util_median(speeds + 1, (size_t)cm.size - 1);
        /* Expected latencies (RTT/2; the 15% margin is for deadlines, not predictions) and
         * their spread, from the RTT samples' p95 - median (normal: 1.645 sd of a sum of two
         * one-way delays). */
        double *lat = xcalloc((size_t)cm.size * (size_t)cm.size, sizeof(double));
        for (int i = 0; i < cm.size * cm.size; i++)
            lat[i] = o.assume_rtt_ms < 0 ? 0.5 * cm.rtt_ms[i]
                     : i / cm.size == i % cm.size ? 0 : 0.5 * o.assume_rtt_ms;
        stabilise_inputs(NULL, 0, lat, cm.size);
        double lat_sd = o.assume_rtt_ms < 0 ? latency_sd_ms(&cm, lat) : 0;
        double bw = 0;
        if (cm.emu)
            bw = cm.emu[1].bw_Bps;
        PlanRequest req = {.partition = o.partition, .placement = o.placement, .seed = o.seed,
                           .n_workers = cm.size - 1, .devices = devices, .kv_positions = 1,
                           .lat_ms = lat, .bw_Bps = bw, .ref_Bps = ref, .lat_sd_ms = lat_sd,
                           .fixed_ms = controller_ms(&cfg, speeds[0]),
                           .head_on_controller = o.head_on_controller,
                           /* room below the re-placement threshold for the KV cache */
                           .fill = 0.9 * o.replace_threshold};
        char perr[512] = "";
        double preds[3] = {0, 0, 0}, pred = 0;
        int bad = o.partition_auto
                      ? plan_build_auto(&plan, &cfg, &req, &pred, preds, perr, sizeof perr) < 0
                      : plan_build(&plan, &cfg, &req, perr, sizeof perr) < 0;
        if (!bad) {
            pred = plan_predict_ms(&plan, &cfg, &req);
            if (cm.rank == 0 && o.partition_auto)
                LOG_INFO("headsplit: auto partition: predicted ms/token layer %.1f, head %.1f, "
                         "slice %.1f -> %s", preds[0], preds[1], preds[2],
                         plan_partition_name(plan.partition));
            o.partition = plan.partition;
            o.placement = plan.placement;
        }
        predicted_ms = pred;
        req_saved = req;
        lat_saved = lat;
        lat = NULL;
        json_t *sp = json_array();
        for (int r = 0; r < cm.size; r++)
            json_array_append_new(sp, json_real(speeds[r] / 1e9));
        speeds_json = sp;
        free(speeds);
        free(lat);
        if (bad) {
            if (cm.rank == 0)
                fprintf(stderr, "headsplit: error: %s (--mem-budget %s)\n", perr,
                        o.mem_budget ? "set" : "unset");
            MPI_Finalize();
            return 1;
        }
        if (o.show_placement && cm.rank == 0)
            plan_print(&plan, &cfg, stderr);
        if (dist_setup(&dist, &cm, &cfg, &plan, file, o.model, kv_cap) < 0) {
            MPI_Finalize();
            return 1;
        }
        dist_set_wire(dist, o.wire16);
        if (setup_speculation(&o, &cm, &cfg, dist) < 0) {
            MPI_Finalize();
            return 1;
        }
        dist_set_memory(dist, &req_saved, kv_cap, o.replace_threshold, o.static_plan);
        if (cm.rank == 0 && !o.quiet)
            dist_print_memory_prediction(dist, stderr);
    }
    if (o.show_placement && !distributed)
        plan_print(&plan, &cfg, stderr);
    H5Fclose(file);
    double load_s = time_now() - t_start;

    /* Energy of this rank over the token loop: a power sensor when present, else the model. */
    EnergyMeter meter;
    EnergyConfig ecfg;
    char eerr[256] = "";
    energy_config_default(&ecfg);
    int have_energy = energy_config_from_env(&ecfg, eerr, sizeof eerr) == 0 &&
                      energy_init(&meter, &ecfg, eerr, sizeof eerr) == 0 &&
                      energy_start(&meter, eerr, sizeof eerr) == 0;
    if (!have_energy)
        LOG_INFO("headsplit: energy not measured: %s", eerr);

    int rc = 0;
    GenResult res;
    memset(&res, 0, sizeof res);
    if (distributed)
        comm_dilate_start(&cm);
    double t_gen = time_now();
    if (cm.rank == 0) {
        LayerBackend be = distributed ? dist_backend(dist) : local_model_backend(local);
        FILE *lf = open_out(o.logits_out, "--logits-out", err, sizeof err);
        FILE *tf = err[0] ? NULL : open_out(o.transcript, "--transcript", err, sizeof err);
        GenOptions g = {o.prompt, o.steps, o.temperature, o.top_p, o.seed,
                        o.quiet ? NULL : stdout, lf, tf, NULL, 0, NULL, 0, o.model};
        int *rp = NULL, *rg = NULL, nrp = 0, nrg = 0;
        if (!err[0] && o.resume &&
            generate_read_transcript(o.resume, cfg.vocab_size, &rp, &nrp, &rg, &nrg, err,
                                     sizeof err) == 0) {
            g.prompt_ids = rp;
            g.n_prompt_ids = nrp;
            g.forced = rg;
            g.n_forced = nrg;
            LOG_INFO("headsplit: resuming %s: %d prompt and %d generated tokens", o.resume, nrp,
                     nrg);
        }
        if (err[0] || generate_run(&cfg, tok, &head, &be, &g, &res, err, sizeof err) < 0) {
            fprintf(stderr, "headsplit: error: %s\n", err);
            rc = 1;
        }
        free(rp);
        free(rg);
        if (lf)
            fclose(lf);
        if (tf)
            fclose(tf);
        if (distributed)
            dist_controller_stop(dist);
    } else {
        dist_worker_loop(dist);
    }
    if (distributed)
        comm_dilate_stop(&cm);
    double gen_s = time_now() - t_gen;
    double joules = have_energy ? energy_stop(&meter, eerr, sizeof eerr) : -1;
    /* Every rank's joules, at rank 0. */
    double *all_j = xcalloc((size_t)cm.size, sizeof(double));
    if (distributed) {
        MPI_Request req;
        MPI_CHECK(MPI_Igather(&joules, 1, MPI_DOUBLE, all_j, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD,
                              &req));
        comm_wait(&cm, &req);
    } else {
        all_j[0] = joules;
    }

    json_t *dm = distributed ? dist_collect_metrics(dist, res.n_forward) : NULL;
    if (dm && cm.rank == 0 && !o.quiet)
        dist_print_layer_times(dm, stderr);
    if (cm.rank == 0 && rc == 0) {
        double ms = generate_ms_per_token(&res);
        uint64_t sum = tokens_checksum(res.tokens, res.n_tokens);
        LOG_INFO("headsplit: %d positions, %.2f ms/token (median), checksum %016llx, %s",
                 res.n_forward, ms, (unsigned long long)sum,
                 distributed ? "distributed" : "single process");
        if (o.metrics) {
            json_t *m = json_object(), *toks = json_array(), *tms = json_array();
            for (int i = 0; i < res.n_tokens; i++)
                json_array_append_new(toks, json_integer(res.tokens[i]));
            for (int i = 0; i < res.n_forward; i++)
                json_array_append_new(tms, json_real(res.token_ms[i]));
            json_object_set_new(m, "tokens", toks);
            json_object_set_new(m, "text", json_string(res.text));
            json_object_set_new(m, "n_prompt_tokens", json_integer(res.n_prompt));
            json_object_set_new(m, "n_forward", json_integer(res.n_forward));
            json_object_set_new(m, "stopped_by", json_string(res.stopped_by));
            json_object_set_new(m, "ms_per_token", json_real(ms));
            json_object_set_new(m, "token_ms", tms);
            json_object_set_new(m, "generate_s", json_real(gen_s));
            json_object_set_new(m, "load_s", json_real(load_s));
            char hex[32];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
            json_object_set_new(m, "tokens_checksum", json_string(hex));
            json_object_set_new(m, "config", options_json(&o, cm.size));
            json_object_set_new(m, "model", model_json(&cfg));
            json_object_set_new(m, "openblas_corename", json_string(kernels_blas_corename()));
            json_object_set_new(m, "plan", plan_to_json(dist ? dist_plan(dist) : &plan, &cfg));
            if (dist) {
                json_t *mj = dist_memory_json(dist);
                json_object_update(m, mj);
                json_decref(mj);
            }
            json_object_set_new(m, "placement_ms", json_real(plan.build_ms));
            json_object_set_new(m, "predicted_ms_per_token", json_real(predicted_ms));
            if (speeds_json)
                json_object_set_new(m, "rank_speed_GBps", json_incref(speeds_json));
            double ej = 0;
            int complete = 1;
            for (int r = 0; r < cm.size; r++) {
                complete &= all_j[r] >= 0;
                ej += all_j[r] > 0 ? all_j[r] : 0;
            }
            if (complete && res.n_forward > 0) {
                double per_tok = energy_per_token(ej, res.n_forward);
                json_object_set_new(m, "energy_j", json_real(ej));
                json_object_set_new(m, "energy_per_token_j", json_real(per_tok));
                json_object_set_new(m, "edp_js", json_real(energy_delay_product(
                                        per_tok, gen_s / res.n_forward)));
                json_object_set_new(m, "energy_source", json_string(energy_source_name(&meter)));
                char desc[256];
                energy_describe(&meter, desc, sizeof desc);
                json_object_set_new(m, "energy_source_detail", json_string(desc));
                json_t *pr = json_array();
                for (int r = 0; r < cm.size; r++)
                    json_array_append_new(pr, json_real(all_j[r]));
                json_object_set_new(m, "energy_j_per_rank", pr);
            }
            if (dm) {
                json_object_update(m, dm);
                json_t *rj = comm_rtt_json(&cm);
                json_object_update(m, rj);
                json_decref(rj);
            } else {
                json_object_set_new(m, "ranks", json_pack("[{s:i,s:s,s:I,s:I,s:f,s:f}]", "rank",
                                    0, "role", "single", "weight_bytes",
                                    (json_int_t)local_model_weight_bytes(local),
                                    "peak_rss_bytes", (json_int_t)util_peak_rss(), "cpu_s",
                                    time_cpu(), "wall_s", time_now() - t_start));
                json_object_set_new(m, "hops_per_token", json_integer(0));
                json_object_set_new(m, "bytes_per_token", json_real(0));
            }
            if (write_metrics(o.metrics, m) < 0)
                rc = 1;
            json_decref(m);
        }
    }
    json_decref(dm);
    json_decref(speeds_json);
    free(all_j);
    generate_result_free(&res);
    local_model_free(local);
    dist_free(dist);
    plan_free(&plan);
    free(devices);
    free(lat_saved);
    model_free_head(&head);
    tokenizer_free(tok);
    if (distributed) {
        MPI_Request req;
        MPI_CHECK(MPI_Ibcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
        comm_wait(&cm, &req);
    }
    comm_finalize(&cm);
    return rc;
}
