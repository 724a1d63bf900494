/* quant_check.c: self-checking driver for the aarch64 cross build (scripts/test-aarch64.sh runs
 * it under qemu-aarch64).  The NEON quantized dots against their plain-C twins, bit for bit, on
 * rows of random bytes and on quantized Gaussian rows; the quantizers of the dispatching entry
 * against the twins; the fp32 matvec (portable path on ARM) against quant_matvec_ref's canonical
 * order bit for bit and against kernels_matvec_ref within rounding; quant_matmul (NEON batched
 * kernels, portable fp32 matmul) against the twin matvec per activation.  Plain C, no cmocka: prints
 * each mismatch and exits 1 if any. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "util.h"
#include "../../src/kernels/quant_impl.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int failures;

static void fail_at(const char *what, QType t, long long n, double got, double want)
{
    if (failures < 20)
        fprintf(stderr, "MISMATCH %s %s n=%lld: %.9g vs %.9g\n", what, quant_type_name(t), n, got,
                want);
    failures++;
}

static int same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Random bytes with finite random scales, as tests/unit/test_quant.c makes them. */
static void random_row(uint8_t *row, QType t, int64_t n, uint64_t *rng)
{
    const size_t rb = quant_row_bytes(t, n);
    for (size_t i = 0; i < rb; i++)
        row[i] = (uint8_t)rng_next(rng);
    if (t == QTYPE_F16 || t == QTYPE_BF16 || t == QTYPE_F32) {
        for (int64_t j = 0; j < n; j++) {
            const float f = rng_normal(rng);
            quant_quantize_row(row + (size_t)j * quant_block_bytes(t), &f, t, 1);
        }
        return;
    }
    const size_t bb = quant_block_bytes(t);
    for (size_t b = 0; b < rb / bb; b++) {
        uint8_t *blk = row + b * bb;
        const uint16_t h0 = kernels_f32_to_f16_one(0.01f * rng_normal(rng));
        const uint16_t h1 = kernels_f32_to_f16_one(0.01f * rng_normal(rng));
        if (t == QTYPE_Q6_K) {
            memcpy(blk + 208, &h0, 2);
        } else if (t == QTYPE_Q8_K) {
            const float d = 0.01f * rng_normal(rng);
            memcpy(blk, &d, 4);
        } else {
            memcpy(blk, &h0, 2);
            if (t == QTYPE_Q4_1 || t == QTYPE_Q5_1 || t == QTYPE_Q8_1 || t == QTYPE_Q4_K ||
                t == QTYPE_Q5_K)
                memcpy(blk + 2, &h1, 2);
        }
    }
}

/* quant_matmul (the NEON batched kernel for Q8_0/Q4_0/Q5_0, the NEON row dots for the rest,
 * the portable fp32 matmul) against nb calls of the twin matvec, bit for bit. */
static int check_matmul(QType t, int64_t n, int D, uint64_t *rng)
{
    enum { NB = 9 };
    const QType vt = quant_vec_dot_type(t);
    const size_t rb = quant_row_bytes(t, n), ab = quant_row_bytes(vt, n);
    uint8_t *w = xmalloc(rb * (size_t)D), *xa = xmalloc(ab * NB);
    float *x = xmalloc((size_t)n * sizeof *x), *y = xmalloc(sizeof(float) * (size_t)D * NB);
    float *yr = xmalloc(sizeof(float) * (size_t)D);
    int checked = 0;
    for (int i = 0; i < D; i++) {
        for (int64_t j = 0; j < n; j++)
            x[j] = 0.05f * rng_normal(rng);
        quant_quantize_row(w + rb * i, x, t, n);
    }
    for (int b = 0; b < NB; b++) {
        for (int64_t j = 0; j < n; j++)
            x[j] = rng_normal(rng);
        quant_quantize_act(xa + ab * b, x, t, n);
    }
    static const int nbs[] = {1, 3, 4, 5, 9};
    for (int k = 0; k < COUNT(nbs); k++) {
        quant_matmul(y, w, t, rb, xa, ab, n, D, nbs[k], D);
        for (int b = 0; b < nbs[k]; b++) {
            quant_matvec_ref(yr, w, t, rb, xa + ab * b, n, D);
            for (int i = 0; i < D; i++, checked++)
                if (!same(y[b * D + i], yr[i]))
                    fail_at("matmul", t, n, y[b * D + i], yr[i]);
        }
    }
    free(w), free(xa), free(x), free(y), free(yr);
    return checked;
}

