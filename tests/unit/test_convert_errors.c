/* test_convert_errors.c: headsplit-convert refuses every bad input with one line naming the
 * file and the field, and leaves no output behind (not even M.h5.partial); plus the command
 * line (flags, help, summary).  All fixtures are self-made, so nothing here is skipped. */
#define _XOPEN_SOURCE 700
#include "convert_fixtures.h"

static void patch_header(const char *path, int index, int32_t value)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 4L * index, SEEK_SET);
    fwrite(&value, 4, 1, f);
    fclose(f);
}

static void test_llama2c_bad_inputs(void **state)
{
    (void)state;
    char ck[256], tk[256], out[256], tk_bad[256], miss[256];
    const int32_t hdr[7] = TINY_HDR;
    make_tok259(tp(tk, "tok.bin"), 0);
    tp(out, "bad.h5");
    /* truncated checkpoint */
    make_llama2c(tp(ck, "trunc.bin"), hdr, 100);
    expect_fail(convert_from_llama2c(ck, tk, out, NULL, NULL, err, sizeof err), out, ck, "size");
    /* header dims inconsistent with the file size */
    make_llama2c(tp(ck, "dims.bin"), hdr, 0);
    patch_header(ck, 1, 32); /* hidden_dim */
    expect_fail(convert_from_llama2c(ck, tk, out, NULL, NULL, err, sizeof err), out, ck,
                "implies");
    /* negative and zero dims */
    patch_header(ck, 1, 16);
    patch_header(ck, 2, -2);
    expect_fail(convert_from_llama2c(ck, tk, out, NULL, NULL, err, sizeof err), out, ck,
                "n_layers = -2");
    patch_header(ck, 2, 2);
    patch_header(ck, 6, 0);
    expect_fail(convert_from_llama2c(ck, tk, out, NULL, NULL, err, sizeof err), out, ck, "seq_len");
    /* heads that do not divide dim, kv heads that do not divide heads */
    patch_header(ck, 6, 4);
    patch_header(ck, 3, 3);
    expect_fail(convert_from_llama2c(ck, tk, out, NULL, NULL, err, sizeof err), out, ck, "n_heads");
    patch_header(ck, 3, 2);
    patch_header(ck, 4, 3);
    expect_fail(convert_from_llama2c(ck, tk, out, NULL, NULL, err, sizeof err), out, ck,
                "n_kv_heads");
    /* a newer export format */
    patch_header(ck, 4, 1);
    patch_header(ck, 0, 0x616b3432);
    expect_fail(convert_from_llama2c(ck, tk, out, NULL, NULL, err, sizeof err), out, ck, "version");
    /* shorter than the header */
    write_text(ck, "short");
    expect_fail(convert_from_llama2c(ck, tk, out, NULL, NULL, err, sizeof err), out, ck, "header");
    /* missing checkpoint, missing tokenizer, tokenizer of another vocabulary size */
    expect_fail(convert_from_llama2c(tp(miss, "nope.bin"), tk, out, NULL, NULL, err, sizeof err),
                out, miss, "checkpoint");
    make_llama2c(tp(ck, "good.bin"), hdr, 0);
    expect_fail(convert_from_llama2c(ck, tp(miss, "nope_tok.bin"), out, NULL, NULL, err, sizeof err),
                out, miss, "tokenizer");
    make_tok259(tp(tk_bad, "tok_big.bin"), 5);
    expect_fail(convert_from_llama2c(ck, tk_bad, out, NULL, NULL, err, sizeof err), out, tk_bad,
                "left");
    /* an existing output survives a failed conversion */
    write_text(out, "keep");
    assert_int_equal(convert_from_llama2c(ck, tk_bad, out, NULL, NULL, err, sizeof err), -1);
    char buf[8] = "";
    FILE *f = fopen(out, "r");
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "keep");
    unlink(out);
}

/* Rewrites DIR/config.json from the given text and expects the conversion to fail. */
static void hf_expect(const char *dir, const char *config, const char *named,
                      const char *what)
{
    char p[512], out[256];
    if (config) {
        snprintf(p, sizeof p, "%s/config.json", dir);
        write_text(p, config);
    }
    expect_fail(convert_from_hf(dir, tp(out, "bad_hf.h5"), NULL, NULL, err, sizeof err), out, named,
                what);
}

/* gpt2_config() with key replaced by `value` (raw JSON; NULL deletes the key). */
static const char *gpt2_with(const char *key, const char *value)
{
    static char buf[2048];
    json_t *o = json_loads(gpt2_config(), 0, NULL);
    if (value)
        json_object_set_new(o, key, json_loads(value, JSON_DECODE_ANY, NULL));
    else
        json_object_del(o, key);
    char *s = json_dumps(o, 0);
    snprintf(buf, sizeof buf, "%s", s);
    free(s);
    json_decref(o);
    return buf;
}

