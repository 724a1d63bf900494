/* test_options.c: headsplit's command line (src/app/options.c and argparse.c, compiled into
 * this test; no MPI): llama.cpp's short forms mean what they mean there, -np/--parallel are
 * --serve's slots (refused without --serve, saying that the ranks are mpirun's -np), no long
 * option is taken from a prefix, and every error names the word that was typed. */
#include "test_helpers.h"

#include <stdlib.h>
#include <string.h>

#include "../../src/app/headsplit.h"

/* Parses the NULL-terminated words after the program name; err holds the message. */
static int parse(Options *o, char *err, size_t errlen, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "headsplit";
    va_list ap;
    va_start(ap, errlen);
    for (char *w; (w = va_arg(ap, char *)) != NULL && argc < 63;)
        argv[argc++] = w;
    va_end(ap);
    argv[argc] = NULL;
    err[0] = '\0';
    return options_parse(o, argc, argv, err, errlen);
}

/* The parse fails and its message holds want. */
#define expect_fail(want, ...)                                                               \
    do {                                                                                     \
        Options o_;                                                                          \
        char e_[1024];                                                                       \
        int rc_ = parse(&o_, e_, sizeof e_, __VA_ARGS__, NULL);                              \
        options_free(&o_);                                                                   \
        if (rc_ != -1 || !strstr(e_, want))                                                  \
            fail_msg("rc %d, message '%s', expected one holding '%s'", rc_, e_, want);       \
    } while (0)

static void test_short_forms(void **state)
{
    (void)state;
    Options o;
    char err[1024];
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", "-p", "hi", "-n", "7", "-c",
                           "128", "-t", "2", "-s", "9", "-b", "16", "-ub", "8", "-md", "d.h5",
                           "-cnv", "-v", NULL), 0);
    assert_string_equal(o.model, "m.h5");
    assert_string_equal(o.prompt, "hi");
    assert_int_equal(o.n_predict, 7);
    assert_int_equal(o.ctx_size, 128);
    assert_int_equal(o.threads, 2);
    assert_int_equal((int)o.seed, 9);
    assert_int_equal(o.batch, 16);
    assert_int_equal(o.ubatch, 8);
    assert_string_equal(o.draft, "d.h5");
    assert_int_equal(o.chat, 1);
    assert_int_equal(o.verbose, 1);
    options_free(&o);
    /* -n16 as getopt read it; the long names and --name=VALUE */
    assert_int_equal(parse(&o, err, sizeof err, "--model=m.h5", "-n16", "--ubatch-size", "4",
                           "--conversation", "--model-draft=d.h5", "--temp", "0.5", NULL), 0);
    assert_int_equal(o.n_predict, 16);
    assert_int_equal(o.ubatch, 4);
    assert_int_equal(o.chat, 1);
    assert_string_equal(o.draft, "d.h5");
    assert_true(o.temperature == 0.5f);
    options_free(&o);
    assert_int_equal(parse(&o, err, sizeof err, "-h", NULL), 1);
    assert_int_equal(parse(&o, err, sizeof err, "--version", NULL), 2);
}

static void test_prompt_file(void **state)
{
    (void)state;
    char dir[256], path[512];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "options"), 0);
    test_path(path, sizeof path, dir, "p.txt");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("Once upon a time", f);
    fclose(f);
    Options o;
    char err[1024];
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", "-f", path, NULL), 0);
    assert_string_equal(o.prompt, "Once upon a time");
    options_free(&o);
    test_tmpdir_remove(dir);
}

