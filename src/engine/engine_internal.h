/* engine_internal.h: the distributed engine's state and the functions its files share
 * (setup.c, loop.c, interp.c, pipemsg.c, pipe.c, slice.c, slice_exact.c, speculation.c,
 * head.c, metrics.c, replan.c, service.c, wireform.c, slots.c, replicas.c).  Not a public
 * interface.
 *
 * A worker runs a pass by walking its own steps of the token's step program (steps.h; the
 * program of the plan in force, the wire form and the speculation on: interp.c), each step
 * run by the handler of its (op, what, kind of layer): the input broadcast and control
 * commands (pipemsg.c), PIPE attention, gathers, projection, Z and FFN (pipe.c), SLICE
 * attention, exchanges and FFN slices (slice.c), the exact exchange's rounds (slice_exact.c)
 * and the split LM head (head.c). */
#ifndef HEADSPLIT_ENGINE_INTERNAL_H
#define HEADSPLIT_ENGINE_INTERNAL_H

#include "dist.h"
#include "schedule.h"
#include "steps.h"
#include "util.h"
#include "wire.h"

#include <string.h>

/* Passes a controller keeps in flight beyond the one it waits for, at most. */
#define ENGINE_MAX_DEPTH 15

enum { T_ATTN, T_GATHER, T_PROJ, T_FFN, T_BCAST, T_ZSEND, T_COUNT };
enum { W_IN, W_GATHER, W_Z, W_X1, W_X2, W_COUNT }; /* wait sites per layer (deadlines) */

/* A layer's groups and this rank's weights of it; what it does with them is its steps in
 * the program (interp.c). */
typedef struct {
    TransportGroup *in_comm; /* layer input: root (member 0) = producer; NULL if none */
    int in_root;      /* 1 if this rank broadcasts the input */
    int in_peer;      /* world rank of the root */
    /* PIPE: head outputs -> projection rank (member 0); members and layout in the
     * schedule's entry of the layer */
    TransportGroup *g_comm;
    int n_parts;
    AttnPartW *parts;  /* this rank's parts of the layer (slot 0's KV caches) */
    AttnPartW *slot_parts; /* [slots - 1][n_parts]: slots 1.. (dist_set_slots), the same
                            * weights as parts, KV caches of their own */
    QMat *wo_cols;     /* SLICE: [n_parts] their columns of wo, [dim][nq*hd] */
    int my_floats;     /* floats of head outputs this rank contributes */
    int is_proj, is_ffn;
    ProjW proj;        /* PIPE: whole; SLICE exact: wo rows [d0, d1) (and the whole bo) */
    FfnW ffn;          /* PIPE: whole FFN; SLICE: this rank's slice (exact: by rows) */
    int d0, d1;        /* SLICE exact: the rows of wo and w_down this member computes */
    double ewma[W_COUNT];
} LayerRt;

/* The token's step program the engine runs (interp.c): built for the plan in force, the
 * wire form and the speculation on (spec[l]: into layer l, steps.h's StepOptions), and the
 * indices of this rank's steps (its computes and the messages it is a member of) in order. */
typedef struct {
    StepProgram prog;
    unsigned char *spec; /* [L] */
    WireForm wire;
    int *mine;
    int n_mine;
    int *handler;        /* [n_steps] the handler of each of this rank's steps (-1: none) */
    int built;           /* 0: to build (set up, re-placed, --wire, speculation set) */
} EngineProgram;

/* A pass on one rank while it walks its steps (interp.c).  h: the pass's header as the last
 * message that carried it said (flags cleared); stop: the pass is a command (STOP, REPLAN):
 * only the steps that carry it (layer inputs, Z, speculative Z) run; known: the layer whose
 * header this rank holds already (a speculative Z came first); the speculation decision of
 * a layer, taken at its first branch step; phase: a SLICE layer's exchanges before (0) or
 * after (1) the FFN; the message steps posted and not yet completed. */
#define WALK_MAX_PENDING 8

