/* quant.h: block-quantized tensor types with llama.cpp's (ggml's) layouts and arithmetic.
 * A quantized row of n values (n a multiple of the type's block size) is n / block_size
 * blocks stored back to back, exactly as in a GGUF file, so blocks travel from a GGUF file
 * through our HDF5 file into memory unchanged.  No allocation, I/O or MPI inside.
 *
 * Dot products follow llama.cpp's CPU backend: the activation is first quantized to the
 * weight type's "vec-dot type" (Q8_0 for Q8_0/Q4_0/Q5_0, Q8_1 for Q4_1/Q5_1/Q8_1 as ggml
 * does (their min term needs the block sums Q8_1 carries), Q8_K for the K-quants, F16 for F16,
 * BF16 for BF16, F32 for F32), then integer (or half) dot products are taken block by block.
 * The exact summation order is documented in src/kernels/quant_ref.c.  Every row's result depends only on that row and the quantized activation,
 * never on how many rows a rank holds, so row slices give bit-identical results; a column
 * slice that starts on a block boundary sees the same activation blocks.
 *
 * Each fast path (AVX2, AVX-512/VNNI, NEON) has the plain-C twin (suffix _ref) that the
 * unit tests hold it to. */
#ifndef HEADSPLIT_QUANT_H
#define HEADSPLIT_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* ggml's type numbers (the values a GGUF file stores). */
typedef enum {
    QTYPE_F32 = 0,
    QTYPE_F16 = 1,
    QTYPE_Q4_0 = 2,
    QTYPE_Q4_1 = 3,
    QTYPE_Q5_0 = 6,
    QTYPE_Q5_1 = 7,
    QTYPE_Q8_0 = 8,
    QTYPE_Q8_1 = 9,
    QTYPE_Q4_K = 12,
    QTYPE_Q5_K = 13,
    QTYPE_Q6_K = 14,
    QTYPE_Q8_K = 15,
    QTYPE_BF16 = 30,
} QType;

/* 1 for the types above that this build reads (all of them), 0 for any other number. */
int quant_type_known(int t);
/* Lower-case name as llama.cpp prints it ("q4_0", "q4_K", "f32", "bf16"). */
const char *quant_type_name(QType t);
/* The type named (case-insensitive: "q8_0", "Q4_K", "f16"); -1 for an unknown name. */
int quant_type_from_name(const char *name);
/* Values per block (1 for F32/F16/BF16, 32, or 256 for K-quants) and bytes per block. */
int quant_block_size(QType t);
size_t quant_block_bytes(QType t);
/* Bytes of a row of n values; n must be a multiple of the block size. */
size_t quant_row_bytes(QType t, int64_t n);
/* The type an activation is quantized to before a dot product with rows of type t. */
QType quant_vec_dot_type(QType t);

/* y[n] = the values of one row (any known type).  n a multiple of the block size. */
void quant_dequantize_row(float *y, const void *x, QType t, int64_t n);
void quant_dequantize_row_ref(float *y, const void *x, QType t, int64_t n);

/* One row of n floats to type t, bit-identical to llama.cpp's reference quantizers
 * (quantize_row_*_ref; for the K-quants the no-importance-matrix path llama-quantize takes).
 * Defined for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K, Q5_K, Q6_K, Q8_K. */
void quant_quantize_row(void *y, const float *x, QType t, int64_t n);
void quant_quantize_row_ref(void *y, const float *x, QType t, int64_t n);

/* The activation x[n] in the vec-dot type of weight type t, block for block what llama.cpp's
 * x86 CPU backend feeds its dot products (for Q8_0 and Q8_1: id = 127 / amax, rounded half
 * to even, not quant_quantize_row's reference rounding; Q8_K, F16, BF16 as
 * quant_quantize_row): out must hold quant_row_bytes(quant_vec_dot_type(t), n) bytes. */
void quant_quantize_act(void *out, const float *x, QType t, int64_t n);
void quant_quantize_act_ref(void *out, const float *x, QType t, int64_t n);

