/* test_convert.c: headsplit-convert conversions that must succeed.  Real fixtures from
 * ../shared/models (skipped when absent): stories260K (llama2c, every tensor against the raw
 * file), stories260K-hf (bit for bit against the llama2c conversion through the README's
 * inverse q/k permutation), gpt2-tiny-random (Conv1D transposes against the safetensors source;
 * tokenizer.json and vocab.json + merges.txt).  Self-made fixtures: a llama2c checkpoint with a
 * separate classifier, an unprefixed untied GPT-2, a llama with BF16/F16 tensors, the same llama
 * sharded, and synthetic models (deterministic to the byte). */
#define _XOPEN_SOURCE 700
#include "convert_fixtures.h"

static float *read_raw(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *buf = malloc((size_t)len);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len / 4;
    return buf;
}

static void assert_tensor(const char *file, const char *dset, const float *want, size_t n)
{
    size_t have_n;
    float *have = h5_read(file, dset, &have_n);
    assert_int_equal(have_n, n);
    if (memcmp(have, want, n * sizeof(float)) != 0)
        fail_msg("%s: %s differs from its source", file, dset);
    free(have);
}

static void assert_ids(const Tokenizer *t, const char *text, const int *want, size_t n)
{
    int *ids;
    size_t n_ids;
    assert_int_equal(tokenizer_encode(t, text, strlen(text), &ids, &n_ids, err, sizeof err), 0);
    assert_int_equal(n_ids, n);
    assert_memory_equal(ids, want, n * sizeof(int));
    free(ids);
}

static void convert_llama2c_ok(const char *ck, const char *tk, const char *out)
{
    if (convert_from_llama2c(ck, tk, out, NULL, NULL, err, sizeof err) < 0)
        fail_msg("%s", err);
}

static void convert_hf_ok(const char *dir, const char *out)
{
    if (convert_from_hf(dir, out, NULL, NULL, err, sizeof err) < 0)
        fail_msg("%s", err);
}

