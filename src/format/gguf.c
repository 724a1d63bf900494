/* gguf.c: the GGUF reader (include/format/gguf.h).  The whole file is mapped; the parser walks it
 * with a cursor that checks every length against the bytes left, so that a truncated or
 * damaged file is refused with one line and never read out of bounds.  Layout (GGUF v2/v3):
 * "GGUF", uint32 version, uint64 n_tensors, uint64 n_kv, the key/values, the tensor infos,
 * padding to general.alignment, then the tensor data at offsets relative to that point. */
#include "gguf.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bounds that no real file reaches; they keep allocations sane on a damaged header. */
#define GGUF_MAX_KEY_LEN 65535
#define GGUF_MAX_NAME_LEN 65535
#define GGUF_MAX_DIMS 4

/* ggml's block size and bytes per block for every type number a file may hold (0: removed
 * or unknown), and its name.  The reader knows more types than quant.h converts, so that an
 * unsupported one is named rather than called damaged. */
static const struct {
    int block;
    int bytes;
    const char *name;
} type_info[] = {
    [0] = {1, 4, "f32"},         [1] = {1, 2, "f16"},         [2] = {32, 18, "q4_0"},
    [3] = {32, 20, "q4_1"},      [6] = {32, 22, "q5_0"},      [7] = {32, 24, "q5_1"},
    [8] = {32, 34, "q8_0"},      [9] = {32, 36, "q8_1"},      [10] = {256, 84, "q2_K"},
    [11] = {256, 110, "q3_K"},   [12] = {256, 144, "q4_K"},   [13] = {256, 176, "q5_K"},
    [14] = {256, 210, "q6_K"},   [15] = {256, 292, "q8_K"},   [16] = {256, 66, "iq2_xxs"},
    [17] = {256, 74, "iq2_xs"},  [18] = {256, 98, "iq3_xxs"}, [19] = {256, 50, "iq1_s"},
    [20] = {32, 18, "iq4_nl"},   [21] = {256, 110, "iq3_s"},  [22] = {256, 82, "iq2_s"},
    [23] = {256, 136, "iq4_xs"}, [24] = {1, 1, "i8"},         [25] = {1, 2, "i16"},
    [26] = {1, 4, "i32"},        [27] = {1, 8, "i64"},        [28] = {1, 8, "f64"},
    [29] = {256, 56, "iq1_m"},   [30] = {1, 2, "bf16"},       [34] = {256, 54, "tq1_0"},
    [35] = {256, 66, "tq2_0"},
};
#define N_TYPES ((int)(sizeof type_info / sizeof type_info[0]))

const char *gguf_type_name(int type, char *buf, size_t cap)
{
    if (type >= 0 && type < N_TYPES && type_info[type].name)
        return type_info[type].name;
    snprintf(buf, cap, "type %d", type);
    return buf;
}

uint64_t gguf_row_bytes(int type, int64_t n)
{
    if (type < 0 || type >= N_TYPES || type_info[type].block == 0 || n < 0)
        return 0;
    return (uint64_t)n / (uint64_t)type_info[type].block * (uint64_t)type_info[type].bytes;
}

