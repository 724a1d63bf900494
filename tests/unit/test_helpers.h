/* test_helpers.h: set-up shared by the cmocka unit tests (tests/unit/test_helpers.c, linked
 * into every test): a temporary directory per test, where the reference models are (and a
 * skip when they are absent), and a comparison of doubles.  Include after _XOPEN_SOURCE. */
#ifndef HEADSPLIT_TEST_HELPERS_H
#define HEADSPLIT_TEST_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "model.h"

/* Doubles within eps, naming the expression (cmocka 1.1's assert_float_equal works in float). */
#define assert_near(a, b, eps)                                                               \
    do {                                                                                     \
        double a_ = (a), b_ = (b);                                                           \
        if (!(fabs(a_ - b_) <= (eps)))                                                       \
            fail_msg("%s = %.17g, expected %.17g (within %g)", #a, a_, b_, (double)(eps));   \
    } while (0)

/* n values offset + scale * N(0, 1) from rng (util's generator), malloc'd. */
float *test_randv(size_t n, float scale, float offset, uint64_t *rng);
/* A rows x cols matrix of 0.08 * N(0, 1) values stored in type t (quant_quantize_row),
 * its data malloc'd. */
QMat test_qmat(QType t, int rows, int cols, uint64_t *rng);

/* Runs fn on n threads at once (at most 64), the i-th given (char *)args + i * stride (an
 * in-process rank each: transport_inproc), and joins them. */
void test_run_ranks(int n, void *(*fn)(void *), void *args, size_t stride);

/* Makes a fresh, empty directory /tmp/hs_test_<name>_XXXXXX and writes its path into dir
 * (capacity cap).  Returns 0, or -1 (with a message) when it cannot. */
int test_tmpdir_make(char *dir, size_t cap, const char *name);
/* Removes dir and everything under it (symbolic links are not followed).  0 or -1. */
int test_tmpdir_remove(const char *dir);
/* "dir/name" into buf (capacity cap); returns buf. */
const char *test_path(char *buf, size_t cap, const char *dir, const char *name);

/* The reference models: $HEADSPLIT_SHARED_MODELS when set, else ../shared/models beside the
 * source tree (HEADSPLIT_SHARED_DIR, set by tests/CMakeLists.txt). */
const char *test_shared_dir(void);
/* 1 when the file rel under test_shared_dir() can be read, else 0. */
int test_shared_has(const char *rel);

/* Skips the current test, saying which file is missing, when shared/rel is absent. */
#define TEST_NEED_SHARED(rel)                                                                \
    do {                                                                                     \
        if (!test_shared_has(rel)) {                                                         \
            print_message("skipped: %s/%s not found (reference models; set "                \
                          "HEADSPLIT_SHARED_MODELS)\n", test_shared_dir(), (rel));           \
            skip();                                                                          \
        }                                                                                    \
    } while (0)

#endif
