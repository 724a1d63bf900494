/* bpe.c: the BPE merge core (see bpe.h): a binary heap of candidate pairs over a linked list
 * of symbols.  Entries are never removed when a merge invalidates them; a popped entry whose
 * symbols changed since it was pushed is stale and skipped.  O(n log n) for a word of n
 * symbols, where re-scanning the word after every merge would be O(n^2). */
#include "bpe.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Heap order: higher priority first, then the leftmost pair.  Symbols keep their array order
 * along the list, so the smaller left index is the leftmost pair. */
static int entry_better(const BpeEntry *x, const BpeEntry *y)
{
    return x->prio > y->prio || (x->prio == y->prio && x->left < y->left);
}

static void heap_push(BpeWork *w, BpeEntry e)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->heap = xrealloc(w->heap, w->cap * sizeof *w->heap);
    }
    size_t i = w->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!entry_better(&e, &w->heap[parent]))
            break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = e;
}

static BpeEntry heap_pop(BpeWork *w)
{
    BpeEntry top = w->heap[0];
    BpeEntry last = w->heap[--w->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->n)
            break;
        if (c + 1 < w->n && entry_better(&w->heap[c + 1], &w->heap[c]))
            c++;
        if (!entry_better(&w->heap[c], &last))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->n > 0)
        w->heap[i] = last;
    return top;
}

/* Queues the pair (left, its successor) when the rule merges it. */
static void push_pair(BpeWork *w, const BpeSym *sym, int left, BpePairFn pair, const void *ctx)
{
    int right = sym[left].next;
    if (right < 0)
        return;
    BpeEntry e = {0};
    if (!pair(ctx, sym[left].id, sym[right].id, &e.prio, &e.result))
        return;
    e.left = left;
    e.right = right;
    e.left_id = sym[left].id;
    e.right_id = sym[right].id;
    heap_push(w, e);
}

/* Queues the pairs on both sides of each symbol merged at the priority just finished. */
static void flush_pending(BpeWork *w, const BpeSym *sym, BpePairFn pair, const void *ctx)
{
    for (size_t k = 0; k < w->n_pending; k++) {
        int s = w->pending[k];
        if (sym[s].id < 0)
            continue; /* merged into its left neighbour later at the same priority */
        if (sym[s].prev >= 0)
            push_pair(w, sym, sym[s].prev, pair, ctx);
        push_pair(w, sym, s, pair, ctx);
    }
    w->n_pending = 0;
}

void bpe_link(BpeSym *sym, int n)
{
    for (int i = 0; i < n; i++) {
        sym[i].prev = i - 1;
        sym[i].next = i + 1 < n ? i + 1 : -1;
    }
}

void bpe_run(BpeWork *w, BpeSym *sym, int head, BpeMode mode, BpePairFn pair, const void *ctx)
{
    w->n = 0;
    w->n_pending = 0;
    for (int i = head; i >= 0; i = sym[i].next)
        push_pair(w, sym, i, pair, ctx);
    double cur = 0.0; /* the priority being merged (BPE_MERGE_ALL) */
    for (;;) {
        if (w->n_pending && (w->n == 0 || w->heap[0].prio != cur))
            flush_pending(w, sym, pair, ctx);
        if (w->n == 0)
            break;
        BpeEntry e = heap_pop(w);
        int l = e.left, r = e.right;
        if (sym[l].id != e.left_id || sym[l].next != r || sym[r].id != e.right_id)
            continue; /* stale */
        sym[l].id = e.result;
        sym[l].next = sym[r].next;
        if (sym[r].next >= 0)
            sym[sym[r].next].prev = l;
        sym[r].id = -1;
        sym[r].prev = sym[r].next = -1;
        if (mode == BPE_MERGE_ALL) {
            cur = e.prio;
            if (w->n_pending == w->cap_pending) {
                w->cap_pending = w->cap_pending ? 2 * w->cap_pending : 64;
                w->pending = xrealloc(w->pending, w->cap_pending * sizeof *w->pending);
            }
            w->pending[w->n_pending++] = l;
        } else {
            if (sym[l].prev >= 0)
                push_pair(w, sym, sym[l].prev, pair, ctx);
            push_pair(w, sym, l, pair, ctx);
        }
    }
}

size_t bpe_collect(const BpeSym *sym, int head, int *out)
{
    size_t k = 0;
    for (int i = head; i >= 0; i = sym[i].next)
        out[k++] = sym[i].id;
    return k;
}

void bpe_work_free(BpeWork *w)
{
    free(w->heap);
    free(w->pending);
    memset(w, 0, sizeof *w);
}
