/* test_helpers.c: see test_helpers.h. */
#define _XOPEN_SOURCE 700
#include "test_helpers.h"

#include "quant.h"
#include "util.h"

#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef HEADSPLIT_SHARED_DIR
#define HEADSPLIT_SHARED_DIR "../shared/models"
#endif

int test_tmpdir_make(char *dir, size_t cap, const char *name)
{
    int n = snprintf(dir, cap, "/tmp/hs_test_%s_XXXXXX", name);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "test_tmpdir_make: name '%s' too long for %zu bytes\n", name, cap);
        return -1;
    }
    if (!mkdtemp(dir)) {
        perror(dir);
        return -1;
    }
    return 0;
}

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

int test_tmpdir_remove(const char *dir)
{
    return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *test_path(char *buf, size_t cap, const char *dir, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

const char *test_shared_dir(void)
{
    const char *env = getenv("HEADSPLIT_SHARED_MODELS");
    return env && *env ? env : HEADSPLIT_SHARED_DIR;
}

int test_shared_has(const char *rel)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", test_shared_dir(), rel);
    return access(p, R_OK) == 0;
}

float *test_randv(size_t n, float scale, float offset, uint64_t *rng)
{
    float *v = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = offset + scale * rng_normal(rng);
    return v;
}

QMat test_qmat(QType t, int rows, int cols, uint64_t *rng)
{
    QMat m = {.type = t, .rows = rows, .cols = cols, .row_stride = quant_row_bytes(t, cols)};
    m.data = xcalloc((size_t)rows, m.row_stride);
    float *row = xmalloc((size_t)cols * sizeof(float));
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < cols; j++)
            row[j] = 0.08f * rng_normal(rng);
        quant_quantize_row((char *)m.data + (size_t)r * m.row_stride, row, t, cols);
    }
    free(row);
    return m;
}

void test_run_ranks(int n, void *(*fn)(void *), void *args, size_t stride)
{
    pthread_t th[64];
    assert_true(n >= 1 && n <= 64);
    for (int r = 0; r < n; r++)
        assert_int_equal(pthread_create(&th[r], NULL, fn, (char *)args + (size_t)r * stride), 0);
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
}
