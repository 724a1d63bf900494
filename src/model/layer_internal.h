/* layer_internal.h: helpers shared by the one-position forward pieces (layer.c) and their
 * multi-position forms (layer_batch.c).  Private to src/model. */
#ifndef HEADSPLIT_LAYER_INTERNAL_H
#define HEADSPLIT_LAYER_INTERNAL_H

#include "model.h"

/* Pre-norm of one row: RMSNorm (llama) or LayerNorm (gpt2). */
void layer_pre_norm(const ModelConfig *c, float *out, const float *x, const float *w,
                    const float *b);
/* GELU in place: kernels_gelu_fp16 where c->gelu_fp16 (GGUF imports), else kernels_gelu. */
void layer_gelu(const ModelConfig *c, float *x, int n);
/* Forgets the quantized inputs: called whenever a matvec input buffer is rewritten. */
void layer_act_reset(Scratch *s);
/* The Scratch.act slot of weight type t's vec-dot type. */
int layer_act_slot(QType t);
/* Euclidean norm in double (speculation's ratio does not depend on float rounding). */
double layer_norm2(const float *x, int n);

/* Attention of n positions pos..pos+n-1 (position p sees 0..p, the last sliding_window of
 * them with a window) for nq query heads over one KV cache ([kv_cap][hd]): out row i
 * (out_stride apart) from q row i (q_stride apart), each scaled by scale.  The heads are
 * split over the kernel threads, each with its own row of s->att; every head's sums are
 * kernels_attention_scaled's, so any thread count gives the same bits. */
void layer_attention(const ModelConfig *c, Scratch *s, float *out, size_t out_stride,
                     const float *q, size_t q_stride, const float *k_cache,
                     const float *v_cache, int nq, int pos, int n, float scale);

/* The KV caches of c->kv_type (--cache-type).  layer_kv_rows: where rows pos..pos+n-1 of w's
 * K and V are to be computed (the f32 cache itself; for F16 / Q8_0 the scratch's rows).
 * layer_kv_commit: stores them in w's cache (F16 / Q8_0: rounded to the stored type) and
 * gives the K and V that attention reads, row p the cached position p: the f32 cache, or the
 * stored rows the window of positions pos..pos+n-1 sees, dequantized into the scratch (so a
 * position reads back exactly what the cache holds, written now or earlier). */
void layer_kv_rows(const ModelConfig *c, AttnPartW *w, Scratch *s, int pos, int n, float **k,
                   float **v);
void layer_kv_commit(const ModelConfig *c, AttnPartW *w, Scratch *s, int pos, int n,
                     const float **k, const float **v);

#endif
