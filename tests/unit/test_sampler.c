/* test_sampler.c: llama.cpp's penalties (sampler_penalize_counts): the repeat penalty on each
 * distinct id, the frequency penalty by its count, the presence penalty once, exactly as its
 * penalties sampler computes them (src/llama-sampling.cpp: logit <= 0 multiplied, else
 * divided; then minus count x freq + present), and the repeat-only path unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sampler.h"

#include <string.h>

#define V 6

static const float base[V] = {1.0f, 3.0f, -2.0f, 0.5f, 0.0f, -1.0f};

/* llama.cpp's formula, written out per id: what every penalized id must equal. */
static float expect(float logit, int count, float repeat, float freq, float present)
{
    if (count == 0)
        return logit;
    float l = logit <= 0 ? logit * repeat : logit / repeat;
    return l - ((float)count * freq + present);
}

static void check(const int *recent, int n, float repeat, float freq, float present)
{
    float l[V];
    memcpy(l, base, sizeof l);
    sampler_penalize_counts(l, V, recent, n, repeat, freq, present);
    for (int id = 0; id < V; id++) {
        int count = 0;
        for (int i = 0; i < n; i++)
            count += recent[i] == id;
        assert_true(l[id] == expect(base[id], count, repeat, freq, present));
    }
}

static void test_counts(void **state)
{
    (void)state;
    const int recent[] = {1, 2, 1, 1, 4, 2, -1, 99}; /* out-of-range ids are skipped */
    const int n = (int)(sizeof recent / sizeof recent[0]);
    check(recent, n, 1.0f, 0.5f, 0.0f);  /* frequency only: id 1 loses 1.5, id 2 loses 1 */
    check(recent, n, 1.0f, 0.0f, 0.75f); /* presence only: once per id */
    check(recent, n, 1.3f, 0.25f, 0.5f); /* all three, as llama.cpp orders them */
    check(recent, n, 1.0f, -0.5f, -1.0f); /* negative values reward repeats (OpenAI -2..2) */
    /* the figures by hand: id 1 seen 3 times at logit 3, repeat 1.5, freq 0.5, present 1 */
    float l[V];
    memcpy(l, base, sizeof l);
    sampler_penalize_counts(l, V, recent, n, 1.5f, 0.5f, 1.0f);
    assert_true(l[1] == 3.0f / 1.5f - 2.5f);
    assert_true(l[2] == -2.0f * 1.5f - 2.0f); /* negative: multiplied, then 2 x 0.5 + 1 */
    assert_true(l[4] == 0.0f * 1.5f - 1.5f);  /* zero counts as negative (<= 0) */
    assert_true(l[0] == 1.0f && l[3] == 0.5f && l[5] == -1.0f); /* not seen: untouched */
}

static void test_off_and_repeat_only(void **state)
{
    (void)state;
    const int recent[] = {0, 3, 3, 5};
    float l[V], r[V];
    /* all off: nothing changes, whatever the window */
    memcpy(l, base, sizeof l);
    sampler_penalize_counts(l, V, recent, 4, 1.0f, 0, 0);
    assert_memory_equal(l, base, sizeof l);
    /* an empty window: nothing */
    sampler_penalize_counts(l, V, recent, 0, 2.0f, 1.0f, 1.0f);
    assert_memory_equal(l, base, sizeof l);
    /* repeat only equals sampler_penalize bit for bit (the path chat and --prompt take) */
    memcpy(r, base, sizeof r);
    sampler_penalize(r, V, recent, 4, 1.7f);
    sampler_penalize_counts(l, V, recent, 4, 1.7f, 0, 0);
    assert_memory_equal(l, r, sizeof l);
    assert_true(l[3] == 0.5f / 1.7f && l[5] == -1.0f * 1.7f && l[0] == 1.0f / 1.7f);
}

/* A large presence penalty makes greedy choice avoid every id in the window. */
static void test_presence_steers_greedy(void **state)
{
    (void)state;
    Sampler s;
    sampler_init(&s, V, 0.0f, 1.0f, 1);
    float l[V];
    memcpy(l, base, sizeof l);
    assert_int_equal(sampler_sample(&s, l), 1);
    const int recent[] = {1, 0};
    memcpy(l, base, sizeof l);
    sampler_penalize_counts(l, V, recent, 2, 1.0f, 0.0f, 10.0f);
    assert_int_equal(sampler_sample(&s, l), 3); /* 0.5: the best of those not yet seen */
    sampler_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_off_and_repeat_only),
        cmocka_unit_test(test_presence_steers_greedy),
    };
    return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
