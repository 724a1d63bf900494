/* profile.c: the speculation profile: statistics of r = ||FFN(Z)|| / ||Z|| per transition,
 * its JSON form, the decision function the engine calls, and the profiling runs (teacher-forced
 * measurement with per-layer timing, perplexity, greedy agreement).  See docs/speculation.md. */
#include "profile.h"

#include "kernels.h"
#include "util.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const float profile_tolerances[PROFILE_N_TOL] = {0.02f, 0.05f, 0.10f};
const double profile_quantile_levels[PROFILE_N_QUANT] = {0.05, 0.25, 0.50, 0.75, 0.95};
static const char *const tol_keys[PROFILE_N_TOL] = {"0.02", "0.05", "0.10"};
static const char *const quant_keys[PROFILE_N_QUANT] = {"p05", "p25", "p50", "p75", "p95"};

/* ---- building and the decision ------------------------------------------------------- */

void profile_init(Profile *p, const ModelConfig *c)
{
    memset(p, 0, sizeof *p);
    p->n_layers = c->n_layers;
    p->dim = c->dim;
    size_t T = c->n_layers > 1 ? (size_t)c->n_layers - 1 : 0, L = (size_t)c->n_layers;
    p->acceptance = xcalloc(T * PROFILE_N_TOL + 1, sizeof(double));
    p->mean_r = xcalloc(T + 1, sizeof(double));
    p->quantiles = xcalloc(T * PROFILE_N_QUANT + 1, sizeof(double));
    p->attn_ms = xcalloc(L + 1, sizeof(double));
    p->proj_ms = xcalloc(L + 1, sizeof(double));
    p->ffn_ms = xcalloc(L + 1, sizeof(double));
}

void profile_free(Profile *p)
{
    if (!p)
        return;
    free(p->model_path);
    free(p->corpus_path);
    free(p->host);
    free(p->acceptance);
    free(p->mean_r);
    free(p->quantiles);
    free(p->attn_ms);
    free(p->proj_ms);
    free(p->ffn_ms);
    free(p->prompt);
    free(p->heldout_path);
    memset(p, 0, sizeof *p);
}

/* Ascending, NaN last (a NaN ratio is never accepted). */
static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    if (isnan(x) || isnan(y))
        return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}

void profile_set_transition(Profile *p, int t, float *r, size_t n)
{
    if (t < 0 || t >= p->n_layers - 1)
        return;
    double *acc = p->acceptance + (size_t)t * PROFILE_N_TOL;
    double *q = p->quantiles + (size_t)t * PROFILE_N_QUANT;
    if (n == 0) {
        memset(acc, 0, PROFILE_N_TOL * sizeof *acc);
        memset(q, 0, PROFILE_N_QUANT * sizeof *q);
        p->mean_r[t] = 0;
        return;
    }
    qsort(r, n, sizeof *r, cmp_float);
    for (int k = 0; k < PROFILE_N_TOL; k++) {
        size_t below = 0;
        while (below < n && r[below] < profile_tolerances[k])
            below++;
        acc[k] = (double)below / (double)n;
    }
    double sum = 0;
    size_t n_fin = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(r[i])) {
            sum += r[i];
            n_fin++;
        }
    p->mean_r[t] = n_fin ? sum / (double)n_fin : INFINITY;
    /* Linear interpolation between order statistics (Hyndman-Fan type 7). */
    for (int k = 0; k < PROFILE_N_QUANT; k++) {
        double h = (double)(n - 1) * profile_quantile_levels[k];
        size_t lo = (size_t)h;
        double f = h - (double)lo, v = r[lo];
        if (lo + 1 < n && f > 0)
            v += f * ((double)r[lo + 1] - (double)r[lo]);
        q[k] = v;
    }
}

