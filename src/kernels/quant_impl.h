/* quant_impl.h: block structs of the quantized types (ggml-common.h's layouts, byte for byte)
 * and the helpers shared by the plain-C twins (quant_ref.c), the dispatcher (quant.c) and the
 * SIMD paths.  Private to src/kernels. */
#ifndef HEADSPLIT_QUANT_IMPL_H
#define HEADSPLIT_QUANT_IMPL_H

#include <stdint.h>
#include <string.h>

#include "quant.h"

#define QK 32   /* values per block of the 32-value types */
#define QK_K 256 /* values per super-block of the K-quants */
#define K_SCALE_SIZE 12

/* Halves (d, m, s) are IEEE binary16 bit patterns. */
typedef struct { uint16_t d; uint8_t qs[QK / 2]; } BlockQ4_0;
typedef struct { uint16_t d, m; uint8_t qs[QK / 2]; } BlockQ4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[QK / 2]; } BlockQ5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK / 2]; } BlockQ5_1;
typedef struct { uint16_t d; int8_t qs[QK]; } BlockQ8_0;
typedef struct { uint16_t d, s; int8_t qs[QK]; } BlockQ8_1; /* s = d * sum(qs) */
typedef struct {
    uint16_t d, dmin;               /* super-block scales of the 6-bit scales and mins */
    uint8_t scales[K_SCALE_SIZE];   /* 8 scales and 8 mins, 6 bits each */
    uint8_t qs[QK_K / 2];           /* 4-bit quants */
} BlockQ4_K;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];           /* the fifth bits */
    uint8_t qs[QK_K / 2];           /* the low 4 bits */
} BlockQ5_K;
typedef struct {
    uint8_t ql[QK_K / 2];           /* low 4 bits */
    uint8_t qh[QK_K / 4];           /* high 2 bits */
    int8_t scales[QK_K / 16];       /* 8-bit scales of 16-value groups */
    uint16_t d;
} BlockQ6_K;
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];       /* sums of qs in groups of 16 */
} BlockQ8_K;

_Static_assert(sizeof(BlockQ4_0) == 18, "q4_0 block");
_Static_assert(sizeof(BlockQ4_1) == 20, "q4_1 block");
_Static_assert(sizeof(BlockQ5_0) == 22, "q5_0 block");
_Static_assert(sizeof(BlockQ5_1) == 24, "q5_1 block");
_Static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block");
_Static_assert(sizeof(BlockQ8_1) == 36, "q8_1 block");
_Static_assert(sizeof(BlockQ4_K) == 144, "q4_K block");
_Static_assert(sizeof(BlockQ5_K) == 176, "q5_K block");
_Static_assert(sizeof(BlockQ6_K) == 210, "q6_K block");
_Static_assert(sizeof(BlockQ8_K) == 292, "q8_K block");

/* ggml's GGML_FP32_TO_FP16 (round to nearest even; NaN -> sign | 0x7e00) and its inverse. */
uint16_t quant_fp32_to_fp16(float f);
float quant_fp16_to_fp32(uint16_t h);
/* ggml's GGML_FP32_TO_BF16 (round to nearest even, subnormals kept, NaN quieted). */
uint16_t quant_fp32_to_bf16(float f);
float quant_bf16_to_fp32(uint16_t h);

/* The 6-bit scale and min j (0..7) of a Q4_K/Q5_K super-block (ggml's get_scale_min_k4). */
static inline void quant_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* The canonical reduction of the 8 block accumulators of the 32-value types (block b adds into
 * lane b % 8): the halving tree a[l] += a[l + h], h = 4, 2, 1. */
static inline float quant_reduce8(const float *a)
{
    const float b0 = a[0] + a[4], b1 = a[1] + a[5], b2 = a[2] + a[6], b3 = a[3] + a[7];
    const float c0 = b0 + b2, c1 = b1 + b3;
    return c0 + c1;
}

/* Plain-C row dots (quant_ref.c), also the dispatcher's fallback for types without SIMD. */
float quant_dot_ref_row(QType t, const void *w_row, const void *x_act, int64_t n);

/* The code paths of a row dot.  A build holds the paths its target allows (compile-time, as
 * matvec.c): AVX2 needs AVX2 and F16C; VNNI (the 32-value types' block sums with vpdpbusd)
 * needs AVX512VL and AVX512VNNI and comes with AVX2 for the rest; NEON is any aarch64. */
