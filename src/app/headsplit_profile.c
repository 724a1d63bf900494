/* headsplit-profile: the inter-layer speculation profiler (docs/speculation.md).
 *   headsplit-profile --model M.h5 --corpus FILE --tokens N [--out PROFILE.json]
 * Runs the model teacher-forced over the corpus, records r = ||FFN(Z)|| / ||Z|| at every layer
 * transition, times attention, projection and FFN per layer, measures the quality cost of
 * speculating at 0.02 / 0.05 / 0.10 (greedy token agreement, held-out perplexity), writes the
 * profile beside the model and prints the acceptance, quality and decision tables. */
#include "version.h"
#include "config_io.h"
#include "generate.h"
#include "h5io.h"
#include "profile.h"
#include "tokenizer.h"
#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *corpus, *out, *heldout, *prompt;
    long tokens;
    int gen_tokens;
    float min_acceptance, tolerance;
    double overhead_ms;
    int no_quality;
    float qtol[PROFILE_MAX_QUALITY];
    int n_qtol;
} Options;

static void usage(FILE *out)
{
    fprintf(out,
        "usage: headsplit-profile --model M.h5 --corpus FILE [options]\n"
        "  --model FILE           model in HeadSplit HDF5 format\n"
        "  --corpus FILE          text corpus (UTF-8)\n"
        "  --tokens N             positions to measure (default 8192; the corpus may hold fewer)\n"
        "  --out FILE             profile to write (default: the model path + .profile.json)\n"
        "  --heldout FILE         held-out text for perplexity (default: the last 10%% of the\n"
        "                         corpus, then excluded from the acceptance statistics)\n"
        "  --gen-tokens N, -n N, --n-predict N  greedy tokens compared with and without\n"
        "                         speculation (64)\n"
        "  --threads N            kernel threads (default 1; as headsplit's --threads)\n"
        "  --f32-order avx512|avx2  the order of the fp32 sums (as headsplit's --f32-order;\n"
        "                         default avx512): profile the arithmetic the runs will use\n"
        "  --prompt TEXT          prompt of the greedy runs (default: the corpus's first line)\n"
        "  --min-acceptance A     decision threshold on acceptance (default 0.7)\n"
        "  --tolerance T          tolerance of the decision table (default 0.05)\n"
        "  --overhead-ms MS       critical-path cost of a discarded speculation beyond waiting\n"
        "                         for the heads (default 0.01: one small message)\n"
        "  --quality-tolerances L comma-separated tolerances of the quality runs, at most 8\n"
        "                         (default 0.02,0.05,0.10; 1e9 keeps every speculation)\n"
        "  --no-quality           skip the agreement and perplexity runs\n"
        "  --help\n");
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

/* Parses "0.02,0.05" into at most PROFILE_MAX_QUALITY values in [0, 1e9]; 0 or -1. */
static int parse_list(const char *s, float *out, int *n)
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    int k = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        double v;
        if (k == PROFILE_MAX_QUALITY || parse_double(t, 0, 1e9, &v) < 0)
            return -1;
        out[k++] = (float)v;
    }
    if (k == 0)
        return -1;
    *n = k;
    return 0;
}

