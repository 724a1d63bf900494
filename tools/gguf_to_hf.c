/* gguf_to_hf.c: a test helper (hs-gguf-to-hf) that writes a Hugging Face model directory
 * (config.json + model.safetensors, float32) from the tensors of a llama.cpp GGUF file of
 * the llama family, in the layout of the family's Hugging Face checkpoints:
 *   llama  LlamaForCausalLM (or MistralForCausalLM with --mistral W); q/k rows un-permuted
 *          from llama.cpp's adjacent-pair order back to Hugging Face's rotate-half order;
 *          --llama3-rope F,LOW,HIGH,ORIG writes rope_scaling {rope_type llama3, ...}
 *   qwen2  Qwen2ForCausalLM: q/k/v biases, tied embeddings
 *   phi3   Phi3ForCausalLM: fused qkv_proj and gate_up_proj (GGUF's attn_qkv and ffn_up)
 * so that headsplit-convert --format hf on the directory can be compared with
 * headsplit-convert --format gguf on the file.  Block types are dequantized to float32.
 *
 * usage: hs-gguf-to-hf IN.gguf OUTDIR [--llama3-rope F,LOW,HIGH,ORIG] [--mistral W] */
#include "gguf.h"
#include "quant.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "hs-gguf-to-hf: error: %s: %s\n", what, detail);
    exit(1);
}

/* One output tensor: name, shape [rows][cols] (rows 0: a vector of cols), float32 data. */
typedef struct {
    char name[96];
    int64_t rows, cols;
    float *data;
} OutT;

static OutT *outs;
static int n_outs, cap_outs;

static OutT *add_out(const char *name, int64_t rows, int64_t cols)
{
    if (n_outs == cap_outs) {
        cap_outs = cap_outs ? 2 * cap_outs : 64;
        outs = realloc(outs, (size_t)cap_outs * sizeof *outs);
        if (!outs)
            die("memory", "out of memory");
    }
    OutT *o = &outs[n_outs++];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->rows = rows;
    o->cols = cols;
    o->data = malloc((size_t)((rows ? rows : 1) * cols) * sizeof(float));
    if (!o->data)
        die("memory", "out of memory");
    return o;
}

/* The GGUF tensor as float32 rows (dequantized where stored in blocks). */
static float *tensor_f32(const GgufFile *g, const char *name, int64_t *rows, int64_t *cols)
{
    const GgufTensor *t = gguf_find_tensor(g, name);
    if (!t)
        die(name, "missing from the GGUF file");
    *cols = t->ne[0];
    *rows = t->ne[1] * t->ne[2] * t->ne[3];
    float *p = malloc((size_t)(*rows * *cols) * sizeof(float));
    if (!p)
        die("memory", "out of memory");
    const uint64_t rb = gguf_row_bytes(t->type, *cols);
    if (rb == 0 || rb * (uint64_t)*rows > t->bytes)
        die(name, "unknown type or short data");
    for (int64_t r = 0; r < *rows; r++)
        quant_dequantize_row(p + r * *cols, t->data + (uint64_t)r * rb, (QType)t->type, *cols);
    return p;
}

/* Copies GGUF tensor `name` to output `hf` (a matrix, or a vector when is_vec). */
static void copy(const GgufFile *g, const char *name, const char *hf, int is_vec)
{
    int64_t rows, cols;
    float *p = tensor_f32(g, name, &rows, &cols);
    OutT *o = add_out(hf, is_vec ? 0 : rows, cols);
    memcpy(o->data, p, (size_t)(rows * cols) * sizeof(float));
    free(p);
}

/* llama.cpp's permute (convert_hf_to_gguf.py) undone: its row h*hd + 2i + j holds Hugging
 * Face's row h*hd + j*hd/2 + i. */
static void copy_unpermuted(const GgufFile *g, const char *name, const char *hf, int hd)
{
    int64_t rows, cols;
    float *p = tensor_f32(g, name, &rows, &cols);
    OutT *o = add_out(hf, rows, cols);
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = r / hd, k = r % hd, i = k / 2, j = k % 2;
        int64_t dst = h * hd + j * (hd / 2) + i;
        memcpy(o->data + dst * cols, p + r * cols, (size_t)cols * sizeof(float));
    }
    free(p);
}

static int64_t key_int(const GgufFile *g, const char *arch, const char *name, int64_t def)
{
    char key[128], err[256];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int64_t v = def;
    int rc = gguf_get_int(g, key, &v, err, sizeof err);
    if (rc < 0 || (rc == 0 && def < 0))
        die(key, rc < 0 ? err : "missing");
    return v;
}

