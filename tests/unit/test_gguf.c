/* test_gguf.c: the GGUF reader on self-made files (every metadata type; every truncation and
 * thousands of corrupted copies refused with one line, never a crash), the tokenizer from GGUF
 * metadata, and headsplit-convert --format gguf: llama and gpt2 layouts, blocks copied byte
 * for byte, and every refusal naming the file and the key or tensor.  The fixtures of
 * ../shared/models/gguf check the tokenizer against llama2.c's (skipped when absent). */
#define _XOPEN_SOURCE 700
#include "convert_fixtures.h"
#include "gguf.h"
#include "gguf_builder.h"
#include "tokenizer_gguf.h"

/* Deterministic bytes for tensor data. */
static void fill_bytes(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (uint8_t)(s >> 24);
    }
}

static float *rand_floats(size_t n, uint32_t seed)
{
    float *f = malloc(n * sizeof *f + 4);
    uint32_t s = seed * 2654435761u + 7;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        f[i] = (float)((int)(s >> 9) - (1 << 22)) / (float)(1 << 24);
    }
    return f;
}

/* ---- reader ---------------------------------------------------------------------------- */

/* A file with metadata of every type and two tensors (f32 [2][8], q8_0 [2][32]). */
static uint8_t *small_file(size_t *len, const char *extra_key)
{
    GgufBuilder g = {0};
    static const char *const words[] = {"alpha", "", "gamma"};
    static const float fl[] = {1.5f, -2.0f};
    static const int32_t in[] = {7, -8, 9};
    gb_kv_str(&g, "general.architecture", "llama");
    gb_kv_u32(&g, "u32", 4000000000u);
    gb_kv_f32(&g, "f32", 0.25f);
    gb_kv_bool(&g, "flag", 1);
    gb_kv_arr_str(&g, "words", words, 3);
    gb_kv_arr_f32(&g, "floats", fl, 2);
    gb_kv_arr_i32(&g, "ints", in, 3);
    gb_key(&g, "i8", 1);
    gb_put(&g.kv, "\xfe", 1);
    gb_key(&g, "u64", 10);
    gb_u64(&g.kv, 1ull << 40);
    gb_key(&g, "f64", 12);
    double d = 1e-300;
    gb_put(&g.kv, &d, 8);
    if (extra_key)
        gb_kv_u32(&g, extra_key, 64);
    float t0[16];
    for (int i = 0; i < 16; i++)
        t0[i] = (float)i;
    uint8_t t1[68];
    fill_bytes(t1, sizeof t1, 1);
    gb_tensor(&g, "t.f32", 0, 8, 2, t0, sizeof t0);
    gb_tensor(&g, "t.q8", 8, 32, 2, t1, sizeof t1);
    return gb_finish(&g, len);
}

