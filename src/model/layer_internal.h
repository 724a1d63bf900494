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

#endif
