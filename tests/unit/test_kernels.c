/* test_kernels.c: every kernel against its plain-loop twin, the matvec's row-slice and
 * instruction-set bit-identity, own vs OpenBLAS vs reference, hand-computed RoPE cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "util.h"

static float *rand_vec(uint64_t *rng, size_t n, float scale)
{
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = scale * rng_normal(rng);
    return v;
}

static void assert_bits_equal(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            print_error("element %zu differs: %.9g vs %.9g\n", i, (double)a[i], (double)b[i]);
            fail();
        }
    }
}

static void assert_close(const float *a, const float *b, size_t n, double rel, double abs_tol)
{
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)a[i] - (double)b[i]);
        double tol = abs_tol + rel * fabs((double)b[i]);
        if (!(diff <= tol)) {
            print_error("element %zu: %.9g vs %.9g (diff %.3g > %.3g)\n", i, (double)a[i],
                        (double)b[i], diff, tol);
            fail();
        }
    }
}

/* |y - W x| per row within rel * sum_j |w_ij x_j| (the scale of rounding in any order). */
static void assert_matvec_close(const float *y, const float *w, const float *x, int n, int d,
                                double rel)
{
    for (int i = 0; i < d; i++) {
        double exact = 0, mag = 0;
        for (int j = 0; j < n; j++) {
            double p = (double)w[(size_t)i * (size_t)n + (size_t)j] * (double)x[j];
            exact += p;
            mag += fabs(p);
        }
        double diff = fabs((double)y[i] - exact);
        if (!(diff <= rel * mag + 1e-30)) {
            print_error("row %d of %dx%d: %.9g vs %.9g (diff %.3g, scale %.3g)\n", i, d, n,
                        (double)y[i], exact, diff, mag);
            fail();
        }
    }
}

static const int mv_ns[] = {1, 2, 7, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 257, 1000, 2049};
static const int mv_ds[] = {1, 2, 3, 4, 5, 7, 9, 13};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void test_matvec_matches_ref(void **state)
{
    (void)state;
    uint64_t rng = 1;
    for (int a = 0; a < COUNT(mv_ns); a++) {
        for (int b = 0; b < COUNT(mv_ds); b++) {
            int n = mv_ns[a], d = mv_ds[b];
            float *w = rand_vec(&rng, (size_t)n * (size_t)d, 1.0f);
            float *x = rand_vec(&rng, (size_t)n, 1.0f);
            float *y = xmalloc((size_t)d * sizeof *y);
            float *yr = xmalloc((size_t)d * sizeof *yr);
            kernels_matvec(y, w, x, n, d);
            kernels_matvec_ref(yr, w, x, n, d);
            assert_matvec_close(y, w, x, n, d, 1e-6);
            assert_matvec_close(yr, w, x, n, d, 1e-5);
            free(w);
            free(x);
            free(y);
            free(yr);
        }
    }
}

/* Rows [lo, hi) computed alone equal the same rows of the full product, bit for bit. */
static void test_matvec_row_slices_bit_identical(void **state)
{
    (void)state;
    uint64_t rng = 2;
    for (int a = 0; a < COUNT(mv_ns); a++) {
        for (int b = 0; b < COUNT(mv_ds); b++) {
            int n = mv_ns[a], d = mv_ds[b];
            float *w = rand_vec(&rng, (size_t)n * (size_t)d, 1.0f);
            float *x = rand_vec(&rng, (size_t)n, 1.0f);
            float *full = xmalloc((size_t)d * sizeof *full);
            float *part = xmalloc((size_t)d * sizeof *part);
            kernels_matvec(full, w, x, n, d);
            for (int lo = 0; lo < d; lo++) {
                for (int hi = lo + 1; hi <= d; hi++) {
                    kernels_matvec(part, w + (size_t)lo * (size_t)n, x, n, hi - lo);
                    assert_bits_equal(part, full + lo, (size_t)(hi - lo));
                }
            }
            free(w);
            free(x);
            free(full);
            free(part);
        }
    }
}

/* A larger, odd-sized case split the way ranks would split it. */
static void test_matvec_rank_split_bit_identical(void **state)
{
    (void)state;
    uint64_t rng = 3;
    const int n = 2047, d = 515;
    float *w = rand_vec(&rng, (size_t)n * d, 0.05f);
    float *x = rand_vec(&rng, n, 1.0f);
    float *full = xmalloc(d * sizeof *full);
    float *part = xmalloc(d * sizeof *part);
    kernels_matvec(full, w, x, n, d);
    const int cuts[][2] = {{0, 171}, {171, 343}, {343, 515}, {1, 6}, {7, 8}, {100, 103},
                           {3, 514}};
    for (int c = 0; c < COUNT(cuts); c++) {
        int lo = cuts[c][0], hi = cuts[c][1];
        kernels_matvec(part, w + (size_t)lo * n, x, n, hi - lo);
        assert_bits_equal(part, full + lo, (size_t)(hi - lo));
    }
    free(w);
    free(x);
    free(full);
    free(part);
}