static void test_reader_values(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = small_file(&len, NULL);
    GgufFile *g;
    if (gguf_open_mem(&g, b, len, "small.gguf", err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_int_equal(g->version, 3);
    assert_int_equal(g->n_kv, 10);
    assert_int_equal(g->n_tensors, 2);
    int64_t i;
    double f;
    int flag;
    const char *s;
    size_t n;
    assert_int_equal(gguf_get_int(g, "u32", &i, err, sizeof err), 1);
    assert_true(i == 4000000000ll);
    assert_int_equal(gguf_get_int(g, "i8", &i, err, sizeof err), 1);
    assert_int_equal(i, -2);
    assert_int_equal(gguf_get_int(g, "u64", &i, err, sizeof err), 1);
    assert_true(i == 1ll << 40);
    assert_int_equal(gguf_get_float(g, "f32", &f, err, sizeof err), 1);
    assert_true(f == 0.25);
    assert_int_equal(gguf_get_float(g, "f64", &f, err, sizeof err), 1);
    assert_true(f == 1e-300);
    assert_int_equal(gguf_get_bool(g, "flag", &flag, err, sizeof err), 1);
    assert_int_equal(flag, 1);
    assert_int_equal(gguf_get_string(g, "general.architecture", &s, &n, err, sizeof err), 1);
    assert_int_equal(n, 5);
    assert_memory_equal(s, "llama", 5);
    assert_int_equal(gguf_get_int(g, "absent", &i, err, sizeof err), 0);
    /* a wrong type is an error naming the key */
    assert_int_equal(gguf_get_int(g, "f32", &i, err, sizeof err), -1);
    assert_non_null(strstr(err, "f32"));
    assert_int_equal(gguf_get_string(g, "u32", &s, &n, err, sizeof err), -1);
    const GgufKV *kv;
    assert_int_equal(gguf_get_array(g, "words", GGUF_TYPE_STRING, &kv, err, sizeof err), 1);
    assert_int_equal(kv->n, 3);
    s = gguf_array_string(kv, 2, &n);
    assert_int_equal(n, 5);
    assert_memory_equal(s, "gamma", 5);
    gguf_array_string(kv, 1, &n);
    assert_int_equal(n, 0);
    assert_int_equal(gguf_get_array(g, "floats", GGUF_TYPE_FLOAT32, &kv, err, sizeof err), 1);
    assert_true(gguf_array_float(kv, 1) == -2.0);
    assert_int_equal(gguf_get_array(g, "ints", GGUF_TYPE_INT32, &kv, err, sizeof err), 1);
    assert_int_equal(gguf_array_int(kv, 1), -8);
    assert_int_equal(gguf_get_array(g, "ints", GGUF_TYPE_STRING, &kv, err, sizeof err), -1);
    const GgufTensor *t = gguf_find_tensor(g, "t.q8");
    assert_non_null(t);
    assert_int_equal(t->type, 8);
    assert_int_equal(t->ne[0], 32);
    assert_int_equal(t->ne[1], 2);
    assert_int_equal(t->bytes, 68);
    assert_int_equal(t->offset % 32, 0);
    uint8_t want[68];
    fill_bytes(want, sizeof want, 1);
    assert_memory_equal(t->data, want, 68);
    t = gguf_find_tensor(g, "t.f32");
    assert_int_equal(t->bytes, 64);
    float f5;
    memcpy(&f5, t->data + 20, 4);
    assert_true(f5 == 5.0f);
    assert_null(gguf_find_tensor(g, "nope"));
    assert_int_equal(gguf_row_bytes(8, 64), 68);
    assert_int_equal(gguf_row_bytes(14, 512), 420);
    gguf_close(g);
    /* the same bytes through a file */
    char p[256];
    FILE *fp = fopen(tp(p, "small.gguf"), "wb");
    assert_int_equal(fwrite(b, 1, len, fp), len);
    fclose(fp);
    if (gguf_open(&g, p, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_int_equal(gguf_find_tensor(g, "t.q8")->data[5], want[5]);
    gguf_close(g);
    assert_int_equal(gguf_open(&g, tp(p, "missing.gguf"), err, sizeof err), -1);
    assert_non_null(strstr(err, "missing.gguf"));
    free(b);
}

/* Opening must fail with one line naming the file, and what. */
static void expect_open_fail(const uint8_t *b, size_t len, const char *what)
{
    GgufFile *g = (GgufFile *)1;
    assert_int_equal(gguf_open_mem(&g, b, len, "bad.gguf", err, sizeof err), -1);
    assert_null(g);
    if (strncmp(err, "bad.gguf: ", 10) != 0 || (what && !strstr(err, what)))
        fail_msg("message '%s' lacks 'bad.gguf: ' or '%s'", err, what ? what : "");
    assert_null(strchr(err, '\n'));
}

static void test_reader_truncated(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = small_file(&len, NULL);
    /* every prefix is refused (the last tensor's data end at the end of the file) */
    for (size_t n = 0; n < len; n++)
        expect_open_fail(b, n, NULL);
    expect_open_fail(b, len - 1, "t.q8");
    free(b);
}

static void test_reader_corrupted(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = small_file(&len, NULL);
    uint8_t *c = malloc(len);
    uint32_t s = 12345;
    int opened = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(c, b, len);
        int flips = 1 + it % 4;
        for (int k = 0; k < flips; k++) {
            s = s * 1664525u + 1013904223u;
            size_t pos = (s >> 8) % len;
            s = s * 1664525u + 1013904223u;
            c[pos] = it % 3 == 0 ? (uint8_t)(s >> 24) : (uint8_t)(c[pos] ^ (1u << (s >> 29)));
        }
        GgufFile *g;
        if (gguf_open_mem(&g, c, len, "fuzz.gguf", err, sizeof err) < 0) {
            assert_null(strchr(err, '\n'));
            assert_non_null(strstr(err, "fuzz.gguf"));
            continue;
        }
        /* whatever opened must be safe to walk completely */
        opened++;
        unsigned sum = 0;
        for (int64_t i = 0; i < g->n_kv; i++) {
            const GgufKV *kv = &g->kv[i];
            for (uint64_t j = 0; kv->type == GGUF_TYPE_ARRAY && j < kv->n; j++) {
                size_t n;
                if (kv->elem_type == GGUF_TYPE_STRING) {
                    const char *str = gguf_array_string(kv, j, &n);
                    for (size_t q = 0; q < n; q++)
                        sum += (unsigned char)str[q];
                } else {
                    sum += (unsigned)gguf_array_int(kv, j);
                }
            }
            for (uint64_t j = 0; kv->type == GGUF_TYPE_STRING && j < kv->n; j++)
                sum += kv->data[j];
        }
        for (int64_t i = 0; i < g->n_tensors; i++)
            for (uint64_t j = 0; j < g->tensors[i].bytes; j++)
                sum += g->tensors[i].data[j];
        (void)sum;
        gguf_close(g);
    }
    assert_true(opened > 0); /* flips inside tensor data leave a valid file */
    free(c);
    free(b);
}

static void test_reader_refusals(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = small_file(&len, NULL);
    b[0] = 'X';
    expect_open_fail(b, len, "magic");
    free(b);
    b = small_file(&len, NULL);
    b[4] = 1; /* version 1 (32-bit counts) */
    expect_open_fail(b, len, "version 1");
    b[4] = 0;
    b[7] = 3; /* a big-endian version 3 */
    expect_open_fail(b, len, "big-endian");
    free(b);

    GgufBuilder g = {0};
    gb_key(&g, "nested", 9);
    gb_u32(&g.kv, 9);
    gb_u64(&g.kv, 1);
    b = gb_finish(&g, &len);
    expect_open_fail(b, len, "nested arrays");
    free(b);

    memset(&g, 0, sizeof g);
    gb_kv_u32(&g, "general.alignment", 24);
    b = gb_finish(&g, &len);
    expect_open_fail(b, len, "general.alignment");
    free(b);

    uint8_t data[64] = {0};
    memset(&g, 0, sizeof g);
    gb_tensor(&g, "odd.type", 99, 4, 1, data, 16);
    b = gb_finish(&g, &len);
    expect_open_fail(b, len, "odd.type: unknown tensor type type 99");
    free(b);

    memset(&g, 0, sizeof g);
    gb_tensor(&g, "short.row", 8, 16, 1, data, 17);
    b = gb_finish(&g, &len);
    expect_open_fail(b, len, "short.row: row length 16");
    free(b);

    memset(&g, 0, sizeof g);
    gb_tensor(&g, "a", 0, 4, 0, data, 16);
    gb_tensor(&g, "a", 0, 4, 0, data, 16);
    b = gb_finish(&g, &len);
    expect_open_fail(b, len, "listed twice");
    free(b);

    /* a huge dimension product and an element count beyond the file */
    memset(&g, 0, sizeof g);
    gb_tensor(&g, "huge", 0, 1ull << 40, 1ull << 40, data, 16);
    b = gb_finish(&g, &len);
    expect_open_fail(b, len, "huge");
    free(b);
    memset(&g, 0, sizeof g);
    gb_key(&g, "many", 9);
    gb_u32(&g.kv, 8);
    gb_u64(&g.kv, 1ull << 62);
    b = gb_finish(&g, &len);
    expect_open_fail(b, len, "many");
    free(b);

    /* a misaligned tensor offset */
    memset(&g, 0, sizeof g);
    gb_tensor(&g, "mis", 0, 4, 0, data, 16);
    b = gb_finish(&g, &len);
    /* the offset field is the last 8 bytes of the tensor info, before the padding */
    size_t off_pos = 24 + 8 + 3 + 4 + 8 + 4;
    b[off_pos] = 4;
    expect_open_fail(b, len, "alignment");
    free(b);
}

/* ---- tokenizer and conversion ---------------------------------------------------------- */

enum { L_DIM = 64, L_HEADS = 4, L_KV = 2, L_HD = 16, L_FFN = 96, L_LAYERS = 2, L_VOCAB = 262 };

/* The spm vocabulary: <unk> <s> </s>, 256 byte pieces, then "▁", "a", "▁a". */
static void add_llama_tokenizer(GgufBuilder *g, int vocab)
{
    char **tok = malloc((size_t)vocab * sizeof *tok);
    float *sc = malloc((size_t)vocab * sizeof *sc);
    int32_t *ty = malloc((size_t)vocab * sizeof *ty);
    static const char *const head[3] = {"<unk>", "<s>", "</s>"};
    static const char *const tail[3] = {"\xe2\x96\x81", "a", "\xe2\x96\x81" "a"};
    for (int i = 0; i < vocab; i++) {
        tok[i] = malloc(16);
        if (i < 3)
            snprintf(tok[i], 16, "%s", head[i]);
        else if (i < 259)
            snprintf(tok[i], 16, "<0x%02X>", i - 3);
        else
            snprintf(tok[i], 16, "%s", i - 259 < 3 ? tail[i - 259] : "zz");
        sc[i] = i < 259 ? 0.0f : (float)(-(i - 259));
        ty[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    }
    gb_kv_str(g, "tokenizer.ggml.model", "llama");
    gb_kv_arr_str(g, "tokenizer.ggml.tokens", (const char *const *)tok, vocab);
    gb_kv_arr_f32(g, "tokenizer.ggml.scores", sc, vocab);
    gb_kv_arr_i32(g, "tokenizer.ggml.token_type", ty, vocab);
    gb_kv_u32(g, "tokenizer.ggml.bos_token_id", 1);
    gb_kv_u32(g, "tokenizer.ggml.eos_token_id", 2);
    gb_kv_u32(g, "tokenizer.ggml.unknown_token_id", 0);
    for (int i = 0; i < vocab; i++)
        free(tok[i]);
    free(tok);
    free(sc);
    free(ty);
}

/* Bytes of a [rows][cols] tensor of type t (0 f32, 1 f16, 30 bf16, 8 q8_0, 2 q4_0). */
static size_t tensor_bytes(uint32_t t, size_t rows, size_t cols)
{
    size_t row = t == 0 ? cols * 4 : t == 1 || t == 30 ? cols * 2 : t == 8 ? cols / 32 * 34
               : cols / 32 * 18;
    return rows * row;
}

/* Adds a [rows][cols] tensor of type t with deterministic contents (seed). */
static void add_matrix(GgufBuilder *g, const char *name, uint32_t t, size_t rows, size_t cols,
                       uint32_t seed)
{
    size_t n = tensor_bytes(t, rows, cols);
    uint8_t *b;
    if (t == 0) {
        b = (uint8_t *)rand_floats(rows * cols, seed);
    } else {
        b = malloc(n);
        fill_bytes(b, n, seed);
    }
    gb_tensor(g, name, t, cols, rows == 1 ? 0 : rows, b, n);
    free(b);
}

/* Which variant of the llama file to build. */
typedef struct {
    int mixed;          /* layer 1 and the embedding in block types */
    const char *arch;   /* NULL: llama */
    int bad_type;       /* a tensor of type iq4_nl */
    int drop_up;        /* blk.0.ffn_up.weight missing */
    int rope_freqs;     /* a rope_freqs.weight tensor */
    int rope_dims;      /* rope.dimension_count (0: head_dim) */
    int vocab_tok;      /* tokenizer size (0: L_VOCAB) */
    const char *extra;  /* one more f32 vector tensor of head_dim / 2 values of this name */
} LlamaOpts;

static void make_llama_gguf(const char *path, LlamaOpts o)
{
    GgufBuilder g = {0};
    const char *arch = o.arch ? o.arch : "llama";
    char k[96];
    gb_kv_str(&g, "general.architecture", arch);
#define AK(name) (snprintf(k, sizeof k, "%s.%s", arch, name), k)
    gb_kv_u32(&g, AK("block_count"), L_LAYERS);
    gb_kv_u32(&g, AK("embedding_length"), L_DIM);
    gb_kv_u32(&g, AK("attention.head_count"), L_HEADS);
    gb_kv_u32(&g, AK("attention.head_count_kv"), L_KV);
    gb_kv_u32(&g, AK("feed_forward_length"), L_FFN);
    gb_kv_u32(&g, AK("context_length"), 32);
    gb_kv_u32(&g, AK("rope.dimension_count"), o.rope_dims ? (uint32_t)o.rope_dims : L_HD);
    gb_kv_f32(&g, AK("rope.freq_base"), 5000.0f);
    gb_kv_f32(&g, AK("attention.layer_norm_rms_epsilon"), 1e-6f);
#undef AK
    gb_kv_u32(&g, "general.file_type", o.mixed ? 7 : 0);
    add_llama_tokenizer(&g, o.vocab_tok ? o.vocab_tok : L_VOCAB);
    char n[64];
    for (int l = 0; l < L_LAYERS; l++) {
        int q = o.mixed && l == 1;
        uint32_t seed = 100 * (uint32_t)l;
#define BN(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        add_matrix(&g, BN("attn_norm.weight"), 0, 1, L_DIM, seed + 1);
        add_matrix(&g, BN("attn_q.weight"), q ? 8 : 0, L_HEADS * L_HD, L_DIM, seed + 2);
        add_matrix(&g, BN("attn_k.weight"), q ? 1 : 0, L_KV * L_HD, L_DIM, seed + 3);
        add_matrix(&g, BN("attn_v.weight"), q ? 30 : 0, L_KV * L_HD, L_DIM, seed + 4);
        add_matrix(&g, BN("attn_output.weight"), q ? 2 : 0, L_DIM, L_HEADS * L_HD, seed + 5);
        add_matrix(&g, BN("ffn_norm.weight"), 0, 1, L_DIM, seed + 6);
        add_matrix(&g, BN("ffn_gate.weight"), o.bad_type && l == 1 ? 20 : q ? 8 : 0, L_FFN,
                   L_DIM, seed + 7);
        if (!(o.drop_up && l == 0))
            add_matrix(&g, BN("ffn_up.weight"), q ? 8 : 0, L_FFN, L_DIM, seed + 8);
        add_matrix(&g, BN("ffn_down.weight"), q ? 2 : 0, L_DIM, L_FFN, seed + 9);
#undef BN
    }
    add_matrix(&g, "token_embd.weight", o.mixed ? 8 : 0, L_VOCAB, L_DIM, 7);
    add_matrix(&g, "output_norm.weight", 0, 1, L_DIM, 8);
    if (o.rope_freqs)
        add_matrix(&g, "rope_freqs.weight", 0, 1, L_HD / 2, 9);
    if (o.extra)
        add_matrix(&g, o.extra, 0, 1, L_HD / 2, 10);
    gb_write_file(&g, path);
}

/* Reads a uint8 dataset whole, with its qtype and cols attributes. */
static uint8_t *h5_read_blocks(const char *file, const char *dset, size_t *n, char *qtype,
                               int *cols)
{
    hid_t f = h5io_open_read(file, err, sizeof err);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
    if (d < 0)
        fail_msg("%s: dataset %s missing", file, dset);
    hid_t t = H5Dget_type(d);
    assert_true(H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 1);
    H5Tclose(t);
    hid_t s = H5Dget_space(d);
    *n = (size_t)H5Sget_simple_extent_npoints(s);
    uint8_t *b = malloc(*n + 1);
    assert_true(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) >= 0);
    H5Sclose(s);
    H5Dclose(d);
    assert_int_equal(h5io_attr_read_string(f, dset, "qtype", qtype, 16, file, err, sizeof err),
                     0);
    assert_int_equal(h5io_attr_read_int(f, dset, "cols", cols, file, err, sizeof err), 0);
    H5Fclose(f);
    return b;
}

static void test_convert_llama_f32(void **state)
{
    (void)state;
    char in[256], out[256];
    make_llama_gguf(tp(in, "llama.gguf"), (LlamaOpts){0});
    ConvertStats st;
    if (convert_from_gguf(in, tp(out, "llama.h5"), &st, err, sizeof err) < 0)
        fail_msg("%s", err);
    ModelConfig c;
    char source[512];
    h5_config(out, &c, source, sizeof source);
    assert_int_equal(c.arch, ARCH_LLAMA);
    assert_int_equal(c.dim, L_DIM);
    assert_int_equal(c.n_heads, L_HEADS);
    assert_int_equal(c.n_kv_heads, L_KV);
    assert_int_equal(c.head_dim, L_HD);
    assert_int_equal(c.ffn_dim, L_FFN);
    assert_int_equal(c.n_layers, L_LAYERS);
    assert_int_equal(c.vocab_size, L_VOCAB);
    assert_int_equal(c.context_length, 32);
    assert_true(c.rope_theta == 5000.0f);
    assert_true(c.norm_eps == 1e-6f);
    assert_int_equal(c.rope_style, ROPE_INTERLEAVED);
    assert_int_equal(c.tied_embeddings, 1);
    assert_int_equal(c.bos_id, 1);
    assert_int_equal(c.eos_id, 2);
    assert_non_null(strstr(source, "--format gguf"));
    check_layout(out);
    /* rows keep their order: wq [G][Q*hd][dim] is the file's [n_heads*hd][dim] */
    size_t n;
    float *wq = h5_read(out, "/layers/1/wq", &n);
    float *src = rand_floats((size_t)L_HEADS * L_HD * L_DIM, 102);
    assert_int_equal(n, (size_t)L_HEADS * L_HD * L_DIM);
    assert_memory_equal(wq, src, n * sizeof(float));
    free(wq);
    free(src);
    float *down = h5_read(out, "/layers/0/w_down", &n);
    src = rand_floats((size_t)L_DIM * L_FFN, 9);
    assert_memory_equal(down, src, n * sizeof(float));
    free(down);
    free(src);
    /* the tokenizer */
    Tokenizer *t = h5_tokenizer(out);
    int *ids;
    size_t n_ids;
    assert_int_equal(tokenizer_encode(t, "a a!", 4, &ids, &n_ids, err, sizeof err), 0);
    /* BOS, "▁a", "▁a", byte '!' */
    assert_int_equal(n_ids, 4);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 261);
    assert_int_equal(ids[2], 261);
    assert_int_equal(ids[3], 3 + '!');
    free(ids);
    tokenizer_free(t);
}

static void test_convert_llama_blocks(void **state)
{
    (void)state;
    char in[256], out[256];
    make_llama_gguf(tp(in, "mixed.gguf"), (LlamaOpts){.mixed = 1});
    if (convert_from_gguf(in, tp(out, "mixed.h5"), NULL, err, sizeof err) < 0)
        fail_msg("%s", err);
    hid_t f = h5io_open_read(out, err, sizeof err);
    int ver;
    char q[32];
    assert_int_equal(h5io_attr_read_int(f, "/config", "format_version", &ver, out, err,
                                        sizeof err), 0);
    assert_int_equal(ver, 2);
    assert_int_equal(h5io_attr_read_string(f, "/config", "quantization", q, sizeof q, out, err,
                                           sizeof err), 0);
    assert_string_equal(q, "q8_0");
    H5Fclose(f);
    static const struct {
        const char *dset, *qtype;
        uint32_t type, seed;
        size_t rows, cols;
    } want[] = {
        {"/layers/1/wq", "q8_0", 8, 102, L_HEADS * L_HD, L_DIM},
        {"/layers/1/wk", "f16", 1, 103, L_KV * L_HD, L_DIM},
        {"/layers/1/wv", "bf16", 30, 104, L_KV * L_HD, L_DIM},
        {"/layers/1/wo", "q4_0", 2, 105, L_DIM, L_HEADS * L_HD},
        {"/layers/1/w_up", "q8_0", 8, 108, L_FFN, L_DIM},
        {"/layers/1/w_down", "q4_0", 2, 109, L_DIM, L_FFN},
        {"/embed", "q8_0", 8, 7, L_VOCAB, L_DIM},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        size_t n, bytes = tensor_bytes(want[i].type, want[i].rows, want[i].cols);
        char qtype[16];
        int cols;
        uint8_t *got = h5_read_blocks(out, want[i].dset, &n, qtype, &cols);
        uint8_t *src = malloc(bytes);
        fill_bytes(src, bytes, want[i].seed);
        assert_int_equal(n, bytes);
        assert_memory_equal(got, src, bytes); /* byte for byte */
        assert_string_equal(qtype, want[i].qtype);
        assert_int_equal(cols, (int)want[i].cols);
        free(got);
        free(src);
    }
    /* the shape of a grouped block tensor: [G][Q*hd][row bytes] */
    f = h5io_open_read(out, err, sizeof err);
    hid_t d = H5Dopen2(f, "/layers/1/wq", H5P_DEFAULT), s = H5Dget_space(d);
    hsize_t dims[3];
    assert_int_equal(H5Sget_simple_extent_dims(s, dims, NULL), 3);
    assert_int_equal(dims[0], L_KV);
    assert_int_equal(dims[1], L_HEADS / L_KV * L_HD);
    assert_int_equal(dims[2], L_DIM / 32 * 34);
    H5Sclose(s);
    H5Dclose(d);
    H5Fclose(f);
    /* layer 0 stayed float32 */
    size_t n;
    float *wk = h5_read(out, "/layers/0/wk", &n);
    float *src = rand_floats(n, 3);
    assert_memory_equal(wk, src, n * sizeof(float));
    free(wk);
    free(src);
}

/* GPT-2's byte-level alphabet: the UTF-8 text of byte b (out holds 3). */
static void gpt2_char(int b, char *out)
{
    int cp = b, n = 0;
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    if (!printable) {
        for (int x = 0; x < b; x++)
            n += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255));
        cp = 256 + n;
    }
    if (cp < 128) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 63));
        out[2] = 0;
    }
}