static void test_hf_gpt2_bad_inputs(void **state)
{
    (void)state;
    char dir[256], cfg[512], stp[512], vj[512], vj2[512];
    StModel m;
    make_gpt2_dir(tp(dir, "g2_bad"), &m, gpt2_config());
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(stp, sizeof stp, "%s/model.safetensors", dir);
    hf_expect(dir, gpt2_with("n_embd", NULL), cfg, "n_embd: missing");
    hf_expect(dir, gpt2_with("n_head", "3"), cfg, "n_embd");
    hf_expect(dir, gpt2_with("n_layer", "0"), cfg, "n_layer");
    hf_expect(dir, gpt2_with("n_layer", "\"two\""), cfg, "n_layer: expected an integer");
    hf_expect(dir, gpt2_with("activation_function", "\"relu\""), cfg, "activation_function");
    hf_expect(dir, gpt2_with("scale_attn_by_inverse_layer_idx", "true"), cfg, "unsupported");
    hf_expect(dir, gpt2_with("architectures", "[\"BertModel\"]"), cfg, "architectures");
    hf_expect(dir, gpt2_with("bos_token_id", "999"), cfg, "bos_id");
    hf_expect(dir, "{\"n_embd\": 8,", cfg, "invalid JSON");
    /* tensors that disagree with the config, or are missing */
    hf_expect(dir, gpt2_with("n_inner", "32"), stp, "h.0.mlp.c_fc.weight: shape [8, 24]");
    hf_expect(dir, gpt2_with("n_layer", "2"), dir, "h.1.ln_1.weight: missing");
    write_text(cfg, gpt2_config());
    st_write(&m, stp, ~(1ull << 16)); /* no lm_head.weight, but untied */
    hf_expect(dir, NULL, dir, "lm_head.weight: missing");
    /* broken safetensors files */
    write_text(stp, "{}");
    hf_expect(dir, NULL, stp, "header length");
    st_write(&m, stp, ~0ull);
    struct stat sb;
    assert_int_equal(stat(stp, &sb), 0);
    assert_int_equal(truncate(stp, sb.st_size - 16), 0); /* ln_f.bias and lm_head cut */
    hf_expect(dir, NULL, stp, "outside the data");
    m.t[3].dtype = "I16";
    st_write(&m, stp, ~0ull);
    hf_expect(dir, NULL, stp, "unsupported dtype I16");
    m.t[3].dtype = "F32";
    unlink(stp);
    hf_expect(dir, NULL, dir, "model.safetensors");
    st_write(&m, stp, ~0ull);
    /* missing tokenizer */
    snprintf(vj, sizeof vj, "%s/vocab.json", dir);
    snprintf(vj2, sizeof vj2, "%s/vocab.json.off", dir);
    assert_int_equal(rename(vj, vj2), 0);
    hf_expect(dir, NULL, dir, "tokenizer");
    assert_int_equal(rename(vj2, vj), 0);
    /* the directory now converts */
    char out[256];
    assert_int_equal(convert_from_hf(dir, tp(out, "g2_ok.h5"), NULL, NULL, err, sizeof err), 0);
    st_free(&m);
    /* a synthetic model whose tokenizer has another vocabulary size */
    tp(out, "syn_bad.h5");
    expect_fail(convert_make_synthetic("stories260k", 1, 1, dir, out, NULL, NULL, err, sizeof err),
                out, vj, "vocab_size");
    assert_int_equal(convert_make_synthetic("llama:vocab=100", 1, 1, NULL, out, NULL, NULL, err,
                                            sizeof err), -1);
    assert_non_null(strstr(err, "vocab"));
}

static void test_hf_llama_bad_config(void **state)
{
    (void)state;
    char dir[256], cfg[512];
    mkdir(tp(dir, "llama_bad"), 0700);
    write_byte_vocab(dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    const char *head = "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":16,"
                       "\"intermediate_size\":24,\"num_hidden_layers\":2,\"vocab_size\":257,";
    char text[1024];
    struct { const char *tail, *what; } cases[] = {
        {"\"num_attention_heads\":4,\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}}",
         "rope_scaling: type 'linear' is unsupported"},
        {"\"num_attention_heads\":4,\"hidden_act\":\"gelu\"}", "hidden_act"},
        {"\"num_attention_heads\":5}", "hidden_size: 16 is not divisible"},
        {"\"num_attention_heads\":4,\"num_key_value_heads\":3}", "num_key_value_heads"},
        {"\"num_attention_heads\":4,\"attention_bias\":true}", "attention_bias"},
        {"\"num_attention_heads\":4,\"rms_norm_eps\":\"small\"}", "rms_norm_eps"},
        {"\"num_attention_heads\":4,\"eos_token_id\":-3}", "eos_token_id"},
        {"\"hidden_act\":\"silu\"}", "num_attention_heads: missing"},
        {"\"num_attention_heads\":4}", "model.safetensors"}, /* config fine, no weights */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, "%s%s", head, cases[i].tail);
        hf_expect(dir, text, i + 1 < sizeof cases / sizeof cases[0] ? cfg : dir,
                  cases[i].what);
    }
    expect_fail(convert_from_hf("/nonexistent-hf-dir", tp(text, "x.h5"), NULL, NULL, err,
                                sizeof err), text, "/nonexistent-hf-dir", "config.json");
}