/* A column block [c0, c0+nc) of a wider matrix via ld equals the contiguous copy's product. */
static void test_matvec_ld_column_block(void **state)
{
    (void)state;
    uint64_t rng = 4;
    const int wide = 301, d = 11;
    float *w = rand_vec(&rng, (size_t)wide * d, 1.0f);
    float *x = rand_vec(&rng, wide, 1.0f);
    const int blocks[][2] = {{0, 301}, {0, 100}, {100, 201}, {201, 301}, {5, 38}, {300, 301}};
    for (int bi = 0; bi < COUNT(blocks); bi++) {
        int c0 = blocks[bi][0], nc = blocks[bi][1] - c0;
        float *blk = xmalloc((size_t)nc * d * sizeof *blk);
        for (int i = 0; i < d; i++)
            memcpy(blk + (size_t)i * nc, w + (size_t)i * wide + c0, (size_t)nc * sizeof *blk);
        float y1[11], y2[11], y3[11];
        kernels_matvec_ld(y1, w + c0, x + c0, nc, d, (size_t)wide);
        kernels_matvec(y2, blk, x + c0, nc, d);
        assert_bits_equal(y1, y2, (size_t)d);
        kernels_matvec_ld(y3, w + (size_t)3 * wide + c0, x + c0, nc, d - 3, (size_t)wide);
        assert_bits_equal(y3, y2 + 3, (size_t)(d - 3));
        free(blk);
    }
    free(w);
    free(x);
}

/* The SIMD path and the plain-C statement of the order agree bit for bit. */
static void test_matvec_portable_bit_identical(void **state)
{
    (void)state;
    uint64_t rng = 5;
    for (int a = 0; a < COUNT(mv_ns); a++) {
        int n = mv_ns[a], d = 9;
        float *w = rand_vec(&rng, (size_t)n * d, 1.0f);
        float *x = rand_vec(&rng, (size_t)n, 1.0f);
        float y1[9], y2[9], y3[9];
        kernels_matvec_own(y1, w, x, n, d, (size_t)n);
        kernels_matvec_portable(y2, w, x, n, d, (size_t)n);
        assert_bits_equal(y1, y2, (size_t)d);
        /* every instruction-set path this CPU has, and the scalar twin of the order */
        static const MatmulPath paths[] = {MATMUL_PATH_PORTABLE, MATMUL_PATH_AVX2,
                                           MATMUL_PATH_AVX512};
        for (int p = 0; p < COUNT(paths); p++)
            if (kernels_matvec_on_path(paths[p], y3, w, x, n, d, (size_t)n))
                assert_bits_equal(y1, y3, (size_t)d);
        for (int i = 0; i < d; i++)
            y3[i] = kernels_dot_f32_ref(w + (size_t)i * (size_t)n, x, n);
        assert_bits_equal(y1, y3, (size_t)d);
        free(w);
        free(x);
    }
}

/* dot of w and x (n values, zero but for the pairs given) by the kernel and by the twin,
 * which must agree bit for bit; returns the kernel's. */
static float dot_pairs(int n, const int *at, const float *wv, const float *xv, int k)
{
    float w[200] = {0}, x[200] = {0}, y;
    for (int i = 0; i < k; i++)
        w[at[i]] = wv[i], x[at[i]] = xv[i];
    kernels_matvec(&y, w, x, n, 1);
    const float r = kernels_dot_f32_ref(w, x, n);
    assert_memory_equal(&y, &r, sizeof y);
    return y;
}

/* The order itself, on values chosen so that each of its steps shows: ggml_vec_dot_f32 as
 * llama.cpp's AVX-512 build computes it.  (1 + e)^2 = 1 + 2e + e^2 with e = 2^-13: its e^2
 * survives an FMA that subtracts 1 + 2e, and is lost when the product is rounded first. */
static void test_matvec_ggml_order(void **state)
{
    (void)state;
    const float e = 0x1p-13f, a = 1.0f + e, c = -(1.0f + 2.0f * e);
    /* in the steps of 64, lane 0 takes value 0 then value 64 by FMA: e^2 */
    assert_true(dot_pairs(128, (int[]){0, 64}, (float[]){c, a}, (float[]){1.0f, a}, 2) ==
                e * e);
    /* tail of 5 (n = 69): value 64 is a rounded product, then an add: 0 */
    assert_true(dot_pairs(69, (int[]){0, 64}, (float[]){c, a}, (float[]){1.0f, a}, 2) == 0.0f);
    /* ... and its last value (68, t % 4 = 1) an FMA: e^2 */
    assert_true(dot_pairs(69, (int[]){0, 68}, (float[]){c, a}, (float[]){1.0f, a}, 2) ==
                e * e);
    /* no whole step (n = 7): values 0-3 rounded products, 4-6 FMA */
    assert_true(dot_pairs(7, (int[]){0, 1}, (float[]){c, a}, (float[]){1.0f, a}, 2) == 0.0f);
    assert_true(dot_pairs(7, (int[]){0, 4}, (float[]){c, a}, (float[]){1.0f, a}, 2) == e * e);
    /* the lanes: values 0 and 16 sit in accumulators 0 and 1, combined (A0 + A2) + (A1 + A3)
     * before the lanes: 1 + 2^-24 is lost in A0 + A2 = 1 alone, then A0 + A1 = 1 - 1 = 0,
     * whereas one running sum would give 2^-24; values 0 and 1 (lanes 0, 1) meet at the end */
    assert_true(dot_pairs(64, (int[]){0, 32, 16}, (float[]){1.0f, 0x1p-24f, -1.0f},
                          (float[]){1.0f, 1.0f, 1.0f}, 3) == 0.0f);
}

