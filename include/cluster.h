/* cluster.h: the one description of a cluster (devices and the network between them) that
 * the planner, the cost models, the engine's link emulation and the simulator all read, and
 * the parsers of its text forms (link specs, link matrices, devices files, the device
 * catalogue).  Pure data and pure functions: no MPI, no HDF5. */
#ifndef HEADSPLIT_CLUSTER_H
#define HEADSPLIT_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

/* How the stations of a network share it.  SWITCHED: every pair has its own full-duplex
 * path (Ethernet through a switch; what --emulate-link did before media existed).  SHARED:
 * one half-duplex channel (WiFi): a transmission occupies it for bytes/bandwidth plus a
 * per-frame overhead, and transmissions queue behind each other. */
typedef enum { MEDIUM_SWITCHED = 0, MEDIUM_SHARED = 1 } Medium;

/* One directed link a -> b. */
typedef struct {
    double rtt_s;       /* round trip; the one-way latency is half */
    double jitter_s;    /* one-way delay varies by +- jitter/2 */
    double bw_Bps;      /* bytes per second (0: unlimited) */
    Medium medium;
    int relay_ap;       /* shared medium through an access point: every frame crosses the
                         * air twice (station -> AP -> station) */
    double frame_s;     /* per-transmission overhead on a shared medium (preamble, ACK) */
} NetLink;

/* One device (rank).  World rank 0 is the controller; 1..n-1 are workers. */
typedef struct {
    char name[24];      /* catalogue name ("pi4") or "" */
    double speed_Bps;   /* bytes/s of weights the decode kernels stream (0: unknown) */
    double op_overhead_s; /* seconds added to every compute op (calls, norms, RoPE) */
    size_t mem_budget;  /* bytes for weights and KV cache; 0: unlimited */
    double load_Bps;    /* bytes/s of weight loading from local storage (0: unknown) */
    double slowdown;    /* compute dilation factor for emulation (<= 1: none) */
} ClusterDevice;

typedef struct {
    int n;              /* ranks, controller included */
    ClusterDevice *dev; /* [n] */
    NetLink *link;      /* [n*n], link[a*n+b] from a to b */
} Cluster;

#endif
