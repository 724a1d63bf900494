/* gguf.h: reader of llama.cpp's GGUF files (versions 2 and 3, little-endian): header,
 * metadata key/values, tensor infos and tensor data, all bounds-checked against the file
 * size when the file is opened, so that every accessor below is safe on what it returns.
 * The file is mapped read-only; tensor data are pointers into the map.  Pure C, no HDF5.
 * Failures return -1 with one line "<file>: <key or tensor>: <reason>" in err. */
#ifndef HEADSPLIT_GGUF_H
#define HEADSPLIT_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Value types of GGUF metadata (the numbers the file stores). */
typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
} GgufType;

/* One metadata key/value.  Scalars are decoded; arrays point into the map. */
typedef struct {
    char *key;            /* NUL-terminated copy */
    GgufType type;
    GgufType elem_type;   /* arrays: the element type (never ARRAY: nested arrays are refused) */
    uint64_t n;           /* arrays: element count; strings: byte length */
    union {
        uint64_t u;       /* unsigned integers and bool */
        int64_t i;        /* signed integers */
        double f;         /* float32 / float64 */
    } v;
    const uint8_t *data;  /* strings: the bytes (not NUL-terminated); arrays: first element */
    uint64_t *str_off;    /* string arrays: [n] offsets of each element's length field */
} GgufKV;

typedef struct {
    char *name;          /* NUL-terminated copy */
    int n_dims;          /* 1..4 */
    int64_t ne[4];       /* elements per dimension, innermost first (ne[0] = row length) */
    int type;            /* ggml type number (include/kernels/quant.h QType where known) */
    uint64_t offset;     /* absolute byte offset in the file */
    uint64_t bytes;      /* data size */
    const uint8_t *data; /* into the map */
} GgufTensor;

typedef struct {
    char *path;
    uint8_t *map;        /* the whole file, read-only (owned copy for gguf_open_mem) */
    uint64_t size;
    int mapped;          /* 1: munmap on close; 0: free */
    uint32_t version;
    uint64_t alignment;  /* general.alignment or 32 */
    uint64_t data_offset;
    int64_t n_kv, n_tensors;
    GgufKV *kv;          /* [n_kv] */
    GgufTensor *tensors; /* [n_tensors] */
} GgufFile;

/* Opens and checks a GGUF file (or bytes in memory: copied; name is for messages).
 * Returns 0, or -1 with err; *out is NULL on failure. */
int gguf_open(GgufFile **out, const char *path, char *err, size_t errlen);
int gguf_open_mem(GgufFile **out, const void *data, size_t len, const char *name, char *err,
                  size_t errlen);
void gguf_close(GgufFile *g);
/* Drops the mapped pages of [p, p + n) (within the file's map) from this process's memory
 * once they have been read, so that a pass over a file larger than the memory keeps the
 * resident set to what is in use; a later read maps them in again.  No-op for
 * gguf_open_mem. */
void gguf_release(const GgufFile *g, const void *p, uint64_t n);

/* The key or tensor of that name, or NULL. */
const GgufKV *gguf_find_kv(const GgufFile *g, const char *key);
const GgufTensor *gguf_find_tensor(const GgufFile *g, const char *name);

/* Typed look-ups: 1 when found and of a fitting type (any integer type for int, any numeric
 * type for float, a bool or integer for bool), 0 when absent, -1 with err on a wrong type or
 * an integer out of int64 range. */
int gguf_get_int(const GgufFile *g, const char *key, int64_t *out, char *err, size_t errlen);
int gguf_get_float(const GgufFile *g, const char *key, double *out, char *err, size_t errlen);
int gguf_get_bool(const GgufFile *g, const char *key, int *out, char *err, size_t errlen);
/* String value: pointer to its bytes (not NUL-terminated) and length. */
int gguf_get_string(const GgufFile *g, const char *key, const char **s, size_t *len,
                    char *err, size_t errlen);
/* An array of the given element type (GGUF_TYPE_INT32 also accepts any integer type).
 * Returns the array's kv in *kv. */
int gguf_get_array(const GgufFile *g, const char *key, GgufType elem, const GgufKV **kv,
                   char *err, size_t errlen);

/* Element i (< kv->n) of an array: a string's bytes and length; a number as double / int64. */
const char *gguf_array_string(const GgufKV *kv, uint64_t i, size_t *len);
double gguf_array_float(const GgufKV *kv, uint64_t i);
int64_t gguf_array_int(const GgufKV *kv, uint64_t i);

/* Bytes of a row of n values of ggml type number t (n a multiple of its block size; 0 for
 * a type this reader does not know). */
uint64_t gguf_row_bytes(int type, int64_t n);
/* ggml's name of a type number ("q4_0", "iq2_xxs"; "type N" for numbers it does not know). */
const char *gguf_type_name(int type, char *buf, size_t cap);

#endif
