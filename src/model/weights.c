/* weights.c: loading exactly one rank's slices of a model file with HDF5 hyperslabs. */
#include "h5io.h"
#include "model.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Reads a whole 1-D tensor of n floats. */
static float *read_vec(hid_t f, const char *fname, const char *path, int n, char *err,
                       size_t errlen)
{
    uint64_t dims[1] = {(uint64_t)n}, start[1] = {0};
    /* Shape first: a file whose config promises more than it holds is refused before any
     * allocation of the promised size. */
    if (h5io_check_shape(f, path, 1, dims, fname, err, errlen) < 0)
        return NULL;
    float *p = xmalloc_big((size_t)n * sizeof(float));
    if (h5io_read_slab(f, path, 1, dims, start, dims, p, fname, err, errlen) < 0) {
        free(p);
        return NULL;
    }
    return p;
}

/* Reads a hyperslab and returns a new buffer of prod(count) floats. */
static float *read_slab(hid_t f, const char *fname, const char *path, int rank,
                        const uint64_t *dims, const uint64_t *start, const uint64_t *count,
                        char *err, size_t errlen)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        if (size_mul(&n, n, (size_t)count[i]) < 0) {
            util_err(err, errlen, "%s: %s: slab size overflows", fname, path);
            return NULL;
        }
    if (size_mul(&n, n, sizeof(float)) < 0) {
        util_err(err, errlen, "%s: %s: slab size overflows", fname, path);
        return NULL;
    }
    if (h5io_check_shape(f, path, rank, dims, fname, err, errlen) < 0)
        return NULL;
    float *p = xmalloc_big(n);
    if (h5io_read_slab(f, path, rank, dims, start, count, p, fname, err, errlen) < 0) {
        free(p);
        return NULL;
    }
    return p;
}

/* Reads the logical box start/count of a matrix in its stored type into m: rows are the
 * product of the leading counts, cols the last.  Shape and block alignment are checked
 * before anything of the promised size is allocated. */
static int read_qmat(hid_t f, const char *fname, const char *path, int rank,
                     const uint64_t *dims, const uint64_t *start, const uint64_t *count,
                     QMat *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    H5Tensor ti;
    if (h5io_check_qshape(f, path, rank, dims, &ti, fname, err, errlen) < 0)
        return -1;
    const uint64_t bs = (uint64_t)quant_block_size(ti.type);
    const uint64_t c0 = start[rank - 1], nc = count[rank - 1];
    if (c0 % bs != 0 || nc % bs != 0)
        return util_err(err, errlen, "%s: dataset %s: columns [%llu, %llu) do not start and "
                        "end on %s block boundaries (multiples of %llu): this cut cannot be "
                        "loaded from a quantized file", fname, path, (unsigned long long)c0,
                        (unsigned long long)(c0 + nc), quant_type_name(ti.type),
                        (unsigned long long)bs);
    size_t rows = 1, bytes;
    for (int i = 0; i + 1 < rank; i++)
        if (size_mul(&rows, rows, (size_t)count[i]) < 0)
            return util_err(err, errlen, "%s: %s: slab size overflows", fname, path);
    const size_t rb = quant_row_bytes(ti.type, (int64_t)nc);
    if (rows > 0x7fffffff || size_mul(&bytes, rows, rb) < 0)
        return util_err(err, errlen, "%s: %s: slab size overflows", fname, path);
    void *p = xmalloc_big(bytes ? bytes : 1);
    if (bytes > 0 && /* an empty FFN slice reads nothing */
        h5io_read_qslab(f, path, rank, dims, start, count, p, NULL, fname, err, errlen) < 0) {
        free(p);
        return -1;
    }
    *m = (QMat){.type = ti.type, .rows = (int)rows, .cols = (int)nc, .row_stride = rb,
                .data = p};
    return 0;
}

/* A loaded matrix that only the matrix products read, in place into the layout this build
 * multiplies fastest (quant_x8_preferred); a no-op otherwise. */
static void qmat_fast_layout(QMat *m)
{
    if (m->x8 || !m->data || m->row_stride != quant_row_bytes(m->type, m->cols) ||
        !quant_x8_preferred(m->type, m->cols, m->rows))
        return;
    quant_x8_pack(m->data, m->type, m->cols, m->rows);
    m->x8 = 1;
}

