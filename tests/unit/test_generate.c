/* test_generate.c: generate_run's passes of several positions and speculative decoding, on
 * the trained models in weights/ (austen-llama the target, austen-gpt2 a draft with the same
 * tokenizer).  The target runs behind a test backend with forward_n (one forward per
 * position inside it) that checks the calls: sizes within max_batch, no position skipped,
 * and the next_n hints.  Everything must equal the one-position path bit for bit: tokens,
 * text and the raw logits of every position. */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config_io.h"
#include "generate.h"
#include "h5io.h"
#include "draft.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_helpers.h"

static char err[1024];

typedef struct {
    hid_t file;
    ModelConfig c;
    Tokenizer *tok;
    HeadW head;
    LocalModel *m;
} Model;

static void model_open(Model *mo, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/weights/%s", HEADSPLIT_SOURCE_DIR, name);
    memset(mo, 0, sizeof *mo);
    mo->file = h5io_open_read(path, err, sizeof err);
    if (mo->file < 0 || config_read(&mo->c, mo->file, path, err, sizeof err) < 0 ||
        tokenizer_h5_read(&mo->tok, mo->file, path, err, sizeof err) < 0 ||
        model_load_head(&mo->head, &mo->c, mo->file, path, err, sizeof err) < 0 ||
        local_model_load(&mo->m, &mo->c, mo->file, path, mo->c.context_length, err,
                         sizeof err) < 0)
        fail_msg("%s", err);
}

static void model_close(Model *mo)
{
    local_model_free(mo->m);
    model_free_head(&mo->head);
    tokenizer_free(mo->tok);
    H5Fclose(mo->file);
}

/* The test backend: forward_n over the local model's one-position forward. */
typedef struct {
    LayerBackend inner;
    int dim, max_batch;
    int hint;          /* next_n of the last call (-1: none, after a one-position forward) */
    int hint_misses;   /* calls whose size differed from a non-zero hint */
    int written;       /* one past the highest position run */
    int calls_n, batched, calls_1;
} TestBatch;

static void tb_check(TestBatch *t, int pos, int n)
{
    if (n < 1 || n > t->max_batch)
        fail_msg("forward_n with %d positions (max_batch %d)", n, t->max_batch);
    if (pos < 0 || pos > t->written)
        fail_msg("position %d run before %d..%d", pos, t->written, pos - 1);
    if (t->hint > 0 && t->hint != n)
        t->hint_misses++;
    if (pos + n > t->written)
        t->written = pos + n;
}

static void tb_forward_n(void *ctx, float *x, int pos, int n, const int *tokens, int next_n)
{
    TestBatch *t = ctx;
    tb_check(t, pos, n);
    t->hint = next_n;
    t->calls_n++;
    t->batched += n > 1;
    for (int j = 0; j < n; j++)
        t->inner.forward(t->inner.ctx, x + (size_t)j * (size_t)t->dim, pos + j, tokens[j]);
}

static void tb_forward(void *ctx, float *x, int pos, int token)
{
    TestBatch *t = ctx;
    tb_check(t, pos, 1);
    t->hint = -1;
    t->calls_1++;
    t->inner.forward(t->inner.ctx, x, pos, token);
}

static LayerBackend tb_backend(TestBatch *t, Model *mo, int max_batch)
{
    memset(t, 0, sizeof *t);
    t->inner = local_model_backend(mo->m);
    t->dim = mo->c.dim;
    t->max_batch = max_batch;
    t->hint = -1;
    return (LayerBackend){.ctx = t, .forward = tb_forward, .forward_n = tb_forward_n,
                          .max_batch = max_batch};
}

static const char PROMPT[] = "\"My dear Mr. Bennet,\" said his lady to him one day, \"have you";

static GenOptions base_options(void)
{
    GenOptions g;
    memset(&g, 0, sizeof g);
    g.prompt = PROMPT;
    g.steps = 1 << 20;
    g.top_p = 1;
    g.seed = 42;
    g.n_predict = 40;
    return g;
}

/* One generation with its logits file in memory (*logits, *n_logits bytes; freed by the
 * caller). */
static void run(Model *t, LayerBackend *be, GenOptions g, GenResult *res, char **logits,
                size_t *n_logits)
{
    FILE *f = open_memstream(logits, n_logits);
    g.logits_out = f;
    if (generate_run(&t->c, t->tok, &t->head, be, &g, res, err, sizeof err) < 0)
        fail_msg("%s", err);
    fclose(f);
}