enum { P_DIM = 32, P_HEADS = 2, P_FFN = 64, P_CTX = 16, P_VOCAB = 258 };

static void test_convert_gpt2(void **state)
{
    (void)state;
    char in[256], out[256];
    GgufBuilder g = {0};
    gb_kv_str(&g, "general.architecture", "gpt2");
    gb_kv_u32(&g, "gpt2.block_count", 1);
    gb_kv_u32(&g, "gpt2.embedding_length", P_DIM);
    gb_kv_u32(&g, "gpt2.attention.head_count", P_HEADS);
    gb_kv_u32(&g, "gpt2.feed_forward_length", P_FFN);
    gb_kv_u32(&g, "gpt2.context_length", P_CTX);
    gb_kv_f32(&g, "gpt2.attention.layer_norm_epsilon", 1e-5f);
    char *tok[P_VOCAB];
    for (int i = 0; i < 256; i++) {
        tok[i] = malloc(4);
        gpt2_char(i, tok[i]);
    }
    tok[256] = strdup("<|endoftext|>");
    tok[257] = strdup("he");
    const char *merges[1] = {"h e"};
    gb_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    gb_kv_arr_str(&g, "tokenizer.ggml.tokens", (const char *const *)tok, P_VOCAB);
    gb_kv_arr_str(&g, "tokenizer.ggml.merges", merges, 1);
    gb_kv_u32(&g, "tokenizer.ggml.bos_token_id", 256);
    gb_kv_u32(&g, "tokenizer.ggml.eos_token_id", 256);
    for (int i = 0; i < P_VOCAB; i++)
        free(tok[i]);
    add_matrix(&g, "token_embd.weight", 0, P_VOCAB, P_DIM, 1);
    add_matrix(&g, "position_embd.weight", 0, P_CTX, P_DIM, 2);
    add_matrix(&g, "output_norm.weight", 0, 1, P_DIM, 3);
    add_matrix(&g, "output_norm.bias", 0, 1, P_DIM, 4);
    add_matrix(&g, "blk.0.attn_norm.weight", 0, 1, P_DIM, 5);
    add_matrix(&g, "blk.0.attn_norm.bias", 0, 1, P_DIM, 6);
    add_matrix(&g, "blk.0.attn_qkv.weight", 8, 3 * P_DIM, P_DIM, 7);
    add_matrix(&g, "blk.0.attn_qkv.bias", 0, 1, 3 * P_DIM, 8);
    add_matrix(&g, "blk.0.attn_output.weight", 0, P_DIM, P_DIM, 9);
    add_matrix(&g, "blk.0.attn_output.bias", 0, 1, P_DIM, 10);
    add_matrix(&g, "blk.0.ffn_norm.weight", 0, 1, P_DIM, 11);
    add_matrix(&g, "blk.0.ffn_norm.bias", 0, 1, P_DIM, 12);
    add_matrix(&g, "blk.0.ffn_up.weight", 0, P_FFN, P_DIM, 13);
    add_matrix(&g, "blk.0.ffn_up.bias", 0, 1, P_FFN, 14);
    add_matrix(&g, "blk.0.ffn_down.weight", 0, P_DIM, P_FFN, 15);
    add_matrix(&g, "blk.0.ffn_down.bias", 0, 1, P_DIM, 16);
    gb_write_file(&g, tp(in, "gpt2.gguf"));
    if (convert_from_gguf(in, tp(out, "gpt2.h5"), NULL, err, sizeof err) < 0)
        fail_msg("%s", err);
    /* q, k and v are row blocks of the fused matrix (q8_0 rows of 34 bytes) and its bias */
    size_t row = P_DIM / 32 * 34, n;
    uint8_t *qkv = malloc(3 * P_DIM * row);
    fill_bytes(qkv, 3 * P_DIM * row, 7);
    float *bias = rand_floats(3 * P_DIM, 8);
    static const char *const wn[3] = {"/layers/0/wq", "/layers/0/wk", "/layers/0/wv"};
    static const char *const bn[3] = {"/layers/0/bq", "/layers/0/bk", "/layers/0/bv"};
    for (int k = 0; k < 3; k++) {
        char qtype[16];
        int cols;
        uint8_t *w = h5_read_blocks(out, wn[k], &n, qtype, &cols);
        assert_int_equal(n, P_DIM * row);
        assert_memory_equal(w, qkv + (size_t)k * P_DIM * row, n);
        free(w);
        float *b = h5_read(out, bn[k], &n);
        assert_int_equal(n, P_DIM);
        assert_memory_equal(b, bias + k * P_DIM, n * sizeof(float));
        free(b);
    }
    free(qkv);
    free(bias);
    float *pos = h5_read(out, "/pos_embed", &n), *src = rand_floats(P_CTX * P_DIM, 2);
    assert_int_equal(n, P_CTX * P_DIM);
    assert_memory_equal(pos, src, n * sizeof(float));
    free(pos);
    free(src);
    float *bd = h5_read(out, "/layers/0/b_down", &n);
    src = rand_floats(P_DIM, 16);
    assert_memory_equal(bd, src, n * sizeof(float));
    free(bd);
    free(src);
    Tokenizer *t = h5_tokenizer(out);
    assert_int_equal(tokenizer_kind(t), TOKENIZER_GPT2);
    assert_int_equal(tokenizer_bos(t), 256);
    int *ids;
    size_t n_ids;
    assert_int_equal(tokenizer_encode(t, "hehe x", 6, &ids, &n_ids, err, sizeof err), 0);
    /* "hehe" -> he he; " x" -> ' ' 'x' (no merge) */
    assert_int_equal(n_ids, 4);
    assert_int_equal(ids[0], 257);
    assert_int_equal(ids[1], 257);
    assert_int_equal(ids[2], ' ');
    assert_int_equal(ids[3], 'x');
    free(ids);
    tokenizer_free(t);
}

