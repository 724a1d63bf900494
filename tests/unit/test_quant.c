/* test_quant.c: the quantized kernels of quant.h.  Names and sizes; ggml's fp16/bf16 rounding;
 * hand-computed blocks; round trips within known bounds; the quantizers against llama.cpp's
 * own output (GGUF files quantized by llama-quantize, compared byte for byte with what we make
 * from their F32 twins); dot products against the float dot of the dequantized operands; SIMD
 * paths equal to the plain-C twins bit for bit; row and column slices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"
#include "util.h"
/* The path-level entry (every SIMD path this build has, not only the best one). */
#include "../../src/kernels/quant_impl.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const QType all_types[] = {QTYPE_F32,  QTYPE_F16,  QTYPE_BF16, QTYPE_Q4_0, QTYPE_Q4_1,
                                  QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_Q8_0, QTYPE_Q8_1, QTYPE_Q4_K,
                                  QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_Q8_K};

static float *rand_vec(uint64_t *rng, size_t n, float scale)
{
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = scale * rng_normal(rng);
    return v;
}

static void assert_bits_equal(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            print_error("%s: element %zu differs: %.9g vs %.9g\n", what, i, (double)a[i],
                        (double)b[i]);
            fail();
        }
    }
}

static uint16_t h16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ------------------------------------------------------------------ names and sizes */

static void test_names_sizes(void **state)
{
    (void)state;
    static const struct {
        QType t;
        const char *name;
        int block;
        size_t bytes;
        QType vdt;
    } want[] = {
        {QTYPE_F32, "f32", 1, 4, QTYPE_F32},        {QTYPE_F16, "f16", 1, 2, QTYPE_F16},
        {QTYPE_BF16, "bf16", 1, 2, QTYPE_BF16},     {QTYPE_Q4_0, "q4_0", 32, 18, QTYPE_Q8_0},
        {QTYPE_Q4_1, "q4_1", 32, 20, QTYPE_Q8_1},   {QTYPE_Q5_0, "q5_0", 32, 22, QTYPE_Q8_0},
        {QTYPE_Q5_1, "q5_1", 32, 24, QTYPE_Q8_1},   {QTYPE_Q8_0, "q8_0", 32, 34, QTYPE_Q8_0},
        {QTYPE_Q8_1, "q8_1", 32, 36, QTYPE_Q8_1},   {QTYPE_Q4_K, "q4_K", 256, 144, QTYPE_Q8_K},
        {QTYPE_Q5_K, "q5_K", 256, 176, QTYPE_Q8_K}, {QTYPE_Q6_K, "q6_K", 256, 210, QTYPE_Q8_K},
        {QTYPE_Q8_K, "q8_K", 256, 292, QTYPE_Q8_K},
    };
    for (int i = 0; i < COUNT(want); i++) {
        assert_true(quant_type_known((int)want[i].t));
        assert_string_equal(quant_type_name(want[i].t), want[i].name);
        assert_int_equal(quant_type_from_name(want[i].name), (int)want[i].t);
        assert_int_equal(quant_block_size(want[i].t), want[i].block);
        assert_int_equal(quant_block_bytes(want[i].t), want[i].bytes);
        assert_int_equal(quant_row_bytes(want[i].t, 2048), 2048 / want[i].block * want[i].bytes);
        assert_int_equal(quant_vec_dot_type(want[i].t), want[i].vdt);
    }
    assert_int_equal(quant_type_from_name("Q4_K"), QTYPE_Q4_K);
    assert_int_equal(quant_type_from_name("BF16"), QTYPE_BF16);
    assert_int_equal(quant_type_from_name("q4_2"), -1);
    assert_int_equal(quant_type_from_name(""), -1);
    assert_int_equal(quant_type_from_name(NULL), -1);
    static const int unknown[] = {-1, 4, 5, 10, 11, 16, 29, 31, 1000};
    for (int i = 0; i < COUNT(unknown); i++)
        assert_false(quant_type_known(unknown[i]));
    assert_string_equal(quant_type_name((QType)4), "unknown");
    assert_non_null(quant_simd_name());
}

/* ------------------------------------------------------------------ fp16 / bf16 rounding */

/* ggml's GGML_COMPUTE_FP32_TO_FP16 (the bit trick of Maratos' FP16 library), written out here
 * as the independent reference: quant's conversion must give the same bits for every input. */
static uint16_t ggml_fp16_model(float f)
{
    const uint32_t to_inf = 0x77800000u, to_zero = 0x08800000u;
    float s_inf, s_zero;
    memcpy(&s_inf, &to_inf, 4);
    memcpy(&s_zero, &to_zero, 4);
    float base = (fabsf(f) * s_inf) * s_zero;
    uint32_t w;
    memcpy(&w, &f, 4);
    const uint32_t shl1_w = w + w, sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u)
        bias = 0x71000000u;
    const uint32_t bb = (bias >> 1) + 0x07800000u;
    float fb;
    memcpy(&fb, &bb, 4);
    base = fb + base;
    uint32_t bits;
    memcpy(&bits, &base, 4);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u, mant = bits & 0x00000FFFu;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : exp_bits + mant));
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_half_rounding_matches_ggml(void **state)
{
    (void)state;
    /* A stride through all 2^32 patterns plus every pattern around the fp16 boundaries. */
    float h[1];
    uint16_t q[1];
    for (uint64_t u = 0; u < (1ull << 32); u += 997) {
        h[0] = bits_f((uint32_t)u);
        quant_quantize_row(q, h, QTYPE_F16, 1);
        if (q[0] != ggml_fp16_model(h[0])) {
            print_error("f16 of 0x%08x: %04x, ggml %04x\n", (unsigned)u, q[0],
                        ggml_fp16_model(h[0]));
            fail();
        }
    }
    static const uint32_t edges[] = {0x33000000u, 0x33000001u, 0x387fe000u, 0x387ff000u,
                                     0x38800000u, 0x477fe000u, 0x477fefffu, 0x477ff000u,
                                     0x7f800000u, 0x7fc00000u, 0x7f800001u, 0x3f801000u,
                                     0x3f803000u, 0x3f800fffu};
    for (int i = 0; i < COUNT(edges); i++)
        for (uint32_t s = 0; s < 2; s++) {
            h[0] = bits_f(edges[i] | (s << 31));
            quant_quantize_row(q, h, QTYPE_F16, 1);
            assert_int_equal(q[0], ggml_fp16_model(h[0]));
        }
    /* Hand-computed: ties to even, overflow, subnormals. */
    static const struct {
        float f;
        uint16_t h;
    } hc[] = {{1.0f, 0x3C00}, {65504.0f, 0x7BFF}, {65520.0f, 0x7C00}, {0x1p-24f, 0x0001},
              {0x1p-25f, 0x0000}, {0x3p-25f, 0x0002}, {1.0f + 0x1p-11f, 0x3C00},
              {1.0f + 0x3p-11f, 0x3C02}, {-2.0f, 0xC000}};
    for (int i = 0; i < COUNT(hc); i++) {
        quant_quantize_row(q, &hc[i].f, QTYPE_F16, 1);
        assert_int_equal(q[0], hc[i].h);
    }
    /* bf16: round to nearest even on the top 16 bits, subnormals kept, NaN quiet. */
    static const struct {
        uint32_t f;
        uint16_t h;
    } bc[] = {{0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80}, {0x3f818000u, 0x3f82},
              {0x3f808001u, 0x3f81}, {0x00010000u, 0x0001}, {0x7f7fffffu, 0x7f80},
              {0x7f800001u, 0x7fc0}, {0xff800000u, 0xff80}};
    for (int i = 0; i < COUNT(bc); i++) {
        h[0] = bits_f(bc[i].f);
        quant_quantize_row(q, h, QTYPE_BF16, 1);
        assert_int_equal(q[0], bc[i].h);
    }
}

