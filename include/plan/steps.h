/* steps.h: a token's step program, emitted from a plan's schedule (schedule.h) by a pure
 * function: for every layer, in order, the work each rank does (COMPUTE: what, on which rank,
 * the bytes of its matrices by their stored type, the KV groups it reads, its kernel calls)
 * and the messages between ranks (SEND, BCAST, GATHER, ALLGATHER, REDUCE, SCATTER: the group,
 * the values each member sends, their wire form).  The simulator's events (src/sim/flow.c),
 * the analytic cost model (src/plan/cost.c) and the schedule's hops and bytes are walks of
 * the same program, so hops, bytes and messages per token are sums over its steps; the
 * engine runs it (src/engine/interp.c: each worker walks its own steps, each step run by
 * the handler of its op, what and kind of layer), and tests/unit/test_engine.c checks that
 * it sends what the program says, message for message and byte for byte.
 *
 * Dependencies are explicit and read per rank: a step waits, on each rank r taking part, for
 * its dependencies that are computes on r and for its dependencies that are messages, as they
 * reach r (a BCAST: when r has the root's values; a GATHER: the root when every member's have
 * arrived; an ALLGATHER, REDUCE or SCATTER: when r has what the others send it; a SEND: the
 * receiver when it arrives).  A rank's program is the steps it takes part in, in order: it
 * sends or receives by its place in the group.
 *
 * Speculation into layer l (the transition l-1 -> l): the FFN rank of l-1 broadcasts Z before
 * its FFN, the consumers run their attention on it and gather at once; X' carries the
 * decision, and the steps of the REJECT branch (the attention again on X' and a second
 * gather) run only when the speculation was rejected, those of the ACCEPT branch only when
 * it was kept. */
#ifndef HEADSPLIT_STEPS_H
#define HEADSPLIT_STEPS_H

#include "plan.h"
#include "schedule.h"
#include "wire.h"

#include <stdint.h>

typedef enum {
    STEP_COMPUTE = 0,
    STEP_SEND,      /* members {sender, receiver}: one message of values[0] */
    STEP_BCAST,     /* members[0] sends values[0] to every other member */
    STEP_GATHER,    /* every member but members[0] sends it values[m] */
    STEP_ALLGATHER, /* every member sends values[m] to every other member */
    STEP_REDUCE,    /* every member but members[0] sends it values[m]; the root adds them */
    STEP_SCATTER,   /* every member sends values[j] (member j's chunk) to each member j */
    STEP_OP_COUNT
} StepOp;

/* What a step computes or carries (the simulator's tags, the engine's timers). */
typedef enum {
    STEP_WORK_EMBED = 0, /* the controller: one row of the embedding */
    STEP_WORK_ATTN,      /* attention parts (SLICE: with their columns of wo) */
    STEP_WORK_SPEC_ATTN, /* attention parts on the speculative Z */
    STEP_WORK_REEXEC,    /* attention parts again on X' (speculation rejected) */
    STEP_WORK_PROJ,      /* wo (exact: its rows) */
    STEP_WORK_FFN,       /* the FFN (SLICE: the member's slice; exact: gate and up rows) */
    STEP_WORK_FFN_DOWN,  /* exact: w_down's rows */
    STEP_WORK_HEAD,      /* the final norm and the LM head's rows */
    STEP_MSG_INPUT,      /* a layer's input X (n_layers: the output to the controller) */
    STEP_MSG_SPEC_Z,     /* Z of the previous layer, speculatively */
    STEP_MSG_HEADS,      /* head outputs */
    STEP_MSG_Z,          /* Z, projection rank to FFN rank */
    STEP_MSG_PARTIAL,    /* SLICE partial sums (or chunks of them) */
    STEP_MSG_SUM,        /* SLICE sums (or chunks of them) going back */
    STEP_MSG_ROWS,       /* exact: Z's rows, the FFN's hidden slices, X''s rows */
    STEP_MSG_LOGITS,     /* a split LM head's rows of logits */
    STEP_WHAT_COUNT
} StepWhat;

typedef enum { STEP_ALWAYS = 0, STEP_ACCEPT = 1, STEP_REJECT = 2 } StepBranch;

