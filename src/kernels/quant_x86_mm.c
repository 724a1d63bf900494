/* quant_x86_mm.c: Q8_0 matrices against several activations (a prompt pass) in register
 * tiles: each weight block is loaded and unpacked once per tile of activations, each
 * activation block once per tile of rows, and every (row, activation) keeps its own
 * accumulator in the matvec's order (dot_q8_0_family, the twin's): per block
 * acc = fma(dw * da, lanes, acc) over the 8 exact integer lane sums, then hsum_float_8.  So
 * every output is the matvec's bit for bit.
 *
 * The activations are first laid out once per call in the tile's form (a buffer per
 * thread): with AVX-512 VNNI two activations share a 512-bit register (activation 2p in the
 * low half, 2p + 1 in the high half), with their -128 sum corrections and their scales
 * spread over the halves; a weight block is broadcast to both halves as q + 128 (the top bit
 * flipped) for vpdpbusd.  Tiles of 4 rows x 4 pairs (8 activations): 16 accumulators; per
 * (row, pair) and block one vpdpbusd, one conversion, one multiply (dw * da, the twin's
 * product) and one FMA.  Matrices in eight-row groups (quant_x8.c) take the same tiles, four
 * rows of a group at a time, their quants broadcast from memory already as q + 128.  On AVX2 each activation's block is stored aligned with its float
 * scale beside; tiles of 2 rows x 4 activations, |q| and sign(a, q) as vpmaddubsw's
 * operands (pairs below 2^15), as the decode kernel.  The rows go in chunks that stay in L2 while the tiles of
 * activations pass over them. */
#include "quant_x86_impl.h"

#include <pthread.h>
#include <stdlib.h>

#include "util.h"

#if defined(QUANT_HAVE_AVX2)

/* A thread's buffer for the activations' tile form, grown as needed and freed when the
 * thread ends (a pthread key's destructor; the pool's threads keep theirs between calls).
 * The first 64 bytes hold the capacity. */
static pthread_key_t mm_key;
static pthread_once_t mm_once = PTHREAD_ONCE_INIT;

static void mm_key_make(void)
{
    CHECK(pthread_key_create(&mm_key, free) == 0, "quant: no thread key for matmul scratch");
}

void *quant_x86_scratch(size_t bytes)
{
    pthread_once(&mm_once, mm_key_make);
    uint8_t *buf = pthread_getspecific(mm_key);
    size_t cap = 0;
    if (buf)
        memcpy(&cap, buf, sizeof cap);
    if (bytes > cap) {
        free(buf);
        cap = bytes + bytes / 4;
        void *p = NULL;
        CHECK(posix_memalign(&p, 64, 64 + cap) == 0, "quant: %zu bytes of matmul scratch", cap);
        buf = p;
        memcpy(buf, &cap, sizeof cap);
        CHECK(pthread_setspecific(mm_key, buf) == 0, "quant: matmul scratch not kept");
    }
    return buf + 64;
}

static ALWAYS_INLINE const BlockQ8_0 *act_blocks(const uint8_t *act, size_t astride, int k)
{
    return (const BlockQ8_0 *)(const void *)(act + astride * (size_t)k);
}

/* Rows [i0, i1) of the chunk loop: about 64 KiB of weights. */
#define MM_ROWS_OF(stride) quant_chunk_rows(stride)

/* ---------------------------------------------------------------- AVX-512 VNNI */
#if defined(QUANT_X86_ROWS8)

typedef struct {
    int8_t qs[64];    /* activation 2p's block, then 2p + 1's */
    int32_t corr[16]; /* -128 times each lane's four activation bytes */
    float da[16];     /* lanes 0-7: 2p's scale, 8-15: 2p + 1's */
} PairBlk;
_Static_assert(sizeof(PairBlk) == 192, "pair block");

/* Pair p's blocks at pk + p nb; an odd last activation is paired with itself (its high
 * half computed and dropped). */
static void pack_pairs(PairBlk *pk, const uint8_t *act, size_t astride, int64_t nb, int nact)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int p = 0; p < (nact + 1) / 2; p++) {
        const BlockQ8_0 *a0 = act_blocks(act, astride, 2 * p);
        const BlockQ8_0 *a1 = act_blocks(act, astride, 2 * p + 1 < nact ? 2 * p + 1 : 2 * p);
        for (int64_t b = 0; b < nb; b++) {
            PairBlk *e = pk + (size_t)p * (size_t)nb + (size_t)b;
            const __m512i q =
                _mm512_inserti64x4(_mm512_castsi256_si512(load32(a0[b].qs)), load32(a1[b].qs), 1);
            _mm512_store_si512(e->qs, q);
            _mm512_store_si512(e->corr, _mm512_sub_epi32(_mm512_setzero_si512(),
                                                         _mm512_dpbusd_epi32(
                                                             _mm512_setzero_si512(), flip, q)));
            _mm512_store_ps(e->da, _mm512_insertf32x8(_mm512_set1_ps(h2f(a0[b].d)),
                                                      _mm256_set1_ps(h2f(a1[b].d)), 1));
        }
    }
}