/* The same tokens, text, stop and logits as the reference run. */
static void assert_same(const GenResult *a, const char *la, size_t na, const GenResult *b,
                        const char *lb, size_t nb)
{
    assert_int_equal(a->n_tokens, b->n_tokens);
    assert_memory_equal(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof(int));
    assert_string_equal(a->text, b->text);
    assert_string_equal(a->gen_text, b->gen_text);
    assert_string_equal(a->stopped_by, b->stopped_by);
    assert_int_equal(a->n_forward, b->n_forward);
    assert_int_equal(a->next_pos, b->next_pos);
    assert_int_equal(a->n_gen, b->n_gen);
    assert_int_equal(na, nb);
    assert_memory_equal(la, lb, na);
}

static void test_batched_prompt(void **state)
{
    (void)state;
    Model t;
    model_open(&t, "austen-llama.h5");
    LayerBackend one = local_model_backend(t.m);
    GenResult ref, res;
    char *lref, *l;
    size_t nref, n;
    run(&t, &one, base_options(), &ref, &lref, &nref);
    assert_true(ref.n_prompt > 10 && ref.n_gen == 40);
    assert_int_equal(ref.passes, ref.n_forward); /* one position per pass */
    const int batches[] = {2, 3, 8, 64};
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        TestBatch tb;
        LayerBackend be = tb_backend(&tb, &t, 8);
        GenOptions g = base_options();
        g.batch = batches[i];
        run(&t, &be, g, &res, &l, &n);
        assert_same(&ref, lref, nref, &res, l, n);
        int rows = batches[i] < 8 ? batches[i] : 8;
        /* the prompt in ceil(n_prompt / rows) passes, then one per new token */
        assert_int_equal(res.passes, (ref.n_prompt + rows - 1) / rows + ref.n_gen - 1);
        assert_true(tb.batched > 0);
        assert_int_equal(tb.hint_misses, 0);
        assert_int_equal(res.n_prompt_run, ref.n_prompt);
        generate_result_free(&res);
        free(l);
    }
    /* a backend without forward_n: one forward per position, in chunks, same bits; and
     * without --logits-out only the last prompt row's logits are computed */
    GenOptions g = base_options();
    g.batch = 64;
    run(&t, &one, g, &res, &l, &n);
    assert_same(&ref, lref, nref, &res, l, n);
    generate_result_free(&res);
    free(l);
    TestBatch tb;
    LayerBackend be = tb_backend(&tb, &t, 16);
    g.batch = 16;
    if (generate_run(&t.c, t.tok, &t.head, &be, &g, &res, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_memory_equal(res.tokens, ref.tokens, (size_t)ref.n_tokens * sizeof(int));
    generate_result_free(&res);
    generate_result_free(&ref);
    free(lref);
    model_close(&t);
}

/* A draft with the target's own weights: every drafted token is kept. */
static void test_self_draft_accepts_all(void **state)
{
    (void)state;
    Model t, d;
    model_open(&t, "austen-llama.h5");
    model_open(&d, "austen-llama.h5");
    LayerBackend one = local_model_backend(t.m);
    GenResult ref, res;
    char *lref, *l;
    size_t nref, n;
    run(&t, &one, base_options(), &ref, &lref, &nref);
    GenDraft draft = {.c = &d.c, .head = &d.head, .backend = local_model_backend(d.m),
                      .kv_cap = d.c.context_length, .k = 4};
    TestBatch tb;
    LayerBackend be = tb_backend(&tb, &t, 64);
    GenOptions g = base_options();
    g.batch = 64;
    g.draft = &draft;
    run(&t, &be, g, &res, &l, &n);
    assert_same(&ref, lref, nref, &res, l, n);
    assert_true(res.draft_tokens > 0);
    assert_int_equal(res.draft_accepted, res.draft_tokens);
    /* 40 new tokens: the prompt's pass chooses one, each round of 4 drafts adds 5 */
    assert_int_equal(res.gen_passes, 1 + (40 - 1 + 4) / 5);
    assert_int_equal(tb.hint_misses, 0);
    generate_result_free(&res);
    free(l);
    /* --batch 1 with a draft: the prompt one position per pass, only rounds batched */
    draft.n_valid = 0;
    be = tb_backend(&tb, &t, 64);
    g.batch = 1;
    run(&t, &be, g, &res, &l, &n);
    assert_same(&ref, lref, nref, &res, l, n);
    assert_int_equal(tb.batched, res.draft_rounds);
    assert_int_equal(res.passes, ref.n_prompt + res.draft_rounds);
    generate_result_free(&res);
    free(l);
    /* auto K, everything kept, a backend that takes 3 positions: K stays within 2 */
    draft.n_valid = 0;
    draft.k = 0;
    be = tb_backend(&tb, &t, 3);
    g.batch = 64;
    run(&t, &be, g, &res, &l, &n);
    assert_same(&ref, lref, nref, &res, l, n);
    assert_true(res.draft_k_sum <= 2L * res.draft_rounds);
    /* every round one forward_n: the prompt's chunks of 3 (2 or 3 wide), then the rounds */
    assert_int_equal(tb.batched, ref.n_prompt / 3 + (ref.n_prompt % 3 == 2) + res.draft_rounds);
    generate_result_free(&res);
    free(l);
    generate_result_free(&ref);
    free(lref);
    model_close(&d);
    model_close(&t);
}

/* A different draft (GPT-2 architecture, same tokenizer): greedy output identical to decoding
 * without it for every K, fixed or auto, and the stop conditions hold exactly. */
static void test_draft_greedy_identical(void **state)
{
    (void)state;
    Model t, d;
    model_open(&t, "austen-llama.h5");
    model_open(&d, "austen-gpt2.h5");
    LayerBackend one = local_model_backend(t.m);
    GenDraft draft = {.c = &d.c, .head = &d.head, .backend = local_model_backend(d.m),
                      .kv_cap = d.c.context_length};
    GenResult ref, res;
    char *lref, *l;
    size_t nref, n;
    run(&t, &one, base_options(), &ref, &lref, &nref);
    const int ks[] = {1, 2, 4, 8, 0};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        draft.k = ks[i];
        draft.n_valid = 0;
        TestBatch tb;
        LayerBackend be = tb_backend(&tb, &t, 9);
        GenOptions g = base_options();
        g.batch = 9;
        g.draft = &draft;
        run(&t, &be, g, &res, &l, &n);
        assert_same(&ref, lref, nref, &res, l, n);
        assert_true(res.draft_accepted > 0 && res.draft_accepted < res.draft_tokens);
        assert_true(res.gen_passes < res.n_gen);
        generate_result_free(&res);
        free(l);
        /* and on the loop path (a target backend without forward_n) */
        g.batch = 1;
        run(&t, &one, g, &res, &l, &n);
        assert_same(&ref, lref, nref, &res, l, n);
        generate_result_free(&res);
        free(l);
    }
    /* stop conditions: a stop string inside the reference's new text, --steps, -n */
    GenOptions g = base_options();
    char stop[8];
    assert_true(strlen(ref.gen_text) > 30);
    memcpy(stop, ref.gen_text + 20, 5);
    stop[5] = '\0';
    const char *stops[1] = {stop};
    GenOptions variants[3];
    variants[0] = g;
    variants[0].stops = stops;
    variants[0].n_stops = 1;
    variants[1] = g;
    variants[1].steps = ref.n_prompt + 7;
    variants[2] = g;
    variants[2].n_predict = 6;
    for (int v = 0; v < 3; v++) {
        GenResult a, b;
        char *la, *lb;
        size_t na, nb;
        run(&t, &one, variants[v], &a, &la, &na);
        draft.k = 4;
        draft.n_valid = 0;
        TestBatch tb;
        LayerBackend be = tb_backend(&tb, &t, 8);
        variants[v].draft = &draft;
        variants[v].batch = 8;
        run(&t, &be, variants[v], &b, &lb, &nb);
        assert_same(&a, la, na, &b, lb, nb);
        assert_string_equal(b.stopped_by, v == 0 ? "stop" : v == 1 ? "steps" : "n_predict");
        generate_result_free(&a);
        generate_result_free(&b);
        free(la);
        free(lb);
    }
    generate_result_free(&ref);
    free(lref);
    model_close(&d);
    model_close(&t);
}

