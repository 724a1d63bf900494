/* test_tokenizer.c: the tokenizers against the reference vectors in ../shared/models
 * (llama2.c run.c, Hugging Face tokenizers, gpt-3-encoder), round trips on odd input, the
 * HDF5 /tokenizer group and rejection of malformed files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_helpers.h"
#include "tokenizer.h"
#include "util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Tokenizers loaded once for the whole group; NULL when the shared models are absent. */
typedef struct {
    char dir[1024];
    Tokenizer *llama2;  /* llama2-tokenizer/tokenizer.bin, 32000 */
    Tokenizer *tok512;  /* stories260K/tok512.bin */
    Tokenizer *hf260k;  /* stories260K-hf/tokenizer.json */
    Tokenizer *gpt2f;   /* gpt2 vocab.json + merges.txt */
    Tokenizer *gpt2j;   /* gpt2 tokenizer.json */
    Tokenizer *synth;   /* synthetic, 512 */
    int n_tmp;
} Fixture;

static void path_join(char *out, size_t cap, const Fixture *f, const char *rel)
{
    snprintf(out, cap, "%s/%s", f->dir, rel);
}

/* Loads a shared tokenizer: gpt2 files when rel2 is set, tokenizer.bin when vocab > 0, else
 * tokenizer.json.  NULL (and a message) on failure. */
static Tokenizer *load_shared(const Fixture *f, const char *rel, const char *rel2, int vocab)
{
    char p1[1200], p2[1200], err[512] = "";
    Tokenizer *t = NULL;
    int rc;
    path_join(p1, sizeof p1, f, rel);
    if (rel2) {
        path_join(p2, sizeof p2, f, rel2);
        rc = tokenizer_load_gpt2_files(&t, p1, p2, err, sizeof err);
    } else if (vocab > 0) {
        rc = tokenizer_load_llama2c(&t, p1, vocab, err, sizeof err);
    } else {
        rc = tokenizer_load_hf_json(&t, p1, err, sizeof err);
    }
    if (rc != 0)
        fprintf(stderr, "load failed: %s\n", err);
    return t;
}

static int group_setup(void **state)
{
    Fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s", test_shared_dir());
    char probe[1200];
    path_join(probe, sizeof probe, f, "stories260K/tok512.bin");
    if (access(probe, R_OK) == 0) {
        f->llama2 = load_shared(f, "llama2-tokenizer/tokenizer.bin", NULL, 32000);
        f->tok512 = load_shared(f, "stories260K/tok512.bin", NULL, 512);
        f->hf260k = load_shared(f, "stories260K-hf/tokenizer.json", NULL, 0);
        f->gpt2f = load_shared(f, "gpt2-tiny-random/vocab.json", "gpt2-tiny-random/merges.txt",
                               0);
        f->gpt2j = load_shared(f, "gpt2-tiny-random/tokenizer.json", NULL, 0);
        if (!f->llama2 || !f->tok512 || !f->hf260k || !f->gpt2f || !f->gpt2j)
            return -1;
    }
    f->synth = tokenizer_build_synthetic(512);
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    Fixture *f = *state;
    Tokenizer *all[] = {f->llama2, f->tok512, f->hf260k, f->gpt2f, f->gpt2j, f->synth};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tokenizer_free(all[i]);
    free(f);
    return 0;
}

/* Skips the calling test when ../shared/models is absent. */
static void need_models(const Fixture *f)
{
    if (f->tok512)
        return;
    fprintf(stderr, "skipped: shared models not found at %s (set HEADSPLIT_SHARED_MODELS)\n",
            f->dir);
    skip();
}