/* ggml_vec_dot_f32 as llama.cpp's AVX2 build computes it (GGML_F32_STEP 32, GGML_F32_EPR 8),
 * transcribed one value at a time from its macros: four __m256 accumulators take value j in
 * lane j % 8 of accumulator (j / 8) % 4 by _mm256_fmadd_ps over the whole steps of 32;
 * GGML_F32x8_REDUCE adds them 0 + 2, 1 + 3, then 0 + 1, adds the two 128-bit halves of the
 * result (t[l] = c[l] + c[l + 4]) and finishes with two _mm_hadd_ps ((t0 + t1) + (t2 + t3));
 * the leftovers are added one by one, rounded products for the first t - t % 4 and FMA for the
 * last t % 4 (the scalar loop as GCC compiles it, as in the AVX-512 build). */
static float dot8_transcribed(const float *w, const float *x, int n)
{
    const int np = n / 32 * 32;
    float acc[4][8];
    memset(acc, 0, sizeof acc);
    for (int j = 0; j < np; j++)
        acc[(j / 8) % 4][j % 8] = fmaf(w[j], x[j], acc[(j / 8) % 4][j % 8]);
    float s = 0.0f;
    if (np > 0) {
        float c[8], t[4];
        for (int l = 0; l < 8; l++) {
            acc[0][l] = acc[0][l] + acc[2][l];
            acc[1][l] = acc[1][l] + acc[3][l];
            c[l] = acc[0][l] + acc[1][l];
        }
        for (int l = 0; l < 4; l++)
            t[l] = c[l] + c[l + 4];
        const float h0 = t[0] + t[1], h1 = t[2] + t[3]; /* _mm_hadd_ps(t, t) */
        s = h0 + h1;                                    /* _mm_hadd_ps again, lane 0 */
    }
    int j = np;
    for (; j < np + (n - np) / 4 * 4; j++)
        s = s + w[j] * x[j];
    for (; j < n; j++)
        s = fmaf(w[j], x[j], s);
    return s;
}

static int order_avx2(void **state)
{
    (void)state;
    kernels_set_f32_order(KERNELS_F32_ORDER_AVX2);
    return 0;
}

static int order_default(void **state)
{
    (void)state;
    kernels_set_f32_order(KERNELS_F32_ORDER_AVX512);
    return 0;
}

/* --f32-order avx2: every path (the SIMD paths this CPU has, the portable one, the pool's
 * threads, the twin) gives the transcription's bits; values chosen so that each step of the
 * order shows, and where the AVX-512 build's order gives another result. */
