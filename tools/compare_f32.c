/* hs-compare-f32: compares two raw float32 little-endian files of [rows][cols] values.
 *   hs-compare-f32 A.bin B.bin --cols N [--rows R] [--tol T] [--exact]
 * Prints the largest absolute difference and whether each row's argmax agrees; exits 1 when a
 * difference exceeds the tolerance (or any bit differs with --exact), 2 on bad input. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *load(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "hs-compare-f32: error: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *p = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!p || fread(p, 1, (size_t)bytes, f) != (size_t)bytes) {
        fprintf(stderr, "hs-compare-f32: error: %s: read failed\n", path);
        fclose(f);
        free(p);
        return NULL;
    }
    fclose(f);
    *n = bytes / 4;
    return p;
}

static long argmax(const float *x, long n)
{
    long b = 0;
    for (long i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: hs-compare-f32 A.bin B.bin --cols N [--rows R] [--tol T] "
                        "[--exact]\n");
        return 2;
    }
    long cols = 0, rows = -1;
    double tol = 1e-4;
    int exact = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--cols") == 0 && i + 1 < argc)
            cols = atol(argv[++i]);
        else if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc)
            rows = atol(argv[++i]);
        else if (strcmp(argv[i], "--tol") == 0 && i + 1 < argc)
            tol = atof(argv[++i]);
        else if (strcmp(argv[i], "--exact") == 0)
            exact = 1;
        else {
            fprintf(stderr, "hs-compare-f32: error: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    long na, nb;
    float *a = load(argv[1], &na), *b = load(argv[2], &nb);
    if (!a || !b || cols <= 0)
        return 2;
    long ra = na / cols, rb = nb / cols;
    if (rows < 0)
        rows = ra < rb ? ra : rb;
    if (rows > ra || rows > rb || rows == 0) {
        fprintf(stderr, "hs-compare-f32: error: need %ld rows of %ld, files hold %ld and %ld\n",
                rows, cols, ra, rb);
        return 2;
    }
    double maxdiff = 0;
    long bad_argmax = 0, bitdiff = 0;
    for (long r = 0; r < rows; r++) {
        const float *x = a + r * cols, *y = b + r * cols;
        for (long j = 0; j < cols; j++) {
            double d = fabs((double)x[j] - (double)y[j]);
            if (!(d <= maxdiff))
                maxdiff = isnan(d) ? INFINITY : d;
            bitdiff += memcmp(&x[j], &y[j], 4) != 0;
        }
        bad_argmax += argmax(x, cols) != argmax(y, cols);
    }
    printf("rows %ld cols %ld: max |diff| %.3g, %ld values differ in bits, argmax differs in "
           "%ld rows\n", rows, cols, maxdiff, bitdiff, bad_argmax);
    free(a);
    free(b);
    if (exact)
        return bitdiff ? 1 : 0;
    return maxdiff <= tol ? 0 : 1;
}
