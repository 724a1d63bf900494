/* report.c: the report phase of headsplit: the summary line, the per-layer times and the
 * --metrics JSON (one record with the configuration, the plan, timings, energy and, in
 * distributed runs, every rank's statistics and the measured RTTs). */
#include "headsplit.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

static json_t *model_json(const ModelConfig *c)
{
    /* the stored type of each matrix kind (headsplit-sim --calibrate prices the bytes) */
    json_t *types = json_object();
    for (int k = 0; k < WKIND_COUNT; k++)
        json_object_set_new(types, config_wkind_name((WeightKind)k),
                            json_string(quant_type_name((QType)c->wtype[k])));
    return json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:s,s:b,s:o}",
                     "architecture", config_arch_name(c->arch), "dim", c->dim,
                     "n_layers", c->n_layers, "n_heads", c->n_heads, "n_kv_heads", c->n_kv_heads,
                     "head_dim", c->head_dim, "ffn_dim", c->ffn_dim, "vocab_size", c->vocab_size,
                     "context_length", c->context_length, "norm_eps", (double)c->norm_eps,
                     "rope_theta", (double)c->rope_theta, "rope_style",
                     config_rope_name(c->rope_style), "tied_embeddings", c->tied_embeddings,
                     "weight_types", types);
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

/* Energy keys, where every rank measured its joules. */
static void energy_json(json_t *m, const Run *run)
{
    double ej = 0;
    int complete = 1;
    for (int r = 0; r < run->cm.size; r++) {
        complete &= run->all_j[r] >= 0;
        ej += run->all_j[r] > 0 ? run->all_j[r] : 0;
    }
    if (!complete || run->res.n_forward <= 0)
        return;
    double per_tok = energy_per_token(ej, run->res.n_forward);
    json_object_set_new(m, "energy_j", json_real(ej));
    json_object_set_new(m, "energy_per_token_j", json_real(per_tok));
    json_object_set_new(m, "edp_js", json_real(energy_delay_product(
                            per_tok, run->gen_s / run->res.n_forward)));
    json_object_set_new(m, "energy_source", json_string(energy_source_name(&run->meter)));
    char desc[256];
    energy_describe(&run->meter, desc, sizeof desc);
    json_object_set_new(m, "energy_source_detail", json_string(desc));
    json_t *pr = json_array();
    for (int r = 0; r < run->cm.size; r++)
        json_array_append_new(pr, json_real(run->all_j[r]));
    json_object_set_new(m, "energy_j_per_rank", pr);
}

/* Per-rank keys: the engine's statistics and RTTs, or the single process's own. */
static void ranks_json(json_t *m, const Run *run, json_t *dm)
{
    if (dm) {
        json_object_update(m, dm);
        json_t *rj = transport_rtt_json(&run->cm);
        json_object_update(m, rj);
        json_decref(rj);
        return;
    }
    json_object_set_new(m, "ranks", json_pack("[{s:i,s:s,s:I,s:I,s:f,s:f}]", "rank", 0, "role",
                        "single", "weight_bytes",
                        (json_int_t)local_model_weight_bytes(run->local), "peak_rss_bytes",
                        (json_int_t)util_peak_rss(), "cpu_s", time_cpu(), "wall_s",
                        time_now() - run->t_start));
    json_object_set_new(m, "hops_per_token", json_integer(0));
    json_object_set_new(m, "bytes_per_token", json_real(0));
}

/* Prompt and generation rates: the prompt's positions over the prompt's passes (the last of
 * which chooses the first new token), and the new tokens after the first over the time
 * after it. */
static double prompt_rate(const GenResult *r)
{
    return r->prompt_ms > 0 ? r->n_prompt_run * 1e3 / r->prompt_ms : 0;
}

static double gen_rate(const GenResult *r)
{
    return r->gen_ms > 0 && r->n_gen > 1 ? (r->n_gen - 1) * 1e3 / r->gen_ms : 0;
}

/* Passes and, with a draft, speculative decoding's figures. */
static void passes_json(json_t *m, const Run *run)
{
    const GenResult *r = &run->res;
    json_object_set_new(m, "passes", json_integer(r->passes));
    json_object_set_new(m, "gen_passes", json_integer(r->gen_passes));
    json_object_set_new(m, "tokens_per_pass",
                        json_real(r->gen_passes > 0 ? (double)r->n_gen / r->gen_passes : 0));
    if (!run->draft)
        return;
    json_object_set_new(m, "draft_tokens", json_integer(r->draft_tokens));
    json_object_set_new(m, "draft_accepted", json_integer(r->draft_accepted));
    json_object_set_new(m, "draft_acceptance",
                        json_real(r->draft_tokens > 0 ? (double)r->draft_accepted /
                                                            (double)r->draft_tokens
                                                      : 0));
    json_object_set_new(m, "draft_k", json_real(r->draft_rounds > 0 ? (double)r->draft_k_sum /
                                                                          r->draft_rounds
                                                                    : 0));
    json_object_set_new(m, "draft_rounds", json_integer(r->draft_rounds));
    json_object_set_new(m, "draft_forwards", json_integer(r->draft_forwards));
    json_object_set_new(m, "draft_s", json_real(r->draft_s));
    json_object_set_new(m, "verify_s", json_real(r->verify_s));
}