static void test_matvec_avx2_order(void **state)
{
    (void)state;
    KernelsF32Order o;
    assert_int_equal(kernels_parse_f32_order("avx2", &o), 0);
    assert_int_equal(o, KERNELS_F32_ORDER_AVX2);
    assert_int_equal(kernels_parse_f32_order("avx512", &o), 0);
    assert_int_equal(o, KERNELS_F32_ORDER_AVX512);
    assert_int_equal(kernels_parse_f32_order("avx", &o), -1);
    assert_int_equal(kernels_parse_f32_order(NULL, &o), -1);
    assert_string_equal(kernels_f32_order_name(KERNELS_F32_ORDER_AVX2), "avx2");
    assert_string_equal(kernels_f32_order_name(KERNELS_F32_ORDER_AVX512), "avx512");

    uint64_t rng = 28;
    int differ = 0;
    for (int a = 0; a < COUNT(mv_ns); a++) {
        const int n = mv_ns[a], d = 13;
        float *w = rand_vec(&rng, (size_t)n * d, 1.0f), *x = rand_vec(&rng, (size_t)n, 1.0f);
        float want[13], y[13], y16[13];
        for (int i = 0; i < d; i++)
            want[i] = dot8_transcribed(w + (size_t)i * (size_t)n, x, n);
        kernels_set_f32_order(KERNELS_F32_ORDER_AVX2);
        kernels_matvec(y, w, x, n, d);
        assert_bits_equal(y, want, (size_t)d);
        kernels_matvec_portable(y, w, x, n, d, (size_t)n);
        assert_bits_equal(y, want, (size_t)d);
        static const MatmulPath paths[] = {MATMUL_PATH_BEST, MATMUL_PATH_PORTABLE,
                                           MATMUL_PATH_AVX2, MATMUL_PATH_AVX512};
        for (int p = 0; p < COUNT(paths); p++)
            if (kernels_matvec_on_path(paths[p], y, w, x, n, d, (size_t)n))
                assert_bits_equal(y, want, (size_t)d);
        for (int i = 0; i < d; i++)
            y[i] = kernels_dot_f32_ref(w + (size_t)i * (size_t)n, x, n);
        assert_bits_equal(y, want, (size_t)d);
        kernels_set_threads(2); /* rows split over two threads: the same bits */
        kernels_matvec_own(y, w, x, n, d, (size_t)n);
        kernels_set_threads(1);
        assert_bits_equal(y, want, (size_t)d);
        kernels_set_f32_order(KERNELS_F32_ORDER_AVX512);
        kernels_matvec(y16, w, x, n, d);
        differ += memcmp(y16, want, sizeof y16) != 0;
        free(w);
        free(x);
    }
    assert_true(differ > 0); /* the two orders are not the same function */

    const float e = 0x1p-13f, a = 1.0f + e, c = -(1.0f + 2.0f * e), b = 0x1p27f;
    kernels_set_f32_order(KERNELS_F32_ORDER_AVX2);
    /* steps of 32: lane 0 takes value 0 then value 32 by FMA: e^2 (AVX-512 order: n = 64 is
     * one step, value 32 sits in another accumulator, 0) */
    assert_true(dot_pairs(64, (int[]){0, 32}, (float[]){c, a}, (float[]){1.0f, a}, 2) == e * e);
    /* the 128-bit halves first: lanes 0 and 4 cancel before lane 1 is added: 1 */
    assert_true(dot_pairs(32, (int[]){0, 4, 1}, (float[]){b, -b, 1.0f},
                          (float[]){1.0f, 1.0f, 1.0f}, 3) == 1.0f);
    /* then (t0 + t1) + (t2 + t3): lanes 0 and 1 cancel before lane 2 is added: 1 */
    assert_true(dot_pairs(64, (int[]){0, 1, 2}, (float[]){b, -b, 1.0f},
                          (float[]){1.0f, 1.0f, 1.0f}, 3) == 1.0f);
    /* accumulators 0 and 1 (values 0 and 8) meet after 0 + 2 (values 0 and 16) */
    assert_true(dot_pairs(32, (int[]){0, 16, 8}, (float[]){1.0f, 0x1p-24f, -1.0f},
                          (float[]){1.0f, 1.0f, 1.0f}, 3) == 0.0f);
    /* tail of 5 (n = 37): value 32 a rounded product, value 36 an FMA */
    assert_true(dot_pairs(37, (int[]){0, 32}, (float[]){c, a}, (float[]){1.0f, a}, 2) == 0.0f);
    assert_true(dot_pairs(37, (int[]){0, 36}, (float[]){c, a}, (float[]){1.0f, a}, 2) == e * e);
    kernels_set_f32_order(KERNELS_F32_ORDER_AVX512);
    /* the AVX-512 build's order on the same values: n = 32 is all tail (one running sum:
     * 2^27 + 1 loses the 1, 0), and (c0 + c2) + (c1 + c3) meets lanes 0 and 2 first (0) */
    assert_true(dot_pairs(32, (int[]){0, 4, 1}, (float[]){b, -b, 1.0f},
                          (float[]){1.0f, 1.0f, 1.0f}, 3) == 0.0f);
    assert_true(dot_pairs(64, (int[]){0, 1, 2}, (float[]){b, -b, 1.0f},
                          (float[]){1.0f, 1.0f, 1.0f}, 3) == 0.0f);
    assert_true(dot_pairs(64, (int[]){0, 32}, (float[]){c, a}, (float[]){1.0f, a}, 2) == 0.0f);
}

/* The attention, ggml's expf and SwiGLU under --f32-order avx2 against their twins (the AVX2
 * build's expf and 8-lane sums in both). */
static void test_attention_twin(void **state);
static void test_ggml_expf(void **state);
static void test_swiglu_gelu(void **state);
static void test_avx2_order_twins(void **state)
{
    test_ggml_expf(state);
    test_swiglu_gelu(state);
    test_attention_twin(state);
    /* the AVX2 build's expf is another function: some values differ from the AVX-512 one's */
    int differ = 0;
    for (float x = -20.0f; x < 20.0f; x += 0.01f) {
        const float v8 = kernels_ggml_expf(x);
        kernels_set_f32_order(KERNELS_F32_ORDER_AVX512);
        const float v16 = kernels_ggml_expf(x);
        kernels_set_f32_order(KERNELS_F32_ORDER_AVX2);
        differ += memcmp(&v8, &v16, sizeof v8) != 0;
    }
    assert_true(differ > 0);
}

/* llama.cpp's GELU over every fp16 input: the FNV-1a hash of the 65536 results (their float
 * bits, in index order) equals that of the table ggml b4747's CPU backend computes
 * (ggml_gelu on a tensor of every fp16 value, llama.cpp built for AVX-512 and AVX2 alike). */
