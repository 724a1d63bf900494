/* kernels.c: the per-layer kernels other than matvec.  Each follows its _ref twin's
 * arithmetic operation for operation (ggml's CPU backend for RMSNorm, LayerNorm, RoPE, SiLU,
 * ggml's GELU and the attention; run.c / llm.c for softmax and the tanh GELU), so results are
 * bit-identical to the twin.
 * The loops are written so that -O3 vectorises the elementwise parts without reordering. */
#include "kernels.h"
#include "f32_order.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define GELU_TWO_OVER_PI ((float)(2.0 / 3.14159265358979323846))
#define GELU_GGML_S 0.79788456080286535587989211986876f /* ggml's SQRT_2_OVER_PI */
#define ROPE_CHUNK 64 /* rotation pairs whose cos/sin are computed once for all heads */

/* ---------------------------------------------------------------- ggml's float arithmetic
 * llama.cpp's CPU backend (ggml-cpu) computes the attention softmax and SiLU with its own
 * vectorised expf (ggml_v_expf) and sums the softmax in double, one vector at a time; its
 * ggml_vec_dot_f32 sums in 4 vector accumulators.  The vector width, and with it the expf's
 * last steps and the reductions, depend on the build: 16 lanes for AVX-512 (the default order,
 * the references of ../shared/models/gguf and gguf-arch), 8 for AVX2 (--f32-order avx2, the
 * references of gguf-gpt2).  Every operation below is a lane-wise IEEE operation (fmaf is one
 * rounding, as the vector FMA), so these scalar loops give its bits exactly on every CPU (fmaf
 * is a libm call where the CPU has no FMA: slower, same bits).  The functions take the lane
 * count L (16 or 8) as a constant of each always-inlined call, so either order is a loop of
 * its own, chosen once per call of the public kernels. */
#define GGML_INLINE static inline __attribute__((always_inline))

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ggml_v_expf: n = round(x / ln 2) by the 1.5 * 2^23 shift, b = x - n ln 2 in two FMA steps,
 * exp(b) - 1 by a degree-5 polynomial; then scaled by 2^n.  L = 16: the AVX-512 build's,
 * L = 8: the AVX2 build's. */
