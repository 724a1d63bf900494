/* quant_ref.c: the plain-C twins of quant.h, and the type table.
 *
 * Layouts and quantizer arithmetic follow llama.cpp's ggml (ggml-common.h, ggml-quants.c),
 * operation for operation, so a row quantized here has the bytes llama-quantize writes for
 * it without an importance matrix (quantize_q4_K(..., NULL) ends in quantize_row_q4_K_ref,
 * and so on for every type here).  Built with -ffp-contract=off: a llama.cpp build that lets
 * the compiler contract a*b+c into an FMA can differ from it in rare last bits of the K-quant
 * scale search.
 *
 * Dot products (the order the SIMD paths in quant.c reproduce):
 *   - F32: the fp32 matvec's canonical order (kernels_dot_f32_ref, matvec.c);
 *   - F16, BF16: 32 lanes, lane l takes j = 32t + l, the tail zero-padded, then the halving
 *     tree 16, 8, 4, 2, 1, on the values as floats;
 *   - Q5_0, Q8_0 with Q8_0 and Q4_1, Q5_1, Q8_1 with Q8_1: ggml's AVX2 order: per block
 *     8 exact integer lanes (lane l: values 4l..4l+3), acc_l = fma(dw*da, lane_l, acc_l),
 *     hsum_float_8 at the end (Q4_1/Q5_1: plus the running fma sum of mw*sa); Q4_0 as the
 *     repacked gemv: sum = fma(S_b, dw*da, sum) block after block;
 *   - K-quants with Q8_K: ggml's AVX2 order (dot_k below): 8 integer lanes per super-block,
 *     8 float accumulators by FMA across super-blocks, hsum_float_8, plus the mins' sum.
 */
#include "quant_impl.h"

#include <float.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "kernels.h"
#include "util.h"

#define QMIN(a, b) ((a) < (b) ? (a) : (b))
#define QMAX(a, b) ((a) > (b) ? (a) : (b))
#define GROUP_MAX_EPS 1e-15f

/* ---------------------------------------------------------------- type table */

typedef struct {
    QType type;
    const char *name;
    int block;
    size_t bytes;
    QType vec_dot;
} QTypeInfo;

static const QTypeInfo qtypes[] = {
    {QTYPE_F32, "f32", 1, 4, QTYPE_F32},
    {QTYPE_F16, "f16", 1, 2, QTYPE_F16},
    {QTYPE_Q4_0, "q4_0", QK, sizeof(BlockQ4_0), QTYPE_Q8_0},
    {QTYPE_Q4_1, "q4_1", QK, sizeof(BlockQ4_1), QTYPE_Q8_1},
    {QTYPE_Q5_0, "q5_0", QK, sizeof(BlockQ5_0), QTYPE_Q8_0},
    {QTYPE_Q5_1, "q5_1", QK, sizeof(BlockQ5_1), QTYPE_Q8_1},
    {QTYPE_Q8_0, "q8_0", QK, sizeof(BlockQ8_0), QTYPE_Q8_0},
    {QTYPE_Q8_1, "q8_1", QK, sizeof(BlockQ8_1), QTYPE_Q8_1},
    {QTYPE_Q4_K, "q4_K", QK_K, sizeof(BlockQ4_K), QTYPE_Q8_K},
    {QTYPE_Q5_K, "q5_K", QK_K, sizeof(BlockQ5_K), QTYPE_Q8_K},
    {QTYPE_Q6_K, "q6_K", QK_K, sizeof(BlockQ6_K), QTYPE_Q8_K},
    {QTYPE_Q8_K, "q8_K", QK_K, sizeof(BlockQ8_K), QTYPE_Q8_K},
    {QTYPE_BF16, "bf16", 1, 2, QTYPE_BF16},
};
#define N_QTYPES ((int)(sizeof qtypes / sizeof qtypes[0]))

static const QTypeInfo *qtype_info(int t)
{
    for (int i = 0; i < N_QTYPES; i++)
        if ((int)qtypes[i].type == t)
            return &qtypes[i];
    return NULL;
}

