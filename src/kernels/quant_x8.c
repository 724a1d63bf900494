/* quant_x8.c: Q4_0 and Q8_0 matrices in eight-row groups (quant.h, "x8"): packing in place,
 * the plain-C twin, and the dispatch of quant_matvec_x8 / quant_matmul_x8 to the x86 kernels
 * (quant_x86_x8.c) with the rows' own kernels as the fallback on every other path.
 *
 * A group's block b is the eight rows' fp16 scales (16 bytes), then the eight rows' quant
 * bytes, row 0 first: 16 per row for Q4_0 (144 bytes a block), 32 for Q8_0 (272 bytes).  It
 * holds the bytes of the eight blocks it replaces, so packing changes no size and no
 * arithmetic; Q8_0's quants are stored offset to unsigned, q + 128 (the top bit flipped),
 * the operand vpdpbusd takes, so that the kernels need no flip per block (unpacking flips
 * them back). */
#include "quant_impl.h"

#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "util.h"

/* Bytes of one block of a group: eight blocks of the type. */
static size_t x8_unit(QType t) { return 8 * quant_block_bytes(t); }

/* Q4_0 on both x86 paths; Q8_0 where the AVX-512 VNNI kernels are built (on AVX2 its
 * unsigned quants would not fit vpmaddubsw's pairs: quant_x86_x8.c). */
int quant_x8_preferred(QType t, int64_t n, int d)
{
    if ((t != QTYPE_Q4_0 && t != QTYPE_Q8_0) || d <= 0 || d % 8 != 0 || n <= 0 || n % QK != 0)
        return 0;
#if defined(QUANT_HAVE_AVX2)
    if (t == QTYPE_Q8_0)
        return quant_x86_x8_q8_0_built() && quant_best_path() == QUANT_PATH_VNNI;
    return quant_best_path() == QUANT_PATH_VNNI || quant_best_path() == QUANT_PATH_AVX2;
#else
    return 0;
#endif
}

static void x8_check(QType t, int64_t n, int d)
{
    CHECK(t == QTYPE_Q4_0 || t == QTYPE_Q8_0,
          "quant: the eight-row layout holds q4_0 and q8_0 only, not %s", quant_type_name(t));
    CHECK(d >= 0 && d % 8 == 0, "quant: %d rows are not whole groups of eight", d);
    (void)quant_row_bytes(t, n); /* n whole blocks */
}

/* q bytes from s to d, Q8_0's top bits flipped (the offset q + 128 and back). */
static void copy_quants(QType t, uint8_t *d, const uint8_t *s, size_t q)
{
    for (size_t i = 0; i < q; i++)
        d[i] = t == QTYPE_Q8_0 ? (uint8_t)(s[i] ^ 0x80) : s[i];
}

/* One group: rows (8 rows of nb blocks, back to back) to its x8 form in g, or back. */
static void group_pack(QType t, uint8_t *g, const uint8_t *rows, int64_t nb)
{
    const size_t bb = quant_block_bytes(t), q = bb - 2, rb = bb * (size_t)nb;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *u = g + x8_unit(t) * (size_t)b;
        for (int r = 0; r < 8; r++) {
            const uint8_t *blk = rows + rb * (size_t)r + bb * (size_t)b;
            memcpy(u + 2 * r, blk, 2);
            copy_quants(t, u + 16 + q * (size_t)r, blk + 2, q);
        }
    }
}

static void group_unpack(QType t, uint8_t *rows, const uint8_t *g, int64_t nb)
{
    const size_t bb = quant_block_bytes(t), q = bb - 2, rb = bb * (size_t)nb;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *u = g + x8_unit(t) * (size_t)b;
        for (int r = 0; r < 8; r++) {
            uint8_t *blk = rows + rb * (size_t)r + bb * (size_t)b;
            memcpy(blk, u + 2 * r, 2);
            copy_quants(t, blk + 2, u + 16 + q * (size_t)r, q);
        }
    }
}

