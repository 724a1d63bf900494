/* synthetic.c: deterministic random models with real shapes (TinyLlama-1.1B, GPT-2 Small,
 * stories260K, or a spec), for tests and benchmarks.  Every tensor has its own generator seeded
 * from (seed, dataset path) and is generated block by block while it is written, so the 4.4 GB
 * TinyLlama file needs only one 16 MiB block of memory and a layer's values do not depend on
 * how many layers are generated.  Matrices and biases: N(0, 0.02^2); norm weights: 1.0. */
#include "convert.h"

#include "convert_internal.h"
#include "kernels.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SYN_STD 0.02f


/* Parses "key=value,key=value" after "llama:" or "gpt2:" into c, or after "PRESET:" over
 * the preset's shape in c (base 1: the keys not given keep the preset's values). */
static int parse_spec(const char *spec, int base, ModelConfig *c, char *err, size_t errlen)
{
    int is_gpt2 = base ? c->arch == ARCH_GPT2 : strncmp(spec, "gpt2:", 5) == 0;
    if (!base)
        *c = (ModelConfig){.arch = is_gpt2 ? ARCH_GPT2 : ARCH_LLAMA, .dim = 64, .n_layers = 2,
                           .n_heads = is_gpt2 ? 4 : 8, .vocab_size = 512,
                           .context_length = is_gpt2 ? 128 : 512, .norm_eps = 1e-5f,
                           .rope_theta = 10000.0f,
                           .rope_style = is_gpt2 ? ROPE_NONE : ROPE_INTERLEAVED,
                           .tied_embeddings = 1, .bos_id = -1, .eos_id = -1};
    char *buf = xstrdup(strchr(spec, ':') + 1);
    int rc = 0;
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv && rc == 0;
         kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '='), *end;
        if (!eq) {
            rc = util_err(err, errlen, "--synthetic: %s: expected key=value", kv);
            break;
        }
        *eq = '\0';
        const char *val = eq + 1;
        errno = 0;
        double d = strtod(val, &end);
        int bad = end == val || *end != '\0' || errno != 0;
        struct { const char *key; int *dst; } ints[] = {
            {"dim", &c->dim},         {"layers", &c->n_layers}, {"heads", &c->n_heads},
            {"kv_heads", &c->n_kv_heads}, {"head_dim", &c->head_dim}, {"ffn", &c->ffn_dim},
            {"vocab", &c->vocab_size}, {"ctx", &c->context_length},
            {"tied", &c->tied_embeddings},
        };
        size_t i = 0;
        while (i < sizeof ints / sizeof ints[0] && strcmp(ints[i].key, kv) != 0)
            i++;
        if (i < sizeof ints / sizeof ints[0]) {
            if (bad || d != (double)(int)d || d < 0 || d > 1e9)
                rc = util_err(err, errlen, "--synthetic: %s: '%s' is not a count", kv, val);
            else
                *ints[i].dst = (int)d;
        } else if (strcmp(kv, "eps") == 0 || strcmp(kv, "theta") == 0) {
            if (bad)
                rc = util_err(err, errlen, "--synthetic: %s: '%s' is not a number", kv, val);
            else if (kv[0] == 'e')
                c->norm_eps = (float)d;
            else
                c->rope_theta = (float)d;
        } else if (strcmp(kv, "rope") == 0 && !is_gpt2 &&
                   (strcmp(val, "half") == 0 || strcmp(val, "interleaved") == 0)) {
            c->rope_style = val[0] == 'h' ? ROPE_HALF : ROPE_INTERLEAVED;
        } else {
            rc = util_err(err, errlen, "--synthetic: %s: unknown key or value (see --help)", kv);
        }
    }
    free(buf);
    if (rc < 0)
        return -1;
    if (c->n_heads <= 0 || c->dim % c->n_heads != 0)
        return util_err(err, errlen, "--synthetic: heads: %d does not divide dim = %d",
                        c->n_heads, c->dim);
    if (is_gpt2 && c->n_kv_heads && c->n_kv_heads != c->n_heads)
        return util_err(err, errlen, "--synthetic: kv_heads: gpt2 has one KV head per head");
    if (!c->n_kv_heads)
        c->n_kv_heads = c->n_heads;
    if (!c->head_dim)
        c->head_dim = c->dim / c->n_heads;
    if (!c->ffn_dim)
        c->ffn_dim = 4 * c->dim;
    c->tied_embeddings = c->tied_embeddings != 0;
    return 0;
}