/* The entry of a type the caller promised is known; a fatal error names it otherwise. */
static const QTypeInfo *qtype_need(QType t)
{
    const QTypeInfo *q = qtype_info((int)t);
    CHECK(q, "quant: unknown tensor type %d", (int)t);
    return q;
}

int quant_type_known(int t) { return qtype_info(t) != NULL; }

const char *quant_type_name(QType t)
{
    const QTypeInfo *q = qtype_info((int)t);
    return q ? q->name : "unknown";
}

int quant_type_from_name(const char *name)
{
    for (int i = 0; name && i < N_QTYPES; i++)
        if (strcasecmp(name, qtypes[i].name) == 0)
            return (int)qtypes[i].type;
    return -1;
}

int quant_block_size(QType t) { return qtype_need(t)->block; }
size_t quant_block_bytes(QType t) { return qtype_need(t)->bytes; }

size_t quant_row_bytes(QType t, int64_t n)
{
    const QTypeInfo *q = qtype_need(t);
    CHECK(n >= 0 && n % q->block == 0, "quant: a %s row of %lld values is not whole blocks of %d",
          q->name, (long long)n, q->block);
    return (size_t)(n / q->block) * q->bytes;
}

QType quant_vec_dot_type(QType t) { return qtype_need(t)->vec_dot; }

/* n a whole number of t's blocks (fatal otherwise); the number of blocks. */
static int64_t qblocks(QType t, int64_t n)
{
    const QTypeInfo *q = qtype_need(t);
    CHECK(n >= 0 && n % q->block == 0, "quant: a %s row of %lld values is not whole blocks of %d",
          q->name, (long long)n, q->block);
    return n / q->block;
}

/* ---------------------------------------------------------------- halves */

uint16_t quant_fp32_to_fp16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: ggml's canonical quiet NaN */
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u);
    return kernels_f32_to_f16_one(f); /* round to nearest even, as ggml's conversion */
}

float quant_fp16_to_fp32(uint16_t h) { return kernels_f16_to_f32_one(h); }

uint16_t quant_fp32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 64u);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

