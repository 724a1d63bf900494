/* writer.c: streaming model-file writer for the converters (docs/model-format.md): /config with
 * a source attribute, contiguous float32 tensors filled block by block, /tokenizer.  The file is
 * written as OUT.partial and renamed only when complete; failures remove it. */
#include "convert_internal.h"

#include "config_io.h"
#include "h5io.h"
#include "kernels.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static char *concat2(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *s = xmalloc(na + nb + 1);
    memcpy(s, a, na);
    memcpy(s + na, b, nb + 1);
    return s;
}

int writer_parse_quantize(const char *name, QuantizeMode *out, char *err, size_t errlen)
{
    static const struct { const char *name; QuantizeMode m; } modes[] = {
        {"f32", QUANTIZE_NONE}, {"f16", QUANTIZE_F16},       {"q8_0", QUANTIZE_Q8_0},
        {"q4_0", QUANTIZE_Q4_0}, {"q4_k_m", QUANTIZE_Q4_K_M},
    };
    *out = QUANTIZE_NONE;
    if (!name)
        return 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcasecmp(name, modes[i].name) == 0) {
            *out = modes[i].m;
            return 0;
        }
    return util_err(err, errlen, "command line: --quantize: unknown type '%s' (expected q8_0, "
                    "q4_0, q4_k_m, f16 or f32)", name);
}

/* llama.cpp's choice of the layers whose attn_v and ffn_down get more bits (llama-quant.cpp's
 * use_more_bits): the first and last eighth, and every third layer between. */
static int use_more_bits(int i_layer, int n_layers)
{
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
           (i_layer - n_layers / 8) % 3 == 2;
}

QType writer_pick_type(QuantizeMode m, const ModelConfig *c, WeightKind k, int layer,
                       int64_t cols)
{
    if (m == QUANTIZE_NONE)
        return QTYPE_F32;
    if (m == QUANTIZE_F16)
        return QTYPE_F16;
    QType t = m == QUANTIZE_Q8_0 ? QTYPE_Q8_0 : m == QUANTIZE_Q4_0 ? QTYPE_Q4_0 : QTYPE_Q4_K;
    const int output = k == WKIND_LM_HEAD || (k == WKIND_EMBED && c->tied_embeddings);
    if (output) {
        /* llama.cpp: Q8_0 when the row is not a multiple of 256, else Q6_K unless Q8_0. */
        t = cols % 256 != 0 ? QTYPE_Q8_0 : t == QTYPE_Q8_0 ? QTYPE_Q8_0 : QTYPE_Q6_K;
    } else if (m == QUANTIZE_Q4_K_M) {
        const int qkv = k == WKIND_WQ || k == WKIND_WK || k == WKIND_WV;
        if (c->arch == ARCH_GPT2 && qkv)
            t = QTYPE_Q5_K; /* gpt2's attention input is one fused attn_qkv in llama.cpp */
        else if ((k == WKIND_WV || k == WKIND_W_DOWN) && use_more_bits(layer, c->n_layers))
            t = QTYPE_Q6_K;
    }
    if (quant_block_size(t) == 256 && cols % 256 != 0)
        t = t == QTYPE_Q4_K ? QTYPE_Q5_0 : t == QTYPE_Q5_K ? QTYPE_Q5_1 : QTYPE_Q8_0;
    if (cols % quant_block_size(t) != 0)
        t = QTYPE_F16;
    return t;
}

int convert_stored_types(ModelConfig *c, const char *quantize, char *err, size_t errlen)
{
    QuantizeMode m;
    if (writer_parse_quantize(quantize, &m, err, errlen) < 0)
        return -1;
    for (int k = 0; k < WKIND_COUNT; k++) {
        const int64_t cols = k == WKIND_WO       ? (int64_t)c->n_heads * c->head_dim
                             : k == WKIND_W_DOWN ? c->ffn_dim
                                                 : c->dim;
        if (k < WKIND_WQ) {
            c->wtype[k] = (int)writer_pick_type(m, c, (WeightKind)k, -1, cols);
            continue;
        }
        int count[64] = {0}, best = 0; /* QType values are under 64 */
        for (int l = 0; l < c->n_layers; l++) {
            const int t = (int)writer_pick_type(m, c, (WeightKind)k, l, cols) & 63;
            if (++count[t] > count[best])
                best = t;
        }
        c->wtype[k] = best;
    }
    return 0;
}

