/* headsplit.h: the pieces of the headsplit program (src/app/headsplit.c runs them): its
 * options and the state of one run, phase by phase.  No MPI here: the collectives are in
 * startup.h and dist.h. */
#ifndef HEADSPLIT_APP_H
#define HEADSPLIT_APP_H

#include "chat.h"
#include "dist.h"
#include "draft_remote.h"
#include "energy.h"
#include "generate.h"
#include "inputs.h"
#include "kernels.h"
#include "plan.h"
#include "progress.h"
#include "startup.h"
#include "tokenizer.h"

#include <jansson.h>
#include <stdio.h>

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
    MatvecImpl matvec;
    KernelsF32Order f32_order; /* --f32-order: llama.cpp's AVX-512 (default) or AVX2 build */
    int quiet;
    StartupOptions su;     /* what the measuring phase takes (links, budgets, test aids) */
    const char *speculate; /* auto | all | none */
    float tolerance, min_acceptance;
    int adaptive;
    const char *profile;
    int verbose;
    const char *resume;
    WireForm wire;          /* --wire f32|f16|q8 */
    int cache_type;         /* --cache-type: QTYPE_F32 (default), QTYPE_F16 or QTYPE_Q8_0 */
    SliceExchange exchange; /* --exchange (EXCHANGE_AUTO: the cost model's choice) */
    int head_on_controller; /* --lm-head controller */
    int static_plan;
    double replace_threshold;
    /* The front door (issue 18) */
    const char *prompt_file;  /* --prompt-file (- : standard input) */
    char *prompt_buf;         /* its contents (options_free) */
    int steps_set;
    int n_predict;            /* -n: new tokens (0: not given) */
    int ctx_size;             /* --ctx-size: KV positions (0: not given) */
    int top_k;
    float min_p, repeat_penalty;
    int repeat_last_n;
    const char *stops[16];    /* --stop, repeatable */
    int n_stops;
    int no_special;
    const char *chat_template;
    int chat;                 /* --chat: multi-turn at the terminal */
    const char *serve;        /* --serve ADDR:PORT */
    const char *api_key;
    const char *system_prompt;
    int threads;              /* --threads (0: kernels_default_threads) */
    long max_body;            /* --serve: request body limit in bytes */
    /* Several positions per pass (issue 17) */
    int batch;                /* --batch: prompt positions per pass (default 64) */
    int ubatch;               /* --ubatch: rows per pass (0: --batch; DIST_UBATCH_AUTO, the
                               * default: one pass per stage of a chain); a chain of stages
                               * keeps several in flight */
    const char *draft;        /* --draft FILE: the draft model of speculative decoding */
    int draft_tokens;         /* --draft-tokens: drafted per round (0: auto; default 4) */
    int draft_tokens_set;
    int draft_rank;           /* --draft-rank (-1: not given; 0: the controller) */
    /* --serve's operation (issue 29) */
    double shutdown_grace;    /* --shutdown-grace: seconds a running reply may take (5) */
    int queue_max;            /* --queue: requests that may wait for the slot (64) */
    const char *alias;        /* --alias: the model id (default: the file's base name) */
    const char *api_key_file; /* --api-key-file: the key on its first line */
    int temperature_set;      /* --temperature given (else --serve's requests sample at 0.8) */
    int parallel;             /* --parallel: --serve's slots (0: not given; 4 on one process) */
    int replicas;             /* --replicas: copies of the layers (0: not given, one; --partition
                               * auto may choose several when serving) */
} Options;

/* --parallel's largest count. */
#define SERVE_SLOTS_MAX 64

/* Parses argv; returns 0, 1 for --help, or -1 with err naming the option. */
int options_parse(Options *o, int argc, char **argv, char *err, size_t errlen);
void options_usage(FILE *out);
void options_free(Options *o);
/* 1 when argv asks for --help, 2 for --version (the first of them), else 0; reads nothing
 * else (no prompt file, no stdin), so main can answer before MPI_Init. */
int options_info_request(int argc, char **argv);
/* --version's text: git revision, build options, SIMD path. */
void options_version(FILE *out, const char *program);
/* The "config" object of the metrics. */
json_t *options_json(const Options *o, int n_ranks);

/* --chat's figures over the whole session (the closing summary, the metrics' "chat"). */
typedef struct {
    int turns, dropped, resets; /* replies; turns dropped to fit the context; /reset */
    long prompt_tokens, gen_tokens; /* prompt positions run; new tokens */
    long gen_timed;     /* new tokens after each reply's first (the rate's count) */
    double prompt_ms, gen_ms;
} ChatTotals;