/* Sampling with a draft: each position's token comes from that position's own random
 * numbers, so the tokens do not depend on K; --resume's forced tokens are kept. */
static void test_draft_sampling(void **state)
{
    (void)state;
    Model t, d;
    model_open(&t, "austen-llama.h5");
    model_open(&d, "austen-gpt2.h5");
    GenDraft draft = {.c = &d.c, .head = &d.head, .backend = local_model_backend(d.m),
                      .kv_cap = d.c.context_length};
    GenResult ref, res;
    char *lref, *l;
    size_t nref, n;
    GenOptions g = base_options();
    g.temperature = 0.9f;
    g.top_k = 50;
    g.repeat_penalty = 1.1f;
    g.draft = &draft;
    g.batch = 8;
    draft.k = 1;
    TestBatch tb;
    LayerBackend be = tb_backend(&tb, &t, 9);
    run(&t, &be, g, &ref, &lref, &nref);
    const int ks[] = {3, 8, 0};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        draft.k = ks[i];
        draft.n_valid = 0;
        be = tb_backend(&tb, &t, 9);
        run(&t, &be, g, &res, &l, &n);
        assert_same(&ref, lref, nref, &res, l, n);
        generate_result_free(&res);
        free(l);
    }
    /* forced tokens (--resume) replace what the rule would choose, and the run goes on */
    int forced[5] = {300, 301, 302, 303, 304};
    g.forced = forced;
    g.n_forced = 5;
    draft.k = 4;
    draft.n_valid = 0;
    be = tb_backend(&tb, &t, 9);
    run(&t, &be, g, &res, &l, &n);
    assert_memory_equal(res.tokens + res.n_prompt, forced, sizeof forced);
    assert_int_equal(res.n_gen, 40);
    generate_result_free(&res);
    free(l);
    generate_result_free(&ref);
    free(lref);
    model_close(&d);
    model_close(&t);
}