static void test_llama2c_stories260k(void **state)
{
    (void)state;
    NEED_SHARED();
    char ck[512], tk[512], out[256], src[512];
    ConvertStats st;
    sp(ck, "stories260K/stories260K.bin");
    sp(tk, "stories260K/tok512.bin");
    if (convert_from_llama2c(ck, tk, tp(out, "s260.h5"), NULL, &st, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_int_equal(st.n_tensors, 47);
    check_layout(out);
    ModelConfig c;
    h5_config(out, &c, src, sizeof src);
    assert_int_equal(c.arch, ARCH_LLAMA);
    assert_int_equal(c.dim, 64);
    assert_int_equal(c.n_layers, 5);
    assert_int_equal(c.n_heads, 8);
    assert_int_equal(c.n_kv_heads, 4);
    assert_int_equal(c.head_dim, 8);
    assert_int_equal(c.ffn_dim, 172);
    assert_int_equal(c.vocab_size, 512);
    assert_int_equal(c.context_length, 512);
    assert_int_equal(c.tied_embeddings, 1);
    assert_int_equal(c.rope_style, ROPE_INTERLEAVED);
    assert_true(c.norm_eps == 1e-5f && c.rope_theta == 10000.0f);
    assert_int_equal(c.bos_id, 1);
    assert_int_equal(c.eos_id, 2);
    assert_non_null(strstr(src, "llama2c"));
    assert_non_null(strstr(src, ck));
    /* every tensor against its block of the raw file (7-int header = 7 floats) */
    size_t n;
    float *raw = read_raw(ck, &n), *w = raw + 7;
    size_t V = 512, D = 64, L = 5, F = 172, KV = 32;
    size_t o_rms = V * D, o_wq = o_rms + L * D, o_wk = o_wq + L * D * D, o_wv = o_wk + L * KV * D;
    size_t o_wo = o_wv + L * KV * D, o_rf = o_wo + L * D * D, o_w1 = o_rf + L * D;
    size_t o_w2 = o_w1 + L * F * D, o_w3 = o_w2 + L * F * D, o_fin = o_w3 + L * F * D;
    for (size_t l = 0; l < L; l++) {
        char p[64];
        struct { const char *nm; size_t off, per; } b[] = {
            {"attn_norm", o_rms, D}, {"wq", o_wq, D * D},      {"wk", o_wk, KV * D},
            {"wv", o_wv, KV * D},    {"wo", o_wo, D * D},      {"ffn_norm", o_rf, D},
            {"w_gate", o_w1, F * D}, {"w_down", o_w2, F * D},  {"w_up", o_w3, F * D},
        };
        for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
            snprintf(p, sizeof p, "/layers/%zu/%s", l, b[i].nm);
            assert_tensor(out, p, w + b[i].off + l * b[i].per, b[i].per);
        }
    }
    assert_tensor(out, "/embed", w, V * D);
    assert_tensor(out, "/final_norm", w + o_fin, D);
    assert_int_equal(n, 7 + o_fin + D + 512 * 8); /* + RoPE tables, no classifier */
    free(raw);
    Tokenizer *t = h5_tokenizer(out);
    assert_int_equal(tokenizer_vocab_size(t), 512);
    assert_ids(t, "Once upon a time", (int[]){1, 403, 407, 261, 378}, 5);
    tokenizer_free(t);
}

/* HF q/k rows are permuted per head (r0 r2 r4 .. r1 r3 ..); undo and compare bit for bit. */
static void assert_unpermuted(const char *hf, const char *l2c, const char *dset, int heads,
                              int hd, int dim)
{
    size_t n;
    float *a = h5_read(hf, dset, &n), *b = h5_read(l2c, dset, NULL);
    assert_int_equal(n, (size_t)heads * (size_t)hd * (size_t)dim);
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < hd / 2; i++) {
            const float *even = b + ((size_t)(h * hd + 2 * i)) * (size_t)dim;
            const float *odd = b + ((size_t)(h * hd + 2 * i + 1)) * (size_t)dim;
            assert_memory_equal(a + (size_t)(h * hd + i) * (size_t)dim, even,
                                (size_t)dim * sizeof(float));
            assert_memory_equal(a + (size_t)(h * hd + hd / 2 + i) * (size_t)dim, odd,
                                (size_t)dim * sizeof(float));
        }
    free(a);
    free(b);
}

static void test_hf_stories260k_matches_llama2c(void **state)
{
    (void)state;
    NEED_SHARED();
    char ck[512], tk[512], dir[512], a[256], b[256], src[512];
    convert_llama2c_ok(sp(ck, "stories260K/stories260K.bin"), sp(tk, "stories260K/tok512.bin"),
                       tp(a, "s260_l2c.h5"));
    convert_hf_ok(sp(dir, "stories260K-hf"), tp(b, "s260_hf.h5"));
    check_layout(b);
    ModelConfig ca, cb;
    h5_config(a, &ca, NULL, 0);
    h5_config(b, &cb, src, sizeof src);
    assert_int_equal(cb.rope_style, ROPE_HALF);
    cb.rope_style = ROPE_INTERLEAVED;
    assert_memory_equal(&ca, &cb, sizeof ca);
    assert_non_null(strstr(src, "--format hf"));
    DsetSpec d[512];
    int n = layout_of(&ca, d, 512);
    for (int i = 0; i < n; i++) {
        const char *leaf = strrchr(d[i].name, '/') + 1;
        if (strcmp(leaf, "wq") == 0)
            assert_unpermuted(b, a, d[i].name, 8, 8, 64);
        else if (strcmp(leaf, "wk") == 0)
            assert_unpermuted(b, a, d[i].name, 4, 8, 64);
        else {
            size_t na;
            float *x = h5_read(a, d[i].name, &na);
            assert_tensor(b, d[i].name, x, na);
            free(x);
        }
    }
    Tokenizer *t = h5_tokenizer(b);
    assert_int_equal(tokenizer_kind(t), TOKENIZER_SPM_MERGES);
    assert_ids(t, "Once upon a time", (int[]){1, 403, 407, 261, 378}, 5);
    tokenizer_free(t);
}

