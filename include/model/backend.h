/* backend.h: how the token loop reaches the decoder layers, wherever they run: in this
 * process (local.c) or spread over ranks (the distributed engine).  One n-row forward
 * family, n = 1 for decode. */
#ifndef HEADSPLIT_BACKEND_H
#define HEADSPLIT_BACKEND_H

#include "config.h"

#include <hdf5.h>
#include <stddef.h>

/* One sequence's rows in a pass of several (--parallel's slots): positions pos..pos+n-1 of
 * the sequence whose KV caches are slot's. */
typedef struct {
    int slot, pos, n;
} SeqRows;

typedef struct {
    void *ctx;
    /* Runs every decoder layer on x[dim] (in place) for the token at position pos. */
    void (*forward)(void *ctx, float *x, int pos, int token);
    /* Optional, before each forward: memory checks and re-placement.  -1 with err ends the
     * generation (e.g. a budget exceeded under --static). */
    int (*prepare)(void *ctx, int pos, char *err, size_t errlen);
    /* Optional, after forward (or forward_n: its last row): 1 when the backend computed the
     * logits[vocab] itself (the LM head split over workers; x is then not the last layer's
     * output), 0 when the controller computes them from x. */
    int (*logits)(void *ctx, float *logits);
    /* Optional: every decoder layer on n positions pos..pos+n-1 at once, x[n][dim] in place,
     * tokens[n] the tokens at those positions.  next_n: how many positions the caller will
     * pass in its next call (a hint that lets the distributed backend size its next messages;
     * 0 = unknown; a wrong hint costs time, never correctness).  NULL: one forward per
     * position. */
    void (*forward_n)(void *ctx, float *x, int pos, int n, const int *tokens, int next_n);
    /* Optional, just before a forward_n: its caller reads only the last `rows` rows of x
     * afterwards (0: none; the others are left unspecified), so that a distributed backend
     * need not send the rest back.  Applies to that one call. */
    void (*want_rows)(void *ctx, int rows);
    /* Optional: like logits, for the n rows of the last forward_n: logits[n][vocab]. */
    int (*logits_n)(void *ctx, float *logits, int n);
    /* Optional: several sequences, each on KV caches of its own (a slot), sharing passes.
     * set_slots: slots 0..n_slots-1 to be used (0, or -1 with err where the backend cannot
     * hold so many).  forward_rows: every decoder layer on the rows of several sequences as
     * one call: x[rows][dim] in place, rows[0]'s n rows first, then rows[1]'s, ...; at most
     * one entry per slot, the rows in all <= max_batch; each sequence's results bit-identical
     * to forward_n on its rows alone in its own slot.  logits_rows: like logits_n, for the
     * n rows of the last forward_rows (0: the caller computes them from x).  NULL: one
     * sequence. */
    int (*set_slots)(void *ctx, int n_slots, char *err, size_t errlen);
    void (*forward_rows)(void *ctx, float *x, const SeqRows *rows, int n_rows);
    int (*logits_rows)(void *ctx, float *logits, int n);
    /* Optional: calls of several sequences kept in flight (a chain of stages, each working
     * on another call's pass).  post_rows sends the rows as forward_rows would take them
     * (next_n: a hint of the rows of the next call, 0 unknown) without waiting; take_rows
     * waits for the oldest call posted and not taken and leaves its rows in the x it was
     * posted with (the LM head is the caller's).  At most max_in_flight calls posted and not
     * taken; the calls must use disjoint slots; no other forward in between. */
    void (*post_rows)(void *ctx, float *x, const SeqRows *rows, int n_rows, int next_n);
    void (*take_rows)(void *ctx);
    int max_in_flight; /* 1: no post_rows worth using */
    /* Copies of the layers (--replicas; 0 or 1: one): slot s runs on copy s % copies, and a
     * caller keeping calls in flight groups the slots by copy (group g of copy g % copies),
     * so that each copy's passes go only to its workers. */
    int copies;
    int max_batch; /* positions forward_n takes at most (0 when forward_n is NULL) */
} LayerBackend;

/* In-process backend: every layer of the model on this process. */
typedef struct LocalModel LocalModel;
int local_model_load(LocalModel **out, const ModelConfig *c, hid_t file, const char *fname,
                     int kv_cap, char *err, size_t errlen);
void local_model_free(LocalModel *m);
LayerBackend local_model_backend(LocalModel *m);
/* Last FFN ratios ||FFN(Z)||/||Z|| per layer of the most recent forward (for the profiler). */
const float *local_model_ratios(const LocalModel *m);
size_t local_model_weight_bytes(const LocalModel *m);
/* Emulates inter-layer speculation numerically (spec[l]: transition l -> l+1 speculates;
 * NULL: none).  With tolerance 0 nothing is ever kept and results equal exact execution. */
void local_model_set_speculation(LocalModel *m, const unsigned char *spec, float tolerance);
/* Speculations tried and kept since the last set_speculation. */
void local_model_spec_counts(const LocalModel *m, long *tried, long *kept);
/* Positions the backend's forward_n runs per pass (1 after load; max_batch >= 1; longer calls
 * are split).  Grows the scratch; call before local_model_backend (which copies max_batch). */
void local_model_set_max_batch(LocalModel *m, int max_batch);

/* Several sequences (--parallel's slots, single process; the backend's set_slots,
 * forward_rows and logits_rows).  Slot 0's KV caches are the ones the backend's forward and
 * forward_n use; slots 1..n_slots-1 have caches of their own (kv_cap positions each,
 * resident as written), the weights shared.  Grows only. */
void local_model_set_slots(LocalModel *m, int n_slots);
/* fn(arg) after every pass of the model (one position, a batch, or several sequences' rows),
 * from the thread that ran it (NULL: none): the single process's points between stretches
 * of work, where an emulated board's compute dilation is paid (src/app/headsplit.c). */
void local_model_on_pass(LocalModel *m, void (*fn)(void *), void *arg);
int local_model_slots(const LocalModel *m);
/* One sequence's rows in a pass: positions pos..pos+n-1 of slot's sequence. */
typedef SeqRows LocalRows;
/* Every layer on the rows of several sequences as one pass: x[rows][dim] in place, rows[0]'s
 * n rows first, then rows[1]'s, ...; the rows in all <= max_batch; each weight matrix
 * streamed once for all of them, each row's attention on its own slot's caches only.  Each
 * sequence's results are bit-identical to forward_n on its rows alone (in its own slot), so
 * a sequence does not depend on what shares its passes.  Not with speculation emulated. */
void local_model_forward_rows(LocalModel *m, float *x, const LocalRows *rows, int n_rows);

#endif
