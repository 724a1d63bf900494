/* config.c: model configuration: validation, HDF5 read/write, parameter accounting. */
#include "config_io.h"

#include "h5io.h"
#include "util.h"

#include <math.h>
#include <string.h>

const char *config_arch_name(Arch a) { return a == ARCH_GPT2 ? "gpt2" : "llama"; }

const char *config_rope_name(RopeStyle r)
{
    return r == ROPE_INTERLEAVED ? "interleaved" : r == ROPE_HALF ? "half" : "none";
}

/* Product of up to three factors; -1 when it overflows size_t or exceeds HDF5's 2^62. */
static int prod3(size_t *out, size_t a, size_t b, size_t c)
{
    size_t ab;
    if (size_mul(&ab, a, b) < 0 || size_mul(out, ab, c) < 0 || *out > ((size_t)1 << 60))
        return -1;
    return 0;
}

int config_validate(const ModelConfig *c, char *err, size_t errlen)
{
    struct { const char *name; int v; int max; } dims[] = {
        {"dim", c->dim, 1 << 20},           {"n_layers", c->n_layers, 4096},
        {"n_heads", c->n_heads, 4096},      {"n_kv_heads", c->n_kv_heads, 4096},
        {"head_dim", c->head_dim, 1 << 16}, {"ffn_dim", c->ffn_dim, 1 << 22},
        {"vocab_size", c->vocab_size, 1 << 24}, {"context_length", c->context_length, 1 << 22},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v <= 0 || dims[i].v > dims[i].max)
            return util_err(err, errlen, "config field %s = %d is out of range (1..%d)",
                            dims[i].name, dims[i].v, dims[i].max);
    if (c->n_heads % c->n_kv_heads != 0)
        return util_err(err, errlen, "config field n_kv_heads = %d does not divide n_heads = %d",
                        c->n_kv_heads, c->n_heads);
    if (c->arch == ARCH_LLAMA && c->rope_style == ROPE_NONE)
        return util_err(err, errlen, "config field rope_style is none for a llama model");
    if (c->rope_style != ROPE_NONE && c->head_dim % 2 != 0)
        return util_err(err, errlen, "config field head_dim = %d must be even for RoPE",
                        c->head_dim);
    if (!(c->norm_eps > 0 && c->norm_eps < 1))
        return util_err(err, errlen, "config field norm_eps = %g is out of range (0, 1)",
                        (double)c->norm_eps);
    if ((c->arch != ARCH_LLAMA && c->arch != ARCH_GPT2) ||
        (c->rope_style != ROPE_NONE && c->rope_style != ROPE_INTERLEAVED &&
         c->rope_style != ROPE_HALF))
        return util_err(err, errlen, "config field architecture or rope_style is unknown");
    if (!isfinite(c->rope_theta) ||
        (c->rope_style != ROPE_NONE && !(c->rope_theta > 1)))
        return util_err(err, errlen, "config field rope_theta = %g is out of range",
                        (double)c->rope_theta);
    if (c->qkv_bias != 0 && c->qkv_bias != 1)
        return util_err(err, errlen, "config field qkv_bias = %d must be 0 or 1", c->qkv_bias);
    if (c->sliding_window < 0)
        return util_err(err, errlen, "config field sliding_window = %d is negative (0: none)",
                        c->sliding_window);
    if (c->q_prescale != 0 && c->q_prescale != 1)
        return util_err(err, errlen, "config field q_prescale = %d must be 0 or 1",
                        c->q_prescale);
    if (c->q_prescale && c->arch != ARCH_LLAMA)
        return util_err(err, errlen, "config field q_prescale: llama family only");
    if (c->gelu_fp16 != 0 && c->gelu_fp16 != 1)
        return util_err(err, errlen, "config field gelu_fp16 = %d must be 0 or 1",
                        c->gelu_fp16);
    if (c->gelu_fp16 && c->arch != ARCH_GPT2)
        return util_err(err, errlen, "config field gelu_fp16: gpt2 only");
    if (c->n_rope_freq_factors != 0) {
        if (c->rope_style == ROPE_NONE || c->n_rope_freq_factors != c->head_dim / 2 ||
            c->n_rope_freq_factors > CONFIG_MAX_ROPE_PAIRS)
            return util_err(err, errlen, "config field rope_freq_factors: %d factors for a "
                            "head of %d values (one per frequency, head_dim / 2 <= %d, and "
                            "RoPE needed)", c->n_rope_freq_factors, c->head_dim,
                            CONFIG_MAX_ROPE_PAIRS);
        for (int i = 0; i < c->n_rope_freq_factors; i++)
            if (!(c->rope_freq_factors[i] > 0) || !isfinite(c->rope_freq_factors[i]))
                return util_err(err, errlen, "config field rope_freq_factors[%d] = %g must be "
                                "positive", i, (double)c->rope_freq_factors[i]);
    }
    if (c->bos_id < -1 || c->bos_id >= c->vocab_size)
        return util_err(err, errlen, "config field bos_id = %d is outside the vocabulary",
                        c->bos_id);
    if (c->eos_id < -1 || c->eos_id >= c->vocab_size)
        return util_err(err, errlen, "config field eos_id = %d is outside the vocabulary",
                        c->eos_id);
    size_t n;
    if (prod3(&n, (size_t)c->n_heads, (size_t)c->head_dim, (size_t)c->dim) < 0 ||
        prod3(&n, (size_t)c->vocab_size, (size_t)c->dim, 4) < 0 ||
        prod3(&n, (size_t)c->ffn_dim, (size_t)c->dim, 4) < 0 ||
        prod3(&n, (size_t)c->context_length, (size_t)c->head_dim, (size_t)c->n_kv_heads) < 0 ||
        prod3(&n, config_layer_floats(c), (size_t)c->n_layers, 4) < 0)
        return util_err(err, errlen, "config dimensions overflow the addressable size "
                        "(dim %d, heads %d, head_dim %d, ffn %d, vocab %d, layers %d)",
                        c->dim, c->n_heads, c->head_dim, c->ffn_dim, c->vocab_size,
                        c->n_layers);
    return 0;
}

