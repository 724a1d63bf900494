/* hf.c: Hugging Face model directories (LlamaForCausalLM and the same layout as
 * MistralForCausalLM, Qwen2ForCausalLM with q/k/v biases, Phi3ForCausalLM with fused qkv_proj
 * and gate_up_proj split by rows; GPT2LMHeadModel) to the HeadSplit model file.  config.json is mapped and checked key by key; every tensor is checked for
 * presence and shape before the output file is created; then tensors are streamed one at a
 * time.  Llama keeps HF's rotate-half q/k row order (rope_style half).  GPT-2 Conv1D weights
 * ([in][out]) are transposed to [out][in] and the fused c_attn is split into q, k, v. */
#include "convert.h"

#include "convert_internal.h"
#include "safetensors.h"
#include "util.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- config.json ---- */

typedef struct {
    const json_t *root;
    const char *file;
    char *err;
    size_t errlen;
} CfgReader;

static const json_t *cfg_get(const CfgReader *g, const char *key)
{
    const json_t *v = json_object_get(g->root, key);
    return json_is_null(v) ? NULL : v;
}

/* Integer key; absent or null gives def unless required; min is the smallest valid value. */
static int cfg_int(const CfgReader *g, const char *key, int required, int def, int min, int *out)
{
    const json_t *v = cfg_get(g, key);
    if (!v) {
        if (required)
            return util_err(g->err, g->errlen, "%s: %s: missing", g->file, key);
        *out = def;
        return 0;
    }
    double d = json_is_integer(v) ? (double)json_integer_value(v)
               : json_is_real(v) ? json_real_value(v) : NAN;
    if (!(d == floor(d)) || fabs(d) > (double)INT_MAX)
        return util_err(g->err, g->errlen, "%s: %s: expected an integer", g->file, key);
    if (d < min)
        return util_err(g->err, g->errlen, "%s: %s: %.0f must be at least %d", g->file, key, d,
                        min);
    *out = (int)d;
    return 0;
}