float quant_bf16_to_fp32(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#define H2F quant_fp16_to_fp32
#define F2H quant_fp32_to_fp16

/* ---------------------------------------------------------------- 32-value blocks */

static void quantize_q4_0(BlockQ4_0 *y, const float *x, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        for (int j = 0; j < QK / 2; j++) {
            const int xi0 = QMIN(15, (int)(int8_t)(x[j] * id + 8.5f));
            const int xi1 = QMIN(15, (int)(int8_t)(x[QK / 2 + j] * id + 8.5f));
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

/* The smallest and largest of one block's QK values (Q4_1, Q5_1). */
static void block_min_max(const float *x, float *min, float *max)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < QK; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    *min = lo;
    *max = hi;
}

static void quantize_q4_1(BlockQ4_1 *y, const float *x, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float min, max;
        block_min_max(x, &min, &max);
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        y[i].m = F2H(min);
        for (int j = 0; j < QK / 2; j++) {
            const int xi0 = QMIN(15, (int)(int8_t)((x[j] - min) * id + 0.5f));
            const int xi1 = QMIN(15, (int)(int8_t)((x[QK / 2 + j] - min) * id + 0.5f));
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

static void quantize_q5_0(BlockQ5_0 *y, const float *x, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            const int xi0 = QMIN(31, (int)(int8_t)(x[j] * id + 16.5f));
            const int xi1 = QMIN(31, (int)(int8_t)(x[QK / 2 + j] * id + 16.5f));
            y[i].qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= (((uint32_t)xi0 & 0x10u) >> 4) << j;
            qh |= (((uint32_t)xi1 & 0x10u) >> 4) << (j + QK / 2);
        }
        memcpy(y[i].qh, &qh, sizeof qh); /* little-endian, as the file stores it */
    }
}

static void quantize_q5_1(BlockQ5_1 *y, const float *x, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float min, max;
        block_min_max(x, &min, &max);
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        y[i].m = F2H(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            const int xi0 = (uint8_t)((x[j] - min) * id + 0.5f);
            const int xi1 = (uint8_t)((x[QK / 2 + j] - min) * id + 0.5f);
            y[i].qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= (((uint32_t)xi0 & 0x10u) >> 4) << j;
            qh |= (((uint32_t)xi1 & 0x10u) >> 4) << (j + QK / 2);
        }
        memcpy(y[i].qh, &qh, sizeof qh);
    }
}

static void quantize_q8_0(BlockQ8_0 *y, const float *x, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            amax = QMAX(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        for (int j = 0; j < QK; j++)
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

static void quantize_q8_1(BlockQ8_1 *y, const float *x, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            amax = QMAX(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        int sum = 0;
        for (int j = 0; j < QK / 2; j++) {
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
            y[i].qs[QK / 2 + j] = (int8_t)roundf(x[QK / 2 + j] * id);
            sum += y[i].qs[j] + y[i].qs[QK / 2 + j];
        }
        y[i].s = F2H(sum * d);
    }
}

void quant_quantize_row_ref(void *y, const float *x, QType t, int64_t n)
{
    const int64_t nb = qblocks(t, n);
    switch (t) {
    case QTYPE_F32:
        memcpy(y, x, (size_t)n * sizeof(float));
        break;
    case QTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)y)[i] = F2H(x[i]);
        break;
    case QTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)y)[i] = quant_fp32_to_bf16(x[i]);
        break;
    case QTYPE_Q4_0: quantize_q4_0(y, x, nb); break;
    case QTYPE_Q4_1: quantize_q4_1(y, x, nb); break;
    case QTYPE_Q5_0: quantize_q5_0(y, x, nb); break;
    case QTYPE_Q5_1: quantize_q5_1(y, x, nb); break;
    case QTYPE_Q8_0: quantize_q8_0(y, x, nb); break;
    case QTYPE_Q8_1: quantize_q8_1(y, x, nb); break;
    case QTYPE_Q4_K: quant_ref_quantize_q4_K(y, x, nb); break;
    case QTYPE_Q5_K: quant_ref_quantize_q5_K(y, x, nb); break;
    case QTYPE_Q6_K: quant_ref_quantize_q6_K(y, x, nb); break;
    case QTYPE_Q8_K: quant_ref_quantize_q8_K(y, x, nb); break;
    }
}

/* ---------------------------------------------------------------- activation quantizers
 * What llama.cpp's x86 CPU backend does to a matvec input (quantize_row_q8_0 / _q8_1 in
 * ggml-cpu, AVX2 and AVX-512 builds alike): not the reference quantizer but id = 127 / amax
 * (0 for an all-zero block) and rounding half to even (_mm256_round_ps to nearest); d is
 * amax / 127 as in the reference.  Q8_K on x86 is the reference quantizer (quantize_row_q8_K
 * calls quantize_row_q8_K_ref there), F16 and BF16 the plain conversions. */
static void act_q8_0(BlockQ8_0 *y, const float *x, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            amax = QMAX(amax, fabsf(x[j]));
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = F2H(d);
        for (int j = 0; j < QK; j++)
            y[i].qs[j] = (int8_t)quant_nearest_int(x[j] * id);
    }
}

