/* test_safetensors.c: the safetensors reader: exact F16/BF16 widening, element-range reads,
 * sharded index files, and refusal of every malformed header with the file named. */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "safetensors.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_helpers.h"

static char tmpdir[64];

static int setup_dir(void **state)
{
    (void)state;
    return test_tmpdir_make(tmpdir, sizeof tmpdir, "st");
}

static int teardown_dir(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

static const char *tpath(char *buf, size_t cap, const char *name)
{
    return test_path(buf, cap, tmpdir, name);
}

/* Writes a safetensors file: header_len (or the real length when 0), header text, data. */
static void write_raw(const char *path, const char *header, uint64_t header_len_field,
                      const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    size_t hl = strlen(header);
    uint64_t len = header_len_field ? header_len_field : hl;
    uint8_t lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (uint8_t)(len >> (8 * i));
    assert_int_equal(fwrite(lb, 1, 8, f), 8);
    assert_int_equal(fwrite(header, 1, hl, f), hl);
    if (n)
        assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

typedef struct {
    const char *name, *dtype;
    int rank;
    uint64_t shape[3];
    const void *data;
    size_t nbytes;
} TensorSpec;

/* Writes a well-formed file with tensors laid out back to back (header padded to 8). */
static void write_st(const char *path, const TensorSpec *t, int n)
{
    char hdr[4096];
    size_t off = 0, pos = 0;
    pos += (size_t)snprintf(hdr + pos, sizeof hdr - pos, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        pos += (size_t)snprintf(hdr + pos, sizeof hdr - pos,
                                ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
        for (int r = 0; r < t[i].rank; r++)
            pos += (size_t)snprintf(hdr + pos, sizeof hdr - pos, "%s%llu", r ? "," : "",
                                    (unsigned long long)t[i].shape[r]);
        pos += (size_t)snprintf(hdr + pos, sizeof hdr - pos, "],\"data_offsets\":[%zu,%zu]}", off,
                                off + t[i].nbytes);
        off += t[i].nbytes;
    }
    pos += (size_t)snprintf(hdr + pos, sizeof hdr - pos, "}");
    while (pos % 8)
        hdr[pos++] = ' ';
    hdr[pos] = '\0';
    uint8_t *data = malloc(off + 1);
    off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(data + off, t[i].data, t[i].nbytes);
        off += t[i].nbytes;
    }
    write_raw(path, hdr, 0, data, off);
    free(data);
}

/* Reference value of an f16 bit pattern (not NaN), computed in double. */
static double f16_ref(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static void test_f16_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = safetensors_f16_to_f32((uint16_t)h);
        if (((h >> 10) & 31) == 31 && (h & 1023)) {
            assert_true(isnan(f));
            continue;
        }
        assert_true((double)f == f16_ref((uint16_t)h));
        assert_int_equal(signbit(f) != 0, (h >> 15) != 0); /* -0.0 keeps its sign */
    }
    assert_true(safetensors_f16_to_f32(0x3C00) == 1.0f);
    assert_true(safetensors_f16_to_f32(0x7BFF) == 65504.0f);
    assert_true(safetensors_f16_to_f32(0x0001) == 0x1p-24f);
}

static void test_bf16_exhaustive(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = safetensors_bf16_to_f32((uint16_t)b);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        assert_int_equal(bits, b << 16);
    }
    assert_true(safetensors_bf16_to_f32(0x3F80) == 1.0f);
    assert_true(safetensors_bf16_to_f32(0xC049) == -3.140625f);
}