/* read_qmat for a matrix only the matrix products read: kept in the fastest layout. */
static int read_wmat(hid_t f, const char *fname, const char *path, int rank,
                     const uint64_t *dims, const uint64_t *start, const uint64_t *count,
                     QMat *m, char *err, size_t errlen)
{
    if (read_qmat(f, fname, path, rank, dims, start, count, m, err, errlen) < 0)
        return -1;
    qmat_fast_layout(m);
    return 0;
}

size_t model_qmat_bytes(const QMat *m) { return (size_t)m->rows * m->row_stride; }

void model_qmat_free(QMat *m)
{
    if (!m)
        return;
    free(m->data);
    memset(m, 0, sizeof *m);
}

#define LPATH(buf, layer, name) snprintf(buf, sizeof buf, "/layers/%d/%s", layer, name)

int model_load_attn_part(AttnPartW *w, const ModelConfig *c, hid_t f, const char *fname,
                         int layer, int unit, int q0, int q1, int kv_cap, char *err,
                         size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->layer = layer;
    w->unit = unit;
    w->q0 = q0;
    w->q1 = q1;
    const uint64_t G = (uint64_t)c->n_kv_heads, Q = (uint64_t)config_q_per_kv(c);
    const uint64_t hd = (uint64_t)c->head_dim, dim = (uint64_t)c->dim;
    char p[96];
    const int gpt2 = c->arch == ARCH_GPT2;

    LPATH(p, layer, "attn_norm");
    if (!(w->norm_w = read_vec(f, fname, p, c->dim, err, errlen)))
        goto fail;
    if (gpt2) {
        LPATH(p, layer, "attn_norm_bias");
        if (!(w->norm_b = read_vec(f, fname, p, c->dim, err, errlen)))
            goto fail;
    }
    {
        uint64_t dims[3] = {G, Q * hd, dim};
        uint64_t start[3] = {(uint64_t)unit, (uint64_t)q0 * hd, 0};
        uint64_t count[3] = {1, (uint64_t)(q1 - q0) * hd, dim};
        LPATH(p, layer, "wq");
        if (read_wmat(f, fname, p, 3, dims, start, count, &w->wq, err, errlen) < 0)
            goto fail;
    }
    {
        uint64_t dims[3] = {G, hd, dim}, start[3] = {(uint64_t)unit, 0, 0};
        uint64_t count[3] = {1, hd, dim};
        LPATH(p, layer, "wk");
        if (read_wmat(f, fname, p, 3, dims, start, count, &w->wk, err, errlen) < 0)
            goto fail;
        LPATH(p, layer, "wv");
        if (read_wmat(f, fname, p, 3, dims, start, count, &w->wv, err, errlen) < 0)
            goto fail;
    }
    if (gpt2 || c->qkv_bias) { /* the rank's rows of the group's biases */
        uint64_t dq[2] = {G, Q * hd}, sq[2] = {(uint64_t)unit, (uint64_t)q0 * hd};
        uint64_t cq[2] = {1, (uint64_t)(q1 - q0) * hd};
        LPATH(p, layer, "bq");
        if (!(w->bq = read_slab(f, fname, p, 2, dq, sq, cq, err, errlen)))
            goto fail;
        uint64_t dk[2] = {G, hd}, sk[2] = {(uint64_t)unit, 0}, ck[2] = {1, hd};
        LPATH(p, layer, "bk");
        if (!(w->bk = read_slab(f, fname, p, 2, dk, sk, ck, err, errlen)))
            goto fail;
        LPATH(p, layer, "bv");
        if (!(w->bv = read_slab(f, fname, p, 2, dk, sk, ck, err, errlen)))
            goto fail;
    }
    if (c->kv_type == QTYPE_Q8_0 && hd % 32) {
        util_err(err, errlen, "--cache-type q8_0: the head size %d of %s is not a multiple of "
                 "32 (Q8_0 blocks); give --cache-type f16 or f32", (int)hd, fname);
        goto fail;
    }
    model_attn_part_caches_new(c, w, kv_cap);
    return 0;
fail:
    model_free_attn_part(w);
    return -1;
}