/* R rows (w, stride apart) x P pairs (pk, nb apart): y[k ldy + r] for activation k = 2p or
 * 2p + 1 (below nact, counted from the tile's first).  x8: the rows are rows r0 .. r0 + R - 1
 * of the eight-row group at w (quant_x8.c: block b at w + 272 b, row r's scale at 2 r, its
 * quants at 16 + 32 r, already q + 128), stride unused. */
static ALWAYS_INLINE void tile_512(int x8, const uint8_t *w, size_t stride, int r0,
                                   const PairBlk *pk, int64_t nb, int R, int P, int nact,
                                   float *y, size_t ldy)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[4][4];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++)
            acc[r][p] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i wq[4];
        __m512 dw[4];
        for (int r = 0; r < R; r++) {
            uint16_t h;
            if (x8) {
                const uint8_t *u = w + 8 * sizeof(BlockQ8_0) * (size_t)b;
                memcpy(&h, u + 2 * (r0 + r), 2);
                wq[r] = _mm512_broadcast_i64x4(load32(u + 16 + 32 * (r0 + r)));
            } else {
                const uint8_t *blk = w + stride * (size_t)r + sizeof(BlockQ8_0) * (size_t)b;
                memcpy(&h, blk, 2);
                wq[r] = _mm512_xor_si512(_mm512_broadcast_i64x4(load32(blk + 2)), flip);
            }
            dw[r] = _mm512_set1_ps(h2f(h));
        }
        for (int p = 0; p < P; p++) {
            const PairBlk *e = pk + (size_t)p * (size_t)nb + (size_t)b;
            const __m512i a = _mm512_load_si512(e->qs);
            const __m512i c = _mm512_load_si512(e->corr);
            const __m512 da = _mm512_load_ps(e->da);
            for (int r = 0; r < R; r++) {
                const __m512i s = _mm512_dpbusd_epi32(c, wq[r], a);
                acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], da), _mm512_cvtepi32_ps(s),
                                            acc[r][p]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) {
            y[ldy * (size_t)(2 * p) + (size_t)r] = hsum_f8(_mm512_castps512_ps256(acc[r][p]));
            if (2 * p + 1 < nact)
                y[ldy * (size_t)(2 * p + 1) + (size_t)r] =
                    hsum_f8(_mm512_extractf32x8_ps(acc[r][p], 1));
        }
}

/* The tile for R rows and any P (1..4): a constant P for each specialisation. */
static ALWAYS_INLINE void tile_512_rows(const uint8_t *w, size_t stride, const PairBlk *pk,
                                        int64_t nb, int R, int np, int nact, float *y,
                                        size_t ldy)
{
    if (np >= 4)
        tile_512(0, w, stride, 0, pk, nb, R, 4, nact, y, ldy);
    else if (np == 3)
        tile_512(0, w, stride, 0, pk, nb, R, 3, nact, y, ldy);
    else if (np == 2)
        tile_512(0, w, stride, 0, pk, nb, R, 2, nact, y, ldy);
    else
        tile_512(0, w, stride, 0, pk, nb, R, 1, nact, y, ldy);
}

/* The same for rows r0 .. r0 + 3 of an eight-row group. */
static ALWAYS_INLINE void tile_512_x8(const uint8_t *w, int r0, const PairBlk *pk, int64_t nb,
                                      int np, int nact, float *y, size_t ldy)
{
    if (np >= 4)
        tile_512(1, w, 0, r0, pk, nb, 4, 4, nact, y, ldy);
    else if (np == 3)
        tile_512(1, w, 0, r0, pk, nb, 4, 3, nact, y, ldy);
    else if (np == 2)
        tile_512(1, w, 0, r0, pk, nb, 4, 2, nact, y, ldy);
    else
        tile_512(1, w, 0, r0, pk, nb, 4, 1, nact, y, ldy);
}

/* quant_x86_impl.h: groups of 8 rows (d / 8 of them) in chunks of about 64 KiB that stay in
 * L2 while the tiles of activation pairs pass; each group as two tiles of four rows. */
