/* convert_fixtures.h: helpers shared by test_convert.c and test_convert_errors.c: a temporary
 * directory, the shared-model location (skip when absent), HDF5 read-back, a checker of the
 * model-file layout, and writers of small self-made fixtures (safetensors files, HF
 * directories, llama2.c checkpoints and tokenizers).  Include once, after _XOPEN_SOURCE. */
#ifndef HEADSPLIT_CONVERT_FIXTURES_H
#define HEADSPLIT_CONVERT_FIXTURES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config_io.h"
#include "convert.h"
#include "h5io.h"
#include "safetensors.h"
#include "tokenizer.h"

#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_helpers.h"

static char tmpdir[64];
static char err[1024];

/* ---- helpers ---- */

static inline int setup_dir(void **state)
{
    (void)state;
    h5io_quiet();
    return test_tmpdir_make(tmpdir, sizeof tmpdir, "convert");
}

static inline int teardown_dir(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

static inline const char *tp(char *buf, const char *name) /* buf holds 256 */
{
    return test_path(buf, 256, tmpdir, name);
}

static inline const char *shared_dir(void) { return test_shared_dir(); }

/* Skips the test (with the reason) when the shared fixtures are not there. */
#define NEED_SHARED() TEST_NEED_SHARED("stories260K/stories260K.bin")

static inline const char *sp(char *buf, const char *rel) /* buf holds 512 */
{
    return test_path(buf, 512, test_shared_dir(), rel);
}

static inline float *h5_read(const char *file, const char *dset, size_t *n)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
    if (d < 0)
        fail_msg("%s: dataset %s missing", file, dset);
    hid_t s = H5Dget_space(d);
    size_t cnt = (size_t)H5Sget_simple_extent_npoints(s);
    float *buf = malloc(cnt * sizeof(float) + 4);
    assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Sclose(s);
    H5Dclose(d);
    H5Fclose(f);
    if (n)
        *n = cnt;
    return buf;
}

static inline void h5_config(const char *file, ModelConfig *c, char *source, size_t cap)
{
    hid_t f = h5io_open_read(file, err, sizeof err);
    if (f < 0)
        fail_msg("%s", err);
    if (config_read(c, f, file, err, sizeof err) < 0)
        fail_msg("%s", err);
    if (source && h5io_attr_read_string(f, "/config", "source", source, cap, file, err,
                                        sizeof err) < 0)
        fail_msg("%s", err);
    H5Fclose(f);
}

static inline Tokenizer *h5_tokenizer(const char *file)
{
    Tokenizer *t = NULL;
    hid_t f = h5io_open_read(file, err, sizeof err);
    assert_true(f >= 0);
    if (tokenizer_h5_read(&t, f, file, err, sizeof err) < 0)
        fail_msg("%s", err);
    H5Fclose(f);
    return t;
}

typedef struct {
    char name[48];
    int rank;
    uint64_t dims[3];
} DsetSpec;

/* Every dataset docs/model-format.md requires of a model with config c. */
static inline int layout_of(const ModelConfig *c, DsetSpec *out, int cap)
{
    uint64_t dim = (uint64_t)c->dim, hd = (uint64_t)c->head_dim, G = (uint64_t)c->n_kv_heads;
    uint64_t Q = (uint64_t)config_q_per_kv(c), ffn = (uint64_t)c->ffn_dim;
    uint64_t V = (uint64_t)c->vocab_size, H = (uint64_t)c->n_heads;
    int g2 = c->arch == ARCH_GPT2, n = 0;
#define ADD(nm, r, a, b, d)                                                                  \
    do {                                                                                     \
        assert_true(n < cap);                                                               \
        out[n] = (DsetSpec){"", r, {a, b, d}};                                              \
        snprintf(out[n].name, sizeof out[n].name, "%s", nm);                                 \
        n++;                                                                                 \
    } while (0)
    for (int l = 0; l < c->n_layers; l++) {
        char p[48];
        struct { const char *nm; int r; uint64_t a, b, d; int when; } L[] = {
            {"attn_norm", 1, dim, 0, 0, 1},  {"attn_norm_bias", 1, dim, 0, 0, g2},
            {"wq", 3, G, Q * hd, dim, 1},    {"wk", 3, G, hd, dim, 1},
            {"wv", 3, G, hd, dim, 1},        {"bq", 2, G, Q * hd, 0, g2},
            {"bk", 2, G, hd, 0, g2},         {"bv", 2, G, hd, 0, g2},
            {"wo", 2, dim, H * hd, 0, 1},    {"bo", 1, dim, 0, 0, g2},
            {"ffn_norm", 1, dim, 0, 0, 1},   {"ffn_norm_bias", 1, dim, 0, 0, g2},
            {"w_gate", 2, ffn, dim, 0, !g2}, {"w_up", 2, ffn, dim, 0, 1},
            {"b_up", 1, ffn, 0, 0, g2},      {"w_down", 2, dim, ffn, 0, 1},
            {"b_down", 1, dim, 0, 0, g2},
        };
        for (size_t i = 0; i < sizeof L / sizeof L[0]; i++)
            if (L[i].when) {
                snprintf(p, sizeof p, "/layers/%d/%s", l, L[i].nm);
                ADD(p, L[i].r, L[i].a, L[i].b, L[i].d);
            }
    }
    ADD("/embed", 2, V, dim, 0);
    ADD("/final_norm", 1, dim, 0, 0);
    if (g2) {
        ADD("/pos_embed", 2, (uint64_t)c->context_length, dim, 0);
        ADD("/final_norm_bias", 1, dim, 0, 0);
    }
    if (!c->tied_embeddings)
        ADD("/lm_head", 2, V, dim, 0);
#undef ADD
    return n;
}

