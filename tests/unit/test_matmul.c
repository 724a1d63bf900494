/* test_matmul.c: the multi-position kernels.  kernels_matmul (every fp32 path this CPU has)
 * and quant_matmul (every type) against nb calls of the one-position matvec, memcmp: random
 * shapes with odd row counts and row lengths off the 32-lane grid, nb = 1, 3, 8, 17, 64,
 * strided inputs and outputs, matrices larger than the kernels' row chunks, on 1 and 2 kernel
 * threads; and the plain-C twins. */
#define _XOPEN_SOURCE 700
#include "test_helpers.h"

#include "kernels.h"
#include "quant.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static const int batches[] = {1, 3, 8, 17, 64};
#define N_BATCHES ((int)(sizeof batches / sizeof batches[0]))

/* Gaussian values. */
static void fill_normal(float *x, size_t n, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rng_normal(rng);
}

/* Y (nb rows of ldy) holds, in columns [0, d), exactly what nb matvecs give; the padding
 * columns are untouched (still the fill byte). */
static void expect_rows(const float *y, const float *want, int d, int nb, size_t ldy,
                        const char *what, int n)
{
    for (int b = 0; b < nb; b++) {
        if (memcmp(y + (size_t)b * ldy, want + (size_t)b * (size_t)d, (size_t)d * sizeof(float)))
            fail_msg("%s: n=%d d=%d nb=%d: row %d differs from the matvec", what, n, d, nb, b);
        for (size_t i = (size_t)d; i < ldy; i++) {
            float pad;
            memset(&pad, 0x5a, sizeof pad);
            if (memcmp(&y[(size_t)b * ldy + i], &pad, sizeof pad))
                fail_msg("%s: n=%d d=%d nb=%d: wrote past column d", what, n, d, nb);
        }
    }
}

static void check_f32(int n, int d, uint64_t *rng)
{
    const size_t ldw = (size_t)n + 3, ldx = (size_t)n + 5, ldy = (size_t)d + 2;
    float *w = malloc((size_t)d * ldw * sizeof(float));
    float *x = malloc(64 * ldx * sizeof(float));
    float *y = malloc(64 * ldy * sizeof(float));
    float *want = malloc(64 * (size_t)d * sizeof(float));
    fill_normal(w, (size_t)d * ldw, rng);
    fill_normal(x, 64 * ldx, rng);
    for (int bi = 0; bi < N_BATCHES; bi++) {
        const int nb = batches[bi];
        for (int b = 0; b < nb; b++)
            kernels_matvec_own(want + (size_t)b * (size_t)d, w, x + (size_t)b * ldx, n, d, ldw);
        static const MatmulPath paths[] = {MATMUL_PATH_BEST, MATMUL_PATH_PORTABLE,
                                           MATMUL_PATH_AVX2, MATMUL_PATH_AVX512};
        static const char *const names[] = {"best", "portable", "avx2", "avx512"};
        for (int p = 0; p < 4; p++) {
            memset(y, 0x5a, 64 * ldy * sizeof(float));
            if (!kernels_matmul_path(paths[p], y, w, x, n, d, nb, ldw, ldx, ldy))
                continue; /* this CPU lacks the path */
            expect_rows(y, want, d, nb, ldy, names[p], n);
        }
        memset(y, 0x5a, 64 * ldy * sizeof(float));
        kernels_matmul(y, w, x, n, d, nb, ldw, ldx, ldy);
        expect_rows(y, want, d, nb, ldy, "kernels_matmul", n);
        memset(y, 0x5a, 64 * ldy * sizeof(float));
        kernels_matmul_ref(y, w, x, n, d, nb, ldw, ldx, ldy);
        expect_rows(y, want, d, nb, ldy, "kernels_matmul_ref", n);
    }
    free(w), free(x), free(y), free(want);
}