double profile_acceptance(const Profile *p, int transition, float tolerance)
{
    if (!p || transition < 0 || transition >= p->n_layers - 1 || !(tolerance > 0))
        return 0.0;
    const double *a = p->acceptance + (size_t)transition * PROFILE_N_TOL;
    if (tolerance <= profile_tolerances[0])
        return a[0];
    for (int k = 1; k < PROFILE_N_TOL; k++)
        if (tolerance <= profile_tolerances[k]) {
            double t0 = profile_tolerances[k - 1], t1 = profile_tolerances[k];
            double f = ((double)tolerance - t0) / (t1 - t0);
            return a[k - 1] + f * (a[k] - a[k - 1]);
        }
    return a[PROFILE_N_TOL - 1];
}

/* Cost model (docs/speculation.md): without speculation the critical path runs FFN_l, then
 * attention_{l+1}.  Kept, the two overlap and min(attn, ffn) is saved.  Discarded, the heads
 * re-execute on X' once they are free: max(0, attn - ffn) later than exact execution, plus
 * the decision's message (reexec_ms covers both).  Expectation over acceptance acc. */
int profile_decide(const Profile *p, int transition, float tolerance, float min_acceptance,
                   double attn_ms, double ffn_ms, double reexec_ms, double *saving_ms)
{
    double acc = profile_acceptance(p, transition, tolerance);
    double hidden = attn_ms < ffn_ms ? attn_ms : ffn_ms;
    double saving = acc * hidden - (1.0 - acc) * reexec_ms;
    int valid = p && transition >= 0 && transition < p->n_layers - 1;
    if (saving_ms)
        *saving_ms = valid ? saving : 0.0;
    return valid && acc >= (double)min_acceptance && saving > 0;
}

void profile_default_costs(const Profile *p, double overhead_ms, double *attn, double *ffn,
                           double *reexec)
{
    for (int l = 0; l + 1 < p->n_layers; l++) {
        double a = p->attn_ms[l + 1], f = p->ffn_ms[l];
        if (attn)
            attn[l] = a;
        if (ffn)
            ffn[l] = f;
        if (reexec)
            reexec[l] = (a > f ? a - f : 0.0) + overhead_ms;
    }
}

/* ---- printing (Markdown tables, readable as text) ------------------------------------ */

void profile_print_acceptance(const Profile *p, FILE *out)
{
    fprintf(out, "| transition | acc@0.02 | acc@0.05 | acc@0.10 | mean r | p05 | p25 | p50 | "
            "p75 | p95 |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int t = 0; t + 1 < p->n_layers; t++) {
        const double *a = p->acceptance + (size_t)t * PROFILE_N_TOL;
        const double *q = p->quantiles + (size_t)t * PROFILE_N_QUANT;
        fprintf(out, "| %d -> %d | %.3f | %.3f | %.3f | %.4f | %.4f | %.4f | %.4f | %.4f | "
                "%.4f |\n", t, t + 1, a[0], a[1], a[2], p->mean_r[t], q[0], q[1], q[2], q[3],
                q[4]);
    }
    fprintf(out, "\n%ld positions measured.\n\n| layer | attention ms | projection ms | FFN ms |"
            "\n|---|---|---|---|\n", p->tokens);
    for (int l = 0; l < p->n_layers; l++)
        fprintf(out, "| %d | %.5f | %.5f | %.5f |\n", l, p->attn_ms[l], p->proj_ms[l],
                p->ffn_ms[l]);
}

void profile_print_quality(const Profile *p, FILE *out)
{
    if (p->n_quality == 0)
        return;
    fprintf(out, "Exact: held-out perplexity %.4f over %ld predicted tokens.\n\n"
            "| tolerance | token agreement | first divergence | generated | perplexity | "
            "ppl delta | kept (held-out run) |\n|---|---|---|---|---|---|---|\n",
            p->ppl_exact, p->heldout_tokens);
    for (int i = 0; i < p->n_quality; i++) {
        const ProfileQuality *q = &p->quality[i];
        char div[32];
        if (q->first_divergence >= q->gen_tokens)
            snprintf(div, sizeof div, "none");
        else
            snprintf(div, sizeof div, "%d", q->first_divergence);
        fprintf(out, "| %g | %.3f | %s | %d | %.4f | %+.4f | %.3f |\n", (double)q->tolerance,
                q->agreement, div, q->gen_tokens, q->ppl_spec, q->ppl_spec - p->ppl_exact,
                q->kept_fraction);
    }
}

