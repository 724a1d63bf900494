/* rope_factors.c: RoPE with per-frequency factors (Llama 3.1/3.2 scaling).  llama.cpp stores
 * the scaling as rope_freqs.weight, one factor per frequency that divides it; the angle of
 * pair k at position p is (p * theta_scale^k) / factors[k], with the same arithmetic as
 * kernels_rope (ggml_rope_cache_init: the base angle by repeated float multiplication, then
 * divided by the factor; the rotation with FMA contraction), so all-1 factors give
 * kernels_rope's bits. */
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
    const float theta_scale = powf(theta, -2.0f / (float)head_dim);
    float angle = (float)pos;
    for (int k = 0; k < pairs; k++) {
        const float val = angle / factors[k];
        const float fcr = cosf(val), fci = sinf(val);
        angle *= theta_scale;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * (size_t)head_dim;
            float *a = interleaved ? v + 2 * k : v + k;
            float *b = interleaved ? v + 2 * k + 1 : v + pairs + k;
            const float v0 = *a, v1 = *b;
            *a = fmaf(v0, fcr, -(v1 * fci));
            *b = fmaf(v0, fci, v1 * fcr);
        }
    }
}