static void act_q8_1(BlockQ8_1 *y, const float *x, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            amax = QMAX(amax, fabsf(x[j]));
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = F2H(d);
        int sum = 0;
        for (int j = 0; j < QK; j++) {
            y[i].qs[j] = (int8_t)quant_nearest_int(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = F2H(d * (float)sum);
    }
}

void quant_quantize_act_ref(void *out, const float *x, QType t, int64_t n)
{
    const QType vt = quant_vec_dot_type(t);
    const int64_t nb = qblocks(vt, n);
    switch (vt) {
    case QTYPE_Q8_0: act_q8_0(out, x, nb); break;
    case QTYPE_Q8_1: act_q8_1(out, x, nb); break;
    default: quant_quantize_row_ref(out, x, vt, n); break;
    }
}

/* ---------------------------------------------------------------- dequantization */

void quant_dequantize_row_ref(float *y, const void *vx, QType t, int64_t n)
{
    const int64_t nb = qblocks(t, n);
    switch (t) {
    case QTYPE_F32:
        memcpy(y, vx, (size_t)n * sizeof(float));
        break;
    case QTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            y[i] = H2F(((const uint16_t *)vx)[i]);
        break;
    case QTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            y[i] = quant_bf16_to_fp32(((const uint16_t *)vx)[i]);
        break;
    case QTYPE_Q4_0:
        for (int64_t i = 0; i < nb; i++, y += QK) {
            const BlockQ4_0 *x = (const BlockQ4_0 *)vx + i;
            const float d = H2F(x->d);
            for (int j = 0; j < QK / 2; j++) {
                y[j] = ((x->qs[j] & 0x0F) - 8) * d;
                y[j + QK / 2] = ((x->qs[j] >> 4) - 8) * d;
            }
        }
        break;
    case QTYPE_Q4_1:
        for (int64_t i = 0; i < nb; i++, y += QK) {
            const BlockQ4_1 *x = (const BlockQ4_1 *)vx + i;
            const float d = H2F(x->d), m = H2F(x->m);
            for (int j = 0; j < QK / 2; j++) {
                y[j] = (x->qs[j] & 0x0F) * d + m;
                y[j + QK / 2] = (x->qs[j] >> 4) * d + m;
            }
        }
        break;
    case QTYPE_Q5_0:
        for (int64_t i = 0; i < nb; i++, y += QK) {
            const BlockQ5_0 *x = (const BlockQ5_0 *)vx + i;
            const float d = H2F(x->d);
            uint32_t qh;
            memcpy(&qh, x->qh, sizeof qh);
            for (int j = 0; j < QK / 2; j++) {
                const int xh0 = ((qh >> j) << 4) & 0x10, xh1 = (qh >> (j + 12)) & 0x10;
                y[j] = (((x->qs[j] & 0x0F) | xh0) - 16) * d;
                y[j + QK / 2] = (((x->qs[j] >> 4) | xh1) - 16) * d;
            }
        }
        break;
    case QTYPE_Q5_1:
        for (int64_t i = 0; i < nb; i++, y += QK) {
            const BlockQ5_1 *x = (const BlockQ5_1 *)vx + i;
            const float d = H2F(x->d), m = H2F(x->m);
            uint32_t qh;
            memcpy(&qh, x->qh, sizeof qh);
            for (int j = 0; j < QK / 2; j++) {
                const int xh0 = ((qh >> j) << 4) & 0x10, xh1 = (qh >> (j + 12)) & 0x10;
                y[j] = ((x->qs[j] & 0x0F) | xh0) * d + m;
                y[j + QK / 2] = ((x->qs[j] >> 4) | xh1) * d + m;
            }
        }
        break;
    case QTYPE_Q8_0:
        for (int64_t i = 0; i < nb; i++, y += QK) {
            const BlockQ8_0 *x = (const BlockQ8_0 *)vx + i;
            const float d = H2F(x->d);
            for (int j = 0; j < QK; j++)
                y[j] = x->qs[j] * d;
        }
        break;
    case QTYPE_Q8_1:
        for (int64_t i = 0; i < nb; i++, y += QK) {
            const BlockQ8_1 *x = (const BlockQ8_1 *)vx + i;
            const float d = H2F(x->d);
            for (int j = 0; j < QK; j++)
                y[j] = x->qs[j] * d;
        }
        break;
    case QTYPE_Q4_K:
        for (int64_t i = 0; i < nb; i++) {
            const BlockQ4_K *x = (const BlockQ4_K *)vx + i;
            const float d = H2F(x->d), min = H2F(x->dmin);
            const uint8_t *q = x->qs;
            for (int j = 0, is = 0; j < QK_K; j += 64, q += 32, is += 2) {
                uint8_t sc, m;
                quant_scale_min_k4(is + 0, x->scales, &sc, &m);
                const float d1 = d * sc, m1 = min * m;
                quant_scale_min_k4(is + 1, x->scales, &sc, &m);
                const float d2 = d * sc, m2 = min * m;
                for (int l = 0; l < 32; ++l)
                    *y++ = d1 * (q[l] & 0xF) - m1;
                for (int l = 0; l < 32; ++l)
                    *y++ = d2 * (q[l] >> 4) - m2;
            }
        }
        break;
    case QTYPE_Q5_K:
        for (int64_t i = 0; i < nb; i++) {
            const BlockQ5_K *x = (const BlockQ5_K *)vx + i;
            const float d = H2F(x->d), min = H2F(x->dmin);
            const uint8_t *ql = x->qs, *qh = x->qh;
            uint8_t u1 = 1, u2 = 2;
            for (int j = 0, is = 0; j < QK_K; j += 64, ql += 32, is += 2) {
                uint8_t sc, m;
                quant_scale_min_k4(is + 0, x->scales, &sc, &m);
                const float d1 = d * sc, m1 = min * m;
                quant_scale_min_k4(is + 1, x->scales, &sc, &m);
                const float d2 = d * sc, m2 = min * m;
                for (int l = 0; l < 32; ++l)
                    *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
                for (int l = 0; l < 32; ++l)
                    *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
                u1 = (uint8_t)(u1 << 2);
                u2 = (uint8_t)(u2 << 2);
            }
        }
        break;
    case QTYPE_Q6_K:
        for (int64_t i = 0; i < nb; i++) {
            const BlockQ6_K *x = (const BlockQ6_K *)vx + i;
            const float d = H2F(x->d);
            const uint8_t *ql = x->ql, *qh = x->qh;
            const int8_t *sc = x->scales;
            for (int n0 = 0; n0 < QK_K; n0 += 128, y += 128, ql += 64, qh += 32, sc += 8) {
                for (int l = 0; l < 32; ++l) {
                    const int is = l / 16;
                    const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l + 0] = d * sc[is + 0] * q1;
                    y[l + 32] = d * sc[is + 2] * q2;
                    y[l + 64] = d * sc[is + 4] * q3;
                    y[l + 96] = d * sc[is + 6] * q4;
                }
            }
        }
        break;
    case QTYPE_Q8_K:
        for (int64_t i = 0; i < nb; i++, y += QK_K) {
            const BlockQ8_K *x = (const BlockQ8_K *)vx + i;
            for (int j = 0; j < QK_K; j++)
                y[j] = x->d * x->qs[j];
        }
        break;
    }
}

