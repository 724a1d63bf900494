/* headsplit: generate text with a model spread over MPI ranks.
 *   mpirun -np 1 headsplit --model M.h5 --prompt TEXT --steps N          (single process)
 *   mpirun -np 5 headsplit --model M.h5 --partition head --placement greedy ...
 * Rank 0 is the controller (embeddings, final norm, LM head, sampling, token loop); ranks
 * 1..N are workers holding attention parts, projections and FFNs of the plan.
 * main reads as the run's phases: parse, open, measure, plan, load, generate, report; each
 * returns the exit status (0: go on), the same on every rank, and run_free cleans up. */
#include "headsplit.h"

#include "config_io.h"
#include "transport_mpi.h"
#include "h5io.h"
#include "profile.h"
#include "progress.h"
#include "sim.h"
#include "solver.h"
#include "draft.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Parse: every rank parses the same argv; rank 0 speaks for all.  Returns -1 for --help
 * (exit 0), 2 on a bad command line, else 0. */
static int run_parse(Run *run, int argc, char **argv)
{
    Options *o = &run->o;
    char err[1024] = "";
    int prc = options_parse(o, argc, argv, err, sizeof err);
    if (prc == 0 && run->cm.size < 2 && o->replicas > 1) {
        prc = -1;
        snprintf(err, sizeof err, "--replicas %d: the copies live on workers; run with mpirun "
                 "-np %d or more (a controller and a worker per copy)", o->replicas,
                 o->replicas + 1);
    }
    if (prc == 0 && run->cm.size < 2 && (o->partition_set || o->placement_set)) {
        prc = -1;
        snprintf(err, sizeof err, "--partition/--placement need at least 2 ranks (a controller "
                 "and a worker); run with mpirun -np 2 or more");
    }
    if (prc != 0 && run->cm.rank == 0) {
        if (prc == 2)
            options_version(stdout, "headsplit");
        else if (prc > 0)
            options_usage(stdout);
        else
            fprintf(stderr, "headsplit: error: %s\n", err);
    }
    if (prc != 0)
        return prc > 0 ? -1 : 2;
    run->cm.wait_mode = o->wait_mode;
    if (o->verbose)
        util_set_log_level(2);
    kernels_set_matvec(o->matvec);
    kernels_set_f32_order(o->f32_order);
    kernels_set_threads(o->threads ? o->threads : kernels_default_threads());
    char bind[512];
    if (kernels_binding_advice(o->threads, bind, sizeof bind))
        fprintf(stderr, "headsplit: warning: rank %d: %s\n", run->cm.rank, bind);
    run->distributed = run->cm.size > 1;
    /* Between chat turns and requests the workers wait in the session's control broadcast,
     * which has no deadline; --timeout still bounds every wait within a generation. */
    return 0;
}

/* A model file that is not HDF5: says which format it looks like and the headsplit-convert
 * command that makes a HeadSplit file of it (appended to err). */
static void format_hint(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    unsigned char b[16] = {0};
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    const char *hint = NULL;
    size_t pl = strlen(path);
    if (n >= 8 && !memcmp(b, "\x89HDF\r\n\x1a\n", 8))
        return; /* HDF5 after all: the error says what is wrong inside */
    if (n >= 4 && !memcmp(b, "GGUF", 4))
        hint = "a GGUF file: convert %s with headsplit-convert's GGUF import (--format gguf, "
               "see headsplit-convert --help) or the model's Hugging Face directory with "
               "headsplit-convert --format hf --dir DIR --out M.h5";
    else if (n >= 9 && b[8] == '{' && (pl > 12 && !strcmp(path + pl - 12, ".safetensors")))
        hint = "a safetensors file: convert the Hugging Face directory that holds %s "
               "(config.json, tokenizer.json) with headsplit-convert --format hf --dir DIR --out "
               "M.h5";
    else if (pl > 4 && !strcmp(path + pl - 4, ".bin"))
        hint = "a llama2.c checkpoint (by its name): convert it with headsplit-convert "
               "--format llama2c --checkpoint %s --tokenizer tokenizer.bin --out M.h5";
    if (!hint)
        return;
    size_t used = strlen(err);
    char msg[600];
    snprintf(msg, sizeof msg, hint, path);
    snprintf(err + used, errlen - used, "; %s looks like %s", path, msg);
}

