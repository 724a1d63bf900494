/* test_bpe.c: the BPE merge core (src/tokenizer/bpe.c) on its own, with toy merge rules: the
 * priority and leftmost-first order, the difference between merging one pair at a time
 * (SentencePiece) and every occurrence of the best pair (GPT-2), stale queue entries, empty
 * and one-symbol words, reuse of the scratch space, and random words compared with a plain
 * quadratic re-implementation of both modes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../src/tokenizer/bpe.h"

#include <stdlib.h>
#include <string.h>

/* A toy rule table: pair (a, b) -> result with priority prio; ids below MAX_ID. */
#define MAX_ID 64
typedef struct {
    int result[MAX_ID][MAX_ID]; /* -1: no merge */
    double prio[MAX_ID][MAX_ID];
} Rules;

static void rules_clear(Rules *r)
{
    for (int a = 0; a < MAX_ID; a++)
        for (int b = 0; b < MAX_ID; b++)
            r->result[a][b] = -1;
}

static void rules_add(Rules *r, int a, int b, int result, double prio)
{
    r->result[a][b] = result;
    r->prio[a][b] = prio;
}

static int rules_pair(const void *ctx, int a, int b, double *prio, int *result)
{
    const Rules *r = ctx;
    if (r->result[a][b] < 0)
        return 0;
    *prio = r->prio[a][b];
    *result = r->result[a][b];
    return 1;
}

/* Runs the core on ids[0..n) and returns the merged ids in out; the count. */
static size_t run_core(BpeWork *w, const Rules *r, BpeMode mode, const int *ids, int n, int *out)
{
    BpeSym sym[256];
    for (int i = 0; i < n; i++)
        sym[i].id = ids[i];
    bpe_link(sym, n);
    if (n > 0)
        bpe_run(w, sym, 0, mode, rules_pair, r);
    return bpe_collect(sym, n > 0 ? 0 : -1, out);
}

/* Plain re-implementation: rescan the word for the best pair (leftmost among equals) after
 * every merge; in BPE_MERGE_ALL mode merge every occurrence of that pair left to right, as
 * GPT-2's encoder.py bpe() does. */
static size_t run_naive(const Rules *r, BpeMode mode, const int *ids, int n, int *out)
{
    int w[256];
    memcpy(w, ids, (size_t)n * sizeof *w);
    for (;;) {
        int best = -1;
        for (int i = 0; i + 1 < n; i++)
            if (r->result[w[i]][w[i + 1]] >= 0 &&
                (best < 0 || r->prio[w[i]][w[i + 1]] > r->prio[w[best]][w[best + 1]]))
                best = i;
        if (best < 0)
            break;
        int a = w[best], b = w[best + 1], k = 0;
        for (int i = 0; i < n;) {
            int merge = i + 1 < n && (mode == BPE_MERGE_ALL ? (w[i] == a && w[i + 1] == b)
                                                            : i == best);
            if (merge) {
                w[k++] = r->result[a][b];
                i += 2;
            } else {
                w[k++] = w[i++];
            }
        }
        n = k;
    }
    memcpy(out, w, (size_t)n * sizeof *out);
    return (size_t)n;
}

static void assert_ids(const int *got, size_t n_got, const int *want, size_t n_want)
{
    assert_int_equal(n_got, n_want);
    for (size_t i = 0; i < n_want; i++)
        assert_int_equal(got[i], want[i]);
}

/* Higher priority merges first, whatever its position. */
static void test_priority_order(void **state)
{
    (void)state;
    Rules *r = malloc(sizeof *r);
    rules_clear(r);
    rules_add(r, 1, 2, 10, 1.0);  /* a b -> X */
    rules_add(r, 2, 3, 11, 5.0);  /* b c -> Y, better */
    rules_add(r, 10, 3, 12, 9.0); /* X c -> never reached once b c went first */
    BpeWork w = {0};
    int out[8];
    size_t n = run_core(&w, r, BPE_MERGE_ONE, (const int[]){1, 2, 3}, 3, out);
    assert_ids(out, n, (const int[]){1, 11}, 2);
    bpe_work_free(&w);
    free(r);
}

/* Equal priorities merge leftmost first: a a a -> A a, not a A. */
static void test_leftmost_tie(void **state)
{
    (void)state;
    Rules *r = malloc(sizeof *r);
    rules_clear(r);
    rules_add(r, 1, 1, 20, 0.0);
    BpeWork w = {0};
    int out[8];
    size_t n = run_core(&w, r, BPE_MERGE_ONE, (const int[]){1, 1, 1}, 3, out);
    assert_ids(out, n, (const int[]){20, 1}, 2);
    n = run_core(&w, r, BPE_MERGE_ALL, (const int[]){1, 1, 1, 1, 1}, 5, out);
    assert_ids(out, n, (const int[]){20, 20, 1}, 3);
    bpe_work_free(&w);
    free(r);
}