static void test_gelu_fp16_table(void **state)
{
    (void)state;
    float *x = xmalloc(65536 * sizeof *x);
    for (int i = 0; i < 65536; i++)
        x[i] = kernels_f16_to_f32_one((uint16_t)i);
    kernels_gelu_fp16(x, 65536);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 65536; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        h = (h ^ u) * 0x100000001b3ull;
    }
    assert_true(h == 0x32f8c8b9e881a325ull);
    /* inputs that are not fp16 values round first; the clamps use the input itself */
    float v[4] = {0.1f, 10.0f, 12.5f, -10.0f};
    kernels_gelu_fp16(v, 4);
    float h01 = kernels_f16_to_f32_one(kernels_f32_to_f16_one(0.1f));
    kernels_gelu_fp16(&h01, 1);
    assert_true(v[0] == h01 && v[1] == 10.0f && v[2] == 12.5f && v[3] == 0.0f);
    free(x);
}

static void test_matvec_blas_and_switch(void **state)
{
    (void)state;
    uint64_t rng = 6;
    assert_int_equal(kernels_get_matvec(), MATVEC_AUTO);
    const int n = 517, d = 67;
    float *w = rand_vec(&rng, (size_t)n * d, 1.0f);
    float *x = rand_vec(&rng, n, 1.0f);
    float yo[67], yb[67], yr[67], ya[67], yl[67];
    kernels_matvec(ya, w, x, n, d);
    kernels_set_matvec(MATVEC_OWN);
    assert_int_equal(kernels_get_matvec(), MATVEC_OWN);
    kernels_matvec(yo, w, x, n, d);
    assert_bits_equal(yo, ya, (size_t)d);
    kernels_set_matvec(MATVEC_BLAS);
    assert_int_equal(kernels_get_matvec(), MATVEC_BLAS);
    kernels_matvec(yb, w, x, n, d);
    kernels_matvec_ld(yl, w + 10, x + 10, n - 20, d, (size_t)n);
    kernels_set_matvec(MATVEC_AUTO);
    kernels_matvec_ref(yr, w, x, n, d);
    assert_matvec_close(yo, w, x, n, d, 1e-6);
    assert_matvec_close(yb, w, x, n, d, 1e-6);
    assert_matvec_close(yr, w, x, n, d, 1e-5);
    float yl2[67];
    kernels_matvec_ld(yl2, w + 10, x + 10, n - 20, d, (size_t)n);
    assert_close(yl, yl2, (size_t)d, 1e-4, 1e-4);
    const char *core = kernels_blas_corename();
    assert_non_null(core);
    assert_true(strlen(core) > 0);
    free(w);
    free(x);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    uint64_t rng = 7;
    const int n = 2049;
    float *x = rand_vec(&rng, n, 3.0f), *w = rand_vec(&rng, n, 1.0f);
    float *o = xmalloc(n * sizeof *o), *r = xmalloc(n * sizeof *r);
    kernels_rmsnorm(o, x, w, 1e-5f, n);
    kernels_rmsnorm_ref(r, x, w, 1e-5f, n);
    assert_bits_equal(o, r, n);
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; i++) {
        double e = (double)w[i] * x[i] * inv;
        assert_true(fabs(o[i] - e) <= 1e-5 * fabs(e) + 1e-7);
    }
    kernels_rmsnorm(x, x, w, 1e-5f, n); /* in place */
    assert_bits_equal(x, r, n);
    free(x);
    free(w);
    free(o);
    free(r);
}

static void test_layernorm(void **state)
{
    (void)state;
    uint64_t rng = 8;
    const int n = 769;
    float *x = rand_vec(&rng, n, 2.0f), *w = rand_vec(&rng, n, 1.0f), *b = rand_vec(&rng, n, 1.0f);
    for (int i = 0; i < n; i++)
        x[i] += 5.0f;
    float *o = xmalloc(n * sizeof *o), *r = xmalloc(n * sizeof *r);
    kernels_layernorm(o, x, w, b, 1e-5f, n);
    kernels_layernorm_ref(r, x, w, b, 1e-5f, n);
    assert_bits_equal(o, r, n);
    double m = 0, v = 0;
    for (int i = 0; i < n; i++)
        m += x[i];
    m /= n;
    for (int i = 0; i < n; i++)
        v += (x[i] - m) * (x[i] - m);
    v /= n;
    for (int i = 0; i < n; i++) {
        double e = (x[i] - m) / sqrt(v + 1e-5) * w[i] + b[i];
        assert_true(fabs(o[i] - e) <= 1e-5 * (fabs(e) + fabs((double)w[i])) + 1e-6);
    }
    free(x);
    free(w);
    free(b);
    free(o);
    free(r);
}