/* Bytes of one metadata scalar of type t (0 for string, array or an unknown type). */
static uint64_t scalar_size(uint32_t t)
{
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

static uint64_t rd_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Parser cursor over the map. */
typedef struct {
    const GgufFile *g;
    uint64_t pos;
    char *err;
    size_t errlen;
} Cursor;

/* Fails unless n more bytes are in the file; what names the item being read. */
static int need(Cursor *c, uint64_t n, const char *what, const char *name)
{
    if (c->g->size - c->pos < n)
        return util_err(c->err, c->errlen, "%s: %s%s%s: truncated (needs %llu bytes at offset "
                        "%llu, the file has %llu)", c->g->path, what, name ? " " : "",
                        name ? name : "", (unsigned long long)n, (unsigned long long)c->pos,
                        (unsigned long long)c->g->size);
    return 0;
}

static int take_u32(Cursor *c, uint32_t *v, const char *what, const char *name)
{
    if (need(c, 4, what, name) < 0)
        return -1;
    *v = rd_u32(c->g->map + c->pos);
    c->pos += 4;
    return 0;
}

static int take_u64(Cursor *c, uint64_t *v, const char *what, const char *name)
{
    if (need(c, 8, what, name) < 0)
        return -1;
    *v = rd_u64(c->g->map + c->pos);
    c->pos += 8;
    return 0;
}

/* A GGUF string: uint64 length then bytes.  *s points into the map. */
static int take_string(Cursor *c, const uint8_t **s, uint64_t *len, uint64_t max,
                       const char *what, const char *name)
{
    if (take_u64(c, len, what, name) < 0)
        return -1;
    if (*len > max)
        return util_err(c->err, c->errlen, "%s: %s%s%s: string length %llu exceeds %llu "
                        "(damaged file?)", c->g->path, what, name ? " " : "", name ? name : "",
                        (unsigned long long)*len, (unsigned long long)max);
    if (need(c, *len, what, name) < 0)
        return -1;
    *s = c->g->map + c->pos;
    c->pos += *len;
    return 0;
}

/* Keys and tensor names are printed in messages: control bytes (and NUL) are refused. */
static int check_name(Cursor *c, const uint8_t *s, uint64_t n, const char *what)
{
    for (uint64_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] == 0x7f)
            return util_err(c->err, c->errlen, "%s: %s: the name holds control byte 0x%02x "
                            "(damaged file?)", c->g->path, what, s[i]);
    return 0;
}

static char *dup_bytes(const uint8_t *s, uint64_t n)
{
    char *r = xmalloc((size_t)n + 1);
    memcpy(r, s, (size_t)n);
    r[n] = '\0';
    return r;
}

/* Decodes a scalar of type t at p into kv->v. */
static void decode_scalar(GgufKV *kv, uint32_t t, const uint8_t *p)
{
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: kv->v.u = p[0]; break;
    case GGUF_TYPE_INT8: kv->v.i = (int8_t)p[0]; break;
    case GGUF_TYPE_UINT16: kv->v.u = (uint16_t)(p[0] | p[1] << 8); break;
    case GGUF_TYPE_INT16: kv->v.i = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case GGUF_TYPE_UINT32: kv->v.u = rd_u32(p); break;
    case GGUF_TYPE_INT32: kv->v.i = (int32_t)rd_u32(p); break;
    case GGUF_TYPE_UINT64: kv->v.u = rd_u64(p); break;
    case GGUF_TYPE_INT64: kv->v.i = (int64_t)rd_u64(p); break;
    case GGUF_TYPE_FLOAT32: {
        uint32_t b = rd_u32(p);
        float f;
        memcpy(&f, &b, 4);
        kv->v.f = f;
        break;
    }
    case GGUF_TYPE_FLOAT64: {
        uint64_t b = rd_u64(p);
        memcpy(&kv->v.f, &b, 8);
        break;
    }
    default: break;
    }
}

