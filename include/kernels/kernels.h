/* kernels.h: numerical kernels of one transformer layer.  No allocation, I/O or MPI inside.
 * Convention: output first, const inputs next, sizes last.  Every kernel has a plain-loop twin
 * (suffix _ref) that the unit tests compare against. */
#ifndef HEADSPLIT_KERNELS_H
#define HEADSPLIT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { MATVEC_AUTO = 0, MATVEC_OWN = 1, MATVEC_BLAS = 2 } MatvecImpl;
/* Chooses the matrix-vector implementation for kernels_matvec (default: AUTO = own kernel).
 * BLAS runs OpenBLAS single-threaded and does not promise the row-slice bit-identity below. */
void kernels_set_matvec(MatvecImpl impl);
MatvecImpl kernels_get_matvec(void);
/* OpenBLAS's chosen core (openblas_get_corename), for the metrics. */
const char *kernels_blas_corename(void);

/* Threads of the row-parallel kernels (--threads): a persistent pool, made here once.
 * Rows are split over the threads in contiguous ranges and every row is summed whole by one
 * thread, so results are bit-identical for any count.  Returns the threads made (n clamped
 * to 1..64). */
int kernels_set_threads(int n);
int kernels_get_threads(void);
/* The cores this process may run on (sched_getaffinity), at most its share of the host's
 * cores among the Open MPI ranks that share it (OMPI_COMM_WORLD_LOCAL_SIZE); at least 1.
 * An emulated board's (HEADSPLIT_DEVICE_CORES, set by scripts/emulate-device): its cores. */
int kernels_default_threads(void);
/* Runs fn(arg, lo, hi) over [0, rows) split among the pool's threads (work: the job's
 * multiply-adds; small jobs, or a pool busy with another caller, run on the caller alone). */
typedef void (*KernelsRowsFn)(void *arg, int lo, int hi);
void kernels_parallel_rows(KernelsRowsFn fn, void *arg, int rows, long long work);
/* Cores in this process's CPU affinity (sched_getaffinity) and online on the host. */
int kernels_affinity_cores(void);
int kernels_host_cores(void);
/* Whether a rank's threads fit its cores: asked = --threads (0: the default), affinity and
 * host = the cores above, local_ranks = ranks on this host, launched = started by mpirun.
 * Returns 1 with a message naming the fix (mpirun --bind-to none) when more threads are asked
 * than the affinity has, or when the launcher bound a rank that takes the default to fewer
 * cores than its share of the host; else 0.  kernels_binding_advice: the same for this
 * process (none for an emulated board). */
int kernels_binding_check(int asked, int affinity, int host, int local_ranks, int launched,
                          char *msg, size_t len);
int kernels_binding_advice(int asked, char *msg, size_t len);

/* The fp32 kernels' instruction-set paths (every one gives the same bits). */
typedef enum {
    MATMUL_PATH_BEST = 0,
    MATMUL_PATH_PORTABLE = 1,
    MATMUL_PATH_AVX2 = 2, /* AVX2 + FMA */
    MATMUL_PATH_AVX512 = 3
} MatmulPath;

/* The order of the fp32 arithmetic that follows llama.cpp's CPU backend (ggml_vec_dot_f32 in
 * the matvec, the batched matmul and the attention's KQ and KQV; ggml_v_expf and the softmax
 * sum in the attention and SwiGLU): llama.cpp's build for AVX-512 (16-lane vectors, the
 * default: the references of ../shared/models/gguf and gguf-arch) or for AVX2 (8-lane vectors,
 * GGML_F32_STEP 32: the references of ../shared/models/gguf-gpt2).  Every path (AVX-512, AVX2,
 * portable/NEON, the twins) computes either order on any CPU, bit for bit.  Set once at start-up
 * (--f32-order), before the kernels run; the same on every rank. */
