/* h5io.h: small HDF5 helpers shared by the model loader and the converter.
 * Every failure returns -1 with a message naming the file and the object. */
#ifndef HEADSPLIT_H5IO_H
#define HEADSPLIT_H5IO_H

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

#endif