/* One key/value at the cursor into kv. */
static int parse_kv(Cursor *c, GgufKV *kv, int64_t index)
{
    const uint8_t *s;
    uint64_t len;
    char what[48];
    snprintf(what, sizeof what, "key %lld", (long long)index);
    if (take_string(c, &s, &len, GGUF_MAX_KEY_LEN, what, NULL) < 0 ||
        check_name(c, s, len, what) < 0)
        return -1;
    kv->key = dup_bytes(s, len);
    uint32_t t;
    if (take_u32(c, &t, "key", kv->key) < 0)
        return -1;
    kv->type = (GgufType)t;
    if (t == GGUF_TYPE_STRING) {
        if (take_string(c, &kv->data, &kv->n, c->g->size, "key", kv->key) < 0)
            return -1;
        return 0;
    }
    if (t != GGUF_TYPE_ARRAY) {
        uint64_t sz = scalar_size(t);
        if (sz == 0)
            return util_err(c->err, c->errlen, "%s: key %s: unknown value type %u (damaged "
                            "file?)", c->g->path, kv->key, t);
        if (need(c, sz, "key", kv->key) < 0)
            return -1;
        decode_scalar(kv, t, c->g->map + c->pos);
        c->pos += sz;
        return 0;
    }
    uint32_t et;
    if (take_u32(c, &et, "key", kv->key) < 0 || take_u64(c, &kv->n, "key", kv->key) < 0)
        return -1;
    kv->elem_type = (GgufType)et;
    kv->data = c->g->map + c->pos;
    if (et == GGUF_TYPE_ARRAY)
        return util_err(c->err, c->errlen, "%s: key %s: nested arrays are not supported",
                        c->g->path, kv->key);
    if (et == GGUF_TYPE_STRING) {
        /* every string takes at least its 8-byte length: bound n before allocating */
        if (kv->n > (c->g->size - c->pos) / 8)
            return util_err(c->err, c->errlen, "%s: key %s: array of %llu strings does not fit "
                            "in the file (truncated or damaged)", c->g->path, kv->key,
                            (unsigned long long)kv->n);
        kv->str_off = xmalloc((size_t)(kv->n ? kv->n : 1) * sizeof(uint64_t));
        for (uint64_t i = 0; i < kv->n; i++) {
            kv->str_off[i] = c->pos;
            if (take_string(c, &s, &len, c->g->size, "key", kv->key) < 0)
                return -1;
        }
        return 0;
    }
    uint64_t sz = scalar_size(et);
    if (sz == 0)
        return util_err(c->err, c->errlen, "%s: key %s: unknown array element type %u (damaged "
                        "file?)", c->g->path, kv->key, et);
    if (kv->n > (c->g->size - c->pos) / sz)
        return util_err(c->err, c->errlen, "%s: key %s: array of %llu elements does not fit in "
                        "the file (truncated or damaged)", c->g->path, kv->key,
                        (unsigned long long)kv->n);
    c->pos += kv->n * sz;
    return 0;
}