/* ------------------------------------------------------------------ hand-computed blocks */

static void test_hand_computed_blocks(void **state)
{
    (void)state;
    float x[256];
    uint8_t out[1024], want[1024]; /* 256 values of any type */

    /* Q8_0: amax 127 makes d = 1 exactly, so the quants are the values. */
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j * 7 % 61 - 30);
    x[5] = 127.0f;
    x[9] = -12.5f; /* rounds half away from zero: -13 */
    quant_quantize_row(out, x, QTYPE_Q8_0, 32);
    assert_int_equal(h16(out), 0x3C00);
    for (int j = 0; j < 32; j++)
        assert_int_equal((int8_t)out[2 + j], j == 9 ? -13 : (int)x[j]);

    /* Q8_0 ties round half away from zero (roundf), not to even: x.5 -> x+1, -x.5 -> -x-1. */
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j - 16) + 0.5f;
    x[31] = 127.0f;
    quant_quantize_row(out, x, QTYPE_Q8_0, 32);
    assert_int_equal(h16(out), 0x3C00);
    for (int j = 0; j < 31; j++)
        assert_int_equal((int8_t)out[2 + j], j - 16 >= 0 ? j - 16 + 1 : j - 16);

    /* Q4_0: the largest magnitude -8 gives d = 1 and quants value + 8. */
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j % 16 - 8);
    quant_quantize_row(out, x, QTYPE_Q4_0, 32);
    memset(want, 0, sizeof want);
    want[0] = 0x00, want[1] = 0x3C;
    for (int j = 0; j < 16; j++)
        want[2 + j] = (uint8_t)((j % 16) | (((j + 16) % 16) << 4));
    assert_memory_equal(out, want, 18);

    /* Q4_1: min 0, max 15: d = 1, m = 0. */
    for (int j = 0; j < 32; j++)
        x[j] = (float)((j * 5) % 16);
    quant_quantize_row(out, x, QTYPE_Q4_1, 32);
    assert_int_equal(h16(out), 0x3C00);
    assert_int_equal(h16(out + 2), 0x0000);
    for (int j = 0; j < 16; j++)
        assert_int_equal(out[4 + j], (uint8_t)((int)x[j] | ((int)x[j + 16] << 4)));

    /* Q5_0: -16 gives d = 1, quants value + 16 with the fifth bit in qh. */
    for (int j = 0; j < 32; j++)
        x[j] = (float)((j * 11) % 32 - 16);
    quant_quantize_row(out, x, QTYPE_Q5_0, 32);
    assert_int_equal(h16(out), 0x3C00);
    uint32_t qh = 0;
    for (int j = 0; j < 32; j++)
        qh |= (uint32_t)((((int)x[j] + 16) >> 4) & 1) << j;
    uint32_t got_qh;
    memcpy(&got_qh, out + 2, 4);
    assert_int_equal(got_qh, qh);
    for (int j = 0; j < 16; j++)
        assert_int_equal(out[6 + j],
                         (uint8_t)((((int)x[j] + 16) & 15) | ((((int)x[j + 16] + 16) & 15) << 4)));

    /* Q5_1: min 0, max 31. */
    for (int j = 0; j < 32; j++)
        x[j] = (float)((j * 13) % 32);
    quant_quantize_row(out, x, QTYPE_Q5_1, 32);
    assert_int_equal(h16(out), 0x3C00);
    assert_int_equal(h16(out + 2), 0);
    float back[256];
    quant_dequantize_row(back, out, QTYPE_Q5_1, 32);
    assert_memory_equal(back, x, 32 * sizeof(float));

    /* Q8_1: as Q8_0, with s = d * sum(q). */
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j - 20);
    x[0] = -127.0f;
    quant_quantize_row(out, x, QTYPE_Q8_1, 32);
    int sum = 0;
    for (int j = 0; j < 32; j++)
        sum += (int)x[j];
    assert_int_equal(h16(out), 0x3C00);
    assert_int_equal(h16(out + 2), kernels_f32_to_f16_one((float)sum));

    /* Q8_K: the largest magnitude -127 makes iscale exactly 1; bsums are the group sums. */
    for (int j = 0; j < 256; j++)
        x[j] = (float)((j * 37) % 255 - 127);
    x[3] = -127.0f;
    for (int j = 0; j < 256; j++)
        if (x[j] == 127.0f)
            x[j] = 126.0f; /* keep the first largest magnitude the negative one */
    quant_quantize_row(out, x, QTYPE_Q8_K, 256);
    float d;
    memcpy(&d, out, 4);
    assert_true(d == 1.0f);
    for (int j = 0; j < 256; j++)
        assert_int_equal((int8_t)out[4 + j], (int)x[j]);
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += (int)x[16 * g + j];
        int16_t bs;
        memcpy(&bs, out + 260 + 2 * g, 2);
        assert_int_equal(bs, s);
    }

    /* All-zero blocks: zero scales and quants for every type, and zeros back. */
    memset(x, 0, sizeof x);
    for (int i = 0; i < COUNT(all_types); i++) {
        QType t = all_types[i];
        memset(out, 0xAB, sizeof out);
        quant_quantize_row(out, x, t, 256);
        quant_dequantize_row(back, out, t, 256);
        for (int j = 0; j < 256; j++)
            assert_true(back[j] == 0.0f);
    }
}

/* ------------------------------------------------------------------ round trips */

/* Worst error per value relative to the largest magnitude of its block (32-value types), or
 * RMS error relative to the row RMS (K-quants), on Gaussian rows with outliers; the bounds
 * are the quantization step analysis (32-value types) or about 1.4x the level measured when
 * written (K-quants: 0.080, 0.041, 0.022). */
