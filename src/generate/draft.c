/* draft.c: the acceptance rule of speculative sampling and the draft length of
 * --draft-tokens auto.  Pure: the random numbers come in as arguments. */
#include "draft.h"

#include "util.h"

float draft_uniform(uint64_t seed, int pos, int stream)
{
    /* splitmix64 over a state that mixes the three inputs: neighbouring positions and
     * streams give unrelated numbers */
    uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * ((uint64_t)(uint32_t)pos + 1)) ^
                 ((uint64_t)(uint32_t)stream << 56);
    rng_next(&s);
    return rng_float(&s);
}

int draft_draw(const float *p, int vocab, float u)
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

int draft_keep(const float *p, const float *q, int d, float u)
{
    /* u < p/q without the division: q = 0 (the draft could not have proposed d, but a
     * caller may force it) keeps any d the target allows */
    return (double)u * (double)q[d] < (double)p[d];
}

int draft_residual(const float *p, const float *q, int vocab, float u)
{
    double mass = 0;
    int last = -1;
    for (int i = 0; i < vocab; i++)
        if (p[i] > q[i]) {
            mass += (double)p[i] - (double)q[i];
            last = i;
        }
    if (last < 0 || !(mass > 0))
        return draft_draw(p, vocab, u);
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

int draft_step(const float *p, const float *q, int vocab, int d, float u_keep,
                     float u_residual, int *kept)
{
    *kept = draft_keep(p, q, d, u_keep);
    return *kept ? d : draft_residual(p, q, vocab, u_residual);
}

/* Weight of the old rounds in the running estimates: the costs follow the last ten rounds or
 * so; the acceptance, a property of the pair of models that a round measures only a few
 * times, the last thirty. */
#define SPEC_DECAY 0.9
#define SPEC_DECAY_ACCEPT 0.97

void draft_auto_init(DraftAuto *a, int k0, int linear)
{
    /* a prior of two drafts, one kept, until rounds say otherwise */
    a->proposed = 2;
    a->accepted = 1;
    a->t_draft = 0;
    for (int m = 0; m < DRAFT_K_MAX + 2; m++)
        a->t_rows[m] = 0;
    a->linear = linear;
    a->k = k0 < 1 ? 1 : k0 > DRAFT_K_MAX ? DRAFT_K_MAX : k0;
}

/* A weighted mean: the first sample alone, then SPEC_DECAY of the old and the rest new. */
static double spec_mean(double old, double sample)
{
    return old > 0 ? SPEC_DECAY * old + (1 - SPEC_DECAY) * sample : sample;
}

double draft_auto_pass_s(const DraftAuto *a, int m)
{
    if (m >= 1 && m < DRAFT_K_MAX + 2 && a->t_rows[m] > 0)
        return a->t_rows[m];
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m0 = 0;
    for (int j = 1; j < DRAFT_K_MAX + 2; j++) {
        if (a->t_rows[j] <= 0)
            continue;
        n++;
        sx += j;
        sy += a->t_rows[j];
        sxx += (double)j * j;
        sxy += j * a->t_rows[j];
        m0 = j;
    }
    if (n == 0)
        return 0;
    if (n == 1)
        return a->linear ? a->t_rows[m0] * m / m0
                         : a->t_rows[m0] * (1 + DRAFT_ROW_PRIOR * (m - m0));
    double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    if (slope < 0)
        slope = 0;
    double t = (sy - slope * sx) / n + slope * m;
    return t > 0 ? t : sy / n;
}

void draft_auto_update(DraftAuto *a, int proposed, int accepted, double draft_s,
                             int draft_forwards, double pass_s, int pass_positions)
{
    a->proposed = SPEC_DECAY_ACCEPT * a->proposed + proposed;
    a->accepted = SPEC_DECAY_ACCEPT * a->accepted + accepted;
    if (draft_forwards > 0)
        a->t_draft = spec_mean(a->t_draft, draft_s / draft_forwards);
    if (pass_s > 0 && pass_positions >= 1 && pass_positions < DRAFT_K_MAX + 2)
        a->t_rows[pass_positions] = spec_mean(a->t_rows[pass_positions], pass_s);
    if (draft_auto_pass_s(a, 2) <= 0)
        return;
    double cost[DRAFT_K_MAX + 2];
    for (int m = 1; m < DRAFT_K_MAX + 2; m++)
        cost[m] = draft_auto_pass_s(a, m);
    a->k = draft_choose_k_costs(a->accepted / a->proposed, a->t_draft, cost,
                                      DRAFT_K_MAX);
}

int draft_choose_k_costs(double alpha, double t_draft, const double *pass_s, int k_max)
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
        double rate = expect / (k * t_draft + pass_s[k + 1]);
        if (rate > best_rate * (1 + 1e-9)) { /* ties: the shorter draft */
            best_rate = rate;
            best = k;
        }
    }
    return best;
}

int draft_choose_k(double alpha, double t_draft, double t_pass, int linear, int k_max)
{
    double cost[DRAFT_K_MAX + 2];
    if (k_max > DRAFT_K_MAX)
        k_max = DRAFT_K_MAX;
    for (int m = 1; m <= k_max + 1; m++)
        cost[m] = linear ? m * t_pass : t_pass;
    return draft_choose_k_costs(alpha, t_draft, cost, k_max);
}
