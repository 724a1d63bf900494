/* test_qmodel.c: quantized weights from file to forward pass.  The HDF5 form (h5io's
 * quantized-tensor helpers: rows streamed across leading dimensions, whole-row and
 * block-aligned column hyperslabs, errors naming the dataset), llama-quantize's choice of a
 * type per tensor (writer_pick_type), and a synthetic model converted with --quantize:
 * its loaders hold exactly the file's blocks (no float32 copy), a row slice computes the
 * same bits as the whole matrix, an unaligned column cut is refused by name, and the
 * quantized forward stays close to the float32 forward of the dequantized weights. */
#define _XOPEN_SOURCE 700
#include "convert_fixtures.h"

#include "../../src/convert/convert_internal.h"
#include "kernels.h"
#include "model.h"
#include "quant.h"

#include <math.h>

/* Deterministic values of row r (n of them). */
static void row_values(float *x, int r, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = sinf(0.37f * (float)(r * n + i)) * (1.0f + (float)(i % 7));
}

static void test_h5io_roundtrip(void **state)
{
    (void)state;
    char path[256];
    hid_t f = h5io_create(tp(path, "q.h5"), err, sizeof err);
    assert_true(f >= 0);
    /* [2][3][64] in q8_0: six rows written as 4 + 2, the first run crossing dimension 0. */
    const uint64_t dims[3] = {2, 3, 64};
    hid_t d = h5io_create_qtensor(f, "/layers/0/wq", 3, dims, QTYPE_Q8_0, err, sizeof err);
    assert_true(d >= 0);
    const size_t rb = quant_row_bytes(QTYPE_Q8_0, 64);
    unsigned char *all = malloc(6 * rb), *back = malloc(6 * rb);
    float x[64];
    for (int r = 0; r < 6; r++) {
        row_values(x, r, 64);
        quant_quantize_row(all + (size_t)r * rb, x, QTYPE_Q8_0, 64);
    }
    assert_int_equal(h5io_write_qrows(d, 0, 4, all, err, sizeof err), 0);
    assert_int_equal(h5io_write_qrows(d, 4, 2, all + 4 * rb, err, sizeof err), 0);
    assert_int_equal(h5io_write_qrows(d, 5, 2, all, err, sizeof err), -1); /* past the end */
    H5Dclose(d);
    /* A row length the block size does not divide is refused, naming the dataset. */
    const uint64_t bad[2] = {4, 40};
    assert_true(h5io_create_qtensor(f, "/layers/0/wk", 2, bad, QTYPE_Q4_0, err, sizeof err) < 0);
    assert_non_null(strstr(err, "/layers/0/wk"));
    /* Float32 is a type like the others. */
    const uint64_t fd[2] = {3, 5};
    d = h5io_create_qtensor(f, "/embed", 2, fd, QTYPE_F32, err, sizeof err);
    assert_true(d >= 0);
    float fv[15];
    for (int i = 0; i < 15; i++)
        fv[i] = (float)i;
    assert_int_equal(h5io_write_qrows(d, 0, 3, fv, err, sizeof err), 0);
    H5Dclose(d);
    H5Fclose(f);

    f = h5io_open_read(path, err, sizeof err);
    assert_true(f >= 0);
    H5Tensor ti;
    assert_int_equal(h5io_tensor_info(f, "/layers/0/wq", &ti, path, err, sizeof err), 0);
    assert_int_equal(ti.type, QTYPE_Q8_0);
    assert_int_equal(ti.rank, 3);
    assert_int_equal(ti.dims[2], 64);
    assert_int_equal(ti.row_bytes, rb);
    const uint64_t s0[3] = {0, 0, 0};
    QType t;
    assert_int_equal(h5io_read_qslab(f, "/layers/0/wq", 3, dims, s0, dims, back, &t, path, err,
                                     sizeof err), 0);
    assert_int_equal(t, QTYPE_Q8_0);
    assert_memory_equal(back, all, 6 * rb);
    /* Columns [32, 64) of rows [1][1..3): the second block of each. */
    const uint64_t sc[3] = {1, 1, 32}, cc[3] = {1, 2, 32};
    assert_int_equal(h5io_read_qslab(f, "/layers/0/wq", 3, dims, sc, cc, back, NULL, path, err,
                                     sizeof err), 0);
    const size_t bb = quant_block_bytes(QTYPE_Q8_0);
    assert_memory_equal(back, all + 4 * rb + bb, bb);
    assert_memory_equal(back + bb, all + 5 * rb + bb, bb);
    /* A cut inside a block is refused, naming file and dataset. */
    const uint64_t su[3] = {0, 0, 16};
    assert_int_equal(h5io_read_qslab(f, "/layers/0/wq", 3, dims, su, cc, back, NULL, path, err,
                                     sizeof err), -1);
    assert_non_null(strstr(err, "/layers/0/wq"));
    assert_non_null(strstr(err, "block"));
    assert_int_equal(h5io_tensor_info(f, "/embed", &ti, path, err, sizeof err), 0);
    assert_int_equal(ti.type, QTYPE_F32);
    float fb[15];
    assert_int_equal(h5io_read_qslab(f, "/embed", 2, fd, s0, fd, fb, NULL, path, err,
                                     sizeof err), 0);
    assert_memory_equal(fb, fv, sizeof fv);
    assert_int_equal(h5io_tensor_info(f, "/nope", &ti, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nope"));
    H5Fclose(f);
    free(all);
    free(back);
}

static void test_pick_type(void **state)
{
    (void)state;
    ModelConfig c;
    assert_int_equal(config_preset("tinyllama-1.1b", &c), 0); /* 22 layers, untied */
    /* q8_0 everywhere, the output included. */
    assert_int_equal(writer_pick_type(QUANTIZE_Q8_0, &c, WKIND_LM_HEAD, -1, 2048), QTYPE_Q8_0);
    assert_int_equal(writer_pick_type(QUANTIZE_Q8_0, &c, WKIND_W_DOWN, 3, 5632), QTYPE_Q8_0);
    /* q4_0: the output in Q6_K, as llama-quantize does. */
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_0, &c, WKIND_LM_HEAD, -1, 2048), QTYPE_Q6_K);
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_0, &c, WKIND_EMBED, -1, 2048), QTYPE_Q4_0);
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_0, &c, WKIND_WV, 0, 2048), QTYPE_Q4_0);
    /* q4_k_m: use_more_bits(i, 22) picks 0, 1, 4, 7, 10, 13, 16, 19, 20, 21. */
    const int more[22] = {1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1};
    for (int l = 0; l < 22; l++) {
        QType want = more[l] ? QTYPE_Q6_K : QTYPE_Q4_K;
        assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_WV, l, 2048), want);
        assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_W_DOWN, l, 5632), want);
        assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_WQ, l, 2048), QTYPE_Q4_K);
        assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_WO, l, 2048), QTYPE_Q4_K);
    }
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_LM_HEAD, -1, 2048), QTYPE_Q6_K);
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_EMBED, -1, 2048), QTYPE_Q4_K);
    /* Rows not a multiple of 256: llama.cpp's fallbacks; not of 32: f16. */
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_WQ, 2, 64), QTYPE_Q5_0);
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_WV, 0, 64), QTYPE_Q8_0);
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_LM_HEAD, -1, 64), QTYPE_Q8_0);
    assert_int_equal(writer_pick_type(QUANTIZE_Q8_0, &c, WKIND_W_DOWN, 0, 172), QTYPE_F16);
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_W_DOWN, 2, 172), QTYPE_F16);
    assert_int_equal(writer_pick_type(QUANTIZE_F16, &c, WKIND_W_DOWN, 2, 172), QTYPE_F16);
    /* The types llama-quantize chose for ../shared/models/gguf/rand-llama-d256-Q4_K_M.gguf
     * (dim 256, ffn 768, 4 layers, untied): attn_v and ffn_down Q6_K in layers 2 and 3,
     * everything else Q4_K, output Q6_K; and in its Q4_0 twin, Q4_0 with a Q6_K output. */
    assert_int_equal(convert_synthetic_config("llama:dim=256,ffn=768,layers=4,heads=8,"
                                              "kv_heads=2,tied=0", 0, &c, err, sizeof err), 0);
    for (int l = 0; l < 4; l++) {
        QType want = l >= 2 ? QTYPE_Q6_K : QTYPE_Q4_K;
        assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_WV, l, 256), want);
        assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_W_DOWN, l, 768), want);
        assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_W_GATE, l, 256),
                         QTYPE_Q4_K);
        assert_int_equal(writer_pick_type(QUANTIZE_Q4_0, &c, WKIND_WV, l, 256), QTYPE_Q4_0);
    }
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_EMBED, -1, 256), QTYPE_Q4_K);
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_LM_HEAD, -1, 256), QTYPE_Q6_K);
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_0, &c, WKIND_LM_HEAD, -1, 256), QTYPE_Q6_K);
    /* gpt2's q/k/v are llama.cpp's fused attn_qkv: Q5_K. */
    assert_int_equal(config_preset("gpt2-small", &c), 0);
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_K_M, &c, WKIND_WK, 5, 768), QTYPE_Q5_K);
    /* Tied: the embedding is the output. */
    assert_int_equal(writer_pick_type(QUANTIZE_Q4_0, &c, WKIND_EMBED, -1, 768), QTYPE_Q6_K);
    QuantizeMode m;
    assert_int_equal(writer_parse_quantize("Q4_K_M", &m, err, sizeof err), 0);
    assert_int_equal(m, QUANTIZE_Q4_K_M);
    assert_int_equal(writer_parse_quantize("q3_k", &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "--quantize"));
}

