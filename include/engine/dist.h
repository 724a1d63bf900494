/* dist.h: the distributed engine.  Rank 0 (controller) drives the token loop through a
 * LayerBackend whose forward sends the embedding into the pipeline of workers and receives the
 * last layer's output; ranks 1..N run dist_worker_loop.  Communication per layer follows the
 * plan's schedule (schedule.h), over a transport (transport.h): a broadcast of the layer
 * input to its head and projection ranks, a gather of head outputs to the projection rank, a
 * point-to-point Z when the FFN sits elsewhere, direct exchanges within SLICE layers. */
#ifndef HEADSPLIT_DIST_H
#define HEADSPLIT_DIST_H

#include "generate.h"
#include "plan.h"
#include "transport.h"

#include <jansson.h>

typedef struct DistEngine DistEngine;

/* Creates the per-layer groups (collective over every rank of the transport) and loads this
 * rank's slices from file (workers) — the controller loads nothing here.  Errors are agreed
 * on by all ranks: returns -1 on every rank if any failed (rank 0 has printed the message). */
int dist_setup(DistEngine **out, Transport *tp, const ModelConfig *c, const Plan *plan,
               hid_t file, const char *fname, int kv_cap);
void dist_free(DistEngine *e);

/* Controller: the backend for generate_run, and the stop message that ends every worker. */
LayerBackend dist_backend(DistEngine *e);
void dist_controller_stop(DistEngine *e);

/* Worker: runs layers until the controller's stop message passes through. */
void dist_worker_loop(DistEngine *e);

/* Inter-layer speculation: transition l -> l+1 speculates where mask[l] is set and the plan
 * allows it (PIPE layers, projection and FFN on one rank, the next layer's heads reached by a
 * broadcast).  Must be called with the same arguments on every rank.  Returns how many
 * transitions speculate.  With --adaptive the FFN ranks switch transitions on and off from
 * the acceptance they observe. */
int dist_set_speculation(DistEngine *e, const unsigned char *mask, float tolerance,
                         float min_acceptance, int adaptive);
/* [n_layers]: which transitions the plan allows to speculate. */
const unsigned char *dist_spec_eligible(const DistEngine *e);

/* Memory budgets (collective-free; call on every rank with the same arguments): req is the
 * request the plan was built from (its cluster's budgets and links; the engine keeps a
 * pointer to that cluster, which must outlive it), steps the positions the run will reach.
 * Above threshold * budget the controller re-places attention parts (unless static_plan,
 * where exceeding a budget ends the run). */
void dist_set_memory(DistEngine *e, const PlanRequest *req, int steps, double threshold,
                     int static_plan);
/* --wire: layer inputs, speculative Z and SLICE sums travel as fp32 (WIRE_FORM_F32), IEEE
 * binary16 (WIRE_FORM_F16: half the bytes of the dominant traffic) or Q8_0 blocks
 * (WIRE_FORM_Q8: 34 bytes per 32 values; the model width must be a multiple of 32); every member adds the same rounded values, so members stay
 * identical, but the result is no longer the fp32 one.  Call on every rank. */
void dist_set_wire(DistEngine *e, WireForm form);
/* Controller: prints when each worker would cross its budget under the current plan. */
void dist_print_memory_prediction(const DistEngine *e, FILE *out);
/* Passes of up to max_batch positions (1..WIRE_MAX_ROWS): sizes every message buffer and
 * the scratch for that many rows, and the first pass's broadcasts for all of them.  Call on
 * every rank with the same value, outside the token loop (after dist_setup, before
 * generating); the controller's backend then takes forward_n calls of up to max_batch
 * positions. */
void dist_set_max_batch(DistEngine *e, int max_batch);
int dist_max_batch(const DistEngine *e);
/* Several sequences per pass (--parallel's slots): every rank that holds attention parts
 * keeps KV caches for n_slots sequences (slot 0: the parts' own; the others copies of the
 * parts sharing their weights, kv_cap positions each, resident as written), and every message
 * carries the pass's segment table (wire.h), so that the backend's forward_rows sends the
 * rows of several sequences in one pass, each row's attention on its own slot's caches;
 * each sequence's logits are bit-identical to running it alone.  Not with speculation on,
 * nor with re-placement (dist_check_slots_memory refuses what would not fit).  Call on every
 * rank with the same value (1..WIRE_MAX_SLOTS), outside the token loop. */
void dist_set_slots(DistEngine *e, int n_slots);
/* --replicas: this engine runs one copy of the layers (a plan in which only the copy's
 * workers have roles); members[n] the controller (0) and those workers.  Its control
 * commands (the stop between generations) are then confirmed over them alone, so that each
 * copy's workers leave their loop without the others.  Collective over every rank (each
 * copy's engine, in the same order everywhere), after dist_setup. */
