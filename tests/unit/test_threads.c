/* test_threads.c: the kernel thread pool (--threads).  Matrix-vector products, f32 and
 * quantized, give bit-identical rows for 1..4 threads and any row count (rows are split,
 * never a row's sum); the pool survives resizing; concurrent callers (ranks as threads)
 * fall back to computing alone with the same bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "util.h"

static float *rand_vec(uint64_t *rng, size_t n)
{
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = rng_normal(rng);
    return v;
}

static void test_matvec_bits_any_threads(void **state)
{
    (void)state;
    uint64_t rng = 7;
    const int shapes[][2] = {{4096, 257}, {517, 1031}, {64, 3}, {2048, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int n = shapes[s][0], d = shapes[s][1];
        float *w = rand_vec(&rng, (size_t)n * d), *x = rand_vec(&rng, (size_t)n);
        float *y1 = xmalloc((size_t)d * sizeof(float)), *yn = xmalloc((size_t)d * sizeof(float));
        assert_int_equal(kernels_set_threads(1), 1);
        kernels_matvec_own(y1, w, x, n, d, (size_t)n);
        for (int t = 2; t <= 4; t++) {
            assert_int_equal(kernels_set_threads(t), t);
            assert_int_equal(kernels_get_threads(), t);
            memset(yn, 0xff, (size_t)d * sizeof(float));
            kernels_matvec_own(yn, w, x, n, d, (size_t)n);
            assert_memory_equal(y1, yn, (size_t)d * sizeof(float));
            /* and again: the pool is reused, not remade */
            kernels_matvec(yn, w, x, n, d);
            assert_memory_equal(y1, yn, (size_t)d * sizeof(float));
        }
        free(w);
        free(x);
        free(y1);
        free(yn);
    }
    kernels_set_threads(1);
}

static void test_quant_matvec_bits_any_threads(void **state)
{
    (void)state;
    uint64_t rng = 11;
    const QType types[] = {QTYPE_Q8_0, QTYPE_Q4_0, QTYPE_Q4_K, QTYPE_Q6_K, QTYPE_F16};
    const int n = 1024, d = 301;
    float *wf = rand_vec(&rng, (size_t)n * d), *x = rand_vec(&rng, (size_t)n);
    float *y1 = xmalloc((size_t)d * sizeof(float)), *yn = xmalloc((size_t)d * sizeof(float));
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const QType t = types[k];
        const size_t rb = quant_row_bytes(t, n);
        char *w = xmalloc(rb * (size_t)d);
        for (int i = 0; i < d; i++)
            quant_quantize_row(w + (size_t)i * rb, wf + (size_t)i * n, t, n);
        char *xa = xmalloc(quant_row_bytes(quant_vec_dot_type(t), n) + 64);
        quant_quantize_act(xa, x, t, n);
        kernels_set_threads(1);
        quant_matvec(y1, w, t, rb, xa, n, d);
        for (int th = 2; th <= 4; th++) {
            kernels_set_threads(th);
            memset(yn, 0xff, (size_t)d * sizeof(float));
            quant_matvec(yn, w, t, rb, xa, n, d);
            assert_memory_equal(y1, yn, (size_t)d * sizeof(float));
        }
        free(w);
        free(xa);
    }
    kernels_set_threads(1);
    free(wf);
    free(x);
    free(y1);
    free(yn);
}

typedef struct {
    const float *w, *x;
    float *y;
    int n, d;
} CallerArg;

static void *caller_main(void *p)
{
    CallerArg *a = p;
    for (int r = 0; r < 20; r++)
        kernels_matvec_own(a->y, a->w, a->x, a->n, a->d, (size_t)a->n);
    return NULL;
}

/* Two threads calling at once (the in-process transport's ranks): one gets the pool, the
 * other computes alone; both get the single-thread bits. */
static void test_concurrent_callers(void **state)
{
    (void)state;
    uint64_t rng = 3;
    const int n = 1024, d = 512;
    float *w = rand_vec(&rng, (size_t)n * d), *x = rand_vec(&rng, (size_t)n);
    float *ref = xmalloc((size_t)d * sizeof(float));
    kernels_set_threads(1);
    kernels_matvec_own(ref, w, x, n, d, (size_t)n);
    kernels_set_threads(3);
    CallerArg a[2];
    pthread_t tid[2];
    for (int i = 0; i < 2; i++) {
        a[i] = (CallerArg){w, x, xmalloc((size_t)d * sizeof(float)), n, d};
        assert_int_equal(pthread_create(&tid[i], NULL, caller_main, &a[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(tid[i], NULL);
        assert_memory_equal(ref, a[i].y, (size_t)d * sizeof(float));
        free(a[i].y);
    }
    kernels_set_threads(1);
    free(w);
    free(x);
    free(ref);
}

static void test_default_threads(void **state)
{
    (void)state;
    int n = kernels_default_threads();
    assert_true(n >= 1 && n <= 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matvec_bits_any_threads),
        cmocka_unit_test(test_quant_matvec_bits_any_threads),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_default_threads),
    };
    return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