void profile_print_decisions(const Profile *p, FILE *out, float tol, float min_acc,
                             const double *attn_ms, const double *ffn_ms,
                             const double *reexec_ms)
{
    int T = p->n_layers > 1 ? p->n_layers - 1 : 0;
    double *da = xcalloc((size_t)T + 1, sizeof(double));
    double *df = xcalloc((size_t)T + 1, sizeof(double));
    double *dr = xcalloc((size_t)T + 1, sizeof(double));
    profile_default_costs(p, 0.01, da, df, dr);
    const double *A = attn_ms ? attn_ms : da, *F = ffn_ms ? ffn_ms : df;
    const double *R = reexec_ms ? reexec_ms : dr;
    fprintf(out, "Decision at tolerance %.3g, min acceptance %.2f:\n\n| transition | acceptance |"
            " attn ms | FFN ms | reexec ms | saving ms/token | speculate |\n"
            "|---|---|---|---|---|---|---|\n", (double)tol, (double)min_acc);
    int n_yes = 0;
    double total = 0;
    for (int t = 0; t < T; t++) {
        double saving;
        int yes = profile_decide(p, t, tol, min_acc, A[t], F[t], R[t], &saving);
        double acc = profile_acceptance(p, t, tol);
        const char *why = yes ? "yes" : acc < (double)min_acc ? "no (acceptance)" : "no (saving)";
        fprintf(out, "| %d -> %d | %.3f | %.5f | %.5f | %.5f | %+.5f | %s |\n", t, t + 1, acc,
                A[t], F[t], R[t], saving, why);
        if (yes) {
            n_yes++;
            total += saving;
        }
    }
    fprintf(out, "\n%d of %d transitions speculate; expected saving %.5f ms/token.\n", n_yes, T,
            total);
    free(da);
    free(df);
    free(dr);
}

/* ---- JSON ------------------------------------------------------------------------------ */

/* JSON has no infinity: non-finite values are written as null and read back as +inf. */
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

