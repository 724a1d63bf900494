/* quant.c: the public quantized kernels of quant.h, dispatching to the fastest path this build
 * has (AVX-512/VNNI, AVX2, NEON) and to the plain-C twins in quant_ref.c otherwise.
 *
 * Exactness: every path computes the order documented in quant_ref.c.  Integer block sums are
 * exact, and the float steps after them (block scale products, lane accumulators, reduction
 * tree) are the same operations in the same order, so the SIMD results equal the plain-C ones
 * bit for bit for every type with finite scales (tests/unit/test_quant.c and
 * tests/aarch64/quant_check.c check it).  QTYPE_F32 goes to the fp32 matvec
 * (kernels_matvec_own) so fp32 models keep their results.
 *
 * Rows are read through the block structs: a row must start 2-byte aligned (4 for Q8_K), as
 * GGUF data (32-byte aligned, even block sizes) and malloc'ed buffers do.  The x86 matvecs of
 * Q8_0/Q4_0/Q5_0 and (512-bit) the K-quants lay the activation out on the stack once per call
 * (up to about 40 KiB; rows longer than 32768 values take the per-row path instead), so many
 * rows are best done by one quant_matvec, not by quant_vec_dot row by row.
 *
 * quant_matmul applies the rows to several activations at once (a pass over several
 * positions): each (row, activation) is exactly quant_matvec's dot product, but a row's blocks
 * are read (and, in the batched SIMD kernels, unpacked) once for up to four activations, and
 * the rows go in chunks that stay in L2 while the activations pass over them. */
#include "quant_impl.h"

#include <string.h>

#include "kernels.h"
#include "util.h"

QuantPath quant_best_path(void)
{
#if defined(QUANT_HAVE_VNNI)
    return QUANT_PATH_VNNI;
#elif defined(QUANT_HAVE_AVX2)
    return QUANT_PATH_AVX2;
#elif defined(QUANT_HAVE_NEON)
    return QUANT_PATH_NEON;
#else
    return QUANT_PATH_C;
#endif
}

const char *quant_simd_name(void)
{
    static const char *const names[] = {"c", "avx2", "avx512vnni", "neon"};
    return names[quant_best_path()];
}

int quant_path_available(QuantPath p)
{
    switch (p) {
    case QUANT_PATH_C:
        return 1;
    case QUANT_PATH_AVX2:
#if defined(QUANT_HAVE_AVX2)
        return 1;
#else
        return 0;
#endif
    case QUANT_PATH_VNNI:
#if defined(QUANT_HAVE_VNNI)
        return 1;
#else
        return 0;
#endif
    case QUANT_PATH_NEON:
#if defined(QUANT_HAVE_NEON)
        return 1;
#else
        return 0;
#endif
    }
    return 0;
}

float quant_dot_row_path(QuantPath p, QType t, const void *w, const void *x, int64_t n)
{
    float out;
#if defined(QUANT_HAVE_AVX2)
    if ((p == QUANT_PATH_AVX2 || p == QUANT_PATH_VNNI) &&
        quant_x86_dot(p == QUANT_PATH_VNNI, t, w, x, n, &out))
        return out;
#endif
#if defined(QUANT_HAVE_NEON)
    if (p == QUANT_PATH_NEON && quant_neon_dot(t, w, x, n, &out))
        return out;
#endif
    (void)p, (void)out;
    return quant_dot_ref_row(t, w, x, n);
}

void quant_dequantize_row(float *y, const void *x, QType t, int64_t n)
{
    quant_dequantize_row_ref(y, x, t, n);
}

void quant_quantize_row(void *y, const float *x, QType t, int64_t n)
{
#if defined(QUANT_HAVE_AVX2)
    (void)quant_row_bytes(t, n); /* checks n against the block size */
    if (quant_x86_quantize(t, y, x, n))
        return;
#endif
    quant_quantize_row_ref(y, x, t, n);
}

void quant_quantize_act(void *out, const float *x, QType t, int64_t n)
{
#if defined(QUANT_HAVE_AVX2)
    const QType vt = quant_vec_dot_type(t);
    (void)quant_row_bytes(vt, n); /* checks n against the block size */
    if (quant_x86_quantize_act(vt, out, x, n))
        return;
#endif
    quant_quantize_act_ref(out, x, t, n);
}

