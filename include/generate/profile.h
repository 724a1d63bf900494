/* profile.h: the inter-layer speculation profile (docs/speculation.md).  A profile records, for
 * every layer transition l -> l+1 (l = 0..n_layers-2), the distribution of
 * r_l = ||FFN(Z_l)|| / ||Z_l|| over a teacher-forced corpus run, the acceptance at the stored
 * tolerances, per-layer timings of the machine that profiled, and optionally the quality cost
 * of speculation (greedy token agreement and held-out perplexity).  The engine loads it with
 * profile_load and asks profile_decide per transition.  MPI-free; JSON through jansson. */
#ifndef HEADSPLIT_PROFILE_H
#define HEADSPLIT_PROFILE_H

#include "config.h"
#include "generate.h"
#include "model.h"

#include <hdf5.h>
#include <stddef.h>
#include <stdio.h>

#define PROFILE_FORMAT "headsplit-profile 1"
#define PROFILE_N_TOL 3   /* stored tolerances: 0.02 0.05 0.10 */
#define PROFILE_N_QUANT 5 /* stored quantiles of r: p05 p25 p50 p75 p95 */
#define PROFILE_MAX_QUALITY 8

/* The stored tolerances, ascending, and the stored quantile levels. */
extern const float profile_tolerances[PROFILE_N_TOL];
extern const double profile_quantile_levels[PROFILE_N_QUANT];

/* Quality cost of speculating at every transition with one tolerance. */
typedef struct {
    float tolerance;
    int gen_tokens;       /* generated positions compared: max of both runs' counts */
    double agreement;     /* fraction of them whose token equals the exact run's */
    int first_divergence; /* index of the first generated token that differs (gen_tokens: none) */
    double ppl_spec;      /* held-out perplexity with speculation */
    double kept_fraction; /* speculations kept / tried during the held-out run */
} ProfileQuality;

typedef struct {
    int n_layers, dim;   /* of the model profiled; transitions = n_layers - 1 */
    long tokens;         /* positions whose r was recorded */
    char *model_path, *corpus_path, *host; /* as recorded (may be NULL) */
    double *acceptance;  /* [n_layers-1][PROFILE_N_TOL]: fraction of positions with r_l < tol */
    double *mean_r;      /* [n_layers-1] */
    double *quantiles;   /* [n_layers-1][PROFILE_N_QUANT] */
    double *attn_ms;     /* [n_layers] all attention units of the layer, per token */
    double *proj_ms;     /* [n_layers] output projection, per token */
    double *ffn_ms;      /* [n_layers] FFN, per token */
    /* Quality (n_quality == 0: not measured). */
    int n_quality;
    ProfileQuality quality[PROFILE_MAX_QUALITY];
    char *prompt, *heldout_path;
    int gen_tokens_requested;
    long heldout_tokens; /* predicted tokens behind the perplexities */
    double ppl_exact;
} Profile;

/* ---- the engine's API ---------------------------------------------------------------- */

/* Reads a profile written by profile_write and checks it belongs to a model of c's n_layers
 * and dim.  Returns 0, or -1 with err naming the file and the field; p is empty on failure. */
int profile_load(Profile *p, const char *path, const ModelConfig *c, char *err, size_t errlen);
/* Releases what profile_init or profile_load allocated; p may be zeroed or NULL. */
void profile_free(Profile *p);
/* Acceptance of a transition at any tolerance: linear between the stored tolerances, clamped
 * to the nearest stored value outside [0.02, 0.10]; tolerance <= 0 gives 0 (nothing is ever
 * kept); an out-of-range transition gives 0. */
double profile_acceptance(const Profile *p, int transition, float tolerance);
/* 1 when the transition should speculate: acceptance >= min_acceptance and the expected saving
 * per token acc * min(attn_ms, ffn_ms) - (1 - acc) * reexec_ms is positive (attn_ms: the next
 * layer's attention that overlaps the FFN; ffn_ms: this layer's FFN; reexec_ms: extra time on
 * the critical path when the speculative result is discarded).  *saving_ms (may be NULL)
 * receives the expected saving. */
int profile_decide(const Profile *p, int transition, float tolerance, float min_acceptance,
                   double attn_ms, double ffn_ms, double reexec_ms, double *saving_ms);
/* Prints the per-transition decision table.  attn_ms/ffn_ms/reexec_ms are per transition
 * ([n_layers-1]); any NULL array is taken from profile_default_costs(p, 0.01 ms). */
void profile_print_decisions(const Profile *p, FILE *out, float tol, float min_acc,
                             const double *attn_ms, const double *ffn_ms,
                             const double *reexec_ms);

/* ---- building profiles (the profiler and tests) -------------------------------------- */

/* Empty profile for a model of c's shape (arrays zeroed). */
void profile_init(Profile *p, const ModelConfig *c);
/* Sets transition t's statistics from n samples of r (sorted in place). */
void profile_set_transition(Profile *p, int t, float *r, size_t n);
/* Per-transition costs from the measured timings: attn = attn_ms[l+1], ffn = ffn_ms[l],
 * reexec = max(0, attn - ffn) + overhead_ms.  Each output array holds n_layers-1 values. */
void profile_default_costs(const Profile *p, double overhead_ms, double *attn, double *ffn,
                           double *reexec);
/* Writes p as JSON (format PROFILE_FORMAT) with c's shape.  Returns 0 or -1 with err. */
int profile_write(const Profile *p, const ModelConfig *c, const char *path, char *err,
                  size_t errlen);
/* Prints the per-transition acceptance table and the per-layer timings. */
void profile_print_acceptance(const Profile *p, FILE *out);
/* Prints the quality table (nothing when not measured). */
void profile_print_quality(const Profile *p, FILE *out);

/* Teacher-forced run over a token stream ids[n] (a leading bos is skipped) in windows of the
 * context length, each window starting with bos when bos >= 0, at most max_tokens positions:
 * records r at every transition and times attention, projection and FFN per layer with its
 * own copy of the weights (read from file, freed before returning).  Returns 0 or -1. */
int profile_measure(Profile *p, const ModelConfig *c, const HeadW *head, hid_t file,
                    const char *fname, const int *ids, size_t n, int bos, long max_tokens,
                    char *err, size_t errlen);
/* Perplexity of the stream ids[n] under the backend, windowed as profile_measure (every token
 * after a window's first is predicted).  *n_pred (may be NULL) gets the predicted count. */
double profile_perplexity(const ModelConfig *c, const HeadW *head, LayerBackend *be,
                          const int *ids, size_t n, int bos, long max_tokens, long *n_pred);
/* Quality at each of tols[n_tols] (<= PROFILE_MAX_QUALITY) with speculation at every
 * transition of m: greedy agreement over gen_tokens tokens from prompt, perplexity of
 * heldout[n_heldout].  Leaves m without speculation.  Returns 0 or -1 with err. */
int profile_quality(Profile *p, const ModelConfig *c, const Tokenizer *tok, const HeadW *head,
                    LocalModel *m, const float *tols, int n_tols, const char *prompt,
                    int gen_tokens, const int *heldout, size_t n_heldout, int bos,
                    long max_tokens, char *err, size_t errlen);

#endif