static void test_convert_refusals(void **state)
{
    (void)state;
    char in[256], out[256];
    tp(out, "bad.h5");
    struct {
        LlamaOpts o;
        const char *what;
    } cases[] = {
        {{.arch = "mamba"}, "general.architecture: architecture \"mamba\" is not supported"},
        {{.bad_type = 1}, "blk.1.ffn_gate.weight: type iq4_nl is not supported"},
        {{.drop_up = 1}, "blk.0.ffn_up.weight: missing"},
        {{.rope_freqs = 1}, "rope_freqs.weight: factor 0 is"}, /* random: some negative */
        {{.rope_dims = 8}, "llama.rope.dimension_count"},
        {{.arch = "phi3"}, "blk.0.attn_qkv.weight: missing"}, /* phi3 fuses them */
        {{.arch = "phi3", .extra = "rope_factors_long.weight"}, "LongRoPE"},
        {{.arch = "qwen2", .extra = "blk.0.attn_q.bias"}, "blk.0.attn_q.bias: shape [8"},
        {{.vocab_tok = 261}, "tokenizer.ggml.tokens: 261 tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        make_llama_gguf(tp(in, "bad.gguf"), cases[i].o);
        expect_fail(convert_from_gguf(in, out, NULL, err, sizeof err), out, in, cases[i].what);
    }
    /* a damaged file: truncated in its tensor data */
    make_llama_gguf(in, (LlamaOpts){0});
    assert_int_equal(truncate(in, 5000), 0);
    expect_fail(convert_from_gguf(in, out, NULL, err, sizeof err), out, in, "truncated");
    /* the command line */
    char *argv[] = {"headsplit-convert", "--format", "gguf", "--out", out, NULL};
    assert_int_equal(convert_run_cli(5, argv, stdout, err, sizeof err), -1);
    assert_non_null(strstr(err, "--file"));
    char *argv2[] = {"headsplit-convert", "--format", "hf", "--file", in, "--out", out, NULL};
    assert_int_equal(convert_run_cli(7, argv2, stdout, err, sizeof err), -1);
    assert_non_null(strstr(err, "--file: not used with --format hf"));
}

/* The stories260K fixture's tokenizer encodes as llama2.c's tok512.bin does. */
static void test_tokenizer_matches_llama2c(void **state)
{
    (void)state;
    char gp[512], tp2[512];
    sp(gp, "gguf/stories260K-pad256-F32.gguf");
    sp(tp2, "stories260K/tok512.bin");
    if (access(gp, R_OK) != 0 || access(tp2, R_OK) != 0) {
        print_message("skipped: %s or %s absent\n", gp, tp2);
        skip();
    }
    GgufFile *g;
    Tokenizer *a, *b;
    if (gguf_open(&g, gp, err, sizeof err) < 0 || gguf_load_tokenizer(&a, g, err, sizeof err) < 0)
        fail_msg("%s", err);
    gguf_close(g);
    if (tokenizer_load_llama2c(&b, tp2, 512, err, sizeof err) < 0)
        fail_msg("%s", err);
    static const char *const texts[] = {"Once upon a time", "Lily and Tim played.\n\"Hi!\"",
                                        "caf\xc3\xa9 \xe2\x82\xac 123  x", ""};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int *ia, *ib;
        size_t na, nb;
        assert_int_equal(tokenizer_encode(a, texts[i], strlen(texts[i]), &ia, &na, err,
                                          sizeof err), 0);
        assert_int_equal(tokenizer_encode(b, texts[i], strlen(texts[i]), &ib, &nb, err,
                                          sizeof err), 0);
        assert_int_equal(na, nb);
        assert_memory_equal(ia, ib, na * sizeof *ia);
        char *da = tokenizer_decode(a, ia, na), *db = tokenizer_decode(b, ib, nb);
        assert_string_equal(da, db);
        free(da);
        free(db);
        free(ia);
        free(ib);
    }
    tokenizer_free(a);
    tokenizer_free(b);
}

