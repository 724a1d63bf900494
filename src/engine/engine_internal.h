/* engine_internal.h: the distributed engine's state and the functions its files share
 * (setup.c, loop.c, message.c, pipe.c, slice.c, slice_exact.c, speculation.c, head.c,
 * metrics.c, replan.c, service.c, wireform.c).  Not a public interface. */
#ifndef HEADSPLIT_ENGINE_INTERNAL_H
#define HEADSPLIT_ENGINE_INTERNAL_H

#include "dist.h"
#include "schedule.h"
#include "wire.h"

/* Passes a controller keeps in flight beyond the one it waits for, at most. */
#define ENGINE_MAX_DEPTH 15

enum { T_ATTN, T_GATHER, T_PROJ, T_FFN, T_BCAST, T_ZSEND, T_COUNT };
enum { W_IN, W_GATHER, W_Z, W_X1, W_X2, W_COUNT }; /* wait sites per layer (deadlines) */

typedef struct {
    LayerMode mode;
    TransportGroup *in_comm; /* layer input: root (member 0) = producer; NULL if none */
    int in_size;
    int in_root;      /* 1 if this rank broadcasts the input */
    int in_peer;      /* world rank of the root */
    int consumer;     /* this rank needs the layer input */
    /* PIPE: head outputs -> projection rank (member 0); members and layout in the
     * schedule's entry of the layer */
    TransportGroup *g_comm;
    int n_parts;
    AttnPartW *parts;  /* this rank's parts of the layer */
    QMat *wo_cols;     /* SLICE: [n_parts] their columns of wo, [dim][nq*hd] */
    int my_floats;     /* floats of head outputs this rank contributes */
    int is_proj, is_ffn;
    int proj_rank, ffn_rank;
    ProjW proj;        /* PIPE: whole; SLICE exact: wo rows [d0, d1) (and the whole bo) */
    FfnW ffn;          /* PIPE: whole FFN; SLICE: this rank's slice (exact: by rows) */
    int d0, d1;        /* SLICE exact: the rows of wo and w_down this member computes */
    double ewma[W_COUNT];
} LayerRt;

/* Memory budgets and re-placement (replan.c). */
typedef struct {
    PlanRequest req;      /* the request the plan was built from (its cluster: the
                           * caller's, alive as long as the engine) */
    int steps;            /* positions the run will reach */
    double threshold;     /* re-place above this fraction of a budget (0.85) */
    int static_plan;      /* --static: never re-place; exceeding a budget ends the run */
    size_t *peak;         /* [size] controller: peak accounted bytes per rank */
    json_t *records;      /* controller: the re-placements */
    int exhausted;        /* controller: a re-placement found nothing to move */
} MemState;

/* The byte buffers of the messages a rank sends and receives, each [hdr | payload], and the
 * float scratch of a layer.  msg_bytes: capacity of xmsg, zmsg, zspec, xsend ([hdr | bmax
 * rows of dim]); wire_bytes: [hdr | dim halves], room for either 16-bit/Q8_0 form. */
typedef struct {
    unsigned char *xmsg; /* [hdr | dim floats] the current layer input / output */
    unsigned char *xout; /* controller: [hdr | bmax rows] a pass's result (the last layer's
                          * output) while later passes are in flight */
    unsigned char *zmsg; /* [hdr | dim floats] Z */
    unsigned char *zspec; /* [hdr | dim] Z received speculatively */
    unsigned char *gbuf; /* [hdr | n_heads*hd floats] this rank's head outputs */
    unsigned char *staging; /* gathered contributions, in member order */
    unsigned char *xsend; /* SLICE: [hdr | dim] this rank's partial sum */
    unsigned char *xrecv; /* SLICE: [n_workers][hdr | dim] the members' partial sums */
    unsigned char *wsend, *wrecv; /* the 16-bit forms of xsend and xrecv */
    unsigned char *wbcast, *wzspec; /* the wire forms of a broadcast and of a speculative Z */
    size_t msg_bytes, wire_bytes;
    float *heads;        /* [bmax][n_heads*hd] in head order */
    float *acc;          /* [dim] */
    int *g_counts_n, *g_displs_n; /* a gather's byte layout for the current pass's rows */
} EngineBuffers;

/* --exchange exact (slice_exact.c; NULL otherwise): a member's message and the others'
 * ([n_workers + 1] of stride bytes: hdr | bmax rows of the widest round), their requests,
 * and the FFN's whole hidden activations [bmax][ffn]. */