int profile_write(const Profile *p, const ModelConfig *c, const char *path, char *err,
                  size_t errlen)
{
    json_t *root = json_object(), *tols = json_array(), *trans = json_array();
    json_t *layers = json_array();
    json_object_set_new(root, "format", json_string(PROFILE_FORMAT));
    json_object_set_new(root, "model", str_or_null(p->model_path));
    json_object_set_new(root, "config", json_pack(
        "{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "architecture", config_arch_name(c->arch),
        "dim", c->dim, "n_layers", c->n_layers, "n_heads", c->n_heads, "n_kv_heads",
        c->n_kv_heads, "head_dim", c->head_dim, "ffn_dim", c->ffn_dim, "vocab_size",
        c->vocab_size, "context_length", c->context_length));
    json_object_set_new(root, "corpus", str_or_null(p->corpus_path));
    json_object_set_new(root, "tokens", json_integer(p->tokens));
    json_object_set_new(root, "host", str_or_null(p->host));
    /* the fp32 sums' order the ratios were measured with (--f32-order) */
    json_object_set_new(root, "f32_order", json_string(kernels_f32_order_name(kernels_get_f32_order())));
    for (int k = 0; k < PROFILE_N_TOL; k++)
        json_array_append_new(tols, json_real(profile_tolerances[k]));
    json_object_set_new(root, "tolerances", tols);
    for (int t = 0; t + 1 < p->n_layers; t++) {
        json_t *acc = json_object(), *q = json_object();
        for (int k = 0; k < PROFILE_N_TOL; k++)
            json_object_set_new(acc, tol_keys[k],
                                num(p->acceptance[(size_t)t * PROFILE_N_TOL + (size_t)k]));
        for (int k = 0; k < PROFILE_N_QUANT; k++)
            json_object_set_new(q, quant_keys[k],
                                num(p->quantiles[(size_t)t * PROFILE_N_QUANT + (size_t)k]));
        json_array_append_new(trans, json_pack("{s:i,s:i,s:o,s:o,s:o}", "from", t, "to", t + 1,
                                               "acceptance", acc, "mean_r", num(p->mean_r[t]),
                                               "quantiles", q));
    }
    json_object_set_new(root, "transitions", trans);
    for (int l = 0; l < p->n_layers; l++)
        json_array_append_new(layers, json_pack("{s:i,s:o,s:o,s:o}", "layer", l, "attn_ms",
                                                num(p->attn_ms[l]), "proj_ms",
                                                num(p->proj_ms[l]), "ffn_ms", num(p->ffn_ms[l])));
    json_object_set_new(root, "layers", layers);
    if (p->n_quality > 0) {
        json_t *qa = json_array();
        for (int i = 0; i < p->n_quality; i++) {
            const ProfileQuality *q = &p->quality[i];
            json_array_append_new(qa, json_pack(
                "{s:f,s:i,s:o,s:i,s:o,s:o,s:o}", "tolerance", (double)q->tolerance,
                "gen_tokens", q->gen_tokens, "agreement", num(q->agreement),
                "first_divergence", q->first_divergence, "ppl", num(q->ppl_spec),
                "ppl_delta", num(q->ppl_spec - p->ppl_exact), "kept_fraction",
                num(q->kept_fraction)));
        }
        json_object_set_new(root, "quality", json_pack(
            "{s:o,s:i,s:o,s:I,s:o,s:o}", "prompt", str_or_null(p->prompt), "gen_tokens",
            p->gen_tokens_requested, "heldout", str_or_null(p->heldout_path),
            "heldout_tokens", (json_int_t)p->heldout_tokens, "ppl_exact", num(p->ppl_exact),
            "runs", qa));
    }
    int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_ENSURE_ASCII) == 0 ? 0
             : util_err(err, errlen, "%s: cannot write the profile", path);
    json_decref(root);
    return rc;
}

/* Reads object member key as a number (null: +inf); -1 with err when missing or not one. */
static int get_num(json_t *o, const char *key, double *out, const char *path, const char *where,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (v && json_is_number(v)) {
        *out = json_number_value(v);
        return 0;
    }
    if (v && json_is_null(v)) {
        *out = INFINITY;
        return 0;
    }
    return util_err(err, errlen, "%s: %s%s: missing or not a number", path, where, key);
}

static char *dup_str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? xstrdup(s) : NULL;
}

static int load_quality(Profile *p, json_t *q, const char *path, char *err, size_t errlen)
{
    json_t *runs = json_object_get(q, "runs");
    double v = 0;
    if (!json_is_array(runs) || json_array_size(runs) > PROFILE_MAX_QUALITY)
        return util_err(err, errlen, "%s: quality.runs: missing or more than %d runs", path,
                        PROFILE_MAX_QUALITY);
    p->prompt = dup_str(q, "prompt");
    p->heldout_path = dup_str(q, "heldout");
    if (get_num(q, "gen_tokens", &v, path, "quality.", err, errlen) < 0)
        return -1;
    p->gen_tokens_requested = (int)v;
    if (get_num(q, "heldout_tokens", &v, path, "quality.", err, errlen) < 0 ||
        get_num(q, "ppl_exact", &p->ppl_exact, path, "quality.", err, errlen) < 0)
        return -1;
    p->heldout_tokens = (long)v;
    for (size_t i = 0; i < json_array_size(runs); i++) {
        json_t *r = json_array_get(runs, i);
        ProfileQuality *pq = &p->quality[i];
        double tol = 0, gen = 0, div = 0;
        if (get_num(r, "tolerance", &tol, path, "quality.runs[].", err, errlen) < 0 ||
            get_num(r, "gen_tokens", &gen, path, "quality.runs[].", err, errlen) < 0 ||
            get_num(r, "agreement", &pq->agreement, path, "quality.runs[].", err, errlen) < 0 ||
            get_num(r, "first_divergence", &div, path, "quality.runs[].", err, errlen) < 0 ||
            get_num(r, "ppl", &pq->ppl_spec, path, "quality.runs[].", err, errlen) < 0 ||
            get_num(r, "kept_fraction", &pq->kept_fraction, path, "quality.runs[].", err,
                    errlen) < 0)
            return -1;
        pq->tolerance = (float)tol;
        pq->gen_tokens = (int)gen;
        pq->first_divergence = (int)div;
        p->n_quality = (int)i + 1;
    }
    return 0;
}