/* A second generation that continues the first (a chat turn): the draft, behind by the
 * whole sequence, catches up from the history; tokens as without a draft. */
static void test_draft_continues(void **state)
{
    (void)state;
    Model t, d;
    model_open(&t, "austen-llama.h5");
    model_open(&d, "austen-gpt2.h5");
    GenDraft draft = {.c = &d.c, .head = &d.head, .backend = local_model_backend(d.m),
                      .kv_cap = d.c.context_length, .k = 3};
    GenResult first[2], second[2];
    int *hist[2];
    for (int with = 0; with < 2; with++) {
        LayerBackend one = local_model_backend(t.m);
        GenOptions g = base_options();
        g.n_predict = 12;
        g.batch = 4;
        g.draft = with ? &draft : NULL;
        if (generate_run(&t.c, t.tok, &t.head, &one, &g, &first[with], err, sizeof err) < 0)
            fail_msg("%s", err);
        const GenResult *r = &first[with];
        hist[with] = malloc((size_t)r->next_pos * sizeof(int));
        memcpy(hist[with], r->tokens, (size_t)r->next_pos * sizeof(int));
        int more[3] = {r->tokens[r->n_tokens - 1], 280, 290};
        draft.n_valid = 0; /* as if the draft had not followed: it catches up */
        g.prompt_ids = more;
        g.n_prompt_ids = 3;
        g.start_pos = r->next_pos;
        g.history = hist[with];
        if (generate_run(&t.c, t.tok, &t.head, &one, &g, &second[with], err, sizeof err) < 0)
            fail_msg("%s", err);
    }
    assert_int_equal(first[0].n_tokens, first[1].n_tokens);
    assert_memory_equal(first[0].tokens, first[1].tokens, (size_t)first[0].n_tokens * sizeof(int));
    assert_int_equal(second[0].n_tokens, second[1].n_tokens);
    assert_memory_equal(second[0].tokens, second[1].tokens,
                        (size_t)second[0].n_tokens * sizeof(int));
    assert_true(second[1].draft_tokens > 0);
    for (int with = 0; with < 2; with++) {
        generate_result_free(&first[with]);
        generate_result_free(&second[with]);
        free(hist[with]);
    }
    model_close(&d);
    model_close(&t);
}

/* The repeat penalty looks back over the whole sequence: a continuation (a chat turn) whose
 * history holds the earlier positions chooses as one call over the whole sequence does, and
 * (the control) not as one that forgets them. */