typedef struct {
    unsigned char *send, *recv;
    size_t stride;
    TransportReq *reqs;
    float *hidden;
} EngineExact;

/* Inter-layer speculation, per transition l -> l+1 (see dist_set_speculation). */
typedef struct {
    unsigned char *eligible; /* [L] PIPE -> PIPE, projection and FFN together, heads elsewhere */
    unsigned char *on;       /* [L] speculating now */
    unsigned char *pending;  /* [L] decider: state from the next token on (adaptive) */
    float tolerance, min_acceptance;
    int adaptive;
    double *acc_ewma;        /* [L] decider: observed acceptance */
    long *tried, *kept;      /* [L] decider */
    double *attn_s;          /* [L] attention time spent on Z (heads of layer l) */
    double *ffn_s;           /* [L] decider: FFN time of speculated transitions */
} EngineSpec;

/* Split LM head (plan->head_split): the controller (member 0) and the last layer's
 * members, which send it their rows of logits. */
typedef struct {
    TransportGroup *comm;    /* the schedule's head group */
    HeadW rows;              /* member: final norm and rows [v0, v1) */
    int v0, v1;
    unsigned char *send;     /* member: [hdr | rows floats] */
    unsigned char *recv;     /* controller: the members' messages, in comm order */
    int *counts_n, *displs_n; /* controller: the gather's layout for the pass's rows */
    float *logits;           /* controller: [bmax][vocab] assembled logits */
} EngineHead;

/* The service between passes (service.c): its rank (0: none), handler and buffers
 * [hdr | payload]. */
typedef struct {
    int rank;
    DistServiceFn fn;
    void *ctx;
    size_t req_cap, resp_cap;
    unsigned char *req, *resp;
} EngineService;

/* What the metrics report (metrics.c). */
typedef struct {
    double *timers;      /* [L][T_COUNT] seconds */
    long wire_passes;    /* controller: passes sent (a forward_n call may take several) */
    size_t weight_bytes;
} EngineStats;

struct DistEngine {
    Transport *tp;
    const ModelConfig *c;
    const Plan *plan;    /* == &plan_own: the engine keeps its own copy */
    Plan plan_own;
    Schedule sched;      /* plan_schedule(plan): groups, layouts, speculation eligibility */
    char *fname;         /* model file, re-opened to load migrated parts */
    int kv_cap;
    MemState mem;
    int L;
    LayerRt *lr;         /* [L+1]: lr[L].in_comm carries the last output to the controller */
    Scratch scratch;
    EngineBuffers buf;
    int wire16;           /* messages travel as binary16 (1: --wire f16) or Q8_0 blocks
                           * (2: --wire q8); 0: fp32 */
    int bmax;            /* positions (rows) a pass may carry (dist_set_max_batch) */
    int nb;              /* rows the broadcasts of the next pass are sized for (agreed by
                          * every rank from the last pass's next_n; 1 at start) */
    int last_n;          /* controller: rows of the last forward_n (the logits it holds) */
    int ubatch;          /* controller: rows per pass at most (dist_set_ubatch; 0: no limit) */
    int want;            /* controller: rows the next forward_n's caller reads (-1: all) */
    int chain;           /* engine_chain_depth of the plan in force (engine_refresh_roles) */
    int active;          /* has any role */
    EngineExact ex;
    EngineSpec sp;
    EngineHead hd;
    EngineService svc;
    EngineStats stats;
};


/* The payload of a message: the floats after its WireHdr. */
static inline float *payload(unsigned char *msg)
{
    return (float *)(void *)(msg + sizeof(WireHdr));
}

/* Bytes of a broadcast in the current pass: the header and nb rows of the model width. */
static inline size_t bcast_bytes(const DistEngine *e)
{
    return sizeof(WireHdr) + (size_t)e->nb * (size_t)e->c->dim * sizeof(float);
}

/* Bytes of a point-to-point message of n rows of the model width. */
static inline size_t rows_bytes(const DistEngine *e, int n)
{
    return sizeof(WireHdr) + (size_t)n * (size_t)e->c->dim * sizeof(float);
}

/* Bytes attention part w streams for n rows at pos: its weights once, and each row's reads
 * of the K and V cached so far (the board model of the dilation charges them). */
static inline double attn_stream_bytes(const ModelConfig *c, const AttnPartW *w, int pos, int n)
{
    const double kv_row = (double)config_kv_bytes(c, 1); /* K and V, in the stored type */
    return (double)model_attn_part_bytes(c, w) +
           kv_row * ((double)n * (double)pos + (double)n * (double)(n + 1) / 2);
}