/* The matrix kind and layer of a dataset path, or -1 for a vector (norm, bias, pos_embed). */
static int matrix_kind(const char *path, int *layer)
{
    *layer = -1;
    const char *name = path + 1;
    if (strncmp(path, "/layers/", 8) == 0) {
        *layer = atoi(path + 8);
        name = strrchr(path, '/') + 1;
    }
    for (int k = 0; k < WKIND_COUNT; k++)
        if (strcmp(name, config_wkind_name((WeightKind)k)) == 0 &&
            ((*layer >= 0) == (k >= WKIND_WQ)))
            return k;
    return -1;
}

static const char *quantize_label(QuantizeMode m)
{
    static const char *const labels[] = {"", "f16", "q8_0", "q4_0", "q4_K_M"};
    return labels[m];
}

int writer_open_file(ModelWriter *w, const char *out, const ModelConfig *c, const char *source,
                     const char *quantize, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->file = -1;
    char verr[256];
    if (config_validate(c, verr, sizeof verr) < 0)
        return util_err(err, errlen, "%s: config: %s", out, verr);
    if (writer_parse_quantize(quantize, &w->quant, err, errlen) < 0)
        return -1;
    w->config = *c;
    if (w->quant != QUANTIZE_NONE) /* else the caller's (a GGUF file's type, or none) */
        snprintf(w->config.quantization, sizeof w->config.quantization, "%s",
                 quantize_label(w->quant));
    c = &w->config;
    struct stat sb;
    if (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode))
        return util_err(err, errlen, "%s: --out: is a directory", out);
    w->out_path = xstrdup(out);
    w->tmp_path = concat2(out, ".partial");
    w->file = h5io_create(w->tmp_path, err, errlen);
    if (w->file < 0) {
        util_err(err, errlen, "%s: --out: cannot create the output file (does the directory "
                 "exist and is it writable?)", out);
        goto fail;
    }
    if (config_write(c, w->file, verr, sizeof verr) < 0) {
        util_err(err, errlen, "%s: config: %s", out, verr);
        goto fail;
    }
    hid_t g = H5Gopen2(w->file, "/config", H5P_DEFAULT);
    int rc = g >= 0 ? h5io_attr_write_string(g, "source", source) : -1;
    if (g >= 0)
        H5Gclose(g);
    if (rc < 0) {
        util_err(err, errlen, "%s: source: cannot write the attribute", out);
        goto fail;
    }
    w->buf = xmalloc(WRITER_BLOCK_FLOATS * sizeof(float));
    w->t_open = w->t_shown = time_now();
    return 0;
fail:
    writer_abort_file(w);
    return -1;
}

/* A contiguous float32 dataset (parents created as needed) as h5io_create_tensor makes, but
 * without modification times, so that the same input gives a byte-identical file. */
static hid_t create_dataset(hid_t file, const char *path, int rank, const uint64_t *dims)
{
    hsize_t hd[3];
    for (int i = 0; i < rank; i++)
        hd[i] = dims[i];
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t s = H5Screate_simple(rank, hd, NULL), d = -1;
    if (lcpl >= 0 && dcpl >= 0 && s >= 0 && H5Pset_create_intermediate_group(lcpl, 1) >= 0 &&
        H5Pset_obj_track_times(dcpl, 0) >= 0 && H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 &&
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0)
        d = H5Dcreate2(file, path, H5T_IEEE_F32LE, s, lcpl, dcpl, H5P_DEFAULT);
    if (s >= 0)
        H5Sclose(s);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (lcpl >= 0)
        H5Pclose(lcpl);
    return d;
}