void model_attn_part_caches_new(const ModelConfig *c, AttnPartW *w, int kv_cap)
{
    const size_t hd = (size_t)c->head_dim, cap = (size_t)kv_cap;
    w->kv_cap = kv_cap;
    w->k_cache = w->v_cache = NULL;
    w->k_store = w->v_store = NULL;
    if (c->kv_type == QTYPE_F32) {
        w->k_cache = xcalloc_lazy(cap * hd, sizeof(float));
        w->v_cache = xcalloc_lazy(cap * hd, sizeof(float));
    } else {
        const size_t row = config_kv_bytes(c, 1) / 2;
        w->k_store = xcalloc_lazy(cap, row);
        w->v_store = xcalloc_lazy(cap, row);
    }
}

void model_attn_part_caches_free(AttnPartW *w)
{
    free(w->k_cache);
    free(w->v_cache);
    free(w->k_store);
    free(w->v_store);
    w->k_cache = w->v_cache = NULL;
    w->k_store = w->v_store = NULL;
}

void *model_attn_part_cache(AttnPartW *w, int which)
{
    if (w->k_cache)
        return which ? (void *)w->v_cache : (void *)w->k_cache;
    return which ? w->v_store : w->k_store;
}

int model_load_proj(ProjW *w, const ModelConfig *c, hid_t f, const char *fname, int layer,
                    char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->layer = layer;
    char p[96];
    uint64_t dims[2] = {(uint64_t)c->dim, (uint64_t)c->n_heads * (uint64_t)c->head_dim};
    uint64_t start[2] = {0, 0};
    LPATH(p, layer, "wo");
    if (read_wmat(f, fname, p, 2, dims, start, dims, &w->wo, err, errlen) < 0)
        goto fail;
    if (c->arch == ARCH_GPT2) {
        LPATH(p, layer, "bo");
        if (!(w->bo = read_vec(f, fname, p, c->dim, err, errlen)))
            goto fail;
    }
    return 0;
fail:
    model_free_proj(w);
    return -1;
}

int model_load_proj_cols(QMat *wo, const ModelConfig *c, hid_t f, const char *fname,
                         int layer, int col0, int ncols, char *err, size_t errlen)
{
    char p[96];
    uint64_t dims[2] = {(uint64_t)c->dim, (uint64_t)c->n_heads * (uint64_t)c->head_dim};
    uint64_t start[2] = {0, (uint64_t)col0}, count[2] = {(uint64_t)c->dim, (uint64_t)ncols};
    LPATH(p, layer, "wo");
    return read_wmat(f, fname, p, 2, dims, start, count, wo, err, errlen);
}

int model_load_proj_rows(QMat *wo, const ModelConfig *c, hid_t f, const char *fname,
                         int layer, int d0, int d1, char *err, size_t errlen)
{
    char p[96];
    const uint64_t qd = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t dims[2] = {(uint64_t)c->dim, qd};
    uint64_t start[2] = {(uint64_t)d0, 0}, count[2] = {(uint64_t)(d1 - d0), qd};
    if (d0 < 0 || d1 < d0 || d1 > c->dim)
        return util_err(err, errlen, "%s: layer %d: wo rows [%d, %d) outside 0..%d", fname,
                        layer, d0, d1, c->dim);
    LPATH(p, layer, "wo");
    return read_wmat(f, fname, p, 2, dims, start, count, wo, err, errlen);
}

int model_load_proj_bias(float **bo, const ModelConfig *c, hid_t f, const char *fname,
                         int layer, char *err, size_t errlen)
{
    char p[96];
    LPATH(p, layer, "bo");
    *bo = read_vec(f, fname, p, c->dim, err, errlen);
    return *bo ? 0 : -1;
}

/* The FFN's rows [f0, f1) of w_gate/w_up; w_down by columns [f0, f1), or (down_rows) by
 * rows [d0, d1) whole. */
