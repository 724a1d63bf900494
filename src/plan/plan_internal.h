/* plan_internal.h: the placement pieces that plan_build dispatches to from other files of
 * src/plan/. */
#ifndef HEADSPLIT_PLAN_INTERNAL_H
#define HEADSPLIT_PLAN_INTERNAL_H

#include "plan.h"

#include <stddef.h>

/* The request's view of its cluster (plan.h, PlanRequest.cluster): a worker's speed
 * relative to the fastest worker (1.0 where unknown, for the controller and without a
 * cluster); the bytes per second of speed 1.0 (req->ref_Bps, else the fastest worker's,
 * else 10 GB/s); a worker's budget (0: unlimited); 1 when the links are known (link-aware
 * placement); the one-way latency a -> b in ms (0 where unknown). */
double plan_req_speed(const PlanRequest *req, int rank);
double plan_req_ref_Bps(const PlanRequest *req);
size_t plan_req_budget(const PlanRequest *req, int rank);
int plan_req_links(const PlanRequest *req);
double plan_req_lat_ms(const PlanRequest *req, int a, int b);

/* SLICE water-fill: re-deals the parts and FFN columns of p (a SLICE plan with one slice per
 * worker) in proportion to req's device speeds within their budgets (KV for
 * req->kv_positions).  0, or -1 with err when the budgets cannot hold the model. */
int slice_deal_waterfill(Plan *p, const ModelConfig *c, const PlanRequest *req, char *err,
                         size_t errlen);

/* Bytes of `rows` whole rows of a [..][cols] weight matrix of kind k in its stored type (the
 * row slices of --exchange exact: wo and w_down by rows). */
size_t plan_rows_bytes(const ModelConfig *c, WeightKind k, int rows, int cols);

#endif