static json_t *metrics_json(const Run *run, json_t *dm, double ms, uint64_t sum)
{
    const GenResult *res = &run->res;
    json_t *m = json_object(), *toks = json_array(), *tms = json_array();
    for (int i = 0; i < res->n_tokens; i++)
        json_array_append_new(toks, json_integer(res->tokens[i]));
    for (int i = 0; i < res->n_forward; i++)
        json_array_append_new(tms, json_real(res->token_ms[i]));
    json_object_set_new(m, "tokens", toks);
    json_object_set_new(m, "text", json_string(res->text));
    json_object_set_new(m, "n_prompt_tokens", json_integer(res->n_prompt));
    json_object_set_new(m, "n_forward", json_integer(res->n_forward));
    json_object_set_new(m, "stopped_by", json_string(res->stopped_by));
    json_object_set_new(m, "ms_per_token", json_real(ms));
    json_object_set_new(m, "gen_text", json_string(res->gen_text ? res->gen_text : ""));
    json_object_set_new(m, "n_gen_tokens", json_integer(res->n_gen));
    json_object_set_new(m, "prompt_ms", json_real(res->prompt_ms));
    json_object_set_new(m, "gen_ms", json_real(res->gen_ms));
    json_object_set_new(m, "prompt_s", json_real(res->prompt_ms / 1e3));
    json_object_set_new(m, "gen_s", json_real(res->gen_ms / 1e3));
    json_object_set_new(m, "prompt_tokens_per_s", json_real(prompt_rate(res)));
    json_object_set_new(m, "gen_tokens_per_s", json_real(gen_rate(res)));
    /* decode alone: the prompt's positions (a batched pass's shares) left out */
    const int n_dec = res->n_forward - res->n_prompt_run;
    json_object_set_new(m, "n_prompt_run", json_integer(res->n_prompt_run));
    json_object_set_new(m, "decode_positions", json_integer(n_dec > 0 ? n_dec : 0));
    json_object_set_new(m, "decode_ms_per_token",
                        n_dec > 0 ? json_real(generate_decode_ms_per_token(res)) : json_null());
    passes_json(m, run);
    json_object_set_new(m, "threads", json_integer(kernels_get_threads()));
    json_object_set_new(m, "token_ms", tms);
    json_object_set_new(m, "generate_s", json_real(run->gen_s));
    json_object_set_new(m, "load_s", json_real(run->load_s));
    char hex[32];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
    json_object_set_new(m, "tokens_checksum", json_string(hex));
    json_object_set_new(m, "config", options_json(&run->o, run->cm.size));
    json_object_set_new(m, "model", model_json(&run->cfg));
    /* --cache-type: the KV caches' stored type and the bytes one position adds to them over
     * every layer and KV group (K and V; the sum of the ranks' kv_bytes_per_token) */
    json_object_set_new(m, "cache_type", json_string(quant_type_name((QType)run->cfg.kv_type)));
    json_object_set_new(m, "kv_bytes_per_position",
                        json_integer((json_int_t)run->cfg.n_layers * run->cfg.n_kv_heads *
                                     (json_int_t)config_kv_bytes(&run->cfg, 1)));
    json_object_set_new(m, "openblas_corename", json_string(kernels_blas_corename()));
    json_object_set_new(m, "plan", plan_to_json(run->dist ? dist_plan(run->dist) : &run->plan,
                                                &run->cfg));
    if (run->distributed) /* the copies of the layers and the workers of each */
        json_object_set_new(m, "replicas", replicas_json(run));
    if (run->dist) {
        json_t *mj = dist_memory_json(run->dist);
        json_object_update(m, mj);
        json_decref(mj);
    }
    json_object_set_new(m, "placement_ms", json_real(run->plan.build_ms));
    json_object_set_new(m, "predicted_ms_per_token", json_real(run->predicted_ms));
    if (run->distributed) {
        json_t *sp = json_array();
        for (int r = 0; r < run->cm.size; r++)
            json_array_append_new(sp, json_real(run->ci.cluster.dev[r].speed_Bps / 1e9));
        json_object_set_new(m, "rank_speed_GBps", sp);
    }
    if (run->o.chat) {
        const ChatTotals *c = &run->chat_sum;
        json_object_set_new(m, "chat", json_pack("{s:i,s:i,s:i,s:I,s:f,s:f,s:I,s:f,s:f}",
            "replies", c->turns, "turns_dropped", c->dropped, "resets", c->resets,
            "prompt_tokens", (json_int_t)c->prompt_tokens, "prompt_ms", c->prompt_ms,
            "prompt_tokens_per_s", c->prompt_ms > 0 ? c->prompt_tokens * 1e3 / c->prompt_ms : 0,
            "gen_tokens", (json_int_t)c->gen_tokens, "gen_ms", c->gen_ms,
            "gen_tokens_per_s", c->gen_ms > 0 ? c->gen_timed * 1e3 / c->gen_ms : 0.0));
    }
    energy_json(m, run);
    ranks_json(m, run, dm);
    return m;
}