/* ---------------------------------------------------------------- dot products */

/* The canonical 32-lane order of the fp32 matvec on values fetched by get(). */
#define LANE_DOT(n, WGET, XGET)                                                                  \
    do {                                                                                         \
        float acc[32] = {0};                                                                     \
        for (int64_t j0 = 0; j0 < (n); j0 += 32)                                                 \
            for (int l = 0; l < 32; l++) {                                                       \
                const int64_t j = j0 + l;                                                        \
                const float wv = j < (n) ? WGET(j) : 0.0f, xv = j < (n) ? XGET(j) : 0.0f;        \
                acc[l] = acc[l] + wv * xv;                                                       \
            }                                                                                    \
        for (int h = 16; h >= 1; h /= 2)                                                         \
            for (int l = 0; l < h; l++)                                                          \
                acc[l] = acc[l] + acc[l + h];                                                    \
        return acc[0];                                                                           \
    } while (0)

/* F32: the fp32 matvec's own order (kernels_dot_f32_ref), as quant_matvec runs it. */
static float dot_f32(const float *w, const float *x, int64_t n)
{
    return kernels_dot_f32_ref(w, x, (int)n);
}

static float dot_f16(const uint16_t *w, const uint16_t *x, int64_t n)
{
#define GW(j) H2F(w[j])
#define GX(j) H2F(x[j])
    LANE_DOT(n, GW, GX);
#undef GW
#undef GX
}

static float dot_bf16(const uint16_t *w, const uint16_t *x, int64_t n)
{
#define GW(j) quant_bf16_to_fp32(w[j])
#define GX(j) quant_bf16_to_fp32(x[j])
    LANE_DOT(n, GW, GX);
#undef GW
#undef GX
}

