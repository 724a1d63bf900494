/* llama2c.c: llama2.c legacy checkpoint (+ tokenizer.bin) to the HeadSplit model file.
 * Layout (../shared/models/README.md): 7 int32 header, then float32 blocks embedding,
 * rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3 (each for all layers), final norm, the legacy
 * RoPE tables (skipped), and the classifier only when the header's vocab_size is negative.
 * Weights keep their order (Meta interleaved RoPE), tensors are streamed with pread. */
#include "convert.h"

#include "convert_internal.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LLAMA2C_HEADER_BYTES 28
/* "ak42": the magic of llama2.c's newer (version >= 1) export formats. */
#define LLAMA2C_MAGIC 0x616b3432

typedef struct {
    int fd;
    const char *path;
    uint64_t off; /* byte offset of the tensor's first float */
} FileSource;

static int fill_from_file(void *ctx, uint64_t elem0, uint64_t n, float *out, char *err,
                          size_t errlen)
{
    const FileSource *s = ctx;
    uint8_t *p = (uint8_t *)out;
    size_t left = (size_t)n * sizeof(float);
    uint64_t off = s->off + elem0 * sizeof(float);
    while (left > 0) {
        ssize_t got = pread(s->fd, p, left, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return util_err(err, errlen, "%s: weights: read failed at byte %llu (file "
                            "truncated or changed while converting)", s->path,
                            (unsigned long long)off);
        p += got;
        left -= (size_t)got;
        off += (uint64_t)got;
    }
    return 0;
}

/* Reads and checks the header into c (tied_embeddings: the header's vocab_size is positive). */
static int read_header(int fd, const char *path, uint64_t size, ModelConfig *c, char *err,
                       size_t errlen)
{
    uint8_t b[LLAMA2C_HEADER_BYTES];
    if (size < LLAMA2C_HEADER_BYTES || pread(fd, b, sizeof b, 0) != (ssize_t)sizeof b)
        return util_err(err, errlen, "%s: header: file is %llu bytes, shorter than the 28-byte "
                        "llama2.c header", path, (unsigned long long)size);
    int32_t h[7];
    for (int i = 0; i < 7; i++)
        h[i] = (int32_t)((uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                         (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24);
    if ((uint32_t)h[0] == LLAMA2C_MAGIC)
        return util_err(err, errlen, "%s: header: llama2.c version-%d export (magic \"ak42\"); "
                        "only the legacy format (export.py --version 0) is supported", path,
                        h[1]);
    static const char *names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                                   "vocab_size", "seq_len"};
    for (int i = 0; i < 7; i++) {
        if (i == 5 ? (h[i] == 0 || h[i] == INT32_MIN) : h[i] <= 0)
            return util_err(err, errlen, "%s: header: %s = %d must be %s", path, names[i],
                            h[i], i == 5 ? "non-zero" : "positive");
    }
    if (h[0] % h[3] != 0)
        return util_err(err, errlen, "%s: header: dim = %d is not divisible by n_heads = %d",
                        path, h[0], h[3]);
    if (h[3] % h[4] != 0)
        return util_err(err, errlen, "%s: header: n_heads = %d is not divisible by n_kv_heads "
                        "= %d", path, h[3], h[4]);
    memset(c, 0, sizeof *c);
    c->arch = ARCH_LLAMA;
    c->dim = h[0];
    c->ffn_dim = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->vocab_size = h[5] < 0 ? -h[5] : h[5];
    c->tied_embeddings = h[5] > 0;
    c->context_length = h[6];
    c->head_dim = h[0] / h[3];
    c->norm_eps = 1e-5f;     /* run.c's value */
    c->rope_theta = 10000.0f;
    c->rope_style = ROPE_INTERLEAVED;
    c->bos_id = 1;           /* run.c: BOS 1, EOS 2 */
    c->eos_id = 2;
    char verr[256];
    if (config_validate(c, verr, sizeof verr) < 0)
        return util_err(err, errlen, "%s: header: %s", path, verr);
    return 0;
}

/* Block offsets (in floats after the header) of the legacy layout. */
typedef struct {
    uint64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, final, cls, total;
} Layout;

static void layout_compute(const ModelConfig *c, Layout *lo)
{
    uint64_t dim = (uint64_t)c->dim, L = (uint64_t)c->n_layers, hid = (uint64_t)c->ffn_dim;
    uint64_t vocab = (uint64_t)c->vocab_size, hs = (uint64_t)c->head_dim;
    uint64_t kv_dim = hs * (uint64_t)c->n_kv_heads, q_dim = hs * (uint64_t)c->n_heads;
    /* config_validate bounded every product below 2^60, so these sums cannot overflow */
    lo->emb = 0;
    lo->rms_att = lo->emb + vocab * dim;
    lo->wq = lo->rms_att + L * dim;
    lo->wk = lo->wq + L * q_dim * dim;
    lo->wv = lo->wk + L * kv_dim * dim;
    lo->wo = lo->wv + L * kv_dim * dim;
    lo->rms_ffn = lo->wo + L * dim * q_dim;
    lo->w1 = lo->rms_ffn + L * dim;
    lo->w2 = lo->w1 + L * hid * dim;
    lo->w3 = lo->w2 + L * dim * hid;
    lo->final = lo->w3 + L * hid * dim;
    /* then two RoPE tables of seq_len * head_size/2 floats each */
    lo->cls = lo->final + dim + (uint64_t)c->context_length * hs;
    lo->total = lo->cls + (c->tied_embeddings ? 0 : vocab * dim);
}

static int stream(ModelWriter *w, FileSource *src, uint64_t float_off, const char *path,
                  int rank, const uint64_t *dims, char *err, size_t errlen)
{
    src->off = LLAMA2C_HEADER_BYTES + float_off * sizeof(float);
    return writer_stream_tensor(w, path, rank, dims, fill_from_file, src, err, errlen);
}

int convert_from_llama2c(const char *checkpoint, const char *tokenizer, const char *out,
                         const char *quantize, ConvertStats *stats, char *err, size_t errlen)
{
    ModelConfig c;
    ModelWriter w;
    Tokenizer *tok = NULL;
    memset(&w, 0, sizeof w);
    w.file = -1;
    int fd = open(checkpoint, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return util_err(err, errlen, "%s: checkpoint: %s", checkpoint, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        util_err(err, errlen, "%s: checkpoint: not a regular file", checkpoint);
        goto fail;
    }
    if (read_header(fd, checkpoint, (uint64_t)sb.st_size, &c, err, errlen) < 0)
        goto fail;
    Layout lo;
    layout_compute(&c, &lo);
    uint64_t want = LLAMA2C_HEADER_BYTES + lo.total * sizeof(float);
    if ((uint64_t)sb.st_size != want) {
        util_err(err, errlen, "%s: size: the header (dim %d, hidden_dim %d, n_layers %d, "
                 "n_heads %d, n_kv_heads %d, vocab_size %d%s, seq_len %d) implies %llu bytes, "
                 "the file has %llu (truncated, or not a llama2.c legacy checkpoint)",
                 checkpoint, c.dim, c.ffn_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                 c.vocab_size, c.tied_embeddings ? "" : " separate classifier",
                 c.context_length, (unsigned long long)want, (unsigned long long)sb.st_size);
        goto fail;
    }
    if (!tokenizer) {
        util_err(err, errlen, "%s: --tokenizer: a llama2.c tokenizer.bin is required",
                 checkpoint);
        goto fail;
    }
    if (convert_load_tokenizer(&tok, tokenizer, c.vocab_size, err, errlen) < 0)
        goto fail;
    size_t slen = strlen(checkpoint) + strlen(tokenizer) + 96;
    char *source = xmalloc(slen);
    snprintf(source, slen, "headsplit-convert --format llama2c --checkpoint %s --tokenizer %s",
             checkpoint, tokenizer);
    int rc = writer_open_file(&w, out, &c, source, quantize, err, errlen);
    free(source);
    if (rc < 0)
        goto fail;

    FileSource src = {fd, checkpoint, 0};
    uint64_t dim = (uint64_t)c.dim, hd = (uint64_t)c.head_dim, G = (uint64_t)c.n_kv_heads;
    uint64_t Q = (uint64_t)config_q_per_kv(&c), ffn = (uint64_t)c.ffn_dim;
    uint64_t qd = hd * (uint64_t)c.n_heads;
    uint64_t d_vec[1] = {dim}, d_wq[3] = {G, Q * hd, dim}, d_wkv[3] = {G, hd, dim};
    uint64_t d_wo[2] = {dim, qd}, d_up[2] = {ffn, dim}, d_down[2] = {dim, ffn};
    uint64_t d_emb[2] = {(uint64_t)c.vocab_size, dim};
    char p[64];
    for (uint64_t l = 0; l < (uint64_t)c.n_layers; l++) {
        int li = (int)l;
        if (stream(&w, &src, lo.rms_att + l * dim, writer_layer_path(p, sizeof p, li,
                   "attn_norm"), 1, d_vec, err, errlen) < 0 ||
            stream(&w, &src, lo.wq + l * qd * dim, writer_layer_path(p, sizeof p, li, "wq"), 3,
                   d_wq, err, errlen) < 0 ||
            stream(&w, &src, lo.wk + l * G * hd * dim, writer_layer_path(p, sizeof p, li, "wk"),
                   3, d_wkv, err, errlen) < 0 ||
            stream(&w, &src, lo.wv + l * G * hd * dim, writer_layer_path(p, sizeof p, li, "wv"),
                   3, d_wkv, err, errlen) < 0 ||
            stream(&w, &src, lo.wo + l * dim * qd, writer_layer_path(p, sizeof p, li, "wo"), 2,
                   d_wo, err, errlen) < 0 ||
            stream(&w, &src, lo.rms_ffn + l * dim, writer_layer_path(p, sizeof p, li,
                   "ffn_norm"), 1, d_vec, err, errlen) < 0 ||
            stream(&w, &src, lo.w1 + l * ffn * dim, writer_layer_path(p, sizeof p, li,
                   "w_gate"), 2, d_up, err, errlen) < 0 ||
            stream(&w, &src, lo.w3 + l * ffn * dim, writer_layer_path(p, sizeof p, li, "w_up"),
                   2, d_up, err, errlen) < 0 ||
            stream(&w, &src, lo.w2 + l * dim * ffn, writer_layer_path(p, sizeof p, li,
                   "w_down"), 2, d_down, err, errlen) < 0)
            goto fail;
    }
    if (stream(&w, &src, lo.emb, "/embed", 2, d_emb, err, errlen) < 0 ||
        stream(&w, &src, lo.final, "/final_norm", 1, d_vec, err, errlen) < 0 ||
        (!c.tied_embeddings &&
         stream(&w, &src, lo.cls, "/lm_head", 2, d_emb, err, errlen) < 0) ||
        writer_put_tokenizer(&w, tok, err, errlen) < 0)
        goto fail;
    if (writer_finish_file(&w, &c, stats, err, errlen) < 0)
        goto fail;
    tokenizer_free(tok);
    close(fd);
    return 0;
fail:
    writer_abort_file(&w);
    if (tok)
        tokenizer_free(tok);
    close(fd);
    return -1;
}
