/* sim.h: discrete-event simulator of HeadSplit token generation over N devices.  It replays
 * the engine's flow for a Plan (the same struct plan_build makes): Ibcast of each layer input
 * from its producer to the head and projection ranks, Igatherv of head outputs to the
 * projection rank, Z to the FFN rank, the last output back to the controller, one token in
 * flight.  Decode is memory-bandwidth bound, so a device is a speed in bytes/s of weights (and
 * KV cache) streamed.  No MPI: the simulator links hs_plan, never hs_engine. */
#ifndef HEADSPLIT_SIM_H
#define HEADSPLIT_SIM_H

#include "cost.h"
#include "inputs.h"
#include "plan.h"
#include "wire.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* A simulated cluster is the planner's Cluster (cluster.h): devices (speed_Bps, op_overhead_s,
 * mem_budget, load_Bps) and links (one-way latency rtt_s/2, jitter_s, bw_Bps > 0, medium;
 * switched: each device has its own uplink and downlink; shared: one radio channel, every
 * transmission in the cell takes turns; ideal: no queueing, every message only delayed by
 * latency + bytes/bandwidth, as the engine's --emulate-link), its jitter's distribution and
 * the broadcast's shape (cluster.bcast). */

typedef enum {
    SIM_POLICY_LAYER_DP = 0, /* EdgeShard-style contiguous blocks chosen by DP */
    SIM_POLICY_GALAXY = 1,   /* SLICE layers over all devices: tensor-parallel attention and
                              * FFN, partial sums exchanged twice per layer */
    SIM_POLICY_GREEDY = 2,   /* head-level, plan_build greedy, KV reserved for all tokens */
    SIM_POLICY_DYNAMIC = 3,  /* head-level greedy, re-placed when a device passes 85% */
    SIM_POLICY_PLAN = 4,     /* a given Plan (engine placements, exact solver) */
    SIM_POLICY_COUNT
} SimPolicy;

typedef struct {
    SimPolicy policy;
    const Plan *plan;      /* SIM_POLICY_PLAN: replayed as is */
    int n_tokens;          /* positions 0..n_tokens-1 */
    uint64_t seed;         /* jitter and speculation draws */
    int speculate;         /* next layer's heads start on Z while the FFN runs */
    const double *accept;  /* [n_layers] P(speculation l -> l+1 kept), < 0: that transition
                            * does not speculate; NULL: accept_all everywhere */
    double accept_all;
    double replan_at;      /* dynamic: fraction of a budget that triggers re-placement */
    int kv_horizon;        /* dynamic: KV positions the first plan reserves */
    FILE *trace;           /* event trace or NULL */
} SimOptions;

/* Operation kinds counted and timed by the simulator. */
typedef enum {
    SIM_TAG_EMBED, SIM_TAG_HEAD, SIM_TAG_ATTN, SIM_TAG_SPEC_ATTN, SIM_TAG_REEXEC, SIM_TAG_PROJ,
    SIM_TAG_FFN, SIM_TAG_BCAST, SIM_TAG_SPEC_BCAST, SIM_TAG_GATHER, SIM_TAG_Z, SIM_TAG_OUT,
    SIM_TAG_EXCHANGE, SIM_TAG_KV_MOVE, SIM_TAG_RELOAD, SIM_TAG_JOIN, SIM_TAG_COUNT
} SimTag;

typedef struct {
    int n_tokens;         /* tokens simulated (fewer than asked when out of memory) */
    double *token_ms;     /* [n_tokens] latency of each token, migration included */
    double *migrate_ms;   /* [n_tokens] part of it spent re-placing before the token */
    double total_s;
    long ops[SIM_TAG_COUNT];      /* operations of each kind */
    double busy_s[SIM_TAG_COUNT]; /* device or link seconds of each kind */
    double bytes_sent, messages;
    long spec_tried, spec_rejected;
    int replans;
    double migrated_bytes;
    double peak_mem_frac; /* highest (weights + KV) / budget over devices and tokens */
    char status[160];     /* "ok" or why the run stopped */
    int devices_used;     /* workers with a role */
    Plan plan;            /* the plan in use at the end */
} SimResult;

/* Built-in model shapes: tinyllama-1.1b, gpt2-small, stories260k; layers > 0 overrides. */
int sim_model_preset(ModelConfig *c, const char *name, int layers, char *err, size_t errlen);
/* Reads the config of a HeadSplit HDF5 model file. */
int sim_model_read(ModelConfig *c, const char *path, char *err, size_t errlen);

/* n heterogeneous devices (classes from Raspberry Pi to laptop, drawn with seed; seed 0:
 * identical devices).  mem_slack > 0 scales budgets so that together they hold mem_slack
 * times the model's layers with KV for kv_positions; 0 keeps the class memory. */
int sim_cluster_generate(Cluster *cl, int n, uint64_t seed, const ModelConfig *c,
                         double mem_slack, int kv_positions, char *err, size_t errlen);
/* Link presets: wifi (~10 ms RTT, jitter 2 ms, 50-200 Mbit/s, shared channel), gbit (1-10
 * Gbit/s, 0.1-0.5 ms, switched), loopback; drawn per device with seed. */
int sim_cluster_set_links(Cluster *cl, const char *preset, uint64_t seed, char *err,
                          size_t errlen);
/* JSON devices description (see docs/simulator.md). */
int sim_cluster_read(Cluster *cl, const char *path, char *err, size_t errlen);
int sim_cluster_write(const Cluster *cl, const char *path, char *err, size_t errlen);
json_t *sim_cluster_to_json(const Cluster *cl);
/* n_workers + 1 ranks on loopback links (20 us one way, 5 GB/s, switched), half-normal
 * jitter, BCAST_AUTO; devices zeroed.  cluster_free frees it. */
void sim_cluster_init(Cluster *cl, int n_workers);

/* Per-operation costs in seconds (no jitter): compute on device rank, messages a -> b. */
double sim_cost_attn(const ModelConfig *c, const Cluster *cl, int rank, int n_q, int pos);
double sim_cost_proj(const ModelConfig *c, const Cluster *cl, int rank);
double sim_cost_ffn(const ModelConfig *c, const Cluster *cl, int rank);
double sim_cost_controller(const ModelConfig *c, const Cluster *cl, int embed);
/* A split LM head's share on a member: the final norm and `rows` rows (stored types). */
double sim_cost_head_rows(const ModelConfig *c, const Cluster *cl, int rank, int rows);
double sim_cost_msg(const Cluster *cl, int a, int b, double bytes);
/* Bytes of one pipeline message (the 32-byte WireHdr + dim floats). */
double sim_msg_bytes(const ModelConfig *c);

/* Runs the simulation; 0, or -1 with err (a policy that does not fit is an error). */
int sim_run(SimResult *res, const ModelConfig *c, const Cluster *cl, const SimOptions *o,
            char *err, size_t errlen);
void sim_result_free(SimResult *res);
int sim_result_write_csv(const SimResult *res, const char *path, char *err, size_t errlen);
json_t *sim_result_to_json(const SimResult *res, const SimOptions *o);
const char *sim_policy_name(SimPolicy p);
int sim_parse_policy(const char *s, SimPolicy *out);
const char *sim_tag_name(SimTag t);

/* The simulator behind the cost interface (cost.h), the "simulated" model: token_ms/token_s
 * sim_plan_token_time at pos, layer_s sim_layer_time at pos, hop_s sim_cost_msg of one
 * pipeline message, controller_s sim_cost_controller, ffn_s sim_cost_ffn.  The layer DP and
 * the exact solver (solver.h) price with it in headsplit-sim and for headsplit --placement
 * dp|exact. */
typedef struct {
    const Cluster *cl;
    int pos;          /* position whose KV reads the costs include */
} SimCostInputs;
CostModel sim_cost_model(const SimCostInputs *in);

/* Deterministic (jitter-free) time of one token at position pos under plan, by the same
 * event simulation; and of one layer whose input comes from rank producer. */
double sim_plan_token_time(const ModelConfig *c, const Cluster *cl, const Plan *plan,
                           int pos);
double sim_layer_time(const ModelConfig *c, const Cluster *cl, const LayerPlan *lp,
                      int producer, int pos);
/* The same token with the payloads in wire form `wire` and speculation into layer l where
 * spec[l] (NULL: none), kept where accept[l] (NULL: kept): its time, and the bytes and
 * messages its events put on the wire (*bytes, *messages; may be NULL). */
double sim_plan_token_counts(const ModelConfig *c, const Cluster *cl, const Plan *plan,
                             int pos, WireForm wire, const unsigned char *spec,
                             const unsigned char *accept, double *bytes, double *messages);

/* Calibration against the engine's --metrics JSON.  A measured run gives the model, the plan
 * it ran, its per-token latencies, the start-up RTT matrix and the --emulate-link spec; the
 * device speed and per-op overhead are fitted to the per-token latencies of some runs, and
 * the others are predicted with them (links from each run's own RTT measurement). */
typedef struct {
    char file[256], placement[32], partition[16];
    ModelConfig model;
    Plan plan;
    int n_tokens, skip;   /* tokens measured; warm-up tokens left out of the medians */
    double *token_ms;     /* [n_tokens] */
    double measured_ms;   /* median of token_ms[skip..] */
    double *rtt_ms;       /* [(n_workers+1)^2] start-up RTT medians, or NULL */
    int emulated;         /* the run had --emulate-link: emu is its link (every pair) */
    NetLink emu;          /* rtt, uniform jitter, bandwidth, medium, relay, frame */
    int speculated;
    double *accept;       /* [n_layers] kept/tried of transition l -> l+1, -1: not tried */
    double *layer_ms;     /* [n_layers][3] attention, projection, FFN ms/token (all tokens) */
} SimMeasuredRun;

typedef struct {
    double speed;        /* bytes/s */
    double op_overhead;  /* seconds per compute op (fixed, not fitted) */
    double rms_log_err;  /* over the fit runs' medians */
    int n_fit;
} SimCalibration;

int sim_calibrate_read(SimMeasuredRun *run, const char *metrics_path, char *err, size_t errlen);
void sim_calibrate_free(SimMeasuredRun *run);
/* The cluster that replays run with the calibrated devices. */
void sim_calibrate_cluster(const SimCalibration *cal, const SimMeasuredRun *run, Cluster *cl,
                           BcastShape bcast);
/* Simulates run: median ms/token over the same tokens, and the mean absolute relative error
 * of the per-token latencies. */
int sim_calibrate_predict(const SimCalibration *cal, const SimMeasuredRun *run, BcastShape bcast,
                          double *median_ms, double *token_err, char *err, size_t errlen);
/* Fits the device speed (golden-section search on its logarithm) to the fit runs' medians. */
int sim_calibrate_fit(SimCalibration *cal, const SimMeasuredRun *runs, int n, BcastShape bcast,
                      char *err, size_t errlen);

#endif
