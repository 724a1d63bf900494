/* test_serve_slots.c: --parallel's batcher (src/app/serve_slots.c, compiled into this test)
 * under the token loop, without HTTP.  Five generations (greedy and sampled, prompts of
 * different lengths, prompt chunks of 3 rows) run alone, one after another on the model's own
 * backend, then together: each on a thread of its own with a slot's backend of a batcher of
 * three slots, the first three holding the slots from the start (their threads started at
 * different moments: the first step waits for all three), the fourth and fifth taking the
 * slots the first ones leave and joining the others' steps.  Every generation's tokens and text must equal its run alone,
 * and the passes must have carried several sequences.  On weights/austen-llama.h5 and a
 * synthetic q4_0 model, at 1 and 2 kernel threads. */
#define _XOPEN_SOURCE 700
#include "test_helpers.h"

#include "config_io.h"
#include "convert.h"
#include "h5io.h"
#include "kernels.h"
#include "../../src/app/serve.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NGEN 5
#define SLOTS 3
#define BATCH 3

static const char *prompts[NGEN] = {
    "It is a truth universally acknowledged", "Mr. Darcy", "She was not",
    "The weather was fine and the whole party", "Elizabeth"};

typedef struct {
    const ModelConfig *c;
    const Tokenizer *tok;
    const HeadW *head;
    Batcher *b;
    int slot, i;
    int delay_ms;
    GenResult res;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *free_slots; /* [SLOTS] 1: free */
    char err[256];   /* a failure (cmocka fails on the main thread only) */
} Gen;

static void gen_options(GenOptions *g, int i)
{
    memset(g, 0, sizeof *g);
    g->prompt = prompts[i];
    g->steps = 64;
    g->n_predict = 12 + 3 * i;
    g->temperature = i % 2 ? 0.8f : 0.0f;
    g->top_p = 0.95f;
    g->seed = 11 + (uint64_t)i;
    g->batch = BATCH;
    g->special = 1;
}

static void *gen_main(void *arg)
{
    Gen *g = arg;
    if (g->delay_ms) {
        struct timespec ts = {0, (long)g->delay_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* the fourth and fifth wait for a free slot and join the running ones, as the server's
     * requests do */
    pthread_mutex_lock(g->mu);
    while (g->slot < 0) {
        for (int s = 0; s < SLOTS && g->slot < 0; s++)
            if (g->free_slots[s]) {
                g->free_slots[s] = 0;
                g->slot = s;
                batcher_join(g->b, s);
            }
        if (g->slot < 0)
            pthread_cond_wait(g->cv, g->mu);
    }
    pthread_mutex_unlock(g->mu);
    LayerBackend be = batcher_backend(g->b, g->slot);
    GenOptions o;
    gen_options(&o, g->i);
    if (generate_run(g->c, g->tok, g->head, &be, &o, &g->res, g->err, sizeof g->err) != 0 &&
        !g->err[0])
        snprintf(g->err, sizeof g->err, "failed");
    batcher_leave(g->b, g->slot);
    pthread_mutex_lock(g->mu);
    g->free_slots[g->slot] = 1;
    pthread_cond_broadcast(g->cv);
    pthread_mutex_unlock(g->mu);
    return NULL;
}

static void compare_file(const char *path, int threads)
{
    char err[512];
    kernels_set_threads(threads);
    hid_t f = h5io_open_read(path, err, sizeof err);
    ModelConfig c;
    Tokenizer *tok;
    HeadW head;
    LocalModel *a, *m;
    if (f < 0 || config_read(&c, f, path, err, sizeof err) < 0 ||
        tokenizer_h5_read(&tok, f, path, err, sizeof err) < 0 ||
        model_load_head(&head, &c, f, path, err, sizeof err) < 0 ||
        local_model_load(&a, &c, f, path, 64, err, sizeof err) < 0 ||
        local_model_load(&m, &c, f, path, 64, err, sizeof err) < 0)
        fail_msg("%s", err);
    local_model_set_max_batch(a, BATCH);
    const int cap = BATCH + SLOTS - 1;
    local_model_set_max_batch(m, cap);
    local_model_set_slots(m, SLOTS);
    /* alone */
    GenResult ref[NGEN];
    LayerBackend ba = local_model_backend(a);
    for (int i = 0; i < NGEN; i++) {
        GenOptions o;
        gen_options(&o, i);
        if (generate_run(&c, tok, &head, &ba, &o, &ref[i], err, sizeof err) != 0)
            fail_msg("alone %d: %s", i, err);
    }
    /* together */
    const LayerBackend bm = local_model_backend(m);
    Batcher *b = batcher_new(&bm, &c, &head, SLOTS, cap);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int free_slots[SLOTS] = {0, 0, 0};
    Gen g[NGEN];
    pthread_t th[NGEN];
    const int delays[NGEN] = {0, 5, 20, 0, 3};
    for (int i = 0; i < NGEN; i++) {
        g[i] = (Gen){&c, tok, &head, b, i < SLOTS ? i : -1, i, delays[i], {0}, &mu, &cv,
                     free_slots, ""};
        if (i < SLOTS) /* the first three hold the slots from the start: they share passes */
            batcher_join(b, i);
        pthread_create(&th[i], NULL, gen_main, &g[i]);
    }
    for (int i = 0; i < NGEN; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NGEN; i++)
        if (g[i].err[0])
            fail_msg("generation %d together: %s", i, g[i].err);
    BatchStats st;
    batcher_stats(b, &st);
    assert_true(st.shared > 0 && st.max_seqs >= 2);
    for (int i = 0; i < NGEN; i++) {
        const GenResult *r = &ref[i], *t = &g[i].res;
        if (r->n_tokens != t->n_tokens ||
            memcmp(r->tokens, t->tokens, (size_t)r->n_tokens * sizeof(int)) != 0 ||
            strcmp(r->gen_text, t->gen_text) != 0)
            fail_msg("%s (%d threads): generation %d together '%s', alone '%s'", path, threads,
                     i, t->gen_text, r->gen_text);
        assert_string_equal(r->stopped_by, t->stopped_by);
        generate_result_free(&ref[i]);
        generate_result_free(&g[i].res);
    }
    batcher_free(b);
    local_model_free(a);
    local_model_free(m);
    model_free_head(&head);
    tokenizer_free(tok);
    H5Fclose(f);
}

static void test_austen_llama(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/weights/austen-llama.h5", HEADSPLIT_SOURCE_DIR);
    compare_file(path, 1);
    compare_file(path, 2);
}

static void test_synthetic_q4_0(void **state)
{
    (void)state;
    char dir[256], path[512], err[512];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "serve_slots"), 0);
    test_path(path, sizeof path, dir, "m.h5");
    if (convert_make_synthetic("llama:dim=64,layers=2,heads=8,kv_heads=4,ffn=172,vocab=512,"
                               "ctx=128", 7, 0, NULL, path, "q4_0", NULL, err, sizeof err) != 0)
        fail_msg("%s", err);
    compare_file(path, 2);
    test_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_austen_llama),
        cmocka_unit_test(test_synthetic_q4_0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
