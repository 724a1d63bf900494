/* gguf_builder.h: writes small GGUF files (version 3) in memory for the unit tests: metadata
 * of every type, tensor infos and data aligned to 32 bytes, as llama.cpp's gguf writer lays
 * them out.  Include once, in a test file. */
#ifndef HEADSPLIT_GGUF_BUILDER_H
#define HEADSPLIT_GGUF_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *b;
    size_t n, cap;
} GbBuf;

typedef struct {
    GbBuf kv, ti, data;
    uint64_t n_kv, n_t;
    uint32_t version;
} GgufBuilder;

static inline void gb_put(GbBuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->b = realloc(b->b, b->cap);
    }
    if (n)
        memcpy(b->b + b->n, p, n);
    b->n += n;
}

static inline void gb_u32(GbBuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    gb_put(b, x, 4);
}

static inline void gb_u64(GbBuf *b, uint64_t v)
{
    gb_u32(b, (uint32_t)v);
    gb_u32(b, (uint32_t)(v >> 32));
}

static inline void gb_str(GbBuf *b, const char *s)
{
    gb_u64(b, strlen(s));
    gb_put(b, s, strlen(s));
}

static inline void gb_key(GgufBuilder *g, const char *key, uint32_t type)
{
    gb_str(&g->kv, key);
    gb_u32(&g->kv, type);
    g->n_kv++;
}

static inline void gb_kv_str(GgufBuilder *g, const char *key, const char *v)
{
    gb_key(g, key, 8);
    gb_str(&g->kv, v);
}

static inline void gb_kv_u32(GgufBuilder *g, const char *key, uint32_t v)
{
    gb_key(g, key, 4);
    gb_u32(&g->kv, v);
}

static inline void gb_kv_f32(GgufBuilder *g, const char *key, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    gb_key(g, key, 6);
    gb_u32(&g->kv, u);
}

static inline void gb_kv_bool(GgufBuilder *g, const char *key, int v)
{
    uint8_t x = (uint8_t)(v != 0);
    gb_key(g, key, 7);
    gb_put(&g->kv, &x, 1);
}

static inline void gb_kv_arr_str(GgufBuilder *g, const char *key, const char *const *v, int n)
{
    gb_key(g, key, 9);
    gb_u32(&g->kv, 8);
    gb_u64(&g->kv, (uint64_t)n);
    for (int i = 0; i < n; i++)
        gb_str(&g->kv, v[i]);
}

static inline void gb_kv_arr_f32(GgufBuilder *g, const char *key, const float *v, int n)
{
    gb_key(g, key, 9);
    gb_u32(&g->kv, 6);
    gb_u64(&g->kv, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        gb_u32(&g->kv, u);
    }
}

static inline void gb_kv_arr_i32(GgufBuilder *g, const char *key, const int32_t *v, int n)
{
    gb_key(g, key, 9);
    gb_u32(&g->kv, 5);
    gb_u64(&g->kv, (uint64_t)n);
    for (int i = 0; i < n; i++)
        gb_u32(&g->kv, (uint32_t)v[i]);
}

/* A tensor of ggml type `type` with ne = {ne0, ne1} (ne1 = 0: one dimension) and its bytes. */
static inline void gb_tensor(GgufBuilder *g, const char *name, uint32_t type, uint64_t ne0,
                             uint64_t ne1, const void *data, size_t bytes)
{
    static const uint8_t zero[32] = {0};
    gb_put(&g->data, zero, (32 - g->data.n % 32) % 32);
    gb_str(&g->ti, name);
    gb_u32(&g->ti, ne1 ? 2 : 1);
    gb_u64(&g->ti, ne0);
    if (ne1)
        gb_u64(&g->ti, ne1);
    gb_u32(&g->ti, type);
    gb_u64(&g->ti, g->data.n);
    gb_put(&g->data, data, bytes);
    g->n_t++;
}

/* The whole file (malloc'ed, *len bytes); frees the builder's buffers. */
static inline uint8_t *gb_finish(GgufBuilder *g, size_t *len)
{
    static const uint8_t zero[32] = {0};
    GbBuf f = {0};
    gb_put(&f, "GGUF", 4);
    gb_u32(&f, g->version ? g->version : 3);
    gb_u64(&f, g->n_t);
    gb_u64(&f, g->n_kv);
    gb_put(&f, g->kv.b, g->kv.n);
    gb_put(&f, g->ti.b, g->ti.n);
    gb_put(&f, zero, (32 - f.n % 32) % 32);
    gb_put(&f, g->data.b, g->data.n);
    free(g->kv.b);
    free(g->ti.b);
    free(g->data.b);
    memset(g, 0, sizeof *g);
    *len = f.n;
    return f.b;
}

static inline void gb_write_file(GgufBuilder *g, const char *path)
{
    size_t n;
    uint8_t *b = gb_finish(g, &n);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n)
        abort();
    fclose(f);
    free(b);
}

#endif