int convert_synthetic_config(const char *spec, int layers, ModelConfig *c, char *err,
                             size_t errlen)
{
    /* "NAME" or "NAME:key=value,...", NAME a preset or llama / gpt2 */
    const char *colon = strchr(spec, ':');
    const size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    char name[64] = "";
    if (nlen < sizeof name)
        memcpy(name, spec, nlen);
    name[nlen < sizeof name ? nlen : 0] = '\0';
    const int named = config_preset(name, c) == 0;
    const int custom = colon && (strcmp(name, "llama") == 0 || strcmp(name, "gpt2") == 0);
    if (!named && !custom)
        return util_err(err, errlen, "--synthetic: %s: unknown model (tinyllama-1.1b, "
                        "gpt2-small, stories260k, llama2-7b, llama3-8b, PRESET:key=value,..., "
                        "or llama:key=value,... / gpt2:key=value,...)", spec);
    const int scaled = named && c->n_rope_freq_factors > 0;
    if (colon && parse_spec(spec, named, c, err, errlen) < 0)
        return -1;
    if (scaled) { /* Llama 3.1's factors, for the head_dim and theta given */
        const RopeScalingLlama3 rs = config_rope_scaling_llama31();
        if (config_set_rope_scaling_llama3(c, &rs) < 0)
            return util_err(err, errlen, "--synthetic: %s: head_dim: %d is outside 2..%d with "
                            "Llama 3.1's RoPE scaling", spec, c->head_dim,
                            2 * CONFIG_MAX_ROPE_PAIRS);
    }
    if (layers > 0)
        c->n_layers = layers;
    char verr[256];
    if (config_validate(c, verr, sizeof verr) < 0)
        return util_err(err, errlen, "--synthetic: %s: %s", spec, verr);
    return 0;
}

typedef struct {
    uint64_t state; /* before element 0; element i draws rng_next twice after 2i draws */
    float scale;    /* 0: constant fill */
    float value;
} RandSource;

/* One block being filled by the kernel threads, in runs of SYN_RUN elements. */
#define SYN_RUN 4096
typedef struct {
    const RandSource *r;
    uint64_t elem0, n;
    float *out;
} FillJob;

static void fill_runs(void *arg, int lo, int hi)
{
    const FillJob *j = arg;
    for (int k = lo; k < hi; k++) {
        uint64_t i0 = (uint64_t)k * SYN_RUN, i1 = i0 + SYN_RUN < j->n ? i0 + SYN_RUN : j->n;
        uint64_t st = j->r->state;
        rng_skip(&st, 2 * (j->elem0 + i0)); /* Box-Muller draws two per value */
        for (uint64_t i = i0; i < i1; i++)
            j->out[i] = j->r->scale * rng_normal(&st);
    }
}

/* Elements [elem0, elem0 + n) of the tensor's stream; the same values whatever the blocks
 * and threads (the generator jumps to elem0). */
static int fill_random(void *ctx, uint64_t elem0, uint64_t n, float *out, char *err,
                       size_t errlen)
{
    (void)err;
    (void)errlen;
    const RandSource *r = ctx;
    if (r->scale == 0.0f) {
        for (uint64_t i = 0; i < n; i++)
            out[i] = r->value;
        return 0;
    }
    FillJob j = {r, elem0, n, out};
    const uint64_t runs = (n + SYN_RUN - 1) / SYN_RUN; /* n <= WRITER_BLOCK_FLOATS */
    kernels_parallel_rows(fill_runs, &j, (int)runs, (long long)n * 64);
    return 0;
}

typedef enum { SYN_WEIGHT, SYN_NORM } SynKind;

/* One tensor: weights/biases N(0, std^2) from a generator keyed by (seed, path), norms 1.0. */
static int syn_tensor(ModelWriter *w, uint64_t seed, const char *path, SynKind kind, int rank,
                      uint64_t d0, uint64_t d1, uint64_t d2, char *err, size_t errlen)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the path */
    for (const char *p = path; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    uint64_t st = seed ^ h;
    RandSource r = {rng_next(&st), kind == SYN_NORM ? 0.0f : SYN_STD, 1.0f};
    uint64_t dims[3] = {d0, d1, d2};
    return writer_stream_tensor(w, path, rank, dims, fill_random, &r, err, errlen);
}