void quant_x86_mm_q8_0_x8(float *y, size_t ldy, const uint8_t *w, const uint8_t *act,
                          size_t astride, int64_t nb, int d, int nact)
{
    const int npairs = (nact + 1) / 2;
    PairBlk *pk = quant_x86_scratch(sizeof(PairBlk) * (size_t)npairs * (size_t)nb);
    pack_pairs(pk, act, astride, nb, nact);
    const size_t gb = 8 * sizeof(BlockQ8_0) * (size_t)nb;
    const int cg = MM_ROWS_OF(gb), ng = d / 8;
    for (int g0 = 0; g0 < ng; g0 += cg) {
        const int g1 = ng - g0 < cg ? ng : g0 + cg;
        for (int p0 = 0; p0 < npairs; p0 += 4) {
            const int np = npairs - p0, na = nact - 2 * p0;
            const PairBlk *pp = pk + (size_t)p0 * (size_t)nb;
            float *yk = y + ldy * (size_t)(2 * p0);
            for (int g = g0; g < g1; g++) {
                const uint8_t *wg = w + gb * (size_t)g;
                if (p0 == 0)
                    prefetch_ahead(wg, gb);
                tile_512_x8(wg, 0, pp, nb, np, na, yk + 8 * (size_t)g, ldy);
                tile_512_x8(wg, 4, pp, nb, np, na, yk + 8 * (size_t)g + 4, ldy);
            }
        }
    }
}

static void mm_q8_0_512(float *y, size_t ldy, const uint8_t *w, size_t stride,
                        const uint8_t *act, size_t astride, int64_t nb, int d, int nact)
{
    const int npairs = (nact + 1) / 2;
    PairBlk *pk = quant_x86_scratch(sizeof(PairBlk) * (size_t)npairs * (size_t)nb);
    pack_pairs(pk, act, astride, nb, nact);
    const int rc = MM_ROWS_OF(stride) < 8 ? 4 : MM_ROWS_OF(stride) / 4 * 4;
    for (int i0 = 0; i0 < d; i0 += rc) {
        const int i1 = d - i0 < rc ? d : i0 + rc;
        for (int p0 = 0; p0 < npairs; p0 += 4) {
            const int np = npairs - p0, na = nact - 2 * p0;
            const PairBlk *pp = pk + (size_t)p0 * (size_t)nb;
            float *yk = y + ldy * (size_t)(2 * p0);
            int i = i0;
            for (; i + 4 <= i1; i += 4) {
                if (p0 == 0)
                    prefetch_ahead(w + stride * (size_t)i, 4 * stride);
                tile_512_rows(w + stride * (size_t)i, stride, pp, nb, 4, np, na, yk + i, ldy);
            }
            const int left = i1 - i;
            if (left == 3)
                tile_512_rows(w + stride * (size_t)i, stride, pp, nb, 3, np, na, yk + i, ldy);
            else if (left == 2)
                tile_512_rows(w + stride * (size_t)i, stride, pp, nb, 2, np, na, yk + i, ldy);
            else if (left == 1)
                tile_512_rows(w + stride * (size_t)i, stride, pp, nb, 1, np, na, yk + i, ldy);
        }
    }
}
#endif

/* ---------------------------------------------------------------- AVX2 */

typedef struct {
    int8_t qs[32]; /* the activation's quants, 32-byte aligned */
} ActBlk;

/* Activation k's blocks at ab + k nb; the scales of activations 4g .. 4g + 3 for block b at
 * da + 4 (g nb + b), zero past the last activation. */
static void pack_acts(ActBlk *ab, float *da, const uint8_t *act, size_t astride, int64_t nb,
                      int nact)
{
    memset(da, 0, sizeof(float) * 4 * (size_t)nb * (size_t)((nact + 3) / 4));
    for (int k = 0; k < nact; k++) {
        const BlockQ8_0 *a = act_blocks(act, astride, k);
        for (int64_t b = 0; b < nb; b++) {
            ActBlk *e = ab + (size_t)k * (size_t)nb + (size_t)b;
            const __m256i q = load32(a[b].qs);
            _mm256_store_si256((__m256i *)(void *)e->qs, q);
            da[4 * ((size_t)(k / 4) * (size_t)nb + (size_t)b) + (size_t)(k % 4)] = h2f(a[b].d);
        }
    }
}

/* R rows x C activations (R <= 2, C <= 4): per (row, activation) and block the lanes of
 * |q| * sign(a, q) by vpmaddubsw + vpmaddwd (the decode kernel's exact lane sums; |q| up to
 * 128 as an unsigned byte), then acc = fma(dw * da, lanes, acc).  The products dw * da of a
 * row and the four activations by one multiply, then broadcast from memory (load ports,
 * not the vector ALUs that the integer sums keep busy). */
