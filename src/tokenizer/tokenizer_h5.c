/* tokenizer_h5.c: the /tokenizer group of a model file (docs/model-format.md): attributes
 * kind, bos_id, eos_id, add_bos, add_dummy_prefix, byte_fallback; datasets piece_bytes,
 * piece_offsets, scores and (when there are merges) merges; kind bpe_hf adds hf_pipeline, the
 * Hugging Face pipeline as JSON text (tokenizer_hf.c).  Reads validate everything. */
#include "tokenizer_internal.h"

#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_names[] = {"spm", "spm_merges", "gpt2", "bpe_hf"};

static int h5_write_int_attr(hid_t obj, const char *name, int value)
{
    int rc = -1;
    int32_t v = value;
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, H5T_NATIVE_INT32, &v) < 0)
        goto fail;
    rc = 0;
fail:
    if (a >= 0)
        H5Aclose(a);
    if (sp >= 0)
        H5Sclose(sp);
    return rc;
}

/* Writes a fixed-length, NUL-terminated ASCII string attribute. */
static int h5_write_str_attr(hid_t obj, const char *name, const char *value)
{
    int rc = -1;
    hid_t st = H5Tcopy(H5T_C_S1), sp = -1, a = -1;
    if (st < 0 || H5Tset_size(st, strlen(value) + 1) < 0 ||
        H5Tset_strpad(st, H5T_STR_NULLTERM) < 0)
        goto fail;
    sp = H5Screate(H5S_SCALAR);
    a = sp < 0 ? -1 : H5Acreate2(obj, name, st, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, st, value) < 0)
        goto fail;
    rc = 0;
fail:
    if (a >= 0)
        H5Aclose(a);
    if (sp >= 0)
        H5Sclose(sp);
    if (st >= 0)
        H5Tclose(st);
    return rc;
}

