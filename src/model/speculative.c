/* speculative.c: the acceptance rule of speculative sampling and the draft length of
 * --draft-tokens auto.  Pure: the random numbers come in as arguments. */
#include "speculative.h"

#include "util.h"

float speculative_uniform(uint64_t seed, int pos, int stream)
{
    /* splitmix64 over a state that mixes the three inputs: neighbouring positions and
     * streams give unrelated numbers */
    uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * ((uint64_t)(uint32_t)pos + 1)) ^
                 ((uint64_t)(uint32_t)stream << 56);
    rng_next(&s);
    return rng_float(&s);
}

int speculative_draw(const float *p, int vocab, float u)
{
    double total = 0;
    int last = 0;
    for (int i = 0; i < vocab; i++)
        if (p[i] > 0) {
            total += p[i];
            last = i;
        }
    const double target = (double)u * total;
    double cdf = 0;
    for (int i = 0; i < vocab; i++) {
        if (!(p[i] > 0))
            continue;
        cdf += p[i];
        if (target < cdf)
            return i;
    }
    return last; /* u * total rounded up to the total: the last token with mass */
}

int speculative_keep(const float *p, const float *q, int d, float u)
{
    /* u < p/q without the division: q = 0 (the draft could not have proposed d, but a
     * caller may force it) keeps any d the target allows */
    return (double)u * (double)q[d] < (double)p[d];
}

int speculative_residual(const float *p, const float *q, int vocab, float u)
{
    double mass = 0;
    int last = -1;
    for (int i = 0; i < vocab; i++)
        if (p[i] > q[i]) {
            mass += (double)p[i] - (double)q[i];
            last = i;
        }
    if (last < 0 || !(mass > 0))
        return speculative_draw(p, vocab, u);
    const double target = (double)u * mass;
    double cdf = 0;
    for (int i = 0; i < vocab; i++) {
        if (!(p[i] > q[i]))
            continue;
        cdf += (double)p[i] - (double)q[i];
        if (target < cdf)
            return i;
    }
    return last;
}

int speculative_step(const float *p, const float *q, int vocab, int d, float u_keep,
                     float u_residual, int *kept)
{
    *kept = speculative_keep(p, q, d, u_keep);
    return *kept ? d : speculative_residual(p, q, vocab, u_residual);
}

/* Weight of the newest round in the running estimates: about the last ten rounds count. */
#define SPEC_DECAY 0.9

void speculative_auto_init(SpecAuto *a, int k0, int linear)
{
    /* a prior of two drafts, one kept, until rounds say otherwise */
    a->proposed = 2;
    a->accepted = 1;
    a->t_draft = a->t_pass = 0;
    a->linear = linear;
    a->k = k0 < 1 ? 1 : k0 > SPECULATIVE_K_MAX ? SPECULATIVE_K_MAX : k0;
}

/* A weighted mean: the first sample alone, then SPEC_DECAY of the old and the rest new. */
static double spec_mean(double old, double sample)
{
    return old > 0 ? SPEC_DECAY * old + (1 - SPEC_DECAY) * sample : sample;
}

void speculative_auto_update(SpecAuto *a, int proposed, int accepted, double draft_s,
                             int draft_forwards, double pass_s, int pass_positions)
{
    a->proposed = SPEC_DECAY * a->proposed + proposed;
    a->accepted = SPEC_DECAY * a->accepted + accepted;
    if (draft_forwards > 0)
        a->t_draft = spec_mean(a->t_draft, draft_s / draft_forwards);
    if (pass_s > 0 && pass_positions > 0)
        a->t_pass = spec_mean(a->t_pass, a->linear ? pass_s / pass_positions : pass_s);
    if (a->t_pass > 0)
        a->k = speculative_choose_k(a->accepted / a->proposed, a->t_draft, a->t_pass,
                                    a->linear, SPECULATIVE_K_MAX);
}

int speculative_choose_k(double alpha, double t_draft, double t_pass, int linear, int k_max)
{
    if (!(alpha >= 0))
        alpha = 0;
    if (alpha > 0.999)
        alpha = 0.999;
    if (t_draft < 0)
        t_draft = 0;
    int best = 1;
    double best_rate = -1, expect = 1, a_pow = 1;
    for (int k = 1; k <= k_max; k++) {
        a_pow *= alpha;
        expect += a_pow; /* 1 + alpha + ... + alpha^k */
        double rate = expect / (k * t_draft + (linear ? (k + 1) * t_pass : t_pass));
        if (rate > best_rate * (1 + 1e-9)) { /* ties: the shorter draft */
            best_rate = rate;
            best = k;
        }
    }
    return best;
}