static void test_rope_hand_computed(void **state)
{
    (void)state;
    /* head_dim 4, pos 1, theta 10000: frequencies 1 and 10000^-0.5 = 0.01. */
    const double c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.01), s2 = sin(0.01);
    float a[4] = {1, 2, 3, 4};
    kernels_rope(a, 1, 4, 1, 10000.0f, 1);
    const float ea[4] = {(float)(1 * c1 - 2 * s1), (float)(1 * s1 + 2 * c1),
                         (float)(3 * c2 - 4 * s2), (float)(3 * s2 + 4 * c2)};
    assert_close(a, ea, 4, 1e-6, 1e-6);
    float h[4] = {1, 2, 3, 4};
    kernels_rope(h, 1, 4, 1, 10000.0f, 0);
    const float eh[4] = {(float)(1 * c1 - 3 * s1), (float)(2 * c2 - 4 * s2),
                         (float)(1 * s1 + 3 * c1), (float)(2 * s2 + 4 * c2)};
    assert_close(h, eh, 4, 1e-6, 1e-6);
    /* two heads rotate independently and identically */
    float two[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    kernels_rope(two, 2, 4, 1, 10000.0f, 0);
    assert_bits_equal(two, h, 4);
    assert_bits_equal(two + 4, h, 4);
    /* position 0 is the identity */
    float z[4] = {1, 2, 3, 4};
    kernels_rope(z, 1, 4, 0, 10000.0f, 1);
    const float e0[4] = {1, 2, 3, 4};
    assert_bits_equal(z, e0, 4);
    /* pos 3, head_dim 2, theta 500000: only frequency 1 */
    float p[2] = {0.5f, -1.5f};
    kernels_rope(p, 1, 2, 3, 500000.0f, 0);
    const float ep[2] = {(float)(0.5 * cos(3.0) + 1.5 * sin(3.0)),
                         (float)(0.5 * sin(3.0) - 1.5 * cos(3.0))};
    assert_close(p, ep, 2, 1e-6, 1e-6);
}

static void test_rope_matches_ref(void **state)
{
    (void)state;
    uint64_t rng = 9;
    const int dims[] = {2, 64, 128, 256};
    const int poss[] = {0, 1, 17, 2047};
    for (int di = 0; di < COUNT(dims); di++) {
        for (int pi = 0; pi < COUNT(poss); pi++) {
            for (int style = 0; style < 2; style++) {
                int hd = dims[di], nh = 5;
                float *x = rand_vec(&rng, (size_t)hd * nh, 1.0f);
                float *r = xmalloc((size_t)hd * nh * sizeof *r);
                memcpy(r, x, (size_t)hd * nh * sizeof *r);
                kernels_rope(x, nh, hd, poss[pi], 10000.0f, style);
                kernels_rope_ref(r, nh, hd, poss[pi], 10000.0f, style);
                assert_bits_equal(x, r, (size_t)hd * nh);
                free(x);
                free(r);
            }
        }
    }
}

/* ggml's vector expf one value at a time (softmax of the attention, SiLU) against the twin's
 * form (kernels_ref.c, ldexpf for the scaling by 2^n) bit for bit, over the whole range the
 * scaling takes: results from overflow through normal, subnormal and zero. */
static void test_ggml_expf(void **state)
{
    (void)state;
    long diffs = 0;
    for (float x = -150.0f; x < 100.0f; x += 0.000123f) {
        const float a = kernels_ggml_expf(x), b = kernels_ggml_expf_ref(x);
        if (memcmp(&a, &b, sizeof a) != 0 && diffs++ < 5)
            print_error("expf(%.9g): %.9g vs twin %.9g\n", (double)x, (double)a, (double)b);
    }
    assert_int_equal(diffs, 0);
    assert_true(kernels_ggml_expf(-200.0f) == 0.0f && isinf(kernels_ggml_expf(200.0f)));
}

static void test_softmax(void **state)
{
    (void)state;
    uint64_t rng = 10;
    const int n = 1001;
    float *x = rand_vec(&rng, n, 4.0f);
    float *r = xmalloc(n * sizeof *r);
    memcpy(r, x, n * sizeof *r);
    kernels_softmax(x, n);
    kernels_softmax_ref(r, n);
    assert_bits_equal(x, r, n);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        assert_true(x[i] >= 0.0f && x[i] <= 1.0f);
        sum += x[i];
    }
    assert_true(fabs(sum - 1.0) < 1e-5);
    /* stable for large inputs */
    float big[4] = {1000.0f, 1000.0f, 999.0f, -1e30f};
    kernels_softmax(big, 4);
    const double e = exp(-1.0), den = 2 + e;
    const float eb[4] = {(float)(1 / den), (float)(1 / den), (float)(e / den), 0.0f};
    assert_close(big, eb, 4, 1e-6, 1e-7);
    float huge[3] = {3e38f, 3e38f, 3e38f};
    kernels_softmax(huge, 3);
    for (int i = 0; i < 3; i++)
        assert_true(fabs(huge[i] - 1.0 / 3.0) < 1e-7);
    float one[1] = {-7.5f};
    kernels_softmax(one, 1);
    assert_true(one[0] == 1.0f);
    free(x);
    free(r);
}

