/* sampler.c: greedy, temperature and top-p sampling. */
#include "sampler.h"

#include "kernels.h"
#include "util.h"

#include <stdlib.h>

struct SamplerCand {
    float p;
    int id;
};

void sampler_init(Sampler *s, int vocab, float temperature, float top_p, uint64_t seed)
{
    s->temperature = temperature;
    s->top_p = top_p;
    s->rng = seed;
    s->vocab = vocab;
    s->cand = xmalloc((size_t)vocab * sizeof *s->cand);
}

void sampler_free(Sampler *s)
{
    if (s) {
        free(s->cand);
        s->cand = NULL;
    }
}

/* Descending probability; ties by ascending id so the order is total and deterministic. */
static int cmp_prob_desc(const void *a, const void *b)
{
    const struct SamplerCand *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->id - y->id;
}

int sampler_sample(Sampler *s, float *logits)
{
    const int n = s->vocab;
    if (s->temperature <= 0)
        return kernels_argmax(logits, n);
    for (int i = 0; i < n; i++)
        logits[i] /= s->temperature;
    kernels_softmax(logits, n);
    float r = rng_float(&s->rng);
    if (s->top_p <= 0 || s->top_p >= 1) {
        float cdf = 0;
        for (int i = 0; i < n; i++) {
            cdf += logits[i];
            if (r < cdf)
                return i;
        }
        return n - 1;
    }
    /* Nucleus: smallest set of most likely tokens whose mass reaches top_p. */
    for (int i = 0; i < n; i++)
        s->cand[i] = (struct SamplerCand){logits[i], i};
    qsort(s->cand, (size_t)n, sizeof *s->cand, cmp_prob_desc);
    float mass = 0;
    int last = n - 1;
    for (int i = 0; i < n; i++) {
        mass += s->cand[i].p;
        if (mass >= s->top_p) {
            last = i;
            break;
        }
    }
    float target = r * mass, cdf = 0;
    for (int i = 0; i <= last; i++) {
        cdf += s->cand[i].p;
        if (target < cdf)
            return s->cand[i].id;
    }
    return s->cand[last].id;
}
