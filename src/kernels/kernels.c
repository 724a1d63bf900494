/* kernels.c: the per-layer kernels other than matvec.  Each follows its _ref twin's
 * arithmetic operation for operation (run.c / llm.c order), so results are bit-identical to
 * the twin, except kernels_attention, whose q.k scores use the matvec's canonical order.
 * The loops are written so that -O3 vectorises the elementwise parts without reordering. */
#include "kernels.h"

#include <math.h>

#define GELU_TWO_OVER_PI ((float)(2.0 / 3.14159265358979323846))
#define ROPE_CHUNK 64 /* rotation pairs whose cos/sin are computed once for all heads */

/* out = x / sqrt(mean(x^2) + eps) * w, in run.c's order: w[j] * (inv * x[j]). */
void kernels_rmsnorm(float *restrict out, const float *restrict x, const float *restrict w,
                     float eps, int n)
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

/* out = (x - mean) * rstd * w + b, biased variance, in llm.c's order. */
void kernels_layernorm(float *restrict out, const float *restrict x, const float *restrict w,
                       const float *restrict b, float eps, int n)
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
    const float s = 1.0f / sqrtf(v + eps);
    for (int i = 0; i < n; i++) {
        float nrm = s * (x[i] - m);
        out[i] = nrm * w[i] + b[i];
    }
}

/* Rotates every head in place; cos/sin of each frequency computed once, not once per head. */
void kernels_rope(float *x, int n_heads, int head_dim, int pos, float theta, int interleaved)
{
    const int pairs = head_dim / 2;
    float fcr[ROPE_CHUNK], fci[ROPE_CHUNK];
    for (int c0 = 0; c0 < pairs; c0 += ROPE_CHUNK) {
        const int cn = pairs - c0 < ROPE_CHUNK ? pairs - c0 : ROPE_CHUNK;
        for (int k = 0; k < cn; k++) {
            float freq = 1.0f / powf(theta, (float)(2 * (c0 + k)) / (float)head_dim);
            float val = (float)pos * freq;
            fcr[k] = cosf(val);
            fci[k] = sinf(val);
        }
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * (size_t)head_dim;
            if (interleaved) {
                float *p = v + 2 * c0;
                for (int k = 0; k < cn; k++) {
                    float v0 = p[2 * k], v1 = p[2 * k + 1];
                    p[2 * k] = v0 * fcr[k] - v1 * fci[k];
                    p[2 * k + 1] = v0 * fci[k] + v1 * fcr[k];
                }
            } else {
                float *restrict lo = v + c0;
                float *restrict hi = v + pairs + c0;
                for (int k = 0; k < cn; k++) {
                    float v0 = lo[k], v1 = hi[k];
                    lo[k] = v0 * fcr[k] - v1 * fci[k];
                    hi[k] = v0 * fci[k] + v1 * fcr[k];
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

/* gate[i] = gate[i] / (1 + expf(-gate[i])) * up[i]. */
void kernels_swiglu(float *restrict gate, const float *restrict up, int n)
{
    for (int i = 0; i < n; i++) {
        float val = gate[i];
        val = val / (1.0f + expf(-val));
        gate[i] = val * up[i];
    }
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

/* y[i] += x[i]. */
void kernels_add(float *restrict y, const float *restrict x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += x[i];
}

/* Scores K q by the own matvec (canonical order), / sqrtf(hd), softmax, then out = sum_t a_t v_t
 * accumulated over t in increasing order. */
void kernels_attention(float *restrict out, const float *restrict q,
                       const float *restrict k_cache, const float *restrict v_cache,
                       float *restrict scratch, int n_q, int head_dim, int n_pos)
{
    const float scale = sqrtf((float)head_dim);
    for (int h = 0; h < n_q; h++) {
        const float *qh = q + (size_t)h * (size_t)head_dim;
        kernels_matvec_own(scratch, k_cache, qh, head_dim, n_pos, (size_t)head_dim);
        for (int t = 0; t < n_pos; t++)
            scratch[t] /= scale;
        kernels_softmax(scratch, n_pos);
        float *restrict o = out + (size_t)h * (size_t)head_dim;
        for (int i = 0; i < head_dim; i++)
            o[i] = 0.0f;
        for (int t = 0; t < n_pos; t++) {
            const float *restrict v = v_cache + (size_t)t * (size_t)head_dim;
            const float a = scratch[t];
            for (int i = 0; i < head_dim; i++)
                o[i] += a * v[i];
        }
    }
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
