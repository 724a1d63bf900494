/* sim_internal.h: the event core (des.c), the engine's per-token flow on top of it (flow.c)
 * and the Galaxy split (galaxy.c), shared by the simulator, the calibration and the solvers. */
#ifndef HEADSPLIT_SIM_INTERNAL_H
#define HEADSPLIT_SIM_INTERNAL_H

#include "sim.h"

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
    const SimCluster *cl;
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
    double *rx_free;      /* [n_workers+1] when each downlink is free again */
    uint64_t *jitter_rng; /* NULL: no jitter */
    FILE *trace;
    double now;
} SimDes;

void des_init(SimDes *d, const SimCluster *cl, uint64_t *jitter_rng, FILE *trace);
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

/* Per-layer speculation decisions of a token: SPEC_NONE, or the transition into the layer
 * speculates and is kept / rejected. */
enum { FLOW_SPEC_NONE = 0, FLOW_SPEC_KEEP = 1, FLOW_SPEC_REJECT = 2 };

typedef struct {
    SimDes *d;
    const ModelConfig *c;
    const SimCluster *cl;
    int pos;
    int *members, *others, *recv, *ready, *scratch; /* scratch, sized by flow_init */
    int cap;
} SimFlow;

void flow_init(SimFlow *f, SimDes *d, const ModelConfig *c, const SimCluster *cl, int max_parts);
void flow_free(SimFlow *f);
/* members[0] is the root; recv[i] receives the op after which member i holds the data. */
void flow_bcast(SimFlow *f, SimTag tag, int layer, const int *members, int n, int dep,
                double bytes, int *recv);
/* One layer of the engine's flow, input X produced by rank producer at op in_op (< 0: at
 * t0).  spec: FLOW_SPEC_*; spec_src/spec_op: the previous layer's projection rank and op.
 * Returns the FFN op; *proj_op gets the projection op. */
int flow_layer(SimFlow *f, const LayerPlan *lp, int l, int producer, int in_op, int spec,
               int spec_src, int spec_op, int *proj_op);
/* A whole token: embedding, layers, output to the controller, LM head.  spec: [n_layers]
 * FLOW_SPEC_* per layer (NULL: none).  Returns the final op. */
int flow_token(SimFlow *f, const Plan *p, const unsigned char *spec);

/* Galaxy-style tensor parallelism: query heads [h0, h0+heads) and FFN columns of each
 * device, the same for every layer. */
typedef struct {
    int n;
    int *head0, *heads, *cols; /* [n_workers+1], index 0 unused */
} GalaxySplit;

int galaxy_split(GalaxySplit *g, const ModelConfig *c, const SimCluster *cl, int kv_positions,
                 char *err, size_t errlen);
void galaxy_free(GalaxySplit *g);
size_t galaxy_rank_bytes(const GalaxySplit *g, const ModelConfig *c, int rank,
                         int kv_positions);
int flow_galaxy_token(SimFlow *f, const GalaxySplit *g);

#endif