static int syn_layer(ModelWriter *w, const ModelConfig *c, uint64_t seed, int l, char *err,
                     size_t errlen)
{
    uint64_t dim = (uint64_t)c->dim, hd = (uint64_t)c->head_dim, G = (uint64_t)c->n_kv_heads;
    uint64_t Q = (uint64_t)config_q_per_kv(c), ffn = (uint64_t)c->ffn_dim;
    int g2 = c->arch == ARCH_GPT2;
    char p[64];
#define T(name, kind, rank, a, b, d) \
    syn_tensor(w, seed, writer_layer_path(p, sizeof p, l, name), kind, rank, a, b, d, err, errlen)
    if (T("attn_norm", SYN_NORM, 1, dim, 0, 0) < 0 ||
        (g2 && T("attn_norm_bias", SYN_WEIGHT, 1, dim, 0, 0) < 0) ||
        T("wq", SYN_WEIGHT, 3, G, Q * hd, dim) < 0 || T("wk", SYN_WEIGHT, 3, G, hd, dim) < 0 ||
        T("wv", SYN_WEIGHT, 3, G, hd, dim) < 0 ||
        (g2 && (T("bq", SYN_WEIGHT, 2, G, Q * hd, 0) < 0 || T("bk", SYN_WEIGHT, 2, G, hd, 0) < 0 ||
                T("bv", SYN_WEIGHT, 2, G, hd, 0) < 0)) ||
        T("wo", SYN_WEIGHT, 2, dim, (uint64_t)c->n_heads * hd, 0) < 0 ||
        (g2 && T("bo", SYN_WEIGHT, 1, dim, 0, 0) < 0) ||
        T("ffn_norm", SYN_NORM, 1, dim, 0, 0) < 0 ||
        (g2 && T("ffn_norm_bias", SYN_WEIGHT, 1, dim, 0, 0) < 0) ||
        (!g2 && T("w_gate", SYN_WEIGHT, 2, ffn, dim, 0) < 0) ||
        T("w_up", SYN_WEIGHT, 2, ffn, dim, 0) < 0 ||
        (g2 && T("b_up", SYN_WEIGHT, 1, ffn, 0, 0) < 0) ||
        T("w_down", SYN_WEIGHT, 2, dim, ffn, 0) < 0 ||
        (g2 && T("b_down", SYN_WEIGHT, 1, dim, 0, 0) < 0))
        return -1;
#undef T
    return 0;
}

/* Every tensor but the tokenizer, layers first. */
static int syn_tensors(ModelWriter *w, const ModelConfig *c, uint64_t seed, char *err,
                       size_t errlen)
{
    uint64_t dim = (uint64_t)c->dim, V = (uint64_t)c->vocab_size;
    for (int l = 0; l < c->n_layers; l++)
        if (syn_layer(w, c, seed, l, err, errlen) < 0)
            return -1;
    int g2 = c->arch == ARCH_GPT2;
    if (syn_tensor(w, seed, "/embed", SYN_WEIGHT, 2, V, dim, 0, err, errlen) < 0 ||
        (g2 && syn_tensor(w, seed, "/pos_embed", SYN_WEIGHT, 2, (uint64_t)c->context_length,
                          dim, 0, err, errlen) < 0) ||
        syn_tensor(w, seed, "/final_norm", SYN_NORM, 1, dim, 0, 0, err, errlen) < 0 ||
        (g2 && syn_tensor(w, seed, "/final_norm_bias", SYN_WEIGHT, 1, dim, 0, 0, err,
                          errlen) < 0) ||
        (!c->tied_embeddings &&
         syn_tensor(w, seed, "/lm_head", SYN_WEIGHT, 2, V, dim, 0, err, errlen) < 0))
        return -1;
    return 0;
}

int convert_make_synthetic(const char *spec, uint64_t seed, int layers, const char *tokenizer,
                           const char *out, const char *quantize, ConvertStats *stats,
                           char *err, size_t errlen)
{
    ModelConfig c;
    ModelWriter w;
    Tokenizer *tok = NULL;
    memset(&w, 0, sizeof w);
    w.file = -1;
    if (convert_synthetic_config(spec, layers, &c, err, errlen) < 0)
        return -1;
    if (tokenizer) {
        if (convert_load_tokenizer(&tok, tokenizer, c.vocab_size, err, errlen) < 0)
            return -1;
    } else if (c.vocab_size < 259) {
        return util_err(err, errlen, "--synthetic: vocab: %d is below the 259 pieces of the "
                        "synthetic tokenizer (give --tokenizer or a larger vocab)",
                        c.vocab_size);
    } else {
        tok = tokenizer_build_synthetic(c.vocab_size);
    }
    c.bos_id = tokenizer_bos(tok);
    c.eos_id = tokenizer_eos(tok);
    size_t slen = strlen(spec) + (tokenizer ? strlen(tokenizer) : 0) + 256;
    char *source = xmalloc(slen);
    snprintf(source, slen, "SYNTHETIC random weights, not a trained model: headsplit-convert "
             "--synthetic %s --seed %llu --layers %d, tokenizer %s; N(0, 0.02^2) matrices and "
             "biases, norm weights 1.0", spec, (unsigned long long)seed, c.n_layers,
             tokenizer ? tokenizer : "synthetic");
    int rc = writer_open_file(&w, out, &c, source, quantize, err, errlen);
    free(source);
    if (rc < 0)
        goto fail;
    /* A first pass counts the bytes to come, for the progress lines' total. */
    w.progress = stats ? stats->progress : NULL;
    w.dry = 1;
    rc = syn_tensors(&w, &c, seed, err, errlen);
    w.dry = 0;
    if (rc < 0 || syn_tensors(&w, &c, seed, err, errlen) < 0 ||
        writer_put_tokenizer(&w, tok, err, errlen) < 0)
        goto fail;
    if (writer_finish_file(&w, &c, stats, err, errlen) < 0)
        goto fail;
    tokenizer_free(tok);
    return 0;
fail:
    writer_abort_file(&w);
    tokenizer_free(tok);
    return -1;
}