static int load_ffn(FfnW *w, const ModelConfig *c, hid_t f, const char *fname, int layer,
                    int f0, int f1, int down_rows, int d0, int d1, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->layer = layer;
    w->f0 = f0;
    w->f1 = f1;
    w->down_rows = down_rows;
    w->d0 = down_rows ? d0 : 0;
    w->d1 = down_rows ? d1 : 0;
    const int gpt2 = c->arch == ARCH_GPT2;
    const uint64_t F = (uint64_t)c->ffn_dim, dim = (uint64_t)c->dim, n = (uint64_t)(f1 - f0);
    char p[96];
    LPATH(p, layer, "ffn_norm");
    if (!(w->norm_w = read_vec(f, fname, p, c->dim, err, errlen)))
        goto fail;
    uint64_t dr[2] = {F, dim}, sr[2] = {(uint64_t)f0, 0}, cr[2] = {n, dim};
    if (gpt2) {
        LPATH(p, layer, "ffn_norm_bias");
        if (!(w->norm_b = read_vec(f, fname, p, c->dim, err, errlen)))
            goto fail;
        uint64_t db[1] = {F}, sb[1] = {(uint64_t)f0}, cb[1] = {n};
        LPATH(p, layer, "b_up");
        if (!(w->b_up = read_slab(f, fname, p, 1, db, sb, cb, err, errlen)))
            goto fail;
        LPATH(p, layer, "b_down");
        if (!(w->b_down = read_vec(f, fname, p, c->dim, err, errlen)))
            goto fail;
    } else {
        LPATH(p, layer, "w_gate");
        if (read_wmat(f, fname, p, 2, dr, sr, cr, &w->w_gate, err, errlen) < 0)
            goto fail;
    }
    LPATH(p, layer, "w_up");
    if (read_wmat(f, fname, p, 2, dr, sr, cr, &w->w_up, err, errlen) < 0)
        goto fail;
    uint64_t dd[2] = {dim, F}, sd[2] = {0, (uint64_t)f0}, cd[2] = {dim, n};
    if (down_rows) {
        sd[0] = (uint64_t)d0;
        sd[1] = 0;
        cd[0] = (uint64_t)(d1 - d0);
        cd[1] = F;
    }
    LPATH(p, layer, "w_down");
    if (read_wmat(f, fname, p, 2, dd, sd, cd, &w->w_down, err, errlen) < 0)
        goto fail;
    return 0;
fail:
    model_free_ffn(w);
    return -1;
}

int model_load_ffn(FfnW *w, const ModelConfig *c, hid_t f, const char *fname, int layer,
                   int f0, int f1, char *err, size_t errlen)
{
    return load_ffn(w, c, f, fname, layer, f0, f1, 0, 0, 0, err, errlen);
}

int model_load_ffn_rows(FfnW *w, const ModelConfig *c, hid_t f, const char *fname, int layer,
                        int f0, int f1, int d0, int d1, char *err, size_t errlen)
{
    if (d0 < 0 || d1 < d0 || d1 > c->dim) {
        memset(w, 0, sizeof *w);
        return util_err(err, errlen, "%s: layer %d: w_down rows [%d, %d) outside 0..%d", fname,
                        layer, d0, d1, c->dim);
    }
    return load_ffn(w, c, f, fname, layer, f0, f1, 1, d0, d1, err, errlen);
}

int model_load_head(HeadW *w, const ModelConfig *c, hid_t f, const char *fname, char *err,
                    size_t errlen)
{
    memset(w, 0, sizeof *w);
    uint64_t de[2] = {(uint64_t)c->vocab_size, (uint64_t)c->dim}, s0[2] = {0, 0};
    if (read_qmat(f, fname, "/embed", 2, de, s0, de, &w->embed, err, errlen) < 0)
        goto fail;
    if (!(w->final_norm = read_vec(f, fname, "/final_norm", c->dim, err, errlen)))
        goto fail;
    if (c->arch == ARCH_GPT2) {
        uint64_t dp[2] = {(uint64_t)c->context_length, (uint64_t)c->dim};
        if (!(w->pos_embed = read_slab(f, fname, "/pos_embed", 2, dp, s0, dp, err, errlen)))
            goto fail;
        if (!(w->final_norm_b = read_vec(f, fname, "/final_norm_bias", c->dim, err, errlen)))
            goto fail;
    }
    if (c->tied_embeddings) {
        w->lm_head = w->embed;
    } else if (read_wmat(f, fname, "/lm_head", 2, de, s0, de, &w->lm_head, err, errlen) < 0) {
        goto fail;
    }
    return 0;
fail:
    model_free_head(w);
    return -1;
}