static void test_swiglu_gelu(void **state)
{
    (void)state;
    uint64_t rng = 11;
    const int n = 5633;
    float *g = rand_vec(&rng, n, 4.0f), *u = rand_vec(&rng, n, 1.0f);
    g[0] = 0.0f;
    g[1] = -100.0f;
    g[2] = 100.0f;
    float *g0 = xmalloc(n * sizeof *g0), *gr = xmalloc(n * sizeof *gr);
    memcpy(g0, g, n * sizeof *g0);
    memcpy(gr, g, n * sizeof *gr);
    kernels_swiglu(g, u, n);
    kernels_swiglu_ref(gr, u, n);
    assert_bits_equal(g, gr, n);
    for (int i = 0; i < n; i++) {
        double v = g0[i], e = v / (1 + exp(-v)) * u[i];
        assert_true(fabs(g[i] - e) <= 1e-6 * fabs(e) + 1e-30);
    }
    memcpy(g, g0, n * sizeof *g);
    memcpy(gr, g0, n * sizeof *gr);
    kernels_gelu(g, n);
    kernels_gelu_ref(gr, n);
    assert_bits_equal(g, gr, n);
    for (int i = 0; i < n; i++) {
        double v = g0[i];
        double e = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        assert_true(fabs(g[i] - e) <= 1e-5 * fabs(v) + 1e-6);
    }
    free(g);
    free(u);
    free(g0);
    free(gr);
}

static void test_argmax_add(void **state)
{
    (void)state;
    const float a[6] = {1, 3, 3, 2, -5, 3};
    assert_int_equal(kernels_argmax(a, 6), 1);
    const float same[4] = {2, 2, 2, 2};
    assert_int_equal(kernels_argmax(same, 4), 0);
    const float neg[3] = {-3, -1, -2};
    assert_int_equal(kernels_argmax(neg, 3), 1);
    const float last[5] = {0, 0, 0, 0, 1e-30f};
    assert_int_equal(kernels_argmax(last, 5), 4);
    assert_int_equal(kernels_argmax(a, 1), 0);
    float y[5] = {1, 2, 3, 4, 5};
    const float x[5] = {0.5f, -2, 0, 1e-8f, 5};
    kernels_add(y, x, 5);
    const float e[5] = {1.5f, 0, 3, 4 + 1e-8f, 10};
    assert_bits_equal(y, e, 5);
}

/* Naive attention in double. */
static void attention_double(float *out, const float *q, const float *k, const float *v, int n_q,
                             int hd, int n_pos)
{
    double *s = xmalloc((size_t)n_pos * sizeof *s);
    for (int h = 0; h < n_q; h++) {
        double mx = -INFINITY, sum = 0;
        for (int t = 0; t < n_pos; t++) {
            double dot = 0;
            for (int i = 0; i < hd; i++)
                dot += (double)q[h * hd + i] * k[(size_t)t * hd + i];
            s[t] = dot / sqrt((double)hd);
            mx = s[t] > mx ? s[t] : mx;
        }
        for (int t = 0; t < n_pos; t++)
            sum += (s[t] = exp(s[t] - mx));
        for (int i = 0; i < hd; i++) {
            double o = 0;
            for (int t = 0; t < n_pos; t++)
                o += s[t] / sum * v[(size_t)t * hd + i];
            out[h * hd + i] = (float)o;
        }
    }
    free(s);
}

/* Random q, k, v of one attention call and room for its scratch and two outputs. */
typedef struct {
    float *q, *k, *v, *scratch, *o, *r;
} AttnCase;

static AttnCase attn_case(uint64_t *rng, int n_q, int hd, int np)
{
    AttnCase a;
    a.q = rand_vec(rng, (size_t)n_q * hd, 1.0f);
    a.k = rand_vec(rng, (size_t)np * hd, 1.0f);
    a.v = rand_vec(rng, (size_t)np * hd, 1.0f);
    a.scratch = xmalloc((size_t)np * sizeof *a.scratch);
    a.o = xmalloc((size_t)n_q * hd * sizeof *a.o);
    a.r = xmalloc((size_t)n_q * hd * sizeof *a.r);
    return a;
}

static void attn_case_free(AttnCase *a)
{
    free(a->q), free(a->k), free(a->v), free(a->scratch), free(a->o), free(a->r);
}

/* The row-wise attention kernel equals its one-value-at-a-time twin bit for bit: position
 * counts around the padded length's steps (32, 64) and head sizes below, at and past the
 * 64-column passes. */
static void test_attention_twin(void **state)
{
    (void)state;
    uint64_t rng = 31;
    const int npos[] = {1, 2, 31, 32, 33, 63, 64, 65, 96, 97, 129, 200, 515};
    const int hds[] = {32, 64, 80, 128, 200};
    for (int hi = 0; hi < COUNT(hds); hi++) {
        for (int pi = 0; pi < COUNT(npos); pi++) {
            const int hd = hds[hi], np = npos[pi], n_q = 3;
            AttnCase a = attn_case(&rng, n_q, hd, np);
            const float scale = pi % 2 ? 1.0f : 1.0f / sqrtf((float)hd);
            kernels_attention_scaled(a.o, a.q, a.k, a.v, a.scratch, n_q, hd, np, scale);
            kernels_attention_scaled_twin(a.r, a.q, a.k, a.v, a.scratch, n_q, hd, np, scale);
            assert_bits_equal(a.o, a.r, (size_t)n_q * hd);
            attn_case_free(&a);
        }
    }
}