typedef enum { KERNELS_F32_ORDER_AVX512 = 0, KERNELS_F32_ORDER_AVX2 = 1 } KernelsF32Order;
void kernels_set_f32_order(KernelsF32Order o);
KernelsF32Order kernels_get_f32_order(void);
/* "avx512" or "avx2"; kernels_parse_f32_order: 0 and *o for one of those names, else -1. */
const char *kernels_f32_order_name(KernelsF32Order o);
int kernels_parse_f32_order(const char *s, KernelsF32Order *o);

/* y[d] = W[d][n] x[n].  Every y[i] is summed in an order that depends only on n, never on d
 * or on which rows a rank holds, so row slices of W give bit-identical rows of y.
 * y must not overlap w or x. */
void kernels_matvec(float *y, const float *w, const float *x, int n, int d);
void kernels_matvec_ref(float *y, const float *w, const float *x, int n, int d);
/* Same, for a matrix whose rows are ld floats apart (a column block of a wider matrix). */
void kernels_matvec_ld(float *y, const float *w, const float *x, int n, int d, size_t ld);
/* The own kernel whatever kernels_set_matvec chose (row stride ld >= n). */
void kernels_matvec_own(float *y, const float *w, const float *x, int n, int d, size_t ld);
/* The path kernels_matvec_own takes on this CPU, for --version and the metrics. */
const char *kernels_matvec_path(void);
/* Portable C (vector extensions) of the own kernel's order, the path on CPUs without AVX2
 * (NEON); bit-identical to kernels_matvec_own on every instruction set. */
void kernels_matvec_portable(float *y, const float *w, const float *x, int n, int d,
                             size_t ld);
/* The own kernel on one chosen path, one thread (for the tests): 0 if this CPU lacks it. */
int kernels_matvec_on_path(MatmulPath p, float *y, const float *w, const float *x, int n, int d,
                           size_t ld);

/* Y[b][i] = W[i] . X[b] for nb input rows at once (b < nb, i < d): every Y[b] is bit-identical
 * to kernels_matvec_own(Y[b], W, X[b], n, d, ldw), on every path and thread count, but W is
 * read from memory once for all nb rows.  Rows of W, X and Y are ldw, ldx and ldy floats
 * apart (Y[b][i] at y[b * ldy + i]).  Always the own kernel (never BLAS).  Y must not overlap
 * W or X. */
void kernels_matmul(float *y, const float *w, const float *x, int n, int d, int nb, size_t ldw,
                    size_t ldx, size_t ldy);
/* One dot product w . x in that canonical order, as plain scalar C (the twin). */
float kernels_dot_f32_ref(const float *w, const float *x, int n);
void kernels_matmul_ref(float *y, const float *w, const float *x, int n, int d, int nb,
                        size_t ldw, size_t ldx, size_t ldy);
/* The same on one chosen path (for the tests): returns 0 if this CPU lacks it. */
int kernels_matmul_path(MatmulPath p, float *y, const float *w, const float *x, int n, int d,
                        int nb, size_t ldw, size_t ldx, size_t ldy);

/* out = x / sqrt(mean(x^2) + eps) * w, as llama.cpp's CPU backend computes it (squares summed
 * in double, (x * scale) * w). */
void kernels_rmsnorm(float *out, const float *x, const float *w, float eps, int n);
void kernels_rmsnorm_ref(float *out, const float *x, const float *w, float eps, int n);
/* out = (x - mean) / sqrt(var + eps) * w + b, biased variance, as llama.cpp's CPU backend
 * computes it (sums in double, ((x - mean) * scale) * w + b). */
void kernels_layernorm(float *out, const float *x, const float *w, const float *b, float eps, int n);
void kernels_layernorm_ref(float *out, const float *x, const float *w, const float *b, float eps,
                           int n);

/* Rotates n_heads heads of head_dim floats in place at position pos.
 * interleaved: pairs (2i, 2i+1), freq = theta^(-2i/hd); half: pairs (i, i+hd/2), same freqs.
 * Angles and rotation as ggml's rope (pos * theta_scale^i by repeated multiplication, FMA). */