int main(void)
{
    static const QType types[] = {QTYPE_F32,  QTYPE_F16,  QTYPE_BF16, QTYPE_Q4_0, QTYPE_Q4_1,
                                  QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_Q8_0, QTYPE_Q8_1, QTYPE_Q4_K,
                                  QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_Q8_K};
    static const int64_t ns[] = {256, 768, 2048, 2304};
    static const int64_t ns32[] = {32, 96, 224, 2080, 33024}; /* 33024: past NeonPrep */
    uint64_t rng = 77;
    int checked = 0;
    printf("quant_check: SIMD path %s, NEON %s\n", quant_simd_name(),
           quant_path_available(QUANT_PATH_NEON) ? "built" : "absent");
    if (!quant_path_available(QUANT_PATH_NEON)) {
        fprintf(stderr, "quant_check: this build has no NEON path to check\n");
        return 1;
    }
    for (int k = 0; k < COUNT(types); k++) {
        const QType t = types[k], vt = quant_vec_dot_type(t);
        for (int c = 0; c < COUNT(ns) + COUNT(ns32); c++) {
            if (c >= COUNT(ns) && quant_block_size(t) == 256)
                break;
            const int64_t n = c < COUNT(ns) ? ns[c] : ns32[c - COUNT(ns)];
            const int d = 5;
            const size_t rb = quant_row_bytes(t, n), ab = quant_row_bytes(vt, n);
            uint8_t *w = xmalloc(rb * d), *w2 = xmalloc(rb), *xa = xmalloc(ab), *xr = xmalloc(ab);
            float *x = xmalloc((size_t)n * sizeof *x), *wf = xmalloc((size_t)n * d * sizeof *wf);
            for (int64_t j = 0; j < n; j++)
                x[j] = rng_normal(&rng) * (j % 41 == 0 ? 30.0f : 1.0f);
            for (int64_t j = 0; j < n * d; j++)
                wf[j] = 0.05f * rng_normal(&rng);
            /* rows 0..2 quantized from floats (the entry and the twin must agree), 3..4 random */
            for (int i = 0; i < d; i++) {
                if (i < 3) {
                    quant_quantize_row(w + rb * i, wf + n * i, t, n);
                    quant_quantize_row_ref(w2, wf + n * i, t, n);
                    if (memcmp(w + rb * i, w2, rb) != 0)
                        fail_at("quantize_row", t, n, 0, 0);
                } else {
                    random_row(w + rb * i, t, n, &rng);
                }
            }
            quant_quantize_act(xa, x, t, n);
            quant_quantize_act_ref(xr, x, t, n);
            if (memcmp(xa, xr, ab) != 0)
                fail_at("quantize_act", t, n, 0, 0);
            float y[5], yr[5];
            quant_matvec(y, w, t, rb, xa, n, d);
            quant_matvec_ref(yr, w, t, rb, xa, n, d);
            for (int i = 0; i < d; i++) {
                const float v = quant_vec_dot(t, w + rb * i, xa, n);
                const float vn = quant_dot_row_path(QUANT_PATH_NEON, t, w + rb * i, xa, n);
                if (!same(y[i], yr[i]))
                    fail_at("matvec", t, n, y[i], yr[i]);
                if (!same(v, yr[i]))
                    fail_at("vec_dot", t, n, v, yr[i]);
                if (!same(vn, yr[i]))
                    fail_at("neon path", t, n, vn, yr[i]);
                checked++;
            }
            if (t == QTYPE_F32) { /* the fp32 matvec as fp32 models run it */
                float yk[5], ynaive[5];
                kernels_matvec_ld(yk, (const float *)(const void *)w, (const float *)(const void *)xa,
                                  (int)n, d, (size_t)n);
                kernels_matvec_ref(ynaive, (const float *)(const void *)w,
                                   (const float *)(const void *)xa, (int)n, d);
                for (int i = 0; i < d; i++) {
                    double mag = 0;
                    for (int64_t j = 0; j < n; j++)
                        mag += fabs((double)((const float *)(const void *)w)[(size_t)i * n + j] *
                                    ((const float *)(const void *)xa)[j]);
                    if (!same(yk[i], yr[i]))
                        fail_at("kernels_matvec_ld", t, n, yk[i], yr[i]);
                    if (!(fabs((double)yk[i] - ynaive[i]) <= 1e-5 * mag))
                        fail_at("kernels_matvec_ref", t, n, yk[i], ynaive[i]);
                }
            }
            free(w), free(w2), free(xa), free(xr), free(x), free(wf);
        }
    }
    int mm = 0;
    for (int k = 0; k < COUNT(types); k++) {
        if (types[k] == QTYPE_Q8_1 || types[k] == QTYPE_Q8_K)
            continue; /* activation types only */
        mm += check_matmul(types[k], 256, 7, &rng);
        mm += check_matmul(types[k], 2304, 150, &rng); /* more rows than one chunk */
        if (quant_block_size(types[k]) < 256)
            mm += check_matmul(types[k], 96, 7, &rng);
    }
    /* the fp32 matvec and matmul in llama.cpp's AVX2 build's order (--f32-order avx2): the
     * portable path against the order's twin */
    kernels_set_f32_order(KERNELS_F32_ORDER_AVX2);
    for (int k = 0; k < 3; k++)
        mm += check_matmul(QTYPE_F32, (int64_t[]){256, 2304, 100}[k], (int[]){7, 150, 7}[k], &rng);
    kernels_set_f32_order(KERNELS_F32_ORDER_AVX512);
    printf("quant_check: %d matmul outputs compared (fp32 in both --f32-order orders)\n", mm);
    printf("quant_check: %d row dots compared, %d mismatches\n", checked, failures);
    return failures ? 1 : 0;
}