/* A gpt2 tokenizer in GGUF metadata with tokenizer.ggml.pre = pre (NULL: absent): the 256
 * byte pieces, "12" "123" " ab" "ab", then <|ctl|> (CONTROL) and <x> (USER_DEFINED). */
static int load_pre(const char *pre, Tokenizer **t)
{
    GgufBuilder g = {0};
    enum { V = 262 };
    char *tok[V];
    int32_t ty[V];
    for (int i = 0; i < 256; i++) {
        tok[i] = malloc(4);
        gpt2_char(i, tok[i]);
        ty[i] = 1;
    }
    tok[256] = strdup("12");
    tok[257] = strdup("123");
    tok[258] = strdup("\xc4\xa0" "ab"); /* U+0120 (the space's letter), a, b */
    tok[259] = strdup("ab");
    tok[260] = strdup("<|ctl|>");
    tok[261] = strdup("<x>");
    ty[256] = ty[257] = ty[258] = ty[259] = 1;
    ty[260] = 3;
    ty[261] = 4;
    const char *merges[4] = {"1 2", "12 3", "a b", "\xc4\xa0 ab"};
    gb_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    if (pre)
        gb_kv_str(&g, "tokenizer.ggml.pre", pre);
    gb_kv_arr_str(&g, "tokenizer.ggml.tokens", (const char *const *)tok, V);
    gb_kv_arr_i32(&g, "tokenizer.ggml.token_type", ty, V);
    gb_kv_arr_str(&g, "tokenizer.ggml.merges", merges, 4);
    gb_kv_u32(&g, "tokenizer.ggml.bos_token_id", 260);
    gb_kv_u32(&g, "tokenizer.ggml.eos_token_id", 260);
    for (int i = 0; i < V; i++)
        free(tok[i]);
    size_t len;
    uint8_t *b = gb_finish(&g, &len);
    GgufFile *gf;
    int rc = gguf_open_mem(&gf, b, len, "pre.gguf", err, sizeof err);
    if (rc == 0) {
        rc = gguf_load_tokenizer(t, gf, err, sizeof err);
        gguf_close(gf);
    }
    free(b);
    return rc;
}

