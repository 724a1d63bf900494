/* h5io.c: HDF5 helpers with messages that name the file and object at fault. */
#include "h5io.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void h5io_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

hid_t h5io_open_read(const char *path, char *err, size_t errlen)
{
    h5io_quiet();
    if (access(path, R_OK) != 0) {
        util_err(err, errlen, "%s: model file not found or not readable", path);
        return -1;
    }
    if (H5Fis_hdf5(path) <= 0) {
        util_err(err, errlen, "%s: not an HDF5 file (or truncated)", path);
        return -1;
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        util_err(err, errlen, "%s: cannot open as HDF5 (truncated or corrupt?)", path);
    return f;
}

hid_t h5io_create(const char *path, char *err, size_t errlen)
{
    h5io_quiet();
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0)
        util_err(err, errlen, "%s: cannot create HDF5 file", path);
    return f;
}

static hid_t attr_open(hid_t file, const char *obj, const char *name, const char *fname,
                       char *err, size_t errlen)
{
    if (H5Aexists_by_name(file, obj, name, H5P_DEFAULT) <= 0) {
        util_err(err, errlen, "%s: attribute %s/%s missing", fname, obj, name);
        return -1;
    }
    hid_t a = H5Aopen_by_name(file, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) {
        util_err(err, errlen, "%s: cannot open attribute %s/%s", fname, obj, name);
        return -1;
    }
    hid_t s = H5Aget_space(a);
    int scalar = H5Sget_simple_extent_npoints(s) == 1;
    H5Sclose(s);
    if (!scalar) {
        H5Aclose(a);
        util_err(err, errlen, "%s: attribute %s/%s is not a scalar", fname, obj, name);
        return -1;
    }
    return a;
}

static int attr_read_native(hid_t file, const char *obj, const char *name, hid_t mtype,
                            H5T_class_t want, void *out, const char *fname, char *err,
                            size_t errlen)
{
    hid_t a = attr_open(file, obj, name, fname, err, errlen);
    if (a < 0)
        return -1;
    hid_t t = H5Aget_type(a);
    H5T_class_t cls = H5Tget_class(t);
    H5Tclose(t);
    int ok = (cls == want || (want == H5T_FLOAT && cls == H5T_INTEGER)) &&
             H5Aread(a, mtype, out) >= 0;
    H5Aclose(a);
    if (!ok)
        return util_err(err, errlen, "%s: attribute %s/%s has the wrong type", fname, obj, name);
    return 0;
}

int h5io_attr_read_int(hid_t file, const char *obj, const char *name, int *out,
                       const char *fname, char *err, size_t errlen)
{
    long long v;
    if (attr_read_native(file, obj, name, H5T_NATIVE_LLONG, H5T_INTEGER, &v, fname, err,
                         errlen) < 0)
        return -1;
    if (v < -2147483647LL || v > 2147483647LL)
        return util_err(err, errlen, "%s: attribute %s/%s = %lld is out of range", fname, obj,
                        name, v);
    *out = (int)v;
    return 0;
}

int h5io_attr_read_double(hid_t file, const char *obj, const char *name, double *out,
                          const char *fname, char *err, size_t errlen)
{
    return attr_read_native(file, obj, name, H5T_NATIVE_DOUBLE, H5T_FLOAT, out, fname, err,
                            errlen);
}

int h5io_attr_read_string(hid_t file, const char *obj, const char *name, char *out, size_t cap,
                          const char *fname, char *err, size_t errlen)
{
    hid_t a = attr_open(file, obj, name, fname, err, errlen);
    if (a < 0)
        return -1;
    int rc = -1;
    hid_t t = H5Aget_type(a);
    if (H5Tget_class(t) != H5T_STRING) {
        util_err(err, errlen, "%s: attribute %s/%s is not a string", fname, obj, name);
        goto done;
    }
    if (H5Tis_variable_str(t) > 0) {
        char *s = NULL;
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        if (H5Aread(a, mt, &s) >= 0 && s) {
            snprintf(out, cap, "%s", s);
            H5free_memory(s);
            rc = 0;
        }
        H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(t);
        if (n == 0 || n > 4096) { /* a hostile type must not size our buffer */
            util_err(err, errlen, "%s: attribute %s/%s: string of %zu bytes (at most 4096)",
                     fname, obj, name, n);
            goto done;
        }
        char *buf = xcalloc(n + 1, 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, n);
        if (H5Aread(a, mt, buf) >= 0) {
            snprintf(out, cap, "%s", buf);
            rc = 0;
        }
        H5Tclose(mt);
        free(buf);
    }
    if (rc < 0)
        util_err(err, errlen, "%s: cannot read attribute %s/%s", fname, obj, name);
done:
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

static int attr_write(hid_t loc, const char *name, hid_t type, const void *v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
    int rc = (a >= 0 && H5Awrite(a, type, v) >= 0) ? 0 : -1;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(s);
    return rc;
}

int h5io_attr_write_int(hid_t loc, const char *name, int v)
{
    return attr_write(loc, name, H5T_NATIVE_INT, &v);
}

int h5io_attr_write_double(hid_t loc, const char *name, double v)
{
    return attr_write(loc, name, H5T_NATIVE_DOUBLE, &v);
}

int h5io_attr_write_string(hid_t loc, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    int rc = attr_write(loc, name, t, v);
    H5Tclose(t);
    return rc;
}

int h5io_exists(hid_t file, const char *path)
{
    /* H5Lexists needs every parent to exist, so walk the path. */
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (H5Lexists(file, buf, H5P_DEFAULT) <= 0)
                return 0;
            if (c == '\0')
                return 1;
            *p = c;
        }
    }
}