static void test_f32_matmul(void **state)
{
    (void)state;
    uint64_t rng = 11;
    static const int shapes[][2] = {{1, 1},   {31, 5},   {32, 7},  {33, 9},  {64, 1},
                                    {100, 3}, {257, 13}, {512, 67}, {96, 130}};
    for (int th = 1; th <= 2; th++) {
        kernels_set_threads(th);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            check_f32(shapes[s][0], shapes[s][1], &rng);
    }
    kernels_set_threads(1);
}

/* The same under --f32-order avx2 (llama.cpp's AVX2 build's 8-lane order): every path's
 * batched rows equal that order's matvec (tests/unit/test_kernels.c holds the matvec to a
 * transcription of the order). */
static void test_f32_matmul_avx2_order(void **state)
{
    kernels_set_f32_order(KERNELS_F32_ORDER_AVX2);
    test_f32_matmul(state);
    kernels_set_f32_order(KERNELS_F32_ORDER_AVX512);
}

/* One quantized type: random Gaussian rows quantized to t, activations in t's vec-dot type. */
static void check_quant(QType t, int n, int d, uint64_t *rng)
{
    const QType vt = quant_vec_dot_type(t);
    const size_t rb = quant_row_bytes(t, n) + 8; /* a row stride wider than the row */
    const size_t ab = quant_row_bytes(vt, n) + 4;
    const size_t ldy = (size_t)d + 1;
    unsigned char *w = calloc((size_t)d, rb), *act = calloc(64, ab);
    float *row = malloc((size_t)n * sizeof(float));
    float *y = malloc(64 * ldy * sizeof(float));
    float *want = malloc(64 * (size_t)d * sizeof(float));
    for (int i = 0; i < d; i++) {
        fill_normal(row, (size_t)n, rng);
        quant_quantize_row(w + (size_t)i * rb, row, t, n);
    }
    for (int b = 0; b < 64; b++) {
        fill_normal(row, (size_t)n, rng);
        quant_quantize_act(act + (size_t)b * ab, row, t, n);
    }
    for (int bi = 0; bi < N_BATCHES; bi++) {
        const int nb = batches[bi];
        for (int b = 0; b < nb; b++)
            quant_matvec(want + (size_t)b * (size_t)d, w, t, rb, act + (size_t)b * ab, n, d);
        memset(y, 0x5a, 64 * ldy * sizeof(float));
        quant_matmul(y, w, t, rb, act, ab, n, d, nb, ldy);
        expect_rows(y, want, d, nb, ldy, quant_type_name(t), n);
        memset(y, 0x5a, 64 * ldy * sizeof(float));
        quant_matmul_ref(y, w, t, rb, act, ab, n, d, nb, ldy);
        for (int b = 0; b < nb; b++) /* the twin: nb calls of the twin matvec */
            quant_matvec_ref(want + (size_t)b * (size_t)d, w, t, rb, act + (size_t)b * ab, n,
                             d);
        expect_rows(y, want, d, nb, ldy, "quant_matmul_ref", n);
    }
    free(w), free(act), free(row), free(y), free(want);
}

static void test_quant_matmul(void **state)
{
    (void)state;
    static const QType types[] = {QTYPE_F32,  QTYPE_F16,  QTYPE_BF16, QTYPE_Q8_0,
                                  QTYPE_Q4_0, QTYPE_Q4_1, QTYPE_Q5_0, QTYPE_Q5_1,
                                  QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K};
    uint64_t rng = 5;
    for (int th = 1; th <= 2; th++) {
        kernels_set_threads(th);
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            const QType t = types[k];
            const int bs = quant_block_size(t) > 1 ? quant_block_size(t) : 1;
            /* odd row counts; one and several blocks (fp types: lengths off the lane grid) */
            check_quant(t, bs == 1 ? 77 : bs, 5, &rng);
            check_quant(t, bs == 1 ? 300 : 3 * bs, 33, &rng);
            check_quant(t, 512, 131, &rng);
            /* more rows than one chunk of the batched kernels holds (about 64 KiB of them) */
            check_quant(t, 2048, 301, &rng);
        }
    }
    kernels_set_threads(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_matmul),
        cmocka_unit_test(test_f32_matmul_avx2_order),
        cmocka_unit_test(test_quant_matmul),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
