/* gguf.c: a llama.cpp GGUF file to the HeadSplit model file (convert_from_gguf).
 * Architectures llama (GQA, tied or untied output; Llama 3.1's rope_freqs factors), qwen2
 * (q/k/v biases, rotate-halves RoPE), phi3 (fused attn_qkv and ffn_up split by rows; sliding
 * window) and gpt2; configuration and tokenizer from the metadata.  GGUF lists a matrix's dimensions innermost first (ne[0] = row length), so its
 * rows are already our [out][in] rows: every matrix is copied row for row.  Query heads are
 * consecutive rows, so wq's [G][Q*hd][dim] grouping is the same bytes with another shape.
 * F32 matrices become float32 datasets; F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K
 * and Q6_K matrices become uint8 datasets holding the file's blocks byte for byte (format
 * version 2, docs/model-format.md).  llama.cpp's llama files hold q and k in Meta's order
 * (its convert scripts undo Hugging Face's rotate-half permutation; llama2.c checkpoints
 * need none) for its adjacent-pair RoPE (LLAMA_ROPE_TYPE_NORM): rope_style interleaved;
 * qwen2 and phi3 keep Hugging Face's rows (LLAMA_ROPE_TYPE_NEOX): rope_style half. */
#include "convert.h"

#include "convert_internal.h"
#include "gguf.h"
#include "h5io.h"
#include "quant.h"
#include "tokenizer_gguf.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The block types stored as they are (all that a Q4_K_M, Q8_0 or Q4_0 file may contain). */
static int type_supported(int t)
{
    return t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_BF16 || t == QTYPE_Q8_0 ||
           t == QTYPE_Q4_0 || t == QTYPE_Q4_1 || t == QTYPE_Q5_0 || t == QTYPE_Q5_1 ||
           t == QTYPE_Q4_K || t == QTYPE_Q5_K || t == QTYPE_Q6_K;
}

/* llama.cpp's names of general.file_type (llama_ftype), for /config quantization. */
static const char *ftype_name(int64_t ft)
{
    switch (ft) {
    case 0: return "f32";
    case 1: return "f16";
    case 2: return "q4_0";
    case 3: return "q4_1";
    case 7: return "q8_0";
    case 8: return "q5_0";
    case 9: return "q5_1";
    case 14: return "q4_K_S";
    case 15: return "q4_K_M";
    case 16: return "q5_K_S";
    case 17: return "q5_K_M";
    case 18: return "q6_K";
    case 32: return "bf16";
    default: return NULL;
    }
}

typedef struct {
    const GgufFile *g;
    ModelWriter *w;
    const char *arch; /* metadata key prefix: "llama", "qwen2", "phi3" or "gpt2" */
    char *err;
    size_t errlen;
} Conv;

