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

/* Reads the hyperslab (hs, hc) of dataset path as mtype into out. */
static int read_hyperslab(hid_t file, const char *path, int rank, const hsize_t *hs,
                          const hsize_t *hc, hid_t mtype, void *out, const char *fname,
                          char *err, size_t errlen)
{
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    hid_t fs = H5Dget_space(d);
    hid_t ms = H5Screate_simple(rank, hc, NULL);
    int rc = 0;
    if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, hs, NULL, hc, NULL) < 0 ||
        H5Dread(d, mtype, ms, fs, H5P_DEFAULT, out) < 0)
        rc = util_err(err, errlen, "%s: read of dataset %s failed (truncated file?)", fname,
                      path);
    H5Sclose(ms);
    H5Sclose(fs);
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
    return read_hyperslab(file, path, rank, hs, hc, H5T_NATIVE_FLOAT, out, fname, err, errlen);
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

/* ---- Quantized tensors (format version 2) ---- */

int h5io_tensor_info(hid_t file, const char *path, H5Tensor *out, const char *fname, char *err,
                     size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!h5io_exists(file, path))
        return util_err(err, errlen, "%s: dataset %s missing", fname, path);
    hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
    if (d < 0)
        return util_err(err, errlen, "%s: cannot open dataset %s", fname, path);
    int rc = -1;
    hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    hsize_t have[8];
    int r = H5Sget_simple_extent_ndims(s);
    H5T_class_t cls = H5Tget_class(t);
    size_t esz = H5Tget_size(t);
    if (r < 1 || r > 4) {
        util_err(err, errlen, "%s: dataset %s has rank %d (1 to 4 expected)", fname, path, r);
        goto done;
    }
    H5Sget_simple_extent_dims(s, have, NULL);
    out->rank = r;
    for (int i = 0; i < r; i++)
        out->dims[i] = have[i];
    if (cls == H5T_FLOAT && esz == 4) {
        out->type = QTYPE_F32;
        out->row_bytes = (size_t)have[r - 1] * sizeof(float);
        rc = 0;
        goto done;
    }
    if (cls != H5T_INTEGER || esz != 1) {
        util_err(err, errlen, "%s: dataset %s is neither float32 nor a quantized (uint8) tensor",
                 fname, path);
        goto done;
    }
    char name[32];
    int cols;
    if (h5io_attr_read_string(file, path, "qtype", name, sizeof name, fname, err, errlen) < 0 ||
        h5io_attr_read_int(file, path, "cols", &cols, fname, err, errlen) < 0)
        goto done;
    int qt = quant_type_from_name(name);
    if (qt < 0 || !quant_type_known(qt) || qt == QTYPE_F32 || qt == QTYPE_Q8_1 ||
        qt == QTYPE_Q8_K) {
        util_err(err, errlen, "%s: dataset %s: qtype '%s' is not a weight type this program "
                 "reads", fname, path, name);
        goto done;
    }
    int bs = quant_block_size((QType)qt);
    if (cols <= 0 || cols % bs != 0) {
        util_err(err, errlen, "%s: dataset %s: cols = %d is not a positive multiple of the "
                 "%s block size %d", fname, path, cols, name, bs);
        goto done;
    }
    size_t rb = quant_row_bytes((QType)qt, cols);
    if (have[r - 1] != rb) {
        util_err(err, errlen, "%s: dataset %s: rows of %llu bytes, but %d %s values take %zu",
                 fname, path, (unsigned long long)have[r - 1], cols, name, rb);
        goto done;
    }
    out->type = (QType)qt;
    out->dims[r - 1] = (uint64_t)cols;
    out->row_bytes = rb;
    rc = 0;
done:
    H5Tclose(t);
    H5Sclose(s);
    H5Dclose(d);
    return rc;
}

int h5io_check_qshape(hid_t file, const char *path, int rank, const uint64_t *dims,
                      H5Tensor *out, const char *fname, char *err, size_t errlen)
{
    if (h5io_tensor_info(file, path, out, fname, err, errlen) < 0)
        return -1;
    if (out->rank != rank)
        return util_err(err, errlen, "%s: dataset %s has rank %d, expected %d", fname, path,
                        out->rank, rank);
    for (int i = 0; i < rank; i++)
        if (out->dims[i] != dims[i])
            return util_err(err, errlen, "%s: dataset %s dimension %d is %llu, the config "
                            "implies %llu", fname, path, i, (unsigned long long)out->dims[i],
                            (unsigned long long)dims[i]);
    return 0;
}