static void test_round_trip_bounds(void **state)
{
    (void)state;
    uint64_t rng = 11;
    const int n = 4096;
    float *x = rand_vec(&rng, (size_t)n, 1.0f);
    for (int i = 0; i < n; i += 97)
        x[i] *= 6.0f; /* outliers, as real weights have */
    float *y = xmalloc((size_t)n * sizeof *y);
    void *q = xmalloc(quant_row_bytes(QTYPE_F32, n));
    static const struct {
        QType t;
        double per_amax; /* max |err| / block amax, 32-value types */
        double rms;      /* RMS err / RMS x */
    } b[] = {
        {QTYPE_Q8_0, 0.5 / 127 + 1.0 / 2048, 0},
        {QTYPE_Q8_1, 0.5 / 127 + 1.0 / 2048, 0},
        {QTYPE_Q4_0, 1.0 / 8 + 1.0 / 2048, 0},
        {QTYPE_Q5_0, 1.0 / 16 + 1.0 / 2048, 0},
        {QTYPE_Q4_1, 2.0 / 30 + 3.0 / 2048, 0}, /* range <= 2 amax, half a step + rounding */
        {QTYPE_Q5_1, 2.0 / 62 + 3.0 / 2048, 0},
        {QTYPE_F16, 1.0 / 2048, 0},
        {QTYPE_BF16, 1.0 / 256, 0},
        {QTYPE_Q8_K, 0.5 / 127 + 1e-6, 0},
        {QTYPE_Q6_K, 0, 0.03},
        {QTYPE_Q5_K, 0, 0.06},
        {QTYPE_Q4_K, 0, 0.11},
    };
    for (int k = 0; k < COUNT(b); k++) {
        QType t = b[k].t;
        quant_quantize_row(q, x, t, n);
        quant_dequantize_row(y, q, t, n);
        double e2 = 0, x2 = 0;
        const int bs = quant_block_size(t) == 1 ? 32 : quant_block_size(t);
        for (int i0 = 0; i0 < n; i0 += bs) {
            double amax = 0;
            for (int i = i0; i < i0 + bs; i++)
                amax = fmax(amax, fabs((double)x[i]));
            for (int i = i0; i < i0 + bs; i++) {
                const double e = fabs((double)y[i] - (double)x[i]);
                e2 += e * e;
                x2 += (double)x[i] * x[i];
                const double lim = t == QTYPE_F16 || t == QTYPE_BF16 ? fabs((double)x[i]) : amax;
                if (b[k].per_amax > 0 && !(e <= b[k].per_amax * lim)) {
                    print_error("%s value %d: %.9g back as %.9g (block amax %.6g)\n",
                                quant_type_name(t), i, (double)x[i], (double)y[i], amax);
                    fail();
                }
            }
        }
        const double rel = sqrt(e2 / x2);
        if (b[k].rms > 0 && !(rel <= b[k].rms)) {
            print_error("%s: RMS error %.4g of the RMS, bound %.4g\n", quant_type_name(t), rel,
                        b[k].rms);
            fail();
        }
    }
    /* F32 is the identity. */
    quant_quantize_row(q, x, QTYPE_F32, n);
    quant_dequantize_row(y, q, QTYPE_F32, n);
    assert_memory_equal(x, y, (size_t)n * sizeof *x);
    free(q);
    free(x);
    free(y);
}

/* ------------------------------------------------------------------ dot products */

/* The float dot of the dequantized weight row with the dequantized activation, in double,
 * and the magnitude its rounding scales with. */
static double dequant_dot(QType t, const void *w, const void *a, int64_t n, double *mag)
{
    float *wf = xmalloc((size_t)n * sizeof *wf), *af = xmalloc((size_t)n * sizeof *af);
    quant_dequantize_row(wf, w, t, n);
    quant_dequantize_row(af, a, quant_vec_dot_type(t), n);
    double s = 0, m = 0, wmax = 0, asum = 0;
    for (int64_t j = 0; j < n; j++) {
        s += (double)wf[j] * af[j];
        m += fabs((double)wf[j] * af[j]);
        wmax = fmax(wmax, fabs((double)wf[j]));
        asum += fabs((double)af[j]);
    }
    /* K-quants subtract a min term per sub-block: their partial sums reach max|w| sum|a|. */
    *mag = m + (quant_block_size(t) == 256 ? wmax * asum : 0);
    /* Q4_1/Q5_1 take the activation's block sums as stored, s = fp16(d * sum q): its rounding
     * (2^-11 relative) times the weight block's min adds to the bound. */
    if (quant_vec_dot_type(t) == QTYPE_Q8_1 && t != QTYPE_Q8_1) {
        const size_t wb = quant_block_bytes(t);
        for (int64_t b = 0; b < n / 32; b++) {
            const float mw = kernels_f16_to_f32_one(h16((const uint8_t *)w + wb * b + 2));
            const float sa = kernels_f16_to_f32_one(h16((const uint8_t *)a + 36 * b + 2));
            *mag += fabs((double)mw * sa) * 50; /* 1e-5 * 50 |m s| > 2^-12 |m s| */
        }
    }
    free(wf);
    free(af);
    return s;
}

static const int64_t dot_ns[] = {256, 512, 2048, 2304, 5632};

/* The activation quantizer is llama.cpp's x86 backend's, not the reference quantizer: with
 * amax = 127 the scale is exactly 1, so x.5 values show the rounding (half to even there,
 * half away from zero in quantize_row_q8_0_ref), for Q8_0 and Q8_1 (block sum included), on
 * every path; Q8_K activations are the reference quantizer's blocks. */
static void test_activation_rounding(void **state)
{
    (void)state;
    float x[QK_K];
    for (int j = 0; j < QK_K; j++)
        x[j] = (float)(j % 7) - 3.0f;
    x[0] = 127.0f;
    x[1] = 2.5f, x[2] = 3.5f, x[3] = -2.5f, x[4] = 0.5f, x[5] = -0.5f, x[6] = 126.5f;
    const int8_t even[7] = {127, 2, 4, -2, 0, 0, 126}, away[7] = {127, 3, 4, -3, 1, -1, 127};
    BlockQ8_0 a[QK_K / QK], r[QK_K / QK];
    quant_quantize_act(a, x, QTYPE_Q4_0, QK_K);
    quant_quantize_row_ref(r, x, QTYPE_Q8_0, QK_K);
    for (int j = 0; j < 7; j++) {
        assert_int_equal(a[0].qs[j], even[j]);
        assert_int_equal(r[0].qs[j], away[j]);
    }
    assert_int_equal(a[0].d, r[0].d); /* d = amax / 127 in both */
    BlockQ8_0 ar[QK_K / QK];
    quant_quantize_act_ref(ar, x, QTYPE_Q8_0, QK_K);
    assert_memory_equal(a, ar, sizeof a);
    BlockQ8_1 b[QK_K / QK];
    quant_quantize_act(b, x, QTYPE_Q4_1, QK_K);
    int sum = 0;
    for (int j = 0; j < QK; j++)
        sum += b[0].qs[j];
    for (int j = 0; j < 7; j++)
        assert_int_equal(b[0].qs[j], even[j]);
    assert_int_equal(b[0].s, quant_fp32_to_fp16((float)sum)); /* d = 1 here */
    BlockQ8_K k[1], kr[1];
    quant_quantize_act(k, x, QTYPE_Q6_K, QK_K);
    quant_quantize_row_ref(kr, x, QTYPE_Q8_K, QK_K);
    assert_memory_equal(k, kr, sizeof k);
}