/* One tensor info at the cursor into t (offset still relative to the data section). */
static int parse_tensor(Cursor *c, GgufTensor *t, int64_t index)
{
    const uint8_t *s;
    uint64_t len;
    char what[48];
    snprintf(what, sizeof what, "tensor %lld", (long long)index);
    if (take_string(c, &s, &len, GGUF_MAX_NAME_LEN, what, NULL) < 0 ||
        check_name(c, s, len, what) < 0)
        return -1;
    t->name = dup_bytes(s, len);
    uint32_t nd, type;
    if (take_u32(c, &nd, "tensor", t->name) < 0)
        return -1;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return util_err(c->err, c->errlen, "%s: tensor %s: %u dimensions (1 to %d allowed)",
                        c->g->path, t->name, nd, GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    for (int d = 0; d < 4; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        if (take_u64(c, &v, "tensor", t->name) < 0)
            return -1;
        if (v == 0 || v > ((uint64_t)1 << 40))
            return util_err(c->err, c->errlen, "%s: tensor %s: dimension %u is %llu (must be "
                            "1..2^40)", c->g->path, t->name, d, (unsigned long long)v);
        t->ne[d] = (int64_t)v;
    }
    if (take_u32(c, &type, "tensor", t->name) < 0 ||
        take_u64(c, &t->offset, "tensor", t->name) < 0)
        return -1;
    t->type = type > 1000000 ? -1 : (int)type;
    return 0;
}

/* Size, alignment and bounds of tensor t once the data section starts at data_off. */
static int check_tensor(const GgufFile *g, GgufTensor *t, char *err, size_t errlen)
{
    char tb[32];
    if (t->type < 0 || t->type >= N_TYPES || type_info[t->type].block == 0)
        return util_err(err, errlen, "%s: tensor %s: unknown tensor type %s", g->path, t->name,
                        gguf_type_name(t->type, tb, sizeof tb));
    uint64_t blk = (uint64_t)type_info[t->type].block, tsz = (uint64_t)type_info[t->type].bytes;
    if ((uint64_t)t->ne[0] % blk != 0)
        return util_err(err, errlen, "%s: tensor %s: row length %lld is not a multiple of the "
                        "%s block size %llu", g->path, t->name, (long long)t->ne[0],
                        type_info[t->type].name, (unsigned long long)blk);
    /* each ne <= 2^40: the product is bounded step by step against the file size */
    uint64_t bytes = (uint64_t)t->ne[0] / blk * tsz;
    for (int d = 1; d < 4; d++) {
        if (bytes > g->size / (uint64_t)t->ne[d] + 1)
            return util_err(err, errlen, "%s: tensor %s: %lld x %lld x %lld x %lld %s values "
                            "do not fit in the file (%llu bytes)", g->path, t->name,
                            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                            (long long)t->ne[3], type_info[t->type].name,
                            (unsigned long long)g->size);
        bytes *= (uint64_t)t->ne[d];
    }
    t->bytes = bytes;
    if (t->offset % g->alignment != 0)
        return util_err(err, errlen, "%s: tensor %s: data offset %llu is not a multiple of the "
                        "alignment %llu", g->path, t->name, (unsigned long long)t->offset,
                        (unsigned long long)g->alignment);
    if (t->offset > g->size - g->data_offset || bytes > g->size - g->data_offset - t->offset)
        return util_err(err, errlen, "%s: tensor %s: data [%llu, +%llu) past the end of the "
                        "file (%llu bytes; truncated?)", g->path, t->name,
                        (unsigned long long)(g->data_offset + t->offset),
                        (unsigned long long)bytes, (unsigned long long)g->size);
    t->offset += g->data_offset;
    t->data = g->map + t->offset;
    return 0;
}

/* Parses the mapped bytes in g. */
static int parse(GgufFile *g, char *err, size_t errlen)
{
    Cursor c = {g, 0, err, errlen};
    if (g->size < 4 || memcmp(g->map, "GGUF", 4) != 0)
        return util_err(err, errlen, "%s: header: not a GGUF file (no \"GGUF\" magic)", g->path);
    c.pos = 4;
    uint64_t nt, nkv;
    if (take_u32(&c, &g->version, "header", NULL) < 0)
        return -1;
    if (g->version != 2 && g->version != 3)
        return util_err(err, errlen, "%s: header: GGUF version %u is not supported (versions 2 "
                        "and 3 are%s)", g->path, g->version,
                        (g->version & 0xffff) == 0 ? "; a big-endian file?" : "");
    if (take_u64(&c, &nt, "header", NULL) < 0 || take_u64(&c, &nkv, "header", NULL) < 0)
        return -1;
    /* a key/value takes at least 12 bytes, a tensor info at least 24 */
    if (nkv > g->size / 12 || nt > g->size / 24)
        return util_err(err, errlen, "%s: header: %llu tensors and %llu keys cannot fit in %llu "
                        "bytes (damaged file?)", g->path, (unsigned long long)nt,
                        (unsigned long long)nkv, (unsigned long long)g->size);
    g->kv = xcalloc((size_t)(nkv ? nkv : 1), sizeof *g->kv);
    g->tensors = xcalloc((size_t)(nt ? nt : 1), sizeof *g->tensors);
    for (uint64_t i = 0; i < nkv; i++) {
        g->n_kv = (int64_t)i + 1; /* so that close frees what was parsed */
        if (parse_kv(&c, &g->kv[i], (int64_t)i) < 0)
            return -1;
    }
    g->alignment = 32;
    const GgufKV *al = gguf_find_kv(g, "general.alignment");
    if (al) {
        if (al->type != GGUF_TYPE_UINT32 || al->v.u == 0 || (al->v.u & (al->v.u - 1)) != 0)
            return util_err(err, errlen, "%s: key general.alignment: must be a uint32 power of "
                            "two", g->path);
        g->alignment = al->v.u;
    }
    for (uint64_t i = 0; i < nt; i++) {
        g->n_tensors = (int64_t)i + 1;
        if (parse_tensor(&c, &g->tensors[i], (int64_t)i) < 0)
            return -1;
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(g->tensors[j].name, g->tensors[i].name) == 0)
                return util_err(err, errlen, "%s: tensor %s: listed twice", g->path,
                                g->tensors[i].name);
    }
    g->data_offset = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (nt > 0 && g->data_offset > g->size)
        return util_err(err, errlen, "%s: header: the data section would start at byte %llu, "
                        "past the end of the file (%llu bytes; truncated?)", g->path,
                        (unsigned long long)g->data_offset, (unsigned long long)g->size);
    for (uint64_t i = 0; i < nt; i++)
        if (check_tensor(g, &g->tensors[i], err, errlen) < 0)
            return -1;
    return 0;
}

