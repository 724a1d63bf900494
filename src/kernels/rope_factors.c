/* rope_factors.c: RoPE with per-frequency factors (Llama 3.1/3.2 scaling).  llama.cpp stores
 * the scaling as rope_freqs.weight, one factor per frequency that divides it; the rotation
 * angle of pair i at position p is p * theta^(-2i/hd) / factors[i]. */
#include "kernels.h"

#include <math.h>
#include <stddef.h>

void kernels_rope_factors(float *x, int n_heads, int head_dim, int pos, float theta,
                          int interleaved, const float *factors)
{
    if (!factors) {
        kernels_rope(x, n_heads, head_dim, pos, theta, interleaved);
        return;
    }
    const int pairs = head_dim / 2;
    for (int k = 0; k < pairs; k++) {
        float freq = 1.0f / powf(theta, (float)(2 * k) / (float)head_dim);
        float val = (float)pos * freq / factors[k];
        float fcr = cosf(val), fci = sinf(val);
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * (size_t)head_dim;
            float *a = interleaved ? v + 2 * k : v + k;
            float *b = interleaved ? v + 2 * k + 1 : v + pairs + k;
            float v0 = *a, v1 = *b;
            *a = v0 * fcr - v1 * fci;
            *b = v0 * fci + v1 * fcr;
        }
    }
}
