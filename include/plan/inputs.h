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
    Device *devices;    /* [n-1] workers' budgets and speeds relative to ref_Bps, stabilised */
    double ref_Bps;     /* bytes/s of a device of speed 1.0: the fastest worker, or the
                         * workers' median where the stabilised speeds are all 1.0 */
    double *lat_ms;     /* [n*n] expected one-way latencies, stabilised */
    double lat_sd_ms;   /* their spread (0 on a LAN or with assume_rtt_ms) */
    double bw_Bps;      /* link bandwidth the planner assumes (0: unlimited) */
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
/* The cluster as the planner sees it (what --placement dp|exact solve over): each worker at
 * its stabilised speed (devices[r].speed x ref_Bps), the controller at its probed speed (20
 * GB/s where unknown), budgets times budget_frac, one-way latencies lat_ms, the planner's
 * bandwidth (unlimited: 1 TB/s), no jitter, every link on link 0 -> 1's medium; named
 * "measured".  out is initialised here (cluster_free frees it). */
void inputs_planner_cluster(Cluster *out, const ClusterInputs *ci, double budget_frac);

/* A cluster's devices in the form plan_build takes ([n-1], the caller frees): budgets times
 * budget_frac, speeds relative to the fastest worker (not stabilised). */
Device *cluster_plan_devices(const Cluster *cl, double budget_frac);
/* A cluster's links in the form plan_build takes: fills req's lat_ms (a new [n*n] matrix of
 * one-way ms, the caller frees it, also returned), bw_Bps (the slowest link), the medium of
 * link 0 -> 1 (shared, or else switched) and ref_Bps (the fastest worker's speed, the unit of
 * cluster_plan_devices' speeds). */
double *cluster_plan_links(const Cluster *cl, PlanRequest *req);

/* Copies the derived inputs into req (devices, n_workers, lat_ms, bw_Bps, ref_Bps,
 * lat_sd_ms, fixed_ms); req keeps pointers into ci. */
void inputs_fill_request(const ClusterInputs *ci, PlanRequest *req);

#endif