/* An integer key arch.NAME (required unless def >= 0); checked to lie in [lo, hi]. */
static int meta_int(Conv *cv, const char *name, int64_t def, int64_t lo, int64_t hi, int *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", cv->arch, name);
    int64_t v = def;
    int rc = gguf_get_int(cv->g, key, &v, cv->err, cv->errlen);
    if (rc < 0)
        return -1;
    if (rc == 0 && def < 0)
        return util_err(cv->err, cv->errlen, "%s: key %s: missing", cv->g->path, key);
    if (v < lo || v > hi)
        return util_err(cv->err, cv->errlen, "%s: key %s: %lld outside [%lld, %lld]",
                        cv->g->path, key, (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return 0;
}

static int meta_float(Conv *cv, const char *name, double def, double *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", cv->arch, name);
    *out = def;
    int rc = gguf_get_float(cv->g, key, out, cv->err, cv->errlen);
    if (rc < 0)
        return -1;
    if (rc == 0 && isnan(def))
        return util_err(cv->err, cv->errlen, "%s: key %s: missing", cv->g->path, key);
    if (!(*out > 0) || !isfinite(*out))
        return util_err(cv->err, cv->errlen, "%s: key %s: %g must be positive", cv->g->path,
                        key, *out);
    return 0;
}

/* rope_freqs.weight (Llama 3.1 scaling): head_dim / 2 float32 factors into c. */
static int read_rope_freqs(Conv *cv, ModelConfig *c)
{
    const GgufTensor *t = gguf_find_tensor(cv->g, "rope_freqs.weight");
    if (!t)
        return 0;
    const int n = c->head_dim / 2;
    if (t->type != QTYPE_F32 || t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 ||
        t->ne[3] != 1 || n > CONFIG_MAX_ROPE_PAIRS || t->bytes < (uint64_t)n * sizeof(float))
        return util_err(cv->err, cv->errlen, "%s: tensor rope_freqs.weight: expected %d f32 "
                        "factors (one per frequency of a head of %d)", cv->g->path, n,
                        c->head_dim);
    memcpy(c->rope_freq_factors, t->data, (size_t)n * sizeof(float));
    for (int i = 0; i < n; i++)
        if (!(c->rope_freq_factors[i] > 0) || !isfinite(c->rope_freq_factors[i]))
            return util_err(cv->err, cv->errlen, "%s: tensor rope_freqs.weight: factor %d is "
                            "%g (must be positive)", cv->g->path, i,
                            (double)c->rope_freq_factors[i]);
    c->n_rope_freq_factors = n;
    return 0;
}

/* The configuration of a llama, qwen2, phi3 or gpt2 file; vocab_size from token_embd. */
static int read_config(Conv *cv, ModelConfig *c)
{
    memset(c, 0, sizeof *c);
    const int64_t big = (int64_t)1 << 30;
    int is_llama = strcmp(cv->arch, "gpt2") != 0; /* the llama family */
    c->arch = is_llama ? ARCH_LLAMA : ARCH_GPT2;
    double eps, theta = 0;
    if (meta_int(cv, "block_count", -1, 1, 65536, &c->n_layers) < 0 ||
        meta_int(cv, "embedding_length", -1, 1, big, &c->dim) < 0 ||
        meta_int(cv, "attention.head_count", -1, 1, big, &c->n_heads) < 0 ||
        meta_int(cv, "attention.head_count_kv", c->n_heads, 1, big, &c->n_kv_heads) < 0 ||
        meta_int(cv, "feed_forward_length", -1, 1, big, &c->ffn_dim) < 0 ||
        meta_int(cv, "context_length", -1, 1, big, &c->context_length) < 0 ||
        meta_float(cv, is_llama ? "attention.layer_norm_rms_epsilon" :
                   "attention.layer_norm_epsilon", NAN, &eps) < 0)
        return -1;
    if (c->dim % c->n_heads != 0)
        return util_err(cv->err, cv->errlen, "%s: key %s.embedding_length: %d is not divisible "
                        "by the %d heads", cv->g->path, cv->arch, c->dim, c->n_heads);
    c->head_dim = c->dim / c->n_heads;
    int kl = c->head_dim, vl = c->head_dim, rd = c->head_dim;
    if (meta_int(cv, "attention.key_length", c->head_dim, 1, big, &kl) < 0 ||
        meta_int(cv, "attention.value_length", c->head_dim, 1, big, &vl) < 0)
        return -1;
    if (kl != c->head_dim || vl != c->head_dim)
        return util_err(cv->err, cv->errlen, "%s: key %s.attention.key_length: heads of %d/%d "
                        "values differ from embedding_length / head_count = %d (not supported)",
                        cv->g->path, cv->arch, kl, vl, c->head_dim);
    c->norm_eps = (float)eps;
    c->bos_id = c->eos_id = -1;
    if (!is_llama) {
        c->rope_style = ROPE_NONE;
        c->gelu_fp16 = 1; /* llama.cpp's GELU (GGML_GELU_FP16), as its CPU backend runs it */
        return 0;
    }
    if (meta_int(cv, "rope.dimension_count", c->head_dim, 1, big, &rd) < 0 ||
        meta_float(cv, "rope.freq_base", 10000.0, &theta) < 0)
        return -1;
    if (rd != c->head_dim)
        return util_err(cv->err, cv->errlen, "%s: key %s.rope.dimension_count: RoPE on %d of "
                        "the %d values of a head is not supported", cv->g->path, cv->arch, rd,
                        c->head_dim);
    const char *st;
    size_t sl;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", cv->arch);
    int rc = gguf_get_string(cv->g, key, &st, &sl, cv->err, cv->errlen);
    if (rc < 0)
        return -1;
    if (rc == 1 && !(sl == 4 && memcmp(st, "none", 4) == 0))
        return util_err(cv->err, cv->errlen, "%s: key %s: RoPE scaling \"%.*s\" is not "
                        "supported", cv->g->path, key, (int)(sl > 32 ? 32 : sl), st);
    if (gguf_find_tensor(cv->g, "rope_factors_long.weight") ||
        gguf_find_tensor(cv->g, "rope_factors_short.weight"))
        return util_err(cv->err, cv->errlen, "%s: tensor rope_factors_long.weight: Phi-3's "
                        "LongRoPE factors are not supported", cv->g->path);
    if (meta_int(cv, "attention.sliding_window", 0, 0, big, &c->sliding_window) < 0 ||
        read_rope_freqs(cv, c) < 0)
        return -1;
    c->rope_theta = (float)theta;
    /* llama.cpp permutes llama's q/k rows for its adjacent-pair RoPE; qwen2 and phi3 keep
     * Hugging Face's rows and rotate halves (LLAMA_ROPE_TYPE_NEOX). */
    c->rope_style = strcmp(cv->arch, "llama") == 0 ? ROPE_INTERLEAVED : ROPE_HALF;
    c->qkv_bias = gguf_find_tensor(cv->g, "blk.0.attn_q.bias") != NULL;
    /* llama.cpp's phi3 graph scales q by 1/sqrt(head_dim) before K.q (kq_scale 1). */
    c->q_prescale = strcmp(cv->arch, "phi3") == 0;
    return 0;
}

/* The tensor of that name with ne = {ne0, ne1} (ne1 = 1 for a vector); NULL with err. */
static const GgufTensor *need_tensor(Conv *cv, const char *name, int64_t ne0, int64_t ne1)
{
    const GgufTensor *t = gguf_find_tensor(cv->g, name);
    char tb[32];
    if (!t) {
        util_err(cv->err, cv->errlen, "%s: tensor %s: missing", cv->g->path, name);
        return NULL;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
        util_err(cv->err, cv->errlen, "%s: tensor %s: shape [%lld, %lld, %lld, %lld] (innermost "
                 "first), expected [%lld, %lld] from the metadata", cv->g->path, name,
                 (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                 (long long)t->ne[3], (long long)ne0, (long long)ne1);
        return NULL;
    }
    if (!type_supported(t->type)) {
        util_err(cv->err, cv->errlen, "%s: tensor %s: type %s is not supported (f32, f16, bf16, "
                 "q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K and q6_K are)", cv->g->path, name,
                 gguf_type_name(t->type, tb, sizeof tb));
        return NULL;
    }
    return t;
}

/* Fill callback of writer_stream_tensor: float32 values straight from the mapped file. */
static int fill_from_map(void *ctx, uint64_t elem0, uint64_t n, float *out, char *err,
                         size_t errlen)
{
    (void)err;
    (void)errlen;
    memcpy(out, (const uint8_t *)ctx + elem0 * sizeof(float), (size_t)n * sizeof(float));
    return 0;
}

/* Writes bytes [off, ...) of a tensor's data as dataset path of logical shape dims: through
 * the writer as float32 for F32, else as its blocks (h5io_create_qtensor: uint8 rows with the
 * attributes qtype and cols), byte for byte. */
static int put(Conv *cv, const char *path, const GgufTensor *t, uint64_t off, int rank,
               const uint64_t *dims)
{
    ModelWriter *w = cv->w;
    uint64_t cols = dims[rank - 1], rows = 1;
    for (int i = 0; i < rank - 1; i++)
        rows *= dims[i];
    uint64_t row_bytes = gguf_row_bytes(t->type, (int64_t)cols);
    if (off + rows * row_bytes > t->bytes)
        return util_err(cv->err, cv->errlen, "%s: tensor %s: %llu rows of %llu bytes do not fit "
                        "its %llu bytes", cv->g->path, t->name, (unsigned long long)rows,
                        (unsigned long long)row_bytes, (unsigned long long)t->bytes);
    /* GGUF is little-endian, and so are the datasets: the bytes go across unchanged */
    void *src = (void *)(uintptr_t)(t->data + off);
    /* a tensor's pages leave the resident set once written: converting a 7B-class file
     * holds one tensor's worth of the map, not the file */
    if (t->type == QTYPE_F32) {
        int rc = writer_stream_tensor(w, path, rank, dims, fill_from_map, src, cv->err,
                                      cv->errlen);
        gguf_release(cv->g, src, rows * row_bytes);
        return rc;
    }
    char herr[256];
    hid_t d = h5io_create_qtensor(w->file, path, rank, dims, (QType)t->type, herr, sizeof herr);
    if (d < 0)
        return util_err(cv->err, cv->errlen, "%s: %s", w->out_path, herr);
    int rc = h5io_write_qrows(d, 0, rows, src, herr, sizeof herr);
    H5Dclose(d);
    gguf_release(cv->g, src, rows * row_bytes);
    if (rc < 0)
        return util_err(cv->err, cv->errlen, "%s: %s", w->out_path, herr);
    w->bytes += rows * row_bytes;
    w->n_tensors++;
    return 0;
}

/* A whole 2-D tensor (ne0 = in, ne1 = out) as [out][in], or a vector (must be F32). */
static int put_whole(Conv *cv, const char *path, const char *name, int64_t out, int64_t in)
{
    const GgufTensor *t = need_tensor(cv, name, in, out);
    if (!t)
        return -1;
    if (out == 1 && t->type != QTYPE_F32)
        return util_err(cv->err, cv->errlen, "%s: tensor %s: a norm or bias vector must be f32 "
                        "(llama.cpp keeps them so)", cv->g->path, name);
    uint64_t d2[2] = {(uint64_t)out, (uint64_t)in}, d1[1] = {(uint64_t)in};
    return out == 1 ? put(cv, path, t, 0, 1, d1) : put(cv, path, t, 0, 2, d2);
}

static const char *blk(char *buf, size_t cap, int l, const char *name)
{
    snprintf(buf, cap, "blk.%d.%s", l, name);
    return buf;
}

/* Layer l of a llama file. */
static int put_llama_layer(Conv *cv, const ModelConfig *c, int l)
{
    char p[64], n[64];
    uint64_t G = (uint64_t)c->n_kv_heads, hd = (uint64_t)c->head_dim, dim = (uint64_t)c->dim;
    uint64_t Q = (uint64_t)config_q_per_kv(c);
    uint64_t d_wq[3] = {G, Q * hd, dim}, d_kv[3] = {G, hd, dim};
    const int64_t nq = (int64_t)c->n_heads * c->head_dim, nkv = (int64_t)c->n_kv_heads * c->head_dim;
    if (strcmp(cv->arch, "phi3") == 0) {
        /* Fused attn_qkv: q rows, then k, then v; split by rows (whole rows of blocks). */
        const GgufTensor *w = need_tensor(cv, blk(n, sizeof n, l, "attn_qkv.weight"), c->dim,
                                          nq + 2 * nkv);
        if (!w)
            return -1;
        uint64_t rb = gguf_row_bytes(w->type, c->dim);
        if (put(cv, writer_layer_path(p, sizeof p, l, "wq"), w, 0, 3, d_wq) < 0 ||
            put(cv, writer_layer_path(p, sizeof p, l, "wk"), w, (uint64_t)nq * rb, 3, d_kv) < 0 ||
            put(cv, writer_layer_path(p, sizeof p, l, "wv"), w, (uint64_t)(nq + nkv) * rb, 3,
                d_kv) < 0)
            return -1;
    } else {
        const GgufTensor *q = need_tensor(cv, blk(n, sizeof n, l, "attn_q.weight"), c->dim, nq);
        if (!q || put(cv, writer_layer_path(p, sizeof p, l, "wq"), q, 0, 3, d_wq) < 0)
            return -1;
        const GgufTensor *k = need_tensor(cv, blk(n, sizeof n, l, "attn_k.weight"), c->dim, nkv);
        if (!k || put(cv, writer_layer_path(p, sizeof p, l, "wk"), k, 0, 3, d_kv) < 0)
            return -1;
        const GgufTensor *v = need_tensor(cv, blk(n, sizeof n, l, "attn_v.weight"), c->dim, nkv);
        if (!v || put(cv, writer_layer_path(p, sizeof p, l, "wv"), v, 0, 3, d_kv) < 0)
            return -1;
    }
    if (c->qkv_bias) { /* qwen2: biases of q, k and v, grouped as the matrices */
        uint64_t d_bq[2] = {G, Q * hd}, d_bkv[2] = {G, hd};
        static const char *const ours[3] = {"bq", "bk", "bv"};
        static const char *const theirs[3] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
        for (int i = 0; i < 3; i++) {
            const GgufTensor *b = need_tensor(cv, blk(n, sizeof n, l, theirs[i]),
                                              i == 0 ? nq : nkv, 1);
            if (!b)
                return -1;
            if (b->type != QTYPE_F32)
                return util_err(cv->err, cv->errlen, "%s: tensor %s: a bias must be f32",
                                cv->g->path, n);
            if (put(cv, writer_layer_path(p, sizeof p, l, ours[i]), b, 0, 2,
                    i == 0 ? d_bq : d_bkv) < 0)
                return -1;
        }
    }
    if (strcmp(cv->arch, "phi3") == 0) {
        /* Fused ffn_up: the gate's rows, then up's. */
        uint64_t d_f[2] = {(uint64_t)c->ffn_dim, dim};
        const GgufTensor *u = need_tensor(cv, blk(n, sizeof n, l, "ffn_up.weight"), c->dim,
                                          2 * (int64_t)c->ffn_dim);
        if (!u)
            return -1;
        uint64_t rb = gguf_row_bytes(u->type, c->dim);
        if (put(cv, writer_layer_path(p, sizeof p, l, "w_gate"), u, 0, 2, d_f) < 0 ||
            put(cv, writer_layer_path(p, sizeof p, l, "w_up"), u, (uint64_t)c->ffn_dim * rb, 2,
                d_f) < 0)
            return -1;
    } else if (put_whole(cv, writer_layer_path(p, sizeof p, l, "w_gate"),
                         blk(n, sizeof n, l, "ffn_gate.weight"), c->ffn_dim, c->dim) < 0 ||
               put_whole(cv, writer_layer_path(p, sizeof p, l, "w_up"),
                         blk(n, sizeof n, l, "ffn_up.weight"), c->ffn_dim, c->dim) < 0) {
        return -1;
    }
    return put_whole(cv, writer_layer_path(p, sizeof p, l, "attn_norm"),
                     blk(n, sizeof n, l, "attn_norm.weight"), 1, c->dim) < 0 ||
           put_whole(cv, writer_layer_path(p, sizeof p, l, "wo"),
                     blk(n, sizeof n, l, "attn_output.weight"), c->dim,
                     c->n_heads * c->head_dim) < 0 ||
           put_whole(cv, writer_layer_path(p, sizeof p, l, "ffn_norm"),
                     blk(n, sizeof n, l, "ffn_norm.weight"), 1, c->dim) < 0 ||
           put_whole(cv, writer_layer_path(p, sizeof p, l, "w_down"),
                     blk(n, sizeof n, l, "ffn_down.weight"), c->dim, c->ffn_dim) < 0
               ? -1 : 0;
}

/* Layer l of a gpt2 file: the fused attn_qkv rows (q, then k, then v) and its bias split. */
static int put_gpt2_layer(Conv *cv, const ModelConfig *c, int l)
{
    char p[64], n[64];
    uint64_t H = (uint64_t)c->n_heads, hd = (uint64_t)c->head_dim, dim = (uint64_t)c->dim;
    uint64_t d_w[3] = {H, hd, dim}, d_b[2] = {H, hd};
    const GgufTensor *w = need_tensor(cv, blk(n, sizeof n, l, "attn_qkv.weight"), c->dim,
                                      3 * c->dim);
    if (!w)
        return -1;
    uint64_t rb = w->bytes / (3 * dim); /* bytes of one row */
    if (put(cv, writer_layer_path(p, sizeof p, l, "wq"), w, 0, 3, d_w) < 0 ||
        put(cv, writer_layer_path(p, sizeof p, l, "wk"), w, dim * rb, 3, d_w) < 0 ||
        put(cv, writer_layer_path(p, sizeof p, l, "wv"), w, 2 * dim * rb, 3, d_w) < 0)
        return -1;
    const GgufTensor *b = need_tensor(cv, blk(n, sizeof n, l, "attn_qkv.bias"), 3 * c->dim, 1);
    if (!b)
        return -1;
    if (b->type != QTYPE_F32)
        return util_err(cv->err, cv->errlen, "%s: tensor %s: a bias must be f32", cv->g->path,
                        n);
    if (put(cv, writer_layer_path(p, sizeof p, l, "bq"), b, 0, 2, d_b) < 0 ||
        put(cv, writer_layer_path(p, sizeof p, l, "bk"), b, dim * 4, 2, d_b) < 0 ||
        put(cv, writer_layer_path(p, sizeof p, l, "bv"), b, 2 * dim * 4, 2, d_b) < 0)
        return -1;
    static const struct {
        const char *ours, *theirs;
        int out, in; /* 0: dim, 1: ffn */
    } m[] = {
        {"attn_norm", "attn_norm.weight", -1, 0}, {"attn_norm_bias", "attn_norm.bias", -1, 0},
        {"wo", "attn_output.weight", 0, 0},        {"bo", "attn_output.bias", -1, 0},
        {"ffn_norm", "ffn_norm.weight", -1, 0},    {"ffn_norm_bias", "ffn_norm.bias", -1, 0},
        {"w_up", "ffn_up.weight", 1, 0},           {"b_up", "ffn_up.bias", -1, 1},
        {"w_down", "ffn_down.weight", 0, 1},       {"b_down", "ffn_down.bias", -1, 0},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        int out = m[i].out < 0 ? 1 : m[i].out == 0 ? c->dim : c->ffn_dim;
        int in = m[i].in == 0 ? c->dim : c->ffn_dim;
        if (put_whole(cv, writer_layer_path(p, sizeof p, l, m[i].ours),
                      blk(n, sizeof n, l, m[i].theirs), out, in) < 0)
            return -1;
    }
    return 0;
}

/* /config quantization of a file holding block matrices: llama.cpp's name of its
 * general.file_type ("q4_K_M"), or "mixed"; "" when every matrix is F32. */
static int quantization_name(Conv *cv, char *out, size_t cap)
{
    int any = 0;
    for (int64_t i = 0; i < cv->g->n_tensors; i++)
        any |= cv->g->tensors[i].n_dims >= 2 && cv->g->tensors[i].type != QTYPE_F32;
    out[0] = '\0';
    if (!any)
        return 0;
    int64_t ft = -1;
    if (gguf_get_int(cv->g, "general.file_type", &ft, cv->err, cv->errlen) < 0)
        return -1;
    const char *q = ft > 0 ? ftype_name(ft) : NULL;
    snprintf(out, cap, "%s", q ? q : "mixed");
    return 0;
}

int convert_from_gguf(const char *path, const char *out, ConvertStats *stats, char *err,
                      size_t errlen)
{
    GgufFile *g = NULL;
    Tokenizer *tok = NULL;
    ModelWriter w;
    memset(&w, 0, sizeof w);
    w.file = -1;
    if (gguf_open(&g, path, err, errlen) < 0)
        return -1;
    Conv cv = {g, &w, NULL, err, errlen};
    const char *arch;
    size_t al;
    int rc = gguf_get_string(g, "general.architecture", &arch, &al, err, errlen);
    if (rc <= 0) {
        if (rc == 0)
            util_err(err, errlen, "%s: key general.architecture: missing", path);
        goto fail;
    }
    if (al == 5 && memcmp(arch, "llama", 5) == 0) {
        cv.arch = "llama";
    } else if (al == 5 && memcmp(arch, "qwen2", 5) == 0) {
        cv.arch = "qwen2";
    } else if (al == 4 && memcmp(arch, "phi3", 4) == 0) {
        cv.arch = "phi3";
    } else if (al == 4 && memcmp(arch, "gpt2", 4) == 0) {
        cv.arch = "gpt2";
    } else {
        util_err(err, errlen, "%s: key general.architecture: architecture \"%.*s\" is not "
                 "supported (llama, qwen2, phi3 and gpt2 are)", path, (int)(al > 32 ? 32 : al), arch);
        goto fail;
    }
    ModelConfig c;
    if (read_config(&cv, &c) < 0)
        goto fail;
    const GgufTensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (!emb) {
        util_err(err, errlen, "%s: tensor token_embd.weight: missing", path);
        goto fail;
    }
    c.vocab_size = emb->ne[1] > INT32_MAX ? -1 : (int)emb->ne[1];
    c.tied_embeddings = gguf_find_tensor(g, "output.weight") == NULL;
    if (gguf_load_tokenizer(&tok, g, err, errlen) < 0)
        goto fail;
    if (tokenizer_vocab_size(tok) != c.vocab_size) {
        util_err(err, errlen, "%s: key tokenizer.ggml.tokens: %d tokens, token_embd.weight has "
                 "%d rows", path, tokenizer_vocab_size(tok), c.vocab_size);
        goto fail;
    }
    c.bos_id = tokenizer_bos(tok);
    c.eos_id = tokenizer_eos(tok);
    if (quantization_name(&cv, c.quantization, sizeof c.quantization) < 0)
        goto fail;
    size_t slen = strlen(path) + 64;
    char *source = xmalloc(slen);
    snprintf(source, slen, "headsplit-convert --format gguf --file %s", path);
    rc = writer_open_file(&w, out, &c, source, NULL, err, errlen);
    free(source);
    if (rc < 0)
        goto fail;
    for (int l = 0; l < c.n_layers; l++)
        if ((c.arch == ARCH_LLAMA ? put_llama_layer(&cv, &c, l) : put_gpt2_layer(&cv, &c, l)) < 0)
            goto fail;
    if (put_whole(&cv, "/embed", "token_embd.weight", c.vocab_size, c.dim) < 0 ||
        put_whole(&cv, "/final_norm", "output_norm.weight", 1, c.dim) < 0 ||
        (!c.tied_embeddings &&
         put_whole(&cv, "/lm_head", "output.weight", c.vocab_size, c.dim) < 0))
        goto fail;
    if (c.arch == ARCH_GPT2 &&
        (put_whole(&cv, "/final_norm_bias", "output_norm.bias", 1, c.dim) < 0 ||
         put_whole(&cv, "/pos_embed", "position_embd.weight", c.context_length, c.dim) < 0))
        goto fail;
    if (writer_put_tokenizer(&w, tok, err, errlen) < 0)
        goto fail;
    {
        const char *ct;
        size_t ctl;
        char cerr[256];
        if (gguf_get_string(g, "tokenizer.chat_template", &ct, &ctl, cerr, sizeof cerr) == 1 &&
            writer_put_chat_template(&w, ct, ctl, err, errlen) < 0)
            goto fail;
    }
    if (writer_finish_file(&w, &c, stats, err, errlen) < 0)
        goto fail;
    tokenizer_free(tok);
    gguf_close(g);
    return 0;
fail:
    writer_abort_file(&w);
    tokenizer_free(tok);
    gguf_close(g);
    return -1;
}
