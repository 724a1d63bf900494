/* fuzz_config: the model configuration checks.
 *  1. config_validate on arbitrary field values; an accepted config must have every size the
 *     engine computes from it (layer floats, KV bytes, embeddings) free of overflow, and must
 *     survive config_write + config_read unchanged.
 *  2. config_read on an in-memory HDF5 file whose /config attributes the input chooses one by
 *     one: absent, int32, int64, uint64, int8, float32, float64, fixed or variable string, or
 *     an array of two; format_version included.  Whatever it accepts must validate. */
#include "config_io.h"
#include "fuzz_common.h"
#include "h5io.h"

#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

static int mul_ok(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

static void check_sizes(const ModelConfig *c)
{
    size_t n;
    FUZZ_ASSERT(c->n_heads % c->n_kv_heads == 0, "divisible");
    FUZZ_ASSERT(config_q_per_kv(c) >= 1, "q per kv");
    size_t layer = config_layer_floats(c);
    FUZZ_ASSERT(layer > 0, "layer floats");
    FUZZ_ASSERT(mul_ok(layer, (size_t)c->n_layers, &n) && mul_ok(n, 4, &n), "model bytes");
    FUZZ_ASSERT(mul_ok((size_t)c->vocab_size, (size_t)c->dim, &n) && mul_ok(n, 4, &n), "embed");
    FUZZ_ASSERT(mul_ok((size_t)c->context_length, (size_t)c->dim, &n), "pos embed");
    size_t kv = config_kv_bytes(c, c->context_length);
    FUZZ_ASSERT(kv / 2 / sizeof(float) / (size_t)c->head_dim == (size_t)c->context_length, "kv");
    FUZZ_ASSERT(config_attn_unit_floats(c, config_q_per_kv(c)) < layer, "attn unit");
    FUZZ_ASSERT(config_proj_floats(c) < layer && config_ffn_floats(c, c->ffn_dim) < layer,
                "proj/ffn");
    FUZZ_ASSERT(c->bos_id >= -1 && c->bos_id < c->vocab_size, "bos");
    FUZZ_ASSERT(c->eos_id >= -1 && c->eos_id < c->vocab_size, "eos");
}

static void fuzz_struct(FuzzIn *in)
{
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.arch = fuzz_u8(in) & 1 ? ARCH_GPT2 : ARCH_LLAMA;
    c.dim = fuzz_int(in);
    c.n_layers = fuzz_int(in);
    c.n_heads = fuzz_int(in);
    c.n_kv_heads = fuzz_int(in);
    c.head_dim = fuzz_int(in);
    c.ffn_dim = fuzz_int(in);
    c.vocab_size = fuzz_int(in);
    c.context_length = fuzz_int(in);
    c.norm_eps = (float)fuzz_double(in);
    c.rope_theta = (float)(fuzz_u8(in) < 128 ? 10000.0 : fuzz_double(in));
    c.rope_style = (RopeStyle)(fuzz_u8(in) % 3);
    c.tied_embeddings = fuzz_u8(in) & 1;
    c.bos_id = fuzz_int(in);
    c.eos_id = fuzz_int(in);
    char err[512];
    err[0] = '\0';
    if (config_validate(&c, err, sizeof err) != 0) {
        FUZZ_ASSERT(err[0] && strncmp(err, "config", 6) == 0, "message '%s'", err);
        return;
    }
    check_sizes(&c);
    hid_t f = fuzz_h5_shared_file();
    FUZZ_ASSERT(config_write(&c, f, err, sizeof err) == 0, "%s", err);
    ModelConfig r;
    FUZZ_ASSERT(config_read(&r, f, "mem", err, sizeof err) == 0, "%s", err);
    FUZZ_ASSERT(r.arch == c.arch && r.dim == c.dim && r.n_layers == c.n_layers &&
                r.n_heads == c.n_heads && r.n_kv_heads == c.n_kv_heads &&
                r.head_dim == c.head_dim && r.ffn_dim == c.ffn_dim &&
                r.vocab_size == c.vocab_size && r.context_length == c.context_length &&
                r.norm_eps == c.norm_eps && r.rope_theta == c.rope_theta &&
                r.rope_style == c.rope_style && r.tied_embeddings == c.tied_embeddings &&
                r.bos_id == c.bos_id && r.eos_id == c.eos_id, "round trip differs");
    fuzz_h5_unlink(f, "/config");
}

/* Writes attribute name on g with a type and value chosen by the input. */
static void put_attr(hid_t g, const char *name, FuzzIn *in, const char *good_str, int good_int,
                     double good_d)
{
    uint8_t mode = fuzz_u8(in) % 12;
    hid_t sp = H5Screate(H5S_SCALAR), a = -1, t = -1;
    if (mode == 10) { /* array of two */
        H5Sclose(sp);
        hsize_t two = 2;
        sp = H5Screate_simple(1, &two, NULL);
        int32_t v[2] = {fuzz_int(in), fuzz_int(in)};
        a = H5Acreate2(g, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT32, v);
    } else if (mode == 0) { /* absent */
    } else if (mode == 1 || mode == 11) { /* the right kind of value, mostly a sane one */
        if (good_str) {
            char s[16];
            uint8_t pick = fuzz_u8(in);
            snprintf(s, sizeof s, "%s", pick < 200 ? good_str : pick < 230 ? "gpt2" : "half");
            t = H5Tcopy(H5T_C_S1);
            H5Tset_size(t, strlen(s) + 1);
            a = H5Acreate2(g, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
            H5Awrite(a, t, s);
        } else if (mode == 11 && good_d != 0) {
            a = H5Acreate2(g, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
            H5Awrite(a, H5T_NATIVE_DOUBLE, &good_d);
        } else {
            int32_t v = mode == 11 ? good_int : fuzz_int(in);
            a = H5Acreate2(g, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
            H5Awrite(a, H5T_NATIVE_INT32, &v);
        }
    } else if (mode == 2) {
        int64_t v = (int64_t)fuzz_u64(in);
        a = H5Acreate2(g, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT64, &v);
    } else if (mode == 3) {
        uint64_t v = fuzz_u64(in);
        a = H5Acreate2(g, name, H5T_STD_U64BE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_UINT64, &v);
    } else if (mode == 4) {
        int8_t v = (int8_t)fuzz_u8(in);
        a = H5Acreate2(g, name, H5T_STD_I8LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT8, &v);
    } else if (mode == 5) {
        float v = (float)fuzz_double(in);
        a = H5Acreate2(g, name, H5T_IEEE_F32BE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_FLOAT, &v);
    } else if (mode == 6) {
        double v = fuzz_double(in);
        a = H5Acreate2(g, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
    } else if (mode == 7 || mode == 8) { /* fixed string of raw bytes, any padding */
        char s[80];
        size_t n = fuzz_u8(in) % sizeof s;
        for (size_t i = 0; i < n; i++)
            s[i] = (char)fuzz_u8(in);
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, n ? n : 1);
        H5Tset_strpad(t, mode == 7 ? H5T_STR_NULLPAD : H5T_STR_SPACEPAD);
        if (!n)
            s[0] = 'x';
        a = H5Acreate2(g, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, s);
    } else { /* variable-length string */
        char s[80];
        size_t n = fuzz_u8(in) % (sizeof s - 1);
        for (size_t i = 0; i < n; i++)
            s[i] = (char)(fuzz_u8(in) | 1);
        s[n] = '\0';
        const char *ps = s;
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        a = H5Acreate2(g, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, &ps);
    }
    if (a >= 0)
        H5Aclose(a);
    if (t >= 0)
        H5Tclose(t);
    H5Sclose(sp);
}

static void fuzz_file(FuzzIn *in)
{
    static const struct { const char *name, *str; int good; double good_d; } attrs[] = {
        {"format_version", NULL, HEADSPLIT_FORMAT_VERSION, 0}, {"architecture", "llama", 0, 0},
        {"dim", NULL, 64, 0}, {"n_layers", NULL, 2, 0}, {"n_heads", NULL, 8, 0},
        {"n_kv_heads", NULL, 4, 0}, {"head_dim", NULL, 8, 0}, {"ffn_dim", NULL, 172, 0},
        {"vocab_size", NULL, 512, 0}, {"context_length", NULL, 512, 0},
        {"norm_eps", NULL, 0, 1e-5}, {"rope_theta", NULL, 0, 10000.0},
        {"rope_style", "interleaved", 0, 0}, {"tied_embeddings", NULL, 1, 0},
        {"bos_id", NULL, 1, 0}, {"eos_id", NULL, 2, 0},
    };
    hid_t f = fuzz_h5_shared_file();
    if (fuzz_u8(in) != 0xff) { /* else: no /config group at all */
        hid_t g = H5Gcreate2(f, "/config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
            put_attr(g, attrs[i].name, in, attrs[i].str, attrs[i].good, attrs[i].good_d);
        H5Gclose(g);
    }
    ModelConfig c;
    char err[1024];
    err[0] = '\0';
    if (config_read(&c, f, "fuzz.h5", err, sizeof err) == 0) {
        char verr[256];
        FUZZ_ASSERT(config_validate(&c, verr, sizeof verr) == 0, "%s", verr);
        FUZZ_ASSERT(isfinite(c.norm_eps) && isfinite(c.rope_theta), "non-finite");
        check_sizes(&c);
    } else {
        FUZZ_ASSERT(strncmp(err, "fuzz.h5: ", 9) == 0, "message does not name the file: '%s'",
                    err);
    }
    fuzz_h5_unlink(f, "/config");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzIn in = {data, size};
    if (fuzz_u8(&in) & 1)
        fuzz_file(&in);
    else
        fuzz_struct(&in);
    return 0;
}