static void test_penalty_history(void **state)
{
    (void)state;
    Model t;
    model_open(&t, "austen-llama.h5");
    LayerBackend be = local_model_backend(t.m);
    GenOptions g = base_options();
    g.n_predict = 40;
    GenResult seed, whole, cont, forgot;
    if (generate_run(&t.c, t.tok, &t.head, &be, &g, &seed, err, sizeof err) < 0)
        fail_msg("%s", err);
    const int n = seed.n_tokens, k = n - 2; /* a looping greedy text: repeats to penalize */
    g.repeat_penalty = 2.0f;
    g.repeat_last_n = 64;
    g.n_predict = 12;
    g.prompt = NULL;
    g.prompt_ids = seed.tokens;
    g.n_prompt_ids = n;
    if (generate_run(&t.c, t.tok, &t.head, &be, &g, &whole, err, sizeof err) < 0)
        fail_msg("%s", err);
    GenOptions first = g; /* positions 0..k-1 into the KV caches, nothing sampled */
    first.n_prompt_ids = k;
    first.steps = k;
    first.n_predict = 0;
    GenResult r0;
    if (generate_run(&t.c, t.tok, &t.head, &be, &first, &r0, err, sizeof err) < 0)
        fail_msg("%s", err);
    generate_result_free(&r0);
    for (int hist = 1; hist >= 0; hist--) {
        GenOptions c = g;
        c.prompt_ids = seed.tokens + k;
        c.n_prompt_ids = n - k;
        c.start_pos = k;
        c.history = hist ? seed.tokens : NULL;
        if (generate_run(&t.c, t.tok, &t.head, &be, &c, hist ? &cont : &forgot, err,
                         sizeof err) < 0)
            fail_msg("%s", err);
    }
    assert_int_equal(cont.n_gen, whole.n_gen);
    assert_memory_equal(cont.tokens + cont.n_prompt, whole.tokens + whole.n_prompt,
                        (size_t)whole.n_gen * sizeof(int));
    assert_true(forgot.n_gen != whole.n_gen ||
                memcmp(forgot.tokens + forgot.n_prompt, whole.tokens + whole.n_prompt,
                       (size_t)whole.n_gen * sizeof(int)) != 0);
    generate_result_free(&seed);
    generate_result_free(&whole);
    generate_result_free(&cont);
    generate_result_free(&forgot);
    model_close(&t);
}

/* OpenAI's presence and frequency penalties through the token loop: with a presence penalty
 * far above any logit gap, greedy never picks a token already in the window (prompt and
 * reply), though without it the same generation repeats itself; a frequency penalty alone
 * changes the choice too, and off (0) leaves the tokens as they were. */
static void test_presence_frequency(void **state)
{
    (void)state;
    Model t;
    model_open(&t, "austen-llama.h5");
    LayerBackend be = local_model_backend(t.m);
    GenOptions g = base_options();
    g.n_predict = 30;
    g.repeat_last_n = 1 << 20; /* the whole sequence */
    GenResult plain, pres, freq, off;
    if (generate_run(&t.c, t.tok, &t.head, &be, &g, &plain, err, sizeof err) < 0)
        fail_msg("%s", err);
    int repeats = 0;
    for (int i = plain.n_prompt; i < plain.n_tokens; i++)
        for (int j = 0; j < i; j++)
            repeats += plain.tokens[j] == plain.tokens[i];
    assert_true(repeats > 0); /* the control: greedy text repeats tokens */
    GenOptions p = g;
    p.presence_penalty = 1000.0f;
    if (generate_run(&t.c, t.tok, &t.head, &be, &p, &pres, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_true(pres.n_gen > 0);
    for (int i = pres.n_prompt; i < pres.n_tokens; i++)
        for (int j = 0; j < i; j++)
            if (pres.tokens[j] == pres.tokens[i])
                fail_msg("token %d at %d repeats position %d despite the presence penalty",
                         pres.tokens[i], i, j);
    GenOptions f = g;
    f.frequency_penalty = 2.0f;
    if (generate_run(&t.c, t.tok, &t.head, &be, &f, &freq, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_true(freq.n_tokens != plain.n_tokens ||
                memcmp(freq.tokens, plain.tokens, (size_t)plain.n_tokens * sizeof(int)) != 0);
    GenOptions o = g;
    o.frequency_penalty = 0;
    o.presence_penalty = 0;
    o.repeat_penalty = 1.0f;
    if (generate_run(&t.c, t.tok, &t.head, &be, &o, &off, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_int_equal(off.n_tokens, plain.n_tokens);
    assert_memory_equal(off.tokens, plain.tokens, (size_t)plain.n_tokens * sizeof(int));
    generate_result_free(&plain);
    generate_result_free(&pres);
    generate_result_free(&freq);
    generate_result_free(&off);
    model_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_prompt),
        cmocka_unit_test(test_self_draft_accepts_all),
        cmocka_unit_test(test_draft_greedy_identical),
        cmocka_unit_test(test_draft_sampling),
        cmocka_unit_test(test_draft_continues),
        cmocka_unit_test(test_penalty_history),
        cmocka_unit_test(test_presence_frequency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