static double key_float(const GgufFile *g, const char *arch, const char *name, double def)
{
    char key[128], err[256];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    double v = def;
    if (gguf_get_float(g, key, &v, err, sizeof err) < 0)
        die(key, err);
    return v;
}

static void write_safetensors(const char *path)
{
    /* header: {"name":{"dtype":"F32","shape":[..],"data_offsets":[a,b]},...} */
    size_t cap = 256 + (size_t)n_outs * 256, len = 0;
    char *h = malloc(cap);
    uint64_t off = 0;
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (int i = 0; i < n_outs; i++) {
        const OutT *o = &outs[i];
        uint64_t bytes = (uint64_t)((o->rows ? o->rows : 1) * o->cols) * 4;
        char shape[64];
        if (o->rows)
            snprintf(shape, sizeof shape, "%lld,%lld", (long long)o->rows, (long long)o->cols);
        else
            snprintf(shape, sizeof shape, "%lld", (long long)o->cols);
        len += (size_t)snprintf(h + len, cap - len,
                                "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],"
                                "\"data_offsets\":[%llu,%llu]}",
                                i ? "," : "", o->name, shape, (unsigned long long)off,
                                (unsigned long long)(off + bytes));
        off += bytes;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8)
        h[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f)
        die(path, "cannot create");
    uint64_t n = len;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(n >> (8 * i));
    int ok = fwrite(le, 1, 8, f) == 8 && fwrite(h, 1, len, f) == len;
    for (int i = 0; i < n_outs && ok; i++) {
        const OutT *o = &outs[i];
        size_t cnt = (size_t)((o->rows ? o->rows : 1) * o->cols);
        ok = fwrite(o->data, sizeof(float), cnt, f) == cnt; /* little-endian hosts */
    }
    if (fclose(f) != 0 || !ok)
        die(path, "write failed");
    free(h);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: hs-gguf-to-hf IN.gguf OUTDIR [--llama3-rope F,LOW,HIGH,ORIG] "
                        "[--mistral W]\n");
        return 2;
    }
    const char *in = argv[1], *dir = argv[2], *rope = NULL;
    int mistral = -1;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--llama3-rope") == 0 && i + 1 < argc)
            rope = argv[++i];
        else if (strcmp(argv[i], "--mistral") == 0 && i + 1 < argc)
            mistral = atoi(argv[++i]);
        else
            die(argv[i], "unknown option");
    }
    char err[512];
    GgufFile *g = NULL;
    if (gguf_open(&g, in, err, sizeof err) < 0)
        die(in, err);
    const char *as;
    size_t al;
    if (gguf_get_string(g, "general.architecture", &as, &al, err, sizeof err) != 1)
        die(in, "general.architecture missing");
    char arch[16];
    snprintf(arch, sizeof arch, "%.*s", (int)(al < 15 ? al : 15), as);
    const int is_llama = strcmp(arch, "llama") == 0, is_qwen2 = strcmp(arch, "qwen2") == 0;
    const int is_phi3 = strcmp(arch, "phi3") == 0;
    if (!is_llama && !is_qwen2 && !is_phi3)
        die(arch, "architecture not handled (llama, qwen2, phi3)");
    const int64_t L = key_int(g, arch, "block_count", -1);
    const int64_t dim = key_int(g, arch, "embedding_length", -1);
    const int64_t nh = key_int(g, arch, "attention.head_count", -1);
    const int64_t nkv = key_int(g, arch, "attention.head_count_kv", nh);
    const int64_t ffn = key_int(g, arch, "feed_forward_length", -1);
    const int64_t ctx = key_int(g, arch, "context_length", -1);
    const int64_t swa = key_int(g, arch, "attention.sliding_window", 0);
    const double eps = key_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-5);
    const double theta = key_float(g, arch, "rope.freq_base", 10000.0);
    const int hd = (int)(dim / nh);
    const GgufTensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (!emb)
        die("token_embd.weight", "missing");
    const int64_t vocab = emb->ne[1];
    const int tied = gguf_find_tensor(g, "output.weight") == NULL;
    int64_t bos = 1, eos = 2;
    if (gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos, err, sizeof err) < 0 ||
        gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos, err, sizeof err) < 0)
        die(in, err);

    char name[128], hf[128];