/* Dot product of one weight row of type t with an activation already in its vec-dot type. */
float quant_vec_dot(QType t, const void *w_row, const void *x_act, int64_t n);
float quant_vec_dot_ref(QType t, const void *w_row, const void *x_act, int64_t n);

/* y[d] = W . x for d rows of type t, row i at w + i * row_stride bytes (row_stride >=
 * quant_row_bytes(t, n); larger for a column block of a wider matrix), x_act the activation
 * in the vec-dot type (quant_quantize_act).  For t == QTYPE_F32 this is the fp32 matvec
 * (kernels_matvec_ld's order), so fp32 models keep their exact results. */
void quant_matvec(float *y, const void *w, QType t, size_t row_stride, const void *x_act,
                  int64_t n, int d);
void quant_matvec_ref(float *y, const void *w, QType t, size_t row_stride, const void *x_act,
                      int64_t n, int d);

/* Y[b][i] = W[i] . X[b] for nb activations at once: X[b] at x_act + b * act_stride bytes (each
 * quantized by quant_quantize_act), Y[b][i] at y[b * ldy + i].  Every Y[b] is bit-identical to
 * quant_matvec(Y[b], w, t, row_stride, X[b], n, d) (the same block dot products in the same
 * order); each weight row is read from memory once for all nb activations. */
void quant_matmul(float *y, const void *w, QType t, size_t row_stride, const void *x_act,
                  size_t act_stride, int64_t n, int d, int nb, size_t ldy);
void quant_matmul_ref(float *y, const void *w, QType t, size_t row_stride, const void *x_act,
                      size_t act_stride, int64_t n, int d, int nb, size_t ldy);

/* ---- Q4_0 and Q8_0 matrices in eight-row groups ("x8", the layout llama.cpp's CPU backend
 * repacks Q4_0 into before its gemv).  d rows (d a multiple of 8) of n values, nb = n / 32
 * blocks: for rows 8g .. 8g + 7 and block b, 8 blocks' bytes at (g * nb + b) * 8 *
 * quant_block_bytes(t) hold the eight rows' fp16 scales, then the eight rows' quant bytes
 * (16 for Q4_0, 32 for Q8_0, stored as q + 128: the top bit flipped), row after row.  The
 * rows' bytes, reordered: a group's block is a few wide loads instead of sixteen scattered
 * ones.  Every result is bit-identical to quant_matvec / quant_matmul on the rows; a single
 * row cannot be read out alone (quant_x8_unpack gives the rows back). */

/* 1 if this build's fast path multiplies d rows of type t (n values) faster as x8 than as
 * rows: d a multiple of 8, and Q4_0 on an x86 path (AVX2 or AVX-512 VNNI) or Q8_0 on
 * AVX-512 VNNI.  Callers keep rows otherwise (NEON, plain C). */
int quant_x8_preferred(QType t, int64_t n, int d);
/* The d rows of type t at w (back to back, quant_row_bytes(t, n) each) to x8, in place;
 * quant_x8_unpack is the inverse. */
void quant_x8_pack(void *w, QType t, int64_t n, int d);
void quant_x8_unpack(void *w, QType t, int64_t n, int d);
/* quant_matvec and quant_matmul on an x8 matrix (x_act, act_stride, ldy as there). */
void quant_matvec_x8(float *y, const void *w, QType t, const void *x_act, int64_t n, int d);
void quant_matmul_x8(float *y, const void *w, QType t, const void *x_act, size_t act_stride,
                     int64_t n, int d, int nb, size_t ldy);
/* The plain-C twin: each group unpacked, then quant_matvec_ref's rows. */
void quant_matvec_x8_ref(float *y, const void *w, QType t, const void *x_act, int64_t n,
                         int d);

/* Which SIMD path quant_vec_dot runs on this CPU ("avx512vnni", "avx2", "neon", "c"). */
const char *quant_simd_name(void);

#endif
