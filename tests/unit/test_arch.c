/* test_arch.c: the llama-family variants (Qwen2 biases, Llama 3.1 RoPE factors, Mistral and
 * Phi-3 sliding windows, Phi-3's fused matrices): the RoPE kernel with factors, the /config
 * fields' validation and HDF5 round trip, the attention window, and what the Hugging Face
 * reader makes of each family's config.json (and refuses).  The llama.cpp parity of whole
 * models is in tests/integration/gguf_arch.sh and hf_arch.sh. */
#define _XOPEN_SOURCE 700
#include "convert_fixtures.h"
#include "kernels.h"
#include "model.h"

static ModelConfig base_config(void)
{
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.arch = ARCH_LLAMA;
    c.dim = 16;
    c.n_layers = 1;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 4;
    c.ffn_dim = 24;
    c.vocab_size = 32;
    c.context_length = 64;
    c.norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    c.rope_style = ROPE_HALF;
    c.bos_id = c.eos_id = -1;
    return c;
}

/* Factors of 1 are the plain kernel bit for bit; others rotate by pos * freq / factor. */
static void test_rope_factors(void **state)
{
    (void)state;
    enum { HD = 16, NH = 3 };
    float a[NH * HD], b[NH * HD], x0[NH * HD], ones[HD / 2], f[HD / 2];
    for (int i = 0; i < NH * HD; i++)
        x0[i] = (float)((i * 37) % 17) * 0.1f - 0.8f;
    for (int i = 0; i < HD / 2; i++) {
        ones[i] = 1.0f;
        f[i] = 1.0f + (float)i;
    }
    for (int inter = 0; inter < 2; inter++) {
        for (int pos = 0; pos < 40; pos += 13) {
            memcpy(a, x0, sizeof a);
            memcpy(b, x0, sizeof b);
            kernels_rope(a, NH, HD, pos, 500000.0f, inter);
            kernels_rope_factors(b, NH, HD, pos, 500000.0f, inter, ones);
            assert_memory_equal(a, b, sizeof a);
            kernels_rope_factors(b, NH, HD, pos, 500000.0f, inter, NULL);
            kernels_rope(a, NH, HD, pos, 500000.0f, inter);
            assert_memory_equal(a, b, sizeof a);
            memcpy(b, x0, sizeof b);
            kernels_rope_factors(b, NH, HD, pos, 500000.0f, inter, f);
            for (int h = 0; h < NH; h++)
                for (int k = 0; k < HD / 2; k++) {
                    int i0 = h * HD + (inter ? 2 * k : k);
                    int i1 = h * HD + (inter ? 2 * k + 1 : k + HD / 2);
                    double ang = pos * pow(500000.0, -2.0 * k / HD) / f[k];
                    double r0 = x0[i0] * cos(ang) - x0[i1] * sin(ang);
                    double r1 = x0[i0] * sin(ang) + x0[i1] * cos(ang);
                    assert_near(b[i0], r0, 1e-5);
                    assert_near(b[i1], r1, 1e-5);
                }
        }
    }
}

static void test_config_fields(void **state)
{
    (void)state;
    char verr[256], path[256];
    ModelConfig c = base_config(), r;
    assert_int_equal(config_validate(&c, verr, sizeof verr), 0);
    c.sliding_window = -1;
    assert_int_equal(config_validate(&c, verr, sizeof verr), -1);
    assert_non_null(strstr(verr, "sliding_window"));
    c = base_config();
    c.qkv_bias = 2;
    assert_int_equal(config_validate(&c, verr, sizeof verr), -1);
    assert_non_null(strstr(verr, "qkv_bias"));
    c = base_config();
    c.q_prescale = 2;
    assert_int_equal(config_validate(&c, verr, sizeof verr), -1);
    assert_non_null(strstr(verr, "q_prescale"));
    c = base_config();
    c.n_rope_freq_factors = 3; /* head_dim / 2 is 2 */
    c.rope_freq_factors[0] = c.rope_freq_factors[1] = c.rope_freq_factors[2] = 1;
    assert_int_equal(config_validate(&c, verr, sizeof verr), -1);
    assert_non_null(strstr(verr, "rope_freq_factors"));
    c.n_rope_freq_factors = 2;
    c.rope_freq_factors[1] = 0;
    c.rope_freq_factors[2] = 0; /* beyond the count: never stored */
    assert_int_equal(config_validate(&c, verr, sizeof verr), -1);
    assert_non_null(strstr(verr, "rope_freq_factors[1]"));
    /* a round trip of every new field; an older file reads as none of them */
    c.rope_freq_factors[1] = 4.5f;
    c.qkv_bias = 1;
    c.sliding_window = 7;
    c.q_prescale = 1;
    size_t with_bias = config_attn_unit_floats(&c, 2);
    for (int pass = 0; pass < 2; pass++) {
        hid_t f = h5io_create(tp(path, "cfg.h5"), err, sizeof err);
        assert_true(f >= 0);
        assert_int_equal(config_write(&c, f, err, sizeof err), 0);
        H5Fclose(f);
        f = h5io_open_read(path, err, sizeof err);
        assert_true(f >= 0);
        assert_int_equal(config_read(&r, f, path, err, sizeof err), 0);
        H5Fclose(f);
        assert_int_equal(r.qkv_bias, c.qkv_bias);
        assert_int_equal(r.sliding_window, c.sliding_window);
        assert_int_equal(r.q_prescale, c.q_prescale);
        assert_int_equal(r.n_rope_freq_factors, c.n_rope_freq_factors);
        assert_memory_equal(r.rope_freq_factors, c.rope_freq_factors,
                            sizeof c.rope_freq_factors);
        unlink(path);
        c = base_config();
    }
    /* biases count in a unit's size: q rows of the heads held and k, v rows */
    assert_int_equal(with_bias - config_attn_unit_floats(&c, 2), 2 * 4 + 2 * 4);
}