GGML_INLINE float ggml_expf(float x, int L)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    if (L == 16) {
        /* AVX-512: j = exp(b) by the polynomial, result = scalef(j, n) = j * 2^n. */
        const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                  fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                             u, fmaf(0x1.ffffecp-1f, b, 1.0f));
        if (fabsf(n) > 192.0f)
            return n <= 0.0f ? 0.0f : INFINITY;
        /* ldexpf(j, n): where 2^n is a normal float, the product j * 2^n, rounded once as
         * ldexpf rounds it (the same correctly rounded value, without the libm call) */
        const int ni = (int)n;
        if (ni >= -126 && ni <= 127)
            return j * u2f((uint32_t)(ni + 127) << 23);
        return ldexpf(j, ni);
    }
    /* AVX2: j = exp(b) - 1, k = 2^n built in the exponent bits, result = k + k j. */
    const uint32_t e = f2u(z) << 23;
    const float k = u2f(e + f2u(1.0f));
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                              fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, 0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f))
        return fmaf(k, j, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = u2f(g + 0x7f000000u), s2 = u2f(e - g);
    if (fabsf(n) > 192.0f)
        return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

/* The lane count of the order chosen now. */
static inline int ggml_lanes(void) { return f32_order_is8() ? 8 : 16; }

float kernels_ggml_expf(float x) { return ggml_lanes() == 8 ? ggml_expf(x, 8) : ggml_expf(x, 16); }

/* The horizontal sum of one vector of L floats as ggml_vec_soft_max_f32 reduces it (halves
 * added pairwise down to 4 lanes, then (l0 + l2) + (l1 + l3)). */
GGML_INLINE float ggml_lane_sum(float *v, int L)
{
    for (int w = L / 2; w >= 4; w /= 2)
        for (int i = 0; i < w; i++)
            v[i] = v[i] + v[i + w];
    return (v[0] + v[2]) + (v[1] + v[3]);
}

#ifndef KERNELS_GGML_CONTRACT
#define KERNELS_GGML_CONTRACT 0 /* ggml's scalar tails compiled with FMA contraction (gnu11) */
#endif

/* ggml's reduction of its 4 vector accumulators, across the lanes of a0 = (0 + 2) + (1 + 3):
 * _mm512_reduce_add_ps's tree (L = 16), or GGML_F32x8_REDUCE's halves and two _mm_hadd_ps
 * (L = 8). */
GGML_INLINE float ggml_acc_sum(float *a0, int L)
{
    if (L == 16)
        return ggml_lane_sum(a0, 16);
    float t[4];
    for (int l = 0; l < 4; l++)
        t[l] = a0[l] + a0[l + 4];
    return (t[0] + t[1]) + (t[2] + t[3]); /* two _mm_hadd_ps */
}

/* ggml_vec_dot_f32(n, x, y): 4 vector accumulators of L lanes over whole steps of 4 vectors
 * (FMA), reduced (0 + 2, 1 + 3, then 0 + 1, then across lanes), then the remaining values
 * added one by one.  n_pad >= n is the length ggml sees (the values past n are zeros:
 * llama.cpp's KV length padded to 32; they are skipped, as a zero product would leave each
 * accumulator as it is).  Value i goes to accumulator (i / L) % 4, lane i % L. */
GGML_INLINE float ggml_dot_f32(const float *x, const float *y, int n, int n_pad, int L)
{
    const int STEP = 4 * L;
    const int np = n_pad - n_pad % STEP;
    float sumf = 0.0f;
    if (np > 0) {
        float acc[64];
        memset(acc, 0, sizeof acc);
        const int nv = np < n ? np : n;
        int i0 = 0;
        for (; i0 + STEP <= nv; i0 += STEP) /* whole steps: one vector FMA per accumulator */
            for (int m = 0; m < STEP; m++)
                acc[m] = fmaf(x[i0 + m], y[i0 + m], acc[m]);
        for (int m = 0; i0 + m < nv; m++)
            acc[m] = fmaf(x[i0 + m], y[i0 + m], acc[m]);
        for (int l = 0; l < L; l++)
            acc[l] = (acc[l] + acc[2 * L + l]) + (acc[L + l] + acc[3 * L + l]);
        sumf = ggml_acc_sum(acc, L);
    }
    for (int i = np; i < n; i++) {
#if KERNELS_GGML_CONTRACT
        sumf = fmaf(x[i], y[i], sumf);
#else
        sumf += x[i] * y[i];
#endif
    }
    return sumf;
}

/* o[i] = ggml_dot_f32 of column i of v ([n][hd]) with p, for every i < hd: each column's
 * accumulators, values and order exactly as ggml_dot_f32's, but computed a row of v at a time
 * (64 columns of each row per pass, contiguous reads) instead of a column at a time. */
GGML_INLINE void ggml_dot_f32_cols(float *o, const float *v, int hd, const float *p, int n,
                                   int n_pad, int L)
{
    enum { CH = 64 };
    const int STEP = 4 * L;
    const int np = n_pad - n_pad % STEP, nv = np < n ? np : n;
    float acc[64][CH]; /* accumulator (t / L) % 4, lane t % L, of each column: acc[t % STEP] */
    for (int i0 = 0; i0 < hd; i0 += CH) {
        const int w = hd - i0 < CH ? hd - i0 : CH;
        float s[CH];
        memset(s, 0, sizeof s);
        if (np > 0) {
            /* whole rows at once (a row of CH floats is a few vector stores; a width w that
             * is not a constant made this a loop of 8-byte stores, a quarter of the time
             * of a prompt's attention) */
            memset(acc, 0, sizeof acc);
            for (int t = 0; t < nv; t++) {
                float *a = acc[t % STEP];
                const float *vr = v + (size_t)t * (size_t)hd + i0;
                const float pt = p[t];
                for (int i = 0; i < w; i++)
                    a[i] = fmaf(vr[i], pt, a[i]);
            }
            /* The reduction of ggml_acc_sum for every column at once, lane by lane across
             * the columns (the same additions in the same order per column, as vectors over
             * the columns instead of one column's lanes at a time): a0 = (0 + 2) + (1 + 3),
             * then across lanes: halves 8 and 4 and (l0 + l2) + (l1 + l3) (L = 16), or the
             * two 128-bit halves and two _mm_hadd_ps (L = 8). */
            float a0[16][CH];
            for (int l = 0; l < L; l++)
                for (int i = 0; i < CH; i++)
                    a0[l][i] = (acc[l][i] + acc[2 * L + l][i]) + (acc[L + l][i] + acc[3 * L + l][i]);
            if (L == 16)
                for (int l = 0; l < 8; l++)
                    for (int i = 0; i < CH; i++)
                        a0[l][i] = a0[l][i] + a0[l + 8][i];
            for (int l = 0; l < 4; l++)
                for (int i = 0; i < CH; i++)
                    a0[l][i] = a0[l][i] + a0[l + 4][i];
            if (L == 16)
                for (int i = 0; i < w; i++)
                    s[i] = (a0[0][i] + a0[2][i]) + (a0[1][i] + a0[3][i]);
            else
                for (int i = 0; i < w; i++)
                    s[i] = (a0[0][i] + a0[1][i]) + (a0[2][i] + a0[3][i]);
        }
        for (int t = np; t < n; t++) {
            const float *vr = v + (size_t)t * (size_t)hd + i0;
            for (int i = 0; i < w; i++) {
#if KERNELS_GGML_CONTRACT
                s[i] = fmaf(vr[i], p[t], s[i]);
#else
                s[i] += vr[i] * p[t];
#endif
            }
        }
        memcpy(o + i0, s, (size_t)w * sizeof(float));
    }
}

/* ggml_vec_soft_max_f32 after ggml_vec_max_f32, then ggml_vec_scale_f32 by 1 / sum: x[i] =
 * ggml_expf(x[i] - max), summed in double one L-lane vector at a time (llama.cpp pads the KV
 * length with masked positions, whose exp is 0, so every value takes the vector path). */
GGML_INLINE void ggml_softmax(float *x, int n, int L)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int i0 = 0; i0 < n; i0 += L) {
        float v[16];
        for (int l = 0; l < L; l++) {
            v[l] = i0 + l < n ? ggml_expf(x[i0 + l] - max, L) : 0.0f;
            if (i0 + l < n)
                x[i0 + l] = v[l];
        }
        sum += (double)ggml_lane_sum(v, L);
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++)
        x[i] *= inv;
}