int gguf_open_mem(GgufFile **out, const void *data, size_t len, const char *name, char *err,
                  size_t errlen)
{
    *out = NULL;
    GgufFile *g = xcalloc(1, sizeof *g);
    g->path = xstrdup(name);
    g->map = xmalloc(len ? len : 1);
    if (len)
        memcpy(g->map, data, len);
    g->size = len;
    if (parse(g, err, errlen) < 0) {
        gguf_close(g);
        return -1;
    }
    *out = g;
    return 0;
}

int gguf_open(GgufFile **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return util_err(err, errlen, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return util_err(err, errlen, "%s: not a regular file", path);
    }
    GgufFile *g = xcalloc(1, sizeof *g);
    g->path = xstrdup(path);
    g->size = (uint64_t)sb.st_size;
    if (g->size > 0) {
        void *m = mmap(NULL, (size_t)g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            util_err(err, errlen, "%s: cannot map the file: %s", path, strerror(errno));
            close(fd);
            gguf_close(g);
            return -1;
        }
        g->map = m;
        g->mapped = 1;
    }
    close(fd);
    if (parse(g, err, errlen) < 0) {
        gguf_close(g);
        return -1;
    }
    *out = g;
    return 0;
}

void gguf_release(const GgufFile *g, const void *p, uint64_t n)
{
    if (!g || !g->mapped || n == 0)
        return;
    const uint8_t *b = p, *e = b + n;
    if (b < g->map || e > g->map + g->size)
        return;
    /* whole pages inside the range only: the neighbours' pages may still be wanted */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)b + page - 1) / page * page, hi = (uintptr_t)e / page * page;
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void gguf_close(GgufFile *g)
{
    if (!g)
        return;
    for (int64_t i = 0; g->kv && i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str_off);
    }
    for (int64_t i = 0; g->tensors && i < g->n_tensors; i++)
        free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    if (g->mapped)
        munmap(g->map, (size_t)g->size);
    else
        free(g->map);
    free(g->path);
    free(g);
}

const GgufKV *gguf_find_kv(const GgufFile *g, const char *key)
{
    for (int64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && strcmp(g->kv[i].key, key) == 0)
            return &g->kv[i];
    return NULL;
}

const GgufTensor *gguf_find_tensor(const GgufFile *g, const char *name)
{
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].name && strcmp(g->tensors[i].name, name) == 0)
            return &g->tensors[i];
    return NULL;
}

static int is_int_type(GgufType t)
{
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_INT8 || t == GGUF_TYPE_UINT16 ||
           t == GGUF_TYPE_INT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_INT32 ||
           t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_INT64;
}

static int is_unsigned(GgufType t)
{
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 ||
           t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_BOOL;
}

int gguf_get_int(const GgufFile *g, const char *key, int64_t *out, char *err, size_t errlen)
{
    const GgufKV *kv = gguf_find_kv(g, key);
    if (!kv)
        return 0;
    if (!is_int_type(kv->type))
        return util_err(err, errlen, "%s: key %s: expected an integer, found value type %d",
                        g->path, key, (int)kv->type);
    if (is_unsigned(kv->type) && kv->v.u > (uint64_t)INT64_MAX)
        return util_err(err, errlen, "%s: key %s: value out of range", g->path, key);
    *out = is_unsigned(kv->type) ? (int64_t)kv->v.u : kv->v.i;
    return 1;
}