/* Quant j (0..31) of a 32-value block: 4-bit quants in qs (low nibbles: values 0..15, high
 * nibbles: 16..31), the fifth bits in qh4 (NULL: none), minus offset. */
static inline int block_q(const uint8_t *qs, uint32_t qh, int has_qh, int offset, int j)
{
    const int q = j < QK / 2 ? (qs[j] & 0x0F) : (qs[j - QK / 2] >> 4);
    return (q | (has_qh ? (int)(((qh >> j) & 1u) << 4) : 0)) - offset;
}

/* hsum_float_8: lanes l + (l + 4), then (0 + 2) + (1 + 3). */
static inline float hsum8(const float *v)
{
    const float r0 = v[0] + v[4], r1 = v[1] + v[5], r2 = v[2] + v[6], r3 = v[3] + v[7];
    return (r0 + r2) + (r1 + r3);
}

/* The 8 integer lanes of one 32-value block: lane l = sum of q_j a_j for j = 4l .. 4l + 3. */
static void block_lanes(QType t, const void *vw, int64_t b, const int8_t *a, int lane[8])
{
    const uint8_t *qs = NULL;
    uint32_t qh = 0;
    int has_qh = 0, offset = 0;
    const int8_t *q8 = NULL;
    switch (t) {
    case QTYPE_Q4_0: qs = ((const BlockQ4_0 *)vw)[b].qs; offset = 8; break;
    case QTYPE_Q4_1: qs = ((const BlockQ4_1 *)vw)[b].qs; break;
    case QTYPE_Q5_0:
        qs = ((const BlockQ5_0 *)vw)[b].qs;
        memcpy(&qh, ((const BlockQ5_0 *)vw)[b].qh, sizeof qh);
        has_qh = 1, offset = 16;
        break;
    case QTYPE_Q5_1:
        qs = ((const BlockQ5_1 *)vw)[b].qs;
        memcpy(&qh, ((const BlockQ5_1 *)vw)[b].qh, sizeof qh);
        has_qh = 1;
        break;
    case QTYPE_Q8_1: q8 = ((const BlockQ8_1 *)vw)[b].qs; break;
    default: q8 = ((const BlockQ8_0 *)vw)[b].qs; break;
    }
    for (int l = 0; l < 8; l++) {
        int s = 0;
        for (int j = 4 * l; j < 4 * l + 4; j++)
            s += (q8 ? q8[j] : block_q(qs, qh, has_qh, offset, j)) * a[j];
        lane[l] = s;
    }
}

/* Q5_0, Q8_0 rows with Q8_0 in ggml's AVX2 order (ggml_vec_dot_q8_0_q8_0 and kin): per block
 * d = dw * da and 8 integer lanes, acc_l = fma(d, lane_l, acc_l), then hsum_float_8.  Q4_0
 * rows as llama.cpp's CPU backend multiplies them on AVX2 after repacking the matrix into
 * 8-row groups (ggml_gemv_q4_0_8x8_q8_0): per block the whole integer sum S, and
 * sum = fma(S, dw * da, sum) block after block. */
static float dot_q8_0_family(QType t, const void *vw, const BlockQ8_0 *a, int64_t nb)
{
    float acc[8] = {0};
    if (t == QTYPE_Q4_0) { /* llama.cpp repacks Q4_0 matrices: ggml_gemv_q4_0_8x8_q8_0 */
        float sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            int lane[8];
            block_lanes(t, vw, b, a[b].qs, lane);
            int S = 0;
            for (int l = 0; l < 8; l++)
                S += lane[l];
            sum = fmaf((float)S, H2F(((const BlockQ4_0 *)vw)[b].d) * H2F(a[b].d), sum);
        }
        return sum;
    }
    for (int64_t b = 0; b < nb; b++) {
        int lane[8];
        block_lanes(t, vw, b, a[b].qs, lane);
        const uint16_t dh = t == QTYPE_Q4_0   ? ((const BlockQ4_0 *)vw)[b].d
                          : t == QTYPE_Q5_0 ? ((const BlockQ5_0 *)vw)[b].d
                                            : ((const BlockQ8_0 *)vw)[b].d;
        const float d = H2F(dh) * H2F(a[b].d);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    return hsum8(acc);
}

