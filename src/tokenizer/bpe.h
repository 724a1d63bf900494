/* bpe.h: the BPE merge core that every tokenizer builds on (internal to src/model).
 *
 * A word is a doubly linked list of symbols (piece ids).  A caller-supplied rule says whether
 * two adjacent pieces merge, into which piece and with what priority; the core keeps a
 * priority queue of candidate pairs and merges the best one, the leftmost among equals, until
 * no pair merges.  SentencePiece-style encoders rank pairs by the merged piece's score or by
 * merge rank and re-examine neighbours after each merge (BPE_MERGE_ONE); GPT-2's bpe() merges
 * every occurrence of the best pair, left to right, before it looks at the new pairs
 * (BPE_MERGE_ALL). */
#ifndef HEADSPLIT_BPE_H
#define HEADSPLIT_BPE_H

#include <stddef.h>

/* One symbol of the list; a merged-away symbol has id -1 and no links. */
typedef struct {
    int id, prev, next; /* piece id; indexes of the neighbours in the array, -1 at the ends */
} BpeSym;

/* The merge rule: returns 1 with *prio (larger merges first) and *result (the merged piece)
 * when pieces a then b merge, else 0.  It must depend on (a, b) only. */
typedef int (*BpePairFn)(const void *ctx, int a, int b, double *prio, int *result);

typedef enum {
    BPE_MERGE_ONE = 0, /* merge the best pair, then consider its new neighbours */
    BPE_MERGE_ALL = 1, /* merge every occurrence of the best priority before new pairs */
} BpeMode;

/* A candidate merge in the priority queue. */
typedef struct {
    double prio;
    int left, right, left_id, right_id, result;
} BpeEntry;

/* Scratch space, reused across words; zero-initialise, release with bpe_work_free. */
typedef struct {
    BpeEntry *heap; /* [cap] binary max-heap of candidates */
    size_t n, cap;
    int *pending; /* [cap_pending] symbols merged at the current priority (BPE_MERGE_ALL) */
    size_t n_pending, cap_pending;
} BpeWork;

/* Links sym[0..n) into one list in array order (head 0). */
void bpe_link(BpeSym *sym, int n);
/* Runs BPE over the list starting at head, merging in place. */
void bpe_run(BpeWork *w, BpeSym *sym, int head, BpeMode mode, BpePairFn pair, const void *ctx);
/* Writes the ids of the list starting at head (-1: empty) to out; returns how many. */
size_t bpe_collect(const BpeSym *sym, int head, int *out);
/* Frees the scratch space and zeroes it; a zeroed BpeWork is fine. */
void bpe_work_free(BpeWork *w);

#endif