int config_read(ModelConfig *c, hid_t file, const char *fname, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    int version;
    if (!h5io_exists(file, "/config"))
        return util_err(err, errlen, "%s: no /config group: not a HeadSplit model file", fname);
    if (h5io_attr_read_int(file, "/config", "format_version", &version, fname, err, errlen) < 0)
        return -1;
    if (version != HEADSPLIT_FORMAT_VERSION && version != HEADSPLIT_FORMAT_VERSION_QUANT)
        return util_err(err, errlen,
                        "%s: field format_version is %d, this program reads versions %d and %d "
                        "(re-convert the model with this headsplit-convert)",
                        fname, version, HEADSPLIT_FORMAT_VERSION,
                        HEADSPLIT_FORMAT_VERSION_QUANT);
    if (version == HEADSPLIT_FORMAT_VERSION_QUANT &&
        h5io_attr_read_string(file, "/config", "quantization", c->quantization,
                              sizeof c->quantization, fname, err, errlen) < 0)
        return -1;
    char arch[32], rope[32];
    double eps, theta;
    struct { const char *name; int *dst; } ints[] = {
        {"dim", &c->dim},           {"n_layers", &c->n_layers},
        {"n_heads", &c->n_heads},   {"n_kv_heads", &c->n_kv_heads},
        {"head_dim", &c->head_dim}, {"ffn_dim", &c->ffn_dim},
        {"vocab_size", &c->vocab_size}, {"context_length", &c->context_length},
        {"tied_embeddings", &c->tied_embeddings}, {"bos_id", &c->bos_id},
        {"eos_id", &c->eos_id},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (h5io_attr_read_int(file, "/config", ints[i].name, ints[i].dst, fname, err, errlen) < 0)
            return -1;
    if (h5io_attr_read_string(file, "/config", "architecture", arch, sizeof arch, fname, err,
                              errlen) < 0 ||
        h5io_attr_read_string(file, "/config", "rope_style", rope, sizeof rope, fname, err,
                              errlen) < 0 ||
        h5io_attr_read_double(file, "/config", "norm_eps", &eps, fname, err, errlen) < 0 ||
        h5io_attr_read_double(file, "/config", "rope_theta", &theta, fname, err, errlen) < 0)
        return -1;
    if (strcmp(arch, "llama") == 0)
        c->arch = ARCH_LLAMA;
    else if (strcmp(arch, "gpt2") == 0)
        c->arch = ARCH_GPT2;
    else
        return util_err(err, errlen, "%s: field architecture = '%s' (expected llama or gpt2)",
                        fname, arch);
    if (strcmp(rope, "interleaved") == 0)
        c->rope_style = ROPE_INTERLEAVED;
    else if (strcmp(rope, "half") == 0)
        c->rope_style = ROPE_HALF;
    else if (strcmp(rope, "none") == 0)
        c->rope_style = ROPE_NONE;
    else
        return util_err(err, errlen, "%s: field rope_style = '%s' (expected interleaved, half "
                        "or none)", fname, rope);
    c->norm_eps = (float)eps;
    c->rope_theta = (float)theta;
    /* Optional, absent from files of models without them. */
    if ((H5Aexists_by_name(file, "/config", "qkv_bias", H5P_DEFAULT) > 0 &&
         h5io_attr_read_int(file, "/config", "qkv_bias", &c->qkv_bias, fname, err, errlen) < 0) ||
        (H5Aexists_by_name(file, "/config", "sliding_window", H5P_DEFAULT) > 0 &&
         h5io_attr_read_int(file, "/config", "sliding_window", &c->sliding_window, fname, err,
                            errlen) < 0) ||
        (H5Aexists_by_name(file, "/config", "q_prescale", H5P_DEFAULT) > 0 &&
         h5io_attr_read_int(file, "/config", "q_prescale", &c->q_prescale, fname, err,
                            errlen) < 0) ||
        (H5Aexists_by_name(file, "/config", "gelu_fp16", H5P_DEFAULT) > 0 &&
         h5io_attr_read_int(file, "/config", "gelu_fp16", &c->gelu_fp16, fname, err,
                            errlen) < 0))
        return -1;
    if (h5io_exists(file, "/config/rope_freq_factors")) {
        int n = c->head_dim / 2;
        uint64_t d[1] = {(uint64_t)n}, s0[1] = {0};
        if (n < 1 || n > CONFIG_MAX_ROPE_PAIRS)
            return util_err(err, errlen, "%s: /config/rope_freq_factors: head_dim %d outside "
                            "2..%d", fname, c->head_dim, 2 * CONFIG_MAX_ROPE_PAIRS);
        if (h5io_check_shape(file, "/config/rope_freq_factors", 1, d, fname, err, errlen) < 0 ||
            h5io_read_slab(file, "/config/rope_freq_factors", 1, d, s0, d, c->rope_freq_factors,
                           fname, err, errlen) < 0)
            return -1;
        c->n_rope_freq_factors = n;
    }
    char verr[256];
    if (config_validate(c, verr, sizeof verr) < 0)
        return util_err(err, errlen, "%s: %s", fname, verr);
    /* A version-1 file is float32 throughout (its datasets are checked when loaded). */
    if (version == HEADSPLIT_FORMAT_VERSION_QUANT &&
        config_read_wtypes(c, file, fname, err, errlen) < 0)
        return -1;
    return 0;
}

static const char *const wkind_names[WKIND_COUNT] = {
    "embed", "lm_head", "wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down",
};

const char *config_wkind_name(WeightKind k)
{
    return k >= 0 && k < WKIND_COUNT ? wkind_names[k] : "?";
}

/* Bytes per 256 values of a type: orders types by width. */
static size_t type_width(int t) { return quant_row_bytes((QType)t, 256); }

int config_read_wtypes(ModelConfig *c, hid_t file, const char *fname, char *err,
                       size_t errlen)
{
    for (int k = 0; k < WKIND_COUNT; k++) {
        c->wtype[k] = QTYPE_F32;
        const int layered = k >= WKIND_WQ;
        const int n = layered ? c->n_layers : 1;
        int found = 0;
        for (int l = 0; l < n; l++) {
            char p[96];
            if (layered)
                snprintf(p, sizeof p, "/layers/%d/%s", l, wkind_names[k]);
            else
                snprintf(p, sizeof p, "/%s", wkind_names[k]);
            if (!h5io_exists(file, p))
                continue; /* untied lm_head, gpt2's w_gate: the loader names what is missing */
            H5Tensor ti;
            if (h5io_tensor_info(file, p, &ti, fname, err, errlen) < 0)
                return -1;
            if (!found || type_width(ti.type) > type_width(c->wtype[k]))
                c->wtype[k] = ti.type;
            found = 1;
        }
    }
    if (c->tied_embeddings)
        c->wtype[WKIND_LM_HEAD] = c->wtype[WKIND_EMBED];
    return 0;
}

int config_write(const ModelConfig *c, hid_t file, char *err, size_t errlen)
{
    hid_t g = H5Gcreate2(file, "/config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return util_err(err, errlen, "cannot create /config group");
    int rc = 0;
    const int quant = c->quantization[0] != '\0';
    rc |= h5io_attr_write_int(g, "format_version",
                              quant ? HEADSPLIT_FORMAT_VERSION_QUANT : HEADSPLIT_FORMAT_VERSION);
    if (quant)
        rc |= h5io_attr_write_string(g, "quantization", c->quantization);
    rc |= h5io_attr_write_string(g, "architecture", config_arch_name(c->arch));
    rc |= h5io_attr_write_int(g, "dim", c->dim);
    rc |= h5io_attr_write_int(g, "n_layers", c->n_layers);
    rc |= h5io_attr_write_int(g, "n_heads", c->n_heads);
    rc |= h5io_attr_write_int(g, "n_kv_heads", c->n_kv_heads);
    rc |= h5io_attr_write_int(g, "head_dim", c->head_dim);
    rc |= h5io_attr_write_int(g, "ffn_dim", c->ffn_dim);
    rc |= h5io_attr_write_int(g, "vocab_size", c->vocab_size);
    rc |= h5io_attr_write_int(g, "context_length", c->context_length);
    rc |= h5io_attr_write_double(g, "norm_eps", (double)c->norm_eps);
    rc |= h5io_attr_write_double(g, "rope_theta", (double)c->rope_theta);
    rc |= h5io_attr_write_string(g, "rope_style", config_rope_name(c->rope_style));
    rc |= h5io_attr_write_int(g, "tied_embeddings", c->tied_embeddings);
    rc |= h5io_attr_write_int(g, "bos_id", c->bos_id);
    rc |= h5io_attr_write_int(g, "eos_id", c->eos_id);
    /* The newer fields only where a model has them, so older files stay as they were. */
    if (c->qkv_bias)
        rc |= h5io_attr_write_int(g, "qkv_bias", c->qkv_bias);
    if (c->sliding_window)
        rc |= h5io_attr_write_int(g, "sliding_window", c->sliding_window);
    if (c->q_prescale)
        rc |= h5io_attr_write_int(g, "q_prescale", c->q_prescale);
    if (c->gelu_fp16)
        rc |= h5io_attr_write_int(g, "gelu_fp16", c->gelu_fp16);
    H5Gclose(g);
    if (rc)
        return util_err(err, errlen, "cannot write /config attributes");
    if (c->n_rope_freq_factors > 0) {
        uint64_t d[1] = {(uint64_t)c->n_rope_freq_factors};
        if (h5io_write_tensor(file, "/config/rope_freq_factors", 1, d, c->rope_freq_factors, err,
                              errlen) < 0)
            return -1;
    }
    return 0;
}

size_t config_attn_unit_floats(const ModelConfig *c, int n_q_heads)
{
    size_t hd = (size_t)c->head_dim, dim = (size_t)c->dim;
    size_t n = (size_t)n_q_heads * hd * dim + 2 * hd * dim + dim;
    if (c->arch == ARCH_GPT2)
        n += (size_t)n_q_heads * hd + 2 * hd + dim;
    else if (c->qkv_bias)
        n += (size_t)n_q_heads * hd + 2 * hd;
    return n;
}

size_t config_proj_floats(const ModelConfig *c)
{
    size_t n = (size_t)c->dim * (size_t)c->n_heads * (size_t)c->head_dim;
    return c->arch == ARCH_GPT2 ? n + (size_t)c->dim : n;
}

size_t config_ffn_floats(const ModelConfig *c, int ffn_cols)
{
    size_t dim = (size_t)c->dim, f = (size_t)ffn_cols;
    if (c->arch == ARCH_GPT2)
        return 2 * f * dim + f + 3 * dim;
    return 3 * f * dim + dim;
}

size_t config_layer_floats(const ModelConfig *c)
{
    return config_attn_unit_floats(c, config_q_per_kv(c)) * (size_t)c->n_kv_heads +
           config_proj_floats(c) + config_ffn_floats(c, c->ffn_dim);
}

/* Bytes of n values in type t, rounded up to whole blocks (a cut that is not block-aligned
 * is refused by the loader; the estimate stays defined for the planner). */
static size_t nbytes(int t, size_t n)
{
    const size_t bs = (size_t)quant_block_size((QType)t);
    return (n + bs - 1) / bs * quant_block_bytes((QType)t);
}

size_t config_attn_unit_bytes(const ModelConfig *c, int n_q_heads)
{
    size_t hd = (size_t)c->head_dim, dim = (size_t)c->dim, nq = (size_t)n_q_heads;
    size_t b = nq * hd * nbytes(c->wtype[WKIND_WQ], dim) +
               hd * (nbytes(c->wtype[WKIND_WK], dim) + nbytes(c->wtype[WKIND_WV], dim)) +
               dim * sizeof(float);
    if (c->arch == ARCH_GPT2)
        b += (nq * hd + 2 * hd + dim) * sizeof(float);
    else if (c->qkv_bias)
        b += (nq * hd + 2 * hd) * sizeof(float);
    return b;
}

size_t config_proj_cols_bytes(const ModelConfig *c, int ncols)
{
    return (size_t)c->dim * nbytes(c->wtype[WKIND_WO], (size_t)ncols);
}

size_t config_proj_bytes(const ModelConfig *c)
{
    size_t b = config_proj_cols_bytes(c, c->n_heads * c->head_dim);
    return c->arch == ARCH_GPT2 ? b + (size_t)c->dim * sizeof(float) : b;
}

size_t config_ffn_bytes(const ModelConfig *c, int ffn_cols)
{
    size_t dim = (size_t)c->dim, f = (size_t)ffn_cols;
    size_t b = f * nbytes(c->wtype[WKIND_W_UP], dim) + dim * nbytes(c->wtype[WKIND_W_DOWN], f);
    if (c->arch == ARCH_GPT2)
        return b + (f + 3 * dim) * sizeof(float);
    return b + f * nbytes(c->wtype[WKIND_W_GATE], dim) + dim * sizeof(float);
}

size_t config_layer_bytes(const ModelConfig *c)
{
    return config_attn_unit_bytes(c, config_q_per_kv(c)) * (size_t)c->n_kv_heads +
           config_proj_bytes(c) + config_ffn_bytes(c, c->ffn_dim);
}

size_t config_head_rows_bytes(const ModelConfig *c, int n_rows)
{
    return (size_t)n_rows * nbytes(c->wtype[WKIND_LM_HEAD], (size_t)c->dim);
}

int config_rounds_activations(const ModelConfig *c)
{
    static const WeightKind readers[] = {WKIND_WQ,     WKIND_WK,   WKIND_WV,
                                         WKIND_W_GATE, WKIND_W_UP, WKIND_LM_HEAD};
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++)
        if (c->wtype[readers[i]] != QTYPE_F32)
            return 1;
    return 0;
}

int config_wkind_block(const ModelConfig *c, WeightKind k)
{
    return quant_block_size((QType)c->wtype[k]);
}

size_t config_kv_bytes(const ModelConfig *c, int n_positions)
{
    return 2 * (size_t)n_positions * quant_row_bytes((QType)c->kv_type, c->head_dim);
}

RopeScalingLlama3 config_rope_scaling_llama31(void)
{
    return (RopeScalingLlama3){.factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                               .original_max_positions = 8192};
}

int config_set_rope_scaling_llama3(ModelConfig *c, const RopeScalingLlama3 *s)
{
    const int n = c->head_dim / 2;
    if (n < 1 || n > CONFIG_MAX_ROPE_PAIRS)
        return -1;
    /* The frequencies in float32 as transformers computes inv_freq, the rest in double, then
     * rounded to float32: the factors of the llama.cpp-written reference file exactly. */
    const double orig = s->original_max_positions, lo = s->low_freq_factor;
    const double hi = s->high_freq_factor, lo_wl = orig / lo, hi_wl = orig / hi;
    for (int i = 0; i < n; i++) {
        float freq = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
        double wavelen = 2 * M_PI / (double)freq, r;
        if (wavelen < hi_wl) {
            r = 1;
        } else if (wavelen > lo_wl) {
            r = s->factor;
        } else {
            double smooth = (orig / wavelen - lo) / (hi - lo);
            r = 1 / ((1 - smooth) / s->factor + smooth);
        }
        c->rope_freq_factors[i] = (float)r;
    }
    c->n_rope_freq_factors = n;
    return 0;
}

/* The named shapes of real models (synthetic weights of these shapes serve for timing). */
typedef struct {
    const char *name;
    ModelConfig c;
    int llama31_rope; /* Llama 3.1's rope_freqs factors */
} Preset;

static const Preset presets[] = {
    {"tinyllama-1.1b",
     {.arch = ARCH_LLAMA, .dim = 2048, .n_layers = 22, .n_heads = 32, .n_kv_heads = 4,
      .head_dim = 64, .ffn_dim = 5632, .vocab_size = 32000, .context_length = 2048,
      .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_style = ROPE_HALF,
      .tied_embeddings = 0, .bos_id = 1, .eos_id = 2}, 0},
    {"gpt2-small",
     {.arch = ARCH_GPT2, .dim = 768, .n_layers = 12, .n_heads = 12, .n_kv_heads = 12,
      .head_dim = 64, .ffn_dim = 3072, .vocab_size = 50257, .context_length = 1024,
      .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_style = ROPE_NONE,
      .tied_embeddings = 1, .bos_id = 50256, .eos_id = 50256}, 0},
    {"stories260k",
     {.arch = ARCH_LLAMA, .dim = 64, .n_layers = 5, .n_heads = 8, .n_kv_heads = 4,
      .head_dim = 8, .ffn_dim = 172, .vocab_size = 512, .context_length = 512,
      .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_style = ROPE_INTERLEAVED,
      .tied_embeddings = 1, .bos_id = 1, .eos_id = 2}, 0},
    /* Llama 2 7B (meta-llama/Llama-2-7b-hf config.json): MHA. */
    {"llama2-7b",
     {.arch = ARCH_LLAMA, .dim = 4096, .n_layers = 32, .n_heads = 32, .n_kv_heads = 32,
      .head_dim = 128, .ffn_dim = 11008, .vocab_size = 32000, .context_length = 4096,
      .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_style = ROPE_HALF,
      .tied_embeddings = 0, .bos_id = 1, .eos_id = 2}, 0},
    /* Llama 2 13B (meta-llama/Llama-2-13b-hf config.json): MHA. */
    {"llama2-13b",
     {.arch = ARCH_LLAMA, .dim = 5120, .n_layers = 40, .n_heads = 40, .n_kv_heads = 40,
      .head_dim = 128, .ffn_dim = 13824, .vocab_size = 32000, .context_length = 4096,
      .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_style = ROPE_HALF,
      .tied_embeddings = 0, .bos_id = 1, .eos_id = 2}, 0},
    /* Llama 3 8B's shapes (GQA, 8 KV heads) with Llama 3.1's RoPE scaling; the context is
     * Llama 3's 8192 (3.1's 131072 would make -n's default KV cache 16 GiB). */
    {"llama3-8b",
     {.arch = ARCH_LLAMA, .dim = 4096, .n_layers = 32, .n_heads = 32, .n_kv_heads = 8,
      .head_dim = 128, .ffn_dim = 14336, .vocab_size = 128256, .context_length = 8192,
      .norm_eps = 1e-5f, .rope_theta = 500000.0f, .rope_style = ROPE_HALF,
      .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128001}, 1},
};

int config_preset(const char *name, ModelConfig *out)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) {
            *out = presets[i].c;
            if (presets[i].llama31_rope) {
                const RopeScalingLlama3 s = config_rope_scaling_llama31();
                CHECK(config_set_rope_scaling_llama3(out, &s) == 0, "preset %s: head_dim",
                      name);
            }
            return 0;
        }
    return -1;
}