/* One row's dot on the fastest path; n already checked against t's block size. */
static float quant_dot_row(QType t, const void *w, const void *x, int64_t n)
{
    return quant_dot_row_path(quant_best_path(), t, w, x, n);
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

/* One thread's rows [lo, hi) of quant_matvec. */
typedef struct {
    float *y;
    const void *w;
    QType t;
    size_t row_stride;
    const void *x_act;
    int64_t n;
} QmvJob;

static void quant_matvec_rows(float *y, const void *w, QType t, size_t row_stride,
                              const void *x_act, int64_t n, int d);

static void qmv_rows(void *arg, int lo, int hi)
{
    const QmvJob *j = arg;
    quant_matvec_rows(j->y + lo, (const char *)j->w + (size_t)lo * j->row_stride, j->t,
                      j->row_stride, j->x_act, j->n, hi - lo);
}

/* Rows are split over the kernel threads (kernels_parallel_rows); each row's dot product
 * is computed whole, so the split changes no bit. */
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
    QmvJob j = {y, w, t, row_stride, x_act, n};
    kernels_parallel_rows(qmv_rows, &j, d, (long long)n * d);
}

static void quant_matvec_rows(float *y, const void *w, QType t, size_t row_stride,
                              const void *x_act, int64_t n, int d)
{
#if defined(QUANT_HAVE_AVX2)
    const QuantPath p = quant_best_path();
    if (quant_x86_matvec(p == QUANT_PATH_VNNI, t, y, w, row_stride, x_act, n, d))
        return;
#endif
#if defined(QUANT_HAVE_NEON)
    if (quant_neon_matvec(t, y, w, row_stride, x_act, n, d))
        return;
#endif
    for (int i = 0; i < d; i++)
        y[i] = quant_dot_row(t, (const char *)w + (size_t)i * row_stride, x_act, n);
}

/* One thread's rows [lo, hi) of quant_matmul. */
typedef struct {
    float *y;
    const void *w;
    QType t;
    size_t row_stride;
    const void *x_act;
    size_t act_stride;
    int64_t n;
    int nb;
    size_t ldy;
} QmmJob;

/* Rows [0, d) against every activation: the SIMD batched kernel where the path has one, else
 * the row dots, chunk of rows by chunk (in L2), each activation over a chunk. */
static void quant_matmul_rows(const QmmJob *j, float *y, const void *w, int d)
{
#if defined(QUANT_HAVE_AVX2)
    if (quant_x86_matmul(quant_best_path() == QUANT_PATH_VNNI, j->t, y, j->ldy, w,
                         j->row_stride, j->x_act, j->act_stride, j->n, d, j->nb))
        return;
#endif
#if defined(QUANT_HAVE_NEON)
    if (quant_neon_matmul(j->t, y, j->ldy, w, j->row_stride, j->x_act, j->act_stride, j->n, d,
                          j->nb))
        return;
#endif
    const int rc = quant_chunk_rows(j->row_stride); /* rows in L2, each activation over them */
    for (int i0 = 0; i0 < d; i0 += rc) {
        const int i1 = d - i0 < rc ? d : i0 + rc;
        for (int b = 0; b < j->nb; b++) {
            const char *a = (const char *)j->x_act + (size_t)b * j->act_stride;
            for (int i = i0; i < i1; i++)
                y[(size_t)b * j->ldy + (size_t)i] =
                    quant_dot_row(j->t, (const char *)w + (size_t)i * j->row_stride, a, j->n);
        }
    }
}

static void qmm_rows(void *arg, int lo, int hi)
{
    const QmmJob *j = arg;
    quant_matmul_rows(j, j->y + lo, (const char *)j->w + (size_t)lo * j->row_stride, hi - lo);
}

/* Rows split over the kernel threads as quant_matvec's; F32 is the fp32 matmul (the fp32
 * matvec's order). */
void quant_matmul(float *y, const void *w, QType t, size_t row_stride, const void *x_act,
                  size_t act_stride, int64_t n, int d, int nb, size_t ldy)
{
    CHECK(row_stride >= quant_row_bytes(t, n), "quant: row stride %zu below a %s row of %lld",
          row_stride, quant_type_name(t), (long long)n);
    CHECK(nb <= 1 || act_stride >= quant_row_bytes(quant_vec_dot_type(t), n),
          "quant: activation stride %zu below a %s row of %lld", act_stride,
          quant_type_name(quant_vec_dot_type(t)), (long long)n);
    if (d <= 0 || nb <= 0)
        return;
    if (nb == 1) { /* one activation: the matvec's kernels (several rows in flight) */
        quant_matvec(y, w, t, row_stride, x_act, n, d);
        return;
    }
    if (t == QTYPE_F32) {
        CHECK(row_stride % sizeof(float) == 0 && act_stride % sizeof(float) == 0 &&
                  n <= 0x7fffffff,
              "quant: f32 strides %zu, %zu are not whole floats", row_stride, act_stride);
        kernels_matmul(y, w, x_act, (int)n, d, nb, row_stride / sizeof(float),
                       act_stride / sizeof(float), ldy);
        return;
    }
    QmmJob j = {y, w, t, row_stride, x_act, act_stride, n, nb, ldy};
    kernels_parallel_rows(qmm_rows, &j, d, (long long)n * d * nb);
}