/* out = x / sqrt(mean(x^2) + eps) * w as ggml computes it (ggml_compute_forward_rms_norm_f32,
 * then the weight as a separate multiply): squares in float summed in double, the mean
 * rounded to float, scale = 1 / sqrtf(mean + eps), out = (x * scale) * w. */
void kernels_rmsnorm(float *restrict out, const float *restrict x, const float *restrict w,
                     float eps, int n)
{
    double sum = 0.0;
    for (int j = 0; j < n; j++)
        sum += (double)(x[j] * x[j]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int j = 0; j < n; j++)
        out[j] = (x[j] * scale) * w[j];
}

/* out = (x - mean) * rstd * w + b as ggml computes it (ggml_compute_forward_norm_f32, then
 * ggml_mul by the weight and ggml_add of the bias): the sum of x in double, the mean rounded
 * to float, v = x - mean in float, the sum of v * v (rounded to float) in double, the
 * variance rounded to float, scale = 1 / sqrtf(var + eps), out = ((v * scale) * w) + b. */
void kernels_layernorm(float *restrict out, const float *restrict x, const float *restrict w,
                       const float *restrict b, float eps, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)x[i];
    const float mean = (float)(sum / (double)n);
    double sum2 = 0.0;
    for (int i = 0; i < n; i++) {
        const float v = x[i] - mean;
        sum2 += (double)(v * v);
    }
    const float scale = 1.0f / sqrtf((float)(sum2 / (double)n) + eps);
    for (int i = 0; i < n; i++)
        out[i] = ((x[i] - mean) * scale) * w[i] + b[i];
}

/* Rotates every head in place; cos/sin of each frequency computed once, not once per head.
 * The angles as ggml_rope_cache_init makes them: theta_scale = powf(base, -2 / head_dim), the
 * angle of pair k is pos * theta_scale^k by repeated float multiplication, then cosf, sinf;
 * the rotation as ggml's rope compiles with FMA contraction: x0 c - x1 s = fma(x0, c, -(x1 s)),
 * x0 s + x1 c = fma(x0, s, x1 c). */