static ALWAYS_INLINE void tile_avx2(const uint8_t *w, size_t stride, const ActBlk *ab,
                                    const float *da, int64_t nb, int R, int C, float *y,
                                    size_t ldy)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][4];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i wq[2], wm[2];
        _Alignas(16) volatile float pd[2][4]; /* volatile: kept in memory, not shuffled */
        const __m128 d4 = _mm_load_ps(da + 4 * (size_t)b);
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + stride * (size_t)r + sizeof(BlockQ8_0) * (size_t)b;
            uint16_t h;
            memcpy(&h, blk, 2);
            wq[r] = load32(blk + 2);
            wm[r] = _mm256_sign_epi8(wq[r], wq[r]);
            _mm_store_ps((float *)pd[r], _mm_mul_ps(_mm_set1_ps(h2f(h)), d4));
        }
        for (int c = 0; c < C; c++) {
            const ActBlk *e = ab + (size_t)c * (size_t)nb + (size_t)b;
            const __m256i a = _mm256_load_si256((const __m256i *)(const void *)e->qs);
            for (int r = 0; r < R; r++) {
                const __m256i s = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(wm[r], _mm256_sign_epi8(a, wq[r])), ones);
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(pd[r][c]), _mm256_cvtepi32_ps(s),
                                            acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            y[ldy * (size_t)c + (size_t)r] = hsum_f8(acc[r][c]);
}

static ALWAYS_INLINE void tile_avx2_rows(const uint8_t *w, size_t stride, const ActBlk *ab,
                                         const float *da, int64_t nb, int R, int nc, float *y,
                                         size_t ldy)
{
    if (nc >= 4)
        tile_avx2(w, stride, ab, da, nb, R, 4, y, ldy);
    else if (nc == 3)
        tile_avx2(w, stride, ab, da, nb, R, 3, y, ldy);
    else if (nc == 2)
        tile_avx2(w, stride, ab, da, nb, R, 2, y, ldy);
    else
        tile_avx2(w, stride, ab, da, nb, R, 1, y, ldy);
}

static void mm_q8_0_avx2(float *y, size_t ldy, const uint8_t *w, size_t stride,
                         const uint8_t *act, size_t astride, int64_t nb, int d, int nact)
{
    const size_t nab = (size_t)nact * (size_t)nb;
    uint8_t *buf = quant_x86_scratch(sizeof(ActBlk) * nab + sizeof(float) * 4 * (size_t)nb *
                                                        (size_t)((nact + 3) / 4));
    ActBlk *ab = (ActBlk *)(void *)buf;
    float *da = (float *)(void *)(buf + sizeof(ActBlk) * nab);
    pack_acts(ab, da, act, astride, nb, nact);
    const int rc = MM_ROWS_OF(stride) < 4 ? 2 : MM_ROWS_OF(stride) / 2 * 2;
    for (int i0 = 0; i0 < d; i0 += rc) {
        const int i1 = d - i0 < rc ? d : i0 + rc;
        for (int k = 0; k < nact; k += 4) {
            const ActBlk *ak = ab + (size_t)k * (size_t)nb;
            const float *dk = da + 4 * (size_t)(k / 4) * (size_t)nb;
            float *yk = y + ldy * (size_t)k;
            int i = i0;
            for (; i + 2 <= i1; i += 2) {
                if (k == 0)
                    prefetch_ahead(w + stride * (size_t)i, 2 * stride);
                tile_avx2_rows(w + stride * (size_t)i, stride, ak, dk, nb, 2, nact - k, yk + i,
                               ldy);
            }
            if (i < i1)
                tile_avx2_rows(w + stride * (size_t)i, stride, ak, dk, nb, 1, nact - k, yk + i,
                               ldy);
        }
    }
}

/* quant_x86_impl.h */
void quant_x86_mm_q8_0(int vnni, float *y, size_t ldy, const uint8_t *w, size_t stride,
                       const uint8_t *act, size_t astride, int64_t nb, int d, int nact)
{
#if defined(QUANT_X86_ROWS8)
    if (vnni) {
        mm_q8_0_512(y, ldy, w, stride, act, astride, nb, d, nact);
        return;
    }
#endif
    (void)vnni;
    mm_q8_0_avx2(y, ldy, w, stride, act, astride, nb, d, nact);
}

#else
typedef int quant_x86_mm_unused; /* ISO C wants a declaration in every file */
#endif
