/* The speed probe runs the model's own layer code on synthetic weights of both architectures:
 * the weights it lays out match config_layer_floats (it aborts otherwise) and it returns a
 * finite, positive speed.  How fast is for the benchmarks, not for unit tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config.h"
#include "model.h"

#include <math.h>

static void check_arch(const char *preset)
{
    ModelConfig c;
    assert_int_equal(config_preset(preset, &c), 0);
    /* Small: one copy of stories260K is ~0.2 MB, so 8 MB means dozens of copies. */
    double bps = model_probe_layer_Bps(&c, (size_t)8 << 20, 3);
    assert_true(isfinite(bps));
    assert_true(bps > 1e6);
}

static void test_llama_shapes(void **state)
{
    (void)state;
    check_arch("stories260k");
}

/* GPT-2 carries biases and LayerNorm; a one-layer gpt2-small copy is 28 MB. */
static void test_gpt2_shapes(void **state)
{
    (void)state;
    check_arch("gpt2-small");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_shapes),
        cmocka_unit_test(test_gpt2_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
