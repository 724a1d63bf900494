/* safetensors.c: validating safetensors reader (single file or sharded index), reads one
 * element range at a time with pread and widens F16/BF16 to float32 exactly. */
#include "safetensors.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The safetensors library refuses headers above 100 MB; so do we. */
#define ST_MAX_HEADER 100000000ull

typedef struct {
    char *path;
    int fd;
    uint64_t data_start; /* 8 + header length */
    uint64_t data_len;   /* file size - data_start */
} StFile;

struct SafeTensors {
    StFile *files;
    int n_files;
    StTensor *t;
    size_t n, cap;
};

const char *safetensors_dtype_name(StDtype d)
{
    return d == ST_F16 ? "F16" : d == ST_BF16 ? "BF16" : "F32";
}

size_t safetensors_dtype_size(StDtype d) { return d == ST_F32 ? 4 : 2; }

float safetensors_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in float32 */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31)
        bits = sign | 0x7f800000u | (mant << 13);
    else
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float safetensors_bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* pread exactly n bytes at off; -1 on error or end of file. */
static int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return 0;
}

static int mul_u64(uint64_t *out, uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

/* Reads a non-negative JSON integer. */
static int json_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_tensor(SafeTensors *st, int fi, const char *name, const json_t *v,
                        char *err, size_t errlen)
{
    const StFile *f = &st->files[fi];
    const json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
                 *jo = json_object_get(v, "data_offsets");
    if (!json_is_object(v) || !json_is_string(jd) || !json_is_array(js) || !json_is_array(jo))
        return util_err(err, errlen, "%s: tensor %s: entry lacks dtype, shape or data_offsets",
                        f->path, name);
    StTensor t;
    memset(&t, 0, sizeof t);
    const char *dt = json_string_value(jd);
    if (strcmp(dt, "F32") == 0)
        t.dtype = ST_F32;
    else if (strcmp(dt, "F16") == 0)
        t.dtype = ST_F16;
    else if (strcmp(dt, "BF16") == 0)
        t.dtype = ST_BF16;
    else
        return util_err(err, errlen, "%s: tensor %s: unsupported dtype %s (F32, F16 and BF16 "
                        "are supported)", f->path, name, dt);
    size_t rank = json_array_size(js);
    if (rank > ST_MAX_RANK)
        return util_err(err, errlen, "%s: tensor %s: rank %zu exceeds %d", f->path, name, rank,
                        ST_MAX_RANK);
    t.rank = (int)rank;
    t.n_elems = 1;
    for (size_t i = 0; i < rank; i++) {
        if (json_u64(json_array_get(js, i), &t.shape[i]) < 0)
            return util_err(err, errlen, "%s: tensor %s: shape[%zu] is not a non-negative "
                            "integer", f->path, name, i);
        if (mul_u64(&t.n_elems, t.n_elems, t.shape[i]) < 0)
            return util_err(err, errlen, "%s: tensor %s: shape overflows", f->path, name);
    }
    if (json_array_size(jo) != 2 || json_u64(json_array_get(jo, 0), &t.begin) < 0 ||
        json_u64(json_array_get(jo, 1), &t.end) < 0 || t.begin > t.end)
        return util_err(err, errlen, "%s: tensor %s: data_offsets must be [begin, end] with "
                        "0 <= begin <= end", f->path, name);
    if (t.end > f->data_len)
        return util_err(err, errlen, "%s: tensor %s: data_offsets [%llu, %llu] outside the "
                        "data area of %llu bytes", f->path, name, (unsigned long long)t.begin,
                        (unsigned long long)t.end, (unsigned long long)f->data_len);
    uint64_t bytes = 0;
    if (mul_u64(&bytes, t.n_elems, safetensors_dtype_size(t.dtype)) < 0)
        return util_err(err, errlen, "%s: tensor %s: size overflows", f->path, name);
    if (bytes != t.end - t.begin)
        return util_err(err, errlen, "%s: tensor %s: data_offsets span %llu bytes, the shape "
                        "and dtype need %llu", f->path, name,
                        (unsigned long long)(t.end - t.begin), (unsigned long long)bytes);
    t.file = fi;
    t.name = xstrdup(name);
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 64;
        st->t = xrealloc(st->t, st->cap * sizeof *st->t);
    }
    st->t[st->n++] = t;
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Checks that the non-empty tensors of file fi (entries first..st->n-1) do not overlap. */
static int check_overlap(const SafeTensors *st, int fi, size_t first, char *err, size_t errlen)
{
    size_t m = st->n - first;
    if (m < 2)
        return 0;
    const StTensor **v = xmalloc(m * sizeof *v);
    for (size_t i = 0; i < m; i++)
        v[i] = &st->t[first + i];
    qsort(v, m, sizeof *v, cmp_begin);
    int rc = 0;
    const StTensor *prev = NULL;
    for (size_t i = 0; i < m && rc == 0; i++) {
        if (v[i]->begin == v[i]->end)
            continue;
        if (prev && v[i]->begin < prev->end)
            rc = util_err(err, errlen, "%s: tensor %s: data_offsets overlap those of %s",
                          st->files[fi].path, v[i]->name, prev->name);
        prev = v[i];
    }
    free(v);
    return rc;
}

/* Opens file path as shard fi and appends its tensors. */
static int parse_file(SafeTensors *st, int fi, const char *path, char *err, size_t errlen)
{
    StFile *f = &st->files[fi];
    f->path = xstrdup(path);
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return util_err(err, errlen, "%s: open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(f->fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        return util_err(err, errlen, "%s: open: not a regular file", path);
    uint64_t size = (uint64_t)sb.st_size;
    uint8_t lenb[8];
    if (size < 8 || pread_full(f->fd, lenb, 8, 0) < 0)
        return util_err(err, errlen, "%s: header length: file is %llu bytes, too short for the "
                        "8-byte header length", path, (unsigned long long)size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | lenb[i];
    if (hlen > size - 8)
        return util_err(err, errlen, "%s: header length: %llu bytes but only %llu bytes follow "
                        "(truncated or not a safetensors file)", path,
                        (unsigned long long)hlen, (unsigned long long)(size - 8));
    if (hlen < 2 || hlen > ST_MAX_HEADER)
        return util_err(err, errlen, "%s: header length: %llu bytes is out of range", path,
                        (unsigned long long)hlen);
    f->data_start = 8 + hlen;
    f->data_len = size - f->data_start;
    char *buf = xmalloc((size_t)hlen + 1);
    if (pread_full(f->fd, buf, (size_t)hlen, 8) < 0) {
        free(buf);
        return util_err(err, errlen, "%s: header: read failed", path);
    }
    json_error_t jerr;
    json_t *root = buf[0] == '{' ? json_loadb(buf, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr)
                                 : NULL;
    free(buf);
    if (!json_is_object(root)) {
        json_decref(root);
        return util_err(err, errlen, "%s: header: not a JSON object", path);
    }
    size_t first = st->n;
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val))
                rc = util_err(err, errlen, "%s: __metadata__: not a JSON object", path);
        } else {
            rc = parse_tensor(st, fi, key, val, err, errlen);
        }
        if (rc < 0)
            break;
    }
    json_decref(root);
    if (rc == 0)
        rc = check_overlap(st, fi, first, err, errlen);
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const StTensor *)a)->name, ((const StTensor *)b)->name);
}