/* Every GPT-2 tensor of file `out` against the safetensors source (names with `prefix`). */
static void check_gpt2_against(const char *out, const char *st_path, const char *prefix,
                               int L, int D, int F)
{
    SafeTensors *st;
    if (safetensors_open(&st, st_path, err, sizeof err) < 0)
        fail_msg("%s", err);
    size_t nd = (size_t)D, nf = (size_t)F;
    float *src = malloc(nd * nf * 4 * sizeof(float) + nd * 3 * nd * sizeof(float));
    char name[128], p[64];
#define SRC(fmt, ...)                                                                       \
    do {                                                                                     \
        snprintf(name, sizeof name, "%s" fmt, prefix, __VA_ARGS__);                          \
        const StTensor *t_ = safetensors_find(st, name);                                    \
        assert_non_null(t_);                                                                 \
        assert_int_equal(safetensors_read(st, t_, 0, t_->n_elems, src, err, sizeof err), 0); \
    } while (0)
#define OUT(leaf) (snprintf(p, sizeof p, "/layers/%d/%s", l, leaf), h5_read(out, p, NULL))
    for (int l = 0; l < L; l++) {
        SRC("h.%d.attn.c_attn.weight", l); /* [D][3D], [in][out] */
        float *q = OUT("wq"), *k = OUT("wk"), *v = OUT("wv");
        for (size_t o = 0; o < nd; o++)
            for (size_t i = 0; i < nd; i++) {
                assert_true(q[o * nd + i] == src[i * 3 * nd + o]);
                assert_true(k[o * nd + i] == src[i * 3 * nd + nd + o]);
                assert_true(v[o * nd + i] == src[i * 3 * nd + 2 * nd + o]);
            }
        free(q), free(k), free(v);
        SRC("h.%d.attn.c_attn.bias", l);
        assert_tensor(out, (snprintf(p, sizeof p, "/layers/%d/bq", l), p), src, nd);
        assert_tensor(out, (snprintf(p, sizeof p, "/layers/%d/bk", l), p), src + nd, nd);
        assert_tensor(out, (snprintf(p, sizeof p, "/layers/%d/bv", l), p), src + 2 * nd, nd);
        SRC("h.%d.attn.c_proj.weight", l);
        float *wo = OUT("wo");
        for (size_t o = 0; o < nd; o++)
            for (size_t i = 0; i < nd; i++)
                assert_true(wo[o * nd + i] == src[i * nd + o]);
        free(wo);
        SRC("h.%d.mlp.c_fc.weight", l); /* [D][F] */
        float *up = OUT("w_up");
        for (size_t f = 0; f < nf; f++)
            for (size_t i = 0; i < nd; i++)
                assert_true(up[f * nd + i] == src[i * nf + f]);
        free(up);
        SRC("h.%d.mlp.c_proj.weight", l); /* [F][D] */
        float *down = OUT("w_down");
        for (size_t o = 0; o < nd; o++)
            for (size_t f = 0; f < nf; f++)
                assert_true(down[o * nf + f] == src[f * nd + o]);
        free(down);
        struct { const char *src, *dst; size_t n; } vec[] = {
            {"ln_1.weight", "attn_norm", nd}, {"ln_1.bias", "attn_norm_bias", nd},
            {"attn.c_proj.bias", "bo", nd},   {"ln_2.weight", "ffn_norm", nd},
            {"ln_2.bias", "ffn_norm_bias", nd}, {"mlp.c_fc.bias", "b_up", nf},
            {"mlp.c_proj.bias", "b_down", nd},
        };
        for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
            SRC("h.%d.%s", l, vec[i].src);
            snprintf(p, sizeof p, "/layers/%d/%s", l, vec[i].dst);
            assert_tensor(out, p, src, vec[i].n);
        }
    }
    SRC("ln_f.%s", "weight");
    assert_tensor(out, "/final_norm", src, nd);
    SRC("ln_f.%s", "bias");
    assert_tensor(out, "/final_norm_bias", src, nd);
    free(src);
    const StTensor *wte = safetensors_find(st, (snprintf(name, sizeof name, "%swte.weight",
                                                         prefix), name));
    const StTensor *wpe = safetensors_find(st, (snprintf(name, sizeof name, "%swpe.weight",
                                                         prefix), name));
    src = malloc((size_t)wte->n_elems * sizeof(float));
    assert_int_equal(safetensors_read(st, wte, 0, wte->n_elems, src, err, sizeof err), 0);
    assert_tensor(out, "/embed", src, (size_t)wte->n_elems);
    assert_int_equal(safetensors_read(st, wpe, 0, wpe->n_elems, src, err, sizeof err), 0);
    assert_tensor(out, "/pos_embed", src, (size_t)wpe->n_elems);
    free(src);