static void test_parallel(void **state)
{
    (void)state;
    Options o;
    char err[1024];
    /* llama-server's slots: -np and --parallel with --serve */
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", "--serve", "127.0.0.1:8080",
                           "--parallel", "3", NULL), 0);
    assert_int_equal(o.parallel, 3);
    options_free(&o);
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", "--serve", "127.0.0.1:8080",
                           "-np", "2", NULL), 0);
    assert_int_equal(o.parallel, 2);
    options_free(&o);
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", "--serve", "127.0.0.1:8080",
                           "--parallel=1", NULL), 0);
    assert_int_equal(o.parallel, 1);
    options_free(&o);
    /* not given: 0 (the server takes 4 on one process) */
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", "--serve", "127.0.0.1:8080",
                           NULL), 0);
    assert_int_equal(o.parallel, 0);
    options_free(&o);
    /* only with --serve: the ranks are mpirun's -np */
    const char *want = "-np/--parallel N: --serve's slots";
    expect_fail(want, "-m", "m.h5", "-np", "4");
    expect_fail(want, "-m", "m.h5", "--parallel", "4");
    expect_fail("the number of ranks is mpirun's -np", "-m", "m.h5", "--parallel=2");
    expect_fail("--parallel: '0' is not a count", "-m", "m.h5", "--serve", "127.0.0.1:1",
                "--parallel", "0");
    expect_fail("--parallel: '65' is not a count", "-m", "m.h5", "--serve", "127.0.0.1:1",
                "--parallel", "65");
    expect_fail("--parallel 2 with --draft", "-m", "m.h5", "--serve", "127.0.0.1:1",
                "--parallel", "2", "--draft", "d.h5");
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", "-np", "4", NULL), -1);
    assert_null(strstr(err, "n-predict")); /* never "-n/--n-predict: 'p' is not a count" */
}

static void test_no_prefixes(void **state)
{
    (void)state;
    expect_fail("unknown option '--step' (did you mean --steps?)", "-m", "m.h5", "--step",
                "8");
    expect_fail("unknown option '--temperatur'", "-m", "m.h5", "--temperatur", "1");
    expect_fail("unknown option '--mod'", "--mod", "m.h5");
    expect_fail("did you mean --model", "--modle", "m.h5");
    expect_fail("unknown option '-steps' (did you mean --steps?)", "-m", "m.h5", "-steps",
                "8");
    expect_fail("unknown option '--bogus' (see --help)", "-m", "m.h5", "--bogus");
}

static void test_right_word(void **state)
{
    (void)state;
    /* the word as typed, never a neighbour from inside a group */
    expect_fail("unknown option '-xyz'", "-m", "m.h5", "-xyz");
    expect_fail("unknown option '-nd'", "-m", "m.h5", "-nd", "3");
    expect_fail("unknown option '-mdx'", "-m", "m.h5", "-mdx", "f");
    expect_fail("--ubatch: 'x' is not a count", "-m", "m.h5", "-ub", "x");
    expect_fail("-n/--n-predict: 'q' is not a count", "-m", "m.h5", "-n", "q");
    expect_fail("-c needs a value", "-m", "m.h5", "-c");
    expect_fail("--steps needs a value", "-m", "m.h5", "--steps");
    expect_fail("--quiet takes no value", "-m", "m.h5", "--quiet=1");
    expect_fail("unexpected argument 'extra'", "-m", "m.h5", "extra");
    expect_fail("unexpected argument 'after'", "-m", "m.h5", "--", "after");
    expect_fail("--model is required", "-p", "x");
    expect_fail("--f32-order: 'avx' is not avx512 or avx2", "-m", "m.h5", "--f32-order", "avx");
    expect_fail("--f32-order needs a value", "-m", "m.h5", "--f32-order");
    Options o;
    char err[1024];
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", NULL), 0);
    assert_int_equal(o.f32_order, KERNELS_F32_ORDER_AVX512); /* the default */
    options_free(&o);
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", "--f32-order", "avx2", NULL), 0);
    assert_int_equal(o.f32_order, KERNELS_F32_ORDER_AVX2);
    options_free(&o);
}

/* A value that begins with '-' is the value, as getopt took it. */
static void test_dash_values(void **state)
{
    (void)state;
    Options o;
    char err[1024];
    assert_int_equal(parse(&o, err, sizeof err, "-m", "m.h5", "--prompt", "-np 4", "--stop",
                           "--", NULL), 0);
    assert_string_equal(o.prompt, "-np 4");
    assert_int_equal(o.n_stops, 1);
    assert_string_equal(o.stops[0], "--");
    options_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_forms),      cmocka_unit_test(test_prompt_file),
        cmocka_unit_test(test_parallel), cmocka_unit_test(test_no_prefixes),
        cmocka_unit_test(test_right_word),       cmocka_unit_test(test_dash_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