static int load_body(Profile *p, json_t *root, const char *path, const ModelConfig *c,
                     char *err, size_t errlen)
{
    const char *fmt = json_string_value(json_object_get(root, "format"));
    if (!fmt || strcmp(fmt, PROFILE_FORMAT) != 0)
        return util_err(err, errlen, "%s: format: expected \"%s\"", path, PROFILE_FORMAT);
    json_t *cfg = json_object_get(root, "config");
    double nl = 0, dim = 0, tokens = 0;
    if (get_num(cfg, "n_layers", &nl, path, "config.", err, errlen) < 0 ||
        get_num(cfg, "dim", &dim, path, "config.", err, errlen) < 0 ||
        get_num(root, "tokens", &tokens, path, "", err, errlen) < 0)
        return -1;
    if ((int)nl != c->n_layers || (int)dim != c->dim)
        return util_err(err, errlen, "%s: config: profile of a model with %d layers of dim %d, "
                        "this model has %d layers of dim %d", path, (int)nl, (int)dim,
                        c->n_layers, c->dim);
    profile_init(p, c);
    p->tokens = (long)tokens;
    p->model_path = dup_str(root, "model");
    p->corpus_path = dup_str(root, "corpus");
    p->host = dup_str(root, "host");
    json_t *trans = json_object_get(root, "transitions"), *layers = json_object_get(root, "layers");
    if (!json_is_array(trans) || (int)json_array_size(trans) != c->n_layers - 1)
        return util_err(err, errlen, "%s: transitions: expected an array of %d", path,
                        c->n_layers - 1);
    if (!json_is_array(layers) || (int)json_array_size(layers) != c->n_layers)
        return util_err(err, errlen, "%s: layers: expected an array of %d", path, c->n_layers);
    for (int t = 0; t + 1 < c->n_layers; t++) {
        json_t *o = json_array_get(trans, (size_t)t);
        json_t *acc = json_object_get(o, "acceptance"), *q = json_object_get(o, "quantiles");
        double from = 0;
        if (get_num(o, "from", &from, path, "transitions[].", err, errlen) < 0)
            return -1;
        if ((int)from != t)
            return util_err(err, errlen, "%s: transitions[%d].from is %d", path, t, (int)from);
        for (int k = 0; k < PROFILE_N_TOL; k++) {
            double *a = &p->acceptance[(size_t)t * PROFILE_N_TOL + (size_t)k];
            if (get_num(acc, tol_keys[k], a, path, "transitions[].acceptance.", err, errlen) < 0)
                return -1;
            if (!(*a >= 0 && *a <= 1))
                return util_err(err, errlen, "%s: transitions[%d].acceptance.%s: %g is not in "
                                "[0, 1]", path, t, tol_keys[k], *a);
        }
        for (int k = 0; k < PROFILE_N_QUANT; k++)
            if (get_num(q, quant_keys[k], &p->quantiles[(size_t)t * PROFILE_N_QUANT + (size_t)k],
                        path, "transitions[].quantiles.", err, errlen) < 0)
                return -1;
        if (get_num(o, "mean_r", &p->mean_r[t], path, "transitions[].", err, errlen) < 0)
            return -1;
    }
    for (int l = 0; l < c->n_layers; l++) {
        json_t *o = json_array_get(layers, (size_t)l);
        if (get_num(o, "attn_ms", &p->attn_ms[l], path, "layers[].", err, errlen) < 0 ||
            get_num(o, "proj_ms", &p->proj_ms[l], path, "layers[].", err, errlen) < 0 ||
            get_num(o, "ffn_ms", &p->ffn_ms[l], path, "layers[].", err, errlen) < 0)
            return -1;
    }
    json_t *q = json_object_get(root, "quality");
    return q ? load_quality(p, q, path, err, errlen) : 0;
}

