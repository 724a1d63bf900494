/* draft.h: draft decoding's rules: the acceptance rule of speculative sampling (Leviathan et
 * al. 2023; Chen et al. 2023) and the choice of the draft length.  Pure functions: no I/O, no allocation, the
 * random numbers passed in, so that tests can check the rule's distribution exactly. */
#ifndef HEADSPLIT_DRAFT_H
#define HEADSPLIT_DRAFT_H

#include <stdint.h>

#define DRAFT_K_MAX 8 /* drafted tokens per round at most (--draft-tokens) */

/* The random streams of one position: the draft's proposal, the keep test, the draw after a
 * rejection.  Each is a function of (seed, position, stream) only, so that what is emitted at
 * a position does not depend on how positions were grouped into rounds. */
enum { DRAFT_U_DRAFT = 1, DRAFT_U_KEEP = 2, DRAFT_U_RESIDUAL = 3 };
/* A uniform number in [0, 1) for (seed, position, stream). */
float draft_uniform(uint64_t seed, int pos, int stream);

/* A token from the distribution p[vocab] (non-negative, summing to about 1), drawn with u in
 * [0, 1): the first id whose cumulative mass exceeds u times the total. */
int draft_draw(const float *p, int vocab, float u);

/* Keeps draft token d, drawn from q, with probability min(1, p[d]/q[d]): 1 when u*q[d] < p[d]
 * (u in [0, 1)).  q[d] = 0 keeps d whenever p[d] > 0; p[d] = 0 never keeps it. */
int draft_keep(const float *p, const float *q, int d, float u);

/* After a rejection: a token from normalize(max(0, p - q)) drawn with u; from p itself when
 * that residual has no mass (p <= q everywhere, possible only by rounding). */
int draft_residual(const float *p, const float *q, int vocab, float u);

/* One position of a round: draft token d (drawn from q) against the target's p.  Returns the
 * token emitted there, d when kept (*kept = 1), else a draw from the residual (*kept = 0).
 * Whatever q is, the emitted token is distributed as p. */
int draft_step(const float *p, const float *q, int vocab, int d, float u_keep,
                     float u_residual, int *kept);

/* --draft-tokens auto: running estimates of the acceptance and the costs. */
typedef struct {
    double proposed, accepted; /* exponentially weighted counts of drafts verified, kept */
    double t_draft;            /* seconds per draft forward (weighted mean; 0: none yet) */
    double t_rows[DRAFT_K_MAX + 2]; /* [m]: seconds of a verifying pass of m positions
                                * (weighted mean; 0: never seen) */
    int linear;                /* a pass costs in proportion to its positions (a backend
                                * without forward_n runs them one at a time) */
    int k;                     /* the draft length chosen for the next round */
} DraftAuto;

void draft_auto_init(DraftAuto *a, int k0, int linear);
/* Folds in one round: drafts verified and kept, its draft forwards' seconds, its pass's
 * seconds and positions; then chooses a->k: draft_choose_k_costs with the pass costs
 * of draft_auto_pass_s. */
void draft_auto_update(DraftAuto *a, int proposed, int accepted, double draft_s,
                             int draft_forwards, double pass_s, int pass_positions);
/* The estimated seconds of a verifying pass of m positions: the mean seen for m; else the
 * least-squares line through the lengths seen (slope at least 0); else, one length m0 seen,
 * its time scaled by m/m0 (linear) or grown by DRAFT_ROW_PRIOR of it per extra
 * position (an optimistic prior, so that a longer draft gets tried and measured); 0 when no
 * pass has been seen. */
double draft_auto_pass_s(const DraftAuto *a, int m);
#define DRAFT_ROW_PRIOR 0.02
/* The draft length in 1..k_max that maximises the expected tokens per second of a round:
 * with acceptance alpha per drafted token (independent), a round of K drafts emits
 * 1 + alpha + ... + alpha^K tokens on average and costs K draft forwards (t_draft each)
 * plus its pass of K + 1 positions, pass_s[K + 1] seconds. */
int draft_choose_k_costs(double alpha, double t_draft, const double *pass_s, int k_max);
/* The same with a pass of t_pass whatever K (a pass bound by streaming the weights and the
 * hops), or, linear, t_pass per position (K + 1 of them). */
int draft_choose_k(double alpha, double t_draft, double t_pass, int linear, int k_max);

#endif