/* Checks the file against the format: every required dataset with its exact shape, nothing
 * that the architecture lacks, and a tokenizer. */
static inline void check_layout(const char *file)
{
    ModelConfig c;
    h5_config(file, &c, NULL, 0);
    DsetSpec d[512];
    int n = layout_of(&c, d, 512);
    hid_t f = h5io_open_read(file, err, sizeof err);
    for (int i = 0; i < n; i++)
        if (h5io_check_shape(f, d[i].name, d[i].rank, d[i].dims, file, err, sizeof err) < 0)
            fail_msg("%s", err);
    assert_true(h5io_exists(f, "/tokenizer"));
    assert_int_equal(h5io_exists(f, "/lm_head"), !c.tied_embeddings);
    assert_int_equal(h5io_exists(f, "/pos_embed"), c.arch == ARCH_GPT2);
    assert_int_equal(h5io_exists(f, "/layers/0/w_gate"), c.arch == ARCH_LLAMA);
    assert_false(h5io_exists(f, "/layers/" "999999"));
    H5Fclose(f);
}

/* Asserts that the two files hold bit-identical tensors (all of the layout). */
static inline void same_tensors(const char *a, const char *b)
{
    ModelConfig c;
    h5_config(a, &c, NULL, 0);
    DsetSpec d[512];
    int n = layout_of(&c, d, 512);
    for (int i = 0; i < n; i++) {
        size_t na, nb;
        float *x = h5_read(a, d[i].name, &na), *y = h5_read(b, d[i].name, &nb);
        assert_int_equal(na, nb);
        if (memcmp(x, y, na * sizeof(float)) != 0)
            fail_msg("%s differs between %s and %s", d[i].name, a, b);
        free(x);
        free(y);
    }
}

static inline int file_exists(const char *p) { return access(p, F_OK) == 0; }

/* After a failure: the message names `named` and contains `what`; no output was left. */
static inline void expect_fail(int rc, const char *out, const char *named, const char *what)
{
    char partial[1100];
    assert_int_equal(rc, -1);
    if (!strstr(err, named) || !strstr(err, what))
        fail_msg("message '%s' lacks '%s' or '%s'", err, named, what);
    assert_null(strchr(err, '\n'));
    snprintf(partial, sizeof partial, "%s.partial", out);
    assert_false(file_exists(out));
    assert_false(file_exists(partial));
}

static inline void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- self-made fixtures ---- */

/* A 257-piece GPT-2 byte-level vocabulary (256 bytes + <|endoftext|>), no merges. */
static inline void write_byte_vocab(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/vocab.json", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    int n = 0;
    fputc('{', f);
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int cp = printable ? b : 256 + n++;
        fprintf(f, "\"\\u%04x\": %d, ", cp, b);
    }
    fprintf(f, "\"<|endoftext|>\": 256}");
    fclose(f);
    snprintf(p, sizeof p, "%s/merges.txt", dir);
    write_text(p, "#version: 0.2\n");
}

typedef struct {
    char name[64];
    const char *dtype;
    int rank;
    uint64_t shape[2];
    void *data;
    size_t nbytes;
} StSpec;

typedef struct {
    StSpec t[64];
    int n;
    uint64_t rng;
} StModel;

