/* schedule.h: what a plan means for one token, derived once by a pure function (no MPI, no
 * I/O): for every layer, who holds its input and who consumes it, the broadcast that closes
 * the gap, the gather of head outputs, the members of a SLICE exchange, which transitions may
 * speculate, the split LM head's rows, and the hops and bytes of a token (sums over the
 * token's step program, steps.h, which is emitted from this schedule).  The engine builds
 * its groups and buffers from it, the simulator emits its events from it. */
#ifndef HEADSPLIT_SCHEDULE_H
#define HEADSPLIT_SCHEDULE_H

#include "plan.h"

#include <stdint.h>

/* One layer l < n_layers; entry n_layers describes the last output's way to the controller
 * (its consumers are {0}; mode and the work fields are unused). */
typedef struct {
    LayerMode mode;
    /* The input: held after layer l-1 by holders (the controller for layer 0, the FFN rank
     * of a PIPE layer, every member of a SLICE layer), needed by consumers (head and
     * projection ranks, or SLICE members).  producer is the holder that broadcasts it: the
     * controller, or layer l-1's ffn_rank. */
    int producer;
    int n_holders, *holders;     /* ascending */
    int n_consumers, *consumers; /* ascending */
    /* The broadcast group [producer, the other consumers ascending]; n_bcast 0 when every
     * consumer holds the input already (then no message is sent). */
    int n_bcast, *bcast;
    /* PIPE: the gather of head outputs at the projection rank, members [proj_rank, the other
     * head ranks ascending].  Member m sends [WireHdr | g_floats[m] floats] (its parts in plan
     * order), g_counts[m] bytes placed at byte g_displs[m] of the root's buffer.  Part k of
     * that buffer: g_part_len[k] floats from byte g_part_src[k] go to float g_part_dst[k] of
     * the head outputs in head order. */
    int proj_rank, ffn_rank;
    int n_gather, *gather;
    int *g_floats, *g_counts, *g_displs; /* [n_gather] */
    int n_gparts, *g_part_dst, *g_part_src, *g_part_len; /* [n_gparts] */
    /* SLICE: the members exchanging partial sums, ascending (= consumers). */
    int n_members, *members;
    /* Transition l -> l+1 may speculate: both layers PIPE, the projection and FFN of l on one
     * rank, and layer l+1's input is broadcast (some consumer is not that rank). */
    int spec_eligible;
    /* Network hops this entry adds to a token's critical path (input broadcast, gather, Z;
     * or input broadcast and the exchanges' rounds; entry n_layers: the output, or the split
     * head's logits) and bytes put on the wire: sums over its steps (steps.h) in f32. */
    int hops;
    uint64_t bytes;
} ScheduleLayer;

typedef struct {
    int n_layers, n_workers;
    size_t msg_bytes;         /* one activation message: WireHdr and dim floats */
    ScheduleLayer *layers;    /* [n_layers + 1] */
    /* Split LM head (plan->head_split): group [0, the last layer's members ascending]; member
     * m holds rows [head_v0[m], head_v1[m]) and sends h_counts[m] bytes ([WireHdr | rows
     * floats]) that land at byte h_displs[m] of the controller's buffer (entry 0: empty). */
    int n_head, *head_members;
    int *head_v0, *head_v1, *h_counts, *h_displs; /* [n_head] */
    int hops_per_token;
    uint64_t bytes_per_token; /* without speculation and with f32 partial sums */
} Schedule;

/* Derives the schedule of a plan (well formed: plan_validate) for the model. */
void plan_schedule(Schedule *s, const Plan *plan, const ModelConfig *c);
void schedule_free(Schedule *s);

/* The same derivation for one PIPE or SLICE layer whose input is held by the ranks
 * holders[0..n_holders) (ascending) and broadcast by producer: the solvers price a single
 * layer this way.  Transition and hop fields of the following layer are not known here:
 * spec_eligible is 0. */
void schedule_layer(ScheduleLayer *out, const LayerPlan *lp, int layer, const int *holders,
                    int n_holders, int producer, const ModelConfig *c);
void schedule_layer_free(ScheduleLayer *sl);

/* Transition l -> l+1 may speculate (as layers[l].spec_eligible), without a whole schedule. */
int schedule_spec_eligible(const Plan *plan, int l);

/* 1 if rank is in v[0..n). */
int schedule_has(const int *v, int n, int rank);

#endif