int profile_load(Profile *p, const char *path, const ModelConfig *c, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return util_err(err, errlen, "%s: line %d: %s", path, je.line, je.text);
    int rc = json_is_object(root) ? load_body(p, root, path, c, err, errlen)
             : util_err(err, errlen, "%s: not a JSON object", path);
    json_decref(root);
    if (rc < 0)
        profile_free(p);
    return rc;
}

/* ---- profiling runs -------------------------------------------------------------------- */

/* Windows over a token stream: each starts with bos (when >= 0) followed by stream tokens,
 * at most ctx positions; positions restart at 0 per window. */
typedef struct {
    const int *s;
    size_t n, i;  /* stream and next unread index */
    int bos, ctx;
    long budget;  /* positions left */
} Windows;

static void windows_init(Windows *w, const int *ids, size_t n, int bos, int ctx, long budget)
{
    size_t skip = bos >= 0 && n > 0 && ids[0] == bos;
    if (ctx < 2)
        bos = -1; /* a one-position context holds no token after BOS */
    *w = (Windows){ids + skip, n - skip, 0, bos, ctx, budget};
}

/* Fills buf with the next window; returns its length (0: done). */
static int windows_next(Windows *w, int *buf)
{
    if (w->i >= w->n || w->budget <= 0)
        return 0;
    int len = 0;
    if (w->bos >= 0)
        buf[len++] = w->bos;
    while (len < w->ctx && w->i < w->n)
        buf[len++] = w->s[w->i++];
    if (len > w->budget)
        len = (int)w->budget;
    w->budget -= len;
    return len;
}

