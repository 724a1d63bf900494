/* sampler.h: next-token choice: greedy (temperature 0, lowest id on ties), temperature,
 * top-k, min-p, top-p (nucleus), and llama.cpp's repeat, frequency and presence
 * penalties.  Random state is explicit. */
#ifndef HEADSPLIT_SAMPLER_H
#define HEADSPLIT_SAMPLER_H

#include <stdint.h>

struct SamplerCand;

typedef struct {
    float temperature; /* 0: greedy */
    float top_p;       /* 1: disabled */
    uint64_t rng;      /* state, seeded from --seed */
    int vocab;
    struct SamplerCand *cand; /* [vocab] scratch for top-p */
    int top_k;         /* 0: disabled */
    float min_p;       /* 0: disabled; keeps p >= min_p * p_max */
} Sampler;

void sampler_init(Sampler *s, int vocab, float temperature, float top_p, uint64_t seed);
void sampler_free(Sampler *s);
/* Sets top-k and min-p (after sampler_init; both off by default).  With temperature > 0
 * the order is temperature, softmax, top-k, min-p, top-p on what is left. */
void sampler_set_filters(Sampler *s, int top_k, float min_p);
/* llama.cpp's repeat penalty on logits[vocab]: each distinct id among recent[n] has its
 * logit divided by penalty when positive, multiplied when negative (penalty 1: nothing). */
void sampler_penalize(float *logits, int vocab, const int *recent, int n, float penalty);
/* llama.cpp's three penalties (its penalties sampler) on logits[vocab] over recent[n]: each
 * distinct id seen c times there gets the repeat penalty as above (1: off), then loses
 * c x freq and, once, present (OpenAI's frequency_penalty and presence_penalty; 0: off). */
void sampler_penalize_counts(float *logits, int vocab, const int *recent, int n, float repeat,
                             float freq, float present);
/* Chooses a token from logits[vocab] (modified in place when temperature > 0). */
int sampler_sample(Sampler *s, float *logits);
/* With temperature > 0: turns logits[vocab] in place into the distribution sampler_sample
 * draws from (after the same temperature, top-k, min-p and top-p), zero outside the kept
 * tokens.  Draws nothing from the random state. */
void sampler_probs(Sampler *s, float *logits);

#endif