/* message.c: a received header, checked (magic, command), and the broadcast of a pipeline
 * message on layer l's input group (root sends; others receive and wait out the link),
 * sized for the pass's e->nb rows or for nb. */
WireHdr engine_read_hdr(const unsigned char *msg, int layer);
void engine_bcast_input(DistEngine *e, int l, unsigned char *msg);
void engine_bcast_input_nb(DistEngine *e, int l, unsigned char *msg, int nb);
/* wireform.c: n floats on the wire (--wire f32|f16|q8: as they are, halves, Q8_0 blocks):
 * their bytes; packed into out (returns the bytes); unpacked into x (nothing to do for f32
 * in place); rounded in place as the wire rounds them (through scratch; nothing for f32). */
size_t engine_wire_len(const DistEngine *e, int64_t n);
size_t engine_wire_put(const DistEngine *e, const float *x, unsigned char *out, int64_t n);
void engine_wire_get(const DistEngine *e, const unsigned char *in, float *x, int64_t n);
void engine_wire_round(const DistEngine *e, float *x, unsigned char *scratch, int64_t n);
/* message.c: the wire form (--wire f16 or q8) of a message of layer l's input, sized for nb rows, into
 * out (room for e->buf.wire_bytes); returns the bytes of the broadcast. */
size_t engine_wire_pack(const DistEngine *e, int l, const unsigned char *msg,
                        unsigned char *out, int nb);
/* setup.c: passes a chain of stages can hold beyond the oldest: stages - 1 when the plan is
 * a chain (every layer's roles on one rank, each rank one run of layers, no split head),
 * else 0; loop.c: the passes the controller keeps in flight (that, unless --ubatch is 0). */
int engine_chain_depth(const DistEngine *e);
int engine_pipeline_depth(const DistEngine *e);
/* pipe.c, slice.c: one layer on this rank; return the pipeline command seen. */
int engine_pipe_layer(DistEngine *e, int l);
int engine_slice_layer(DistEngine *e, int l);
/* slice_exact.c (--exchange exact): the compute and all-gathers of SLICE layer l on this
 * member for the pass h (x: [n][dim], the input, becomes X'); this member's rows of wo and
 * the FFN (-1 with err); the all-gather buffers for e->bmax rows, and their release. */
void engine_exact_compute(DistEngine *e, int l, const WireHdr *h, float *x);
int engine_exact_load(DistEngine *e, int l, hid_t file, const char *fname, char *err,
                      size_t errlen);
void engine_exact_alloc(DistEngine *e);
void engine_exact_free(DistEngine *e);
/* speculation.c: the decision at layer l's FFN rank (ratio ||FFN(Z)||/||Z||); returns the
 * header flags for X'. */
int engine_spec_decide(DistEngine *e, int l, float ratio, int s_out);
/* head.c: the split LM head's group (collective), a member's rows (-1 with err when they
 * cannot be loaded), its send of logits (the n rows of the pass), and the controller's
 * assembly of a pass's n rows into rows row0.. of e->hd.logits. */
int engine_setup_head(DistEngine *e, hid_t file, const char *fname, char *err, size_t errlen);
void engine_head_send(DistEngine *e, const WireHdr *h, const float *x);
/* (Re)allocates the split head's message buffers for e->bmax rows. */
void engine_head_alloc(DistEngine *e);
void engine_head_recv(DistEngine *e, int n, int row0);

/* service.c: the controller's go-ahead to the service rank before a pass (cmd WIRE_STEP)
 * or a control command; the service rank's loop of requests until a go-ahead, returning
 * the command it announces. */
void engine_service_go(DistEngine *e, int cmd);
int engine_service_serve(DistEngine *e);

/* setup.c: layer l's transport groups (collective) and this rank's roles. */
void engine_setup_layer(DistEngine *e, int l);
/* Frees layer l's groups (before engine_setup_layer again). */
void engine_teardown_layer_comms(DistEngine *e, int l);
/* Recomputes which transitions may speculate and whether this rank has work. */
void engine_refresh_roles(DistEngine *e);
/* message.c: sends a control command through the pipeline (no compute) and confirms it on
 * the world. */
void engine_controller_control(DistEngine *e, int cmd, int pos);
/* Re-placement at positions cached (collective): computes the new plan as every rank does,
 * moves parts and KV caches, rebuilds groups. */
void engine_replan(DistEngine *e, int positions);

#endif