/* Parses argv; returns 0, 1 for --help, or -1 with err naming the option. */
static int parse_args(Options *o, int argc, char **argv, char *err, size_t errlen)
{
    enum { O_MODEL = 256, O_CORPUS, O_TOKENS, O_OUT, O_HELDOUT, O_GEN, O_PROMPT, O_MINACC,
           O_TOL, O_OVER, O_NOQ, O_QTOL, O_HELP, O_THREADS, O_F32ORDER };
    static const struct option longopts[] = {
        {"model", required_argument, 0, O_MODEL}, {"corpus", required_argument, 0, O_CORPUS},
        {"tokens", required_argument, 0, O_TOKENS}, {"out", required_argument, 0, O_OUT},
        {"heldout", required_argument, 0, O_HELDOUT},
        {"gen-tokens", required_argument, 0, O_GEN}, {"prompt", required_argument, 0, O_PROMPT},
        {"n-predict", required_argument, 0, O_GEN}, {"threads", required_argument, 0, O_THREADS},
        {"f32-order", required_argument, 0, O_F32ORDER},
        {"min-acceptance", required_argument, 0, O_MINACC},
        {"tolerance", required_argument, 0, O_TOL},
        {"overhead-ms", required_argument, 0, O_OVER},
        {"quality-tolerances", required_argument, 0, O_QTOL},
        {"no-quality", no_argument, 0, O_NOQ}, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->tokens = 8192;
    o->gen_tokens = 64;
    o->min_acceptance = 0.7f;
    o->tolerance = 0.05f;
    o->overhead_ms = 0.01;
    for (int k = 0; k < PROFILE_N_TOL; k++)
        o->qtol[k] = profile_tolerances[k];
    o->n_qtol = PROFILE_N_TOL;
    opterr = 0;
    int ch;
    double v;
    while ((ch = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'n': /* as headsplit's -n: new tokens */
        case O_GEN:
            if (parse_double(optarg, 1, 1 << 20, &v) < 0 || v != (int)v)
                return util_err(err, errlen, "--gen-tokens/-n: '%s' is not a count", optarg);
            o->gen_tokens = (int)v;
            break;
        case O_THREADS:
            if (parse_double(optarg, 1, 64, &v) < 0 || v != (int)v)
                return util_err(err, errlen, "--threads: '%s' is not a count of 1..64", optarg);
            kernels_set_threads((int)v);
            break;
        case O_F32ORDER: {
            KernelsF32Order fo;
            if (kernels_parse_f32_order(optarg, &fo) < 0)
                return util_err(err, errlen, "--f32-order: '%s' is not avx512 or avx2", optarg);
            kernels_set_f32_order(fo);
            break;
        }
        case O_MODEL: o->model = optarg; break;
        case O_CORPUS: o->corpus = optarg; break;
        case O_OUT: o->out = optarg; break;
        case O_HELDOUT: o->heldout = optarg; break;
        case O_PROMPT: o->prompt = optarg; break;
        case O_NOQ: o->no_quality = 1; break;
        case O_TOKENS:
            if (parse_double(optarg, 1, 1e9, &v) < 0 || v != (long)v)
                return util_err(err, errlen, "--tokens: '%s' is not a count of 1..1e9", optarg);
            o->tokens = (long)v;
            break;
        case O_MINACC:
            if (parse_double(optarg, 0, 1, &v) < 0)
                return util_err(err, errlen, "--min-acceptance: '%s' is not in [0, 1]", optarg);
            o->min_acceptance = (float)v;
            break;
        case O_TOL:
            if (parse_double(optarg, 0, 1e6, &v) < 0)
                return util_err(err, errlen, "--tolerance: '%s' is not >= 0", optarg);
            o->tolerance = (float)v;
            break;
        case O_OVER:
            if (parse_double(optarg, 0, 1e6, &v) < 0)
                return util_err(err, errlen, "--overhead-ms: '%s' is not >= 0", optarg);
            o->overhead_ms = v;
            break;
        case O_QTOL:
            if (parse_list(optarg, o->qtol, &o->n_qtol) < 0)
                return util_err(err, errlen, "--quality-tolerances: '%s' is not a list of 1..%d "
                                "tolerances in [0, 1e9]", optarg, PROFILE_MAX_QUALITY);
            break;
        case O_HELP: return 1;
        default:
            return util_err(err, errlen, "unknown or incomplete option '%s' (see --help)",
                            argv[optind - 1]);
        }
    }
    if (optind < argc)
        return util_err(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->model || !o->corpus)
        return util_err(err, errlen, "--model and --corpus are required (see --help)");
    return 0;
}

/* Encodes text[len]; *bos gets the BOS id when the tokenizer put one in front, else -1. */
static int encode(const Tokenizer *tok, const char *text, size_t len, int **ids, size_t *n,
                  int *bos, char *err, size_t errlen)
{
    if (tokenizer_encode(tok, text, len, ids, n, err, errlen) < 0)
        return -1;
    int b = tokenizer_bos(tok);
    *bos = b >= 0 && *n > 0 && (*ids)[0] == b ? b : -1;
    return 0;
}

/* First non-empty line of text (malloc'ed). */
static char *first_line(const char *text)
{
    while (*text == '\n' || *text == '\r')
        text++;
    size_t n = strcspn(text, "\r\n");
    char *s = xmalloc(n + 1);
    memcpy(s, text, n);
    s[n] = '\0';
    return s;
}

typedef struct {
    ModelConfig cfg;
    Tokenizer *tok;
    HeadW head;
    LocalModel *local;
    char *corpus, *heldout_text;
    int *ids, *held;
    size_t n_ids, n_held;
    char *prompt, *out_path, *heldout_name;
    Profile prof;
} Run;

static void run_free(Run *r)
{
    local_model_free(r->local);
    model_free_head(&r->head);
    tokenizer_free(r->tok);
    free(r->corpus);
    free(r->heldout_text);
    free(r->ids);
    free(r->held);
    free(r->prompt);
    free(r->out_path);
    free(r->heldout_name);
    profile_free(&r->prof);
}

/* Reads the corpus and the held-out text (a file, or the corpus's last 10% cut at a line). */
static int read_texts(Run *r, const Options *o, size_t *train_len, char *err, size_t errlen)
{
    size_t len;
    r->corpus = util_read_file(o->corpus, &len, err, errlen);
    if (!r->corpus)
        return -1;
    *train_len = len;
    if (o->heldout) {
        size_t hl;
        r->heldout_text = util_read_file(o->heldout, &hl, err, errlen);
        if (!r->heldout_text)
            return -1;
        r->heldout_name = xstrdup(o->heldout);
        return 0;
    }
    size_t cut = len - len / 10;
    while (cut < len && r->corpus[cut - (cut > 0)] != '\n')
        cut++;
    r->heldout_text = xstrdup(r->corpus + cut);
    *train_len = cut;
    size_t nl = strlen(o->corpus) + 64;
    r->heldout_name = xmalloc(nl);
    snprintf(r->heldout_name, nl, "%s (last %zu bytes)", o->corpus, len - cut);
    return 0;
}

static int profile_main(const Options *o, Run *r, char *err, size_t errlen)
{
    hid_t file = h5io_open_read(o->model, err, errlen);
    if (file < 0)
        return -1;
    int rc = -1;
    if (config_read(&r->cfg, file, o->model, err, errlen) < 0 ||
        tokenizer_h5_read(&r->tok, file, o->model, err, errlen) < 0 ||
        model_load_head(&r->head, &r->cfg, file, o->model, err, errlen) < 0)
        goto out;
    size_t train_len;
    int bos, hbos;
    if (read_texts(r, o, &train_len, err, errlen) < 0 ||
        encode(r->tok, r->corpus, train_len, &r->ids, &r->n_ids, &bos, err, errlen) < 0 ||
        encode(r->tok, r->heldout_text, strlen(r->heldout_text), &r->held, &r->n_held, &hbos,
               err, errlen) < 0)
        goto out;
    profile_init(&r->prof, &r->cfg);
    r->prof.model_path = xstrdup(o->model);
    r->prof.corpus_path = xstrdup(o->corpus);
    double t0 = time_now();
    if (profile_measure(&r->prof, &r->cfg, &r->head, file, o->model, r->ids, r->n_ids, bos,
                        o->tokens, err, errlen) < 0)
        goto out;
    fprintf(stderr, "headsplit-profile: %ld positions measured in %.2f s (corpus: %zu tokens "
            "before the held-out part)\n", r->prof.tokens, time_now() - t0, r->n_ids);
    if (r->prof.tokens < o->tokens)
        fprintf(stderr, "headsplit-profile: warning: the corpus holds %ld positions, fewer than "
                "--tokens %ld\n", r->prof.tokens, o->tokens);
    if (!o->no_quality) {
        r->prompt = o->prompt ? xstrdup(o->prompt) : first_line(r->corpus);
        if (local_model_load(&r->local, &r->cfg, file, o->model, r->cfg.context_length, err,
                             errlen) < 0)
            goto out;
        t0 = time_now();
        if (profile_quality(&r->prof, &r->cfg, r->tok, &r->head, r->local, o->qtol,
                            o->n_qtol, r->prompt, o->gen_tokens, r->held, r->n_held, hbos,
                            o->tokens, err, errlen) < 0)
            goto out;
        r->prof.heldout_path = xstrdup(r->heldout_name);
        fprintf(stderr, "headsplit-profile: quality runs in %.2f s\n", time_now() - t0);
    }
    rc = 0;
out:
    H5Fclose(file);
    return rc;
}

static void print_report(const Options *o, const Run *r, FILE *out)
{
    const ModelConfig *c = &r->cfg;
    const Profile *p = &r->prof;
    fprintf(out, "Model %s: %s, %d layers, dim %d, %d heads (%d KV), FFN %d, context %d.\n"
            "Corpus %s: %ld positions teacher-forced in windows of %d.\n\n"
            "### Acceptance per transition (r = ||FFN(Z)|| / ||Z||, kept when r < tolerance)\n\n",
            o->model, config_arch_name(c->arch), c->n_layers, c->dim, c->n_heads, c->n_kv_heads,
            c->ffn_dim, c->context_length, o->corpus, p->tokens, c->context_length);
    profile_print_acceptance(p, out);
    if (p->n_quality > 0) {
        fprintf(out, "\n### Quality with speculation at every transition\n\nGreedy: %d tokens "
                "from the prompt \"%s\".  Held-out: %s.\n", p->gen_tokens_requested, p->prompt,
                p->heldout_path);
        profile_print_quality(p, out);
    }
    int T = c->n_layers > 1 ? c->n_layers - 1 : 0;
    double *a = xcalloc((size_t)T + 1, sizeof(double)), *f = xcalloc((size_t)T + 1, sizeof(double));
    double *re = xcalloc((size_t)T + 1, sizeof(double));
    profile_default_costs(p, o->overhead_ms, a, f, re);
    fprintf(out, "\n### Decision table\n\nCosts from this machine's timings: attn = next layer's "
            "attention, reexec = max(0, attn - FFN) + %.3f ms.\n", o->overhead_ms);
    profile_print_decisions(p, out, o->tolerance, o->min_acceptance, a, f, re);
    free(a);
    free(f);
    free(re);
}

int main(int argc, char **argv)
{
    if (app_wants_version(argc, argv)) {
        app_version(stdout, "headsplit-profile");
        return 0;
    }
    Options o;
    char err[1024] = "";
    int prc = parse_args(&o, argc, argv, err, sizeof err);
    if (prc != 0) {
        if (prc > 0)
            usage(stdout);
        else
            fprintf(stderr, "headsplit-profile: error: %s\n", err);
        return prc > 0 ? 0 : 2;
    }
    h5io_quiet();
    Run r;
    memset(&r, 0, sizeof r);
    int rc = profile_main(&o, &r, err, sizeof err);
    if (rc == 0) {
        if (o.out) {
            r.out_path = xstrdup(o.out);
        } else {
            size_t n = strlen(o.model) + sizeof ".profile.json";
            r.out_path = xmalloc(n);
            snprintf(r.out_path, n, "%s.profile.json", o.model);
        }
        rc = profile_write(&r.prof, &r.cfg, r.out_path, err, sizeof err);
    }
    if (rc == 0) {
        print_report(&o, &r, stdout);
        fprintf(stderr, "headsplit-profile: wrote %s\n", r.out_path);
    } else {
        fprintf(stderr, "headsplit-profile: error: %s\n", err);
    }
    run_free(&r);
    return rc == 0 ? 0 : 1;
}
