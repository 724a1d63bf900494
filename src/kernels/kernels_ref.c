/* kernels_ref.c: plain-loop twins of the kernels, written as directly as possible after
 * llama.cpp's ggml CPU backend (the fp32 dot product, RMSNorm, LayerNorm, RoPE, SwiGLU: the
 * arithmetic its reference outputs imply), llama2.c run.c (softmax, attention, matvec) and
 * llm.c (the tanh GELU).  The unit
 * tests compare the optimised kernels against these. */
#include "kernels.h"
#include "f32_order.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* llm.c: GELU_SCALING_FACTOR = sqrtf(2.0f / M_PI), i.e. sqrtf of the double 2/pi as a float. */
#define GELU_TWO_OVER_PI ((float)(2.0 / 3.14159265358979323846))

/* y[d] = W x with one sequential sum per row (run.c matmul order). */
void kernels_matvec_ref(float *y, const float *w, const float *x, int n, int d)
{
    for (int i = 0; i < d; i++) {
        float val = 0.0f;
        for (int j = 0; j < n; j++)
            val += w[(size_t)i * (size_t)n + (size_t)j] * x[j];
        y[i] = val;
    }
}

/* w . x in the fp32 kernels' canonical order (matvec.c), one value at a time: value j goes to
 * lane j % 16 of accumulator (j / 16) % 4 by FMA, for the whole steps of 64; with
 * --f32-order avx2, lane j % 8 of accumulator (j / 8) % 4 for the whole steps of 32. */
float kernels_dot_f32_ref(const float *w, const float *x, int n)
{
    if (f32_order_is8()) {
        const int np8 = n & ~(F32_STEP8 - 1);
        float a[F32_STEP8] = {0};
        for (int j = 0; j < np8; j++)
            a[j % F32_STEP8] = fmaf(w[j], x[j], a[j % F32_STEP8]);
        float c[8];
        for (int l = 0; l < 8; l++)
            c[l] = (a[l] + a[16 + l]) + (a[8 + l] + a[24 + l]);
        return f32_finish8(c, w, x, np8, n);
    }
    const int np = n & ~(F32_STEP - 1);
    float a[F32_STEP] = {0};
    for (int j = 0; j < np; j++)
        a[j % F32_STEP] = fmaf(w[j], x[j], a[j % F32_STEP]);
    float c[16];
    for (int l = 0; l < 16; l++)
        c[l] = (a[l] + a[32 + l]) + (a[16 + l] + a[48 + l]);
    return f32_finish(c, w, x, np, n);
}

/* ggml_compute_forward_rms_norm_f32, then ggml_mul by the weight. */
void kernels_rmsnorm_ref(float *out, const float *x, const float *w, float eps, int n)
{
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        const float sq = x[j] * x[j];
        sum += (double)sq;
    }
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int j = 0; j < n; j++) {
        const float y = x[j] * scale;
        out[j] = y * w[j];
    }
}

/* ggml_compute_forward_norm_f32 (y = x - mean, scaled in place), then ggml_mul by the weight
 * and ggml_add of the bias. */
void kernels_layernorm_ref(float *out, const float *x, const float *w, const float *b, float eps,
                           int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)x[i];
    const float mean = (float)(sum / (double)n);
    double sum2 = 0.0;
    for (int i = 0; i < n; i++) {
        const float v = x[i] - mean;
        out[i] = v;
        sum2 += (double)(v * v);
    }
    const float variance = (float)(sum2 / (double)n);
    const float scale = 1.0f / sqrtf(variance + eps);
    for (int i = 0; i < n; i++)
        out[i] *= scale;
    for (int i = 0; i < n; i++)
        out[i] = out[i] * w[i];
    for (int i = 0; i < n; i++)
        out[i] = out[i] + b[i];
}

/* ggml_rope_cache_init's angles (theta *= theta_scale per pair) recomputed for every head,
 * the rotation with ggml's contracted FMAs; half = HF rotate_half (ggml's NEOX mode). */
void kernels_rope_ref(float *x, int n_heads, int head_dim, int pos, float theta, int interleaved)
{
    const float theta_scale = powf(theta, -2.0f / (float)head_dim);
    const int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        float angle = (float)pos;
        for (int i = 0; i < half; i++) {
            const float c = cosf(angle), s = sinf(angle);
            const int i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
            const float v0 = v[i0], v1 = v[i1];
            v[i0] = fmaf(v0, c, -(v1 * s));
            v[i1] = fmaf(v0, s, v1 * c);
            angle = angle * theta_scale;
        }
    }
}

