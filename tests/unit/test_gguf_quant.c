/* test_gguf_quant.c: quant_quantize_row reproduces llama-quantize.  The F32 GGUF fixtures'
 * matrices, quantized row by row, must equal byte for byte the blocks of the quantized files
 * of the same model (../shared/models/gguf, written by llama.cpp's own tools; skipped when
 * absent): Q8_0 and Q4_0, and the K-quants of the Q6_K and Q4_K_M files.  A tensor that
 * llama-quantize kept in another type than the file's (the output matrix of a Q4_0 file:
 * q8_0 or q6_K; attn_v and ffn_down rows of a Q4_K_M file: q6_K) is compared in that type and
 * named. */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gguf.h"
#include "quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef HEADSPLIT_SHARED_DIR
#define HEADSPLIT_SHARED_DIR "../shared/models"
#endif

/* Quantizes every 2-D tensor of model-F32.gguf to type t and compares with model-NAME.gguf. */
static void compare(const char *model, const char *name, QType t)
{
    char fp[512], qp[512], err[512];
    snprintf(fp, sizeof fp, "%s/gguf/%s-F32.gguf", HEADSPLIT_SHARED_DIR, model);
    snprintf(qp, sizeof qp, "%s/gguf/%s-%s.gguf", HEADSPLIT_SHARED_DIR, model, name);
    if (access(fp, R_OK) != 0 || access(qp, R_OK) != 0) {
        print_message("skipped: %s or %s absent\n", fp, qp);
        skip();
    }
    GgufFile *f, *q;
    if (gguf_open(&f, fp, err, sizeof err) < 0 || gguf_open(&q, qp, err, sizeof err) < 0)
        fail_msg("%s", err);
    int compared = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const GgufTensor *a = &f->tensors[i];
        if (a->n_dims < 2)
            continue; /* norms stay f32 */
        const GgufTensor *b = gguf_find_tensor(q, a->name);
        assert_non_null(b);
        assert_int_equal(a->type, QTYPE_F32);
        QType bt = (QType)b->type;
        if (bt != t)
            print_message("note: %s-%s: %s is %s (llama-quantize's choice), compared as such\n",
                          model, name, a->name, quant_type_name(bt));
        int64_t n = a->ne[0], rows = a->ne[1] * a->ne[2] * a->ne[3];
        size_t rb = quant_row_bytes(bt, n);
        assert_int_equal(b->bytes, rb * (size_t)rows);
        uint8_t *row = malloc(rb), *ref = malloc(rb);
        for (int64_t r = 0; r < rows; r++) {
            const float *x = (const float *)(const void *)a->data + r * n;
            quant_quantize_row(row, x, bt, n);
            quant_quantize_row_ref(ref, x, bt, n);
            if (memcmp(row, b->data + (size_t)r * rb, rb) != 0 || memcmp(ref, row, rb) != 0)
                fail_msg("%s-%s: %s row %lld: blocks differ from llama-quantize's", model,
                         name, a->name, (long long)r);
        }
        free(row);
        free(ref);
        compared++;
    }
    assert_true(compared >= 7);
    gguf_close(f);
    gguf_close(q);
}

static void test_stories_q8_0(void **state)
{
    (void)state;
    compare("stories260K-pad256", "Q8_0", QTYPE_Q8_0);
}

static void test_stories_q4_0(void **state)
{
    (void)state;
    compare("stories260K-pad256", "Q4_0", QTYPE_Q4_0);
}

static void test_rand_q8_0(void **state)
{
    (void)state;
    compare("rand-llama-d256", "Q8_0", QTYPE_Q8_0);
}

static void test_rand_q4_0(void **state)
{
    (void)state;
    compare("rand-llama-d256", "Q4_0", QTYPE_Q4_0);
}

static void test_rand_q6_k(void **state)
{
    (void)state;
    compare("rand-llama-d256", "Q6_K", QTYPE_Q6_K);
}

static void test_rand_q4_k_m(void **state)
{
    (void)state;
    compare("rand-llama-d256", "Q4_K_M", QTYPE_Q4_K);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories_q8_0),
        cmocka_unit_test(test_stories_q4_0),
        cmocka_unit_test(test_rand_q8_0),
        cmocka_unit_test(test_rand_q4_0),
        cmocka_unit_test(test_rand_q6_k),
        cmocka_unit_test(test_rand_q4_k_m),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