int model_load_head_rows(HeadW *w, const ModelConfig *c, hid_t f, const char *fname, int v0,
                         int v1, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    CHECK(v0 >= 0 && v0 < v1 && v1 <= c->vocab_size, "LM head rows [%d, %d) outside the "
          "vocabulary of %d", v0, v1, c->vocab_size);
    uint64_t de[2] = {(uint64_t)c->vocab_size, (uint64_t)c->dim};
    uint64_t s0[2] = {(uint64_t)v0, 0}, n[2] = {(uint64_t)(v1 - v0), (uint64_t)c->dim};
    if (!(w->final_norm = read_vec(f, fname, "/final_norm", c->dim, err, errlen)))
        goto fail;
    if (c->arch == ARCH_GPT2 &&
        !(w->final_norm_b = read_vec(f, fname, "/final_norm_bias", c->dim, err, errlen)))
        goto fail;
    if (read_wmat(f, fname, c->tied_embeddings ? "/embed" : "/lm_head", 2, de, s0, n,
                  &w->lm_head, err, errlen) < 0)
        goto fail;
    return 0;
fail:
    model_free_head(w);
    return -1;
}

void model_free_attn_part(AttnPartW *w)
{
    if (!w)
        return;
    free(w->norm_w);
    free(w->norm_b);
    model_qmat_free(&w->wq);
    model_qmat_free(&w->wk);
    model_qmat_free(&w->wv);
    free(w->bq);
    free(w->bk);
    free(w->bv);
    free(w->k_cache);
    free(w->v_cache);
    free(w->k_store);
    free(w->v_store);
    memset(w, 0, sizeof *w);
}

void model_free_proj(ProjW *w)
{
    if (!w)
        return;
    model_qmat_free(&w->wo);
    free(w->bo);
    memset(w, 0, sizeof *w);
}

void model_free_ffn(FfnW *w)
{
    if (!w)
        return;
    free(w->norm_w);
    free(w->norm_b);
    model_qmat_free(&w->w_gate);
    model_qmat_free(&w->w_up);
    free(w->b_up);
    model_qmat_free(&w->w_down);
    free(w->b_down);
    memset(w, 0, sizeof *w);
}

void model_free_head(HeadW *w)
{
    if (!w)
        return;
    if (w->lm_head.data != w->embed.data)
        model_qmat_free(&w->lm_head);
    model_qmat_free(&w->embed);
    free(w->pos_embed);
    free(w->final_norm);
    free(w->final_norm_b);
    memset(w, 0, sizeof *w);
}

/* Bytes of the float32 vectors (norms, biases) of n values each that p points to. */
static size_t vec_bytes(const float *p, int n) { return p ? (size_t)n * sizeof(float) : 0; }

size_t model_attn_part_bytes(const ModelConfig *c, const AttnPartW *w)
{
    const int nq = (w->q1 - w->q0) * c->head_dim, hd = c->head_dim;
    return model_qmat_bytes(&w->wq) + model_qmat_bytes(&w->wk) + model_qmat_bytes(&w->wv) +
           vec_bytes(w->norm_w, c->dim) + vec_bytes(w->norm_b, c->dim) +
           vec_bytes(w->bq, nq) + vec_bytes(w->bk, hd) + vec_bytes(w->bv, hd);
}

size_t model_ffn_bytes(const ModelConfig *c, const FfnW *w)
{
    return model_qmat_bytes(&w->w_gate) + model_qmat_bytes(&w->w_up) +
           model_qmat_bytes(&w->w_down) + vec_bytes(w->norm_w, c->dim) +
           vec_bytes(w->norm_b, c->dim) + vec_bytes(w->b_up, w->f1 - w->f0) +
           vec_bytes(w->b_down, c->dim);
}

size_t model_proj_bytes(const ModelConfig *c, const ProjW *w)
{
    return model_qmat_bytes(&w->wo) + vec_bytes(w->bo, c->dim);
}