int profile_measure(Profile *p, const ModelConfig *c, const HeadW *head, hid_t file,
                    const char *fname, const int *ids, size_t n, int bos, long max_tokens,
                    char *err, size_t errlen)
{
    const int L = c->n_layers, G = c->n_kv_heads, Q = config_q_per_kv(c), hd = c->head_dim;
    const int ctx = c->context_length;
    int rc = -1;
    AttnPartW *attn = xcalloc((size_t)L * (size_t)G, sizeof *attn);
    ProjW *proj = xcalloc((size_t)L, sizeof *proj);
    FfnW *ffn = xcalloc((size_t)L, sizeof *ffn);
    for (int l = 0; l < L; l++) {
        for (int g = 0; g < G; g++)
            if (model_load_attn_part(&attn[(size_t)l * (size_t)G + (size_t)g], c, file, fname,
                                     l, g, 0, Q, ctx, err, errlen) < 0)
                goto out;
        if (model_load_proj(&proj[l], c, file, fname, l, err, errlen) < 0 ||
            model_load_ffn(&ffn[l], c, file, fname, l, 0, c->ffn_dim, err, errlen) < 0)
            goto out;
    }
    /* Positions the stream can fill: its tokens plus one BOS per window. */
    size_t ns = n - (bos >= 0 && n > 0 && ids[0] == bos), avail = ns;
    if (bos >= 0 && ctx >= 2)
        avail += (ns + (size_t)ctx - 2) / ((size_t)ctx - 1);
    long cap = max_tokens > 0 && (size_t)max_tokens < avail ? max_tokens : (long)avail;
    if (cap < 1)
        cap = 1;
    Scratch s;
    model_scratch_init(&s, c, ctx);
    float *x = xmalloc((size_t)c->dim * sizeof(float)), *z = xmalloc((size_t)c->dim * sizeof(float));
    float *heads = xmalloc((size_t)c->n_heads * (size_t)hd * sizeof(float));
    float *r = xmalloc((size_t)(L > 1 ? L - 1 : 1) * (size_t)cap * sizeof(float));
    int *win = xmalloc((size_t)ctx * sizeof(int));
    double *ta = xcalloc((size_t)L, sizeof(double)), *tp = xcalloc((size_t)L, sizeof(double));
    double *tf = xcalloc((size_t)L, sizeof(double));
    Windows w;
    windows_init(&w, ids, n, bos, ctx, cap);
    long done = 0;
    for (int len; (len = windows_next(&w, win)) > 0;) {
        for (int pos = 0; pos < len; pos++, done++) {
            model_embed(c, head, win[pos], pos, x);
            /* The arithmetic of local.c's forward without speculation, timed per piece. */
            for (int l = 0; l < L; l++) {
                double t0 = time_now();
                for (int g = 0; g < G; g++)
                    model_attn_part_forward(c, &attn[(size_t)l * (size_t)G + (size_t)g], &s, x,
                                            pos, heads + (size_t)g * (size_t)Q * (size_t)hd);
                double t1 = time_now();
                model_proj_forward(c, &proj[l], &s, x, heads, z);
                double t2 = time_now();
                float ratio = model_ffn_forward(c, &ffn[l], &s, z, x);
                double t3 = time_now();
                ta[l] += t1 - t0;
                tp[l] += t2 - t1;
                tf[l] += t3 - t2;
                if (l + 1 < L)
                    r[(size_t)l * (size_t)cap + (size_t)done] = ratio;
            }
        }
    }
    p->tokens = done;
    for (int l = 0; l < L; l++) {
        double d = done > 0 ? (double)done : 1.0;
        p->attn_ms[l] = ta[l] * 1e3 / d;
        p->proj_ms[l] = tp[l] * 1e3 / d;
        p->ffn_ms[l] = tf[l] * 1e3 / d;
        if (l + 1 < L)
            profile_set_transition(p, l, r + (size_t)l * (size_t)cap, (size_t)done);
    }
    char host[256];
    if (gethostname(host, sizeof host) == 0) {
        host[sizeof host - 1] = '\0';
        free(p->host);
        p->host = xstrdup(host);
    }
    model_scratch_free(&s);
    free(x);
    free(z);
    free(heads);
    free(r);
    free(win);
    free(ta);
    free(tp);
    free(tf);
    rc = 0;
out:
    for (int l = 0; l < L; l++) {
        for (int g = 0; g < G; g++)
            model_free_attn_part(&attn[(size_t)l * (size_t)G + (size_t)g]);
        model_free_proj(&proj[l]);
        model_free_ffn(&ffn[l]);
    }
    free(attn);
    free(proj);
    free(ffn);
    return rc;
}

double profile_perplexity(const ModelConfig *c, const HeadW *head, LayerBackend *be,
                          const int *ids, size_t n, int bos, long max_tokens, long *n_pred)
{
    Scratch s;
    model_scratch_init(&s, c, 1);
    float *x = xmalloc((size_t)c->dim * sizeof(float));
    float *logits = xmalloc((size_t)c->vocab_size * sizeof(float));
    int *win = xmalloc((size_t)c->context_length * sizeof(int));
    Windows w;
    windows_init(&w, ids, n, bos, c->context_length, max_tokens > 0 ? max_tokens : 1);
    double nll = 0;
    long pred = 0;
    for (int len; (len = windows_next(&w, win)) > 0;)
        for (int pos = 0; pos + 1 < len; pos++) {
            model_embed(c, head, win[pos], pos, x);
            be->forward(be->ctx, x, pos, win[pos]);
            model_logits(c, head, &s, x, logits);
            double mx = logits[0], sum = 0;
            for (int v = 1; v < c->vocab_size; v++)
                if (logits[v] > mx)
                    mx = logits[v];
            for (int v = 0; v < c->vocab_size; v++)
                sum += exp((double)logits[v] - mx);
            nll += mx + log(sum) - (double)logits[win[pos + 1]];
            pred++;
        }
    model_scratch_free(&s);
    free(x);
    free(logits);
    free(win);
    if (n_pred)
        *n_pred = pred;
    return pred > 0 ? exp(nll / (double)pred) : NAN;
}