/* run.c softmax: max-subtracted expf, sequential sum, division. */
void kernels_softmax_ref(float *x, int n)
{
    if (n <= 0)
        return;
    float max_val = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max_val)
            max_val = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max_val);
        sum += x[i];
    }
    for (int i = 0; i < n; i++)
        x[i] /= sum;
}

/* ggml_v_expf one value at a time: n = round(x / ln 2), b = x - n ln 2; AVX-512 build:
 * exp(b) = j by a polynomial, scaled by 2^n (scalef), 0 or inf past |n| > 192; AVX2 build:
 * exp(b) - 1 = j, 2^n put into the exponent bits, |n| > 126 scaled twice. */
float kernels_ggml_expf_ref(float x)
{
    const float z = fmaf(x, 0x1.715476p+0f, 0x1.8p23f);
    const float n = z - 0x1.8p23f;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    if (!f32_order_is8()) {
        const float u = b * b;
        const float p1 = fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f);
        const float p2 = fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f);
        const float j = fmaf(fmaf(p1, u, p2), u, fmaf(0x1.ffffecp-1f, b, 1.0f));
        if (fabsf(n) > 192.0f)
            return n <= 0.0f ? 0.0f : INFINITY;
        return ldexpf(j, (int)n);
    }
    uint32_t zb, one;
    const float onef = 1.0f;
    memcpy(&zb, &z, sizeof zb);
    memcpy(&one, &onef, sizeof one);
    const uint32_t e = zb << 23, kb = e + one;
    float k;
    memcpy(&k, &kb, sizeof k);
    const float u = b * b;
    const float p1 = fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f);
    const float p2 = fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f);
    const float j = fmaf(fmaf(p1, u, p2), u, 0x1.ffffecp-1f * b);
    if (fabsf(n) <= 126.0f)
        return fmaf(k, j, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u, s1b = g + 0x7f000000u, s2b = e - g;
    float s1, s2;
    memcpy(&s1, &s1b, sizeof s1);
    memcpy(&s2, &s2b, sizeof s2);
    if (fabsf(n) > 192.0f)
        return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

/* gate = (gate / (1 + ggml_expf(0 - gate))) * up: ggml_v_silu, then ggml_mul. */
void kernels_swiglu_ref(float *gate, const float *up, int n)
{
    for (int i = 0; i < n; i++) {
        const float val = gate[i];
        const float silu = val / (1.0f + kernels_ggml_expf_ref(0.0f - val));
        gate[i] = silu * up[i];
    }
}

/* llm.c gelu_forward (tanh approximation), in place. */
void kernels_gelu_ref(float *x, int n)
{
    const float s = sqrtf(GELU_TWO_OVER_PI);
    for (int i = 0; i < n; i++) {
        float v = x[i];
        float cube = 0.044715f * v * v * v;
        x[i] = 0.5f * v * (1.0f + tanhf(s * (v + cube)));
    }
}

/* run.c attention for n_q heads: sequential q.k / sqrtf(hd), softmax, sum_t a_t v_t. */
void kernels_attention_ref(float *out, const float *q, const float *k_cache,
                           const float *v_cache, float *scratch, int n_q, int head_dim, int n_pos)
{
    for (int h = 0; h < n_q; h++) {
        const float *qh = q + (size_t)h * (size_t)head_dim;
        for (int t = 0; t < n_pos; t++) {
            const float *k = k_cache + (size_t)t * (size_t)head_dim;
            float score = 0.0f;
            for (int i = 0; i < head_dim; i++)
                score += qh[i] * k[i];
            score /= sqrtf((float)head_dim);
            scratch[t] = score;
        }
        kernels_softmax_ref(scratch, n_pos);
        float *o = out + (size_t)h * (size_t)head_dim;
        for (int i = 0; i < head_dim; i++)
            o[i] = 0.0f;
        for (int t = 0; t < n_pos; t++) {
            const float *v = v_cache + (size_t)t * (size_t)head_dim;
            float a = scratch[t];
            for (int i = 0; i < head_dim; i++)
                o[i] += a * v[i];
        }
    }
}