void kernels_rope(float *x, int n_heads, int head_dim, int pos, float theta, int interleaved)
{
    const int pairs = head_dim / 2;
    const float theta_scale = powf(theta, -2.0f / (float)head_dim);
    float fcr[ROPE_CHUNK], fci[ROPE_CHUNK];
    float angle = (float)pos;
    for (int c0 = 0; c0 < pairs; c0 += ROPE_CHUNK) {
        const int cn = pairs - c0 < ROPE_CHUNK ? pairs - c0 : ROPE_CHUNK;
        for (int k = 0; k < cn; k++) {
            fcr[k] = cosf(angle);
            fci[k] = sinf(angle);
            angle *= theta_scale;
        }
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * (size_t)head_dim;
            if (interleaved) {
                float *p = v + 2 * c0;
                for (int k = 0; k < cn; k++) {
                    float v0 = p[2 * k], v1 = p[2 * k + 1];
                    p[2 * k] = fmaf(v0, fcr[k], -(v1 * fci[k]));
                    p[2 * k + 1] = fmaf(v0, fci[k], v1 * fcr[k]);
                }
            } else {
                float *restrict lo = v + c0;
                float *restrict hi = v + pairs + c0;
                for (int k = 0; k < cn; k++) {
                    float v0 = lo[k], v1 = hi[k];
                    lo[k] = fmaf(v0, fcr[k], -(v1 * fci[k]));
                    hi[k] = fmaf(v0, fci[k], v1 * fcr[k]);
                }
            }
        }
    }
}

/* In-place softmax: max-subtracted expf, sequential sum, division (run.c). */
void kernels_softmax(float *x, int n)
{
    if (n <= 0)
        return;
    float max_val = x[0];
    for (int i = 1; i < n; i++)
        max_val = x[i] > max_val ? x[i] : max_val;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max_val);
        sum += x[i];
    }
    for (int i = 0; i < n; i++)
        x[i] /= sum;
}

/* gate[i] = silu(gate[i]) * up[i], silu as ggml_v_silu: x / (1 + ggml_expf(0 - x)). */
GGML_INLINE void swiglu_lanes(float *restrict gate, const float *restrict up, int n, int L)
{
    for (int i = 0; i < n; i++) {
        const float val = gate[i];
        gate[i] = (val / (1.0f + ggml_expf(0.0f - val, L))) * up[i];
    }
}

void kernels_swiglu(float *restrict gate, const float *restrict up, int n)
{
    if (ggml_lanes() == 8)
        swiglu_lanes(gate, up, n, 8);
    else
        swiglu_lanes(gate, up, n, 16);
}

/* x[i] = 0.5 x (1 + tanhf(s (x + 0.044715 x^3))), s = sqrtf(2/pi), llm.c's order. */
void kernels_gelu(float *x, int n)
{
    const float s = sqrtf(GELU_TWO_OVER_PI);
    for (int i = 0; i < n; i++) {
        float v = x[i];
        float cube = 0.044715f * v * v * v;
        x[i] = 0.5f * v * (1.0f + tanhf(s * (v + cube)));
    }
}

/* One value of ggml's CPU GELU (GGML_GELU_FP16): 0 at or below -10, x at or above 10, else
 * the input rounded to fp16, the tanh form evaluated on it as ggml fills its table
 * (0.5 h (1 + tanhf(s h fma(a h, h, 1))), s = sqrt(2/pi) as a float, a = 0.044715: the inner
 * 1 + a h h contracted to one FMA, as GCC compiles ggml), and the result rounded to fp16. */
static inline float gelu_fp16_one(float x)
{
    if (x <= -10.0f)
        return 0.0f;
    if (x >= 10.0f)
        return x;
    const float h = kernels_f16_to_f32_one(kernels_f32_to_f16_one(x));
    const float g = 0.5f * h * (1.0f + tanhf(GELU_GGML_S * h * fmaf(0.044715f * h, h, 1.0f)));
    return kernels_f16_to_f32_one(kernels_f32_to_f16_one(g));
}

/* x[i] = gelu_fp16_one(x[i]): llama.cpp's GELU, bit for bit (the table it looks up holds
 * exactly these values; computing them here keeps the kernels free of mutable tables). */
void kernels_gelu_fp16(float *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = gelu_fp16_one(x[i]);
}

/* y[i] += x[i]. */
void kernels_add(float *restrict y, const float *restrict x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += x[i];
}

/* llama.cpp's attention (F32 KV cache, no flash attention, V stored transposed): scores
 * k_t . q by ggml_vec_dot_f32, times kq_scale, ggml's softmax, then out[i] =
 * ggml_vec_dot_f32 of V's column i with the weights over the KV length padded to 32. */