/* One run, filled phase by phase; run_free releases whatever was made. */
typedef struct {
    Options o;
    Transport cm;
    int distributed;        /* more than one rank */
    double board_slowdown;  /* one process: the emulated board's compute dilation (1: none) */
    double t_start;         /* after option parsing */
    ModelConfig cfg;
    hid_t file;             /* the model file until the engine has loaded (-1: closed) */
    int kv_cap;             /* KV-cache positions */
    Tokenizer *tok;         /* controller */
    HeadW head;             /* controller: embeddings, final norm, LM head */
    ClusterInputs ci;       /* distributed: the measured cluster */
    PlanRequest req;        /* distributed: what the plan was built from */
    Plan plan;
    double predicted_ms;
    Progress *load_bar;     /* controller: the load's progress bar (run_open to run_load) */
    LocalModel *local;      /* single process */
    DistEngine *dist;       /* distributed */
    double load_s, gen_s;
    GenResult res;
    EnergyMeter meter;
    int have_energy;
    double *all_j;          /* [size] every rank's joules at rank 0 (-1: not measured) */
    ChatTemplate tmpl;      /* controller: --chat-template, else the stored one's family */
    int have_tmpl;
    const char *tmpl_stop;  /* its end-of-turn text */
    int *hist;              /* controller: the token ids the KV caches hold, by position */
    int n_hist, hist_cap;
    /* --draft: head on the controller, layers there or on --draft-rank's worker */
    ModelConfig dcfg;
    HeadW dhead;
    LocalModel *dlocal;
    RemoteDraft *rdraft;    /* --draft-rank R > 0 (every rank) */
    GenDraft *draft;        /* NULL: no draft */
    ChatTotals chat_sum;    /* --chat: the whole session, for the closing summary */
    int slots;              /* --serve: generations at once (--parallel; serve_slot_count) */
    /* --replicas (replicas.c): copies of the layers, each copy's plan and engine (NULL with
     * one copy; dist is then the controller's copy 0 and a worker's own copy), and whether
     * --partition auto chose them */
    int n_copies;
    Plan *cplans;
    DistEngine **copies;
    int auto_replicas;
} Run;

/* session.c: generations that continue what the KV caches hold (--chat, --serve). */
/* The chat template: --chat-template, else the family of /tokenizer's chat_template
 * attribute; only --chat fails (err) without one (--serve refuses chat requests). */
int session_choose_template(Run *run, char *err, size_t errlen);
/* GenOptions from the command line (no streams). */
void session_gen_options(const Run *run, GenOptions *g);
/* Generates from text, reusing the KV entries of the longest prefix already processed;
 * in distributed runs wakes the workers and stops them again after.  0 or -1 with err. */
int session_generate(Run *run, const char *text, GenOptions *g, GenResult *res, char *err,
                     size_t errlen);
/* What one sequence's KV caches hold: the token ids by position (the run's, or a --serve
 * slot's). */
typedef struct {
    int **hist;
    int *n_hist, *hist_cap;
} SessionKv;
/* session_generate on backend be, whose KV caches kv describes, the workers awake (the
 * caller's session_wake; --serve's slots: their batcher's). */
int session_generate_on(Run *run, LayerBackend *be, SessionKv *kv, const char *text,
                        GenOptions *g, GenResult *res, char *err, size_t errlen);
/* Positions of hist[n_hist] that text's tokens begin with (what a generation from text would
 * reuse of caches holding hist). */
int session_common_prefix(const Run *run, const int *hist, int n_hist, const char *text,
                          int special);
/* --chat at the terminal (controller).  Returns the exit status. */
int session_chat(Run *run);
/* Workers of --chat/--serve: run generations until the controller ends the session. */
int session_worker(Run *run);
/* Controller, distributed (nothing on one process): wakes the workers for passes (they
 * leave session_worker's wait for dist_worker_loop, whose waits have the stall timeout), and
 * lets them rest again (the stop message; they wait without a timeout). */
void session_wake(Run *run);
void session_rest(Run *run);
/* Controller: ends the session (workers leave session_worker). */
void session_end(Run *run);
/* serve.c: --serve ADDR:PORT (controller).  Returns the exit status. */
int serve_run(Run *run);
/* Workers of --serve: session_worker, deaf to SIGTERM (the controller drains and ends it). */
int serve_worker(Run *run);

/* replicas.c (--replicas): the copies' plans, after run->req is filled: 0 with one copy
 * (--partition auto, serving `slots` > 1, may have chosen it: the plan is built as before),
 * 1 with run->cplans built (run->plan a copy of copy 0's, for the report), -1 with err
 * naming --replicas.  The engines (collective; dist is set): 0, or 1 after an error every
 * rank agrees on.  The controller's stop of every copy; the metrics' "replicas" object (the
 * copies, each one's workers, slots and passes); the release of the copies. */
int replicas_plan(Run *run, int slots, char *err, size_t errlen);
int replicas_load(Run *run, int max_batch);
void replicas_stop(Run *run);
json_t *replicas_json(const Run *run);
void replicas_free(Run *run);

/* The report phase: prints the summary and the per-layer times and, where the generation
 * succeeded (rc 0), writes --metrics (rank 0).  Returns rc, or 1 when the metrics could not
 * be written.  Collective in distributed runs. */
int report_write(Run *run, int rc);

#endif
