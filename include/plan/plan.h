/* plan.h: a placement is plain data: for every layer, which rank holds each attention part
 * (a KV group with some or all of its query heads), the output projection and the FFN.
 * Built by pure functions (no MPI); the same plan drives weight slices, communicators, the
 * printed table and the metrics. Ranks 1..n_workers are workers; rank 0 is the controller. */
#ifndef HEADSPLIT_PLAN_H
#define HEADSPLIT_PLAN_H

#include "cluster.h"
#include "config.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { PARTITION_LAYER = 0, PARTITION_HEAD = 1, PARTITION_SLICE = 2 } Partition;

/* How one layer runs.  PIPE: attention parts gathered to one projection rank, the whole FFN
 * on one rank (the reference design; layer-wise is PIPE with everything on one rank).
 * SLICE: every member holds attention parts with the matching columns of the output
 * projection (row-parallel) and a slice of the FFN; partial sums are exchanged directly
 * between members twice per layer, so the FFN's weights are spread too. */
typedef enum { LAYER_PIPE = 0, LAYER_SLICE = 1 } LayerMode;
typedef enum {
    PLACEMENT_GREEDY = 0,
    PLACEMENT_ROUNDROBIN = 1,
    PLACEMENT_RANDOM = 2,
    PLACEMENT_LAYER = 3,
    PLACEMENT_WATERFILL = 4, /* SLICE layers, parts and FFN columns by speed within budgets */
    PLACEMENT_SPREAD = 5,    /* the reference design: FFN and projection by the greedy's rule,
                              * the heads spread over the workers whatever the links */
    PLACEMENT_DP = 6,        /* whole layers by the layer DP over req->cluster, priced by
                              * req->model (solver_layer_dp) */
    PLACEMENT_EXACT = 7,     /* heads by the exact head-level search over req->cluster, priced
                              * by req->model (solver_exact) */
} PlacementKind;
#define PLACEMENT_COUNT 8

typedef struct {
    int rank; /* worker that computes it */
    int unit; /* KV group 0..n_kv_heads-1 */
    int q0, q1; /* query heads [q0, q1) within the group (0..Q) */
} AttnPart;

/* A slice [f0, f1) of the FFN's inner width (SLICE layers). */
typedef struct {
    int rank;
    int f0, f1;
} FfnSlice;

/* How the members of a SLICE layer combine their partial sums.  Every pattern adds the
 * partials to the layer input in member order, element by element, so all give the same
 * bits.  AUTO (requests only): EXACT on rounded activations, else the one plan_predict_ms
 * finds fastest. */
typedef enum {
    EXCHANGE_AUTO = 0,
    EXCHANGE_ALL = 1,    /* each member to every other: 1 hop, n(n-1) messages of the sum */
    EXCHANGE_REDUCE = 2, /* to the first member, which adds and sends the sum back: 2 hops,
                          * 2(n-1) messages */
    EXCHANGE_RSAG = 3,   /* reduce-scatter then all-gather, member to member: member i adds
                          * the i-th of n chunks and sends it to every other: 2 hops,
                          * 2n(n-1) messages of 1/n (a ring's bytes and transmissions in 2
                          * hops instead of 2(n-1)) */
    EXCHANGE_EXACT = 4,  /* no partial sums: the members all-gather the head outputs, hold
                          * wo and w_down by ROWS (plan_exact_rows) and all-gather Z, the
                          * FFN's hidden slices and X' (4 rounds of 1/n each), so every
                          * value is one process's: bit-identical to -np 1.  AUTO picks
                          * it where the model rounds its activations (quantized or half
                          * weights) and the wire carries whole floats. */
} SliceExchange;

typedef struct {
    LayerMode mode;
    int n_parts;
    AttnPart *parts; /* [n_parts], sorted by (unit, q0); covers every query head once */
    int proj_rank;   /* PIPE: the projection; SLICE: the member that forwards X' */
    int ffn_rank;    /* PIPE: the FFN; SLICE: same as proj_rank */
    int n_slices;
    FfnSlice *slices; /* SLICE: [n_slices] in rank order, covering 0..ffn_dim once */
} LayerPlan;

typedef struct {
    int n_layers;
    int n_workers;
    Partition partition;
    PlacementKind placement;
    SliceExchange exchange; /* SLICE layers: ALL, REDUCE, RSAG or EXACT (AUTO in a plan:
                             * ALL) */
    LayerPlan *layers; /* [n_layers] */
    double build_ms;   /* time the placement function took */
    /* The LM head split by vocabulary rows over the last layer's members (it is SLICE: every
     * member holds X'), each computing the final norm and its rows' logits; else the
     * controller computes them (plan_head_rows). */
    int head_split;
} Plan;

struct CostModel;   /* cost.h */
struct SolverStats; /* solver.h */