static void test_read_mixed_dtypes(void **state)
{
    (void)state;
    float a[6] = {1.5f, -2.25f, 3.0f, 0.0f, 1e-30f, -7.0f};
    uint16_t h[5] = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x8000}; /* 1, -2, 2^-24, 65504, -0 */
    uint16_t b[6] = {0x3F80, 0xC049, 0x0000, 0x4000, 0x7F80, 0x0001};
    TensorSpec t[3] = {
        {"a.weight", "F32", 2, {2, 3}, a, sizeof a},
        {"h.bias", "F16", 1, {5}, h, sizeof h},
        {"b.weight", "BF16", 2, {3, 2}, b, sizeof b},
    };
    char p[128], err[512];
    write_st(tpath(p, sizeof p, "mixed.safetensors"), t, 3);
    SafeTensors *st;
    assert_int_equal(safetensors_open(&st, p, err, sizeof err), 0);
    assert_int_equal(safetensors_count(st), 3);
    assert_null(safetensors_find(st, "nope"));
    const StTensor *ta = safetensors_find(st, "a.weight"), *th = safetensors_find(st, "h.bias"),
                   *tb = safetensors_find(st, "b.weight");
    assert_non_null(ta);
    assert_non_null(th);
    assert_non_null(tb);
    assert_int_equal(ta->dtype, ST_F32);
    assert_int_equal(th->dtype, ST_F16);
    assert_int_equal(tb->dtype, ST_BF16);
    assert_int_equal(ta->rank, 2);
    assert_int_equal(ta->shape[1], 3);
    assert_string_equal(safetensors_file_of(st, tb), p);
    float out[8];
    assert_int_equal(safetensors_read(st, ta, 0, 6, out, err, sizeof err), 0);
    assert_memory_equal(out, a, sizeof a);
    assert_int_equal(safetensors_read(st, th, 1, 4, out, err, sizeof err), 0);
    assert_true(out[0] == -2.0f && out[1] == 0x1p-24f && out[2] == 65504.0f);
    assert_true(out[3] == 0.0f && signbit(out[3]));
    for (uint64_t e0 = 0; e0 < 6; e0++) /* every start and length, in-place widening */
        for (uint64_t n = 0; e0 + n <= 6; n++) {
            memset(out, 0xff, sizeof out);
            assert_int_equal(safetensors_read(st, tb, e0, n, out, err, sizeof err), 0);
            for (uint64_t i = 0; i < n; i++)
                assert_true(memcmp(&out[i], &(float){safetensors_bf16_to_f32(b[e0 + i])}, 4)
                            == 0);
        }
    assert_int_equal(safetensors_read(st, tb, 4, 3, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "b.weight"));
    safetensors_close(st);
}