#define GG(x) (snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, x), name)
#define HF(x) (snprintf(hf, sizeof hf, "model.layers.%lld.%s", (long long)l, x), hf)
    for (int64_t l = 0; l < L; l++) {
        copy(g, GG("attn_norm.weight"), HF("input_layernorm.weight"), 1);
        copy(g, GG("ffn_norm.weight"), HF("post_attention_layernorm.weight"), 1);
        copy(g, GG("attn_output.weight"), HF("self_attn.o_proj.weight"), 0);
        copy(g, GG("ffn_down.weight"), HF("mlp.down_proj.weight"), 0);
        if (is_phi3) {
            copy(g, GG("attn_qkv.weight"), HF("self_attn.qkv_proj.weight"), 0);
            copy(g, GG("ffn_up.weight"), HF("mlp.gate_up_proj.weight"), 0);
            continue;
        }
        if (is_llama) {
            copy_unpermuted(g, GG("attn_q.weight"), HF("self_attn.q_proj.weight"), hd);
            copy_unpermuted(g, GG("attn_k.weight"), HF("self_attn.k_proj.weight"), hd);
        } else {
            copy(g, GG("attn_q.weight"), HF("self_attn.q_proj.weight"), 0);
            copy(g, GG("attn_k.weight"), HF("self_attn.k_proj.weight"), 0);
        }
        copy(g, GG("attn_v.weight"), HF("self_attn.v_proj.weight"), 0);
        if (is_qwen2) {
            copy(g, GG("attn_q.bias"), HF("self_attn.q_proj.bias"), 1);
            copy(g, GG("attn_k.bias"), HF("self_attn.k_proj.bias"), 1);
            copy(g, GG("attn_v.bias"), HF("self_attn.v_proj.bias"), 1);
        }
        copy(g, GG("ffn_gate.weight"), HF("mlp.gate_proj.weight"), 0);
        copy(g, GG("ffn_up.weight"), HF("mlp.up_proj.weight"), 0);
    }
#undef GG
#undef HF
    copy(g, "token_embd.weight", "model.embed_tokens.weight", 0);
    copy(g, "output_norm.weight", "model.norm.weight", 1);
    if (!tied)
        copy(g, "output.weight", "lm_head.weight", 0);

    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_safetensors(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        die(path, "cannot create");
    const char *cls = is_qwen2 ? "Qwen2ForCausalLM" : is_phi3 ? "Phi3ForCausalLM"
                      : mistral >= 0 ? "MistralForCausalLM" : "LlamaForCausalLM";
    const char *mt = is_qwen2 ? "qwen2" : is_phi3 ? "phi3" : mistral >= 0 ? "mistral" : "llama";
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", cls, mt);
    fprintf(f, "  \"hidden_size\": %lld,\n  \"intermediate_size\": %lld,\n"
               "  \"num_hidden_layers\": %lld,\n  \"num_attention_heads\": %lld,\n"
               "  \"num_key_value_heads\": %lld,\n  \"vocab_size\": %lld,\n"
               "  \"max_position_embeddings\": %lld,\n  \"rms_norm_eps\": %.17g,\n"
               "  \"rope_theta\": %.17g,\n  \"hidden_act\": \"silu\",\n"
               "  \"tie_word_embeddings\": %s,\n  \"bos_token_id\": %lld,\n"
               "  \"eos_token_id\": %lld,\n  \"torch_dtype\": \"float32\"",
            (long long)dim, (long long)ffn, (long long)L, (long long)nh, (long long)nkv,
            (long long)vocab, (long long)ctx, eps, theta, tied ? "true" : "false",
            (long long)bos, (long long)eos);
    if (is_phi3)
        fprintf(f, ",\n  \"sliding_window\": %lld,\n  \"rope_scaling\": null", (long long)swa);
    if (is_qwen2)
        fprintf(f, ",\n  \"use_sliding_window\": false");
    if (mistral >= 0)
        fprintf(f, ",\n  \"sliding_window\": %s", mistral > 0 ? "" : "null");
    if (mistral > 0)
        fprintf(f, "%d", mistral);
    if (rope) {
        double fa, lo, hi, orig;
        if (sscanf(rope, "%lf,%lf,%lf,%lf", &fa, &lo, &hi, &orig) != 4)
            die("--llama3-rope", "expected FACTOR,LOW,HIGH,ORIGINAL_CONTEXT");
        fprintf(f, ",\n  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.17g, "
                   "\"low_freq_factor\": %.17g, \"high_freq_factor\": %.17g, "
                   "\"original_max_position_embeddings\": %.17g}", fa, lo, hi, orig);
    }
    fprintf(f, "\n}\n");
    if (fclose(f) != 0)
        die(path, "write failed");
    for (int i = 0; i < n_outs; i++)
        free(outs[i].data);
    free(outs);
    gguf_close(g);
    return 0;
}
