/* test_local_slots.c: several sequences in the in-process backend's passes (--parallel's
 * slots).  Four sequences run alone (slot 0 of one model, each from position 0, prompt in
 * chunks through forward_n, then one position at a time) give the reference logits of every
 * position.  The same sequences then share passes on a second model with three slots,
 * staggered so that one sequence's prompt chunks share passes with the others' decode rows;
 * the fourth takes the first one's slot when it ends (a slot reused) and keeps the prefix
 * it shares with it (positions before `keep` are not run again).  Every logit of every
 * position must equal (memcmp) the alone run's: a sequence's logits do not depend on what
 * shares its passes.  The logits of a pass are computed as the server computes them, by
 * model_logits_rows_n over the rows of several sequences.  On synthetic LLaMA (fp32, q4_0,
 * f16 KV caches) and GPT-2 models, austen-llama from weights/ and, when ../shared has it,
 * stories260K; at 1 and 2 kernel threads. */
#define _XOPEN_SOURCE 700
#include "test_helpers.h"

#include "backend.h"
#include "config_io.h"
#include "convert.h"
#include "h5io.h"
#include "kernels.h"
#include "model.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NSEQ 4
#define SLOTS 3
#define MAXLEN 40

typedef struct {
    int len, prompt, chunk; /* positions in all; of which prompt; prompt rows per pass */
    int start;              /* the step it joins at */
    int keep;               /* positions it finds in its slot (a shared prefix) */
    int tokens[MAXLEN];
} Seq;

static void make_seqs(Seq *s, int vocab)
{
    const int len[NSEQ] = {30, 17, 25, 33}, prompt[NSEQ] = {11, 9, 14, 20};
    const int chunk[NSEQ] = {4, 3, 5, 6}, start[NSEQ] = {0, 2, 5, 0};
    for (int i = 0; i < NSEQ; i++) {
        s[i] = (Seq){len[i], prompt[i], chunk[i], start[i], 0, {0}};
        for (int p = 0; p < len[i]; p++)
            s[i].tokens[p] = (p * (31 + 6 * i) + 7 * i + 3) % vocab;
    }
    /* the fourth continues the first's first 8 tokens (the server's prefix reuse) */
    memcpy(s[3].tokens, s[0].tokens, 8 * sizeof(int));
    s[3].keep = 8;
}

