/* h5io.h: small HDF5 helpers shared by the model loader and the converter.
 * Every failure returns -1 with a message naming the file and the object. */
#ifndef HEADSPLIT_H5IO_H
#define HEADSPLIT_H5IO_H

#include "quant.h"

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* Silences HDF5's own error stack printing (we report our own messages). */
void h5io_quiet(void);

/* Opens a model file read-only; fails with a message if missing or not HDF5. */
hid_t h5io_open_read(const char *path, char *err, size_t errlen);
/* Creates (truncates) a file for writing. */
hid_t h5io_create(const char *path, char *err, size_t errlen);

/* Scalar attributes on an object (group or dataset) opened at path obj ("/config"). */
int h5io_attr_read_int(hid_t file, const char *obj, const char *name, int *out,
                       const char *fname, char *err, size_t errlen);
int h5io_attr_read_double(hid_t file, const char *obj, const char *name, double *out,
                          const char *fname, char *err, size_t errlen);
/* Reads a string attribute (fixed or variable length) into out (capacity cap). */
int h5io_attr_read_string(hid_t file, const char *obj, const char *name, char *out, size_t cap,
                          const char *fname, char *err, size_t errlen);
int h5io_attr_write_int(hid_t loc, const char *name, int v);
int h5io_attr_write_double(hid_t loc, const char *name, double v);
int h5io_attr_write_string(hid_t loc, const char *name, const char *v);

/* 1 if the dataset or group exists at path, else 0. */
int h5io_exists(hid_t file, const char *path);

/* Checks that dataset path is float32 with exactly rank dims equal to dims[]. */
int h5io_check_shape(hid_t file, const char *path, int rank, const uint64_t *dims,
                     const char *fname, char *err, size_t errlen);

/* Reads a hyperslab of a float32 dataset: start[] and count[] per dimension (rank <= 4) into
 * out (count product floats, row-major).  Verifies the shape first (dims). */
int h5io_read_slab(hid_t file, const char *path, int rank, const uint64_t *dims,
                   const uint64_t *start, const uint64_t *count, float *out,
                   const char *fname, char *err, size_t errlen);

/* Creates a contiguous float32 dataset of the given shape (parents created as needed) and
 * writes data (all of it).  Returns 0 or -1. */
int h5io_write_tensor(hid_t file, const char *path, int rank, const uint64_t *dims,
                      const float *data, char *err, size_t errlen);
/* Creates a contiguous float32 dataset without data; returns the dataset id (caller closes)
 * for streaming writes with h5io_write_rows. */
hid_t h5io_create_tensor(hid_t file, const char *path, int rank, const uint64_t *dims,
                         char *err, size_t errlen);
/* Writes rows [row0, row0+n_rows) along the first dimension of an open dataset. */
int h5io_write_rows(hid_t dset, uint64_t row0, uint64_t n_rows, const float *data,
                    char *err, size_t errlen);

/* Quantized tensors (docs/model-format.md, format version 2).  A matrix of logical shape
 * dims[0..rank) (the last dimension, cols, is the row length in values) is stored either as
 * float32 (QTYPE_F32, as above) or as a uint8 dataset [dims[0..rank-1)][row bytes] holding
 * each row's blocks back to back, with attributes qtype (quant_type_name) and cols.  These
 * helpers treat both forms alike, so callers need not care which one a file holds. */

/* What a stored matrix holds: its type and logical shape (rank <= 4). */
typedef struct {
    QType type;
    int rank;
    uint64_t dims[4]; /* logical: dims[rank-1] = values per row */
    size_t row_bytes; /* quant_row_bytes(type, dims[rank-1]) */
} H5Tensor;

/* Reads the type and logical shape of dataset path (float32, or uint8 with qtype/cols);
 * -1 naming file and dataset when missing, of another element type, or inconsistent
 * (row bytes that disagree with qtype and cols, an unknown qtype). */
int h5io_tensor_info(hid_t file, const char *path, H5Tensor *out, const char *fname, char *err,
                     size_t errlen);
/* h5io_tensor_info, then checks the logical shape against dims (rank dimensions). */
int h5io_check_qshape(hid_t file, const char *path, int rank, const uint64_t *dims,
                      H5Tensor *out, const char *fname, char *err, size_t errlen);
/* Reads the logical box start/count (rank dimensions, dims the expected shape) of a matrix in
 * its stored type into out: the rows of the box one after another, each
 * quant_row_bytes(type, count[rank-1]) bytes (floats for QTYPE_F32).  A column range that
 * does not start and end on the type's block boundaries is an error naming the dataset.
 * type (may be NULL) receives the stored type. */
int h5io_read_qslab(hid_t file, const char *path, int rank, const uint64_t *dims,
                    const uint64_t *start, const uint64_t *count, void *out, QType *type,
                    const char *fname, char *err, size_t errlen);

/* Creates a contiguous dataset for a matrix of logical shape dims in type t (float32 for
 * QTYPE_F32, else uint8 with qtype and cols), parents created as needed, no modification
 * times; returns the dataset id (caller closes) for h5io_write_qrows.  A row length that is
 * not a multiple of t's block size is an error naming the dataset. */
hid_t h5io_create_qtensor(hid_t file, const char *path, int rank, const uint64_t *dims, QType t,
                          char *err, size_t errlen);
/* Writes n_rows rows starting at row row0, rows counted over all leading dimensions
 * (row r of a [G][R][cols] matrix is [r / R][r % R]), from data: n_rows rows of the
 * dataset's row bytes (floats for float32) back to back. */
int h5io_write_qrows(hid_t dset, uint64_t row0, uint64_t n_rows, const void *data, char *err,
                     size_t errlen);

#endif
