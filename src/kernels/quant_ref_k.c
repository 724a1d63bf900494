/* quant_ref_k.c: the K-quant quantizers' plain-C reference (Q4_K, Q5_K, Q6_K and the
 * activations' Q8_K), ggml's scale searches operation for operation (ggml-quants.c's
 * quantize_row_q*_K_ref without an importance matrix), so that a row quantized here has the
 * bytes llama-quantize writes.  The rest of the reference (the type table, the 32-value
 * blocks, dequantization, dot products) is quant_ref.c. */
#include "quant_impl.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "util.h"

#define QMIN(a, b) ((a) < (b) ? (a) : (b))
#define QMAX(a, b) ((a) > (b) ? (a) : (b))
#define GROUP_MAX_EPS 1e-15f
#define F2H quant_fp32_to_fp16
#define H2F quant_fp16_to_fp32

/* ---------------------------------------------------------------- K-quant helpers */


/* ggml's make_qx_quants with rmse_type 1 and no weights (Q6_K's scale search). */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = quant_nearest_int(iscale * x[i]);
        l = QMAX(-nmax, QMIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = quant_nearest_int(iscale * x[i]);
            l = QMAX(-nmax, QMIN(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = quant_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + QMAX(-nmax, QMIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ggml's make_qkx2_quants without mean-absolute-deviation (Q4_K/Q5_K's scale and min search). */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = quant_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)QMAX(0, QMIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = quant_nearest_int(iscale * (x[i] - min));
            l = QMAX(0, QMIN(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i)
                    L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Q4_K and Q5_K share everything but the quant width (nmax 15 or 31) and its search range:
 * 8 sub-blocks of 32 get a scale and a min (make_qkx2_quants), the 16 numbers are quantized to
 * 6 bits against the super-block's d and dmin, then the values are requantized against those. */
static void quantize_k_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *scales,
                              uint16_t *dh, uint16_t *dminh, uint8_t *L)
{
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], sc[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = av_x + fabsf(x[32 * j + l]);
        sc[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 0.1f, nstep);
        if (sc[j] > max_scale)
            max_scale = sc[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)quant_nearest_int(inv_scale * sc[j]);
        uint8_t lm = (uint8_t)quant_nearest_int(inv_min * mins[j]);
        ls = QMIN(63, ls);
        lm = QMIN(63, lm);
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *dh = F2H(max_scale / 63.f);
    *dminh = F2H(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t s, m;
        quant_scale_min_k4(j, scales, &s, &m);
        const float d = H2F(*dh) * s;
        if (!d)
            continue;
        const float dm = H2F(*dminh) * m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = quant_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)QMAX(0, QMIN(nmax, l));
        }
    }
}

void quant_ref_quantize_q4_K(BlockQ4_K *y, const float *x, int64_t nb)
{
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        memset(y[i].scales, 0, sizeof y[i].scales);
        quantize_k_scales(x, 15, -1.f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; ++l)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void quant_ref_quantize_q5_K(BlockQ5_K *y, const float *x, int64_t nb)
{
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        memset(y[i].scales, 0, sizeof y[i].scales);
        quantize_k_scales(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < QK_K; n += 64, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

void quant_ref_quantize_q6_K(BlockQ6_K *y, const float *x, int64_t nb)
{
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            if (fabsf(scale) > max_abs_scale) {
                max_abs_scale = fabsf(scale);
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            y[i].d = F2H(0.f);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = F2H(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib)
            y[i].scales[ib] = (int8_t)QMIN(127, quant_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = H2F(y[i].d) * y[i].scales[j];
            if (!d)
                continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = quant_nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(QMAX(-32, QMIN(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const int q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
                const int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void quant_ref_quantize_q8_K(BlockQ8_K *y, const float *x, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K; ++j)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        if (!amax) { /* ggml leaves bsums unset here; they are the zero sums */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; ++j)
            y[i].qs[j] = (int8_t)QMIN(127, quant_nearest_int(iscale * x[j]));
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii)
                sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}