/* Packs or unpacks every group in place through one group-sized buffer. */
static void x8_convert(void *w, QType t, int64_t n, int d, int pack)
{
    x8_check(t, n, d);
    const int64_t nb = n / QK;
    const size_t gb = x8_unit(t) * (size_t)nb;
    uint8_t *tmp = xmalloc(gb ? gb : 1);
    for (int g = 0; g < d / 8; g++) {
        uint8_t *p = (uint8_t *)w + gb * (size_t)g;
        memcpy(tmp, p, gb);
        if (pack)
            group_pack(t, p, tmp, nb);
        else
            group_unpack(t, p, tmp, nb);
    }
    free(tmp);
}

void quant_x8_pack(void *w, QType t, int64_t n, int d) { x8_convert(w, t, n, d, 1); }
void quant_x8_unpack(void *w, QType t, int64_t n, int d) { x8_convert(w, t, n, d, 0); }

/* Groups [g0, g1) through the rows' kernels (quant_matvec_ref or the path's matvec): each
 * group unpacked into tmp first. */
static void x8_rows_fallback(int ref, QType t, float *y, const uint8_t *w, const void *x_act,
                             size_t act_stride, int64_t n, int g0, int g1, int nact,
                             size_t ldy)
{
    const int64_t nb = n / QK;
    const size_t gb = x8_unit(t) * (size_t)nb, rb = quant_block_bytes(t) * (size_t)nb;
    uint8_t *tmp = xmalloc(gb ? gb : 1);
    for (int g = g0; g < g1; g++) {
        group_unpack(t, tmp, w + gb * (size_t)g, nb);
        for (int k = 0; k < nact; k++) {
            const void *xa = (const char *)x_act + act_stride * (size_t)k;
            float *yk = y + ldy * (size_t)k + 8 * (size_t)g;
            if (ref)
                quant_matvec_ref(yk, tmp, t, rb, xa, n, 8);
            else
                for (int r = 0; r < 8; r++)
                    yk[r] = quant_dot_row_path(quant_best_path(), t, tmp + rb * (size_t)r, xa,
                                               n);
        }
    }
    free(tmp);
}

void quant_matvec_x8_ref(float *y, const void *w, QType t, const void *x_act, int64_t n, int d)
{
    x8_check(t, n, d);
    x8_rows_fallback(1, t, y, w, x_act, 0, n, 0, d / 8, 1, 0);
}

/* One thread's groups [lo, hi). */
typedef struct {
    QType t;
    float *y;
    const uint8_t *w;
    const void *x_act;
    size_t act_stride, ldy;
    int64_t n;
    int nact;
} X8Job;

static void x8_groups(void *arg, int lo, int hi)
{
    const X8Job *j = arg;
#if defined(QUANT_HAVE_AVX2)
    const size_t gb = x8_unit(j->t) * (size_t)(j->n / QK);
    float *y = j->y + 8 * (size_t)lo;
    const uint8_t *w = j->w + gb * (size_t)lo;
    const int d = 8 * (hi - lo);
    const int vnni = quant_best_path() == QUANT_PATH_VNNI;
    if (j->nact == 1 ? quant_x86_x8_matvec(vnni, j->t, y, w, j->x_act, j->n, d)
                     : quant_x86_x8_matmul(vnni, j->t, y, j->ldy, w, j->x_act, j->act_stride,
                                           j->n, d, j->nact))
        return;
#endif
    x8_rows_fallback(0, j->t, j->y, j->w, j->x_act, j->act_stride, j->n, lo, hi, j->nact,
                     j->ldy);
}

void quant_matmul_x8(float *y, const void *w, QType t, const void *x_act, size_t act_stride,
                     int64_t n, int d, int nb, size_t ldy)
{
    x8_check(t, n, d);
    CHECK(nb <= 1 || act_stride >= quant_row_bytes(QTYPE_Q8_0, n),
          "quant: activation stride %zu below a q8_0 row of %lld", act_stride, (long long)n);
    if (d <= 0 || nb <= 0)
        return;
    X8Job j = {t, y, w, x_act, act_stride, ldy, n, nb};
    kernels_parallel_rows(x8_groups, &j, d / 8, (long long)n * d * nb);
}

void quant_matvec_x8(float *y, const void *w, QType t, const void *x_act, int64_t n, int d)
{
    quant_matmul_x8(y, w, t, x_act, 0, n, d, 1, 0);
}
