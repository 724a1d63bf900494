/* safetensors.h: a validating reader for Hugging Face safetensors files, single or sharded
 * (model.safetensors.index.json).  Only the JSON headers are held in memory; tensor data is read
 * on demand with pread, a range of elements at a time, and widened to float32 exactly. */
#ifndef HEADSPLIT_SAFETENSORS_H
#define HEADSPLIT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* Element types this reader accepts; every other dtype is refused with a message. */
typedef enum { ST_F32 = 0, ST_F16 = 1, ST_BF16 = 2 } StDtype;

#define ST_MAX_RANK 8

typedef struct {
    char *name;
    StDtype dtype;
    int rank;
    uint64_t shape[ST_MAX_RANK];
    uint64_t n_elems;    /* product of shape (1 for a scalar) */
    int file;            /* shard index */
    uint64_t begin, end; /* byte offsets inside that shard's data area */
} StTensor;

typedef struct SafeTensors SafeTensors;

/* Opens one .safetensors file, or a sharded checkpoint through its *.index.json (weight_map);
 * validates every header.  Returns 0, or -1 with err "<file>: <field>: <what>". */
int safetensors_open(SafeTensors **out, const char *path, char *err, size_t errlen);
/* Opens DIR/model.safetensors.index.json if present, else DIR/model.safetensors. */
int safetensors_open_dir(SafeTensors **out, const char *dir, char *err, size_t errlen);
/* Closes the files and frees everything (NULL is fine). */
void safetensors_close(SafeTensors *st);

/* Tensor by name, or NULL. */
const StTensor *safetensors_find(const SafeTensors *st, const char *name);
/* Number of tensors and the i-th one (sorted by name). */
size_t safetensors_count(const SafeTensors *st);
const StTensor *safetensors_at(const SafeTensors *st, size_t i);
/* Path of the file that holds tensor t (for messages). */
const char *safetensors_file_of(const SafeTensors *st, const StTensor *t);

/* Reads elements [elem0, elem0+n) of t (row-major) into out as float32; 16-bit types are
 * widened exactly.  Returns 0, or -1 with err naming the file and tensor. */
int safetensors_read(const SafeTensors *st, const StTensor *t, uint64_t elem0, uint64_t n,
                     float *out, char *err, size_t errlen);

/* "F32", "F16" or "BF16". */
const char *safetensors_dtype_name(StDtype d);
/* Bytes per element of d. */
size_t safetensors_dtype_size(StDtype d);
/* Exact widening of IEEE binary16 and bfloat16 bit patterns. */
float safetensors_f16_to_f32(uint16_t h);
float safetensors_bf16_to_f32(uint16_t b);

#endif