/* Writes n floats of w->buf into the box start/count of dataset d. */
static int write_box(hid_t d, const hsize_t *start, const hsize_t *count, uint64_t n,
                     const float *buf)
{
    hsize_t hn = n;
    hid_t fs = H5Dget_space(d);
    hid_t ms = H5Screate_simple(1, &hn, NULL);
    int rc = (fs >= 0 && ms >= 0 &&
              H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
              H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, buf) >= 0) ? 0 : -1;
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    return rc;
}

/* A line every 5 s while a long conversion goes: bytes of the total, rate, time left. */
static void show_progress(ModelWriter *w)
{
    const double now = time_now();
    if (!w->progress || now - w->t_shown < 5.0)
        return;
    w->t_shown = now;
    const double mb = (double)w->bytes / 1e6, rate = mb / (now - w->t_open);
    const double left = w->total > w->bytes ? (double)(w->total - w->bytes) / 1e6 : 0;
    fprintf(w->progress, "headsplit-convert: %s: %.0f of %.0f MB (%.0f%%), %.1f MB/s, %.0f s "
            "left\n", w->out_path, mb, (double)w->total / 1e6,
            w->total ? 100.0 * (double)w->bytes / (double)w->total : 0.0, rate,
            rate > 0 ? left / rate : 0.0);
    fflush(w->progress);
}

/* Rows [r0, r0 + n) of a block quantized by the kernel threads. */
typedef struct {
    unsigned char *q;
    const float *x;
    QType t;
    int64_t cols;
    size_t rb;
} QuantJob;

static void quantize_rows(void *arg, int lo, int hi)
{
    const QuantJob *j = arg;
    for (int r = lo; r < hi; r++)
        quant_quantize_row(j->q + (size_t)r * j->rb, j->x + (size_t)r * (size_t)j->cols, j->t,
                           j->cols);
}

/* A matrix in type t, row by row: blocks of whole rows filled, quantized and written. */
static int stream_quantized(ModelWriter *w, const char *path, int rank, const uint64_t *dims,
                            QType t, WriterFillFn fill, void *ctx, char *err, size_t errlen)
{
    char herr[256];
    hid_t d = h5io_create_qtensor(w->file, path, rank, dims, t, herr, sizeof herr);
    if (d < 0)
        return util_err(err, errlen, "%s: %s", w->out_path, herr);
    const uint64_t cols = dims[rank - 1];
    uint64_t rows = 1;
    for (int i = 0; i + 1 < rank; i++)
        rows *= dims[i];
    const size_t rb = quant_row_bytes(t, (int64_t)cols);
    uint64_t nr = WRITER_BLOCK_FLOATS / cols;
    if (nr == 0)
        nr = 1;
    if (!w->qbuf)
        w->qbuf = xmalloc(WRITER_BLOCK_FLOATS * sizeof(float));
    int rc = 0;
    for (uint64_t r0 = 0; r0 < rows && rc == 0; r0 += nr) {
        uint64_t n = rows - r0 < nr ? rows - r0 : nr;
        rc = fill(ctx, r0 * cols, n * cols, w->buf, err, errlen);
        QuantJob j = {w->qbuf, w->buf, t, (int64_t)cols, rb};
        if (rc == 0) /* n <= WRITER_BLOCK_FLOATS rows */
            kernels_parallel_rows(quantize_rows, &j, (int)n, (long long)(n * cols) * 16);
        if (rc == 0 && h5io_write_qrows(d, r0, n, w->qbuf, herr, sizeof herr) < 0)
            rc = util_err(err, errlen, "%s: %s: %s", w->out_path, path, herr);
        if (rc == 0) {
            w->bytes += n * rb;
            show_progress(w);
        }
    }
    H5Dclose(d);
    if (rc == 0)
        w->n_tensors++;
    return rc;
}