static void test_vec_dot_matches_dequantized(void **state)
{
    (void)state;
    uint64_t rng = 3;
    for (int k = 0; k < COUNT(all_types); k++) {
        const QType t = all_types[k], vt = quant_vec_dot_type(t);
        for (int c = 0; c < COUNT(dot_ns); c++) {
            const int64_t n = dot_ns[c];
            float *w = rand_vec(&rng, (size_t)n, 0.05f), *x = rand_vec(&rng, (size_t)n, 2.0f);
            void *wq = xmalloc(quant_row_bytes(t, n)), *xa = xmalloc(quant_row_bytes(vt, n));
            quant_quantize_row(wq, w, t, n);
            quant_quantize_act(xa, x, t, n);
            double mag;
            const double want = dequant_dot(t, wq, xa, n, &mag);
            const float got = quant_vec_dot(t, wq, xa, n), ref = quant_vec_dot_ref(t, wq, xa, n);
            if (!(fabs((double)got - want) <= 1e-5 * mag)) {
                print_error("%s n=%lld: dot %.9g, dequantized %.9g (scale %.3g)\n",
                            quant_type_name(t), (long long)n, (double)got, want, mag);
                fail();
            }
            assert_bits_equal(&got, &ref, 1, quant_type_name(t));
            /* The dot also tracks the exact fp32 dot within the quantization error. */
            double exact = 0, emag = 0;
            for (int64_t j = 0; j < n; j++) {
                exact += (double)w[j] * x[j];
                emag += fabs((double)w[j] * x[j]);
            }
            assert_true(fabs((double)got - exact) <= 0.1 * emag);
            free(w), free(x), free(wq), free(xa);
        }
    }
}

/* ------------------------------------------------------------------ fast paths == plain C */

static void test_simd_equals_ref(void **state)
{
    (void)state;
    uint64_t rng = 5;
    fprintf(stderr, "quant SIMD path: %s\n", quant_simd_name());
    /* 2304 values; 33024 is past the 512-bit matvec's activation layout (32768) */
    for (int k = 0; k < 2 * COUNT(all_types); k++) {
        const QType t = all_types[k % COUNT(all_types)], vt = quant_vec_dot_type(t);
        const int64_t n = k < COUNT(all_types) ? 2048 + 256 : 33024;
        const int d = k < COUNT(all_types) ? 37 : 3;
        const size_t rb = quant_row_bytes(t, n);
        float *w = rand_vec(&rng, (size_t)n * d, 0.1f), *x = rand_vec(&rng, (size_t)n, 1.0f);
        for (int64_t j = 0; j < n; j += 61)
            x[j] *= 20.0f;
        uint8_t *wq = xmalloc(rb * d), *wr = xmalloc(rb * d);
        uint8_t *xa = xmalloc(quant_row_bytes(vt, n)), *xr = xmalloc(quant_row_bytes(vt, n));
        for (int i = 0; i < d; i++) {
            quant_quantize_row(wq + rb * i, w + n * i, t, n);
            quant_quantize_row_ref(wr + rb * i, w + n * i, t, n);
        }
        assert_memory_equal(wq, wr, rb * d);
        quant_quantize_act(xa, x, t, n);
        quant_quantize_act_ref(xr, x, t, n);
        assert_memory_equal(xa, xr, quant_row_bytes(vt, n));
        float *y = xmalloc((size_t)n * sizeof *y), *yr = xmalloc((size_t)n * sizeof *yr);
        quant_dequantize_row(y, wq, t, n);
        quant_dequantize_row_ref(yr, wq, t, n);
        assert_bits_equal(y, yr, (size_t)n, "dequantize");
        quant_matvec(y, wq, t, rb, xa, n, d);
        quant_matvec_ref(yr, wq, t, rb, xa, n, d);
        assert_bits_equal(y, yr, (size_t)d, quant_type_name(t));
        for (int i = 0; i < d; i++) {
            const float v = quant_vec_dot(t, wq + rb * i, xa, n);
            assert_bits_equal(&v, &y[i], 1, "vec_dot vs matvec");
        }
        if (t == QTYPE_F32) { /* the fp32 matvec itself, as fp32 models run it */
            float *yk = xmalloc((size_t)d * sizeof *yk);
            kernels_matvec_ld(yk, (const float *)(void *)wq, x, (int)n, d, (size_t)n);
            assert_bits_equal(y, yk, (size_t)d, "f32 vs kernels_matvec_ld");
            free(yk);
        }
        free(w), free(x), free(wq), free(wr), free(xa), free(xr), free(y), free(yr);
    }
}

/* Weight rows of random bytes (every quant value, Q8_0's -128, any Q6_K scale) with finite
 * random scales: each path this build has must equal the plain-C twin bit for bit. */