static int cfg_num(const CfgReader *g, const char *key, double def, double *out)
{
    const json_t *v = cfg_get(g, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return util_err(g->err, g->errlen, "%s: %s: expected a number", g->file, key);
    *out = json_number_value(v);
    return 0;
}

static int cfg_bool(const CfgReader *g, const char *key, int def, int *out)
{
    const json_t *v = cfg_get(g, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return util_err(g->err, g->errlen, "%s: %s: expected true or false", g->file, key);
    *out = json_is_true(v);
    return 0;
}

static int cfg_str(const CfgReader *g, const char *key, const char *def, const char **out)
{
    const json_t *v = cfg_get(g, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_string(v))
        return util_err(g->err, g->errlen, "%s: %s: expected a string", g->file, key);
    *out = json_string_value(v);
    return 0;
}

/* bos/eos: absent gives def, null gives -1, a list gives its first entry. */
static int cfg_token(const CfgReader *g, const char *key, int def, int *out)
{
    const json_t *v = json_object_get(g->root, key);
    if (json_is_array(v))
        v = json_array_size(v) ? json_array_get(v, 0) : json_null();
    if (!v) {
        *out = def;
        return 0;
    }
    if (json_is_null(v)) {
        *out = -1;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
        return util_err(g->err, g->errlen, "%s: %s: expected a token id or null", g->file, key);
    *out = (int)json_integer_value(v);
    return 0;
}

/* The HF families of the llama layout (what differs: q/k/v biases, fused matrices). */
typedef enum { FAM_LLAMA = 0, FAM_MISTRAL, FAM_QWEN2, FAM_PHI3 } HfFamily;

static const char *const family_class[] = {"LlamaForCausalLM", "MistralForCausalLM",
                                           "Qwen2ForCausalLM", "Phi3ForCausalLM"};

/* rope_scaling of config.json: null, or rope_type "llama3" (Llama 3.1/3.2): one factor per
 * frequency into c, as llama.cpp's convert_hf_to_gguf.py makes rope_freqs.weight (frequency
 * i divided by 1 above high_freq wavelengths, by factor below low_freq ones, smoothly in
 * between). */
static int cfg_rope_scaling(const CfgReader *g, ModelConfig *c)
{
    const json_t *rs = cfg_get(g, "rope_scaling");
    if (!rs)
        return 0;
    const char *type = NULL;
    if (json_is_object(rs)) {
        const json_t *t = json_object_get(rs, "rope_type");
        if (!json_is_string(t))
            t = json_object_get(rs, "type");
        type = json_string_value(t);
    }
    if (!type || strcmp(type, "llama3") != 0)
        return util_err(g->err, g->errlen, "%s: rope_scaling: type '%s' is unsupported (null "
                        "or rope_type llama3)", g->file, type ? type : "?");
    CfgReader sub = *g;
    sub.root = rs;
    double factor = 0, lo = 0, hi = 0, orig = 0;
    if (cfg_num(&sub, "factor", 8.0, &factor) < 0 || cfg_num(&sub, "low_freq_factor", 1.0, &lo) < 0 ||
        cfg_num(&sub, "high_freq_factor", 4.0, &hi) < 0 ||
        cfg_num(&sub, "original_max_position_embeddings", 8192, &orig) < 0)
        return -1;
    if (!(factor > 0) || !(lo > 0) || !(hi > lo) || !(orig > 0))
        return util_err(g->err, g->errlen, "%s: rope_scaling: factor %g, low_freq_factor %g, "
                        "high_freq_factor %g, original_max_position_embeddings %g out of range",
                        g->file, factor, lo, hi, orig);
    const RopeScalingLlama3 s = {factor, lo, hi, orig};
    if (config_set_rope_scaling_llama3(c, &s) < 0)
        return util_err(g->err, g->errlen, "%s: rope_scaling: heads of %d values are not "
                        "supported with it", g->file, c->head_dim);
    return 0;
}

static int cfg_llama(const CfgReader *g, ModelConfig *c, HfFamily fam)
{
    double eps = 0, theta = 0;
    const char *act = NULL;
    int attn_bias = 0, mlp_bias = 0;
    c->arch = ARCH_LLAMA;
    c->rope_style = ROPE_HALF;
    if (cfg_int(g, "hidden_size", 1, 0, 1, &c->dim) < 0 ||
        cfg_int(g, "intermediate_size", 1, 0, 1, &c->ffn_dim) < 0 ||
        cfg_int(g, "num_hidden_layers", 1, 0, 1, &c->n_layers) < 0 ||
        cfg_int(g, "num_attention_heads", 1, 0, 1, &c->n_heads) < 0 ||
        cfg_int(g, "num_key_value_heads", 0, c->n_heads, 1, &c->n_kv_heads) < 0 ||
        cfg_int(g, "vocab_size", 1, 0, 1, &c->vocab_size) < 0 ||
        cfg_int(g, "max_position_embeddings", 0, 2048, 1, &c->context_length) < 0 ||
        cfg_num(g, "rms_norm_eps", 1e-6, &eps) < 0 || cfg_num(g, "rope_theta", 1e4, &theta) < 0 ||
        cfg_str(g, "hidden_act", "silu", &act) < 0 ||
        cfg_bool(g, "tie_word_embeddings", 0, &c->tied_embeddings) < 0 ||
        cfg_bool(g, "attention_bias", 0, &attn_bias) < 0 ||
        cfg_bool(g, "mlp_bias", 0, &mlp_bias) < 0 ||
        cfg_token(g, "bos_token_id", -1, &c->bos_id) < 0 ||
        cfg_token(g, "eos_token_id", -1, &c->eos_id) < 0)
        return -1;
    if (!cfg_get(g, "head_dim") && c->dim % c->n_heads != 0)
        return util_err(g->err, g->errlen, "%s: hidden_size: %d is not divisible by "
                        "num_attention_heads = %d", g->file, c->dim, c->n_heads);
    if (cfg_int(g, "head_dim", 0, c->dim / c->n_heads, 1, &c->head_dim) < 0)
        return -1;
    if (c->n_heads % c->n_kv_heads != 0)
        return util_err(g->err, g->errlen, "%s: num_key_value_heads: %d does not divide "
                        "num_attention_heads = %d", g->file, c->n_kv_heads, c->n_heads);
    if (strcmp(act, "silu") != 0)
        return util_err(g->err, g->errlen, "%s: hidden_act: '%s' is unsupported (llama needs "
                        "silu)", g->file, act);
    c->norm_eps = (float)eps;
    c->rope_theta = (float)theta;
    if (fam == FAM_PHI3) { /* LongRoPE (Phi-3 128k) is another scheme */
        const json_t *rs = cfg_get(g, "rope_scaling");
        if (rs)
            return util_err(g->err, g->errlen, "%s: rope_scaling: Phi-3's LongRoPE ('%s') is "
                            "unsupported (the 4k models have null)", g->file,
                            json_string_value(json_object_get(rs, "type")) ?
                            json_string_value(json_object_get(rs, "type")) : "?");
        double prf = 1;
        if (cfg_num(g, "partial_rotary_factor", 1.0, &prf) < 0)
            return -1;
        if (prf != 1)
            return util_err(g->err, g->errlen, "%s: partial_rotary_factor: %g is unsupported "
                            "(RoPE on whole heads only)", g->file, prf);
    } else if (cfg_rope_scaling(g, c) < 0) {
        return -1;
    }
    if (fam == FAM_QWEN2) {
        int use_sw = 0;
        if (cfg_bool(g, "use_sliding_window", 0, &use_sw) < 0)
            return -1;
        if (use_sw)
            return util_err(g->err, g->errlen, "%s: use_sliding_window: Qwen2's per-layer "
                            "sliding window is unsupported (must be false)", g->file);
        c->qkv_bias = 1; /* Qwen2 always has them; attention_bias is not written */
    } else if (fam == FAM_MISTRAL || fam == FAM_PHI3) {
        if (cfg_int(g, "sliding_window", 0, 0, 0, &c->sliding_window) < 0)
            return -1;
        c->q_prescale = fam == FAM_PHI3; /* as llama.cpp's phi3 graph, like the GGUF import */
    }
    if (mlp_bias)
        return util_err(g->err, g->errlen, "%s: mlp_bias: unsupported (llama-family FFNs "
                        "without biases only)", g->file);
    if (attn_bias) /* Llama's attention_bias puts one on o_proj too */
        return util_err(g->err, g->errlen, "%s: attention_bias: unsupported (q/k/v biases "
                        "as Qwen2's are; an o_proj bias is not)", g->file);
    return 0;
}

static int cfg_gpt2(const CfgReader *g, ModelConfig *c)
{
    double eps = 0;
    const char *act = NULL;
    int scale_w = 1, scale_inv = 0;
    c->arch = ARCH_GPT2;
    c->rope_style = ROPE_NONE;
    c->rope_theta = 10000.0f; /* unused */
    if (cfg_int(g, "n_embd", 1, 0, 1, &c->dim) < 0 ||
        cfg_int(g, "n_layer", 1, 0, 1, &c->n_layers) < 0 ||
        cfg_int(g, "n_head", 1, 0, 1, &c->n_heads) < 0 ||
        cfg_int(g, "vocab_size", 1, 0, 1, &c->vocab_size) < 0 ||
        cfg_int(g, "n_positions", 0, 1024, 1, &c->context_length) < 0 ||
        cfg_num(g, "layer_norm_epsilon", 1e-5, &eps) < 0 ||
        cfg_str(g, "activation_function", "gelu_new", &act) < 0 ||
        cfg_bool(g, "tie_word_embeddings", 1, &c->tied_embeddings) < 0 ||
        cfg_bool(g, "scale_attn_weights", 1, &scale_w) < 0 ||
        cfg_bool(g, "scale_attn_by_inverse_layer_idx", 0, &scale_inv) < 0 ||
        cfg_token(g, "bos_token_id", 50256, &c->bos_id) < 0 ||
        cfg_token(g, "eos_token_id", 50256, &c->eos_id) < 0)
        return -1;
    if (cfg_int(g, "n_inner", 0, 4 * c->dim, 1, &c->ffn_dim) < 0)
        return -1;
    if (c->dim % c->n_heads != 0)
        return util_err(g->err, g->errlen, "%s: n_embd: %d is not divisible by n_head = %d",
                        g->file, c->dim, c->n_heads);
    if (strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0)
        return util_err(g->err, g->errlen, "%s: activation_function: '%s' is unsupported "
                        "(gelu_new or gelu_pytorch_tanh)", g->file, act);
    if (!scale_w || scale_inv)
        return util_err(g->err, g->errlen, "%s: %s: unsupported attention scaling", g->file,
                        scale_w ? "scale_attn_by_inverse_layer_idx" : "scale_attn_weights");
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    c->norm_eps = (float)eps;
    return 0;
}

int convert_read_hf_config(const char *dir, ModelConfig *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    size_t n = strlen(dir) + 16;
    char *file = xmalloc(n);
    snprintf(file, n, "%s/config.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    if (!root) {
        if (jerr.line <= 0)
            util_err(err, errlen, "%s: file: missing or unreadable (not a Hugging Face model "
                     "directory?)", file);
        else
            util_err(err, errlen, "%s: line %d: invalid JSON: %s", file, jerr.line, jerr.text);
        goto done;
    }
    CfgReader g = {root, file, err, errlen};
    const json_t *archs = json_object_get(root, "architectures");
    const char *arch = json_is_array(archs) && json_is_string(json_array_get(archs, 0))
                       ? json_string_value(json_array_get(archs, 0)) : NULL;
    const char *mtype = json_string_value(json_object_get(root, "model_type"));
    static const char *const family_type[] = {"llama", "mistral", "qwen2", "phi3"};
    int fam = -1;
    for (int i = 0; i < 4; i++)
        if (arch ? strcmp(arch, family_class[i]) == 0 : mtype && strcmp(mtype, family_type[i]) == 0)
            fam = i;
    if (fam >= 0)
        rc = cfg_llama(&g, c, (HfFamily)fam);
    else if (arch ? strcmp(arch, "GPT2LMHeadModel") == 0 : mtype && strcmp(mtype, "gpt2") == 0)
        rc = cfg_gpt2(&g, c);
    else
        util_err(err, errlen, "%s: architectures: unsupported model '%s' (LlamaForCausalLM, "
                 "MistralForCausalLM, Qwen2ForCausalLM, Phi3ForCausalLM and GPT2LMHeadModel "
                 "are supported)", file, arch ? arch : mtype ? mtype : "?");
    char verr[256];
    if (rc == 0 && config_validate(c, verr, sizeof verr) < 0)
        rc = util_err(err, errlen, "%s: %s", file, verr);
done:
    json_decref(root);
    free(file);
    return rc;
}

/* ---- tensors ---- */

typedef struct {
    const SafeTensors *st;
    const char *dir;
    ModelWriter *w;
    int check_only;          /* pass 1: presence and shapes; pass 2: write */
    const char *prefix;      /* gpt2: "transformer." or "" */
    const StTensor *held_t;  /* the one source tensor held in memory */
    float *held;
    char *err;
    size_t errlen;
} HfRun;

/* Finds src (prefixed) and checks its shape [d0] or [d0][d1]. */
static const StTensor *hf_need(HfRun *r, const char *src, int rank, uint64_t d0, uint64_t d1)
{
    char name[256];
    snprintf(name, sizeof name, "%s%s", r->prefix, src);
    const StTensor *t = safetensors_find(r->st, name);
    if (!t) {
        util_err(r->err, r->errlen, "%s: tensor %s: missing from the checkpoint", r->dir, name);
        return NULL;
    }
    if (t->rank != rank || t->shape[0] != d0 || (rank == 2 && t->shape[1] != d1)) {
        char have[96] = "", want[64];
        for (int i = 0; i < t->rank && i < 4; i++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%llu", i ? ", " : "",
                     (unsigned long long)t->shape[i]);
        if (rank == 2)
            snprintf(want, sizeof want, "%llu, %llu", (unsigned long long)d0,
                     (unsigned long long)d1);
        else
            snprintf(want, sizeof want, "%llu", (unsigned long long)d0);
        util_err(r->err, r->errlen, "%s: tensor %s: shape [%s], config.json implies [%s]",
                 safetensors_file_of(r->st, t), name, have, want);
        return NULL;
    }
    return t;
}

typedef struct {
    const SafeTensors *st;
    const StTensor *t;
} StSource;

static int fill_direct(void *ctx, uint64_t elem0, uint64_t n, float *out, char *err,
                       size_t errlen)
{
    const StSource *s = ctx;
    return safetensors_read(s->st, s->t, elem0, n, out, err, errlen);
}

/* Elements from elem0 + off of a source tensor: a row range of a fused matrix. */
typedef struct {
    const SafeTensors *st;
    const StTensor *t;
    uint64_t off;
} StRows;

static int fill_rows(void *ctx, uint64_t elem0, uint64_t n, float *out, char *err,
                     size_t errlen)
{
    const StRows *s = ctx;
    return safetensors_read(s->st, s->t, s->off + elem0, n, out, err, errlen);
}

/* Output [n_out][n_in] from a held Conv1D matrix [n_in][cols]: out[o][i] = src[i][col0 + o]. */
typedef struct {
    const float *src;
    uint64_t cols, col0, n_in;
} Transpose;

static int fill_transpose(void *ctx, uint64_t elem0, uint64_t n, float *out, char *err,
                          size_t errlen)
{
    (void)err;
    (void)errlen;
    const Transpose *t = ctx;
    uint64_t o = elem0 / t->n_in, i = elem0 % t->n_in;
    for (uint64_t e = 0; e < n; e++) {
        out[e] = t->src[i * t->cols + t->col0 + o];
        if (++i == t->n_in) {
            i = 0;
            o++;
        }
    }
    return 0;
}

/* Loads t into r->held (replacing what was held). */
static int hf_hold(HfRun *r, const StTensor *t)
{
    if (r->held_t == t)
        return 0;
    free(r->held);
    r->held = xmalloc((size_t)t->n_elems * sizeof(float));
    r->held_t = t;
    if (safetensors_read(r->st, t, 0, t->n_elems, r->held, r->err, r->errlen) < 0) {
        r->held_t = NULL;
        return -1;
    }
    return 0;
}

/* dst (rank, dims) streamed from src, whose shape must be [s0] or [s0][s1]. */
static int hf_copy(HfRun *r, const char *src, int s_rank, uint64_t s0, uint64_t s1,
                   const char *dst, int rank, const uint64_t *dims)
{
    const StTensor *t = hf_need(r, src, s_rank, s0, s1);
    if (!t)
        return -1;
    if (r->check_only)
        return 0;
    StSource s = {r->st, t};
    return writer_stream_tensor(r->w, dst, rank, dims, fill_direct, &s, r->err, r->errlen);
}

/* dst (rank, dims) = rows row0.. of the matrix src [rows][cols] (a fused tensor's part). */
static int hf_rows(HfRun *r, const char *src, uint64_t rows, uint64_t cols, uint64_t row0,
                   const char *dst, int rank, const uint64_t *dims)
{
    const StTensor *t = hf_need(r, src, 2, rows, cols);
    if (!t)
        return -1;
    if (r->check_only)
        return 0;
    StRows s = {r->st, t, row0 * cols};
    return writer_stream_tensor(r->w, dst, rank, dims, fill_rows, &s, r->err, r->errlen);
}

/* dst [n_out][n_in] (reshaped to rank/dims) = columns col0.. of Conv1D src [n_in][cols]. */
static int hf_conv1d(HfRun *r, const char *src, uint64_t n_in, uint64_t cols, uint64_t col0,
                     const char *dst, int rank, const uint64_t *dims)
{
    const StTensor *t = hf_need(r, src, 2, n_in, cols);
    if (!t)
        return -1;
    if (r->check_only)
        return 0;
    if (hf_hold(r, t) < 0)
        return -1;
    Transpose tr = {r->held, cols, col0, n_in};
    return writer_stream_tensor(r->w, dst, rank, dims, fill_transpose, &tr, r->err, r->errlen);
}

/* dst (rank, dims) = elements off.. of the vector src [len]. */
static int hf_slice(HfRun *r, const char *src, uint64_t len, uint64_t off, const char *dst,
                    int rank, const uint64_t *dims)
{
    const StTensor *t = hf_need(r, src, 1, len, 0);
    if (!t)
        return -1;
    if (r->check_only)
        return 0;
    if (hf_hold(r, t) < 0)
        return -1;
    return writer_put_tensor(r->w, dst, rank, dims, r->held + off, r->err, r->errlen);
}

#define DST(name) writer_layer_path(p, sizeof p, l, name)

static int hf_llama(HfRun *r, const ModelConfig *c)
{
    uint64_t dim = (uint64_t)c->dim, hd = (uint64_t)c->head_dim, G = (uint64_t)c->n_kv_heads;
    uint64_t Q = (uint64_t)config_q_per_kv(c), ffn = (uint64_t)c->ffn_dim;
    uint64_t qd = hd * (uint64_t)c->n_heads, V = (uint64_t)c->vocab_size;
    uint64_t d_vec[1] = {dim}, d_wq[3] = {G, Q * hd, dim}, d_wkv[3] = {G, hd, dim};
    uint64_t d_wo[2] = {dim, qd}, d_up[2] = {ffn, dim}, d_down[2] = {dim, ffn};
    uint64_t d_emb[2] = {V, dim};
    uint64_t d_bq[2] = {G, Q * hd}, d_bkv[2] = {G, hd}, kvd = G * hd;
    char s[128], p[64];
    /* Phi-3 fuses q/k/v (rows q, then k, then v) and gate/up (gate rows, then up rows) */
    const int fused = safetensors_find(r->st, "model.layers.0.self_attn.qkv_proj.weight") != NULL;
    for (int l = 0; l < c->n_layers; l++) {
#define SRC(name) (snprintf(s, sizeof s, "model.layers.%d.%s", l, name), s)
        if (hf_copy(r, SRC("input_layernorm.weight"), 1, dim, 0, DST("attn_norm"), 1,
                    d_vec) < 0)
            return -1;
        if (fused) {
            uint64_t qkv = qd + 2 * kvd;
            if (hf_rows(r, SRC("self_attn.qkv_proj.weight"), qkv, dim, 0, DST("wq"), 3, d_wq) < 0 ||
                hf_rows(r, SRC("self_attn.qkv_proj.weight"), qkv, dim, qd, DST("wk"), 3,
                        d_wkv) < 0 ||
                hf_rows(r, SRC("self_attn.qkv_proj.weight"), qkv, dim, qd + kvd, DST("wv"), 3,
                        d_wkv) < 0 ||
                hf_rows(r, SRC("mlp.gate_up_proj.weight"), 2 * ffn, dim, 0, DST("w_gate"), 2,
                        d_up) < 0 ||
                hf_rows(r, SRC("mlp.gate_up_proj.weight"), 2 * ffn, dim, ffn, DST("w_up"), 2,
                        d_up) < 0)
                return -1;
        } else if (hf_copy(r, SRC("self_attn.q_proj.weight"), 2, qd, dim, DST("wq"), 3,
                           d_wq) < 0 ||
                   hf_copy(r, SRC("self_attn.k_proj.weight"), 2, kvd, dim, DST("wk"), 3,
                           d_wkv) < 0 ||
                   hf_copy(r, SRC("self_attn.v_proj.weight"), 2, kvd, dim, DST("wv"), 3,
                           d_wkv) < 0 ||
                   hf_copy(r, SRC("mlp.gate_proj.weight"), 2, ffn, dim, DST("w_gate"), 2,
                           d_up) < 0 ||
                   hf_copy(r, SRC("mlp.up_proj.weight"), 2, ffn, dim, DST("w_up"), 2, d_up) < 0) {
            return -1;
        }
        if (c->qkv_bias &&
            (hf_copy(r, SRC("self_attn.q_proj.bias"), 1, qd, 0, DST("bq"), 2, d_bq) < 0 ||
             hf_copy(r, SRC("self_attn.k_proj.bias"), 1, kvd, 0, DST("bk"), 2, d_bkv) < 0 ||
             hf_copy(r, SRC("self_attn.v_proj.bias"), 1, kvd, 0, DST("bv"), 2, d_bkv) < 0))
            return -1;
        if (hf_copy(r, SRC("self_attn.o_proj.weight"), 2, dim, qd, DST("wo"), 2, d_wo) < 0 ||
            hf_copy(r, SRC("post_attention_layernorm.weight"), 1, dim, 0, DST("ffn_norm"), 1,
                    d_vec) < 0 ||
            hf_copy(r, SRC("mlp.down_proj.weight"), 2, dim, ffn, DST("w_down"), 2, d_down) < 0)
            return -1;
#undef SRC
    }
    if (hf_copy(r, "model.embed_tokens.weight", 2, V, dim, "/embed", 2, d_emb) < 0 ||
        hf_copy(r, "model.norm.weight", 1, dim, 0, "/final_norm", 1, d_vec) < 0)
        return -1;
    if (!c->tied_embeddings &&
        hf_copy(r, "lm_head.weight", 2, V, dim, "/lm_head", 2, d_emb) < 0)
        return -1;
    return 0;
}

static int hf_gpt2(HfRun *r, const ModelConfig *c)
{
    uint64_t dim = (uint64_t)c->dim, hd = (uint64_t)c->head_dim, H = (uint64_t)c->n_heads;
    uint64_t ffn = (uint64_t)c->ffn_dim, V = (uint64_t)c->vocab_size;
    uint64_t d_vec[1] = {dim}, d_wqkv[3] = {H, hd, dim}, d_bqkv[2] = {H, hd};
    uint64_t d_wo[2] = {dim, dim}, d_up[2] = {ffn, dim}, d_down[2] = {dim, ffn};
    uint64_t d_bup[1] = {ffn}, d_emb[2] = {V, dim};
    uint64_t d_pos[2] = {(uint64_t)c->context_length, dim};
    char s[128], p[64];
    r->prefix = safetensors_find(r->st, "transformer.wte.weight") ? "transformer."
                : safetensors_find(r->st, "wte.weight") ? "" : "transformer.";
    for (int l = 0; l < c->n_layers; l++) {
#define SRC(name) (snprintf(s, sizeof s, "h.%d.%s", l, name), s)
        if (hf_copy(r, SRC("ln_1.weight"), 1, dim, 0, DST("attn_norm"), 1, d_vec) < 0 ||
            hf_copy(r, SRC("ln_1.bias"), 1, dim, 0, DST("attn_norm_bias"), 1, d_vec) < 0 ||
            hf_conv1d(r, SRC("attn.c_attn.weight"), dim, 3 * dim, 0, DST("wq"), 3, d_wqkv) < 0 ||
            hf_conv1d(r, SRC("attn.c_attn.weight"), dim, 3 * dim, dim, DST("wk"), 3,
                      d_wqkv) < 0 ||
            hf_conv1d(r, SRC("attn.c_attn.weight"), dim, 3 * dim, 2 * dim, DST("wv"), 3,
                      d_wqkv) < 0 ||
            hf_slice(r, SRC("attn.c_attn.bias"), 3 * dim, 0, DST("bq"), 2, d_bqkv) < 0 ||
            hf_slice(r, SRC("attn.c_attn.bias"), 3 * dim, dim, DST("bk"), 2, d_bqkv) < 0 ||
            hf_slice(r, SRC("attn.c_attn.bias"), 3 * dim, 2 * dim, DST("bv"), 2, d_bqkv) < 0 ||
            hf_conv1d(r, SRC("attn.c_proj.weight"), dim, dim, 0, DST("wo"), 2, d_wo) < 0 ||
            hf_copy(r, SRC("attn.c_proj.bias"), 1, dim, 0, DST("bo"), 1, d_vec) < 0 ||
            hf_copy(r, SRC("ln_2.weight"), 1, dim, 0, DST("ffn_norm"), 1, d_vec) < 0 ||
            hf_copy(r, SRC("ln_2.bias"), 1, dim, 0, DST("ffn_norm_bias"), 1, d_vec) < 0 ||
            hf_conv1d(r, SRC("mlp.c_fc.weight"), dim, ffn, 0, DST("w_up"), 2, d_up) < 0 ||
            hf_copy(r, SRC("mlp.c_fc.bias"), 1, ffn, 0, DST("b_up"), 1, d_bup) < 0 ||
            hf_conv1d(r, SRC("mlp.c_proj.weight"), ffn, dim, 0, DST("w_down"), 2, d_down) < 0 ||
            hf_copy(r, SRC("mlp.c_proj.bias"), 1, dim, 0, DST("b_down"), 1, d_vec) < 0)
            return -1;
#undef SRC
    }
    if (hf_copy(r, "wte.weight", 2, V, dim, "/embed", 2, d_emb) < 0 ||
        hf_copy(r, "wpe.weight", 2, d_pos[0], dim, "/pos_embed", 2, d_pos) < 0 ||
        hf_copy(r, "ln_f.weight", 1, dim, 0, "/final_norm", 1, d_vec) < 0 ||
        hf_copy(r, "ln_f.bias", 1, dim, 0, "/final_norm_bias", 1, d_vec) < 0)
        return -1;
    if (!c->tied_embeddings) {
        r->prefix = ""; /* GPT2LMHeadModel keeps lm_head outside transformer. */
        if (hf_copy(r, "lm_head.weight", 2, V, dim, "/lm_head", 2, d_emb) < 0)
            return -1;
    }
    return 0;
}

#undef DST

/* tokenizer_config.json's chat_template in dir: a string, or a list of {name, template} of
 * which "default" (else the first) is taken; NULL when absent (malloc'ed). */
static char *hf_chat_template(const char *dir)
{
    size_t n = strlen(dir) + 32;
    char *path = xmalloc(n);
    snprintf(path, n, "%s/tokenizer_config.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    free(path);
    const json_t *t = root ? json_object_get(root, "chat_template") : NULL;
    if (json_is_array(t)) {
        const json_t *pick = NULL;
        for (size_t i = 0; i < json_array_size(t); i++) {
            const json_t *e = json_array_get(t, i);
            if (!pick || json_equal(json_object_get(e, "name"), json_string("default")))
                pick = e;
        }
        t = pick ? json_object_get(pick, "template") : NULL;
    }
    char *s = json_is_string(t) ? xstrdup(json_string_value(t)) : NULL;
    json_decref(root);
    return s;
}

int convert_from_hf(const char *dir, const char *out, const char *quantize, ConvertStats *stats,
                    char *err, size_t errlen)
{
    return convert_from_hf_tok(dir, NULL, out, quantize, stats, err, errlen);
}

int convert_from_hf_tok(const char *dir, const char *tokenizer, const char *out,
                        const char *quantize, ConvertStats *stats, char *err, size_t errlen)
{
    ModelConfig c;
    SafeTensors *st = NULL;
    Tokenizer *tok = NULL;
    ModelWriter w;
    memset(&w, 0, sizeof w);
    w.file = -1;
    HfRun r = {0};
    if (convert_read_hf_config(dir, &c, err, errlen) < 0 ||
        safetensors_open_dir(&st, dir, err, errlen) < 0)
        goto fail;
    r = (HfRun){st, dir, &w, 1, "", NULL, NULL, err, errlen};
    if ((c.arch == ARCH_LLAMA ? hf_llama(&r, &c) : hf_gpt2(&r, &c)) < 0)
        goto fail;
    if (convert_load_tokenizer(&tok, tokenizer ? tokenizer : dir, c.vocab_size, err, errlen) < 0)
        goto fail;
    size_t slen = strlen(dir) + 96;
    char *source = xmalloc(slen);
    snprintf(source, slen, "headsplit-convert --format hf --dir %s (%s)", dir,
             c.arch == ARCH_LLAMA ? "llama family" : "GPT2LMHeadModel");
    int rc = writer_open_file(&w, out, &c, source, quantize, err, errlen);
    free(source);
    if (rc < 0)
        goto fail;
    r.check_only = 0;
    r.prefix = "";
    if ((c.arch == ARCH_LLAMA ? hf_llama(&r, &c) : hf_gpt2(&r, &c)) < 0 ||
        writer_put_tokenizer(&w, tok, err, errlen) < 0)
        goto fail;
    {
        char *ct = hf_chat_template(dir);
        int crc = ct ? writer_put_chat_template(&w, ct, strlen(ct), err, errlen) : 0;
        free(ct);
        if (crc < 0)
            goto fail;
    }
    free(r.held);
    r.held = NULL;
    if (writer_finish_file(&w, &c, stats, err, errlen) < 0)
        goto fail;
    tokenizer_free(tok);
    safetensors_close(st);
    return 0;
fail:
    writer_abort_file(&w);
    free(r.held);
    if (tok)
        tokenizer_free(tok);
    safetensors_close(st);
    return -1;
}
