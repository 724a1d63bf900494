/* sim_internal.h: the event core (des.c), the engine's per-token flow on top of it (flow.c)
 * and the Galaxy split (galaxy.c), shared by the simulator, the calibration and the solvers. */
#ifndef HEADSPLIT_SIM_INTERNAL_H
#define HEADSPLIT_SIM_INTERNAL_H

#include "sim.h"
#include "steps.h"

/* An operation of the token's task graph: compute on a device (seconds), a message between
 * two ranks (bytes), or a join that completes as soon as its predecessors have. */
typedef enum { DES_COMPUTE = 0, DES_MSG = 1, DES_JOIN = 2 } DesKind;

typedef struct {
    unsigned char kind, tag;
    int layer, src, dst;
    double amount;  /* compute: seconds; message: bytes */
    int deps;       /* predecessors not yet finished */
    int succ_head, succ_tail; /* successor edges, in insertion order */
    int qnext;      /* next op waiting for the same resource */
    double t_end;
} DesOp;

typedef struct {
    int to, next;
} DesEdge;

typedef struct {
    double t;
    uint64_t seq; /* ties broken by scheduling order: runs are reproducible */
    int type, op;
} DesEvent;

/* Resources: per rank a compute unit (2r) and an uplink (2r+1); the shared channel last. */
typedef struct {
    const Cluster *cl;
    DesOp *ops;
    int n_ops, cap_ops;
    DesEdge *edges;
    int n_edges, cap_edges;
    DesEvent *heap;
    int n_heap, cap_heap;
    uint64_t seq;
    int n_res;
    int *q_head, *q_tail; /* [n_res] FIFO of waiting ops */
    unsigned char *busy;  /* [n_res] */
    double *rx_free;      /* [n] when each downlink is free again */
    uint64_t *jitter_rng; /* NULL: no jitter */
    FILE *trace;
    double now;
} SimDes;

void des_init(SimDes *d, const Cluster *cl, uint64_t *jitter_rng, FILE *trace);
void des_free(SimDes *d);
/* Forgets the graph (capacity kept); resources idle. */
void des_reset(SimDes *d);
int des_compute(SimDes *d, SimTag tag, int layer, int rank, double seconds);
int des_msg(SimDes *d, SimTag tag, int layer, int src, int dst, double bytes);
int des_join(SimDes *d, int layer);
/* after waits for before (before < 0: no edge). */
void des_dep(SimDes *d, int before, int after);
/* Runs the graph from t0; returns the time the last op ends; adds counts to acc (or NULL). */
double des_run(SimDes *d, double t0, SimResult *acc);
/* Half-normal jitter draw (sigma s) from state. */
double des_jitter(uint64_t *state, double s);

/* Per-layer speculation decisions of a token: none, or the transition into the layer
 * speculates and is kept / rejected. */
enum { FLOW_SPEC_NONE = 0, FLOW_SPEC_KEEP = 1, FLOW_SPEC_REJECT = 2 };

typedef struct {
    SimDes *d;
    const ModelConfig *c;
    const Cluster *cl;
    int pos;
    WireForm wire;   /* the form of layer inputs, speculative Z and SLICE sums (--wire) */
    int cap;
    int *recv;       /* [cap] scratch of a broadcast */
    int *at;         /* [cap_at] op after which rank r has step k's result, at[k * n + r]
                      * (-1: none, or from t0) */
    int cap_at;
} SimFlow;

void flow_init(SimFlow *f, SimDes *d, const ModelConfig *c, const Cluster *cl, int max_parts);
void flow_free(SimFlow *f);
/* members[0] is the root; recv[i] receives the op after which member i holds the data. */
void flow_bcast(SimFlow *f, SimTag tag, int layer, const int *members, int n, int dep,
                double bytes, int *recv);
/* 1 if transition l -> l+1 may speculate under the engine's rule: both layers PIPE, the
 * projection and FFN of l on one rank, and layer l+1's input is broadcast. */
int flow_spec_eligible(const Plan *p, int l);
/* The events of a step program (steps.h), one or more per step: a compute op per COMPUTE,
 * the messages of a message step (a broadcast shaped as the cluster says), with the steps'
 * dependencies; accept[l]: speculation into layer l kept (NULL: kept).  Returns the op of the
 * program's last step. */
int flow_steps(SimFlow *f, const StepProgram *prog, const unsigned char *accept);
/* One PIPE layer whose input is held by producer from t0, no speculation; returns the FFN
 * op (the solvers' layer cost). */
int flow_layer(SimFlow *f, const LayerPlan *lp, int l, int producer);
/* A whole token of plan p: its step program (speculation per spec[l], FLOW_SPEC_* for the
 * transition into each layer; NULL: none).  Returns the final op. */
int flow_token(SimFlow *f, const Plan *p, const unsigned char *spec);

/* The most attention parts of any layer of p (at least 1): the flow's scratch size. */
int sim_plan_max_parts(const Plan *p);

/* The Galaxy-style plan: SLICE layers over every device, attention parts and FFN columns in
 * proportion to speed within the memory budgets (with KV for kv_positions). */
int galaxy_build_plan(Plan *p, const ModelConfig *c, const Cluster *cl, int kv_positions,
                      char *err, size_t errlen);

#endif