int h5io_read_qslab(hid_t file, const char *path, int rank, const uint64_t *dims,
                    const uint64_t *start, const uint64_t *count, void *out, QType *type,
                    const char *fname, char *err, size_t errlen)
{
    H5Tensor ti;
    if (h5io_check_qshape(file, path, rank, dims, &ti, fname, err, errlen) < 0)
        return -1;
    if (type)
        *type = ti.type;
    hsize_t hs[4], hc[4];
    for (int i = 0; i < rank; i++) {
        if (start[i] > dims[i] || count[i] > dims[i] - start[i])
            return util_err(err, errlen, "%s: slab of %s out of range in dimension %d", fname,
                            path, i);
        hs[i] = start[i];
        hc[i] = count[i];
    }
    hid_t mtype = H5T_NATIVE_FLOAT;
    if (ti.type != QTYPE_F32) {
        /* Columns become the bytes of whole blocks. */
        const uint64_t bs = (uint64_t)quant_block_size(ti.type);
        const uint64_t c0 = start[rank - 1], c1 = c0 + count[rank - 1];
        if (c0 % bs != 0 || c1 % bs != 0)
            return util_err(err, errlen, "%s: dataset %s: columns [%llu, %llu) do not start "
                            "and end on %s block boundaries (multiples of %llu)", fname, path,
                            (unsigned long long)c0, (unsigned long long)c1,
                            quant_type_name(ti.type), (unsigned long long)bs);
        const uint64_t bb = quant_block_bytes(ti.type);
        hs[rank - 1] = c0 / bs * bb;
        hc[rank - 1] = count[rank - 1] / bs * bb;
        mtype = H5T_NATIVE_UINT8;
    }
    return read_hyperslab(file, path, rank, hs, hc, mtype, out, fname, err, errlen);
}

hid_t h5io_create_qtensor(hid_t file, const char *path, int rank, const uint64_t *dims, QType t,
                          char *err, size_t errlen)
{
    if (rank < 1 || rank > 4)
        return util_err(err, errlen, "cannot create dataset %s: rank %d (1 to 4)", path, rank);
    if (!quant_type_known((int)t) || t == QTYPE_Q8_1 || t == QTYPE_Q8_K)
        return util_err(err, errlen, "cannot create dataset %s: type %d is not a weight type",
                        path, (int)t);
    const uint64_t cols = dims[rank - 1];
    const int bs = quant_block_size(t);
    if (cols == 0 || cols % (uint64_t)bs != 0 || cols > 0x7fffffffu)
        return util_err(err, errlen, "dataset %s: rows of %llu values are not a multiple of "
                        "the %s block size %d", path, (unsigned long long)cols,
                        quant_type_name(t), bs);
    if (t == QTYPE_F32)
        return h5io_create_tensor(file, path, rank, dims, err, errlen);
    hsize_t hd[4];
    for (int i = 0; i < rank - 1; i++)
        hd[i] = dims[i];
    hd[rank - 1] = quant_row_bytes(t, (int64_t)cols);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t s = H5Screate_simple(rank, hd, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t d = H5Dcreate2(file, path, H5T_STD_U8LE, s, lcpl, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(s);
    H5Pclose(lcpl);
    if (d < 0)
        return util_err(err, errlen, "cannot create dataset %s", path);
    if (h5io_attr_write_string(d, "qtype", quant_type_name(t)) < 0 ||
        h5io_attr_write_int(d, "cols", (int)cols) < 0) {
        H5Dclose(d);
        return util_err(err, errlen, "dataset %s: cannot write the qtype and cols attributes",
                        path);
    }
    return d;
}

int h5io_write_qrows(hid_t dset, uint64_t row0, uint64_t n_rows, const void *data, char *err,
                     size_t errlen)
{
    hid_t fs = H5Dget_space(dset), t = H5Dget_type(dset);
    const int rank = H5Sget_simple_extent_ndims(fs);
    const hid_t mtype = H5Tget_class(t) == H5T_FLOAT ? H5T_NATIVE_FLOAT : H5T_NATIVE_UINT8;
    const size_t esz = mtype == H5T_NATIVE_FLOAT ? sizeof(float) : 1;
    H5Tclose(t);
    hsize_t dims[8], start[8], count[8];
    int rc = 0;
    if (rank < 1 || rank > 8) {
        H5Sclose(fs);
        return util_err(err, errlen, "write of rows: dataset of rank %d", rank);
    }
    H5Sget_simple_extent_dims(fs, dims, NULL);
    /* A rank-1 dataset is one row; otherwise rows run over the leading dimensions. */
    uint64_t total = 1;
    for (int i = 0; i + 1 < rank; i++)
        total *= dims[i];
    const size_t row = (size_t)dims[rank - 1] * esz;
    if (row0 > total || n_rows > total - row0) {
        H5Sclose(fs);
        return util_err(err, errlen, "write of rows %llu..%llu: the dataset has %llu rows",
                        (unsigned long long)row0, (unsigned long long)(row0 + n_rows),
                        (unsigned long long)total);
    }
    const unsigned char *p = data;
    while (n_rows > 0 && rc == 0) {
        /* The run of rows that stays within one index of every leading dimension but the
         * last one of them. */
        uint64_t rem = row0, m = n_rows;
        for (int i = rank - 2; i >= 0; i--) {
            start[i] = rem % dims[i];
            rem /= dims[i];
            count[i] = 1;
        }
        if (rank >= 2) {
            uint64_t room = dims[rank - 2] - start[rank - 2];
            m = m < room ? m : room;
            count[rank - 2] = m;
        }
        start[rank - 1] = 0;
        count[rank - 1] = dims[rank - 1];
        hsize_t n_el = (hsize_t)m * dims[rank - 1];
        hid_t ms = H5Screate_simple(1, &n_el, NULL);
        if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dwrite(dset, mtype, ms, fs, H5P_DEFAULT, p) < 0)
            rc = util_err(err, errlen, "write of rows %llu..%llu failed (disk full?)",
                          (unsigned long long)row0, (unsigned long long)(row0 + m));
        H5Sclose(ms);
        p += m * row;
        row0 += m;
        n_rows -= m;
    }
    H5Sclose(fs);
    return rc;
}