/* Tensor values: F32 holds k*4096 + index (exact), 16-bit types random finite bit patterns. */
static inline void st_add(StModel *m, const char *name, const char *dtype, uint64_t d0,
                          uint64_t d1)
{
    StSpec *s = &m->t[m->n];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->dtype = dtype;
    s->rank = d1 ? 2 : 1;
    s->shape[0] = d0;
    s->shape[1] = d1;
    size_t cnt = (size_t)(d0 * (d1 ? d1 : 1)), es = strcmp(dtype, "F32") == 0 ? 4 : 2;
    s->nbytes = cnt * es;
    s->data = malloc(s->nbytes);
    for (size_t i = 0; i < cnt; i++) {
        if (es == 4) {
            ((float *)s->data)[i] = (float)(m->n * 4096 + (int)i);
        } else {
            m->rng = m->rng * 6364136223846793005ull + 1442695040888963407ull;
            uint16_t h = (uint16_t)(m->rng >> 48);
            int is_f16 = strcmp(dtype, "F16") == 0;
            if (is_f16 ? ((h >> 10) & 31) == 31 : ((h >> 7) & 255) == 255)
                h ^= is_f16 ? 0x4000 : 0x4000; /* keep it finite */
            ((uint16_t *)s->data)[i] = h;
        }
    }
    m->n++;
}

static inline const StSpec *st_get(const StModel *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->t[i].name, name) == 0)
            return &m->t[i];
    fail_msg("fixture tensor %s missing", name);
    return NULL;
}

/* Element i of a fixture tensor widened to float32. */
static inline float st_val(const StSpec *s, size_t i)
{
    if (strcmp(s->dtype, "F32") == 0)
        return ((const float *)s->data)[i];
    uint16_t h = ((const uint16_t *)s->data)[i];
    return strcmp(s->dtype, "F16") == 0 ? safetensors_f16_to_f32(h) : safetensors_bf16_to_f32(h);
}