/* With a window of W, position pos attends to the last W positions: the same as an
 * attention over a cache that holds only those. */
static void test_sliding_window(void **state)
{
    (void)state;
    ModelConfig c = base_config();
    enum { CAP = 12 };
    const int hd = c.head_dim, dim = c.dim, nq = config_q_per_kv(&c);
    AttnPartW w;
    memset(&w, 0, sizeof w);
    w.q0 = 0;
    w.q1 = nq;
    w.kv_cap = CAP;
    float norm[16], wq[2 * 4 * 16], wk[4 * 16], wv[4 * 16];
    for (int i = 0; i < dim; i++)
        norm[i] = 1.0f;
    for (int i = 0; i < 2 * 4 * 16; i++)
        wq[i] = (float)((i * 7) % 11) * 0.05f - 0.25f;
    for (int i = 0; i < 4 * 16; i++) {
        wk[i] = (float)((i * 5) % 13) * 0.04f - 0.2f;
        wv[i] = (float)((i * 3) % 7) * 0.1f - 0.3f;
    }
    w.norm_w = norm;
    w.wq = (QMat){.type = QTYPE_F32, .rows = nq * hd, .cols = dim, .row_stride = (size_t)dim * 4,
                   .data = wq};
    w.wk = (QMat){.type = QTYPE_F32, .rows = hd, .cols = dim, .row_stride = (size_t)dim * 4,
                   .data = wk};
    w.wv = (QMat){.type = QTYPE_F32, .rows = hd, .cols = dim, .row_stride = (size_t)dim * 4,
                   .data = wv};
    float kc[2][CAP * 4], vc[2][CAP * 4], out[2][CAP][8], x[16];
    Scratch s;
    model_scratch_init(&s, &c, CAP);
    for (int win = 0; win < 2; win++) {
        c.sliding_window = win ? 3 : 0;
        w.k_cache = kc[win];
        w.v_cache = vc[win];
        for (int pos = 0; pos < CAP; pos++) {
            for (int i = 0; i < dim; i++)
                x[i] = sinf((float)(pos * dim + i));
            model_attn_part_forward(&c, &w, &s, x, pos, out[win][pos]);
        }
    }
    /* the first 3 positions see everything either way */
    assert_memory_equal(out[0], out[1], 3 * sizeof out[0][0]);
    /* at the last position: the window's output is the attention over the last 3 rows */
    float ref[8], q[8];
    for (int i = 0; i < dim; i++)
        x[i] = sinf((float)((CAP - 1) * dim + i));
    kernels_rmsnorm(s.xn, x, norm, c.norm_eps, dim);
    kernels_matvec(q, wq, s.xn, dim, nq * hd);
    kernels_rope(q, nq, hd, CAP - 1, c.rope_theta, 0);
    kernels_attention(ref, q, kc[1] + (CAP - 3) * hd, vc[1] + (CAP - 3) * hd, s.att, nq, hd, 3);
    assert_memory_equal(ref, out[1][CAP - 1], sizeof ref);
    assert_memory_not_equal(out[0][CAP - 1], out[1][CAP - 1], sizeof ref);
    model_scratch_free(&s);
}

/* q_prescale (llama.cpp's phi3 graph): q times 1/sqrtf(hd) after RoPE, the scores unscaled;
 * otherwise the scores times 1/sqrtf(hd).  Both are llama.cpp's operations, and they round
 * differently. */