void dist_set_control(DistEngine *e, const int *members, int n);
/* Controller: the passes it has sent. */
long dist_passes(const DistEngine *e);
/* Controller: one backend over the engines of K copies (--replicas; src/engine/replicas.c):
 * slot s is slot s / K of copy s % K (the backend's `copies`), a call's rows go to their
 * copies' engines and the copies' passes are in flight together (post_rows / take_rows:
 * up to every copy's max_in_flight, summed); forward, forward_n and the logits of one
 * sequence are copy 0's.  Each sequence's results are its copy's, bit-identical to running
 * it alone there.  dist_replicas_free releases what dist_replicas_backend made (its ctx). */
LayerBackend dist_replicas_backend(DistEngine **copies, int n_copies);
void dist_replicas_free(LayerBackend *be);
/* The calls (several sequences' rows) copy k has been given (safe from any thread). */
long dist_replicas_calls(const LayerBackend *be, int copy);
/* Controller: the most passes it has had in flight at once. */
int dist_max_in_flight(const DistEngine *e);
int dist_slots(const DistEngine *e);
/* After dist_set_memory and dist_set_slots: 0 when every worker's budget holds its weights
 * and every slot's KV cache at the full positions, else -1 with err naming the worker, what
 * it would need and the options that shrink it (--parallel, --ctx-size, --cache-type).  The
 * same answer on every rank (no messages). */
int dist_check_slots_memory(const DistEngine *e, char *err, size_t errlen);
/* Passes of at most rows positions (0: as many as the broadcasts allow; DIST_UBATCH_AUTO:
 * on a chain of stages one pass per stage, of at least DIST_UBATCH_MIN rows, else whole
 * calls).  On a chain of stages (layer-wise: every layer on one worker, each worker one block
 * of layers) the controller sends the next passes of a forward_n call before the first one's
 * result returns, up to one per stage after the first, so that the stages work on successive
 * passes at once (the pipelined prompt); the results are bit-identical to one pass.  Call
 * on every rank with the same value, after dist_set_max_batch (it sizes the first pass). */
#define DIST_UBATCH_AUTO (-1)
#define DIST_UBATCH_MIN 16
void dist_set_ubatch(DistEngine *e, int rows);
/* A request-reply service on one worker between passes (the draft model of --draft-rank):
 * fn answers a request of req_bytes with at most resp_cap bytes and returns how many (or -1
 * with a message in err, which ends the run naming the rank).  Call on every rank with the
 * same rank (1..size-1) and capacities; fn and ctx matter on that rank only.  The service rank
 * keeps its layers; the controller sends it a small go-ahead before every pass. */
typedef long (*DistServiceFn)(void *ctx, const void *req, size_t req_bytes, void *resp,
                              size_t resp_cap, char *err, size_t errlen);
void dist_set_service(DistEngine *e, int rank, DistServiceFn fn, void *ctx, size_t req_cap,
                      size_t resp_cap);
/* Controller: one request to the service, waited for on the (emulated) link; returns the
 * reply's bytes (in resp, at most resp_cap). */
size_t dist_service_call(DistEngine *e, const void *req, size_t req_bytes, void *resp,
                         size_t resp_cap);
/* Controller hook before each position (LayerBackend.prepare). */
int dist_controller_prepare(void *ctx, int pos, char *err, size_t errlen);
/* Controller: per-rank budgets and peaks, and the re-placements done. */
json_t *dist_memory_json(const DistEngine *e);
/* The plan in force now (it changes with re-placement). */
const Plan *dist_plan(const DistEngine *e);

/* Network hops on the critical path of one token under the plan. */
int dist_hops_per_token(const Plan *plan);

/* One rank's counters (the "ranks" entries of the metrics). */
typedef struct {
    double weight_bytes, peak_rss_bytes, bytes_sent, messages_sent;
    double wait_s, cpu_s, wall_s, slowdown, dilated_s, board_s, host_over_s, late_s;
} DistRankCounters;

enum { DIST_TIMERS = 6 }; /* attention, gather, projection, FFN, broadcast, Z transfer */

/* Every rank's statistics. */
typedef struct {
    int size, n_layers, hops_per_token;
    DistRankCounters *rank; /* [size] */
    double *timers;         /* [size][n_layers][DIST_TIMERS] seconds */
    LinkStats *links;       /* [size][size]: links[to * size + from], counted by the receiver */
    double *spec;           /* [size][n_layers][4]: tried, kept, attention on Z (s), FFN (s) of
                             * speculated transitions */
} DistMetrics;

/* Collective: every rank's statistics into m, on every rank. */
void dist_metrics_gather(DistEngine *e, DistMetrics *m);
void dist_metrics_free(DistMetrics *m);
/* The metrics record of n_tokens tokens: ranks, layers (slowest rank of each role), links
 * with deadline misses, speculation, bytes and hops per token. */
json_t *dist_metrics_json(const DistMetrics *m, int n_tokens);
/* Collective: gather and JSON at rank 0 (NULL elsewhere). */
json_t *dist_collect_metrics(DistEngine *e, int n_tokens);

/* Prints the per-layer breakdown of dist_collect_metrics' result. */
void dist_print_layer_times(json_t *metrics, FILE *out);

#endif