/* A controller's pass (loop.c) as its steps of the way out need it: its rows n at pos, the
 * rows its broadcasts were sized for, the rows it reads back (the last `out`) into y, and
 * where a split head's logits of it go (rows row0.. of e->hd.logits). */
typedef struct {
    int pos, n, nb, out, row0;
    float *y;
} EnginePass;

typedef struct {
    const EnginePass *pass; /* the controller's (NULL on a worker) */
    WireHdr h;
    int stop;
    int known;
    int decided, accept;
    int phase;
    unsigned seq;        /* posting order */
    struct {
        int step;        /* -1: a free slot */
        unsigned seq;
        TransportReq req;
    } pend[WALK_MAX_PENDING];
} EngineWalk;

/* A step's handler: runs (or posts) step st of the program on this rank. */
typedef void (*StepRun)(DistEngine *e, EngineWalk *w, const Step *st);
/* Completes a posted step. */
typedef void (*StepDone)(DistEngine *e, EngineWalk *w, const Step *st, TransportReq *req);

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

/* Several sequences per pass (dist_set_slots, slots.c): the slots every rank keeps KV
 * caches for (1: one sequence, messages without a segment table), the bytes before a
 * message's payload (its WireHdr and the table, wire.h), and the table of the pass this rank
 * is on: a worker's from the message that carried the pass to it, the controller's for the
 * pass it sends; the attention's segments of it. */
typedef struct {
    int n;
    size_t hdr;
    WireSeg *cur;  /* [n] */
    int n_cur;
    AttnSeg *segs; /* [n] */
} EngineSlots;

/* The controller's passes sent and not yet taken (loop.c), oldest first: each one's rows
 * row0.. of its call's x (y: where they come back), its rows m, the rows its broadcasts were
 * sized for, the rows that come back, its first position, and whether it ends its call; the
 * calls whose passes have all been taken and that the caller has not taken yet (post_rows,
 * take_rows), and the most passes in flight at once. */
typedef struct {
    struct {
        int row0, m, nb, out, pos, last;
        float *y;
    } q[ENGINE_MAX_DEPTH + 1];
    int head, count, calls, max_count;
} EngineFlight;

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
    WireForm wire;       /* --wire: the form of layer inputs, speculative Z and SLICE sums */
    int bmax;            /* positions (rows) a pass may carry (dist_set_max_batch) */
    int nb;              /* rows the broadcasts of the next pass are sized for (agreed by
                          * every rank from the last pass's next_n; 1 at start) */
    int last_n;          /* controller: rows of the last forward_n (the logits it holds) */
    int ubatch;          /* controller: rows per pass at most (dist_set_ubatch; 0: no limit) */
    int want;            /* controller: rows the next forward_n's caller reads (-1: all) */
    int chain;           /* engine_chain_depth of the plan in force (engine_refresh_roles) */
    int active;          /* has any role */
    EngineProgram prog;  /* the token's step program and this rank's steps (interp.c) */
    EngineExact ex;
    EngineSpec sp;
    EngineHead hd;
    EngineService svc;
    EngineStats stats;
    EngineSlots sl;
    EngineFlight fl;
    /* A copy of --replicas (dist_set_control): the controller and the copy's workers, over
     * which its control commands are confirmed (NULL: over every rank) */
    TransportGroup *ctl;
};


/* The payload of a message: the floats after its WireHdr and segment table. */
static inline float *payload(const DistEngine *e, unsigned char *msg)
{
    return (float *)(void *)(msg + e->sl.hdr);
}

/* Bytes of a broadcast in the current pass: the header and nb rows of the model width. */
static inline size_t bcast_bytes(const DistEngine *e)
{
    return e->sl.hdr + (size_t)e->nb * (size_t)e->c->dim * sizeof(float);
}

/* Bytes of a point-to-point message of n rows of the model width. */
static inline size_t rows_bytes(const DistEngine *e, int n)
{
    return e->sl.hdr + (size_t)n * (size_t)e->c->dim * sizeof(float);
}