typedef enum {
    QUANT_PATH_C = 0,
    QUANT_PATH_AVX2 = 1,
    QUANT_PATH_VNNI = 2,
    QUANT_PATH_NEON = 3,
} QuantPath;

#if defined(__AVX2__) && defined(__F16C__)
#define QUANT_HAVE_AVX2 1
#if defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define QUANT_HAVE_VNNI 1
#endif
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#define QUANT_HAVE_NEON 1
#endif

/* The path this build takes: the best one it was compiled for. */
QuantPath quant_best_path(void);
/* 1 if this build has path p. */
int quant_path_available(QuantPath p);
/* One row's dot (n checked) on path p, or on the plain-C twin where p lacks type t or this
 * build lacks p.  The tests hold every available path to the C twin. */
float quant_dot_row_path(QuantPath p, QType t, const void *w_row, const void *x_act, int64_t n);

/* The SIMD rows (quant_x86.c, quant_neon.c): 1 and *out set if the path has type t. */
int quant_x86_dot(int vnni, QType t, const void *w, const void *x, int64_t n, float *out);
/* y = x quantized to t on the x86 path if it has t's quantizer (returns 1; Q8_0), else 0. */
int quant_x86_quantize(QType t, void *y, const float *x, int64_t n);
/* y = the activation x in vec-dot type t (quant_quantize_act_ref's blocks) if the x86 path
 * has t's activation quantizer (returns 1; Q8_0), else 0. */
int quant_x86_quantize_act(QType t, void *y, const float *x, int64_t n);
/* y[d] = W x on the x86 path if it has a whole-matrix kernel for t (returns 1), else 0. */
int quant_x86_matvec(int vnni, QType t, float *y, const void *w, size_t stride,
                     const void *x, int64_t n, int d);
/* Y[b][i] = W[i] . X[b] (quant_matmul's layout) on the x86 / NEON path if it has a batched
 * kernel for t (returns 1), else 0. */
int quant_x86_matmul(int vnni, QType t, float *y, size_t ldy, const void *w, size_t stride,
                     const void *x, size_t act_stride, int64_t n, int d, int nb);
int quant_neon_matmul(QType t, float *y, size_t ldy, const void *w, size_t stride,
                      const void *x, size_t act_stride, int64_t n, int d, int nb);
/* Rows per chunk of the batched kernels: about 64 KiB of weights, which stay in L2 while each
 * tile of activations (in L1) passes over them; each row is read from memory once. */
static inline int quant_chunk_rows(size_t row_stride)
{
    const size_t rc = (size_t)(64 * 1024) / (row_stride ? row_stride : 1);
    return rc > 1 ? (int)(rc < 4096 ? rc : 4096) : 1;
}
/* The x86 path's x8 kernels of type t (Q4_0, Q8_0; quant_x86_x8.c): 1 if done, 0 where the
 * build or the path lacks them (vnni: the path is VNNI). */
int quant_x86_x8_matvec(int vnni, QType t, float *y, const void *w, const void *x, int64_t n,
                        int d);
int quant_x86_x8_matmul(int vnni, QType t, float *y, size_t ldy, const void *w, const void *x,
                        size_t act_stride, int64_t n, int d, int nb);
/* 1 if this build has the x8 kernels of Q8_0 (AVX-512 VNNI). */
int quant_x86_x8_q8_0_built(void);
int quant_neon_dot(QType t, const void *w, const void *x, int64_t n, float *out);
/* y[d] = W x on the NEON path if it has a whole-matrix kernel for t (returns 1), else 0. */
int quant_neon_matvec(QType t, float *y, const void *w, size_t stride, const void *x,
                      int64_t n, int d);

/* The K-quant quantizers' reference (quant_ref_k.c), for quant_quantize_row_ref: nb blocks. */
void quant_ref_quantize_q4_K(BlockQ4_K *y, const float *x, int64_t nb);
void quant_ref_quantize_q5_K(BlockQ5_K *y, const float *x, int64_t nb);
void quant_ref_quantize_q6_K(BlockQ6_K *y, const float *x, int64_t nb);
void quant_ref_quantize_q8_K(BlockQ8_K *y, const float *x, int64_t nb);
/* Round to nearest, ties to even, by the float-addition trick ggml uses (|x| <= 4194303). */
static inline int quant_nearest_int(float fval)
{
    const float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

#endif