typedef struct {
    Partition partition;
    PlacementKind placement;
    uint64_t seed;       /* for PLACEMENT_RANDOM */
    int n_workers;       /* with a cluster: cluster->n - 1 */
    /* The devices and the network (cluster.h), the planner's one view of them: each worker's
     * memory budget (0: unlimited) and speed (relative to the fastest worker's speed_Bps; 0:
     * unknown, as fast as the fastest), the one-way latency of each link (half its RTT), the
     * slowest link's bandwidth (0: unlimited) and link 0 -> 1's medium (shared: its relay and
     * frame overhead; else switched).  Links NULL: unknown (the placements are not
     * link-aware, messages cost nothing); cluster NULL: n_workers identical workers without
     * budgets, the links unknown.  Must outlive whatever keeps the request (the engine's
     * re-placement does). */
    const Cluster *cluster;
    int kv_positions;      /* KV-cache positions to account for */
    /* The bytes per second a worker of relative speed 1.0 (the fastest, or one of unknown
     * speed) streams through its matrix-vector kernel (0: the fastest worker's speed_Bps,
     * else 10 GB/s). */
    double ref_Bps;
    /* Bytes per element of a SLICE partial sum on the wire (--wire: 4 f32, 2 f16, 34/32 q8;
     * 0: 4). */
    double wire_bytes;
    /* SLICE: the exchange pattern (--exchange; AUTO: the fastest predicted). */
    SliceExchange exchange;
    /* Greedy: the share of each budget it may fill with layers (0: all of it); the engine
     * leaves room below its re-placement threshold for the KV cache to grow. */
    double fill;
    /* Predictions only: the standard deviation of a one-way latency in ms (a wait for several
     * messages lasts until the slowest: the expected maximum of their delays), and the ms of
     * work per token outside the layers (the controller's final norm and LM head). */
    double lat_sd_ms;
    double fixed_ms;
    /* Keep the LM head on the controller even where the last layer is sliced (--lm-head
     * controller); by default its members split it. */
    int head_on_controller;
    /* Predictions only: ms of fixed overhead per kernel call on a worker (0: none), and the
     * speculation the run uses: [n_layers] 1 where the transition into layer l speculates
     * (NULL: none), kept with probability spec_accept. */
    double op_ms;
    const unsigned char *speculate;
    double spec_accept;
    /* PLACEMENT_DP and PLACEMENT_EXACT (solver.h): the cost model they minimise over the
     * cluster (required for them; its budgets as they are, KV for kv_positions), the exact
     * search's node limit (0: solver.h's default) and where their statistics go (may be
     * NULL). */
    const struct CostModel *model;
    long max_nodes;
    struct SolverStats *stats;
} PlanRequest;

/* Builds a plan; returns 0 or -1 with err (e.g. a part that fits no device's budget). */
int plan_build(Plan *plan, const ModelConfig *c, const PlanRequest *req, char *err,
               size_t errlen);
/* A plan with every role on one rank (single process: rank 0). */
void plan_build_local(Plan *plan, const ModelConfig *c, int rank);
void plan_free(Plan *plan);

/* Bytes of weights (and KV cache for kv_positions) that rank holds under the plan. */
size_t plan_rank_weight_bytes(const Plan *plan, const ModelConfig *c, int rank);
size_t plan_rank_kv_bytes(const Plan *plan, const ModelConfig *c, int rank, int kv_positions);
/* 1 if rank has any role in the layer. */
int plan_rank_in_layer(const Plan *plan, int layer, int rank);
/* SLICE layers: the members in ascending rank order; returns the count (out may be NULL). */
int plan_slice_members(const Plan *plan, int layer, int *out);

/* head_split plans: 1 and the vocabulary rows [*v0, *v1) of the LM head that rank holds
 * (the last layer's members in rank order split the rows evenly), else 0. */
int plan_head_rows(const Plan *plan, const ModelConfig *c, int rank, int *v0, int *v1);

/* EXCHANGE_EXACT plans: 1 and the rows [*d0, *d1) of wo and w_down (the model width) that
 * rank computes in SLICE layer `layer` (its FFN slice's share of the width: d = f * dim /
 * ffn_dim at both ends, so the members' ranges tile 0..dim in member order), else 0. */
int plan_exact_rows(const Plan *plan, const ModelConfig *c, int layer, int rank, int *d0,
                    int *d1);

/* Checks that the plan is well formed for the config (every head once, ranks in range). */
int plan_validate(const Plan *plan, const ModelConfig *c, char *err, size_t errlen);

/* Predicted milliseconds per token of a plan under req's speeds and links: the critical path
 * of one token's step program (steps.h: weights by their stored types and KV reads streamed
 * at each device's speed, req->op_ms per kernel call, one-way latency plus size over
 * bandwidth per message in req's wire form, plus the expected maximum of the latency spread
 * where a rank waits for several senders), the controller's LM head req->fixed_ms;
 * speculation (req->speculate) as the mixture of kept and rejected. */
double plan_predict_ms(const Plan *plan, const ModelConfig *c, const PlanRequest *req);
/* (fixed_ms is the controller's LM head; a head_split plan replaces it with the members'
 * rows and the logits' way to the controller.) */