static void test_attention(void **state)
{
    (void)state;
    uint64_t rng = 12;
    const int n_q = 4, hd = 64;
    const int npos[] = {1, 2, 37, 300};
    for (int pi = 0; pi < COUNT(npos); pi++) {
        const int np = npos[pi];
        AttnCase a = attn_case(&rng, n_q, hd, np);
        float *e = xmalloc((size_t)n_q * hd * sizeof *e);
        kernels_attention(a.o, a.q, a.k, a.v, a.scratch, n_q, hd, np);
        kernels_attention_ref(a.r, a.q, a.k, a.v, a.scratch, n_q, hd, np);
        attention_double(e, a.q, a.k, a.v, n_q, hd, np);
        if (np == 1) {
            for (int h = 0; h < n_q; h++) {
                assert_bits_equal(a.o + h * hd, a.v, (size_t)hd);
                assert_bits_equal(a.r + h * hd, a.v, (size_t)hd);
            }
        }
        assert_close(a.o, e, (size_t)n_q * hd, 1e-5, 1e-5);
        assert_close(a.r, e, (size_t)n_q * hd, 1e-5, 1e-5);
        assert_close(a.o, a.r, (size_t)n_q * hd, 1e-5, 1e-5);
        /* a head computed alone equals the same head computed with the others */
        float *one = xmalloc((size_t)hd * sizeof *one);
        kernels_attention(one, a.q + 2 * hd, a.k, a.v, a.scratch, 1, hd, np);
        assert_bits_equal(one, a.o + 2 * hd, (size_t)hd);
        free(one);
        free(e);
        attn_case_free(&a);
    }
}

/* binary16: every half survives the round trip (NaNs stay NaN); conversions of random and
 * edge-case floats agree between the vector and scalar paths, and with the compiler's own
 * _Float16 conversion where it has one. */
static void test_half(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kernels_f16_to_f32_one((uint16_t)h);
        uint16_t back = kernels_f32_to_f16_one(f);
        if (isnan(f))
            assert_true((back & 0x7c00u) == 0x7c00u && (back & 0x3ffu) != 0);
        else
            assert_int_equal(back, h);
    }
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint16_t *a = malloc(N * sizeof *a);
    uint64_t st = 42;
    const float edge[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e9f, -1e9f, 5.96e-8f,
                          2.98e-8f, 2.99e-8f, 6.1e-5f, 6.097e-5f, 1.0f + 1.0f / 2048, 1.0f / 3,
                          INFINITY, -INFINITY};
    const int ne = (int)(sizeof edge / sizeof edge[0]);
    for (int i = 0; i < N; i++) {
        double u = rng_float(&st) - 0.5;
        x[i] = i < ne ? edge[i] : (float)(u * pow(2.0, (double)(i % 48) - 30.0));
    }
    kernels_f32_to_f16(a, x, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(a[i], kernels_f32_to_f16_one(x[i]));
#if defined(__FLT16_MAX__)
        __extension__ _Float16 r = (__extension__(_Float16)x[i]);
        uint16_t rb;
        memcpy(&rb, &r, sizeof rb);
        assert_int_equal(a[i], rb);
#endif
    }
    kernels_f16_to_f32(y, a, N);
    for (int i = 0; i < N; i++) {
        float one = kernels_f16_to_f32_one(a[i]);
        assert_memory_equal(&y[i], &one, sizeof one);
        if (isfinite(y[i]) && fabsf(x[i]) >= 6.2e-5f)
            assert_true(fabsf(y[i] - x[i]) <= fabsf(x[i]) * (1.0f / 2048));
    }
    free(x);
    free(y);
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matvec_matches_ref),
        cmocka_unit_test(test_matvec_row_slices_bit_identical),
        cmocka_unit_test(test_matvec_rank_split_bit_identical),
        cmocka_unit_test(test_matvec_ld_column_block),
        cmocka_unit_test(test_matvec_portable_bit_identical),
        cmocka_unit_test(test_matvec_ggml_order),
        cmocka_unit_test_teardown(test_matvec_avx2_order, order_default),
        cmocka_unit_test(test_gelu_fp16_table),
        cmocka_unit_test(test_matvec_blas_and_switch),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_rope_hand_computed),
        cmocka_unit_test(test_rope_matches_ref),
        cmocka_unit_test(test_ggml_expf),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_swiglu_gelu),
        cmocka_unit_test(test_argmax_add),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_twin),
        cmocka_unit_test_setup_teardown(test_avx2_order_twins, order_avx2, order_default),
        cmocka_unit_test(test_half),
    };
    return cmocka_run_group_tests_name("kernels", tests, NULL, NULL);
}