/* Encodes text and compares with want; prints both on mismatch.  Returns 1 if equal. */
static int encode_matches(const Tokenizer *t, const char *name, const char *text, size_t len,
                          const int *want, size_t n_want)
{
    int *ids = NULL;
    size_t n = 0;
    char err[256];
    int ok = tokenizer_encode(t, text, len, &ids, &n, err, sizeof err) == 0 && n == n_want &&
             (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!ok) {
        fprintf(stderr, "case %s: got", name);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n        want");
        for (size_t i = 0; i < n_want; i++)
            fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    return ok;
}

/* Decodes encode(text) and checks it gives text back.  Returns 1 if so. */
static int roundtrip_ok(const Tokenizer *t, const char *text, size_t len)
{
    int *ids = NULL;
    size_t n = 0;
    char err[256];
    if (tokenizer_encode(t, text, len, &ids, &n, err, sizeof err) != 0) {
        fprintf(stderr, "encode failed: %s\n", err);
        return 0;
    }
    char *s = tokenizer_decode(t, ids, n);
    /* the decoded length comes from the tokens, so embedded NULs compare too */
    size_t dlen = 0;
    for (size_t i = 0; i < n; i++) {
        char tmp[256];
        dlen += tokenizer_decode_token(t, i ? ids[i - 1] : -1, ids[i], tmp, sizeof tmp);
    }
    int ok = dlen == len && memcmp(s, text, len) == 0;
    if (!ok)
        fprintf(stderr, "round trip of \"%.*s\" (%zu bytes) gave \"%s\" (%zu)\n", (int)len, text,
                len, s, dlen);
    free(s);
    free(ids);
    return ok;
}

/* Runs every {name, text, ids} case of a JSON file; returns the number that pass. */
static int run_cases(const Tokenizer *t, const Fixture *f, const char *rel, int *n_cases)
{
    char path[1200];
    json_error_t jerr;
    path_join(path, sizeof path, f, rel);
    json_t *root = json_load_file(path, 0, &jerr);
    assert_non_null(root);
    size_t i;
    json_t *c;
    int pass = 0;
    *n_cases = (int)json_array_size(root);
    json_array_foreach(root, i, c) {
        json_t *jt = json_object_get(c, "text"), *jids = json_object_get(c, "ids"), *v;
        size_t k, n = json_array_size(jids);
        int *want = malloc((n + 1) * sizeof *want);
        json_array_foreach(jids, k, v) want[k] = (int)json_integer_value(v);
        const char *text = json_string_value(jt);
        size_t len = json_string_length(jt);
        const char *name = json_string_value(json_object_get(c, "name"));
        if (encode_matches(t, name, text, len, want, n) && roundtrip_ok(t, text, len))
            pass++;
        free(want);
    }
    json_decref(root);
    return pass;
}

static void test_llama2_cases(void **state)
{
    Fixture *f = *state;
    need_models(f);
    assert_int_equal(tokenizer_vocab_size(f->llama2), 32000);
    assert_int_equal(tokenizer_kind(f->llama2), TOKENIZER_SPM);
    int n, pass = run_cases(f->llama2, f, "llama2-tokenizer/cases.json", &n);
    fprintf(stderr, "llama2 tokenizer.bin: %d/%d cases\n", pass, n);
    assert_int_equal(n, 8);
    assert_int_equal(pass, n);
    /* literal special-token text is ordinary characters; U+2581 is not a space for run.c */
    static const int u2581[] = {1, 29871, 229, 153, 132};
    assert_true(encode_matches(f->llama2, "u2581", "\xe2\x96\x81", 3, u2581, 5));
    static const int space[] = {1, 259};
    assert_true(encode_matches(f->llama2, "space", " ", 1, space, 2));
}

static void test_stories_spm(void **state)
{
    Fixture *f = *state;
    need_models(f);
    static const int once[] = {1, 403, 407, 261, 378};
    assert_true(encode_matches(f->tok512, "once", "Once upon a time", 16, once, 5));
    int n, pass = run_cases(f->tok512, f, "stories260K-hf/reference/tokenizer_cases.json", &n);
    fprintf(stderr, "tok512.bin (spm): %d/%d cases\n", pass, n);
    assert_int_equal(n, 12);
    assert_int_equal(pass, n);
    assert_int_equal(tokenizer_bos(f->tok512), 1);
    assert_int_equal(tokenizer_eos(f->tok512), 2);
}

static void test_stories_hf(void **state)
{
    Fixture *f = *state;
    need_models(f);
    assert_int_equal(tokenizer_kind(f->hf260k), TOKENIZER_SPM_MERGES);
    assert_int_equal(tokenizer_vocab_size(f->hf260k), 512);
    assert_int_equal(tokenizer_bos(f->hf260k), 1);
    assert_int_equal(tokenizer_eos(f->hf260k), 2);
    int n, pass = run_cases(f->hf260k, f, "stories260K-hf/reference/tokenizer_cases.json", &n);
    fprintf(stderr, "stories260K-hf tokenizer.json (spm_merges): %d/%d cases\n", pass, n);
    assert_int_equal(n, 12);
    assert_int_equal(pass, n);
    /* HF treats a literal U+2581 as a space */
    int *a = NULL, *b = NULL;
    size_t na, nb;
    char err[256];
    assert_int_equal(tokenizer_encode(f->hf260k, "a\xe2\x96\x81time", 8, &a, &na, err,
                                      sizeof err), 0);
    assert_int_equal(tokenizer_encode(f->hf260k, "a time", 6, &b, &nb, err, sizeof err), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    free(a);
    free(b);
}

/* Checks gpt2 reference/<dir>/prompt.txt against prompt_tokens.txt. */
static int gpt2_prompt_ok(const Tokenizer *t, const Fixture *f, const char *dir)
{
    char p[1200], err[256];
    size_t len, tlen;
    snprintf(p, sizeof p, "%s/gpt2-tiny-random/reference/%s/prompt.txt", f->dir, dir);
    char *text = util_read_file(p, &len, err, sizeof err);
    snprintf(p, sizeof p, "%s/gpt2-tiny-random/reference/%s/prompt_tokens.txt", f->dir, dir);
    char *toks = util_read_file(p, &tlen, err, sizeof err);
    assert_non_null(text);
    assert_non_null(toks);
    int want[256];
    size_t n = 0;
    for (char *s = toks, *e; n < 256; s = e) {
        long v = strtol(s, &e, 10);
        if (e == s)
            break;
        want[n++] = (int)v;
    }
    int ok = encode_matches(t, dir, text, len, want, n) && roundtrip_ok(t, text, len);
    free(text);
    free(toks);
    return ok;
}

static void check_gpt2(const Tokenizer *t, const Fixture *f, const char *what)
{
    assert_true(tokenizer_kind(t) == TOKENIZER_GPT2 && tokenizer_vocab_size(t) == 50257);
    assert_true(tokenizer_bos(t) == 50256 && tokenizer_eos(t) == 50256);
    int n, pass = run_cases(t, f, "gpt2-tiny-random/reference/tokenizer_cases.json", &n);
    int prompts = gpt2_prompt_ok(t, f, "hello_greedy32") + gpt2_prompt_ok(t, f,
                                                                          "unicode_mix_prompt");
    fprintf(stderr, "gpt2 %s: %d/%d cases, %d/2 reference prompts\n", what, pass, n, prompts);
    assert_true(n == 11 && pass == n && prompts == 2);
}

static void test_gpt2_files(void **state)
{
    Fixture *f = *state;
    need_models(f);
    check_gpt2(f->gpt2f, f, "vocab.json+merges.txt");
}

static void test_gpt2_json(void **state)
{
    Fixture *f = *state;
    need_models(f);
    check_gpt2(f->gpt2j, f, "tokenizer.json");
}

static const struct {
    const char *s;
    size_t n;
} odd_texts[] = {
    {"", 0},
    {"\n", 1},
    {"\n\n\tx y\r\n", 8},
    {" ", 1},
    {"   three leading", 16},
    {"trailing   ", 11},
    {"Caf\xc3\xa9 na\xc3\xafve \xc3\x87" "a", 14},
    {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4", 19},
    {"\xf0\x9f\x99\x82\xf0\x9f\x9a\x80 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9", 20},
    {"\xff\xfe", 2},
    {"abc\xe6\x97", 5},
    {"\x80\x80x\xc3", 4},
    {"a\0b", 3},
    {"<s> </s> <unk> <|endoftext|> <0x41>", 35},
    {"{x: 42, y: [3.14]}", 18},
};

static void check_odd(const Tokenizer *t, const char *what)
{
    int pass = 0, n = (int)(sizeof odd_texts / sizeof odd_texts[0]);
    for (int i = 0; i < n; i++)
        pass += roundtrip_ok(t, odd_texts[i].s, odd_texts[i].n);
    fprintf(stderr, "%s: %d/%d odd round trips\n", what, pass, n);
    assert_int_equal(pass, n);
}

static void test_roundtrip_odd(void **state)
{
    Fixture *f = *state;
    check_odd(f->synth, "synthetic");
    need_models(f);
    const Tokenizer *ts[] = {f->llama2, f->tok512, f->hf260k, f->gpt2f, f->gpt2j};
    const char *names[] = {"llama2", "tok512", "stories260K-hf", "gpt2 files", "gpt2 json"};
    for (int i = 0; i < 5; i++)
        check_odd(ts[i], names[i]);
}

static void test_synthetic(void **state)
{
    Fixture *f = *state;
    assert_true(!tokenizer_build_synthetic(258) && f->synth);
    assert_true(tokenizer_vocab_size(f->synth) == 512 && tokenizer_bos(f->synth) == 1 &&
                tokenizer_eos(f->synth) == 2);
    static const int hi[] = {1, 'H' + 3, 'i' + 3, 0xff + 3}, empty[] = {1};
    assert_true(encode_matches(f->synth, "hi", "Hi\xff", 3, hi, 4));
    assert_true(encode_matches(f->synth, "empty", "", 0, empty, 1));
    char out[8];
    assert_int_equal(tokenizer_decode_token(f->synth, 1, 'A' + 3, out, sizeof out), 1);
    assert_int_equal(out[0], 'A');
    assert_int_equal(tokenizer_decode_token(f->synth, -1, 2, out, sizeof out), 0);
    assert_int_equal(tokenizer_decode_token(f->synth, -1, 600, out, sizeof out), 0);
}

static void test_decode_token(void **state)
{
    Fixture *f = *state;
    need_models(f);
    char out[64];
    /* 15043 is " Hello": the dummy-prefix space goes after BOS only */
    size_t n = tokenizer_decode_token(f->llama2, 1, 15043, out, sizeof out);
    assert_int_equal(n, 5);
    assert_memory_equal(out, "Hello", 5);
    n = tokenizer_decode_token(f->llama2, 15043, 15043, out, sizeof out);
    assert_int_equal(n, 6);
    assert_memory_equal(out, " Hello", 6);
    assert_int_equal(tokenizer_decode_token(f->llama2, -1, 13, out, sizeof out), 1);
    assert_int_equal(out[0], '\n');
    assert_int_equal(tokenizer_decode_token(f->llama2, -1, 1, out, sizeof out), 0);
    assert_int_equal(tokenizer_decode_token(f->llama2, -1, 0, out, sizeof out), 0);
    assert_int_equal(tokenizer_decode_token(f->llama2, 1, 15043, out, 3), 3);
    /* gpt2: 220 is " ", no stripping; 50256 is <|endoftext|> */
    assert_int_equal(tokenizer_decode_token(f->gpt2f, -1, 220, out, sizeof out), 1);
    assert_int_equal(out[0], ' ');
    assert_int_equal(tokenizer_decode_token(f->gpt2f, -1, 50256, out, sizeof out), 0);
    /* byte-fallback runs join into UTF-8 */
    static const int emoji[] = {1, 410, 243, 162, 156, 133};
    char *s = tokenizer_decode(f->hf260k, emoji, 6);
    assert_string_equal(s, "\xf0\x9f\x99\x82");
    free(s);
}

static void test_speed(void **state)
{
    Fixture *f = *state;
    need_models(f);
    static const char *words[] = {"the ", "quick ", "brown ", "fox ", "jumps, ", "over ",
                                  "lazy ", "dogs.\n", "Unbelievably ", "1234 "};
    char *text = malloc(16000);
    size_t len = 0;
    for (int i = 0; i < 1000; i++) {
        size_t n = strlen(words[i % 10]);
        memcpy(text + len, words[i % 10], n);
        len += n;
    }
    const Tokenizer *ts[] = {f->gpt2f, f->llama2, f->hf260k};
    for (int k = 0; k < 3; k++) {
        int *ids = NULL;
        size_t n;
        char err[256];
        double t0 = time_now();
        assert_int_equal(tokenizer_encode(ts[k], text, len, &ids, &n, err, sizeof err), 0);
        double dt = time_now() - t0;
        fprintf(stderr, "encode 1000 words (%zu bytes) -> %zu ids in %.2f ms\n", len, n,
                dt * 1e3);
        assert_true(dt < 1.0); /* milliseconds in practice; loose for sanitizer builds */
        char *s = tokenizer_decode(ts[k], ids, n);
        assert_memory_equal(s, text, len);
        free(s);
        free(ids);
    }
    free(text);
}

static void tmp_path(Fixture *f, char *out, size_t cap, const char *ext)
{
    snprintf(out, cap, "/tmp/hs_test_tok_%d_%d%s", (int)getpid(), f->n_tmp++, ext);
}

/* Writes t to a fresh HDF5 file at path and returns the open file id. */
static hid_t h5_write_tmp(const Tokenizer *t, const char *path)
{
    char err[512];
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    if (tokenizer_h5_write(t, file, err, sizeof err) != 0)
        fail_msg("h5 write: %s", err);
    return file;
}

static void check_h5_roundtrip(Fixture *f, const Tokenizer *t, const char *what)
{
    char path[256], err[512];
    tmp_path(f, path, sizeof path, ".h5");
    hid_t file = h5_write_tmp(t, path);
    H5Fclose(file);
    file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    Tokenizer *r = NULL;
    if (tokenizer_h5_read(&r, file, path, err, sizeof err) != 0)
        fail_msg("h5 read %s: %s", what, err);
    H5Fclose(file);
    unlink(path);
    assert_int_equal(tokenizer_kind(r), tokenizer_kind(t));
    assert_int_equal(tokenizer_vocab_size(r), tokenizer_vocab_size(t));
    assert_int_equal(tokenizer_bos(r), tokenizer_bos(t));
    assert_int_equal(tokenizer_eos(r), tokenizer_eos(t));
    int n = (int)(sizeof odd_texts / sizeof odd_texts[0]);
    for (int i = 0; i < n + 1; i++) {
        const char *s = i < n ? odd_texts[i].s : "Once upon a time, there was a little girl.";
        size_t len = i < n ? odd_texts[i].n : strlen(s);
        int *a = NULL, *b = NULL;
        size_t na, nb;
        assert_int_equal(tokenizer_encode(t, s, len, &a, &na, err, sizeof err), 0);
        assert_int_equal(tokenizer_encode(r, s, len, &b, &nb, err, sizeof err), 0);
        assert_int_equal(na, nb);
        if (na)
            assert_memory_equal(a, b, na * sizeof *a);
        free(a);
        free(b);
    }
    assert_true(roundtrip_ok(r, "Hello, world!\n", 14));
    tokenizer_free(r);
}

static void test_h5_roundtrip(void **state)
{
    Fixture *f = *state;
    check_h5_roundtrip(f, f->synth, "synthetic");
    need_models(f);
    check_h5_roundtrip(f, f->tok512, "tok512");
    check_h5_roundtrip(f, f->hf260k, "stories260K-hf");
    check_h5_roundtrip(f, f->gpt2j, "gpt2");
}

/* Reads path's /tokenizer; expects failure with a message naming path and containing
 * field. */
static void expect_h5_fail(const char *path, const char *field)
{
    char err[512] = "";
    Tokenizer *r = NULL;
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(file >= 0);
    int rc = tokenizer_h5_read(&r, file, path, err, sizeof err);
    H5Fclose(file);
    if (rc == 0 || !strstr(err, path) || !strstr(err, field))
        fail_msg("expected an error naming %s and %s, got rc %d: %s", path, field, rc, err);
    assert_null(r);
}

/* Writes t to path with dataset name of /tokenizer replaced by the given values, then
 * expects reading it back to fail with an error naming path and field. */
static void h5_tamper(const Tokenizer *t, const char *path, const char *name, hid_t type,
                      int rank, const hsize_t *dims, const void *data, const char *field)
{
    hid_t file = h5_write_tmp(t, path);
    hid_t g = H5Gopen2(file, "/tokenizer", H5P_DEFAULT);
    if (H5Lexists(g, name, H5P_DEFAULT) > 0)
        H5Ldelete(g, name, H5P_DEFAULT);
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(g, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    assert_true(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
    H5Gclose(g);
    H5Fclose(file);
    expect_h5_fail(path, field);
}

static void test_h5_bad(void **state)
{
    Fixture *f = *state;
    char path[256], err[512];
    const Tokenizer *t = f->synth;
    /* a variable-length kind string reads as well as a fixed-length one */
    tmp_path(f, path, sizeof path, ".h5");
    hid_t file = h5_write_tmp(t, path);
    hid_t g = H5Gopen2(file, "/tokenizer", H5P_DEFAULT);
    H5Adelete(g, "kind");
    hid_t st = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(st, H5T_VARIABLE);
    hid_t a = H5Acreate2(g, "kind", st, sp, H5P_DEFAULT, H5P_DEFAULT);
    const char *kind = "spm";
    H5Awrite(a, st, &kind);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(st);
    H5Gclose(g);
    H5Fclose(file);
    Tokenizer *r = NULL;
    file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (tokenizer_h5_read(&r, file, path, err, sizeof err) != 0)
        fail_msg("vlen kind: %s", err);
    H5Fclose(file);
    assert_int_equal(tokenizer_kind(r), TOKENIZER_SPM);
    tokenizer_free(r);
    /* merges with ids out of range */
    int32_t bad_merges[2] = {5, 512};
    hsize_t mdims[2] = {1, 2};
    h5_tamper(t, path, "merges", H5T_NATIVE_INT32, 2, mdims, bad_merges, "merges[0]");
    expect_h5_fail(path, "out of range");
    /* the synthetic pieces' true offsets, then made non-monotonic or running past the end */
    uint64_t offs[513] = {0};
    hsize_t odims[1] = {513};
    for (int i = 0; i < 512; i++) {
        char piece[32];
        int n = i < 3 ? 5 + (i == 2) : i < 259 ? 6 : snprintf(piece, sizeof piece, "<synth%d>",
                                                                  i);
        offs[i + 1] = offs[i] + (uint64_t)n;
    }
    uint64_t keep = offs[100];
    offs[100] = offs[102];
    h5_tamper(t, path, "piece_offsets", H5T_NATIVE_UINT64, 1, odims, offs, "not monotonic");
    offs[100] = keep;
    offs[512] += 1;
    h5_tamper(t, path, "piece_offsets", H5T_NATIVE_UINT64, 1, odims, offs, "piece_offsets");
    /* scores of the wrong length */
    float sc[3] = {0};
    hsize_t sdims[1] = {3};
    h5_tamper(t, path, "scores", H5T_NATIVE_FLOAT, 1, sdims, sc, "scores");
    /* no /tokenizer group */
    file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(file);
    expect_h5_fail(path, "/tokenizer");
    unlink(path);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

/* Expects rc -1 and an error naming path and containing field. */
static void expect_fail(int rc, const char *err, const char *path, const char *field)
{
    if (rc == 0 || !strstr(err, path) || !strstr(err, field))
        fail_msg("expected an error naming %s and %s, got rc %d: %s", path, field, rc, err);
}

/* Writes a llama2.c tokenizer.bin (max_token_length mtl, one piece "abc" of the given score
 * and length field, cut to keep bytes) and expects loading n pieces to fail naming field. */
static void bin_fail(const char *path, int32_t mtl, float score, int32_t len, size_t keep,
                     int n, const char *field)
{
    unsigned char buf[15];
    char err[512];
    Tokenizer *t = NULL;
    memcpy(buf, &mtl, 4);
    memcpy(buf + 4, &score, 4);
    memcpy(buf + 8, &len, 4);
    memcpy(buf + 12, "abc", 3);
    write_file(path, buf, keep);
    int rc = tokenizer_load_llama2c(&t, path, n, err, sizeof err);
    if (field)
        expect_fail(rc, err, path, field);
    else if (rc != 0)
        fail_msg("%s", err);
    tokenizer_free(t);
}

static void test_bad_llama2c(void **state)
{
    Fixture *f = *state;
    char path[256], err[512];
    Tokenizer *t = NULL;
    tmp_path(f, path, sizeof path, ".bin");
    bin_fail(path, 7, 0.0f, 3, 15, 1, NULL); /* the valid baseline */
    bin_fail(path, 7, 0.0f, -5, 15, 1, "length -5");
    bin_fail(path, 7, 0.0f, 1 << 30, 15, 1, "length");
    bin_fail(path, 2, 0.0f, 3, 15, 1, "max_token_length");
    bin_fail(path, -1, 0.0f, 3, 15, 1, "max_token_length");
    bin_fail(path, 7, NAN, 3, 15, 1, "NaN");
    bin_fail(path, 7, 0.0f, 3, 14, 1, "truncated");
    bin_fail(path, 7, 0.0f, 3, 2, 1, "truncated");
    bin_fail(path, 7, 0.0f, 3, 15, 2, "truncated");
    bin_fail(path, 7, 0.0f, 3, 15, 0, "vocab_size");
    bin_fail(path, 7, 0.0f, 3, 15, (1 << 24) + 1, "vocab_size");
    unlink(path);
    expect_fail(tokenizer_load_llama2c(&t, path, 1, err, sizeof err), err, path, "open");
    assert_null(t);
    if (!f->tok512)
        return;
    /* the real file cut short, and read with the wrong vocab size */
    char real[1200];
    path_join(real, sizeof real, f, "stories260K/tok512.bin");
    size_t len;
    char *data = util_read_file(real, &len, err, sizeof err);
    assert_non_null(data);
    write_file(path, data, 3000);
    expect_fail(tokenizer_load_llama2c(&t, path, 512, err, sizeof err), err, path, "truncated");
    expect_fail(tokenizer_load_llama2c(&t, real, 500, err, sizeof err), err, real, "vocab_size");
    free(data);
    unlink(path);
}

/* Writes a llama2.c tokenizer.bin of n pieces with the given scores. */
static void write_bin(const char *path, const char *const *pieces, const float *scores, int n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    int32_t mtl = 8;
    fwrite(&mtl, 4, 1, fp);
    for (int i = 0; i < n; i++) {
        int32_t len = (int32_t)strlen(pieces[i]);
        fwrite(&scores[i], 4, 1, fp);
        fwrite(&len, 4, 1, fp);
        fwrite(pieces[i], 1, (size_t)len, fp);
    }
    fclose(fp);
}

/* Loads a tokenizer.json from a string through a temporary file. */
static Tokenizer *load_json_text(Fixture *f, const char *json)
{
    char path[256], err[512];
    Tokenizer *t = NULL;
    tmp_path(f, path, sizeof path, ".json");
    write_file(path, json, strlen(json));
    if (tokenizer_load_hf_json(&t, path, err, sizeof err) != 0)
        fail_msg("%s", err);
    unlink(path);
    return t;
}

/* The merge-order rules on tiny hand-made vocabularies. */
static void test_bpe_rules(void **state)
{
    Fixture *f = *state;
    char path[256], err[512];
    /* spm (run.c): highest score first, leftmost on ties, nothing at or below -1e10 */
    static const char *const pieces[] = {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "aa",
                                         "b", "ab", "bb", " b"};
    static const float scores[] = {0, 0, 0, 0, 0, -5, 0, -1, -2e10f, -1e9f};
    tmp_path(f, path, sizeof path, ".bin");
    write_bin(path, pieces, scores, 10);
    Tokenizer *t = NULL;
    if (tokenizer_load_llama2c(&t, path, 10, err, sizeof err) != 0)
        fail_msg("%s", err);
    unlink(path);
    static const int aaa[] = {1, 3, 5, 4};     /* " " "aa" "a": the leftmost tie wins */
    static const int aab[] = {1, 3, 4, 7};     /* "ab" (-1) beats "aa" (-5) */
    static const int bb[] = {1, 9, 6};         /* " b" merges (-1e9), "bb" never (-2e10) */
    static const int unk[] = {1, 3, 0, 0};     /* no piece, no byte pieces: <unk> per char */
    assert_true(encode_matches(t, "aaa", "aaa", 3, aaa, 4));
    assert_true(encode_matches(t, "aab", "aab", 3, aab, 4));
    assert_true(encode_matches(t, "bb", "bb", 2, bb, 3));
    assert_true(encode_matches(t, "unk", "x\xc3\xa9", 3, unk, 4));
    tokenizer_free(t);
    /* spm_merges: by rank, leftmost first; BOS from the post-processor */
    t = load_json_text(f, "{\"model\": {\"vocab\": {\"<s>\": 0, \"a\": 1, \"aa\": 2,"
                          " \"\\u2581\": 3, \"\\u2581a\": 4}, \"merges\": [\"a a\","
                          " \"\\u2581 a\"]}, \"normalizer\": {\"type\": \"Sequence\","
                          " \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\\u2581\"},"
                          "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"},"
                          " \"content\": \"\\u2581\"}]},"
                          " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": ["
                          "{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
                          "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]}}");
    static const int m_aaa[] = {0, 3, 2, 1}, m_a[] = {0, 4}; /* "a a" (rank 0) goes first */
    assert_true(encode_matches(t, "m_aaa", "aaa", 3, m_aaa, 4));
    assert_true(encode_matches(t, "m_a", "a", 1, m_a, 2));
    assert_true(roundtrip_ok(t, "aaa a", 5));
    tokenizer_free(t);
    /* gpt2: every occurrence of the lowest-rank pair merges before any newer pair */
    t = load_json_text(f, "{\"model\": {\"vocab\": {\"x\": 0, \"y\": 1, \"xy\": 2, \"xyx\": 3,"
                          " \"\\u0120\": 4}, \"merges\": [[\"xy\", \"x\"], [\"x\", \"y\"]]},"
                          " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\":"
                          " false, \"use_regex\": true}}");
    static const int g_xyxy[] = {2, 2};
    static const int g_sp[] = {2, 4, 4, 2}; /* "xy", "  " (split by \s+(?!\S)), " xy" */
    assert_true(encode_matches(t, "xyxy", "xyxy", 4, g_xyxy, 2));
    assert_true(encode_matches(t, "g_sp", "xy  xy", 6, g_sp, 4));
    tokenizer_free(t);
}

static void test_bad_json(void **state)
{
    Fixture *f = *state;
    static const struct {
        const char *json, *field;
    } cases[] = {
        {"{\"model\": {", "invalid JSON"},
        {"{}", "model"},
        {"{\"model\": {\"type\": \"BPE\", \"merges\": []}}", "model.vocab"},
        {"{\"model\": {\"type\": \"Unigram\", \"vocab\": {}}}", "model.type"},
        {"{\"model\": {\"vocab\": {\"a\": 0, \"b\": -1}, \"merges\": []}}", "model.vocab"},
        {"{\"model\": {\"vocab\": {\"a\": 0, \"b\": 16777216}, \"merges\": []}}", "model.vocab"},
        {"{\"model\": {\"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}", "model.vocab"},
        {"{\"model\": {\"vocab\": {\"a\": 0, \"b\": 2}, \"merges\": []}}", "ids go up to 2"},
        {"{\"model\": {\"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}",
         "model.merges[0]"},
        {"{\"model\": {\"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"ab\"]}}",
         "model.merges[0]"},
        {"{\"model\": {\"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [[\"a\", \"b\"]]}}",
         "merges[0]"},
        {"{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": 3}}", "model.merges"},
        {"{\"model\": {\"vocab\": {\"\\u4e00\": 0}, \"merges\": []}, "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", "byte-level"},
        {"{\"model\": {\"vocab\": {\"a\": 0}}, \"normalizer\": {\"type\": \"NFKC\"}}",
         "normalizer"},
    };
    char path[256], err[512];
    Tokenizer *t = NULL;
    tmp_path(f, path, sizeof path, ".json");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].json, strlen(cases[i].json));
        int rc = tokenizer_load_hf_json(&t, path, err, sizeof err);
        expect_fail(rc, err, path, cases[i].field);
        assert_null(t);
    }
    /* a minimal valid one: merges in both forms */
    const char *ok = "{\"model\": {\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"<unk>\": 3},"
                     " \"merges\": [\"a b\", [\"a\", \"b\"]], \"unk_token\": \"<unk>\"}}";
    write_file(path, ok, strlen(ok));
    if (tokenizer_load_hf_json(&t, path, err, sizeof err) != 0)
        fail_msg("%s", err);
    static const int ab[] = {2, 3};
    assert_true(encode_matches(t, "ab", "abc", 3, ab, 2));
    tokenizer_free(t);
    t = NULL;
    /* vocab.json + merges.txt */
    static const struct {
        const char *vocab, *merges, *field;
        int in_merges;
    } gcases[] = {
        {"{\"a\": 0, \"b\": ", "#version: 0.2\n", "invalid JSON", 0},
        {"{\"a\": 0, \"b\": 1}", "#version: 0.2\na c\n", "line 2", 1},
        {"{\"a\": 0, \"b\": 1}", "#version: 0.2\nab\n", "line 2", 1},
        {"{\"a\": 0, \"b\": 1}", "#version: 0.2\na b\n", "not in the vocabulary", 1},
    };
    char mpath[256];
    tmp_path(f, mpath, sizeof mpath, ".txt");
    for (size_t i = 0; i < sizeof gcases / sizeof gcases[0]; i++) {
        write_file(path, gcases[i].vocab, strlen(gcases[i].vocab));
        write_file(mpath, gcases[i].merges, strlen(gcases[i].merges));
        expect_fail(tokenizer_load_gpt2_files(&t, path, mpath, err, sizeof err), err,
                    gcases[i].in_merges ? mpath : path, gcases[i].field);
        assert_null(t);
    }
    unlink(path);
    unlink(mpath);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2_cases),  cmocka_unit_test(test_stories_spm),
        cmocka_unit_test(test_stories_hf),    cmocka_unit_test(test_gpt2_files),
        cmocka_unit_test(test_gpt2_json),     cmocka_unit_test(test_roundtrip_odd),
        cmocka_unit_test(test_synthetic),     cmocka_unit_test(test_decode_token),
        cmocka_unit_test(test_speed),         cmocka_unit_test(test_h5_roundtrip),
        cmocka_unit_test(test_h5_bad),        cmocka_unit_test(test_bad_llama2c),
        cmocka_unit_test(test_bad_json),      cmocka_unit_test(test_bpe_rules),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