int writer_stream_tensor(ModelWriter *w, const char *path, int rank, const uint64_t *dims,
                         WriterFillFn fill, void *ctx, char *err, size_t errlen)
{
    if (rank < 1 || rank > 3)
        return util_err(err, errlen, "%s: %s: rank %d not supported", w->out_path, path, rank);
    int layer, kind = w->quant != QUANTIZE_NONE && rank >= 2 ? matrix_kind(path, &layer) : -1;
    uint64_t elems = 1;
    for (int i = 0; i < rank; i++)
        elems *= dims[i];
    if (w->dry) {
        QType t = kind >= 0 ? writer_pick_type(w->quant, &w->config, (WeightKind)kind, layer,
                                               (int64_t)dims[rank - 1])
                            : QTYPE_F32;
        w->total += elems / dims[rank - 1] * quant_row_bytes(t, (int64_t)dims[rank - 1]);
        return 0;
    }
    if (kind >= 0) {
        QType t = writer_pick_type(w->quant, &w->config, (WeightKind)kind, layer,
                                   (int64_t)dims[rank - 1]);
        QType base = writer_pick_type(w->quant, &w->config, (WeightKind)kind, layer, 256 * 32);
        w->n_fallback += t != base;
        return stream_quantized(w, path, rank, dims, t, fill, ctx, err, errlen);
    }
    hid_t d = create_dataset(w->file, path, rank, dims);
    if (d < 0)
        return util_err(err, errlen, "%s: %s: cannot create the dataset", w->out_path, path);
    /* Split axis s: the first whose trailing block (inner[s] floats per index) fits a block;
     * iterate every index of the axes before it and cut axis s into runs of nb. */
    uint64_t inner[3], total = 1;
    inner[rank - 1] = 1;
    for (int i = rank - 2; i >= 0; i--)
        inner[i] = inner[i + 1] * dims[i + 1];
    for (int i = 0; i < rank; i++)
        total *= dims[i];
    int s = 0;
    while (s < rank - 1 && inner[s] > WRITER_BLOCK_FLOATS)
        s++;
    uint64_t nb = WRITER_BLOCK_FLOATS / inner[s], n_outer = 1;
    if (nb == 0)
        nb = 1;
    for (int i = 0; i < s; i++)
        n_outer *= dims[i];
    int rc = 0;
    for (uint64_t o = 0; o < n_outer && total > 0 && rc == 0; o++) {
        hsize_t start[3] = {0, 0, 0}, count[3];
        uint64_t rem = o;
        for (int i = s - 1; i >= 0; i--) {
            start[i] = rem % dims[i];
            rem /= dims[i];
        }
        for (int i = 0; i < rank; i++)
            count[i] = i < s ? 1 : dims[i];
        for (uint64_t b0 = 0; b0 < dims[s] && rc == 0; b0 += nb) {
            uint64_t cnt = dims[s] - b0 < nb ? dims[s] - b0 : nb, n = cnt * inner[s];
            start[s] = b0;
            count[s] = cnt;
            rc = fill(ctx, o * dims[s] * inner[s] + b0 * inner[s], n, w->buf, err, errlen);
            if (rc == 0 && write_box(d, start, count, n, w->buf) < 0)
                rc = util_err(err, errlen, "%s: %s: write failed (disk full?)", w->out_path,
                              path);
        }
    }
    H5Dclose(d);
    if (rc == 0) {
        w->bytes += total * sizeof(float);
        w->n_tensors++;
        show_progress(w);
    }
    return rc;
}

typedef struct {
    const float *data;
} MemSource;

static int fill_from_memory(void *ctx, uint64_t elem0, uint64_t n, float *out, char *err,
                            size_t errlen)
{
    (void)err;
    (void)errlen;
    memcpy(out, ((MemSource *)ctx)->data + elem0, (size_t)n * sizeof(float));
    return 0;
}

int writer_put_tensor(ModelWriter *w, const char *path, int rank, const uint64_t *dims,
                      const float *data, char *err, size_t errlen)
{
    MemSource m = {data};
    return writer_stream_tensor(w, path, rank, dims, fill_from_memory, &m, err, errlen);
}

int writer_put_tokenizer(ModelWriter *w, const Tokenizer *t, char *err, size_t errlen)
{
    char terr[512];
    if (tokenizer_h5_write(t, w->file, terr, sizeof terr) < 0)
        return util_err(err, errlen, "%s: tokenizer: %s", w->out_path, terr);
    return 0;
}