typedef struct {
    StepOp op;
    StepWhat what;
    StepBranch branch; /* speculation into `layer` kept (ACCEPT) or rejected (REJECT) */
    int layer;         /* -1: the embedding; n_layers: the way out and the LM head */
    /* COMPUTE */
    int rank;
    double weight_bytes; /* matrices streamed, by their stored types (norms, biases f32) */
    int kv_groups;       /* KV groups whose cache it reads, per position held */
    int n_ops;           /* kernel calls (each pays the device's per-op overhead) */
    /* messages: members [first_member, +n_members) of the program's member pool, values
     * per member (as StepOp says) at the same index of the value pool */
    int first_member, n_members;
    WireForm wire;
    /* dependencies: [first_dep, +n_deps) of the dep pool, indices of earlier steps */
    int first_dep, n_deps;
} Step;

typedef struct {
    int n_layers, n_ranks;
    int n_steps, cap_steps;
    Step *steps;
    int n_pool, cap_pool;
    int *members;     /* [n_pool] */
    int64_t *values;  /* [n_pool] */
    int n_dep, cap_dep;
    int *deps;        /* [n_dep] */
    int last;         /* the step after which the controller has the token's logits */
} StepProgram;

/* How a program is emitted: the wire form of layer inputs, speculative Z and SLICE sums
 * (--wire), and speculation into each layer (spec[l] != 0 for the transition l-1 -> l; NULL:
 * none; only where the schedule allows it, schedule_spec_eligible). */
typedef struct {
    WireForm wire;
    const unsigned char *spec; /* [n_layers] */
} StepOptions;

/* The token's program of plan p (its schedule s) for the model. */
void steps_build(StepProgram *prog, const Plan *p, const Schedule *s, const ModelConfig *c,
                 const StepOptions *o);
/* The program of one layer lp (schedule_layer's entry sl) among n_ranks ranks, without
 * speculation (SLICE: partial sums exchanged all-to-all): what the solvers price.  Its
 * input is held from the start by sl->holders; prog->last is the layer's last step. */
void steps_build_layer(StepProgram *prog, const LayerPlan *lp, const ScheduleLayer *sl,
                       int layer, int n_ranks, const ModelConfig *c, const StepOptions *o);
void steps_free(StepProgram *prog);

/* 1 if step st runs when the speculation into its layer is kept (accept != 0) or not. */
int steps_taken(const Step *st, int accept);

/* Messages, and bytes (WireHdr included) they put on the wire, of one step; and of the
 * program, where accept[l] says whether speculation into layer l was kept (NULL: all kept). */
uint64_t steps_step_messages(const StepProgram *prog, const Step *st);
uint64_t steps_step_bytes(const StepProgram *prog, const Step *st);
uint64_t steps_messages(const StepProgram *prog, const unsigned char *accept);
uint64_t steps_bytes(const StepProgram *prog, const unsigned char *accept);
/* Hops on the token's critical path: message steps that always run (one for each round of
 * an exchange; the speculative Z and a rejection's second gather not counted). */
int steps_step_hops(const StepProgram *prog, const Step *st);
int steps_hops(const StepProgram *prog);

/* Bytes of one message of member m of step st (its values in the step's wire form and the
 * WireHdr); for a SCATTER, what each other member sends member m. */
uint64_t steps_msg_bytes(const StepProgram *prog, const Step *st, int m);
/* Bytes a compute step streams at position pos: its weights and its KV groups' reads of
 * positions 0..pos. */
double steps_work_bytes(const Step *st, const ModelConfig *c, int pos);

/* The members and values of message step st. */
static inline const int *steps_members(const StepProgram *p, const Step *st)
{
    return p->members + st->first_member;
}
static inline const int64_t *steps_values(const StepProgram *p, const Step *st)
{
    return p->values + st->first_member;
}
static inline const int *steps_deps(const StepProgram *p, const Step *st)
{
    return p->deps + st->first_dep;
}

const char *steps_op_name(StepOp op);
const char *steps_what_name(StepWhat w);
/* The wire form of a request's bytes per element (PlanRequest.wire_bytes: 4, 2, 34/32). */
WireForm steps_wire_of_bytes(double wire_bytes);

#endif