/* The timers of layer l. */
static inline double *engine_timers(DistEngine *e, int l)
{
    return e->stats.timers + (size_t)l * T_COUNT;
}

/* The members of step st and this rank's place among them (-1: not a member). */
static inline int engine_member(const DistEngine *e, const Step *st)
{
    const int *m = steps_members(&e->prog.prog, st);
    for (int i = 0; i < st->n_members; i++)
        if (m[i] == e->tp->rank)
            return i;
    return -1;
}

/* A slot for the request of message step st, posted now and completed by the walk (when a
 * later step depends on it, before another message on its group or a branch step of its
 * layer, or past its layer). */
static inline TransportReq *engine_walk_post(DistEngine *e, EngineWalk *w, const Step *st)
{
    for (int i = 0; i < WALK_MAX_PENDING; i++)
        if (w->pend[i].step < 0) {
            w->pend[i].step = (int)(st - e->prog.prog.steps);
            w->pend[i].seq = w->seq++;
            memset(&w->pend[i].req, 0, sizeof w->pend[i].req);
            return &w->pend[i].req;
        }
    CHECK(0, "layer %d: more than %d message steps in flight", st->layer, WALK_MAX_PENDING);
    return NULL;
}

/* Bytes attention part w streams for n rows at pos: its weights once, and each row's reads
 * of the K and V cached so far (the board model of the dilation charges them). */
static inline double attn_stream_bytes(const ModelConfig *c, const AttnPartW *w, int pos, int n)
{
    const double kv_row = (double)config_kv_bytes(c, 1); /* K and V, in the stored type */
    return (double)model_attn_part_bytes(c, w) +
           kv_row * ((double)n * (double)pos + (double)n * (double)(n + 1) / 2);
}

/* pipemsg.c: a received header, checked (magic, command), and the broadcast of a pipeline
 * message on layer l's input group (root sends; others receive and wait out the link),
 * sized for the pass's e->nb rows or for nb, in the engine's wire form or in f. */
WireHdr engine_read_hdr(const unsigned char *msg, int layer);
void engine_bcast_input(DistEngine *e, int l, unsigned char *msg);
void engine_bcast_input_nb(DistEngine *e, int l, unsigned char *msg, int nb);
void engine_bcast_form(DistEngine *e, int l, unsigned char *msg, int nb, WireForm f);
/* The header of a message of layer l that carried the pass to this rank: becomes the walk's
 * (flags cleared; a command stops the pass's work); returned with its flags. */
WireHdr engine_walk_took(DistEngine *e, EngineWalk *w, int l, const unsigned char *msg);
/* wireform.c: n floats in wire form f (f32, f16, q8: as they are, halves, Q8_0 blocks):
 * their bytes (wire_form_bytes); packed into out (returns the bytes); unpacked into x
 * (nothing to do for f32 in place); rounded in place as the wire rounds them (through
 * scratch; nothing for f32). */
size_t engine_wire_len(WireForm f, int64_t n);
size_t engine_wire_put(WireForm f, const float *x, unsigned char *out, int64_t n);
void engine_wire_get(WireForm f, const unsigned char *in, float *x, int64_t n);
void engine_wire_round(WireForm f, float *x, unsigned char *scratch, int64_t n);
/* pipemsg.c: the form f of a message of layer l's input, sized for nb rows, into out (room
 * for e->buf.wire_bytes); returns the bytes of the broadcast. */
size_t engine_wire_pack(const DistEngine *e, WireForm f, int l, const unsigned char *msg,
                        unsigned char *out, int nb);
/* setup.c: passes a chain of stages can hold beyond the oldest: stages - 1 when the plan is
 * a chain (every layer's roles on one rank, each rank one run of layers, no split head),
 * else 0; loop.c: the passes the controller keeps in flight (that, unless --ubatch is 0). */
int engine_chain_depth(const DistEngine *e);
int engine_pipeline_depth(const DistEngine *e);