static void fill_random_row(uint8_t *row, QType t, int64_t n, uint64_t *rng)
{
    const size_t rb = quant_row_bytes(t, n);
    for (size_t i = 0; i < rb; i++)
        row[i] = (uint8_t)rng_next(rng);
    if (t == QTYPE_F16 || t == QTYPE_BF16) {
        for (int64_t j = 0; j < n; j++) {
            uint16_t h;
            const float f = rng_normal(rng);
            quant_quantize_row(&h, &f, t, 1);
            memcpy(row + 2 * j, &h, 2);
        }
        return;
    }
    if (t == QTYPE_F32) {
        for (int64_t j = 0; j < n; j++) {
            const float f = rng_normal(rng);
            memcpy(row + 4 * j, &f, 4);
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

static void test_every_path_equals_ref(void **state)
{
    (void)state;
    uint64_t rng = 21;
    static const int64_t ns[] = {256, 512, 768, 2048, 2304, 5632, 33024};
    static const QuantPath paths[] = {QUANT_PATH_AVX2, QUANT_PATH_VNNI, QUANT_PATH_NEON};
    int n_paths = 0;
    for (int p = 0; p < COUNT(paths); p++)
        n_paths += quant_path_available(paths[p]);
    fprintf(stderr, "quant paths in this build besides C: %d\n", n_paths);
    /* and for the 32-value types, counts of blocks that leave 1..7 past a multiple of 8 */
    static const int64_t ns32[] = {32, 96, 224, 2080, 5664, 4000};
    for (int k = 0; k < COUNT(all_types); k++) {
        const QType t = all_types[k], vt = quant_vec_dot_type(t);
        for (int c = 0; c < COUNT(ns) + COUNT(ns32); c++) {
            if (c >= COUNT(ns) && quant_block_size(t) == 256)
                break;
            const int64_t n = c < COUNT(ns) ? ns[c] : ns32[c - COUNT(ns)];
            uint8_t *w = xmalloc(quant_row_bytes(t, n)), *xa = xmalloc(quant_row_bytes(vt, n));
            float *x = rand_vec(&rng, (size_t)n, 1.0f);
            for (int64_t j = 0; j < n; j += 37)
                x[j] *= 50.0f;
            for (int rep = 0; rep < 4; rep++) {
                fill_random_row(w, t, n, &rng);
                quant_quantize_act(xa, x, t, n);
                const float ref = quant_vec_dot_ref(t, w, xa, n);
                for (int p = 0; p < COUNT(paths); p++) {
                    if (!quant_path_available(paths[p]))
                        continue;
                    const float v = quant_dot_row_path(paths[p], t, w, xa, n);
                    if (memcmp(&v, &ref, sizeof v) != 0) {
                        print_error("%s n=%lld path %d: %.9g, C twin %.9g\n", quant_type_name(t),
                                    (long long)n, (int)paths[p], (double)v, (double)ref);
                        fail();
                    }
                }
            }
            free(w), free(xa), free(x);
        }
    }
}

/* K-quant matrices of random-byte rows (every quant value, every Q6_K scale, random fp16
 * scales and mins) against the twin, one thread and the default threads: row counts that
 * leave every remainder of the multi-row passes (1..9, 13), rows padded past their bytes,
 * one to 22 super-blocks, activations with large values, one to five of them at once; the
 * rows' results must also not depend on where a pass starts (the same row at every position
 * of a pass). */
static void test_kquant_matvec_rows(void **state)
{
    (void)state;
    uint64_t rng = 77;
    static const QType kt[] = {QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K};
    static const int64_t ns[] = {256, 2304, 5632};
    static const int ds[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13};
    const int threads = kernels_get_threads();
    for (int k = 0; k < COUNT(kt); k++) {
        const QType t = kt[k];
        for (int c = 0; c < COUNT(ns); c++) {
            const int64_t n = ns[c];
            const size_t rb = quant_row_bytes(t, n), stride = rb + (c == 1 ? 64 : 0);
            const int dmax = 13;
            uint8_t *w = xmalloc(stride * dmax), *xa = xmalloc(quant_row_bytes(QTYPE_Q8_K, n));
            float *x = rand_vec(&rng, (size_t)n, 1.0f);
            for (int64_t j = 0; j < n; j += 29)
                x[j] *= 60.0f;
            quant_quantize_act(xa, x, t, n);
            for (int i = 0; i < dmax; i++)
                fill_random_row(w + stride * i, t, n, &rng);
            float y[13], yr[13];
            quant_matvec_ref(yr, w, t, stride, xa, n, dmax);
            for (int di = 0; di < COUNT(ds); di++) {
                for (int th = 0; th < 2; th++) {
                    kernels_set_threads(th ? threads : 1);
                    memset(y, 0xff, sizeof y);
                    quant_matvec(y, w, t, stride, xa, n, ds[di]);
                    assert_bits_equal(y, yr, (size_t)ds[di], quant_type_name(t));
                    /* several activations: every Y[k] the twin's matvec of X[k] */
                    if (ds[di] == 13 || ds[di] == 6) {
                        const size_t ab = quant_row_bytes(QTYPE_Q8_K, n);
                        uint8_t *xs = xmalloc(ab * 5);
                        float ym[5 * 13], ymr[5 * 13];
                        for (int a = 0; a < 5; a++) {
                            for (int64_t j = 0; j < n; j += 7)
                                x[j] = -x[j] + 0.25f * (float)a;
                            quant_quantize_act(xs + ab * a, x, t, n);
                        }
                        for (int nact = 1; nact <= 5; nact++) {
                            quant_matmul(ym, w, t, stride, xs, ab, n, ds[di], nact, 13);
                            quant_matmul_ref(ymr, w, t, stride, xs, ab, n, ds[di], nact, 13);
                            for (int a = 0; a < nact; a++)
                                assert_bits_equal(ym + 13 * a, ymr + 13 * a, (size_t)ds[di],
                                                  "matmul");
                        }
                        free(xs);
                    }
                    /* the rows from an offset: each at another position of a pass */
                    const int off = ds[di] % 4 + 1;
                    if (ds[di] + off <= dmax) {
                        quant_matvec(y, w + stride * (size_t)off, t, stride, xa, n, ds[di]);
                        assert_bits_equal(y, yr + off, (size_t)ds[di], "rows from an offset");
                    }
                }
            }
            kernels_set_threads(threads);
            free(w), free(xa), free(x);
        }
    }
}

/* The batched kernels' register tiles (rows x activations) against the twin's matvec, on
 * every path this build has (x86: AVX2 and AVX-512 VNNI; the best path otherwise): random
 * byte rows (every quant, Q8_0's -128 included) with random fp16 scales, activations with
 * large values; row counts 1..13, 17 and 29 (every remainder of the 2- and 4-row tiles and
 * of the 8-row passes), 1..18 activations (every remainder of the 4- and 8-activation tiles,
 * odd pairs), rows padded past their bytes, the activations' stride wider than a row (kept
 * to the blocks' alignment: 2 bytes, 4 for Q8_K). */
static void test_matmul_tiles(void **state)
{
    (void)state;
    uint64_t rng = 91;
    static const QType tt[] = {QTYPE_Q8_0, QTYPE_Q4_0, QTYPE_Q5_0,
                               QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K};
    static const int ds[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 29};
    enum { DMAX = 29, AMAX = 18 };
    for (int k = 0; k < COUNT(tt); k++) {
        const QType t = tt[k], vt = quant_vec_dot_type(t);
        const int64_t n = quant_block_size(t) == 256 ? 512 : 96;
        const size_t stride = quant_row_bytes(t, n) + 6, ab = quant_row_bytes(vt, n) + 12;
        uint8_t *w = xmalloc(stride * DMAX), *xs = xmalloc(ab * AMAX);
        for (int i = 0; i < DMAX; i++)
            fill_random_row(w + stride * i, t, n, &rng);
        for (int a = 0; a < AMAX; a++) {
            float *x = rand_vec(&rng, (size_t)n, 1.0f);
            for (int64_t j = a; j < n; j += 13)
                x[j] *= 50.0f;
            quant_quantize_act(xs + ab * a, x, t, n);
            free(x);
        }
        float want[AMAX * DMAX], y[AMAX * DMAX];
        for (int a = 0; a < AMAX; a++)
            quant_matvec_ref(want + DMAX * a, w, t, stride, xs + ab * a, n, DMAX);
        for (int di = 0; di < COUNT(ds); di++) {
            for (int nact = 1; nact <= AMAX; nact++) {
                const int d = ds[di];
                for (int p = 0; p < 3; p++) {
                    memset(y, 0x5a, sizeof y);
                    const char *what = p == 0 ? "best" : p == 1 ? "avx2" : "vnni";
                    if (p == 0) {
                        quant_matmul(y, w, t, stride, xs, ab, n, d, nact, DMAX);
                    } else {
#if defined(QUANT_HAVE_AVX2)
                        if (p == 2 && !quant_path_available(QUANT_PATH_VNNI))
                            continue;
                        assert_true(quant_x86_matmul(p == 2, t, y, DMAX, w, stride, xs, ab,
                                                     n, d, nact));
#else
                        continue;
#endif
                    }
                    for (int a = 0; a < nact; a++)
                        if (memcmp(y + DMAX * a, want + DMAX * a, sizeof(float) * (size_t)d))
                            fail_msg("%s %s matmul: %d rows, %d activations: activation %d "
                                     "differs from the matvec", quant_type_name(t), what, d,
                                     nact, a);
                    float pad;
                    memset(&pad, 0x5a, sizeof pad);
                    for (int a = 0; a < AMAX; a++)
                        for (int i = a < nact ? d : 0; i < DMAX; i++)
                            if (memcmp(&y[DMAX * a + i], &pad, sizeof pad))
                                fail_msg("%s %s matmul: %d rows, %d activations: wrote "
                                         "outside the product", quant_type_name(t), what, d,
                                         nact);
                }
            }
        }
        free(w), free(xs);
    }
}

/* ------------------------------------------------------------------ eight-row groups */

/* Q4_0 and Q8_0 in eight-row groups (quant_x8_*): packing is a reversible byte permutation
 * (Q8_0's quants stored as q + 128) that unpacking undoes, and every product on the groups
 * (this build's path, the twin, several activations, row counts that give the threads
 * uneven shares, rows past the x86 kernels' offset table) is bit-identical to the rows'
 * twin.  Random weight bytes hold Q8_0's -128 and 127; a last round sets activation bytes
 * to -128 and 127 and the weights' to -128 and 127 beside them (the extremes of the
 * unsigned offset q + 128 and of the -128 a correction; the quantizer itself never makes
 * -128), against the twin only: the rows' AVX2 kernels negate a by vpsignb, which wraps
 * -128, as llama.cpp's do. */
static void test_x8_equals_rows(void **state)
{
    (void)state;
    uint64_t rng = 33;
    static const int64_t ns[] = {32, 96, 2048, 5632, 65568};
    static const int ds[] = {8, 40, 64};
    static const int nacts[] = {1, 2, 3, 4, 5, 9};
    static const QType types[] = {QTYPE_Q4_0, QTYPE_Q8_0};
    fprintf(stderr, "x8 preferred on this path: q4_0 %d, q8_0 %d\n",
            quant_x8_preferred(QTYPE_Q4_0, 2048, 64), quant_x8_preferred(QTYPE_Q8_0, 2048, 64));
    assert_int_equal(quant_x8_preferred(QTYPE_Q4_0, 2048, 12), 0); /* not whole groups */
    assert_int_equal(quant_x8_preferred(QTYPE_Q8_0, 2048, 12), 0);
    assert_int_equal(quant_x8_preferred(QTYPE_Q4_K, 2048, 64), 0);
    /* Q8_0 in groups only where its AVX-512 VNNI kernels are this build's path */
    assert_true(!quant_x8_preferred(QTYPE_Q8_0, 2048, 64) ||
                quant_best_path() == QUANT_PATH_VNNI);
    for (int ti = 0; ti < COUNT(types); ti++)
    for (int c = 0; c < COUNT(ns); c++) {
        const QType t = types[ti];
        for (int e = 0; e < COUNT(ds); e++) {
            const int64_t n = ns[c];
            const int d = n > 10000 ? 8 : ds[e];
            if (n > 10000 && e > 0)
                break;
            const size_t rb = quant_row_bytes(t, n), ab = quant_row_bytes(QTYPE_Q8_0, n);
            uint8_t *w = xmalloc(rb * d), *wp = xmalloc(rb * d), *xa = xmalloc(ab * 9);
            for (int i = 0; i < d; i++)
                fill_random_row(w + rb * i, t, n, &rng);
            for (int k = 0; k < 9; k++) {
                float *x = rand_vec(&rng, (size_t)n, 1.0f);
                for (int64_t j = k; j < n; j += 41)
                    x[j] *= 30.0f;
                quant_quantize_act(xa + ab * k, x, t, n);
                free(x);
            }
            memcpy(wp, w, rb * d);
            quant_x8_pack(wp, t, n, d);
            if (d > 8) /* a permutation that moves bytes */
                assert_true(memcmp(wp, w, rb * d) != 0);
            float *yr = xmalloc(9 * (size_t)d * sizeof *yr), *y = xmalloc(9 * (size_t)d * sizeof *y);
            for (int k = 0; k < 9; k++)
                quant_matvec_ref(yr + (size_t)d * k, w, t, rb, xa + ab * k, n, d);
            quant_matvec(y, w, t, rb, xa, n, d); /* the rows' own fast kernels */
            assert_bits_equal(y, yr, (size_t)d, "rows");
            const int threads = kernels_get_threads();
            for (int th = 1; th <= 3; th += 2) { /* 3: uneven shares of the groups */
                kernels_set_threads(th);
                quant_matvec_x8(y, wp, t, xa, n, d);
                assert_bits_equal(y, yr, (size_t)d, "x8 matvec");
                quant_matmul_x8(y, wp, t, xa, ab, n, d, 5, (size_t)d);
                assert_bits_equal(y, yr, 5 * (size_t)d, "x8 matmul, threads");
            }
            kernels_set_threads(threads);
            quant_matvec_x8_ref(y, wp, t, xa, n, d);
            assert_bits_equal(y, yr, (size_t)d, "x8 twin");
            for (int a = 0; a < COUNT(nacts); a++) {
                memset(y, 0, 9 * (size_t)d * sizeof *y);
                quant_matmul_x8(y, wp, t, xa, ab, n, d, nacts[a], (size_t)d);
                assert_bits_equal(y, yr, (size_t)d * (size_t)nacts[a], "x8 matmul");
            }
#if defined(QUANT_HAVE_AVX2)
            /* every x86 path this build has, not only the best one */
            for (int vnni = 0; vnni <= quant_path_available(QUANT_PATH_VNNI); vnni++)
                for (int a = 0; a < COUNT(nacts); a++) {
                    memset(y, 0, 9 * (size_t)d * sizeof *y);
                    if (quant_x86_x8_matmul(vnni, t, y, (size_t)d, wp, xa, ab, n, d, nacts[a]))
                        assert_bits_equal(y, yr, (size_t)d * (size_t)nacts[a],
                                          vnni ? "x8 vnni" : "x8 avx2");
                    else /* past Q4_0's offset table, or Q8_0 without VNNI */
                        assert_true(t == QTYPE_Q8_0 ? !vnni : n / 32 > 2048);
                }
#endif
            if (t == QTYPE_Q8_0 && n <= 5632) {
                /* the extremes: activation bytes -128 and 127, weights -128 and 127 */
                memcpy(wp, w, rb * d);
                for (int k = 0; k < 9; k++)
                    for (int64_t j = k; j < n; j += 3) {
                        int8_t *q = (int8_t *)(xa + ab * k + 34 * (size_t)(j / 32) + 2) + j % 32;
                        *q = (j / 3) % 2 ? -128 : 127;
                    }
                for (int i = 0; i < d; i++)
                    for (int64_t j = i; j < n; j += 5) {
                        uint8_t *q = wp + rb * i + 34 * (size_t)(j / 32) + 2 + j % 32;
                        *q = (j / 5) % 2 ? 0x80 : 0x7f;
                    }
                for (int k = 0; k < 9; k++)
                    quant_matvec_ref(yr + (size_t)d * k, wp, t, rb, xa + ab * k, n, d);
                quant_x8_pack(wp, t, n, d);
                quant_matvec_x8(y, wp, t, xa, n, d);
                assert_bits_equal(y, yr, (size_t)d, "q8_0 x8 matvec, extremes");
                for (int a = 0; a < COUNT(nacts); a++) {
                    memset(y, 0, 9 * (size_t)d * sizeof *y);
                    quant_matmul_x8(y, wp, t, xa, ab, n, d, nacts[a], (size_t)d);
                    assert_bits_equal(y, yr, (size_t)d * (size_t)nacts[a],
                                      "q8_0 x8 matmul, extremes");
                }
                quant_matvec_x8_ref(y, wp, t, xa, n, d);
                assert_bits_equal(y, yr, (size_t)d, "q8_0 x8 twin, extremes");
                quant_x8_unpack(wp, t, n, d);
                memcpy(w, wp, rb * d);
                quant_x8_pack(wp, t, n, d);
            }
            quant_x8_unpack(wp, t, n, d);
            assert_memory_equal(wp, w, rb * d);
            free(w), free(wp), free(xa), free(y), free(yr);
        }
    }
}

/* ------------------------------------------------------------------ row and column slices */

static void test_row_and_column_slices(void **state)
{
    (void)state;
    uint64_t rng = 9;
    const int64_t n = 3 * 256 + 512; /* 1280: 5 super-blocks, 40 blocks */
    const int d = 29;
    for (int k = 0; k < COUNT(all_types); k++) {
        const QType t = all_types[k], vt = quant_vec_dot_type(t);
        const size_t rb = quant_row_bytes(t, n), ab = quant_row_bytes(vt, n);
        float *w = rand_vec(&rng, (size_t)n * d, 0.1f), *x = rand_vec(&rng, (size_t)n, 1.0f);
        uint8_t *wq = xmalloc(rb * d), *xa = xmalloc(ab);
        for (int i = 0; i < d; i++)
            quant_quantize_row(wq + rb * i, w + n * i, t, n);
        quant_quantize_act(xa, x, t, n);
        float all[29], part[29];
        quant_matvec(all, wq, t, rb, xa, n, d);
        /* Row slices: any rows computed alone give the same bits. */
        static const int cuts[][2] = {{0, 1}, {0, 7}, {3, 17}, {13, 29}, {28, 29}, {5, 6}};
        for (int c = 0; c < COUNT(cuts); c++) {
            const int r0 = cuts[c][0], r1 = cuts[c][1];
            quant_matvec(part, wq + rb * r0, t, rb, xa, n, r1 - r0);
            assert_bits_equal(part, all + r0, (size_t)(r1 - r0), "row slice");
        }
        /* Column slices on block boundaries: the activation of the slice is the slice of the
         * activation, and the column block of the matrix (row stride of the whole row) gives
         * what its rows give alone. */
        const int bs = quant_block_size(t) == 1 ? 256 : quant_block_size(t);
        const int64_t c0 = 2 * bs, len = n - 2 * bs - (bs == 256 ? 256 : 64);
        const size_t woff = quant_row_bytes(t, c0), aoff = quant_row_bytes(vt, c0);
        uint8_t *xs = xmalloc(quant_row_bytes(vt, len));
        quant_quantize_act(xs, x + c0, t, len);
        assert_memory_equal(xs, xa + aoff, quant_row_bytes(vt, len));
        quant_matvec(part, wq + woff, t, rb, xs, len, d);
        for (int i = 0; i < d; i++) {
            uint8_t *row = xmalloc(quant_row_bytes(t, len));
            memcpy(row, wq + rb * i + woff, quant_row_bytes(t, len));
            const float v = quant_vec_dot(t, row, xs, len);
            assert_bits_equal(&v, &part[i], 1, "column slice");
            free(row);
        }
        free(w), free(x), free(wq), free(xa), free(xs);
    }
}

/* ------------------------------------------------------------------ llama.cpp's own output */

/* A minimal GGUF (v2/v3) reader: the tensor table and data of a file held in memory. */
typedef struct {
    char name[96];
    int type;
    int n_dims;
    int64_t ne[4];
    uint64_t offset;
} GgufTensor;

typedef struct {
    uint8_t *buf;
    size_t len, pos;
    size_t data;
    int n_tensors;
    GgufTensor *t;
} Gguf;

static int gg_need(Gguf *g, size_t n) { return g->pos + n <= g->len; }
static uint64_t gg_u(Gguf *g, size_t n)
{
    uint64_t v = 0;
    CHECK(gg_need(g, n), "gguf: truncated");
    memcpy(&v, g->buf + g->pos, n);
    g->pos += n;
    return v;
}
static void gg_skip_value(Gguf *g, uint32_t type)
{
    static const size_t sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
        const uint64_t n = gg_u(g, 8);
        CHECK(gg_need(g, n), "gguf: truncated string");
        g->pos += n;
    } else if (type == 9) {
        const uint32_t et = (uint32_t)gg_u(g, 4);
        const uint64_t n = gg_u(g, 8);
        for (uint64_t i = 0; i < n; i++)
            gg_skip_value(g, et);
    } else {
        CHECK(type < 13, "gguf: bad value type %u", type);
        g->pos += sz[type];
    }
}

static int gguf_load(Gguf *g, const char *path)
{
    memset(g, 0, sizeof *g);
    char err[256];
    g->buf = (uint8_t *)util_read_file(path, &g->len, err, sizeof err);
    if (!g->buf)
        return -1;
    CHECK(g->len > 24 && memcmp(g->buf, "GGUF", 4) == 0, "%s: not GGUF", path);
    g->pos = 4;
    const uint32_t version = (uint32_t)gg_u(g, 4);
    CHECK(version >= 2, "%s: GGUF version %u", path, version);
    g->n_tensors = (int)gg_u(g, 8);
    const uint64_t n_kv = gg_u(g, 8);
    uint64_t align = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        const uint64_t kl = gg_u(g, 8);
        const int is_align = kl == 17 && memcmp(g->buf + g->pos, "general.alignment", 17) == 0;
        g->pos += kl;
        const uint32_t type = (uint32_t)gg_u(g, 4);
        if (is_align && type == 4)
            align = gg_u(g, 4);
        else
            gg_skip_value(g, type);
    }
    g->t = xcalloc((size_t)g->n_tensors, sizeof *g->t);
    for (int i = 0; i < g->n_tensors; i++) {
        GgufTensor *t = &g->t[i];
        const uint64_t nl = gg_u(g, 8);
        CHECK(nl < sizeof t->name && gg_need(g, nl), "%s: tensor name", path);
        memcpy(t->name, g->buf + g->pos, nl);
        g->pos += nl;
        t->n_dims = (int)gg_u(g, 4);
        CHECK(t->n_dims >= 1 && t->n_dims <= 4, "%s: %d dims", path, t->n_dims);
        for (int k = 0; k < 4; k++)
            t->ne[k] = k < t->n_dims ? (int64_t)gg_u(g, 8) : 1;
        t->type = (int)gg_u(g, 4);
        t->offset = gg_u(g, 8);
    }
    g->data = (g->pos + align - 1) / align * align;
    return 0;
}

static const GgufTensor *gguf_find(const Gguf *g, const char *name)
{
    for (int i = 0; i < g->n_tensors; i++)
        if (strcmp(g->t[i].name, name) == 0)
            return &g->t[i];
    return NULL;
}

/* Quantizes every F32 tensor of f32_file to the type the same tensor has in q_file and
 * compares the bytes; returns the number of tensors compared (the test fails on a mismatch). */
static int compare_with_llama_quantize(const char *f32_file, const char *q_file, int *types_seen)
{
    Gguf a, b;
    if (gguf_load(&a, f32_file) != 0)
        return -1;
    CHECK(gguf_load(&b, q_file) == 0, "cannot read %s", q_file);
    int compared = 0;
    for (int i = 0; i < b.n_tensors; i++) {
        const GgufTensor *tq = &b.t[i], *tf = gguf_find(&a, tq->name);
        if (!tf || tf->type != QTYPE_F32 || tq->type == QTYPE_F32)
            continue;
        assert_true(quant_type_known(tq->type));
        const QType t = (QType)tq->type;
        const int64_t n = tq->ne[0], rows = tq->ne[1] * tq->ne[2] * tq->ne[3];
        assert_int_equal(n, tf->ne[0]);
        const size_t rb = quant_row_bytes(t, n);
        const float *src = (const float *)(void *)(a.buf + a.data + tf->offset);
        const uint8_t *want = b.buf + b.data + tq->offset;
        assert_true(b.data + tq->offset + rb * (size_t)rows <= b.len);
        uint8_t *got = xmalloc(rb);
        float *row = xmalloc((size_t)n * sizeof *row);
        int64_t bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            memcpy(row, src + r * n, (size_t)n * sizeof *row);
            quant_quantize_row(got, row, t, n);
            if (memcmp(got, want + rb * (size_t)r, rb) != 0) {
                if (!bad)
                    print_error("%s: %s row %lld differs from llama-quantize's\n", q_file,
                                tq->name, (long long)r);
                bad++;
            }
        }
        if (bad) {
            print_error("%s (%s): %lld of %lld rows differ\n", tq->name, quant_type_name(t),
                        (long long)bad, (long long)rows);
            fail();
        }
        types_seen[tq->type & 63] = 1;
        compared++;
        free(got);
        free(row);
    }
    free(a.buf), free(a.t), free(b.buf), free(b.t);
    return compared;
}