int gguf_get_float(const GgufFile *g, const char *key, double *out, char *err, size_t errlen)
{
    const GgufKV *kv = gguf_find_kv(g, key);
    if (!kv)
        return 0;
    if (kv->type == GGUF_TYPE_FLOAT32 || kv->type == GGUF_TYPE_FLOAT64) {
        *out = kv->v.f;
        return 1;
    }
    int64_t i;
    int rc = gguf_get_int(g, key, &i, err, errlen);
    if (rc < 0)
        return util_err(err, errlen, "%s: key %s: expected a number, found value type %d",
                        g->path, key, (int)kv->type);
    *out = (double)i;
    return 1;
}

int gguf_get_bool(const GgufFile *g, const char *key, int *out, char *err, size_t errlen)
{
    const GgufKV *kv = gguf_find_kv(g, key);
    if (!kv)
        return 0;
    if (kv->type != GGUF_TYPE_BOOL && !is_int_type(kv->type))
        return util_err(err, errlen, "%s: key %s: expected a bool, found value type %d",
                        g->path, key, (int)kv->type);
    *out = is_unsigned(kv->type) ? kv->v.u != 0 : kv->v.i != 0;
    return 1;
}

int gguf_get_string(const GgufFile *g, const char *key, const char **s, size_t *len,
                    char *err, size_t errlen)
{
    const GgufKV *kv = gguf_find_kv(g, key);
    if (!kv)
        return 0;
    if (kv->type != GGUF_TYPE_STRING)
        return util_err(err, errlen, "%s: key %s: expected a string, found value type %d",
                        g->path, key, (int)kv->type);
    *s = (const char *)kv->data;
    *len = (size_t)kv->n;
    return 1;
}

int gguf_get_array(const GgufFile *g, const char *key, GgufType elem, const GgufKV **out,
                   char *err, size_t errlen)
{
    const GgufKV *kv = gguf_find_kv(g, key);
    if (!kv)
        return 0;
    int ok = kv->type == GGUF_TYPE_ARRAY &&
             (kv->elem_type == elem || (elem == GGUF_TYPE_INT32 && is_int_type(kv->elem_type)) ||
              (elem == GGUF_TYPE_FLOAT32 && kv->elem_type == GGUF_TYPE_FLOAT64));
    if (!ok)
        return util_err(err, errlen, "%s: key %s: expected an array of value type %d", g->path,
                        key, (int)elem);
    *out = kv;
    return 1;
}

const char *gguf_array_string(const GgufKV *kv, uint64_t i, size_t *len)
{
    /* the offsets were checked when the file was opened: data - str_off[0] is the map */
    const uint8_t *base = kv->data - kv->str_off[0];
    const uint8_t *p = base + kv->str_off[i];
    *len = (size_t)rd_u64(p);
    return (const char *)p + 8;
}

double gguf_array_float(const GgufKV *kv, uint64_t i)
{
    GgufKV tmp;
    memset(&tmp, 0, sizeof tmp);
    uint64_t sz = scalar_size(kv->elem_type);
    decode_scalar(&tmp, kv->elem_type, kv->data + i * sz);
    if (kv->elem_type == GGUF_TYPE_FLOAT32 || kv->elem_type == GGUF_TYPE_FLOAT64)
        return tmp.v.f;
    return is_unsigned(kv->elem_type) ? (double)tmp.v.u : (double)tmp.v.i;
}

int64_t gguf_array_int(const GgufKV *kv, uint64_t i)
{
    GgufKV tmp;
    memset(&tmp, 0, sizeof tmp);
    uint64_t sz = scalar_size(kv->elem_type);
    decode_scalar(&tmp, kv->elem_type, kv->data + i * sz);
    return is_unsigned(kv->elem_type) ? (int64_t)tmp.v.u : tmp.v.i;
}