/* Q4_1, Q5_1, Q8_1 rows with Q8_1 (ggml_vec_dot_q4_1_q8_1's AVX2 order): the lanes as above
 * with d = dw * da, and the min terms mw * sa added by FMA into one running sum. */
static float dot_q8_1_family(QType t, const void *vw, const BlockQ8_1 *a, int64_t nb)
{
    float acc[8] = {0}, summs = 0;
    for (int64_t b = 0; b < nb; b++) {
        int lane[8];
        block_lanes(t, vw, b, a[b].qs, lane);
        float dw;
        if (t == QTYPE_Q4_1) {
            dw = H2F(((const BlockQ4_1 *)vw)[b].d);
            summs = fmaf(H2F(((const BlockQ4_1 *)vw)[b].m), H2F(a[b].s), summs);
        } else if (t == QTYPE_Q5_1) {
            dw = H2F(((const BlockQ5_1 *)vw)[b].d);
            summs = fmaf(H2F(((const BlockQ5_1 *)vw)[b].m), H2F(a[b].s), summs);
        } else {
            dw = H2F(((const BlockQ8_1 *)vw)[b].d);
        }
        const float d = dw * H2F(a[b].d);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    return hsum8(acc) + summs;
}

/* Value j (0..255) of a Q4_K/Q5_K super-block without its min: 0..15 or 0..31. */
static inline int q4k_val(const BlockQ4_K *w, int j)
{
    const uint8_t q = w->qs[(j / 64) * 32 + j % 32];
    return (j % 64) < 32 ? (q & 0xF) : (q >> 4);
}
static inline int q5k_val(const BlockQ5_K *w, int j)
{
    const uint8_t q = w->qs[(j / 64) * 32 + j % 32];
    const int lo = (j % 64) < 32 ? (q & 0xF) : (q >> 4);
    return lo | (((w->qh[j % 32] >> (j / 32)) & 1) << 4);
}
/* Value j of a Q6_K super-block, -32..31. */
static inline int q6k_val(const BlockQ6_K *w, int j)
{
    const int h = j / 128, r = j % 128, l = r % 32, quarter = r / 32;
    const uint8_t *ql = w->ql + 64 * h, *qh = w->qh + 32 * h;
    const int lo = quarter == 0 ? (ql[l] & 0xF) : quarter == 1 ? (ql[l + 32] & 0xF)
                 : quarter == 2 ? (ql[l] >> 4) : (ql[l + 32] >> 4);
    return (lo | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
}

/* K-quant rows with Q8_K in ggml's AVX2 order (ggml_vec_dot_q4_K_q8_K and the Q5_K, Q6_K
 * ones): value j of a super-block adds its exact integer product (times its sub-block scale)
 * into integer lane (j % 32) / 4; each super-block then adds its 8 lanes into 8 float
 * accumulators, acc_l = fma(d, lane_l, acc_l) with d = da * dw; the mins of Q4_K go the same
 * way into 4 accumulators (lane k: sub-blocks 2k and 2k + 1) with -da * dminw, Q5_K's into one
 * running sum.  Result: hsum8(acc) plus the mins' sum. */
static float dot_k(QType t, const void *vw, const BlockQ8_K *a, int64_t nb)
{
    if (t == QTYPE_Q8_K) { /* not a weight type llama.cpp stores: block order */
        float sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            const BlockQ8_K *w = (const BlockQ8_K *)vw + b;
            int S = 0;
            for (int j = 0; j < QK_K; j++)
                S += w->qs[j] * a[b].qs[j];
            sum = sum + (w->d * a[b].d) * (float)S;
        }
        return sum;
    }
    float acc[8] = {0}, accm[4] = {0}, summs = 0;
    for (int64_t b = 0; b < nb; b++) {
        int lane[8] = {0};
        if (t == QTYPE_Q4_K || t == QTYPE_Q5_K) {
            const BlockQ4_K *w4 = (const BlockQ4_K *)vw + b;
            const BlockQ5_K *w5 = (const BlockQ5_K *)vw + b;
            const uint8_t *scales = t == QTYPE_Q4_K ? w4->scales : w5->scales;
            int mk[4] = {0};
            for (int s = 0; s < QK_K / 32; s++) {
                uint8_t sc, m;
                quant_scale_min_k4(s, scales, &sc, &m);
                for (int j = 32 * s; j < 32 * s + 32; j++)
                    lane[(j % 32) / 4] +=
                        sc * (t == QTYPE_Q4_K ? q4k_val(w4, j) : q5k_val(w5, j)) * a[b].qs[j];
                mk[s / 2] += m * (a[b].bsums[2 * s] + a[b].bsums[2 * s + 1]);
            }
            const float d = a[b].d * H2F(t == QTYPE_Q4_K ? w4->d : w5->d);
            const float dmin = -a[b].d * H2F(t == QTYPE_Q4_K ? w4->dmin : w5->dmin);
            for (int l = 0; l < 8; l++)
                acc[l] = fmaf(d, (float)lane[l], acc[l]);
            if (t == QTYPE_Q4_K) {
                for (int k = 0; k < 4; k++)
                    accm[k] = fmaf(dmin, (float)mk[k], accm[k]);
            } else {
                summs = fmaf(dmin, (float)((mk[0] + mk[1]) + (mk[2] + mk[3])), summs);
            }
        } else { /* Q6_K */
            const BlockQ6_K *w = (const BlockQ6_K *)vw + b;
            for (int j = 0; j < QK_K; j++)
                lane[(j % 32) / 4] += w->scales[j / 16] * q6k_val(w, j) * a[b].qs[j];
            const float d = a[b].d * H2F(w->d);
            for (int l = 0; l < 8; l++)
                acc[l] = fmaf(d, (float)lane[l], acc[l]);
        }
    }
    if (t == QTYPE_Q4_K)
        return hsum8(acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3]));
    if (t == QTYPE_Q5_K)
        return hsum8(acc) + summs;
    return hsum8(acc);
}