/* interp.c: one pass on this worker: its steps of the token's program (rebuilt first when the
 * plan, the wire form or the speculation on changed); returns the pipeline command seen and
 * the pass's header in *h.  The program's release. */
int engine_run_pass(DistEngine *e, WireHdr *h);
void engine_program_free(DistEngine *e);
/* interp.c: the controller's steps of a pass: of the way in (the pass's header h, its rows
 * in xmsg's payload) or of the way out (layer L: the last output or the split head's
 * logits, as p says). */
void engine_controller_in(DistEngine *e, const WireHdr *h);
void engine_controller_out(DistEngine *e, const EnginePass *p);

/* The step handlers (interp.c's table), by file.  pipemsg.c: a layer input's broadcast (the
 * root sends; a member receives, posted only where the pass's header came first), the
 * completion of a posted receive, and a command's way out to the controller past a split
 * LM head (not a step of a token). */
void engine_input_run(DistEngine *e, EngineWalk *w, const Step *st);
void engine_input_done(DistEngine *e, EngineWalk *w, const Step *st, TransportReq *req);
void engine_control_out(DistEngine *e, EngineWalk *w);
/* pipemsg.c, the controller's: the last layer's output of its pass (BCAST of layer L's
 * input) into the pass's y; its computes (EMBED, HEAD) are the caller's (generate.c). */
void engine_output_take(DistEngine *e, EngineWalk *w, const Step *st);
void engine_caller_step(DistEngine *e, EngineWalk *w, const Step *st);
/* pipe.c: attention parts on the layer input (ATTN; REEXEC: on X', the speculation
 * rejected) or on the speculative Z (SPEC_ATTN), the gather of head outputs (posted, and
 * completed: the projection rank assembles them), the projection, Z to the FFN rank, the
 * speculative Z to the next layer's ranks (the root's send posted), the FFN with the
 * speculation decision. */
void engine_pipe_attn(DistEngine *e, EngineWalk *w, const Step *st);
void engine_pipe_spec_attn(DistEngine *e, EngineWalk *w, const Step *st);
void engine_heads_post(DistEngine *e, EngineWalk *w, const Step *st);
void engine_heads_done(DistEngine *e, EngineWalk *w, const Step *st, TransportReq *req);
void engine_pipe_proj(DistEngine *e, EngineWalk *w, const Step *st);
void engine_z_run(DistEngine *e, EngineWalk *w, const Step *st);
void engine_spec_z_run(DistEngine *e, EngineWalk *w, const Step *st);
void engine_spec_z_done(DistEngine *e, EngineWalk *w, const Step *st, TransportReq *req);
void engine_pipe_ffn(DistEngine *e, EngineWalk *w, const Step *st);
/* slice.c: a member's attention parts with their columns of wo (its partial sum), its FFN
 * slice, and the exchanges of partial sums: all-to-all (ALLGATHER of partials), reduce
 * (REDUCE, then BCAST of the sum), reduce-scatter / all-gather (SCATTER, then ALLGATHER of
 * the sum's chunks). */
void engine_slice_attn(DistEngine *e, EngineWalk *w, const Step *st);
void engine_slice_ffn(DistEngine *e, EngineWalk *w, const Step *st);
void engine_xchg_all(DistEngine *e, EngineWalk *w, const Step *st);
void engine_xchg_reduce(DistEngine *e, EngineWalk *w, const Step *st);
void engine_xchg_sum_bcast(DistEngine *e, EngineWalk *w, const Step *st);
void engine_xchg_scatter(DistEngine *e, EngineWalk *w, const Step *st);
void engine_xchg_sum_allgather(DistEngine *e, EngineWalk *w, const Step *st);
/* slice_exact.c (--exchange exact): attention into head order, the all-gather rounds (head
 * outputs; Z's, the FFN's hidden and X''s rows, by the step they follow), wo's rows, the
 * FFN's gate and up rows, w_down's rows; this member's rows of wo and the FFN (-1 with err);
 * the all-gather buffers for e->bmax rows, and their release. */
