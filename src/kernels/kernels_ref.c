/* kernels_ref.c: plain-loop twins of the kernels, written as directly as possible after
 * llama2.c run.c (RMSNorm, RoPE, softmax, SwiGLU, attention, matmul) and llm.c (LayerNorm,
 * GELU).  The unit tests compare the optimised kernels against these. */
#include "kernels.h"

#include <math.h>

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

/* run.c rmsnorm: ss = sum x^2 / n + eps, out = w * ((1 / sqrtf(ss)) * x). */
void kernels_rmsnorm_ref(float *out, const float *x, const float *w, float eps, int n)
{
    float ss = 0.0f;
    for (int j = 0; j < n; j++)
        ss += x[j] * x[j];
    ss /= (float)n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < n; j++)
        out[j] = w[j] * (ss * x[j]);
}

/* llm.c layernorm: mean, biased variance of x - mean, rstd = 1 / sqrtf(v + eps). */
void kernels_layernorm_ref(float *out, const float *x, const float *w, const float *b, float eps,
                           int n)
{
    float m = 0.0f;
    for (int i = 0; i < n; i++)
        m += x[i];
    m = m / (float)n;
    float v = 0.0f;
    for (int i = 0; i < n; i++) {
        float xshift = x[i] - m;
        v += xshift * xshift;
    }
    v = v / (float)n;
    float s = 1.0f / sqrtf(v + eps);
    for (int i = 0; i < n; i++) {
        float nrm = s * (x[i] - m);
        out[i] = nrm * w[i] + b[i];
    }
}

/* run.c RoPE per element pair, cos/sin recomputed for every head; half = HF rotate_half. */
void kernels_rope_ref(float *x, int n_heads, int head_dim, int pos, float theta, int interleaved)
{
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        if (interleaved) {
            for (int i = 0; i < head_dim; i += 2) {
                float freq = 1.0f / powf(theta, (float)i / (float)head_dim);
                float val = (float)pos * freq;
                float fcr = cosf(val), fci = sinf(val);
                float v0 = v[i], v1 = v[i + 1];
                v[i] = v0 * fcr - v1 * fci;
                v[i + 1] = v0 * fci + v1 * fcr;
            }
        } else {
            int half = head_dim / 2;
            for (int i = 0; i < half; i++) {
                float freq = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
                float val = (float)pos * freq;
                float fcr = cosf(val), fci = sinf(val);
                float v0 = v[i], v1 = v[i + half];
                v[i] = v0 * fcr - v1 * fci;
                v[i + half] = v0 * fci + v1 * fcr;
            }
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

/* gate = gate / (1 + expf(-gate)) * up. */
void kernels_swiglu_ref(float *gate, const float *up, int n)
{
    for (int i = 0; i < n; i++) {
        float val = gate[i];
        val = val / (1.0f + expf(-val));
        gate[i] = val * up[i];
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