static void test_quantizers_match_llama_quantize(void **state)
{
    (void)state;
    static const char *pairs[][2] = {
        {"rand-llama-d256-F32.gguf", "rand-llama-d256-Q8_0.gguf"},
        {"rand-llama-d256-F32.gguf", "rand-llama-d256-Q4_0.gguf"},
        {"rand-llama-d256-F32.gguf", "rand-llama-d256-Q4_K_M.gguf"},
        {"rand-llama-d256-F32.gguf", "rand-llama-d256-Q6_K.gguf"},
        {"stories260K-pad256-F32.gguf", "stories260K-pad256-Q8_0.gguf"},
        {"stories260K-pad256-F32.gguf", "stories260K-pad256-Q4_0.gguf"},
    };
    int seen[64] = {0};
    for (int i = 0; i < COUNT(pairs); i++) {
        char fa[1024], fb[1024];
        snprintf(fa, sizeof fa, "%s/gguf/%s", HEADSPLIT_SHARED_DIR, pairs[i][0]);
        snprintf(fb, sizeof fb, "%s/gguf/%s", HEADSPLIT_SHARED_DIR, pairs[i][1]);
        const int c = compare_with_llama_quantize(fa, fb, seen);
        if (c < 0) {
            fprintf(stderr, "skipped: GGUF fixtures not found at %s/gguf\n", HEADSPLIT_SHARED_DIR);
            skip();
        }
        assert_true(c > 0);
    }
    /* The fixtures cover the types of q8_0, q4_0 and q4_K_M files. */
    assert_true(seen[QTYPE_Q8_0] && seen[QTYPE_Q4_0] && seen[QTYPE_Q4_K] && seen[QTYPE_Q6_K]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_sizes),
        cmocka_unit_test(test_half_rounding_matches_ggml),
        cmocka_unit_test(test_hand_computed_blocks),
        cmocka_unit_test(test_round_trip_bounds),
        cmocka_unit_test(test_activation_rounding),
        cmocka_unit_test(test_vec_dot_matches_dequantized),
        cmocka_unit_test(test_simd_equals_ref),
        cmocka_unit_test(test_every_path_equals_ref),
        cmocka_unit_test(test_kquant_matvec_rows),
        cmocka_unit_test(test_matmul_tiles),
        cmocka_unit_test(test_x8_equals_rows),
        cmocka_unit_test(test_row_and_column_slices),
        cmocka_unit_test(test_quantizers_match_llama_quantize),
    };
    return cmocka_run_group_tests_name("quant", tests, NULL, NULL);
}
