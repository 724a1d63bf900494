/* tokenize_bench: encode speed of a model's tokenizer on a text file.
 *   tokenize_bench TOKENIZER TEXT [BYTES [REPEATS]]
 * TOKENIZER is a model file (.h5), a Hugging Face tokenizer.json (.json) or a llama2.c
 * tokenizer.bin written as FILE.bin:VOCAB_SIZE.  Encodes the first BYTES bytes of TEXT (default 102400) REPEATS times (default 5) and prints
 * one JSON record with the minimum and median time, the token count and a checksum of the ids
 * (so two builds can be compared for identical output as well as speed). */
#include "h5io.h"
#include "tokenizer.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Loads a tokenizer by the form of spec (see the top of the file). */
static int load(Tokenizer **tok, const char *spec, char *err, size_t errlen)
{
    size_t n = strlen(spec);
    const char *colon = strrchr(spec, ':');
    if (n > 3 && strcmp(spec + n - 3, ".h5") == 0) {
        hid_t f = h5io_open_read(spec, err, errlen);
        if (f < 0)
            return -1;
        int rc = tokenizer_h5_read(tok, f, spec, err, errlen);
        H5Fclose(f);
        return rc;
    }
    if (n > 5 && strcmp(spec + n - 5, ".json") == 0)
        return tokenizer_load_hf_json(tok, spec, err, errlen);
    if (colon && colon - spec > 4 && strncmp(colon - 4, ".bin", 4) == 0) {
        char *path = xstrdup(spec);
        path[colon - spec] = '\0';
        int rc = tokenizer_load_llama2c(tok, path, atoi(colon + 1), err, errlen);
        free(path);
        return rc;
    }
    return util_err(err, errlen, "%s: expected MODEL.h5, tokenizer.json or FILE.bin:VOCAB", spec);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: tokenize_bench TOKENIZER TEXT [BYTES [REPEATS]]\n");
        return 2;
    }
    size_t want = argc > 3 ? strtoul(argv[3], NULL, 10) : 102400;
    int repeats = argc > 4 ? atoi(argv[4]) : 5;
    if (want == 0 || repeats < 1 || repeats > 1000) {
        fprintf(stderr, "tokenize_bench: error: BYTES must be > 0 and REPEATS in [1, 1000]\n");
        return 2;
    }
    char err[1024];
    Tokenizer *tok = NULL;
    int rc = load(&tok, argv[1], err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "tokenize_bench: error: %s\n", err);
        return 1;
    }
    size_t len = 0;
    char *text = util_read_file(argv[2], &len, err, sizeof err);
    if (!text) {
        fprintf(stderr, "tokenize_bench: error: %s\n", err);
        tokenizer_free(tok);
        return 1;
    }
    if (len > want)
        len = want;
    double *secs = xmalloc((size_t)repeats * sizeof *secs);
    size_t n_ids = 0;
    uint64_t sum = 1469598103934665603ULL;
    for (int r = 0; r < repeats && rc == 0; r++) {
        int *ids = NULL;
        double t0 = now_s();
        rc = tokenizer_encode(tok, text, len, &ids, &n_ids, err, sizeof err);
        secs[r] = now_s() - t0;
        if (rc == 0 && r == 0)
            for (size_t i = 0; i < n_ids; i++)
                sum = (sum ^ (uint32_t)ids[i]) * 1099511628211ULL;
        free(ids);
    }
    if (rc < 0) {
        fprintf(stderr, "tokenize_bench: error: %s\n", err);
    } else {
        util_sort_doubles(secs, (size_t)repeats);
        printf("{\"model\": \"%s\", \"bytes\": %zu, \"tokens\": %zu, \"checksum\": \"%016llx\", "
               "\"min_ms\": %.3f, \"median_ms\": %.3f, \"repeats\": %d}\n",
               argv[1], len, n_ids, (unsigned long long)sum, 1e3 * secs[0],
               1e3 * util_median(secs, (size_t)repeats), repeats);
    }
    free(secs);
    free(text);
    tokenizer_free(tok);
    return rc < 0 ? 1 : 0;
}