int h5io_check_shape(hid_t file, const char *path, int rank, const uint64_t *dims,
                     const char *fname, char *err, size_t errlen)
{
    if (!h5io_exists(file, path))
        return util_err(err, errlen, "%s: dataset %s missing", fname, path);
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    if (d < 0)
        return util_err(err, errlen, "%s: cannot open dataset %s", fname, path);
    int rc = -1;
    hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    hsize_t have[8];
    int r = H5Sget_simple_extent_ndims(s);
    if (H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 4) {
        util_err(err, errlen, "%s: dataset %s is not float32", fname, path);
    } else if (r != rank || r > 8) {
        util_err(err, errlen, "%s: dataset %s has rank %d, expected %d", fname, path, r, rank);
    } else {
        H5Sget_simple_extent_dims(s, have, NULL);
        rc = 0;
        for (int i = 0; i < rank; i++)
            if (have[i] != dims[i]) {
                util_err(err, errlen,
                         "%s: dataset %s dimension %d is %llu, the config implies %llu", fname,
                         path, i, (unsigned long long)have[i], (unsigned long long)dims[i]);
                rc = -1;
                break;
            }
    }
    H5Tclose(t);
    H5Sclose(s);
    H5Dclose(d);
    return rc;
}

int h5io_read_slab(hid_t file, const char *path, int rank, const uint64_t *dims,
                   const uint64_t *start, const uint64_t *count, float *out,
                   const char *fname, char *err, size_t errlen)
{
    if (h5io_check_shape(file, path, rank, dims, fname, err, errlen) < 0)
        return -1;
    hsize_t hs[8], hc[8];
    for (int i = 0; i < rank; i++) {
        if (start[i] > dims[i] || count[i] > dims[i] - start[i])
            return util_err(err, errlen, "%s: slab of %s out of range in dimension %d", fname,
                            path, i);
        hs[i] = start[i];
        hc[i] = count[i];
    }
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    hid_t fs = H5Dget_space(d);
    hid_t ms = H5Screate_simple(rank, hc, NULL);
    int rc = 0;
    if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, hs, NULL, hc, NULL) < 0 ||
        H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, out) < 0)
        rc = util_err(err, errlen, "%s: read of dataset %s failed (truncated file?)", fname,
                      path);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    return rc;
}

hid_t h5io_create_tensor(hid_t file, const char *path, int rank, const uint64_t *dims,
                         char *err, size_t errlen)
{
    hsize_t hd[8];
    for (int i = 0; i < rank; i++)
        hd[i] = dims[i];
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t s = H5Screate_simple(rank, hd, NULL);
    /* No modification times: the same model converts to the same bytes. */
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    hid_t d = H5Dcreate2(file, path, H5T_IEEE_F32LE, s, lcpl, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(s);
    H5Pclose(lcpl);
    if (d < 0)
        util_err(err, errlen, "cannot create dataset %s", path);
    return d;
}

int h5io_write_rows(hid_t dset, uint64_t row0, uint64_t n_rows, const float *data,
                    char *err, size_t errlen)
{
    hid_t fs = H5Dget_space(dset);
    int rank = H5Sget_simple_extent_ndims(fs);
    hsize_t dims[8], start[8] = {0}, count[8];
    H5Sget_simple_extent_dims(fs, dims, NULL);
    for (int i = 0; i < rank; i++)
        count[i] = dims[i];
    start[0] = row0;
    count[0] = n_rows;
    hid_t ms = H5Screate_simple(rank, count, NULL);
    int rc = 0;
    if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        H5Dwrite(dset, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, data) < 0)
        rc = util_err(err, errlen, "write of rows %llu..%llu failed (disk full?)",
                      (unsigned long long)row0, (unsigned long long)(row0 + n_rows));
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

int h5io_write_tensor(hid_t file, const char *path, int rank, const uint64_t *dims,
                      const float *data, char *err, size_t errlen)
{
    hid_t d = h5io_create_tensor(file, path, rank, dims, err, errlen);
    if (d < 0)
        return -1;
    int rc = h5io_write_rows(d, 0, dims[0], data, err, errlen);
    H5Dclose(d);
    return rc;
}