int writer_put_chat_template(ModelWriter *w, const char *tmpl, size_t len, char *err,
                             size_t errlen)
{
    if (!tmpl || !len)
        return 0;
    char *s = xmalloc(len + 1);
    memcpy(s, tmpl, len);
    s[len] = '\0';
    int rc = 0;
    hid_t g = H5Gopen2(w->file, "/tokenizer", H5P_DEFAULT);
    if (g < 0 || h5io_attr_write_string(g, "chat_template", s) < 0)
        rc = util_err(err, errlen, "%s: tokenizer: cannot write chat_template", w->out_path);
    if (g >= 0)
        H5Gclose(g);
    free(s);
    return rc;
}

int writer_finish_file(ModelWriter *w, const ModelConfig *c, ConvertStats *stats, char *err,
                       size_t errlen)
{
    if (stats) {
        stats->config = *c;
        stats->n_tensors = w->n_tensors;
        stats->tensor_bytes = w->bytes;
    }
    int rc = 0;
    if (H5Fclose(w->file) < 0)
        rc = util_err(err, errlen, "%s: close failed (disk full?)", w->tmp_path);
    w->file = -1;
    if (rc == 0 && rename(w->tmp_path, w->out_path) != 0)
        rc = util_err(err, errlen, "%s: rename to %s failed: %s", w->tmp_path, w->out_path,
                      strerror(errno));
    if (rc < 0) {
        writer_abort_file(w);
        return -1;
    }
    free(w->buf);
    free(w->qbuf);
    free(w->tmp_path);
    free(w->out_path);
    w->buf = NULL;
    w->qbuf = NULL;
    w->tmp_path = w->out_path = NULL;
    return 0;
}

void writer_abort_file(ModelWriter *w)
{
    if (w->file >= 0)
        H5Fclose(w->file);
    w->file = -1;
    if (w->tmp_path)
        unlink(w->tmp_path);
    free(w->buf);
    free(w->qbuf);
    w->qbuf = NULL;
    free(w->tmp_path);
    free(w->out_path);
    w->buf = NULL;
    w->tmp_path = w->out_path = NULL;
}

const char *writer_layer_path(char *buf, size_t cap, int layer, const char *name)
{
    snprintf(buf, cap, "/layers/%d/%s", layer, name);
    return buf;
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

int convert_load_tokenizer(Tokenizer **out, const char *path, int vocab_size, char *err,
                           size_t errlen)
{
    *out = NULL;
    char *a = NULL, *b = NULL;
    const char *named = path;
    int rc;
    if (access(path, R_OK) != 0)
        return util_err(err, errlen, "%s: tokenizer: %s", path, strerror(errno));
    if (is_dir(path)) {
        a = concat2(path, "/tokenizer.json");
        if (access(a, R_OK) == 0) {
            named = a;
            rc = tokenizer_load_hf_json(out, a, err, errlen);
        } else {
            free(a);
            a = concat2(path, "/vocab.json");
            b = concat2(path, "/merges.txt");
            named = a;
            if (access(a, R_OK) != 0 || access(b, R_OK) != 0)
                rc = util_err(err, errlen, "%s: tokenizer: no tokenizer.json, or vocab.json "
                              "and merges.txt, in this directory", path);
            else
                rc = tokenizer_load_gpt2_files(out, a, b, err, errlen);
        }
    } else if (ends_with(path, ".json")) {
        rc = tokenizer_load_hf_json(out, path, err, errlen);
    } else {
        rc = tokenizer_load_llama2c(out, path, vocab_size, err, errlen);
    }
    if (rc == 0 && tokenizer_vocab_size(*out) != vocab_size) {
        rc = util_err(err, errlen, "%s: vocab_size: the tokenizer has %d pieces, the model has "
                      "%d", named, tokenizer_vocab_size(*out), vocab_size);
        tokenizer_free(*out);
        *out = NULL;
    }
    free(a);
    free(b);
    return rc;
}