void kernels_rope(float *x, int n_heads, int head_dim, int pos, float theta, int interleaved);
void kernels_rope_ref(float *x, int n_heads, int head_dim, int pos, float theta, int interleaved);
/* kernels_rope with frequency i divided by factors[i] (head_dim / 2 of them: Llama 3.1 RoPE
 * scaling as llama.cpp applies rope_freqs.weight); factors NULL is kernels_rope itself. */
void kernels_rope_factors(float *x, int n_heads, int head_dim, int pos, float theta,
                          int interleaved, const float *factors);

/* In-place max-subtracted softmax of n values. */
void kernels_softmax(float *x, int n);
void kernels_softmax_ref(float *x, int n);

/* gate[i] = silu(gate[i]) * up[i], silu by ggml's vectorised expf (of the build
 * kernels_set_f32_order chose), bit for bit */
void kernels_swiglu(float *gate, const float *up, int n);
void kernels_swiglu_ref(float *gate, const float *up, int n);
/* x[i] = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) */
void kernels_gelu(float *x, int n);
/* llama.cpp's CPU GELU (GGML_GELU_FP16): 0 for x <= -10, x for x >= 10, else the tanh form of
 * x rounded to fp16, rounded to fp16 (the values of ggml's table, bit for bit). */
void kernels_gelu_fp16(float *x, int n);
void kernels_gelu_ref(float *x, int n);

/* y[i] += x[i] */
void kernels_add(float *y, const float *x, int n);

/* Attention of n_q query heads sharing one KV group over positions 0..n_pos-1.
 * q: [n_q][hd]; k_cache, v_cache: [n_pos][hd] (row stride hd); out: [n_q][hd];
 * scratch: at least n_pos floats.  Scores are scaled by 1/sqrt(hd).  llama.cpp's arithmetic
 * (F32 KV cache, no flash attention): ggml_vec_dot_f32 orders, ggml's softmax. */
void kernels_attention(float *out, const float *q, const float *k_cache, const float *v_cache,
                       float *scratch, int n_q, int head_dim, int n_pos);
/* The same with the scores scaled by kq_scale (1: q already scaled, as llama.cpp's phi3
 * graph does; kernels_attention is kq_scale = 1/sqrtf(hd)). */
void kernels_attention_scaled(float *out, const float *q, const float *k_cache,
                              const float *v_cache, float *scratch, int n_q, int head_dim,
                              int n_pos, float kq_scale);
/* ggml's vector expf (ggml_v_expf of the build kernels_set_f32_order chose) for one value,
 * as the softmax of kernels_attention and kernels_swiglu compute it; _ref: the twin. */
float kernels_ggml_expf(float x);
float kernels_ggml_expf_ref(float x);
/* kernels_attention_scaled's twin: the same arithmetic one value at a time (the unit tests
 * hold the kernel to it bit for bit). */
void kernels_attention_scaled_twin(float *out, const float *q, const float *k_cache,
                                   const float *v_cache, float *scratch, int n_q, int head_dim,
                                   int n_pos, float kq_scale);
void kernels_attention_ref(float *out, const float *q, const float *k_cache,
                           const float *v_cache, float *scratch, int n_q, int head_dim, int n_pos);

/* Index of the largest value; lowest index on exact ties. */
int kernels_argmax(const float *x, int n);

/* IEEE binary16 for the 16-bit wire format (--wire f16): round to nearest even, overflow
 * to infinity, subnormals kept.  The vector path (F16C) and the _one functions agree bit
 * for bit. */
void kernels_f32_to_f16(uint16_t *y, const float *x, int n);
void kernels_f16_to_f32(float *y, const uint16_t *x, int n);
uint16_t kernels_f32_to_f16_one(float f);
float kernels_f16_to_f32_one(uint16_t h);

#endif
