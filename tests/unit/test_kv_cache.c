/* test_kv_cache.c: the KV caches of --cache-type (config kv_type).  Rows written where
 * layer_kv_rows says and stored by layer_kv_commit read back exactly for f32 (the cache
 * itself), within 2^-11 relative for f16, within half a quantization step (block max / 127)
 * for q8_0; earlier positions read back what was stored then; config_kv_bytes counts 4, 2 and
 * 34/32 bytes a value; a q8_0 cache on a head size not a multiple of 32 is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "quant.h"
#include "util.h"
#include "../../src/model/layer_internal.h"

#define HD 64
#define CAP 12

static ModelConfig cfg(QType t)
{
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.arch = ARCH_LLAMA;
    c.dim = 64;
    c.n_layers = 1;
    c.n_heads = 2;
    c.n_kv_heads = 1;
    c.head_dim = HD;
    c.ffn_dim = 64;
    c.context_length = CAP;
    c.kv_type = t;
    return c;
}

static float val(int p, int i, int which)
{
    /* a spread of magnitudes within each block, signs mixed */
    double x = sin(0.37 * (p * HD + i) + which) * (1.0 + (i % 32) * 0.25) * (p + 1);
    return (float)x;
}

/* Writes positions [pos, pos+n) and commits; checks every position 0..pos+n-1 read back. */
static void write_check(const ModelConfig *c, AttnPartW *w, Scratch *s, int pos, int n)
{
    float *k, *v;
    layer_kv_rows(c, w, s, pos, n, &k, &v);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < HD; i++) {
            k[r * HD + i] = val(pos + r, i, 0);
            v[r * HD + i] = val(pos + r, i, 1);
        }
    const float *kc, *vc;
    layer_kv_commit(c, w, s, pos, n, &kc, &vc);
    for (int p = 0; p < pos + n; p++)
        for (int which = 0; which < 2; which++) {
            const float *row = (which ? vc : kc) + (size_t)p * HD;
            for (int b = 0; b < HD; b += 32) {
                float amax = 0;
                for (int i = b; i < b + 32; i++)
                    amax = fmaxf(amax, fabsf(val(p, i, which)));
                for (int i = b; i < b + 32; i++) {
                    const float x = val(p, i, which), err = fabsf(row[i] - x);
                    if (c->kv_type == QTYPE_F32)
                        assert_true(row[i] == x);
                    else if (c->kv_type == QTYPE_F16)
                        assert_true(err <= fabsf(x) * (1.0f / 2048) + 1e-7f);
                    else /* half a step of d = amax / 127, and d's own half rounding */
                        assert_true(err <= 0.5f * amax / 127 * (1 + 1e-3f) + fabsf(x) * 1e-3f);
                }
            }
        }
}

static void round_trip(QType t)
{
    ModelConfig c = cfg(t);
    AttnPartW w;
    memset(&w, 0, sizeof w);
    w.kv_cap = CAP;
    if (t == QTYPE_F32) {
        w.k_cache = xcalloc((size_t)CAP * HD, sizeof(float));
        w.v_cache = xcalloc((size_t)CAP * HD, sizeof(float));
    } else {
        w.k_store = xcalloc(CAP, config_kv_bytes(&c, 1) / 2);
        w.v_store = xcalloc(CAP, config_kv_bytes(&c, 1) / 2);
    }
    Scratch s;
    model_scratch_init_batch(&s, &c, CAP, 4);
    write_check(&c, &w, &s, 0, 4); /* a prompt of 4, then one position at a time */
    for (int p = 4; p < 8; p++)
        write_check(&c, &w, &s, p, 1);
    write_check(&c, &w, &s, 8, 4);
    assert_ptr_equal(model_attn_part_cache(&w, 0), t == QTYPE_F32 ? (void *)w.k_cache
                                                                  : w.k_store);
    model_scratch_free(&s);
    free(w.k_cache);
    free(w.v_cache);
    free(w.k_store);
    free(w.v_store);
}

static void test_f32_exact(void **state)
{
    (void)state;
    round_trip(QTYPE_F32);
}

static void test_f16_bound(void **state)
{
    (void)state;
    round_trip(QTYPE_F16);
}

static void test_q8_0_bound(void **state)
{
    (void)state;
    round_trip(QTYPE_Q8_0);
}

static void test_bytes(void **state)
{
    (void)state;
    ModelConfig a = cfg(QTYPE_F32), b = cfg(QTYPE_F16), q = cfg(QTYPE_Q8_0);
    assert_int_equal(config_kv_bytes(&a, 10), 2 * 10 * HD * 4);
    assert_int_equal(config_kv_bytes(&b, 10), 2 * 10 * HD * 2);
    assert_int_equal(config_kv_bytes(&q, 10), 2 * 10 * (HD / 32) * 34);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_exact),
        cmocka_unit_test(test_f16_bound),
        cmocka_unit_test(test_q8_0_bound),
        cmocka_unit_test(test_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
