/* test_local_batch.c: the in-process backend's forward_n against its per-position forward.
 * A prompt's embeddings run through forward_n in passes of up to max_batch positions (chunks
 * of several sizes, then single positions after it) must leave exactly the hidden states and
 * KV caches that one forward per position leaves: the next positions' outputs, which read
 * those caches, are compared too.  On synthetic LLaMA and GPT-2 models (fp32 and q4_0) and on
 * stories260K (skipped when ../shared/models lacks it); with speculation emulated, forward_n
 * runs position by position and matches as well. */
#define _XOPEN_SOURCE 700
#include "test_helpers.h"

#include "config_io.h"
#include "convert.h"
#include "generate.h"
#include "h5io.h"
#include "kernels.h"
#include "model.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROMPT 23
#define AFTER 4 /* single positions after the prompt */

/* Both sides of one comparison: a per-position model and a batched one on the same file. */
static void compare_file(const char *path, int max_batch, const unsigned char *spec)
{
    char err[512];
    hid_t f = h5io_open_read(path, err, sizeof err);
    if (f < 0)
        fail_msg("%s", err);
    ModelConfig c;
    if (config_read(&c, f, path, err, sizeof err) != 0)
        fail_msg("%s", err);
    const int kv_cap = PROMPT + AFTER;
    LocalModel *a, *b;
    HeadW h;
    assert_int_equal(local_model_load(&a, &c, f, path, kv_cap, err, sizeof err), 0);
    assert_int_equal(local_model_load(&b, &c, f, path, kv_cap, err, sizeof err), 0);
    assert_int_equal(model_load_head(&h, &c, f, path, err, sizeof err), 0);
    local_model_set_max_batch(b, max_batch);
    /* Speculation decides once per pass (on the largest ratio of its rows): with passes of
     * one row it is the per-position decision at any tolerance; with longer passes only
     * tolerance 0 (never kept) must give the per-position bits. */
    const float tol = max_batch > 1 ? 0.0f : 0.5f;
    if (spec) {
        local_model_set_speculation(a, spec, tol);
        local_model_set_speculation(b, spec, tol);
    }
    LayerBackend ba = local_model_backend(a), bb = local_model_backend(b);
    assert_non_null(bb.forward_n);
    assert_int_equal(bb.max_batch, max_batch);
    assert_int_equal(bb.logits_n(bb.ctx, NULL, 1), 0); /* the controller computes them */
    const size_t dim = (size_t)c.dim, total = PROMPT + AFTER;
    float *xa = xcalloc(total * dim, sizeof(float)), *xb = xcalloc(total * dim, sizeof(float));
    int tokens[PROMPT + AFTER];
    for (int p = 0; p < (int)total; p++) {
        tokens[p] = (p * 37 + 5) % c.vocab_size;
        model_embed(&c, &h, tokens[p], p, xa + (size_t)p * dim);
    }
    memcpy(xb, xa, total * dim * sizeof(float));
    for (int p = 0; p < (int)total; p++)
        ba.forward(ba.ctx, xa + (size_t)p * dim, p, tokens[p]);
    /* the prompt in chunks of 1, max_batch and more than max_batch (split inside), then the
     * rest of it in one call; the positions after it one at a time */
    const int chunks[] = {1, max_batch, max_batch + 3};
    int p = 0;
    for (int k = 0; k < 3 && p < PROMPT; k++) {
        const int n = chunks[k] < PROMPT - p ? chunks[k] : PROMPT - p;
        bb.forward_n(bb.ctx, xb + (size_t)p * dim, p, n, tokens + p, 0);
        p += n;
    }
    if (p < PROMPT)
        bb.forward_n(bb.ctx, xb + (size_t)p * dim, p, PROMPT - p, tokens + p, 1);
    for (p = PROMPT; p < (int)total; p++)
        bb.forward_n(bb.ctx, xb + (size_t)p * dim, p, 1, tokens + p, 1);
    for (p = 0; p < (int)total; p++)
        if (memcmp(xa + (size_t)p * dim, xb + (size_t)p * dim, dim * sizeof(float)) != 0)
            fail_msg("%s (max_batch %d%s): hidden state of position %d differs", path,
                     max_batch, spec ? ", speculation" : "", p);
    if (spec) {
        long ta, ka, tb, kb;
        local_model_spec_counts(a, &ta, &ka);
        local_model_spec_counts(b, &tb, &kb);
        if (max_batch == 1)
            assert_true(ta == tb && ka == kb && ta > 0);
        else /* fewer passes than positions, one decision each */
            assert_true(tb > 0 && tb < ta && ka == 0 && kb == 0);
    }
    free(xa), free(xb);
    model_free_head(&h);
    local_model_free(a);
    local_model_free(b);
    H5Fclose(f);
}

static void synthetic(const char *spec, const char *quantize)
{
    char dir[256], path[512], err[512];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "local_batch"), 0);
    test_path(path, sizeof path, dir, "m.h5");
    if (convert_make_synthetic(spec, 7, 0, NULL, path, quantize, NULL, err, sizeof err) != 0)
        fail_msg("%s", err);
    for (int th = 1; th <= 2; th++) {
        kernels_set_threads(th);
        compare_file(path, 8, NULL);
        compare_file(path, 1, NULL);
    }
    kernels_set_threads(1);
    const unsigned char spec_all[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    compare_file(path, 8, spec_all);
    compare_file(path, 1, spec_all);
    test_tmpdir_remove(dir);
}

static void test_synthetic_llama(void **state)
{
    (void)state;
    const char *spec = "llama:dim=64,layers=2,heads=8,kv_heads=4,ffn=172,vocab=512,ctx=64";
    synthetic(spec, NULL);
    synthetic(spec, "q4_0");
}

static void test_synthetic_gpt2(void **state)
{
    (void)state;
    synthetic("gpt2:dim=64,layers=2,heads=4,vocab=512,ctx=64", NULL);
}

static void test_stories260k(void **state)
{
    (void)state;
    TEST_NEED_SHARED("stories260K/stories260K.bin");
    char dir[256], path[512], ck[512], tok[512], err[512];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "local_batch"), 0);
    test_path(path, sizeof path, dir, "s.h5");
    snprintf(ck, sizeof ck, "%s/stories260K/stories260K.bin", test_shared_dir());
    snprintf(tok, sizeof tok, "%s/stories260K/tok512.bin", test_shared_dir());
    if (convert_from_llama2c(ck, tok, path, NULL, NULL, err, sizeof err) != 0)
        fail_msg("%s", err);
    compare_file(path, 16, NULL);
    compare_file(path, 5, NULL);
    test_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_llama),
        cmocka_unit_test(test_synthetic_gpt2),
        cmocka_unit_test(test_stories260k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