GGML_INLINE void attention_lanes(float *restrict out, const float *restrict q,
                                 const float *restrict k_cache, const float *restrict v_cache,
                                 float *restrict scratch, int n_q, int head_dim, int n_pos,
                                 float scale, int L)
{
    const int n_pad = (n_pos + 31) / 32 * 32;
    for (int h = 0; h < n_q; h++) {
        const float *qh = q + (size_t)h * (size_t)head_dim;
        for (int t = 0; t < n_pos; t++)
            scratch[t] = ggml_dot_f32(k_cache + (size_t)t * (size_t)head_dim, qh, head_dim,
                                      head_dim, L) * scale;
        ggml_softmax(scratch, n_pos, L);
        ggml_dot_f32_cols(out + (size_t)h * (size_t)head_dim, v_cache, head_dim, scratch, n_pos,
                          n_pad, L);
    }
}

void kernels_attention_scaled(float *restrict out, const float *restrict q,
                              const float *restrict k_cache, const float *restrict v_cache,
                              float *restrict scratch, int n_q, int head_dim, int n_pos,
                              float scale)
{
    if (ggml_lanes() == 8)
        attention_lanes(out, q, k_cache, v_cache, scratch, n_q, head_dim, n_pos, scale, 8);
    else
        attention_lanes(out, q, k_cache, v_cache, scratch, n_q, head_dim, n_pos, scale, 16);
}

/* The twin: ggml_vec_dot_f32 written one value at a time, accumulator (i / L) % 4 and lane
 * i % L, the columns of v read down the cache (the form this file had before the row-wise
 * kernels; the unit tests hold those to it bit for bit). */
static float ggml_dot_f32_twin(const float *x, size_t xs, const float *y, int n, int n_pad,
                               int L)
{
    const int STEP = 4 * L;
    const int np = n_pad - n_pad % STEP;
    float sumf = 0.0f;
    if (np > 0) {
        float acc[4][16];
        memset(acc, 0, sizeof acc);
        for (int i = 0; i < np && i < n; i++)
            acc[(i / L) % 4][i % L] = fmaf(x[(size_t)i * xs], y[i], acc[(i / L) % 4][i % L]);
        for (int l = 0; l < L; l++) {
            acc[0][l] = acc[0][l] + acc[2][l];
            acc[1][l] = acc[1][l] + acc[3][l];
            acc[0][l] = acc[0][l] + acc[1][l];
        }
        sumf = ggml_acc_sum(acc[0], L);
    }
    for (int i = np; i < n; i++) {
#if KERNELS_GGML_CONTRACT
        sumf = fmaf(x[(size_t)i * xs], y[i], sumf);
#else
        sumf += x[(size_t)i * xs] * y[i];
#endif
    }
    return sumf;
}

void kernels_attention_scaled_twin(float *out, const float *q, const float *k_cache,
                                   const float *v_cache, float *scratch, int n_q, int head_dim,
                                   int n_pos, float scale)
{
    const int n_pad = (n_pos + 31) / 32 * 32, L = ggml_lanes();
    for (int h = 0; h < n_q; h++) {
        const float *qh = q + (size_t)h * (size_t)head_dim;
        for (int t = 0; t < n_pos; t++)
            scratch[t] = ggml_dot_f32_twin(k_cache + (size_t)t * (size_t)head_dim, 1, qh,
                                           head_dim, head_dim, L) * scale;
        if (L == 8)
            ggml_softmax(scratch, n_pos, 8);
        else
            ggml_softmax(scratch, n_pos, 16);
        float *o = out + (size_t)h * (size_t)head_dim;
        for (int i = 0; i < head_dim; i++)
            o[i] = ggml_dot_f32_twin(v_cache + i, (size_t)head_dim, scratch, n_pos, n_pad, L);
    }
}

void kernels_attention(float *restrict out, const float *restrict q,
                       const float *restrict k_cache, const float *restrict v_cache,
                       float *restrict scratch, int n_q, int head_dim, int n_pos)
{
    kernels_attention_scaled(out, q, k_cache, v_cache, scratch, n_q, head_dim, n_pos,
                             1.0f / sqrtf((float)head_dim));
}

/* Index of the largest value, the lowest index on ties. */
int kernels_argmax(const float *x, int n)
{
    int best = 0;
    float best_val = n > 0 ? x[0] : 0.0f;
    for (int i = 1; i < n; i++) {
        if (x[i] > best_val) {
            best_val = x[i];
            best = i;
        }
    }
    return best;
}
