/* engine_internal.h: the distributed engine's state, shared by engine.c (the forward pass)
 * and replan.c (memory accounting and re-placement).  Not a public interface. */
#ifndef HEADSPLIT_ENGINE_INTERNAL_H
#define HEADSPLIT_ENGINE_INTERNAL_H

#include "dist.h"
#include "wire.h"

enum { T_ATTN, T_GATHER, T_PROJ, T_FFN, T_BCAST, T_ZSEND, T_COUNT };
enum { W_IN, W_GATHER, W_Z, W_X1, W_X2, W_COUNT }; /* wait sites per layer (deadlines) */

typedef struct {
    LayerMode mode;
    MPI_Comm in_comm; /* layer input: root (comm rank 0) = producer; NULL if none needed */
    int in_size;
    int in_root;      /* 1 if this rank broadcasts the input */
    int in_peer;      /* world rank of the root */
    int consumer;     /* this rank needs the layer input */
    /* PIPE: head outputs -> projection rank (comm rank 0) */
    MPI_Comm g_comm;
    int g_size;
    int *g_members;             /* world ranks in comm order */
    int *g_counts, *g_displs;   /* root: bytes from each member */
    int *g_part_dst, *g_part_src, *g_part_len; /* root: part k -> heads[dst], from byte src */
    int g_n_parts;
    int n_parts;
    AttnPartW *parts;  /* this rank's parts of the layer */
    QMat *wo_cols;     /* SLICE: [n_parts] their columns of wo, [dim][nq*hd] */
    int my_floats;     /* floats of head outputs this rank contributes */
    int is_proj, is_ffn;
    int proj_rank, ffn_rank;
    ProjW proj;
    FfnW ffn;          /* PIPE: whole FFN; SLICE: this rank's slice */
    int n_members;     /* SLICE */
    int *members;
    double ewma[W_COUNT];
} LayerRt;

/* Memory budgets and re-placement (replan.c). */
typedef struct {
    PlanRequest req;      /* the request the plan was built from (devices, links) */
    Device *devices;      /* [n_workers] owned copy */
    double *lat_ms;       /* owned copy or NULL */
    int steps;            /* positions the run will reach */
    double threshold;     /* re-place above this fraction of a budget (0.85) */
    int static_plan;      /* --static: never re-place; exceeding a budget ends the run */
    size_t *peak;         /* [size] controller: peak accounted bytes per rank */
    json_t *records;      /* controller: the re-placements */
    int exhausted;        /* controller: a re-placement found nothing to move */
} MemState;

struct DistEngine {
    Comm *cm;
    const ModelConfig *c;
    const Plan *plan;    /* == &plan_own: the engine keeps its own copy */
    Plan plan_own;
    char *fname;         /* model file, re-opened to load migrated parts */
    int kv_cap;
    MemState mem;
    int L;
    LayerRt *lr;         /* [L+1]: lr[L].in_comm carries the last output to the controller */
    Scratch scratch;
    unsigned char *xmsg; /* [hdr | dim floats] the current layer input / output */
    unsigned char *zmsg; /* [hdr | dim floats] Z */
    unsigned char *gbuf; /* [hdr | n_heads*hd floats] this rank's head outputs */
    unsigned char *staging; /* gathered contributions, in member order */
    unsigned char *xsend; /* SLICE: [hdr | dim] this rank's partial sum */
    unsigned char *xrecv; /* SLICE: [n_workers][hdr | dim] the members' partial sums */
    int wire16;           /* SLICE partial sums travel as binary16 (--wire f16) */
    size_t wire_bytes;    /* [hdr | dim halves] */
    unsigned char *wsend, *wrecv; /* the 16-bit forms of xsend and xrecv */
    float *heads;        /* [n_heads*hd] in head order */
    float *acc;          /* [dim] */
    size_t msg_bytes;
    double *timers;      /* [L][T_COUNT] seconds */
    size_t weight_bytes;
    int active;          /* has any role */
    /* Inter-layer speculation, per transition l -> l+1 (see dist_set_speculation). */
    unsigned char *eligible; /* [L] PIPE -> PIPE, projection and FFN together, heads elsewhere */
    unsigned char *spec;     /* [L] speculating now */
    unsigned char *spec_pending; /* [L] decider: state from the next token on (adaptive) */
    unsigned char *zspec;    /* [hdr | dim] Z received speculatively */
    float tolerance, min_acceptance;
    int adaptive;
    double *acc_ewma;        /* [L] decider: observed acceptance */
    long *spec_tried, *spec_kept; /* [L] decider */
    double *spec_attn_s;     /* [L] attention time spent on Z (heads of layer l) */
    double *ffn_s_spec;      /* [L] decider: FFN time of speculated transitions */
    /* Split LM head (plan->head_split): the controller (comm rank 0) and the last layer's
     * members, which send it their rows of logits. */
    MPI_Comm head_comm;
    int head_size;
    HeadW head_rows;         /* member: final norm and rows [head_v0, head_v1) */
    int head_v0, head_v1;
    unsigned char *hsend;    /* member: [hdr | rows floats] */
    unsigned char *hrecv;    /* controller: the members' messages, in comm order */
    int *h_counts, *h_displs, *h_v0; /* controller: bytes and first row per comm member */
    float *logits;           /* controller: [vocab] assembled logits */
};


/* Builds layer l's communicators and this rank's roles (collective over world). */
void engine_setup_layer(DistEngine *e, int l);
/* Frees layer l's communicators and gather layout (before engine_setup_layer again). */
void engine_teardown_layer_comms(DistEngine *e, int l);
/* Gather layout of a projection rank. */
void engine_setup_gather_layout(DistEngine *e, int l);
/* Recomputes which transitions may speculate and whether this rank has work. */
void engine_refresh_roles(DistEngine *e);
/* Sends a control command through the pipeline (no compute) and confirms it on the world. */
void engine_controller_control(DistEngine *e, int cmd, int pos);
/* Re-placement at positions cached (collective): computes the new plan as every rank does,
 * moves parts and KV caches, rebuilds communicators. */
void engine_replan(DistEngine *e, int positions);

#endif