static uint64_t file_bytes(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* The load's bar: the whole file for a single process, else this rank's share (no total:
 * the plan decides it); a worker's names its rank. */
static Progress *load_bar_start(const Run *run)
{
    char label[1100];
    if (run->cm.rank > 0)
        snprintf(label, sizeof label, "rank %d: loading %s", run->cm.rank, run->o.model);
    else
        snprintf(label, sizeof label, "loading %s", run->o.model);
    return progress_start(label, run->distributed ? 0 : file_bytes(run->o.model), 0);
}

/* Open: the model's configuration on every rank (the same file everywhere), the tokenizer,
 * embeddings and LM head on the controller. */
static int run_open(Run *run)
{
    const Options *o = &run->o;
    char err[1024] = "";
    run->t_start = time_now();
    run->file = h5io_open_read(o->model, err, sizeof err);
    if (run->file < 0)
        format_hint(o->model, err, sizeof err);
    if (run->file >= 0 && config_read(&run->cfg, run->file, o->model, err, sizeof err) < 0) {
        H5Fclose(run->file);
        run->file = -1;
    }
    run->cfg.kv_type = o->cache_type; /* every rank's caches, and what placement counts */
    if (run->file >= 0 && o->cache_type == QTYPE_Q8_0 && run->cfg.head_dim % 32) {
        util_err(err, sizeof err, "--cache-type q8_0: the head size %d of %s is not a multiple "
                 "of 32 (Q8_0 blocks); give --cache-type f16 or f32", run->cfg.head_dim,
                 o->model);
        H5Fclose(run->file);
        run->file = -1;
    }
    if (startup_agree(&run->cm, run->file < 0 ? err : NULL))
        return 1;
    if (run->distributed && startup_check_model(&run->cm, &run->cfg, o->model))
        return 1;
    /* KV positions: --ctx-size, else the whole context where the length of what comes is
     * not known (-n, --chat, --serve), else --steps as before. */
    int want = o->ctx_size          ? o->ctx_size
               : o->n_predict || o->chat || o->serve ? run->cfg.context_length
                                                      : o->steps;
    run->kv_cap = want < run->cfg.context_length ? want : run->cfg.context_length;
    if (!o->steps_set && (o->n_predict || o->chat || o->serve || o->ctx_size))
        run->o.steps = run->kv_cap;
    if (run->cm.rank == 0) {
        /* a single process's bar counts every byte of the file, so it starts before the
         * tokenizer, the embeddings and the LM head are read */
        if (!run->distributed)
            run->load_bar = load_bar_start(run);
        if (tokenizer_h5_read(&run->tok, run->file, o->model, err, sizeof err) == 0 &&
            tokenizer_vocab_size(run->tok) != run->cfg.vocab_size)
            util_err(err, sizeof err, "%s: tokenizer has %d pieces, config vocab_size is %d",
                     o->model, tokenizer_vocab_size(run->tok), run->cfg.vocab_size);
        if (!err[0])
            model_load_head(&run->head, &run->cfg, run->file, o->model, err, sizeof err);
        if (!err[0])
            session_choose_template(run, err, sizeof err);
        if (err[0]) { /* the bar's line ends before the error is printed */
            progress_stop(run->load_bar, 0);
            run->load_bar = NULL;
        }
    }
    return startup_agree(&run->cm, err);
}

/* --serve's slots: --parallel, else 4 (1 with a draft model or speculation, which follow
 * one sequence); 1 without --serve. */
static int serve_slot_count(const Options *o)
{
    if (!o->serve)
        return 1;
    return o->parallel ? o->parallel : o->draft || strcmp(o->speculate, "none") ? 1 : 4;
}

/* run->slots (serve_slot_count): 0, or -1 with err where --parallel > 1 cannot be
 * honoured. */
static int serve_slots(Run *run, char *err, size_t errlen)
{
    const Options *o = &run->o;
    run->slots = serve_slot_count(o);
    if (o->serve && o->parallel > 1 && strcmp(o->speculate, "none") != 0)
        return util_err(err, errlen, "--parallel %d with --speculate %s: the %s speculation "
                        "follows one sequence; give --parallel 1 or --speculate none",
                        o->parallel, o->speculate, run->distributed ? "layers'" : "emulated");
    return 0;
}

/* --placement dp|exact: plan_build's solver placements over the measured cluster as the
 * planner sees it (stabilised, so every rank solves the same problem), priced by the
 * simulator's cost model; the exact search is bounded by a node count, not a time, so that
 * every rank finds the same plan. */
static int solve_placement(Run *run, char *err, size_t errlen)
{
    Cluster cl;
    inputs_solver_cluster(&cl, &run->ci, run->req.fill > 0 ? run->req.fill : 1);
    SimCostInputs in = {&cl, run->kv_cap / 2};
    CostModel model = sim_cost_model(&in);
    SolverStats st;
    PlanRequest req = run->req;
    req.kv_positions = run->kv_cap * serve_slot_count(&run->o); /* every slot's caches */
    req.cluster = &cl;
    req.model = &model;
    req.max_nodes = 2000000;
    req.stats = &st;
    int rc = plan_build(&run->plan, &run->cfg, &req, err, errlen);
    if (rc == 0 && run->cm.rank == 0)
        LOG_INFO("headsplit: %s placement: simulated %.2f ms/token at position %d%s",
                 plan_placement_name(req.placement), st.cost_s * 1e3, in.pos,
                 req.placement == PLACEMENT_EXACT && !st.optimal ? " (node limit: best found)"
                                                                 : "");
    cluster_free(&cl);
    return rc;
}

/* Plan: a pure function of the configuration and the measured inputs, so every rank builds
 * the same plan; a single process has every role itself. */
static int run_plan(Run *run)
{
    Options *o = &run->o;
    if (!run->distributed) {
        plan_build_local(&run->plan, &run->cfg, 0);
        return 0;
    }
    /* --serve's slots: every slot's caches at the full context count in every placement
     * (one sequence: its cache grows into the room the fill fraction leaves) */
    const int slots = serve_slot_count(o);
    run->req = (PlanRequest){.partition = o->partition, .placement = o->placement,
                             .seed = o->seed, .kv_positions = slots > 1 ? run->kv_cap * slots : 1,
                             .head_on_controller = o->head_on_controller,
                             .wire_bytes = (double)wire_form_bytes(o->wire, 32) / 32,
                             .exchange = o->exchange,
                             /* room below the re-placement threshold for the KV cache */
                             .fill = 0.9 * o->replace_threshold};
    inputs_fill_request(&run->ci, &run->req);
    char err[1024] = "";
    double preds[3] = {0, 0, 0}, pred = 0;
    int layer_dp = 0, bad;
    const int solved = o->placement == PLACEMENT_DP || o->placement == PLACEMENT_EXACT;
    const int copies = replicas_plan(run, serve_slot_count(o), err, sizeof err);
    if (copies != 0) {
        bad = copies < 0;
    } else if (solved) {
        bad = solve_placement(run, err, sizeof err) < 0;
    } else if (o->partition_auto) {
        /* the layer-wise candidate: the better of N stages and the best over subsets of the
         * boards (the cluster as --placement dp sees it) */
        Cluster cl;
        inputs_solver_cluster(&cl, &run->ci, run->req.fill > 0 ? run->req.fill : 1);
        bad = plan_build_auto(&run->plan, &run->cfg, &run->req, &cl,
                              run->kv_cap * serve_slot_count(o), &pred, preds,
                              &layer_dp, err, sizeof err) < 0;
        cluster_free(&cl);
    } else {
        bad = plan_build(&run->plan, &run->cfg, &run->req, err, sizeof err) < 0;
    }
    if (bad) {
        if (run->cm.rank == 0 && slots > 1)
            fprintf(stderr, "headsplit: error: %s, counting %d slots (--parallel) of %d positions "
                    "(--ctx-size) of KV caches (--cache-type %s) on every rank that caches "
                    "(--mem-budget %s); give fewer --parallel, a smaller --ctx-size or "
                    "--cache-type f16 or q8_0\n", err, slots, run->kv_cap,
                    quant_type_name((QType)o->cache_type), o->su.mem_budget ? "set" : "unset");
        else if (run->cm.rank == 0)
            fprintf(stderr, "headsplit: error: %s (--mem-budget %s)\n", err,
                    o->su.mem_budget ? "set" : "unset");
        return 1;
    }
    run->predicted_ms = plan_predict_ms(&run->plan, &run->cfg, &run->req);
    if (run->cm.rank == 0 && o->partition_auto && copies == 0)
        LOG_INFO("headsplit: auto partition: predicted ms/token layer %.1f, head %.1f, "
                 "slice %.1f -> %s%s", preds[0], preds[1], preds[2],
                 plan_partition_name(run->plan.partition),
                 layer_dp ? " (the best layer-wise plan over subsets of the boards, as "
                            "--placement dp)" : "");
    o->partition = run->plan.partition;
    if (!solved) /* the solvers' plans keep their structure's kind (layer, roundrobin) */
        o->placement = run->plan.placement;
    for (int k = 0; o->show_placement && run->cm.rank == 0 && k < run->n_copies; k++) {
        if (run->n_copies > 1)
            fprintf(stderr, "copy %d of %d:\n", k, run->n_copies);
        plan_print(run->n_copies > 1 ? &run->cplans[k] : &run->plan, &run->cfg, stderr);
    }
    return 0;
}

/* The acceptance the prediction prices speculation with: the mean of the profile's
 * acceptance at --tolerance over the transitions of mask (p NULL: none; then 0 at tolerance
 * 0, which never keeps, else -1, every speculation counted kept). */
static double mask_acceptance(const Profile *p, const unsigned char *mask, int L, float tol)
{
    if (!p)
        return tol > 0 ? -1 : 0;
    double sum = 0;
    int n = 0;
    for (int l = 0; l + 1 < L; l++)
        if (mask[l]) {
            sum += profile_acceptance(p, l, tol);
            n++;
        }
    return n ? sum / n : -1;
}

/* Which transitions speculate (--speculate): all, none, or auto from the profile's decision
 * table, and (accept) the acceptance to predict with (mask_acceptance: with "all" the
 * profile's where one loads).  Returns 0, or -1 with err (an explicit --profile that cannot
 * be used). */
static int decide_mask(const Options *o, const ModelConfig *c, unsigned char *mask,
                       double *accept, char *err, size_t errlen)
{
    const int L = c->n_layers;
    memset(mask, 0, (size_t)L);
    *accept = -1;
    const int all = strcmp(o->speculate, "all") == 0;
    if (all)
        memset(mask, 1, (size_t)L - 1);
    if (!all && strcmp(o->speculate, "auto") != 0)
        return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s%s", o->profile ? o->profile : o->model,
             o->profile ? "" : ".profile.json");
    Profile p;
    if (profile_load(&p, path, c, err, errlen) < 0) {
        if (all) { /* the mask stands; the prediction has no acceptance to go by */
            err[0] = '\0';
            *accept = mask_acceptance(NULL, mask, L, o->tolerance);
            return 0;
        }
        if (o->profile)
            return -1;
        LOG_INFO("headsplit: no speculation profile (%s): speculation off; run "
                 "headsplit-profile to make one", err);
        err[0] = '\0';
        return 0;
    }
    if (all) {
        *accept = mask_acceptance(&p, mask, L, o->tolerance);
        profile_free(&p);
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
    *accept = mask_acceptance(&p, mask, L, o->tolerance);
    free(attn);
    free(ffn);
    free(re);
    profile_free(&p);
    return 0;
}

/* Positions one target pass may carry: a prompt chunk (--batch), or a draft round's K + 1
 * (K up to DRAFT_K_MAX with auto). */
static int target_max_batch(const Options *o)
{
    int mb = o->batch > 0 ? o->batch : 1;
    if (o->draft) {
        int k = (o->draft_tokens ? o->draft_tokens : DRAFT_K_MAX) + 1;
        mb = k > mb ? k : mb;
    }
    return mb;
}

/* Load, single process: every layer here; speculation computed exactly as the distributed
 * runs would (one process has nothing to overlap, but it is their reference).  --serve's
 * slots: KV caches per slot, and passes that take a prompt chunk (--batch) beside one decode
 * row of every other slot. */
static int load_local(Run *run)
{
    const Options *o = &run->o;
    char err[1024] = "";
    if (serve_slots(run, err, sizeof err) == 0 &&
        local_model_load(&run->local, &run->cfg, run->file, o->model, run->kv_cap, err,
                         sizeof err) == 0) {
        local_model_set_max_batch(run->local, target_max_batch(o) + run->slots - 1);
        local_model_set_slots(run->local, run->slots);
    }
    if (!err[0] && strcmp(o->speculate, "none") != 0) {
        unsigned char *mask = xcalloc((size_t)run->cfg.n_layers, 1);
        double accept;
        if (decide_mask(o, &run->cfg, mask, &accept, err, sizeof err) == 0)
            local_model_set_speculation(run->local, mask, o->tolerance);
        free(mask);
    }
    if (o->show_placement && !err[0])
        plan_print(&run->plan, &run->cfg, stderr);
    return startup_agree(&run->cm, err);
}

/* The controller's predicted_ms_per_token with the speculation the run uses: mask[l] the
 * transition l -> l+1 (the cost model's transition into l+1), kept with probability accept
 * (-1: always). */
static void predict_speculation(Run *run, const unsigned char *mask, double accept)
{
    const int L = run->cfg.n_layers;
    unsigned char *into = xcalloc((size_t)L + 1, 1);
    for (int l = 0; l + 1 < L; l++)
        into[l + 1] = mask[l] && dist_spec_eligible(run->dist)[l];
    PlanRequest req = run->req;
    req.speculate = into;
    req.spec_accept = accept;
    const double without = run->predicted_ms;
    run->predicted_ms = plan_predict_ms(&run->plan, &run->cfg, &req);
    free(into);
    LOG_INFO("headsplit: predicted ms/token %.6g with speculation (acceptance %s%.3g), %.6g "
             "without", run->predicted_ms, accept < 0 ? "assumed " : "", accept < 0 ? 1.0 : accept,
             without);
}

/* Load, distributed: the engine's communicators and weight slices, the speculation mask
 * decided at rank 0, the memory budgets. */
static int load_dist(Run *run)
{
    const Options *o = &run->o;
    Transport *cm = &run->cm;
    if (run->n_copies > 1) {
        char err[256] = "";
        serve_slots(run, err, sizeof err); /* speculation is refused with --replicas */
        return replicas_load(run, target_max_batch(o) + run->slots - 1);
    }
    if (dist_setup(&run->dist, cm, &run->cfg, &run->plan, run->file, o->model, run->kv_cap) < 0)
        return 1;
    dist_set_wire(run->dist, o->wire);
    char err[600] = "";
    /* --serve's slots: passes that take a prompt chunk (--batch) beside one decode row of
     * every other slot, KV caches per slot on every rank (the same answer on every rank) */
    serve_slots(run, err, sizeof err);
    dist_set_max_batch(run->dist, target_max_batch(o) + run->slots - 1);
    dist_set_ubatch(run->dist, o->ubatch);
    const int L = run->cfg.n_layers;
    unsigned char *mask = xcalloc((size_t)L, 1);
    double accept = -1;
    if (cm->rank == 0 && !err[0])
        decide_mask(o, &run->cfg, mask, &accept, err, sizeof err);
    int bad = startup_share_mask(cm, mask, L, err);
    if (!bad) {
        int n = dist_set_speculation(run->dist, mask, o->tolerance, o->min_acceptance,
                                     o->adaptive);
        if (cm->rank == 0 && n > 0)
            predict_speculation(run, mask, accept);
        if (cm->rank == 0 && strcmp(o->speculate, "none") != 0)
            LOG_INFO("headsplit: speculation at %d of %d layer transitions (tolerance %g%s)", n,
                     L - 1, (double)o->tolerance, o->adaptive ? ", adaptive" : "");
        dist_set_memory(run->dist, &run->req, run->kv_cap, o->replace_threshold,
                        o->static_plan);
        dist_set_slots(run->dist, run->slots);
        if (dist_check_slots_memory(run->dist, err, sizeof err) < 0) {
            if (cm->rank == 0)
                fprintf(stderr, "headsplit: error: %s\n", err);
            bad = 1;
        }
        if (!bad && cm->rank == 0 && !o->quiet)
            dist_print_memory_prediction(run->dist, stderr);
    }
    free(mask);
    return bad;
}

/* Where the draft's tokenizer differs from the target's: 0 when they agree (kind, size,
 * BOS/EOS, every piece's bytes and specialness), else -1 with what differs in what. */
static int tokenizer_compare(const Tokenizer *a, const Tokenizer *b, char *what, size_t cap)
{
    if (tokenizer_kind(a) != tokenizer_kind(b) ||
        tokenizer_vocab_size(a) != tokenizer_vocab_size(b))
        return util_err(what, cap, "kind or size (%d and %d pieces)", tokenizer_vocab_size(a),
                        tokenizer_vocab_size(b));
    if (tokenizer_bos(a) != tokenizer_bos(b) || tokenizer_eos(a) != tokenizer_eos(b))
        return util_err(what, cap, "BOS/EOS ids");
    char pa[256], pb[256];
    for (int id = 0; id < tokenizer_vocab_size(a); id++) {
        size_t na = tokenizer_decode_token(a, -1, id, pa, sizeof pa);
        size_t nb = tokenizer_decode_token(b, -1, id, pb, sizeof pb);
        if (na != nb || memcmp(pa, pb, na) != 0 ||
            tokenizer_is_special(a, id) != tokenizer_is_special(b, id))
            return util_err(what, cap, "piece %d", id);
    }
    return 0;
}

/* Checks the draft's file against the target (rank 0): its configuration into run->dcfg and
 * the same vocabulary and tokenizer, else err. */
static void check_draft(Run *run, hid_t f, char *err, size_t errlen)
{
    const Options *o = &run->o;
    Tokenizer *dtok = NULL;
    char what[128];
    if (config_read(&run->dcfg, f, o->draft, err, errlen) == 0 &&
        tokenizer_h5_read(&dtok, f, o->draft, err, errlen) == 0) {
        if (run->dcfg.vocab_size != run->cfg.vocab_size ||
            run->dcfg.bos_id != run->cfg.bos_id || run->dcfg.eos_id != run->cfg.eos_id)
            util_err(err, errlen, "--draft %s: its vocabulary (%d tokens, BOS %d, EOS "
                     "%d) differs from %s's (%d tokens, BOS %d, EOS %d)", o->draft,
                     run->dcfg.vocab_size, run->dcfg.bos_id, run->dcfg.eos_id, o->model,
                     run->cfg.vocab_size, run->cfg.bos_id, run->cfg.eos_id);
        else if (tokenizer_compare(dtok, run->tok, what, sizeof what) < 0)
            util_err(err, errlen, "--draft %s: its tokenizer differs from %s's (%s); "
                     "a draft needs the same tokenizer", o->draft, o->model, what);
    }
    tokenizer_free(dtok);
}

/* --draft: the draft model's head on the controller, its layers (KV caches as long as the
 * target's within its context) there or, with --draft-rank R, on worker R; refused when its
 * vocabulary or tokenizer differs from the target's.  Collective: every rank learns the
 * verdict. */
static int load_draft(Run *run)
{
    const Options *o = &run->o;
    const int remote = o->draft_rank > 0, me = run->cm.rank;
    char err[1024] = "";
    if (o->draft_rank >= run->cm.size)
        util_err(err, sizeof err, "--draft-rank %d: there are only ranks 0..%d", o->draft_rank,
                 run->cm.size - 1);
    hid_t f = -1;
    if (!err[0] && (me == 0 || (remote && me == o->draft_rank))) {
        transport_exclusive(&run->cm, 1);
        f = h5io_open_read(o->draft, err, sizeof err);
        if (f >= 0 && me == 0)
            check_draft(run, f, err, sizeof err);
        else if (f >= 0)
            config_read(&run->dcfg, f, o->draft, err, sizeof err);
        if (!err[0] && me == 0)
            model_load_head(&run->dhead, &run->dcfg, f, o->draft, err, sizeof err);
        transport_exclusive(&run->cm, 0);
    }
    int kv = run->kv_cap < run->dcfg.context_length ? run->kv_cap : run->dcfg.context_length;
    if (me == 0 && !remote && !err[0] &&
        local_model_load(&run->dlocal, &run->dcfg, f, o->draft, kv, err, sizeof err) == 0)
        local_model_set_max_batch(run->dlocal, o->batch > 0 ? o->batch : 1);
    int bad = startup_agree(&run->cm, err[0] ? err : NULL);
    if (!bad && remote) { /* collective: R loads the layers and serves them */
        char rerr[1024] = "";
        if (remote_draft_setup(&run->rdraft, run->dist, &run->cm, o->draft_rank, &run->dcfg, f,
                               o->draft, kv, o->batch > 0 ? o->batch : 1, rerr,
                               sizeof rerr) < 0)
            bad = 1;
    }
    if (f >= 0)
        H5Fclose(f);
    if (!bad && me == 0) {
        run->draft = xcalloc(1, sizeof *run->draft);
        *run->draft = (GenDraft){.c = &run->dcfg, .head = &run->dhead,
                                 .backend = remote ? remote_draft_backend(run->rdraft)
                                                   : local_model_backend(run->dlocal),
                                 .kv_cap = kv, .k = o->draft_tokens};
        LOG_INFO("headsplit: draft %s: %d layers, dim %d, layers on rank %d, %s tokens per "
                 "round", o->draft, run->dcfg.n_layers, run->dcfg.dim, remote ? o->draft_rank : 0,
                 o->draft_tokens ? "fixed" : "auto");
    }
    return bad;
}

static int run_load(Run *run)
{
    /* a bar on the controller's terminal: the whole file for a single process (started in
     * run_open), each rank's own share otherwise (under mpirun, lines in its log) */
    if (run->distributed)
        run->load_bar = load_bar_start(run);
    int rc = run->distributed ? load_dist(run) : load_local(run);
    progress_stop(run->load_bar, rc == 0);
    run->load_bar = NULL;
    if (rc == 0 && run->o.draft)
        rc = load_draft(run);
    H5Fclose(run->file);
    run->file = -1;
    run->load_s = time_now() - run->t_start;
    return rc;
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

/* The controller's token loop (with --resume's forced tokens); 0, or 1 after its error. */
static int controller_generate(Run *run)
{
    const Options *o = &run->o;
    char err[1024] = "";
    LayerBackend be = run->distributed ? dist_backend(run->dist)
                                       : local_model_backend(run->local);
    FILE *lf = open_out(o->logits_out, "--logits-out", err, sizeof err);
    FILE *tf = err[0] ? NULL : open_out(o->transcript, "--transcript", err, sizeof err);
    GenOptions g;
    session_gen_options(run, &g);
    g.stream = o->quiet ? NULL : stdout;
    /* --steps alone sizes the KV caches but, as before, a longer prompt is not an error (the
     * warning says it leaves no room); --ctx-size is a hard limit */
    g.ctx = o->ctx_size ? run->kv_cap : 0;
    g.logits_out = lf;
    g.transcript = tf;
    char *templated = NULL;
    if (o->chat_template && !err[0]) { /* --prompt as the user's message in the template */
        ChatMessage msgs[2] = {{"system", o->system_prompt}, {"user", o->prompt}};
        templated = chat_format(run->tmpl, msgs + !o->system_prompt, 1 + !!o->system_prompt, 1,
                                err, sizeof err);
        g.prompt = templated;
        if (!o->n_stops) {
            g.stops = &run->tmpl_stop;
            g.n_stops = 1;
        }
    }
    int *rp = NULL, *rg = NULL, nrp = 0, nrg = 0;
    if (!err[0] && o->resume &&
        generate_read_transcript(o->resume, run->cfg.vocab_size, &rp, &nrp, &rg, &nrg, err,
                                 sizeof err) == 0) {
        g.prompt_ids = rp;
        g.n_prompt_ids = nrp;
        g.forced = rg;
        g.n_forced = nrg;
        LOG_INFO("headsplit: resuming %s: %d prompt and %d generated tokens", o->resume, nrp,
                 nrg);
    }
    int rc = 0;
    if (err[0] ||
        generate_run(&run->cfg, run->tok, &run->head, &be, &g, &run->res, err, sizeof err) < 0) {
        fprintf(stderr, "headsplit: error: %s\n", err);
        rc = 1;
    }
    free(templated);
    free(rp);
    free(rg);
    if (lf)
        fclose(lf);
    if (tf)
        fclose(tf);
    if (run->distributed && run->n_copies > 1)
        replicas_stop(run);
    else if (run->distributed)
        dist_controller_stop(run->dist);
    return rc;
}

/* local_model_on_pass's hook on an emulated board: the stretch of work since the last pass
 * ended (the LM head, sampling, this pass) ends here, lasting as long as on the board. */
static void board_point(void *cm)
{
    transport_compute(cm, 0);
    transport_compute(cm, 1);
}

/* Generate: the controller runs the token loop, workers serve layers until it stops them;
 * every rank's energy over the loop (a power sensor when present, else the model). */
static int run_generate(Run *run)
{
    EnergyConfig ecfg;
    char eerr[256] = "";
    energy_config_default(&ecfg);
    run->have_energy = energy_config_from_env(&ecfg, eerr, sizeof eerr) == 0 &&
                       energy_init(&run->meter, &ecfg, eerr, sizeof eerr) == 0 &&
                       energy_start(&run->meter, eerr, sizeof eerr) == 0;
    if (!run->have_energy)
        LOG_INFO("headsplit: energy not measured: %s", eerr);
    int rc = 0;
    /* A single process on an emulated board pays the dilation of each stretch of work at
     * the end of each pass of the model (the distributed ranks pay it at their messages). */
    if (!run->distributed && run->local && run->board_slowdown > 1)
        local_model_on_pass(run->local, board_point, &run->cm);
    transport_compute(&run->cm, 1);
    double t_gen = time_now();
    if (run->o.chat || run->o.serve)
        rc = run->cm.rank == 0 ? (run->o.chat ? session_chat(run) : serve_run(run))
             : run->o.serve    ? serve_worker(run)
                               : session_worker(run);
    else if (run->cm.rank == 0)
        rc = controller_generate(run);
    else
        dist_worker_loop(run->dist);
    transport_compute(&run->cm, 0);
    run->gen_s = time_now() - t_gen;
    double joules = run->have_energy ? energy_stop(&run->meter, eerr, sizeof eerr) : -1;
    run->all_j = xcalloc((size_t)run->cm.size, sizeof(double));
    startup_gather_double(&run->cm, joules, run->all_j);
    return rc;
}

static void run_free(Run *run)
{
    progress_stop(run->load_bar, 0); /* a load that failed before run_load */
    free(run->all_j);
    free(run->hist);
    options_free(&run->o);
    generate_result_free(&run->res);
    local_model_free(run->local);
    replicas_free(run);
    dist_free(run->dist);
    plan_free(&run->plan);
    inputs_free(&run->ci);
    model_free_head(&run->head);
    free(run->draft);
    local_model_free(run->dlocal);
    remote_draft_free(run->rdraft);
    model_free_head(&run->dhead);
    tokenizer_free(run->tok);
    if (run->file >= 0)
        H5Fclose(run->file);
}

int main(int argc, char **argv)
{
    /* --help and --version answer before MPI_Init: a singleton MPI_Init starts an orted and
     * threads only to print a page (and under LeakSanitizer its exit raced those threads). */
    {
        const int prc = options_info_request(argc, argv);
        if (prc == 1 || prc == 2) {
            if (transport_mpi_launch_rank() != 0)
                ; /* rank 0 speaks for all */
            else if (prc == 2)
                options_version(stdout, "headsplit");
            else
                options_usage(stdout);
            return 0;
        }
    }
    Run run;
    memset(&run, 0, sizeof run);
    run.file = -1;
    transport_mpi_init(&run.cm, &argc, &argv);
    int rc = run_parse(&run, argc, argv);
    if (rc == 0)
        rc = run_open(&run);
    if (rc == 0 && run.distributed)
        rc = startup_measure(&run.ci, &run.cm, &run.cfg, &run.o.su);
    else if (rc == 0)
        run.board_slowdown = startup_single_board(&run.cm, &run.o.su);
    if (rc == 0)
        rc = run_plan(&run);
    if (rc == 0)
        rc = run_load(&run);
    if (rc == 0) {
        rc = run_generate(&run);
        rc = report_write(&run, rc);
        rc = startup_share_status(&run.cm, rc); /* rank 0's verdict is every rank's */
    }
    run_free(&run);
    transport_finalize(&run.cm);
    return rc < 0 ? 0 : rc;
}