/* Runs convert_run_cli on the NULL-terminated arguments; output goes to a temporary file. */
static int cli(char *outbuf, size_t cap, ...)
{
    char *argv[32] = {"headsplit-convert"};
    int argc = 1;
    va_list ap;
    va_start(ap, cap);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 31;)
        argv[argc++] = a;
    va_end(ap);
    FILE *f = tmpfile();
    assert_non_null(f);
    err[0] = '\0';
    int rc = convert_run_cli(argc, argv, f, err, sizeof err);
    rewind(f);
    size_t n = fread(outbuf, 1, cap - 1, f);
    outbuf[n] = '\0';
    fclose(f);
    return rc;
}

static void expect_cli_error(int rc, const char *what)
{
    assert_int_equal(rc, -1);
    if (!strstr(err, what) || strchr(err, '\n'))
        fail_msg("message '%s' lacks '%s'", err, what);
}

static void test_cli(void **state)
{
    (void)state;
    char o[8192], ck[256], tk[256], out[256], outarg[300];
    const int32_t hdr[7] = TINY_HDR;
    make_llama2c(tp(ck, "cli.bin"), hdr, 0);
    make_tok259(tp(tk, "cli_tok.bin"), 0);
    tp(out, "cli.h5");
    assert_int_equal(cli(o, sizeof o, "--help", NULL), 0);
    assert_non_null(strstr(o, "usage: headsplit-convert --format llama2c"));
    assert_non_null(strstr(o, "tinyllama-1.1b"));
    expect_cli_error(cli(o, sizeof o, NULL), "no arguments");
    expect_cli_error(cli(o, sizeof o, "--format", "ggml", "--out", out, NULL),
                     "--format: unknown format 'ggml'");
    expect_cli_error(cli(o, sizeof o, "--format", "gguf", "--out", out, NULL),
                     "--file: missing");
    expect_cli_error(cli(o, sizeof o, "--bogus", "1", NULL), "--bogus: unknown option");
    expect_cli_error(cli(o, sizeof o, "--format", "hf", "--dir", "x", NULL), "--out: missing");
    expect_cli_error(cli(o, sizeof o, "--format", "hf", "--out", out, NULL), "--dir: missing");
    expect_cli_error(cli(o, sizeof o, "--format", "llama2c", "--checkpoint", ck, "--out", out,
                         NULL), "--tokenizer: missing");
    expect_cli_error(cli(o, sizeof o, "--format", "llama2c", "--checkpoint", ck, "--tokenizer",
                         tk, "--dir", "x", "--out", out, NULL), "--dir: not used");
    expect_cli_error(cli(o, sizeof o, "--synthetic", "stories260k", "--seed", "-1", "--out",
                         out, NULL), "--seed");
    expect_cli_error(cli(o, sizeof o, "--synthetic", "stories260k", "--seed", "12x", "--out",
                         out, NULL), "--seed");
    expect_cli_error(cli(o, sizeof o, "--synthetic", "stories260k", "--layers", "0", "--out",
                         out, NULL), "--layers");
    expect_cli_error(cli(o, sizeof o, "--synthetic", "stories260k", "--format", "hf", "--out",
                         out, NULL), "--format: not used");
    expect_cli_error(cli(o, sizeof o, "--out", out, "--out", out, NULL), "given twice");
    expect_cli_error(cli(o, sizeof o, "--format", "llama2c", "--out", NULL), "missing value");
    expect_cli_error(cli(o, sizeof o, "--format", NULL), "missing value");
    assert_false(file_exists(out));
    snprintf(outarg, sizeof outarg, "--out=%s", out);
    assert_int_equal(cli(o, sizeof o, "--format=llama2c", "--checkpoint", ck, "--tokenizer",
                         tk, outarg, NULL), 0);
    assert_non_null(strstr(o, "headsplit-convert: wrote"));
    assert_non_null(strstr(o, "untied"));
    assert_true(file_exists(out));
    assert_int_equal(cli(o, sizeof o, "--synthetic", "stories260k", "--layers", "1", "--seed",
                         "0x10", "--quiet", "--out", out, NULL), 0);
    assert_string_equal(o, "");
    ModelConfig c;
    char src[512];
    h5_config(out, &c, src, sizeof src);
    assert_int_equal(c.n_layers, 1);
    assert_non_null(strstr(src, "--seed 16"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2c_bad_inputs),
        cmocka_unit_test(test_hf_gpt2_bad_inputs),
        cmocka_unit_test(test_hf_llama_bad_config),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