#undef SRC
#undef OUT
    safetensors_close(st);
}

static void test_hf_gpt2_tiny(void **state)
{
    (void)state;
    NEED_SHARED();
    char dir[512], stp[512], out[256];
    convert_hf_ok(sp(dir, "gpt2-tiny-random"), tp(out, "g2.h5"));
    check_layout(out);
    ModelConfig c;
    h5_config(out, &c, NULL, 0);
    assert_int_equal(c.arch, ARCH_GPT2);
    assert_int_equal(c.dim, 64);
    assert_int_equal(c.n_layers, 2);
    assert_int_equal(c.n_heads, 4);
    assert_int_equal(c.n_kv_heads, 4);
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.ffn_dim, 256); /* n_inner null */
    assert_int_equal(c.vocab_size, 50257);
    assert_int_equal(c.context_length, 128);
    assert_int_equal(c.tied_embeddings, 1);
    assert_int_equal(c.rope_style, ROPE_NONE);
    assert_true(c.norm_eps == 1e-5f);
    assert_int_equal(c.bos_id, 50256);
    assert_int_equal(c.eos_id, 50256);
    check_gpt2_against(out, sp(stp, "gpt2-tiny-random/model.safetensors"), "transformer.", 2,
                       64, 256);
    Tokenizer *t = h5_tokenizer(out);
    assert_int_equal(tokenizer_kind(t), TOKENIZER_GPT2);
    assert_ids(t, "Hello, my name is", (int[]){15496, 11, 616, 1438, 318}, 5);
    tokenizer_free(t);

    /* the same directory without tokenizer.json: vocab.json + merges.txt */
    char d2[256], a[512], b[512], out2[256];
    mkdir(tp(d2, "g2_vocab_merges"), 0700);
    const char *files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "%s/gpt2-tiny-random/%s", shared_dir(), files[i]);
        snprintf(b, sizeof b, "%s/%s", d2, files[i]);
        assert_int_equal(symlink(a, b), 0);
    }
    convert_hf_ok(d2, tp(out2, "g2_vm.h5"));
    same_tensors(out, out2);
    t = h5_tokenizer(out2);
    assert_int_equal(tokenizer_kind(t), TOKENIZER_GPT2);
    assert_int_equal(tokenizer_vocab_size(t), 50257);
    assert_ids(t, "Hello, my name is", (int[]){15496, 11, 616, 1438, 318}, 5);
    tokenizer_free(t);
}

static void test_hf_gpt2_unprefixed_untied(void **state)
{
    (void)state;
    char dir[256], out[256], stp[512];
    StModel m;
    make_gpt2_dir(tp(dir, "g2_small"), &m, gpt2_config());
    convert_hf_ok(dir, tp(out, "g2_small.h5"));
    check_layout(out);
    ModelConfig c;
    h5_config(out, &c, NULL, 0);
    assert_int_equal(c.tied_embeddings, 0);
    assert_int_equal(c.ffn_dim, 24);
    assert_int_equal(c.n_heads, 2);
    assert_int_equal(c.head_dim, 4);
    assert_int_equal(c.bos_id, 256);
    snprintf(stp, sizeof stp, "%s/model.safetensors", dir);
    check_gpt2_against(out, stp, "", 1, 8, 24);
    const StSpec *lm = st_get(&m, "lm_head.weight");
    assert_tensor(out, "/lm_head", lm->data, 257 * 8);
    st_free(&m);
}

