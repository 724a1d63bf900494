/* fuzz_safetensors: the safetensors header parser (src/convert/safetensors.c).
 * An input starting with '{' is a sharded index (model.safetensors.index.json) next to two
 * fixed, valid shards a.safetensors and b.safetensors; any other input is one .safetensors
 * file.  Every tensor the parser accepts must lie inside the data area, have
 * n_elems * dtype size == end - begin, and be readable element range by element range. */
#include "fuzz_common.h"
#include "safetensors.h"

static void put_shard(const char *name, const char *header, size_t data_bytes)
{
    size_t hl = strlen(header), n = 8 + hl + data_bytes;
    uint8_t *b = calloc(1, n);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_bytes; i++)
        b[8 + hl + i] = (uint8_t)(i * 37 + 11);
    fuzz_write_file(fuzz_path(0, name), b, n);
    free(b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    put_shard("a.safetensors",
              "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
              "\"w.b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}}", 32);
    put_shard("b.safetensors",
              "{\"__metadata__\":{\"format\":\"pt\"},"
              "\"w.c\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
              "\"w.d\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[6,10]}}", 10);
    return 0;
}

static void check_tensors(const SafeTensors *st)
{
    static float buf[1024];
    char err[512];
    size_t n = safetensors_count(st);
    for (size_t i = 0; i < n; i++) {
        const StTensor *t = safetensors_at(st, i);
        FUZZ_ASSERT(t && t->name, "tensor %zu", i);
        FUZZ_ASSERT(safetensors_find(st, t->name) == t, "find(%s)", t->name);
        FUZZ_ASSERT(t->begin <= t->end, "%s", t->name);
        FUZZ_ASSERT(t->rank >= 0 && t->rank <= ST_MAX_RANK, "%s rank %d", t->name, t->rank);
        uint64_t prod = 1;
        for (int d = 0; d < t->rank; d++)
            prod *= t->shape[d];
        FUZZ_ASSERT(prod == t->n_elems, "%s", t->name);
        FUZZ_ASSERT(t->n_elems * safetensors_dtype_size(t->dtype) == t->end - t->begin, "%s",
                    t->name);
        FUZZ_ASSERT(safetensors_file_of(st, t) != NULL, "%s", t->name);
        /* Read the first elements in two pieces, then one element past the end (refused). */
        uint64_t m = t->n_elems < 1024 ? t->n_elems : 1024, h = m / 2;
        FUZZ_ASSERT(safetensors_read(st, t, 0, h, buf, err, sizeof err) == 0, "%s: %s",
                    t->name, err);
        FUZZ_ASSERT(safetensors_read(st, t, h, m - h, buf, err, sizeof err) == 0, "%s: %s",
                    t->name, err);
        FUZZ_ASSERT(safetensors_read(st, t, t->n_elems, 1, buf, err, sizeof err) < 0, "%s",
                    t->name);
    }
    FUZZ_ASSERT(safetensors_at(st, n) == NULL, "at(count)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = size > 0 && data[0] == '{' ? fuzz_path(1, "model.safetensors.index.json")
                                                  : fuzz_path(1, "model.safetensors");
    fuzz_write_file(path, data, size);
    SafeTensors *st = NULL;
    char err[1024];
    err[0] = '\0';
    if (safetensors_open(&st, path, err, sizeof err) == 0) {
        FUZZ_ASSERT(st != NULL, "open returned 0 without a table");
        check_tensors(st);
        safetensors_close(st);
    } else {
        FUZZ_ASSERT(st == NULL && err[0] != '\0', "failure without a message");
        FUZZ_ASSERT(memchr(err, '\0', sizeof err) != NULL, "unterminated message");
    }
    return 0;
}