static int h5_write_dataset(hid_t g, const char *name, hid_t ftype, hid_t mtype, int rank,
                            const hsize_t *dims, const void *data)
{
    int rc = -1;
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0); /* reproducible bytes */
    hid_t d = sp < 0 ? -1 : H5Dcreate2(g, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    if (d < 0 || H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        goto fail;
    rc = 0;
fail:
    if (d >= 0)
        H5Dclose(d);
    if (sp >= 0)
        H5Sclose(sp);
    return rc;
}

/* Writes t as the group /tokenizer of an open, writable file. */
int tokenizer_h5_write(const Tokenizer *t, hid_t file, char *err, size_t errlen)
{
    int rc = -1;
    char fname[512] = "?";
    const char *what = "group";
    if (H5Fget_name(file, fname, sizeof fname) < 0)
        snprintf(fname, sizeof fname, "?");
    hid_t g = H5Gcreate2(file, "/tokenizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        goto fail;
    what = "attributes";
    if (h5_write_str_attr(g, "kind", kind_names[t->kind]) != 0 ||
        h5_write_int_attr(g, "bos_id", t->bos) != 0 ||
        h5_write_int_attr(g, "eos_id", t->eos) != 0 ||
        h5_write_int_attr(g, "add_bos", t->add_bos) != 0 ||
        h5_write_int_attr(g, "add_dummy_prefix", t->add_dummy_prefix) != 0 ||
        h5_write_int_attr(g, "byte_fallback", t->byte_fallback) != 0)
        goto fail;
    hsize_t dims[2] = {(hsize_t)t->offsets[t->vocab_size], 0};
    what = "piece_bytes";
    if (h5_write_dataset(g, "piece_bytes", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, dims,
                         t->piece_bytes) != 0)
        goto fail;
    dims[0] = (hsize_t)t->vocab_size + 1;
    what = "piece_offsets";
    if (h5_write_dataset(g, "piece_offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, dims,
                         t->offsets) != 0)
        goto fail;
    dims[0] = (hsize_t)t->vocab_size;
    what = "scores";
    if (h5_write_dataset(g, "scores", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, dims, t->scores) != 0)
        goto fail;
    dims[0] = (hsize_t)t->n_merges;
    dims[1] = 2;
    what = "merges";
    if (t->n_merges > 0 && h5_write_dataset(g, "merges", H5T_STD_I32LE, H5T_NATIVE_INT32, 2,
                                            dims, t->merges) != 0)
        goto fail;
    if (t->kind == TOKENIZER_BPE_HF) {
        size_t n;
        const char *text = tokenizer_hf_json(t->hf, &n);
        dims[0] = (hsize_t)n;
        what = "hf_pipeline";
        if (h5_write_dataset(g, "hf_pipeline", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, dims, text) != 0)
            goto fail;
    }
    rc = 0;
fail:
    if (rc != 0)
        util_err(err, errlen, "%s: cannot write /tokenizer %s", fname, what);
    if (g >= 0)
        H5Gclose(g);
    return rc;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* Opens attribute name of obj holding exactly one element of class cls; -1 if not. */
static hid_t h5_open_attr(hid_t obj, const char *name, H5T_class_t cls, hid_t *ftype)
{
    *ftype = -1;
    if (H5Aexists(obj, name) <= 0)
        return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t sp = a < 0 ? -1 : H5Aget_space(a);
    hid_t ft = a < 0 ? -1 : H5Aget_type(a);
    int ok = sp >= 0 && ft >= 0 && H5Sget_simple_extent_npoints(sp) == 1 &&
             H5Tget_class(ft) == cls;
    if (sp >= 0)
        H5Sclose(sp);
    if (!ok) {
        if (ft >= 0)
            H5Tclose(ft);
        if (a >= 0)
            H5Aclose(a);
        return -1;
    }
    *ftype = ft;
    return a;
}

static int h5_read_int_attr(hid_t obj, const char *name, int *out)
{
    hid_t ft;
    hid_t a = h5_open_attr(obj, name, H5T_INTEGER, &ft);
    if (a < 0)
        return -1;
    int32_t v = 0;
    int rc = H5Aread(a, H5T_NATIVE_INT32, &v) < 0 ? -1 : 0;
    *out = v;
    H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

/* Reads a fixed- or variable-length string attribute into out (trailing NULs and spaces
 * dropped). */
static int h5_read_str_attr(hid_t obj, const char *name, char *out, size_t cap)
{
    int rc = -1;
    hid_t ft, mt = -1;
    char *buf = NULL, *vs = NULL;
    hid_t a = h5_open_attr(obj, name, H5T_STRING, &ft);
    if (a < 0)
        return -1;
    if (H5Tis_variable_str(ft) > 0) {
        mt = H5Tcopy(H5T_C_S1);
        if (mt < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Tset_cset(mt, H5Tget_cset(ft)) < 0 ||
            H5Aread(a, mt, &vs) < 0 || !vs)
            goto fail;
        snprintf(out, cap, "%s", vs);
    } else {
        size_t size = H5Tget_size(ft);
        if (size == 0 || size > 4096)
            goto fail;
        buf = xcalloc(size + 1, 1);
        if (H5Aread(a, ft, buf) < 0)
            goto fail;
        snprintf(out, cap, "%s", buf);
    }
    for (size_t n = strlen(out); n > 0 && out[n - 1] == ' '; n--)
        out[n - 1] = '\0';
    rc = 0;
fail:
    if (vs)
        H5free_memory(vs);
    free(buf);
    if (mt >= 0)
        H5Tclose(mt);
    H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

/* Opens dataset name of class cls and rank rank; fills dims.  -1 if absent or wrong. */
static hid_t h5_open_dataset(hid_t g, const char *name, H5T_class_t cls, int rank,
                             hsize_t *dims)
{
    if (H5Lexists(g, name, H5P_DEFAULT) <= 0)
        return -1;
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    hid_t sp = d < 0 ? -1 : H5Dget_space(d);
    hid_t ft = d < 0 ? -1 : H5Dget_type(d);
    int ok = sp >= 0 && ft >= 0 && H5Tget_class(ft) == cls &&
             H5Sget_simple_extent_ndims(sp) == rank &&
             H5Sget_simple_extent_dims(sp, dims, NULL) == rank;
    if (sp >= 0)
        H5Sclose(sp);
    if (ft >= 0)
        H5Tclose(ft);
    if (!ok && d >= 0) {
        H5Dclose(d);
        d = -1;
    }
    return d;
}

static int h5_read_dataset(hid_t g, const char *name, H5T_class_t cls, int rank,
                           hsize_t *dims, hid_t mtype, void **data, size_t elem,
                           size_t max_elems, const char *fname, char *err, size_t errlen)
{
    int rc = -1;
    size_t count = 1;
    *data = NULL;
    hid_t d = h5_open_dataset(g, name, cls, rank, dims);
    if (d < 0) {
        util_err(err, errlen, "%s: /tokenizer/%s missing or of the wrong type or rank", fname,
                 name);
        goto fail;
    }
    for (int i = 0; i < rank; i++) {
        if (dims[i] > max_elems || size_mul(&count, count, (size_t)dims[i]) || count > max_elems) {
            util_err(err, errlen, "%s: /tokenizer/%s is too large", fname, name);
            goto fail;
        }
    }
    *data = xmalloc((count ? count : 1) * elem);
    if (count && H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, *data) < 0) {
        util_err(err, errlen, "%s: cannot read /tokenizer/%s", fname, name);
        goto fail;
    }
    rc = 0;
fail:
    if (rc != 0) {
        free(*data);
        *data = NULL;
    }
    if (d >= 0)
        H5Dclose(d);
    return rc;
}

static int tokenizer_h5_read_group(Tokenizer **out, hid_t g, const char *fname, char *err,
                                   size_t errlen)
{
    int rc = -1;
    Tokenizer *t = NULL;
    uint64_t *offs = NULL;
    void *bytes = NULL, *scores = NULL, *merges = NULL;
    char *pipe = NULL;
    char kind_s[32];
    int kind = -1, bos, eos, add_bos, dummy, fallback;
    hsize_t dims[2];
    if (h5_read_str_attr(g, "kind", kind_s, sizeof kind_s) != 0) {
        util_err(err, errlen, "%s: /tokenizer attribute kind missing or not a string", fname);
        goto fail;
    }
    for (int k = 0; k < 4; k++)
        if (strcmp(kind_s, kind_names[k]) == 0)
            kind = k;
    if (kind < 0) {
        util_err(err, errlen, "%s: /tokenizer attribute kind \"%s\" is not spm, spm_merges, "
                 "gpt2 or bpe_hf", fname, kind_s);
        goto fail;
    }
    const char *names[5] = {"bos_id", "eos_id", "add_bos", "add_dummy_prefix", "byte_fallback"};
    int *vals[5] = {&bos, &eos, &add_bos, &dummy, &fallback};
    for (int k = 0; k < 5; k++) {
        if (h5_read_int_attr(g, names[k], vals[k]) != 0) {
            util_err(err, errlen, "%s: /tokenizer attribute %s missing or not an integer", fname,
                     names[k]);
            goto fail;
        }
    }
    if (h5_read_dataset(g, "piece_offsets", H5T_INTEGER, 1, dims, H5T_NATIVE_UINT64,
                        (void **)&offs, sizeof *offs, (size_t)TOKENIZER_MAX_VOCAB + 1, fname,
                        err, errlen) != 0)
        goto fail;
    if (dims[0] < 2) {
        util_err(err, errlen, "%s: /tokenizer/piece_offsets has %llu entries (vocab_size + 1 "
                 "needed, vocab_size >= 1)", fname, (unsigned long long)dims[0]);
        goto fail;
    }
    int vocab = (int)dims[0] - 1;
    if (h5_read_dataset(g, "piece_bytes", H5T_INTEGER, 1, dims, H5T_NATIVE_UINT8, &bytes, 1,
                        TOKENIZER_MAX_TOTAL_BYTES, fname, err, errlen) != 0)
        goto fail;
    size_t total = (size_t)dims[0];
    if (offs[0] != 0 || offs[vocab] != total) {
        util_err(err, errlen, "%s: /tokenizer/piece_offsets must start at 0 and end at the "
                 "size of piece_bytes (%zu)", fname, total);
        goto fail;
    }
    for (int i = 0; i < vocab; i++) {
        if (offs[i + 1] < offs[i] || offs[i + 1] - offs[i] > TOKENIZER_MAX_PIECE_LEN) {
            util_err(err, errlen, "%s: /tokenizer/piece_offsets not monotonic or piece too long "
                     "at %d", fname, i);
            goto fail;
        }
    }
    if (h5_read_dataset(g, "scores", H5T_FLOAT, 1, dims, H5T_NATIVE_FLOAT, &scores,
                        sizeof(float), (size_t)vocab, fname, err, errlen) != 0)
        goto fail;
    if (dims[0] != (hsize_t)vocab) {
        util_err(err, errlen, "%s: /tokenizer/scores has %llu entries, vocab_size is %d", fname,
                 (unsigned long long)dims[0], vocab);
        goto fail;
    }
    for (int i = 0; i < vocab; i++) {
        if (isnan(((float *)scores)[i])) {
            util_err(err, errlen, "%s: /tokenizer/scores[%d] is NaN", fname, i);
            goto fail;
        }
    }
    if (bos < -1 || bos >= vocab || eos < -1 || eos >= vocab) {
        util_err(err, errlen, "%s: /tokenizer bos_id %d or eos_id %d outside [-1, %d)", fname,
                 bos, eos, vocab);
        goto fail;
    }
    t = tokenizer_alloc((TokenizerKind)kind, vocab, total);
    memcpy(t->piece_bytes, bytes, total);
    memcpy(t->offsets, offs, ((size_t)vocab + 1) * sizeof *offs);
    memcpy(t->scores, scores, (size_t)vocab * sizeof(float));
    t->bos = bos;
    t->eos = eos;
    t->add_bos = add_bos != 0;
    t->add_dummy_prefix = dummy != 0;
    t->byte_fallback = fallback != 0;
    if (H5Lexists(g, "merges", H5P_DEFAULT) > 0) {
        if (h5_read_dataset(g, "merges", H5T_INTEGER, 2, dims, H5T_NATIVE_INT32, &merges,
                            sizeof(int32_t), (size_t)TOKENIZER_MAX_MERGES * 2, fname, err,
                            errlen) != 0)
            goto fail;
        if (dims[1] != 2) {
            util_err(err, errlen, "%s: /tokenizer/merges must be [M][2]", fname);
            goto fail;
        }
        t->n_merges = (int)dims[0];
        t->merges = merges;
        merges = NULL;
    }
    if (kind == TOKENIZER_BPE_HF) {
        if (h5_read_dataset(g, "hf_pipeline", H5T_INTEGER, 1, dims, H5T_NATIVE_UINT8, (void **)&pipe, 1,
                            TOKENIZER_MAX_TOTAL_BYTES, fname, err, errlen) != 0 ||
            tokenizer_hf_parse(&t->hf, pipe, (size_t)dims[0], fname, err, errlen) != 0)
            goto fail;
        t->byte_level = tokenizer_hf_byte_level(t->hf);
    }
    if (tokenizer_index_pieces(t, fname, err, errlen) != 0 ||
        tokenizer_index_merges(t, fname, err, errlen) != 0)
        goto fail;
    if (kind == TOKENIZER_BPE_HF) {
        int keep_bos = t->bos;
        if (tokenizer_hf_bind(t, fname, err, errlen) != 0)
            goto fail;
        t->bos = keep_bos; /* the file's bos_id (the post-processor's first token, if any) */
    }
    *out = t;
    t = NULL;
    rc = 0;
fail:
    tokenizer_free(t);
    free(offs);
    free(bytes);
    free(scores);
    free(merges);
    free(pipe);
    return rc;
}

/* Reads the group /tokenizer of an open model file fname. */
int tokenizer_h5_read(Tokenizer **out, hid_t file, const char *fname, char *err, size_t errlen)
{
    int rc = -1;
    H5E_auto2_t old_func = NULL;
    void *old_data = NULL;
    hid_t g = -1;
    *out = NULL;
    H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages replace HDF5's error stack dump */
    if (H5Lexists(file, "tokenizer", H5P_DEFAULT) <= 0 ||
        (g = H5Gopen2(file, "/tokenizer", H5P_DEFAULT)) < 0) {
        util_err(err, errlen, "%s: no group /tokenizer", fname);
        goto fail;
    }
    rc = tokenizer_h5_read_group(out, g, fname, err, errlen);
fail:
    if (g >= 0)
        H5Gclose(g);
    H5Eset_auto2(H5E_DEFAULT, old_func, old_data);
    return rc;
}
