/* sampler.h: next-token choice: greedy (temperature 0, lowest id on ties), temperature,
 * top-p (nucleus).  Random state is explicit. */
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
} Sampler;

void sampler_init(Sampler *s, int vocab, float temperature, float top_p, uint64_t seed);
void sampler_free(Sampler *s);
/* Chooses a token from logits[vocab] (modified in place when temperature > 0). */
int sampler_sample(Sampler *s, float *logits);

#endif