/* A merge that creates a better pair: one-at-a-time takes it at once, merge-all finishes the
 * current pair everywhere first.  a b a b with (a b) -> X at 1 and (X a) -> Y at 10. */
static void test_modes_differ(void **state)
{
    (void)state;
    Rules *r = malloc(sizeof *r);
    rules_clear(r);
    rules_add(r, 1, 2, 10, 1.0);
    rules_add(r, 10, 1, 11, 10.0);
    BpeWork w = {0};
    int out[8];
    const int word[] = {1, 2, 1, 2};
    size_t n = run_core(&w, r, BPE_MERGE_ONE, word, 4, out);
    assert_ids(out, n, (const int[]){11, 2}, 2);
    n = run_core(&w, r, BPE_MERGE_ALL, word, 4, out);
    assert_ids(out, n, (const int[]){10, 10}, 2);
    bpe_work_free(&w);
    free(r);
}

/* Merges chain up to one symbol; stale entries (pairs whose symbols changed) are skipped. */
static void test_chain_and_stale(void **state)
{
    (void)state;
    Rules *r = malloc(sizeof *r);
    rules_clear(r);
    rules_add(r, 1, 2, 10, 3.0); /* a b -> X */
    rules_add(r, 2, 3, 11, 2.0); /* b c -> stale after a b merged */
    rules_add(r, 10, 3, 12, 1.0);
    rules_add(r, 12, 4, 13, 0.5);
    BpeWork w = {0};
    int out[8];
    for (int mode = BPE_MERGE_ONE; mode <= BPE_MERGE_ALL; mode++) {
        size_t n = run_core(&w, r, (BpeMode)mode, (const int[]){1, 2, 3, 4}, 4, out);
        assert_ids(out, n, (const int[]){13}, 1);
    }
    bpe_work_free(&w);
    free(r);
}

/* Empty and one-symbol words; words with no rule stay as they are. */
static void test_trivial_words(void **state)
{
    (void)state;
    Rules *r = malloc(sizeof *r);
    rules_clear(r);
    BpeWork w = {0};
    int out[8];
    assert_int_equal(run_core(&w, r, BPE_MERGE_ONE, NULL, 0, out), 0);
    size_t n = run_core(&w, r, BPE_MERGE_ALL, (const int[]){7}, 1, out);
    assert_ids(out, n, (const int[]){7}, 1);
    n = run_core(&w, r, BPE_MERGE_ONE, (const int[]){3, 4, 5}, 3, out);
    assert_ids(out, n, (const int[]){3, 4, 5}, 3);
    bpe_work_free(&w);
    bpe_work_free(&w); /* a zeroed BpeWork is fine */
    free(r);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random rule tables and words: the core and the quadratic version agree in both modes.
 * Priorities are distinct ranks (as a merges list gives) or a few repeated scores (as
 * SentencePiece scores can tie, one-at-a-time only). */
static void test_random_against_naive(void **state)
{
    (void)state;
    Rules *r = malloc(sizeof *r);
    BpeWork w = {0}; /* reused across all words, as the encoders do */
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (int trial = 0; trial < 400; trial++) {
        rules_clear(r);
        int alphabet = 2 + (int)(rng_next(&seed) % 4);
        int next_id = alphabet;
        int ties = trial % 2;
        for (int k = 0; k < 40 && next_id < MAX_ID; k++) {
            int a = (int)(rng_next(&seed) % (uint64_t)next_id);
            int b = (int)(rng_next(&seed) % (uint64_t)next_id);
            if (r->result[a][b] >= 0)
                continue;
            double prio = ties ? (double)(rng_next(&seed) % 3) : -(double)k;
            rules_add(r, a, b, next_id++, prio);
        }
        int word[200], got[200], want[200];
        int n = (int)(rng_next(&seed) % 200);
        for (int i = 0; i < n; i++)
            word[i] = (int)(rng_next(&seed) % (uint64_t)alphabet);
        size_t ng = run_core(&w, r, BPE_MERGE_ONE, word, n, got);
        size_t nw = run_naive(r, BPE_MERGE_ONE, word, n, want);
        assert_ids(got, ng, want, nw);
        if (!ties) {
            ng = run_core(&w, r, BPE_MERGE_ALL, word, n, got);
            nw = run_naive(r, BPE_MERGE_ALL, word, n, want);
            assert_ids(got, ng, want, nw);
        }
    }
    bpe_work_free(&w);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_leftmost_tie),
        cmocka_unit_test(test_modes_differ),
        cmocka_unit_test(test_chain_and_stale),
        cmocka_unit_test(test_trivial_words),
        cmocka_unit_test(test_random_against_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