static void test_sharded_index(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, y[2] = {5, 6};
    uint16_t z[3] = {0x3F80, 0x4000, 0x4040};
    TensorSpec s1[2] = {{"x", "F32", 2, {2, 2}, x, sizeof x}, {"y", "F32", 1, {2}, y, sizeof y}};
    TensorSpec s2[1] = {{"z", "BF16", 1, {3}, z, sizeof z}};
    char p[128], idx[128], err[512];
    write_st(tpath(p, sizeof p, "model-00001-of-00002.safetensors"), s1, 2);
    write_st(tpath(p, sizeof p, "model-00002-of-00002.safetensors"), s2, 1);
    FILE *f = fopen(tpath(idx, sizeof idx, "model.safetensors.index.json"), "w");
    fprintf(f, "{\"metadata\":{\"total_size\":30},\"weight_map\":{\"x\":\"model-00001-of-00002."
               "safetensors\",\"z\":\"model-00002-of-00002.safetensors\",\"y\":\"model-00001-of-"
               "00002.safetensors\"}}");
    fclose(f);
    SafeTensors *st;
    assert_int_equal(safetensors_open_dir(&st, tmpdir, err, sizeof err), 0);
    assert_int_equal(safetensors_count(st), 3);
    float out[4];
    const StTensor *tz = safetensors_find(st, "z");
    assert_non_null(tz);
    assert_non_null(strstr(safetensors_file_of(st, tz), "00002-of"));
    assert_int_equal(safetensors_read(st, tz, 0, 3, out, err, sizeof err), 0);
    assert_true(out[0] == 1.0f && out[1] == 2.0f && out[2] == 3.0f);
    assert_int_equal(safetensors_read(st, safetensors_find(st, "x"), 1, 3, out, err,
                                      sizeof err), 0);
    assert_true(out[0] == 2.0f && out[2] == 4.0f);
    safetensors_close(st);

    /* the index names a tensor in the wrong shard */
    f = fopen(idx, "w");
    fprintf(f, "{\"weight_map\":{\"x\":\"model-00002-of-00002.safetensors\"}}");
    fclose(f);
    assert_int_equal(safetensors_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, idx));
    assert_non_null(strstr(err, "weight_map"));
    /* a shard outside the directory */
    f = fopen(idx, "w");
    fprintf(f, "{\"weight_map\":{\"x\":\"../evil.safetensors\"}}");
    fclose(f);
    assert_int_equal(safetensors_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, "weight_map"));
    /* a missing shard file */
    f = fopen(idx, "w");
    fprintf(f, "{\"weight_map\":{\"x\":\"model-00009-of-00009.safetensors\"}}");
    fclose(f);
    assert_int_equal(safetensors_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, "model-00009-of-00009.safetensors"));
    /* the same tensor in two shards */
    write_st(tpath(p, sizeof p, "model-00002-of-00002.safetensors"), s1, 1);
    f = fopen(idx, "w");
    fprintf(f, "{\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\",\"z\":\"model-00002"
               "-of-00002.safetensors\"}}");
    fclose(f);
    assert_int_equal(safetensors_open(&st, idx, err, sizeof err), -1);
    assert_non_null(strstr(err, "also stored"));
    /* no weights at all */
    assert_int_equal(safetensors_open_dir(&st, "/nonexistent-dir", err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent-dir"));
}

/* One malformed file: opening must fail naming the file and containing what. */
static void expect_bad(const char *name, const char *header, uint64_t hlen, size_t data_bytes,
                       const char *what)
{
    char p[128], err[512];
    uint8_t data[64] = {0};
    tpath(p, sizeof p, name);
    write_raw(p, header, hlen, data, data_bytes);
    SafeTensors *st = (SafeTensors *)1;
    err[0] = '\0';
    assert_int_equal(safetensors_open(&st, p, err, sizeof err), -1);
    assert_null(st);
    if (!strstr(err, p) || !strstr(err, what))
        fail_msg("%s: message '%s' lacks '%s'", name, err, what);
}

static void test_bad_headers(void **state)
{
    (void)state;
    const char *ok = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    expect_bad("hlen.safetensors", ok, 1000000, 8, "header length");
    expect_bad("hlen_huge.safetensors", ok, UINT64_MAX - 3, 8, "header length");
    expect_bad("notjson.safetensors", "{\"t\": [1, 2", 0, 8, "JSON");
    expect_bad("notobj.safetensors", "[1,2,3]", 0, 8, "JSON");
    expect_bad("beyond.safetensors",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 0, 8,
               "outside the data");
    expect_bad("overlap.safetensors",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"u\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 0, 16,
               "overlap");
    expect_bad("dtype.safetensors",
               "{\"t\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 0, 8,
               "unsupported dtype I64");
    expect_bad("size.safetensors",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 0, 16,
               "need 12");
    expect_bad("negshape.safetensors",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 0, 8,
               "shape[0]");
    expect_bad("order.safetensors",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 0, 8,
               "data_offsets");
    expect_bad("overflow.safetensors",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
               "\"data_offsets\":[0,8]}}", 0, 8, "overflows");
    expect_bad("nodtype.safetensors", "{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8,
               "lacks dtype");
    expect_bad("dup.safetensors",
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 0, 8, "JSON");
    char p[128], err[512];
    SafeTensors *st;
    FILE *f = fopen(tpath(p, sizeof p, "short.safetensors"), "wb");
    fwrite("abc", 1, 3, f);
    fclose(f);
    assert_int_equal(safetensors_open(&st, p, err, sizeof err), -1);
    assert_non_null(strstr(err, p));
    assert_int_equal(safetensors_open(&st, "/nonexistent/x.safetensors", err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/x.safetensors"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_exhaustive),
        cmocka_unit_test(test_bf16_exhaustive),
        cmocka_unit_test(test_read_mixed_dtypes),
        cmocka_unit_test(test_sharded_index),
        cmocka_unit_test(test_bad_headers),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