static SafeTensors *st_alloc(int n_files)
{
    SafeTensors *st = xcalloc(1, sizeof *st);
    st->files = xcalloc((size_t)n_files, sizeof *st->files);
    st->n_files = n_files;
    for (int i = 0; i < n_files; i++)
        st->files[i].fd = -1;
    return st;
}

/* Sorts by name and refuses a tensor that appears twice (in two shards). */
static int finish_table(SafeTensors *st, char *err, size_t errlen)
{
    if (st->n > 1)
        qsort(st->t, st->n, sizeof *st->t, cmp_name);
    for (size_t i = 1; i < st->n; i++)
        if (strcmp(st->t[i - 1].name, st->t[i].name) == 0)
            return util_err(err, errlen, "%s: tensor %s: also stored in %s", 
                            st->files[st->t[i].file].path, st->t[i].name,
                            st->files[st->t[i - 1].file].path);
    return 0;
}

/* Shard file names must be plain names in the index's directory. */
static int shard_name_ok(const char *s)
{
    return s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int open_index(SafeTensors **out, const char *path, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (access(path, R_OK) != 0)
            return util_err(err, errlen, "%s: open: %s", path, strerror(errno));
        return util_err(err, errlen, "%s: line %d: invalid JSON: %s", path, jerr.line,
                        jerr.text);
    }
    SafeTensors *st = NULL;
    const char **names = NULL;
    char *dir = xstrdup(path), *full = NULL;
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = '\0';
    else
        dir[0] = '\0';
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map) || json_object_size(map) == 0) {
        util_err(err, errlen, "%s: weight_map: missing or empty", path);
        goto fail;
    }
    /* distinct shard names, in first-seen order */
    size_t n_names = 0;
    names = xcalloc(json_object_size(map), sizeof *names);
    const char *key;
    json_t *val;
    json_object_foreach(map, key, val) {
        if (!json_is_string(val) || !shard_name_ok(json_string_value(val))) {
            util_err(err, errlen, "%s: weight_map: entry for %s is not a plain file name", path,
                     key);
            goto fail;
        }
        size_t j = 0;
        while (j < n_names && strcmp(names[j], json_string_value(val)) != 0)
            j++;
        if (j == n_names)
            names[n_names++] = json_string_value(val);
    }
    st = st_alloc((int)n_names);
    for (size_t i = 0; i < n_names; i++) {
        full = xrealloc(full, strlen(dir) + strlen(names[i]) + 1);
        strcpy(full, dir);
        strcat(full, names[i]);
        if (parse_file(st, (int)i, full, err, errlen) < 0)
            goto fail;
    }
    if (finish_table(st, err, errlen) < 0)
        goto fail;
    json_object_foreach(map, key, val) {
        const StTensor *t = safetensors_find(st, key);
        const char *want = json_string_value(val);
        const char *have = t ? strrchr(st->files[t->file].path, '/') : NULL;
        have = have ? have + 1 : t ? st->files[t->file].path : NULL;
        if (!t || strcmp(have, want) != 0) {
            util_err(err, errlen, "%s: weight_map: tensor %s is not in shard %s", path, key,
                     want);
            goto fail;
        }
    }
    free(full);
    free(names);
    free(dir);
    json_decref(root);
    *out = st;
    return 0;