/* Greedy generation (lowest id on ties) of gen_tokens tokens after the prompt's n_prompt. */
static int greedy(const ModelConfig *c, const Tokenizer *tok, const HeadW *head, LocalModel *m,
                  const char *prompt, int n_prompt, int gen_tokens, GenResult *res, char *err,
                  size_t errlen)
{
    LayerBackend be = local_model_backend(m);
    GenOptions g = {.prompt = prompt, .steps = n_prompt - 1 + gen_tokens, .top_p = 1.0f};
    return generate_run(c, tok, head, &be, &g, res, err, errlen);
}

int profile_quality(Profile *p, const ModelConfig *c, const Tokenizer *tok, const HeadW *head,
                    LocalModel *m, const float *tols, int n_tols, const char *prompt,
                    int gen_tokens, const int *heldout, size_t n_heldout, int bos,
                    long max_tokens, char *err, size_t errlen)
{
    if (n_tols < 0 || n_tols > PROFILE_MAX_QUALITY)
        return util_err(err, errlen, "profile_quality: %d tolerances (at most %d)", n_tols,
                        PROFILE_MAX_QUALITY);
    int *pid = NULL;
    size_t np = 0;
    if (tokenizer_encode(tok, prompt, strlen(prompt), &pid, &np, err, errlen) < 0)
        return -1;
    free(pid);
    int n_prompt = np > 0 ? (int)np : 1; /* generate_run starts an empty prompt from BOS */
    unsigned char *all = xmalloc((size_t)c->n_layers);
    memset(all, 1, (size_t)c->n_layers);
    LayerBackend be = local_model_backend(m);
    GenResult ex, sp;
    local_model_set_speculation(m, NULL, 0.0f);
    if (greedy(c, tok, head, m, prompt, n_prompt, gen_tokens, &ex, err, errlen) < 0) {
        free(all);
        return -1;
    }
    p->ppl_exact = profile_perplexity(c, head, &be, heldout, n_heldout, bos, max_tokens,
                                      &p->heldout_tokens);
    p->gen_tokens_requested = gen_tokens;
    free(p->prompt);
    p->prompt = xstrdup(prompt);
    int rc = 0;
    p->n_quality = 0;
    for (int i = 0; i < n_tols && rc == 0; i++) {
        ProfileQuality *q = &p->quality[i];
        memset(q, 0, sizeof *q);
        q->tolerance = tols[i];
        local_model_set_speculation(m, all, tols[i]);
        if (greedy(c, tok, head, m, prompt, n_prompt, gen_tokens, &sp, err, errlen) < 0) {
            rc = -1;
            break;
        }
        int ne = ex.n_tokens - ex.n_prompt, ns = sp.n_tokens - sp.n_prompt;
        int nmax = ne > ns ? ne : ns, nmin = ne < ns ? ne : ns, same = 0;
        q->first_divergence = -1;
        for (int k = 0; k < nmin; k++) {
            int eq = ex.tokens[ex.n_prompt + k] == sp.tokens[sp.n_prompt + k];
            same += eq;
            if (!eq && q->first_divergence < 0)
                q->first_divergence = k;
        }
        if (q->first_divergence < 0)
            q->first_divergence = nmin < nmax ? nmin : nmax;
        q->gen_tokens = nmax;
        q->agreement = nmax > 0 ? (double)same / (double)nmax : 1.0;
        generate_result_free(&sp);
        local_model_set_speculation(m, all, tols[i]); /* counts of the held-out run only */
        q->ppl_spec = profile_perplexity(c, head, &be, heldout, n_heldout, bos, max_tokens, NULL);
        long tried, kept;
        local_model_spec_counts(m, &tried, &kept);
        q->kept_fraction = tried > 0 ? (double)kept / (double)tried : 0.0;
        p->n_quality = i + 1;
    }
    local_model_set_speculation(m, NULL, 0.0f);
    generate_result_free(&ex);
    free(all);
    return rc;
}