/* tokenizer.ggml.pre: the family's split (Llama 3: digits by three and merges ignored for a
 * whole piece; Qwen2 and SmolLM: digit by digit), GPT-2's where absent or named so, a
 * warning and GPT-2's for a name llama.cpp knows but we lack, a refusal for one it refuses;
 * CONTROL and USER_DEFINED tokens are matched in the text as added tokens. */
static void test_gguf_pre(void **state)
{
    (void)state;
    static const struct {
        const char *pre;
        TokenizerKind kind;
        int bos; /* BOS added by default */
        int want[12];
        size_t n;
    } cases[] = {
        {NULL, TOKENIZER_GPT2, 0, {257, 257, 258}, 3},
        {"gpt-2", TOKENIZER_GPT2, 0, {257, 257, 258}, 3},
        {"starcoder", TOKENIZER_GPT2, 0, {257, 257, 258}, 3}, /* with a warning */
        {"llama-bpe", TOKENIZER_BPE_HF, 1, {260, 257, 257, 258}, 4},
        {"qwen2", TOKENIZER_BPE_HF, 0, {'1', '2', '3', '1', '2', '3', 258}, 7},
        {"smollm", TOKENIZER_BPE_HF, 0, {'1', '2', '3', '1', '2', '3', 258}, 7},
        /* llama.cpp's default: "123123" then "[0-9][0-9][0-9]" splits it in three */
        {"default", TOKENIZER_BPE_HF, 0, {257, 257, 258}, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Tokenizer *t = NULL;
        if (load_pre(cases[i].pre, &t) != 0)
            fail_msg("%s: %s", cases[i].pre ? cases[i].pre : "(absent)", err);
        assert_int_equal(tokenizer_kind(t), cases[i].kind);
        int *ids;
        size_t n;
        assert_int_equal(tokenizer_encode(t, "123123 ab", 9, &ids, &n, err, sizeof err), 0);
        if (n != cases[i].n || memcmp(ids, cases[i].want, n * sizeof *ids) != 0)
            fail_msg("case %zu (%s): %zu ids, first %d", i, cases[i].pre, n, n ? ids[0] : -1);
        free(ids);
        if (cases[i].kind == TOKENIZER_BPE_HF) { /* added tokens split before the words */
            assert_int_equal(tokenizer_encode_opts(t, "ab<|ctl|><x>ab", 14, 0, &ids, &n, err,
                                                   sizeof err), 0);
            int want[4] = {259, 260, 261, 259};
            assert_int_equal(n, 4);
            assert_memory_equal(ids, want, sizeof want);
            free(ids);
        }
        assert_int_equal(tokenizer_bos(t), 260);
        tokenizer_free(t);
    }
    Tokenizer *t = NULL;
    assert_int_equal(load_pre("no-such-pre", &t), -1);
    assert_null(t);
    assert_non_null(strstr(err, "pre.gguf: key tokenizer.ggml.pre"));
    assert_non_null(strstr(err, "no-such-pre"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_values),
        cmocka_unit_test(test_reader_truncated),
        cmocka_unit_test(test_reader_corrupted),
        cmocka_unit_test(test_reader_refusals),
        cmocka_unit_test(test_convert_llama_f32),
        cmocka_unit_test(test_convert_llama_blocks),
        cmocka_unit_test(test_convert_gpt2),
        cmocka_unit_test(test_gguf_pre),
        cmocka_unit_test(test_convert_refusals),
        cmocka_unit_test(test_tokenizer_matches_llama2c),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