fail:
    safetensors_close(st);
    free(full);
    free(names);
    free(dir);
    json_decref(root);
    return -1;
}

int safetensors_open(SafeTensors **out, const char *path, char *err, size_t errlen)
{
    *out = NULL;
    if (!host_is_little_endian())
        return util_err(err, errlen, "%s: safetensors: big-endian hosts are not supported",
                        path);
    size_t len = strlen(path);
    if (len >= 5 && strcmp(path + len - 5, ".json") == 0)
        return open_index(out, path, err, errlen);
    SafeTensors *st = st_alloc(1);
    if (parse_file(st, 0, path, err, errlen) < 0 || finish_table(st, err, errlen) < 0) {
        safetensors_close(st);
        return -1;
    }
    *out = st;
    return 0;
}

int safetensors_open_dir(SafeTensors **out, const char *dir, char *err, size_t errlen)
{
    *out = NULL;
    size_t n = strlen(dir) + 64;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/model.safetensors.index.json", dir);
    if (access(p, F_OK) != 0)
        snprintf(p, n, "%s/model.safetensors", dir);
    int rc;
    if (access(p, F_OK) != 0)
        rc = util_err(err, errlen, "%s: weights: no model.safetensors or "
                      "model.safetensors.index.json (PyTorch .bin checkpoints are not "
                      "supported)", dir);
    else
        rc = safetensors_open(out, p, err, errlen);
    free(p);
    return rc;
}

void safetensors_close(SafeTensors *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n_files; i++) {
        if (st->files[i].fd >= 0)
            close(st->files[i].fd);
        free(st->files[i].path);
    }
    for (size_t i = 0; i < st->n; i++)
        free(st->t[i].name);
    free(st->files);
    free(st->t);
    free(st);
}

const StTensor *safetensors_find(const SafeTensors *st, const char *name)
{
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->t[mid].name, name);
        if (c == 0)
            return &st->t[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t safetensors_count(const SafeTensors *st) { return st->n; }

const StTensor *safetensors_at(const SafeTensors *st, size_t i)
{
    return i < st->n ? &st->t[i] : NULL;
}

const char *safetensors_file_of(const SafeTensors *st, const StTensor *t)
{
    return st->files[t->file].path;
}

int safetensors_read(const SafeTensors *st, const StTensor *t, uint64_t elem0, uint64_t n,
                     float *out, char *err, size_t errlen)
{
    const StFile *f = &st->files[t->file];
    if (elem0 > t->n_elems || n > t->n_elems - elem0)
        return util_err(err, errlen, "%s: tensor %s: read of elements %llu..%llu beyond its "
                        "%llu elements", f->path, t->name, (unsigned long long)elem0,
                        (unsigned long long)(elem0 + n), (unsigned long long)t->n_elems);
    size_t es = safetensors_dtype_size(t->dtype);
    uint64_t off = f->data_start + t->begin + elem0 * es;
    /* 16-bit data lands in the upper half of out and is widened in place, front to back:
     * writing out[i] never reaches source element i+1 (4i+4 <= 2n+2i+2). */
    uint8_t *dst = t->dtype == ST_F32 ? (uint8_t *)out : (uint8_t *)out + n * 2;
    if (n > 0 && pread_full(f->fd, dst, (size_t)(n * es), off) < 0)
        return util_err(err, errlen, "%s: tensor %s: read failed (file truncated or changed "
                        "while converting)", f->path, t->name);
    if (t->dtype == ST_F16) {
        for (uint64_t i = 0; i < n; i++)
            out[i] = safetensors_f16_to_f32((uint16_t)(dst[2 * i] | (dst[2 * i + 1] << 8)));
    } else if (t->dtype == ST_BF16) {
        for (uint64_t i = 0; i < n; i++)
            out[i] = safetensors_bf16_to_f32((uint16_t)(dst[2 * i] | (dst[2 * i + 1] << 8)));
    }
    return 0;
}