static void compare_file(const char *path, int threads, int kv_type)
{
    char err[512];
    kernels_set_threads(threads);
    hid_t f = h5io_open_read(path, err, sizeof err);
    if (f < 0)
        fail_msg("%s", err);
    ModelConfig c;
    if (config_read(&c, f, path, err, sizeof err) != 0)
        fail_msg("%s", err);
    c.kv_type = kv_type;
    LocalModel *a, *b;
    HeadW h;
    assert_int_equal(local_model_load(&a, &c, f, path, MAXLEN, err, sizeof err), 0);
    assert_int_equal(local_model_load(&b, &c, f, path, MAXLEN, err, sizeof err), 0);
    assert_int_equal(model_load_head(&h, &c, f, path, err, sizeof err), 0);
    const int cap = 16;
    local_model_set_max_batch(a, cap);
    local_model_set_max_batch(b, cap);
    local_model_set_slots(b, SLOTS);
    assert_int_equal(local_model_slots(b), SLOTS);
    const size_t dim = (size_t)c.dim, V = (size_t)c.vocab_size;
    Seq seq[NSEQ];
    make_seqs(seq, c.vocab_size);
    Scratch sa, sb;
    model_scratch_init(&sa, &c, 1);
    model_scratch_init_batch(&sb, &c, 1, cap);
    /* alone: every position's logits */
    float *ref[NSEQ], *got[NSEQ];
    float *x = xcalloc((size_t)cap * dim, sizeof(float));
    LayerBackend ba = local_model_backend(a);
    for (int i = 0; i < NSEQ; i++) {
        const Seq *q = &seq[i];
        ref[i] = xcalloc((size_t)q->len * V, sizeof(float));
        got[i] = xcalloc((size_t)q->len * V, sizeof(float));
        for (int p = 0; p < q->len;) {
            const int n = p < q->prompt ? (q->prompt - p < q->chunk ? q->prompt - p : q->chunk)
                                        : 1;
            for (int j = 0; j < n; j++)
                model_embed(&c, &h, q->tokens[p + j], p + j, x + (size_t)j * dim);
            ba.forward_n(ba.ctx, x, p, n, q->tokens + p, 0);
            for (int j = 0; j < n; j++)
                model_logits(&c, &h, &sa, x + (size_t)j * dim, ref[i] + (size_t)(p + j) * V);
            p += n;
        }
    }
    /* together: each step one pass of every joined sequence's next rows */
    int next[NSEQ], slot[NSEQ] = {0, 1, 2, -1}, done = 0;
    for (int i = 0; i < NSEQ; i++)
        next[i] = seq[i].keep;
    float *lg = xcalloc((size_t)cap * V, sizeof(float));
    int passes = 0, mixed = 0;
    for (int step = 0; done < NSEQ; step++) {
        LocalRows rows[NSEQ];
        int who[NSEQ], nr = 0, total = 0, prompt_rows = 0, decode_rows = 0;
        for (int i = 0; i < NSEQ; i++) {
            const Seq *q = &seq[i];
            if (slot[i] < 0 || step < q->start || next[i] >= q->len)
                continue;
            const int p = next[i];
            const int n = p < q->prompt ? (q->prompt - p < q->chunk ? q->prompt - p : q->chunk)
                                        : 1;
            if (total + n > cap)
                continue; /* waits for the next pass */
            for (int j = 0; j < n; j++)
                model_embed(&c, &h, q->tokens[p + j], p + j, x + (size_t)(total + j) * dim);
            rows[nr] = (LocalRows){slot[i], p, n};
            who[nr++] = i;
            total += n;
            if (p < q->prompt)
                prompt_rows++;
            else
                decode_rows++;
        }
        if (!nr)
            continue;
        local_model_forward_rows(b, x, rows, nr);
        passes++;
        mixed += prompt_rows > 0 && decode_rows > 0;
        model_logits_rows_n(&c, &h, &sb, x, c.vocab_size, lg, total);
        for (int r = 0, off = 0; r < nr; off += rows[r].n, r++) {
            const int i = who[r];
            memcpy(got[i] + (size_t)rows[r].pos * V, lg + (size_t)off * V,
                   (size_t)rows[r].n * V * sizeof(float));
            next[i] += rows[r].n;
            if (next[i] == seq[i].len) {
                done++;
                if (i == 0) /* its slot goes to the fourth, which shares its first tokens */
                    slot[3] = slot[0];
            }
        }
    }
    assert_true(mixed > 0); /* prompt chunks shared passes with decode rows */
    for (int i = 0; i < NSEQ; i++)
        for (int p = seq[i].keep; p < seq[i].len; p++)
            if (memcmp(ref[i] + (size_t)p * V, got[i] + (size_t)p * V, V * sizeof(float)) != 0)
                fail_msg("%s (%d threads): sequence %d, position %d: logits differ from the "
                         "sequence run alone (%d shared passes)", path, threads, i, p, passes);
    for (int i = 0; i < NSEQ; i++)
        free(ref[i]), free(got[i]);
    free(x);
    free(lg);
    model_scratch_free(&sa);
    model_scratch_free(&sb);
    model_free_head(&h);
    local_model_free(a);
    local_model_free(b);
    H5Fclose(f);
}

static void synthetic(const char *spec, const char *quantize, const char *cache)
{
    char dir[256], path[512], err[512];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "local_slots"), 0);
    test_path(path, sizeof path, dir, "m.h5");
    if (convert_make_synthetic(spec, 7, 0, NULL, path, quantize, NULL, err, sizeof err) != 0)
        fail_msg("%s", err);
    compare_file(path, 1, QTYPE_F32);
    compare_file(path, 2, QTYPE_F32);
    if (cache)
        compare_file(path, 2, QTYPE_F16);
    test_tmpdir_remove(dir);
}

static void test_synthetic_llama(void **state)
{
    (void)state;
    const char *spec = "llama:dim=64,layers=2,heads=8,kv_heads=4,ffn=172,vocab=512,ctx=64";
    synthetic(spec, NULL, NULL);
    synthetic(spec, "q4_0", "f16");
}

static void test_synthetic_gpt2(void **state)
{
    (void)state;
    synthetic("gpt2:dim=64,layers=2,heads=4,vocab=512,ctx=64", NULL, NULL);
}

static void test_austen_llama(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/weights/austen-llama.h5", HEADSPLIT_SOURCE_DIR);
    compare_file(path, 2, QTYPE_F32);
}

static void test_stories260k(void **state)
{
    (void)state;
    TEST_NEED_SHARED("stories260K/stories260K.bin");
    char dir[256], path[512], ck[512], tok[512], err[512];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "local_slots"), 0);
    test_path(path, sizeof path, dir, "s.h5");
    snprintf(ck, sizeof ck, "%s/stories260K/stories260K.bin", test_shared_dir());
    snprintf(tok, sizeof tok, "%s/stories260K/tok512.bin", test_shared_dir());
    if (convert_from_llama2c(ck, tok, path, NULL, NULL, err, sizeof err) != 0)
        fail_msg("%s", err);
    compare_file(path, 1, QTYPE_F32);
    test_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_llama),
        cmocka_unit_test(test_synthetic_gpt2),
        cmocka_unit_test(test_austen_llama),
        cmocka_unit_test(test_stories260k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
