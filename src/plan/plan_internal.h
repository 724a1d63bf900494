/* plan_internal.h: the placement pieces that plan_build dispatches to from other files of
 * src/plan/. */
#ifndef HEADSPLIT_PLAN_INTERNAL_H
#define HEADSPLIT_PLAN_INTERNAL_H

#include "plan.h"

#include <stddef.h>

/* SLICE water-fill: re-deals the parts and FFN columns of p (a SLICE plan with one slice per
 * worker) in proportion to req's device speeds within their budgets (KV for
 * req->kv_positions).  0, or -1 with err when the budgets cannot hold the model. */
int slice_deal_waterfill(Plan *p, const ModelConfig *c, const PlanRequest *req, char *err,
                         size_t errlen);

/* Bytes of `rows` whole rows of a [..][cols] weight matrix of kind k in its stored type (the
 * row slices of --exchange exact: wo and w_down by rows). */
size_t plan_rows_bytes(const ModelConfig *c, WeightKind k, int rows, int cols);

#endif