float quant_dot_ref_row(QType t, const void *w, const void *x, int64_t n)
{
    const int64_t nb = qblocks(t, n);
    switch (t) {
    case QTYPE_F32: return dot_f32(w, x, n);
    case QTYPE_F16: return dot_f16(w, x, n);
    case QTYPE_BF16: return dot_bf16(w, x, n);
    case QTYPE_Q4_0:
    case QTYPE_Q5_0:
    case QTYPE_Q8_0: return dot_q8_0_family(t, w, x, nb);
    case QTYPE_Q4_1:
    case QTYPE_Q5_1:
    case QTYPE_Q8_1: return dot_q8_1_family(t, w, x, nb);
    case QTYPE_Q4_K:
    case QTYPE_Q5_K:
    case QTYPE_Q6_K:
    case QTYPE_Q8_K: return dot_k(t, w, x, nb);
    }
    return 0.0f;
}

float quant_vec_dot_ref(QType t, const void *w_row, const void *x_act, int64_t n)
{
    return quant_dot_ref_row(t, w_row, x_act, n);
}

void quant_matvec_ref(float *y, const void *w, QType t, size_t row_stride, const void *x_act,
                      int64_t n, int d)
{
    CHECK(row_stride >= quant_row_bytes(t, n), "quant: row stride %zu below a %s row of %lld",
          row_stride, quant_type_name(t), (long long)n);
    for (int i = 0; i < d; i++)
        y[i] = quant_dot_ref_row(t, (const char *)w + (size_t)i * row_stride, x_act, n);
}

void quant_matmul_ref(float *y, const void *w, QType t, size_t row_stride, const void *x_act,
                      size_t act_stride, int64_t n, int d, int nb, size_t ldy)
{
    for (int b = 0; b < nb; b++)
        quant_matvec_ref(y + (size_t)b * ldy, w, t, row_stride,
                         (const char *)x_act + (size_t)b * act_stride, n, d);
}
