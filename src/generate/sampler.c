/* sampler.c: greedy, temperature, top-k, min-p and top-p sampling; the repeat, frequency and
 * presence penalties. */
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
    s->top_k = 0;
    s->min_p = 0;
}

void sampler_set_filters(Sampler *s, int top_k, float min_p)
{
    s->top_k = top_k;
    s->min_p = min_p;
}

void sampler_penalize(float *logits, int vocab, const int *recent, int n, float penalty)
{
    sampler_penalize_counts(logits, vocab, recent, n, penalty, 0, 0);
}

void sampler_penalize_counts(float *logits, int vocab, const int *recent, int n, float repeat,
                             float freq, float present)
{
    if ((repeat == 1.0f && freq == 0 && present == 0) || n <= 0)
        return;
    for (int i = 0; i < n; i++) {
        int id = recent[i];
        if (id < 0 || id >= vocab)
            continue;
        int seen = 0; /* each distinct id once, as llama.cpp counts them */
        for (int j = 0; j < i && !seen; j++)
            seen = recent[j] == id;
        if (seen)
            continue;
        int count = 1;
        for (int j = i + 1; j < n; j++)
            count += recent[j] == id;
        if (repeat != 1.0f)
            logits[id] = logits[id] > 0 ? logits[id] / repeat : logits[id] * repeat;
        if (freq != 0 || present != 0)
            logits[id] -= (float)count * freq + present;
    }
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

/* The candidates sampler_sample draws from, with temperature > 0 and a filter or top-p on:
 * s->cand sorted by falling probability, *last the last one kept, *mass their summed
 * probability.  logits[vocab] holds the softmax after the temperature. */
static void sampler_nucleus(Sampler *s, const float *probs, int *last, float *mass)
{
    const int n = s->vocab;
    const int filtered = s->top_k > 0 || s->min_p > 0;
    for (int i = 0; i < n; i++)
        s->cand[i] = (struct SamplerCand){probs[i], i};
    qsort(s->cand, (size_t)n, sizeof *s->cand, cmp_prob_desc);
    int keep = n;
    float total = 1.0f;
    if (filtered) {
        /* top-k, then min-p relative to the most likely; top-p over the mass left */
        if (s->top_k > 0 && s->top_k < keep)
            keep = s->top_k;
        if (s->min_p > 0) {
            const float floor_p = s->min_p * s->cand[0].p;
            int k = 1;
            while (k < keep && s->cand[k].p >= floor_p)
                k++;
            keep = k;
        }
        total = 0;
        for (int i = 0; i < keep; i++)
            total += s->cand[i].p;
    }
    const float top_p = s->top_p > 0 && s->top_p < 1 ? s->top_p : 1.0f;
    float m = 0;
    *last = keep - 1;
    for (int i = 0; i < keep; i++) {
        m += s->cand[i].p;
        if (m >= top_p * total) {
            *last = i;
            break;
        }
    }
    *mass = m;
}

/* 1 when sampling goes through sampler_nucleus (a filter or top-p below 1). */
static int sampler_narrows(const Sampler *s)
{
    return s->top_k > 0 || s->min_p > 0 || (s->top_p > 0 && s->top_p < 1);
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
    if (!sampler_narrows(s)) {
        float cdf = 0;
        for (int i = 0; i < n; i++) {
            cdf += logits[i];
            if (r < cdf)
                return i;
        }
        return n - 1;
    }
    /* Nucleus: smallest set of most likely tokens whose mass reaches top_p. */
    int last;
    float mass;
    sampler_nucleus(s, logits, &last, &mass);
    float target = r * mass, cdf = 0;
    for (int i = 0; i <= last; i++) {
        cdf += s->cand[i].p;
        if (target < cdf)
            return s->cand[i].id;
    }
    return s->cand[last].id;
}

void sampler_probs(Sampler *s, float *logits)
{
    const int n = s->vocab;
    for (int i = 0; i < n; i++)
        logits[i] /= s->temperature;
    kernels_softmax(logits, n);
    if (!sampler_narrows(s))
        return;
    int last;
    float mass;
    sampler_nucleus(s, logits, &last, &mass);
    for (int i = 0; i < n; i++)
        logits[i] = 0;
    for (int i = 0; i <= last; i++)
        logits[s->cand[i].id] = s->cand[i].p / mass;
}