/* y = W x in float over the dequantized rows of m (the reference the quantized path nears). */
static void ref_matvec(float *y, const QMat *m, const float *x)
{
    float *row = malloc((size_t)m->cols * sizeof(float));
    for (int i = 0; i < m->rows; i++) {
        quant_dequantize_row(row, (const unsigned char *)m->data + (size_t)i * m->row_stride,
                             m->type, m->cols);
        double s = 0;
        for (int j = 0; j < m->cols; j++)
            s += (double)row[j] * x[j];
        y[i] = (float)s;
    }
    free(row);
}

static void test_quantized_model(void **state)
{
    (void)state;
    char path[256];
    /* dim 256: K-quants apply without fallbacks; ffn 96: w_down rows fall back (q4_k_m). */
    const char *spec = "llama:dim=256,ffn=96,layers=3,heads=8,kv_heads=4,vocab=300";
    tp(path, "qm.h5");
    assert_int_equal(convert_make_synthetic(spec, 5, 0, NULL, path, "q4_k_m", NULL, err,
                                            sizeof err), 0);
    hid_t f = h5io_open_read(path, err, sizeof err);
    assert_true(f >= 0);
    ModelConfig c;
    assert_int_equal(config_read(&c, f, path, err, sizeof err), 0);
    assert_string_equal(c.quantization, "q4_K_M");
    assert_int_equal(c.wtype[WKIND_WQ], QTYPE_Q4_K);
    /* The widest over layers: use_more_bits(l, 3) picks layer 2 alone, whose attn_v gets
     * Q6_K and whose w_down (rows of 96) falls back from Q6_K to Q8_0 (Q5_0 elsewhere). */
    assert_int_equal(c.wtype[WKIND_WV], QTYPE_Q6_K);
    assert_int_equal(c.wtype[WKIND_W_DOWN], QTYPE_Q8_0);
    assert_int_equal(c.wtype[WKIND_EMBED], QTYPE_Q6_K); /* tied: the output */

    /* The whole FFN and a row slice of it: the slice's rows are the same bits. */
    FfnW full, part;
    assert_int_equal(model_load_ffn(&full, &c, f, path, 1, 0, 96, err, sizeof err), 0);
    assert_int_equal(full.w_gate.type, QTYPE_Q4_K);
    assert_int_equal(model_qmat_bytes(&full.w_gate), 96 * quant_row_bytes(QTYPE_Q4_K, 256));
    assert_int_equal(model_load_ffn(&part, &c, f, path, 1, 32, 64, err, sizeof err), 0);
    assert_int_equal(part.w_down.cols, 32);
    assert_int_equal(model_ffn_bytes(&c, &part),
                     32 * 2 * quant_row_bytes(QTYPE_Q4_K, 256) +
                         256 * quant_row_bytes(QTYPE_Q5_0, 32) + 256 * sizeof(float));
    /* A cut inside a Q5_0 block of w_down is refused by name. */
    FfnW bad;
    assert_int_equal(model_load_ffn(&bad, &c, f, path, 1, 16, 64, err, sizeof err), -1);
    assert_non_null(strstr(err, "/layers/1/w_down"));
    assert_non_null(strstr(err, "block"));

    Scratch s;
    model_scratch_init(&s, &c, 4);
    float z[256], d_full[256], d_part[256];
    for (int i = 0; i < 256; i++)
        z[i] = cosf(0.1f * (float)i);
    model_ffn_delta(&c, &full, &s, z, d_full);
    model_ffn_delta(&c, &part, &s, z, d_part);
    /* Gate rows [32, 64) of the whole matrix equal the slice's rows bit for bit. */
    assert_memory_equal((const unsigned char *)full.w_gate.data + 32 * full.w_gate.row_stride,
                        part.w_gate.data, 32 * part.w_gate.row_stride);
    /* The quantized FFN is close to float arithmetic on the same (dequantized) weights. */
    float xn[256], hg[96], hu[96], ref[256];
    kernels_rmsnorm(xn, z, full.norm_w, c.norm_eps, 256);
    ref_matvec(hg, &full.w_gate, xn);
    ref_matvec(hu, &full.w_up, xn);
    kernels_swiglu(hg, hu, 96);
    ref_matvec(ref, &full.w_down, hg);
    double num = 0, den = 0;
    for (int i = 0; i < 256; i++) {
        num += (double)(d_full[i] - ref[i]) * (d_full[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    assert_true(den > 0);
    assert_true(sqrt(num / den) < 0.02); /* the activation's Q8 rounding, about 1% */

    /* The output projection: columns on Q4_K blocks (256) load, a head's 32 do not. */
    QMat wo;
    assert_int_equal(model_load_proj_cols(&wo, &c, f, path, 0, 0, 256, err, sizeof err), 0);
    assert_int_equal(model_qmat_bytes(&wo), 256 * quant_row_bytes(QTYPE_Q4_K, 256));
    model_qmat_free(&wo);
    assert_int_equal(model_load_proj_cols(&wo, &c, f, path, 0, 32, 32, err, sizeof err), -1);
    assert_non_null(strstr(err, "/layers/0/wo"));

    /* Embedding rows dequantize; the LM head in Q6_K gives finite logits. */
    HeadW h;
    assert_int_equal(model_load_head(&h, &c, f, path, err, sizeof err), 0);
    assert_ptr_equal(h.lm_head.data, h.embed.data);
    float x[256], want[256], logits[300];
    model_embed(&c, &h, 7, 0, x);
    quant_dequantize_row(want, (const unsigned char *)h.embed.data + 7 * h.embed.row_stride,
                         QTYPE_Q6_K, 256);
    assert_memory_equal(x, want, sizeof x);
    model_logits(&c, &h, &s, z, logits);
    for (int i = 0; i < 300; i++)
        assert_true(isfinite(logits[i]));
    model_free_head(&h);
    model_scratch_free(&s);
    model_free_ffn(&full);
    model_free_ffn(&part);
    H5Fclose(f);
}

/* A float32 file reads as before: version 1, every kind QTYPE_F32, bytes = floats * 4. */
static void test_f32_accounting(void **state)
{
    (void)state;
    char path[256];
    tp(path, "f32.h5");
    assert_int_equal(convert_make_synthetic("gpt2:dim=64,layers=2,vocab=300", 2, 0, NULL, path,
                                            NULL, NULL, err, sizeof err), 0);
    hid_t f = h5io_open_read(path, err, sizeof err);
    ModelConfig c;
    assert_int_equal(config_read(&c, f, path, err, sizeof err), 0);
    assert_string_equal(c.quantization, "");
    for (int k = 0; k < WKIND_COUNT; k++)
        assert_int_equal(c.wtype[k], QTYPE_F32);
    assert_int_equal(config_layer_bytes(&c), config_layer_floats(&c) * sizeof(float));
    assert_int_equal(config_ffn_bytes(&c, 40), config_ffn_floats(&c, 40) * sizeof(float));
    AttnPartW a;
    assert_int_equal(model_load_attn_part(&a, &c, f, path, 1, 2, 0, 1, 4, err, sizeof err), 0);
    assert_int_equal(model_attn_part_bytes(&c, &a), config_attn_unit_bytes(&c, 1));
    model_free_attn_part(&a);
    H5Fclose(f);
}

/* The speed probe runs the served model's types: a Q4_K_M-shaped layer streams its quantized
 * bytes (config_layer_bytes, checked inside) through the same forward functions. */
static void test_probe_quantized(void **state)
{
    (void)state;
    ModelConfig c;
    assert_int_equal(convert_synthetic_config("llama:dim=256,ffn=512,layers=2,heads=8,kv_heads=4",
                                              0, &c, err, sizeof err), 0);
    for (int k = 0; k < WKIND_COUNT; k++)
        c.wtype[k] = QTYPE_Q4_K;
    c.wtype[WKIND_WV] = c.wtype[WKIND_W_DOWN] = QTYPE_Q6_K;
    c.wtype[WKIND_WK] = QTYPE_Q8_0;
    assert_true(config_layer_bytes(&c) < config_layer_floats(&c) * sizeof(float) / 4);
    double bps = model_probe_layer_Bps(&c, (size_t)4 << 20, 2);
    assert_true(isfinite(bps) && bps > 1e6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h5io_roundtrip),
        cmocka_unit_test(test_pick_type),
        cmocka_unit_test(test_quantized_model),
        cmocka_unit_test(test_f32_accounting),
        cmocka_unit_test(test_probe_quantized),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