static void write_llama_dir(const char *dir, const StModel *m, int sharded)
{
    char p[512];
    mkdir(dir, 0700);
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_text(p, llama_config());
    write_byte_vocab(dir);
    if (!sharded) {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        st_write(m, p, ~0ull);
        return;
    }
    uint64_t first = (1ull << 11) - 1; /* embed + layer 0 in shard 1 */
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    st_write(m, p, first);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    st_write(m, p, ~first);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(p, "w");
    fprintf(f, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    for (int i = 0; i < m->n; i++)
        fprintf(f, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"", i ? ", " : "",
                m->t[i].name, (first >> i & 1) ? 1 : 2);
    fprintf(f, "}}");
    fclose(f);
}

/* Every llama tensor of out equals the widened fixture tensor (same element order). */
static void check_llama_against(const char *out, const StModel *m)
{
    struct { const char *src, *dst; } map[] = {
        {"input_layernorm.weight", "attn_norm"}, {"self_attn.q_proj.weight", "wq"},
        {"self_attn.k_proj.weight", "wk"},       {"self_attn.v_proj.weight", "wv"},
        {"self_attn.o_proj.weight", "wo"},       {"post_attention_layernorm.weight", "ffn_norm"},
        {"mlp.gate_proj.weight", "w_gate"},      {"mlp.up_proj.weight", "w_up"},
        {"mlp.down_proj.weight", "w_down"},
    };
    for (int i = 0; i < m->n; i++) {
        const StSpec *s = &m->t[i];
        char dst[64] = "";
        int l;
        char leaf[64];
        if (sscanf(s->name, "model.layers.%d.%63s", &l, leaf) == 2) {
            for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
                if (strcmp(map[k].src, leaf) == 0)
                    snprintf(dst, sizeof dst, "/layers/%d/%s", l, map[k].dst);
        } else {
            snprintf(dst, sizeof dst, "%s", strcmp(s->name, "model.norm.weight") == 0
                     ? "/final_norm" : strcmp(s->name, "lm_head.weight") == 0 ? "/lm_head"
                     : "/embed");
        }
        size_t n = (size_t)(s->shape[0] * (s->rank == 2 ? s->shape[1] : 1)), got;
        float *have = h5_read(out, dst, &got);
        assert_int_equal(got, n);
        for (size_t e = 0; e < n; e++) {
            float want = st_val(s, e);
            if (memcmp(&have[e], &want, 4) != 0)
                fail_msg("%s[%zu] = %a, source %s %s gives %a", dst, e, (double)have[e],
                         s->dtype, s->name, (double)want);
        }
        free(have);
    }
}

static void test_hf_llama_16bit_and_sharded(void **state)
{
    (void)state;
    char dir[256], dir2[256], out[256], out2[256];
    StModel m;
    make_llama_model(&m);
    write_llama_dir(tp(dir, "llama_small"), &m, 0);
    convert_hf_ok(dir, tp(out, "llama_small.h5"));
    check_layout(out);
    ModelConfig c;
    h5_config(out, &c, NULL, 0);
    assert_int_equal(c.arch, ARCH_LLAMA);
    assert_int_equal(c.rope_style, ROPE_HALF);
    assert_int_equal(c.n_kv_heads, 2);
    assert_int_equal(c.head_dim, 4);
    assert_int_equal(c.context_length, 64);
    assert_int_equal(c.tied_embeddings, 0);
    assert_true(c.rope_theta == 500000.0f && c.norm_eps == 1e-6f);
    assert_int_equal(c.bos_id, -1); /* null */
    assert_int_equal(c.eos_id, -1); /* absent */
    check_llama_against(out, &m);

    write_llama_dir(tp(dir2, "llama_sharded"), &m, 1);
    convert_hf_ok(dir2, tp(out2, "llama_sharded.h5"));
    same_tensors(out, out2);
    st_free(&m);
}

static void test_llama2c_separate_classifier(void **state)
{
    (void)state;
    char ck[256], tk[256], out[256];
    const int32_t hdr[7] = TINY_HDR;
    make_llama2c(tp(ck, "tiny.bin"), hdr, 0);
    make_tok259(tp(tk, "tiny_tok.bin"), 0);
    convert_llama2c_ok(ck, tk, tp(out, "tiny.h5"));
    check_layout(out);
    ModelConfig c;
    h5_config(out, &c, NULL, 0);
    assert_int_equal(c.tied_embeddings, 0);
    assert_int_equal(c.vocab_size, 259);
    assert_int_equal(c.n_kv_heads, 1);
    /* k-th float is k: blocks emb 2072, rms 16, wq 128, wk 64, wv 64, wo 128, rms 16,
     * w1 256, w2 256, w3 256, final 8, RoPE 16, classifier 2072 */
    size_t n;
    float *lm = h5_read(out, "/lm_head", &n), *up = h5_read(out, "/layers/1/w_up", NULL);
    float *fin = h5_read(out, "/final_norm", NULL), *wq = h5_read(out, "/layers/1/wq", NULL);
    assert_int_equal(n, 2072);
    for (size_t i = 0; i < n; i++)
        assert_true(lm[i] == (float)(3280 + i));
    for (size_t i = 0; i < 128; i++)
        assert_true(up[i] == (float)(3000 + 128 + i));
    for (size_t i = 0; i < 8; i++)
        assert_true(fin[i] == (float)(3256 + i));
    for (size_t i = 0; i < 64; i++)
        assert_true(wq[i] == (float)(2072 + 16 + 64 + i));
    free(lm), free(up), free(fin), free(wq);
}

static int bytes_equal(const char *a, const char *b)
{
    size_t na, nb;
    float *x = read_raw(a, &na), *y = read_raw(b, &nb);
    int same = na == nb && memcmp(x, y, na * 4) == 0;
    free(x);
    free(y);
    return same;
}

static void synth_ok(const char *spec, uint64_t seed, int layers, const char *tok,
                     const char *out)
{
    if (convert_make_synthetic(spec, seed, layers, tok, out, NULL, NULL, err, sizeof err) < 0)
        fail_msg("%s", err);
}

static void test_synthetic_deterministic(void **state)
{
    (void)state;
    char a[256], b[256], c3[256], d[256], src[512];
    /* the files embed HDF5 object times of the tokenizer datasets in whole seconds: compare
     * the bytes of two runs made within the same second (retried if a second boundary hit) */
    int compared = 0;
    for (int tries = 0; tries < 5 && !compared; tries++) {
        time_t t0 = time(NULL);
        synth_ok("stories260k", 5, 2, NULL, tp(a, "syn_a.h5"));
        synth_ok("stories260k", 5, 2, NULL, tp(b, "syn_b.h5"));
        if (time(NULL) != t0)
            continue;
        assert_true(bytes_equal(a, b));
        compared = 1;
    }
    assert_true(compared);
    check_layout(a);
    same_tensors(a, b);
    ModelConfig c;
    h5_config(a, &c, src, sizeof src);
    assert_int_equal(c.n_layers, 2);
    assert_int_equal(c.dim, 64);
    assert_non_null(strstr(src, "SYNTHETIC"));
    assert_non_null(strstr(src, "--seed 5"));
    /* another seed changes the weights; more layers keep the first ones */
    synth_ok("stories260k", 6, 2, NULL, tp(c3, "syn_c.h5"));
    float *x = h5_read(a, "/layers/1/wq", NULL), *y = h5_read(c3, "/layers/1/wq", NULL);
    assert_true(memcmp(x, y, 64 * 64 * sizeof(float)) != 0);
    free(y);
    synth_ok("stories260k", 5, 3, NULL, tp(d, "syn_d.h5"));
    assert_tensor(d, "/layers/1/wq", x, 64 * 64);
    free(x);
    check_layout(d);
    /* norms are 1, weights N(0, 0.02^2) */
    float *nw = h5_read(a, "/layers/0/ffn_norm", NULL), *e = h5_read(a, "/embed", NULL);
    double ss = 0;
    for (int i = 0; i < 64; i++)
        assert_true(nw[i] == 1.0f);
    for (int i = 0; i < 512 * 64; i++)
        ss += (double)e[i] * e[i];
    assert_in_range((long)(1e6 * ss / (512 * 64)), 370, 430); /* 0.02^2 = 400e-6 */
    free(nw), free(e);
    Tokenizer *t = h5_tokenizer(a);
    assert_int_equal(tokenizer_vocab_size(t), 512);
    tokenizer_free(t);
}

/* convert_stored_types: the types headsplit-convert --quantize writes, per matrix kind. */
static void test_stored_types(void **state)
{
    (void)state;
    char why[256];
    ModelConfig c;
    assert_int_equal(config_preset("llama2-7b", &c), 0);
    assert_int_equal(convert_stored_types(&c, "q4_0", why, sizeof why), 0);
    for (int k = WKIND_WQ; k < WKIND_COUNT; k++)
        assert_int_equal(c.wtype[k], QTYPE_Q4_0);
    assert_int_equal(c.wtype[WKIND_EMBED], QTYPE_Q4_0);
    assert_int_equal(c.wtype[WKIND_LM_HEAD], QTYPE_Q6_K); /* llama.cpp's output type */
    /* q4_k_m: attn_v and ffn_down Q6_K in 14 of 32 layers, so Q4_K the most */
    assert_int_equal(convert_stored_types(&c, "q4_k_m", why, sizeof why), 0);
    assert_int_equal(c.wtype[WKIND_WV], QTYPE_Q4_K);
    assert_int_equal(c.wtype[WKIND_W_GATE], QTYPE_Q4_K);
    assert_int_equal(convert_stored_types(&c, NULL, why, sizeof why), 0);
    for (int k = 0; k < WKIND_COUNT; k++)
        assert_int_equal(c.wtype[k], QTYPE_F32);
    /* rows that no block fits: stories260k's ffn_down (172 columns) is f16, its head Q8_0 */
    assert_int_equal(config_preset("stories260k", &c), 0);
    assert_int_equal(convert_stored_types(&c, "q4_0", why, sizeof why), 0);
    assert_int_equal(c.wtype[WKIND_W_DOWN], QTYPE_F16);
    assert_int_equal(c.wtype[WKIND_WQ], QTYPE_Q4_0);
    assert_int_equal(convert_stored_types(&c, "q9", why, sizeof why), -1);
    assert_non_null(strstr(why, "q9"));
}

static void test_synthetic_configs(void **state)
{
    (void)state;
    ModelConfig c;
    assert_int_equal(convert_synthetic_config("tinyllama-1.1b", 0, &c, err, sizeof err), 0);
    assert_true(c.arch == ARCH_LLAMA && c.dim == 2048 && c.ffn_dim == 5632 && c.n_layers == 22);
    assert_true(c.n_heads == 32 && c.n_kv_heads == 4 && c.head_dim == 64);
    assert_true(c.vocab_size == 32000 && c.context_length == 2048 && !c.tied_embeddings);
    assert_true(c.rope_style == ROPE_HALF && c.rope_theta == 10000.0f && c.norm_eps == 1e-5f);
    assert_int_equal(convert_synthetic_config("gpt2-small", 3, &c, err, sizeof err), 0);
    assert_true(c.arch == ARCH_GPT2 && c.dim == 768 && c.ffn_dim == 3072 && c.n_layers == 3);
    assert_true(c.n_heads == 12 && c.n_kv_heads == 12 && c.vocab_size == 50257);
    assert_true(c.context_length == 1024 && c.tied_embeddings && c.rope_style == ROPE_NONE);
    assert_int_equal(convert_synthetic_config("llama:dim=32,heads=4,kv_heads=2,ffn=40,"
                                              "vocab=300,ctx=16,tied=0,rope=half,theta=5e5",
                                              0, &c, err, sizeof err), 0);
    assert_true(c.dim == 32 && c.n_heads == 4 && c.n_kv_heads == 2 && c.head_dim == 8);
    assert_true(c.ffn_dim == 40 && c.vocab_size == 300 && !c.tied_embeddings);
    assert_true(c.rope_style == ROPE_HALF && c.rope_theta == 500000.0f && c.n_layers == 2);
    assert_int_equal(convert_synthetic_config("llama2-7b", 0, &c, err, sizeof err), 0);
    assert_true(c.dim == 4096 && c.ffn_dim == 11008 && c.n_layers == 32 && c.n_heads == 32);
    assert_true(c.n_kv_heads == 32 && c.head_dim == 128 && c.vocab_size == 32000);
    assert_true(!c.tied_embeddings && c.n_rope_freq_factors == 0);
    assert_int_equal(convert_synthetic_config("llama3-8b", 0, &c, err, sizeof err), 0);
    assert_true(c.dim == 4096 && c.ffn_dim == 14336 && c.n_layers == 32 && c.n_heads == 32);
    assert_true(c.n_kv_heads == 8 && c.head_dim == 128 && c.vocab_size == 128256);
    assert_true(c.rope_theta == 500000.0f && c.n_rope_freq_factors == 64);
    /* Llama 3.1 8B's rope_freqs.weight: 1 for the high frequencies, 8 for the low ones */
    assert_true(c.rope_freq_factors[0] == 1.0f && c.rope_freq_factors[28] == 1.0f);
    assert_true(c.rope_freq_factors[35] == 8.0f && c.rope_freq_factors[63] == 8.0f);
    assert_true(c.rope_freq_factors[29] > 1.0f && c.rope_freq_factors[34] < 8.0f);
    /* a preset with keys changed keeps the rest; the factors follow the new head_dim */
    assert_int_equal(convert_synthetic_config("llama3-8b:dim=256,ffn=512,head_dim=64", 2, &c,
                                              err, sizeof err), 0);
    assert_true(c.dim == 256 && c.ffn_dim == 512 && c.n_layers == 2 && c.n_kv_heads == 8);
    assert_true(c.vocab_size == 128256 && c.head_dim == 64 && c.n_rope_freq_factors == 32);
    const char *bad[] = {"gpt3", "llama:dim=abc", "llama:heads=3", "llama:colour=red",
                         "gpt2:kv_heads=2", "llama:dim=64,heads=8,kv_heads=3",
                         "llama3-8b:colour=red", "llama3-8b:head_dim=4096", "gpt3:dim=8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(convert_synthetic_config(bad[i], 0, &c, err, sizeof err), -1);
        assert_non_null(strstr(err, "--synthetic"));
    }
    /* a small gpt2: biases, positions, tied head */
    char out[256];
    synth_ok("gpt2:dim=32,heads=4,layers=1,vocab=300,ctx=16", 9, 0, NULL, tp(out, "sg2.h5"));
    check_layout(out);
}

static void test_synthetic_real_tokenizer(void **state)
{
    (void)state;
    NEED_SHARED();
    char tk[512], out[256], dir[512];
    synth_ok("stories260k", 1, 1, sp(tk, "stories260K/tok512.bin"), tp(out, "st_tok.h5"));
    Tokenizer *t = h5_tokenizer(out);
    assert_int_equal(tokenizer_kind(t), TOKENIZER_SPM);
    assert_ids(t, "Once upon a time", (int[]){1, 403, 407, 261, 378}, 5);
    tokenizer_free(t);
    synth_ok("stories260k", 1, 1, sp(tk, "stories260K-hf/tokenizer.json"), out);
    synth_ok("gpt2:dim=16,heads=2,layers=1,vocab=50257,ctx=8", 1, 0,
             sp(dir, "gpt2-tiny-random"), tp(out, "sg2_tok.h5"));
    ModelConfig c;
    h5_config(out, &c, NULL, 0);
    assert_int_equal(c.bos_id, 50256);
    assert_int_equal(c.eos_id, 50256);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2c_stories260k),
        cmocka_unit_test(test_hf_stories260k_matches_llama2c),
        cmocka_unit_test(test_hf_gpt2_tiny),
        cmocka_unit_test(test_hf_gpt2_unprefixed_untied),
        cmocka_unit_test(test_hf_llama_16bit_and_sharded),
        cmocka_unit_test(test_llama2c_separate_classifier),
        cmocka_unit_test(test_synthetic_deterministic),
        cmocka_unit_test(test_synthetic_configs),
        cmocka_unit_test(test_stored_types),
        cmocka_unit_test(test_synthetic_real_tokenizer),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