void engine_exact_attn(DistEngine *e, EngineWalk *w, const Step *st);
void engine_exact_round(DistEngine *e, EngineWalk *w, const Step *st);
void engine_exact_proj(DistEngine *e, EngineWalk *w, const Step *st);
void engine_exact_ffn(DistEngine *e, EngineWalk *w, const Step *st);
void engine_exact_down(DistEngine *e, EngineWalk *w, const Step *st);
int engine_exact_load(DistEngine *e, int l, hid_t file, const char *fname, char *err,
                      size_t errlen);
void engine_exact_alloc(DistEngine *e);
void engine_exact_free(DistEngine *e);
/* speculation.c: the decision at layer l's FFN rank (ratio ||FFN(Z)||/||Z||); returns the
 * header flags for X'. */
int engine_spec_decide(DistEngine *e, int l, float ratio, int s_out);
/* head.c: the split LM head's group (collective), a member's rows (-1 with err when they
 * cannot be loaded), its steps (HEAD: the final norm and its rows of logits of the pass;
 * the GATHER of logits: its send), and the controller's assembly of a pass's n rows into
 * rows row0.. of e->hd.logits. */
int engine_setup_head(DistEngine *e, hid_t file, const char *fname, char *err, size_t errlen);
void engine_head_rows(DistEngine *e, EngineWalk *w, const Step *st);
void engine_logits_send(DistEngine *e, EngineWalk *w, const Step *st);
/* (Re)allocates the split head's message buffers for e->bmax rows. */
void engine_head_alloc(DistEngine *e);
void engine_head_recv(DistEngine *e, int n, int row0);
/* The controller's GATHER of logits: its pass's rows, assembled. */
void engine_logits_take(DistEngine *e, EngineWalk *w, const Step *st);

/* service.c: the controller's go-ahead to the service rank before a pass (cmd WIRE_STEP)
 * or a control command; the service rank's loop of requests until a go-ahead, returning
 * the command it announces. */
void engine_service_go(DistEngine *e, int cmd);
int engine_service_serve(DistEngine *e);

/* slots.c: a message's header h and the pass's segment table (e->sl.cur) into msg; the
 * table of a pass (header h) from a message that carried it, checked against the slots,
 * the header's rows and the caches' capacity, into e->sl.cur; attention part k of layer
 * l on this rank on the pass's n rows x (each sequence's rows on its own slot's caches)
 * into out (rows out_stride floats apart), returning the bytes it streamed; the slots'
 * copies of this rank's parts (alloc: for the slots in e->sl.n; free: every one). */
void engine_hdr_put(const DistEngine *e, unsigned char *msg, const WireHdr *h);
void engine_table_take(DistEngine *e, const unsigned char *msg, const WireHdr *h, int l);
double engine_attn_part(DistEngine *e, int l, int k, const float *x, const WireHdr *h,
                        float *out, int out_stride);
void engine_slots_alloc(DistEngine *e);
void engine_slots_free(DistEngine *e);

/* setup.c: layer l's transport groups (collective) and this rank's roles. */
void engine_setup_layer(DistEngine *e, int l);
/* Frees layer l's groups (before engine_setup_layer again). */
void engine_teardown_layer_comms(DistEngine *e, int l);
/* Recomputes which transitions may speculate and whether this rank has work. */
void engine_refresh_roles(DistEngine *e);
/* pipemsg.c: sends a control command through the pipeline (no compute) and confirms it on
 * the world. */
void engine_controller_control(DistEngine *e, int cmd, int pos);
/* pipemsg.c: a control command's confirmation from the controller (h: its header there,
 * filled elsewhere): over every rank, or over the copy's control group (dist_set_control). */
void engine_control_bcast(DistEngine *e, WireHdr *h);
/* Re-placement at positions cached (collective): computes the new plan as every rank does,
 * moves parts and KV caches, rebuilds groups. */
void engine_replan(DistEngine *e, int positions);

#endif