/* --chat's closing figures: every reply of the session, as llama.cpp's are for one. */
static void chat_summary(const Run *run)
{
    const ChatTotals *c = &run->chat_sum;
    LOG_INFO("headsplit: chat: %d repl%s; prompt eval: %ld tokens in %.1f ms (%.2f tokens/s); "
             "eval: %ld tokens in %.1f ms (%.2f tokens/s); %d turn%s dropped to fit the "
             "context, %d reset%s; %s", c->turns, c->turns == 1 ? "y" : "ies", c->prompt_tokens,
             c->prompt_ms, c->prompt_ms > 0 ? c->prompt_tokens * 1e3 / c->prompt_ms : 0,
             c->gen_tokens, c->gen_ms, c->gen_ms > 0 ? c->gen_timed * 1e3 / c->gen_ms : 0,
             c->dropped, c->dropped == 1 ? "" : "s", c->resets, c->resets == 1 ? "" : "s",
             run->distributed ? "distributed" : "single process");
}

int report_write(Run *run, int rc)
{
    json_t *dm = run->distributed ? dist_collect_metrics(run->dist, run->res.n_forward) : NULL;
    if (dm && run->cm.rank == 0 && !run->o.quiet)
        dist_print_layer_times(dm, stderr);
    if (run->cm.rank == 0 && rc == 0 && run->o.chat)
        chat_summary(run);
    if (run->cm.rank == 0 && rc == 0) {
        double ms = generate_ms_per_token(&run->res);
        uint64_t sum = tokens_checksum(run->res.tokens, run->res.n_tokens);
        if (!run->o.chat) /* a chat's figures are the session's (chat_summary) */
            LOG_INFO("headsplit: %d positions, %.2f ms/token (median), checksum %016llx, %s",
                     run->res.n_forward, ms, (unsigned long long)sum,
                     run->distributed ? "distributed" : "single process");
        /* llama.cpp's closing figures: the prompt's positions (the last one chooses the
         * first new token) and the new tokens (the rate: those after the first, over the
         * time after it); the passes, and the draft's acceptance. */
        const GenResult *r = &run->res;
        if (r->n_forward > 0 && !run->o.chat) /* a chat's figures are the session's */
            LOG_INFO("headsplit: prompt eval: %d tokens in %.1f ms (%.2f tokens/s); eval: %d "
                     "tokens in %.1f ms (%.2f tokens/s); %d passes (%.2f new tokens per "
                     "pass); %d thread%s per rank", r->n_prompt_run, r->prompt_ms,
                     prompt_rate(r), r->n_gen, r->gen_ms, gen_rate(r), r->passes,
                     r->gen_passes > 0 ? (double)r->n_gen / r->gen_passes : 0,
                     kernels_get_threads(), kernels_get_threads() == 1 ? "" : "s");
        const double over = dm ? json_real_value(json_object_get(dm, "emulation_host_over")) : 0;
        if (over > 0.10)
            fprintf(stderr, "headsplit: warning: emulated boards: rank %d's work took %.0f%% "
                    "longer on this host than on the board it emulates (the host's cores or "
                    "memory bandwidth, shared by the ranks, are slower than the boards "
                    "together): these times are the host's, not the boards' "
                    "(emulation_host_over in the metrics; fewer ranks per host or a slower "
                    "board, HEADSPLIT_EMU_CPU, keep the emulation faithful)\n",
                    (int)json_integer_value(json_object_get(dm, "emulation_host_over_rank")),
                    100 * over);
        if (r->n_forward > 0 && run->draft)
            LOG_INFO("headsplit: draft: %ld of %ld drafted tokens accepted (%.1f%%), %.2f "
                     "drafted per round on average, %d draft forwards", r->draft_accepted,
                     r->draft_tokens,
                     r->draft_tokens ? 100.0 * r->draft_accepted / r->draft_tokens : 0.0,
                     r->draft_rounds ? (double)r->draft_k_sum / r->draft_rounds : 0.0,
                     r->draft_forwards);
        if (run->o.metrics) {
            json_t *m = metrics_json(run, dm, ms, sum);
            if (json_dump_file(m, run->o.metrics, JSON_INDENT(1) | JSON_ENSURE_ASCII) != 0) {
                fprintf(stderr, "headsplit: error: --metrics: cannot write %s\n",
                        run->o.metrics);
                rc = 1;
            }
            json_decref(m);
        }
    }
    json_decref(dm);
    return rc;
}