/* Writes the tensors whose index has bit `which` set in mask (all: ~0) to path. */
static inline void st_write(const StModel *m, const char *path, uint64_t mask)
{
    size_t cap = 16384, pos = 0, off = 0;
    char *hdr = malloc(cap);
    pos += (size_t)snprintf(hdr, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < m->n; i++) {
        if (!(mask >> i & 1))
            continue;
        const StSpec *s = &m->t[i];
        pos += (size_t)snprintf(hdr + pos, cap - pos, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu",
                                s->name, s->dtype, (unsigned long long)s->shape[0]);
        if (s->rank == 2)
            pos += (size_t)snprintf(hdr + pos, cap - pos, ",%llu",
                                    (unsigned long long)s->shape[1]);
        pos += (size_t)snprintf(hdr + pos, cap - pos, "],\"data_offsets\":[%zu,%zu]}", off,
                                off + s->nbytes);
        off += s->nbytes;
    }
    pos += (size_t)snprintf(hdr + pos, cap - pos, "}");
    while (pos % 8)
        hdr[pos++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (uint8_t)((uint64_t)pos >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(hdr, 1, pos, f);
    for (int i = 0; i < m->n; i++)
        if (mask >> i & 1)
            fwrite(m->t[i].data, 1, m->t[i].nbytes, f);
    fclose(f);
    free(hdr);
}

static inline void st_free(StModel *m)
{
    for (int i = 0; i < m->n; i++)
        free(m->t[i].data);
    m->n = 0;
}

/* Tiny unprefixed, untied GPT-2: dim 8, 2 heads, 1 layer, n_inner 24, vocab 257, ctx 16. */
static inline void make_gpt2_dir(const char *dir, StModel *m, const char *config_json)
{
    mkdir(dir, 0700);
    memset(m, 0, sizeof *m);
    st_add(m, "wte.weight", "F32", 257, 8);
    st_add(m, "wpe.weight", "F32", 16, 8);
    st_add(m, "h.0.ln_1.weight", "F32", 8, 0);
    st_add(m, "h.0.ln_1.bias", "F32", 8, 0);
    st_add(m, "h.0.attn.c_attn.weight", "F32", 8, 24);
    st_add(m, "h.0.attn.c_attn.bias", "F32", 24, 0);
    st_add(m, "h.0.attn.c_proj.weight", "F32", 8, 8);
    st_add(m, "h.0.attn.c_proj.bias", "F32", 8, 0);
    st_add(m, "h.0.ln_2.weight", "F32", 8, 0);
    st_add(m, "h.0.ln_2.bias", "F32", 8, 0);
    st_add(m, "h.0.mlp.c_fc.weight", "F32", 8, 24);
    st_add(m, "h.0.mlp.c_fc.bias", "F32", 24, 0);
    st_add(m, "h.0.mlp.c_proj.weight", "F32", 24, 8);
    st_add(m, "h.0.mlp.c_proj.bias", "F32", 8, 0);
    st_add(m, "ln_f.weight", "F32", 8, 0);
    st_add(m, "ln_f.bias", "F32", 8, 0);
    st_add(m, "lm_head.weight", "F32", 257, 8);
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    st_write(m, p, ~0ull);
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_text(p, config_json);
    write_byte_vocab(dir);
}

static inline const char *gpt2_config(void)
{
    return
    "{\"architectures\":[\"GPT2LMHeadModel\"],\"model_type\":\"gpt2\",\"n_embd\":8,"
    "\"n_head\":2,\"n_layer\":1,\"n_positions\":16,\"n_inner\":24,\"vocab_size\":257,"
    "\"layer_norm_epsilon\":1e-5,\"activation_function\":\"gelu_new\","
    "\"tie_word_embeddings\":false,\"bos_token_id\":256,\"eos_token_id\":256}";
}

/* Tiny llama: hidden 16, 4 heads, 2 KV heads, 2 layers, ffn 24, vocab 257, untied; q_proj F16,
 * k_proj and embed BF16, lm_head F16, the rest F32. */
static inline void make_llama_model(StModel *m)
{
    memset(m, 0, sizeof *m);
    m->rng = 12345;
    st_add(m, "model.embed_tokens.weight", "BF16", 257, 16);
    for (int l = 0; l < 2; l++) {
        char n[64];
#define LAYER(suffix, dt, a, b) \
    (snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix), st_add(m, n, dt, a, b))
        LAYER("input_layernorm.weight", "F32", 16, 0);
        LAYER("self_attn.q_proj.weight", "F16", 16, 16);
        LAYER("self_attn.k_proj.weight", "BF16", 8, 16);
        LAYER("self_attn.v_proj.weight", "F32", 8, 16);
        LAYER("self_attn.o_proj.weight", "F32", 16, 16);
        LAYER("post_attention_layernorm.weight", "F32", 16, 0);
        LAYER("mlp.gate_proj.weight", "F32", 24, 16);
        LAYER("mlp.up_proj.weight", "F32", 24, 16);
        LAYER("mlp.down_proj.weight", "F32", 16, 24);
#undef LAYER
    }
    st_add(m, "model.norm.weight", "F32", 16, 0);
    st_add(m, "lm_head.weight", "F16", 257, 16);
}

static inline const char *llama_config(void)
{
    return
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":16,"
    "\"intermediate_size\":24,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":2,\"vocab_size\":257,\"max_position_embeddings\":64,"
    "\"rms_norm_eps\":1e-6,\"rope_theta\":500000.0,\"rope_scaling\":null,"
    "\"hidden_act\":\"silu\",\"tie_word_embeddings\":false,\"bos_token_id\":null}";
}

/* A llama2.c legacy checkpoint whose k-th float is k: dim 8, hidden 16, 2 layers, 2 heads,
 * 1 KV head, vocab 259 (negative = separate classifier), seq_len 4; trunc bytes cut off. */
static inline void make_llama2c(const char *path, const int32_t hdr[7], long trunc)
{
    int vocab = hdr[5] < 0 ? -hdr[5] : hdr[5];
    long dim = hdr[0], hid = hdr[1], L = hdr[2], hs = hdr[0] / hdr[3], kvd = hs * hdr[4];
    long n = vocab * dim + L * dim * 2 + L * dim * dim * 2 + L * kvd * dim * 2 + 3 * L * hid * dim
             + dim + hdr[6] * hs + (hdr[5] < 0 ? vocab * dim : 0);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(hdr, 4, 7, f);
    for (long k = 0; k < n - trunc / 4; k++) {
        float v = (float)k;
        fwrite(&v, 4, 1, f);
    }
    fclose(f);
}

/* llama2.c tokenizer.bin with the 259 pieces <unk>, BOS, EOS and the byte pieces. */
static inline void make_tok259(const char *path, int extra)
{
    FILE *f = fopen(path, "wb");
    int32_t maxlen = 6;
    float score = 0;
    fwrite(&maxlen, 4, 1, f);
    for (int i = 0; i < 259 + extra; i++) {
        char s[16];
        if (i < 3)
            snprintf(s, sizeof s, "%s", i == 0 ? "<unk>" : i == 1 ? "\n<s>\n" : "\n</s>\n");
        else
            snprintf(s, sizeof s, "<0x%02X>", (i - 3) & 255);
        int32_t len = (int32_t)strlen(s);
        fwrite(&score, 4, 1, f);
        fwrite(&len, 4, 1, f);
        fwrite(s, 1, (size_t)len, f);
    }
    fclose(f);
}

/* Header of the tiny llama2.c checkpoint: dim, hidden, layers, heads, kv heads, vocab, seq. */
#define TINY_HDR {8, 16, 2, 2, 1, -259, 4}

#endif

