/* inputs.h: what the start-up measures about a cluster (ClusterInputs) and the planner's
 * view of it (relative speeds, stabilised latencies), derived by a pure function so that the
 * same measurements always give the same plan on every rank and in tests.  No MPI: the
 * measuring itself is in startup.h. */
#ifndef HEADSPLIT_INPUTS_H
#define HEADSPLIT_INPUTS_H

#include "cluster.h"
#include "plan.h"

typedef struct {
    /* Measured (identical on every rank after the start-up's collectives): */
    Cluster cluster;    /* dev[r]: speed_Bps as probed (--devices may override it), mem_budget
                         * (0: none), slowdown; link[]: the emulated links (zero: real) */
    double *rtt_ms;     /* [n*n] median round trips, ms */
    double *rtt_p95_ms; /* [n*n] their 95th percentiles */
    double assume_rtt_ms; /* < 0: plan with the measured RTTs; else this RTT everywhere */
    /* Derived by inputs_derive, for the planner: */
    Cluster planner;    /* the planner's cluster (plan.h, PlanRequest.cluster): each worker at
                         * its stabilised speed relative to the fastest (times ref_Bps, or the
                         * nearest value at which each reads back exactly), its budget;
                         * the controller at its probed speed (20 GB/s where unknown); one-way
                         * latencies (RTT/2, or assume_rtt_ms/2) stabilised; every link at link
                         * 0 -> 1's bandwidth (0: unlimited) and medium; no jitter; named
                         * "measured" */
    double ref_Bps;     /* bytes/s of a device of speed 1.0: the fastest worker, or the
                         * workers' median where the stabilised speeds are all 1.0 */
    double lat_sd_ms;   /* the latencies' spread (0 on a LAN or with assume_rtt_ms) */
    double controller_ms; /* the controller's final norm and LM head per token */
} ClusterInputs;

/* Allocates a cluster of n ranks and zeroed matrices; assume_rtt_ms = -1. */
void inputs_init(ClusterInputs *ci, int n);
/* Accepts NULL and a zeroed or half-built struct. */
void inputs_free(ClusterInputs *ci);

/* Derives the planner's view.  file_mem/file_speed [n] (may be NULL) are a devices file's
 * values (cluster_load_devices): a non-zero budget replaces the rank's, a speed replaces the
 * probed one as that fraction of the fastest probed worker.  Speeds are normalised by the
 * fastest worker (then stabilised: cluster_stabilise_speeds); latencies are RTT/2, or
 * assume_rtt_ms/2, stabilised by cluster_stabilise_latencies; the bandwidth is the emulated
 * link 0 -> 1's. */
void inputs_derive(ClusterInputs *ci, const ModelConfig *c, const size_t *file_mem,
                   const double *file_speed);
/* The cluster --placement dp|exact solve over and --partition auto's layer-wise candidate
 * takes: the planner's (ci->planner) with speeds relative to the fastest times ref_Bps,
 * budgets times budget_frac and unlimited links at 1 TB/s (the simulator's cost model needs
 * a bandwidth).  out is initialised here
 * (cluster_free frees it). */
void inputs_solver_cluster(Cluster *out, const ClusterInputs *ci, double budget_frac);

/* Points req at the derived inputs (cluster, n_workers, ref_Bps, lat_sd_ms, fixed_ms); req
 * keeps a pointer into ci. */
void inputs_fill_request(const ClusterInputs *ci, PlanRequest *req);

/* A copy of in (initialised here; cluster_free frees it) with every worker's budget times
 * budget_frac; without links where in has none. */
void plan_cluster_copy(Cluster *out, const Cluster *in, double budget_frac);
/* plan_build over cluster cl (req's own cluster and n_workers replaced) with its workers'
 * budgets times budget_frac and, where links is 0, its links unknown (a placement that is
 * not link-aware). */
int plan_build_cluster(Plan *plan, const ModelConfig *c, const PlanRequest *req,
                       const Cluster *cl, double budget_frac, int links, char *err,
                       size_t errlen);

#endif