static void test_q_prescale(void **state)
{
    (void)state;
    ModelConfig c = base_config();
    enum { NQ = 2, HD = 32, NP = 40 };
    c.head_dim = HD;
    float q[NQ * HD], q0[NQ * HD], k[NP * HD], v[NP * HD], att[NP];
    float a[NQ * HD], b[NQ * HD], e[NQ * HD];
    for (int i = 0; i < NQ * HD; i++)
        q0[i] = sinf(0.37f * (float)i) * 3.0f;
    for (int i = 0; i < NP * HD; i++) {
        k[i] = cosf(0.11f * (float)i) * 2.0f;
        v[i] = sinf(0.23f * (float)i);
    }
    const float s = 1.0f / sqrtf((float)HD);
    memcpy(q, q0, sizeof q);
    assert_true(model_attn_q_scale(&c, q, NQ) == s); /* the scores scaled: q as it was */
    assert_memory_equal(q, q0, sizeof q);
    kernels_attention_scaled(a, q, k, v, att, NQ, HD, NP, s);
    kernels_attention(b, q, k, v, att, NQ, HD, NP);
    assert_memory_equal(a, b, sizeof a);
    c.q_prescale = 1;
    assert_true(model_attn_q_scale(&c, q, NQ) == 1.0f);
    for (int i = 0; i < NQ * HD; i++)
        assert_true(q[i] == q0[i] * s);
    kernels_attention_scaled(e, q, k, v, att, NQ, HD, NP, 1.0f);
    for (int i = 0; i < NQ * HD; i++)
        assert_near(e[i], a[i], 1e-5);
    assert_memory_not_equal(e, a, sizeof a); /* another rounding somewhere */
}

static const char *fam_config(const char *cls, const char *extra)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"architectures\":[\"%s\"],\"hidden_size\":16,\"intermediate_size\":24,"
             "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
             "\"vocab_size\":257,\"max_position_embeddings\":64,\"rms_norm_eps\":1e-6,"
             "\"rope_theta\":500000.0%s%s}", cls, extra[0] ? "," : "", extra);
    return buf;
}

static int read_cfg(const char *dir, const char *text, ModelConfig *c)
{
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_text(p, text);
    return convert_read_hf_config(dir, c, err, sizeof err);
}

static void test_hf_families(void **state)
{
    (void)state;
    char dir[256];
    ModelConfig c;
    mkdir(tp(dir, "fam"), 0700);
    assert_int_equal(read_cfg(dir, fam_config("Qwen2ForCausalLM", "\"use_sliding_window\":"
                                                                   "false"), &c), 0);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.rope_style, ROPE_HALF);
    assert_int_equal(read_cfg(dir, fam_config("MistralForCausalLM", "\"sliding_window\":8"), &c),
                     0);
    assert_int_equal(c.sliding_window, 8);
    assert_int_equal(c.qkv_bias, 0);
    assert_int_equal(read_cfg(dir, fam_config("MistralForCausalLM", "\"sliding_window\":null"),
                              &c), 0);
    assert_int_equal(c.sliding_window, 0);
    assert_int_equal(read_cfg(dir, fam_config("Phi3ForCausalLM", "\"sliding_window\":2047"), &c),
                     0);
    assert_int_equal(c.sliding_window, 2047);
    assert_int_equal(c.q_prescale, 1); /* llama.cpp's phi3 graph, as the GGUF import */
    assert_int_equal(read_cfg(dir, fam_config("MistralForCausalLM", ""), &c), 0);
    assert_int_equal(c.q_prescale, 0);
    /* Llama 3.1's scaling: factor 8 below the low-frequency wavelength, 1 above the high */
    assert_int_equal(read_cfg(dir, fam_config("LlamaForCausalLM",
                              "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,"
                              "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                              "\"original_max_position_embeddings\":64}"), &c), 0);
    assert_int_equal(c.n_rope_freq_factors, 2);
    assert_true(c.rope_freq_factors[0] == 1.0f); /* wavelength 2 pi */
    /* theta^(2/4) = 707: wavelength 4443 > 64; 2 pi < 64 / 4 */
    assert_true(c.rope_freq_factors[1] == 8.0f);
    struct { const char *cls, *extra, *what; } bad[] = {
        {"Qwen2ForCausalLM", "\"use_sliding_window\":true", "use_sliding_window"},
        {"Phi3ForCausalLM", "\"rope_scaling\":{\"type\":\"longrope\"}", "LongRoPE"},
        {"Phi3ForCausalLM", "\"partial_rotary_factor\":0.5", "partial_rotary_factor"},
        {"LlamaForCausalLM", "\"rope_scaling\":{\"rope_type\":\"yarn\"}", "rope_scaling: type"},
        {"LlamaForCausalLM", "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":-1}",
         "rope_scaling: factor"},
        {"MistralForCausalLM", "\"sliding_window\":-4", "sliding_window"},
        {"Gemma2ForCausalLM", "", "Qwen2ForCausalLM"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(read_cfg(dir, fam_config(bad[i].cls, bad[i].extra), &c), -1);
        if (!strstr(err, bad[i].what) || !strstr(err, "config.json"))
            fail_msg("case %zu: message '%s' lacks '%s'", i, err, bad[i].what);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_factors),
        cmocka_unit_test(test_config_fields),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_q_prescale),
        cmocka_unit_test(test_hf_families),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