/* Builds the candidate plans (layer-wise, head-level greedy, slice) and keeps the one with
 * the lowest predicted time; *pred_ms (may be NULL) receives it, preds[] (may be NULL,
 * 3 entries) every candidate's prediction.  With a cluster cl (may be NULL: req's naive
 * stages only) the layer-wise candidate is the best layer-wise plan over subsets of its
 * devices (KV for kv_positions in its budgets) when that is predicted faster (*layer_dp,
 * may be NULL, says so); see cost_build_best. */
int plan_build_auto(Plan *plan, const ModelConfig *c, const PlanRequest *req,
                    const Cluster *cl, int kv_positions, double *pred_ms, double *preds,
                    int *layer_dp, char *err, size_t errlen);

/* Replicas (--replicas K, src/plan/replicas.c): K copies of the decoder layers, copy k on
 * its own group of consecutive workers (the first n_workers % K copies one worker more):
 * plan_copy_workers returns the group's size and its first rank.  plan_replicas_check: 0, or
 * -1 with err naming --replicas (K < 1, more copies than workers; a copy is layer-wise:
 * --partition layer, --placement layer, greedy, roundrobin or random).  plan_build_replicas
 * fills plans[K]: copy k placed by req within its group (its devices, links and budgets,
 * req->kv_positions in each), as a plan over every rank in which only the group has roles;
 * -1 with err naming the copy that does not fit. */
int plan_copy_workers(int n_workers, int copies, int k, int *first);
int plan_replicas_check(const PlanRequest *req, int copies, char *err, size_t errlen);
int plan_build_replicas(Plan *plans, const ModelConfig *c, const PlanRequest *req, int copies,
                        char *err, size_t errlen);
/* Predicted aggregate tokens/s of copies plans[K] serving `slots` sequences (slot s on copy
 * s % K): per copy, one group of its sequences in flight per stage (at most its sequences),
 * each group a token per plan_predict_ms of the copy. */
double plan_replicas_tokens_per_s(const Plan *plans, int copies, const ModelConfig *c,
                                  const PlanRequest *req, int slots);
/* --partition auto when serving several slots: every count of copies 1..min(workers, slots),
 * each copy a layer-wise chain over its group with KV for kv_positions per slot it holds;
 * *copies the most copies predicted within 10% of the highest aggregate tokens/s, why
 * one line naming every candidate (copies x workers per copy) and its figures.  -1 when no
 * candidate fits. */
int plan_choose_replicas(const ModelConfig *c, const PlanRequest *req, int slots,
                         int kv_positions, int *copies, char *why, size_t whylen);

/* Bytes a worker accounts for besides weights and KV cache: its message buffers and scratch. */
size_t plan_rank_buffer_bytes(const ModelConfig *c);
/* Everything rank holds under the plan with kv_positions positions in its caches. */
size_t plan_rank_accounted_bytes(const Plan *plan, const ModelConfig *c, int rank,
                                 int kv_positions);
/* The first position count at which rank's accounted bytes exceed frac * budget (budget 0 or
 * never within max_positions: -1). */
int plan_rank_crossing(const Plan *plan, const ModelConfig *c, int rank, size_t budget,
                       double frac, int max_positions);

/* Re-placement: copies cur into out, moving attention parts (with their KV caches) off every
 * rank whose accounted bytes at `positions` exceed threshold * its budget, onto the ranks with
 * the most room for `horizon` positions.  Returns the number of parts moved (0: none needed),
 * or -1 with err when no rank can take them. */
int plan_replace(Plan *out, const Plan *cur, const ModelConfig *c, const PlanRequest *req,
                 int positions, int horizon, double threshold, char *err, size_t errlen);
void plan_copy(Plan *out, const Plan *in);

/* The expected maximum of n independent standard normal variables (0 for n <= 1). */
double plan_expected_max_normal(int n);
/* The cost model's pieces: ms for rank to stream bytes of weights; ms for a message a -> b. */
double plan_cost_work_ms(const PlanRequest *req, int rank, double bytes);
double plan_cost_hop_ms(const PlanRequest *req, int a, int b, double bytes);
/* req's network as one link of netmodel.h (bandwidth, medium, relay, frame overhead): a
 * message's airtime is net_airtime_s(&l, bytes), a burst's net_burst_s. */
NetLink plan_cost_net(const PlanRequest *req);

/* Human-readable table (--show-placement). */
void plan_print(const Plan *plan, const ModelConfig *c, FILE *out);
/* JSON form for the metrics. */
json_t *plan_to_json(const Plan *plan, const ModelConfig *c);

const char *plan_partition_name(Partition p);
const char *plan_placement_name(PlacementKind k);
int plan_parse_partition(const char *s, Partition *out);
int plan_parse_placement(const char *s, PlacementKind *out);
/* "auto", "all", "reduce", "rsag", "exact"; parse returns 0, or -1 for another name. */
const char *plan_exchange_name(SliceExchange x);
int plan_parse_exchange(const char *s, SliceExchange *out);

#endif
