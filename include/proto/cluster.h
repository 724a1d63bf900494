/* cluster.h: the one description of a cluster (devices and the network between them) that
 * the planner, the cost models, the engine's link emulation and the simulator all read, and
 * the parsers of its text forms (link specs, link matrices, devices files, the device
 * catalogue).  The simulator's clusters (generated, read from its JSON, calibrated) are this
 * struct too.  Pure data and pure functions: no MPI, no HDF5. */
#ifndef HEADSPLIT_CLUSTER_H
#define HEADSPLIT_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

/* How the stations of a network share it.  SWITCHED: every pair has its own full-duplex
 * path (Ethernet through a switch; what --emulate-link did before media existed).  SHARED:
 * one half-duplex channel (WiFi): a transmission occupies it for bytes/bandwidth plus a
 * per-frame overhead, and transmissions queue behind each other. */
typedef enum { MEDIUM_SWITCHED = 0, MEDIUM_SHARED = 1, MEDIUM_IDEAL = 2 } Medium;
/* (IDEAL, the simulator's --medium ideal: no queueing anywhere, every message only delayed
 * by latency + bytes/bandwidth; the cost model and the emulation treat it as SWITCHED.) */

/* One directed link a -> b. */
typedef struct {
    double rtt_s;       /* round trip; the one-way latency is half (net_latency_s) */
    double jitter_s;    /* one-way delay varies by +- jitter/2, or (Cluster.jitter
                         * JITTER_HALFNORMAL) by a half-normal extra delay of sigma jitter */
    double bw_Bps;      /* bytes per second (0: unlimited; the simulator needs > 0) */
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

/* The distribution of NetLink.jitter_s: uniform +- jitter/2 (the link emulation's), or a
 * half-normal extra delay of sigma jitter_s (the simulator's link presets). */
typedef enum { JITTER_UNIFORM = 0, JITTER_HALFNORMAL = 1 } JitterShape;
/* How a broadcast spreads, as the simulator models the MPI library's Ibcast: libnbc's rule
 * (linear up to 4 members, else binomial), the root sending to each member in turn, or a
 * binomial tree. */
typedef enum { BCAST_AUTO = 0, BCAST_LINEAR = 1, BCAST_BINOMIAL = 2 } BcastShape;

typedef struct {
    int n;              /* ranks, controller included; workers are 1..n-1 */
    ClusterDevice *dev; /* [n] */
    NetLink *link;      /* [n*n], link[a*n+b] from a to b; NULL only in a planner's view
                         * without links (plan.h: the links unknown) */
    JitterShape jitter; /* every link's */
    BcastShape bcast;   /* the simulator's broadcast */
    char links_name[24]; /* where the links come from ("wifi", "measured", ...; "" unnamed) */
} Cluster;

/* One row of the device catalogue (share/devices.tsv), which headsplit-sim and
 * scripts/emulate-device both read. */
typedef struct {
    ClusterDevice dev;  /* name; speed_Bps, mem_budget (the budget column), load_Bps
                         * (0: unlimited/unknown) */
    size_t mem_limit;   /* usable RAM, the emulator's limit (0: none) */
    double cpu_share;   /* share of the development host's core that computes like the
                         * board (0: unlimited) */
    int cores;          /* cores computing in parallel (1 when unknown) */
    double board_bw_Bps; /* memory bandwidth the cores share (0: unlimited) */
    double idle_w, active_w; /* watts idle / one core busy (0: the energy model's defaults) */
    int draw;           /* 1: headsplit-sim --hetero draws among these rows, in file order */
    char what[96];      /* description */
} CatalogueEntry;

/* Reads the catalogue: '#' comments, rows "NAME SPEED_GBPS CPU CORES BW_GBPS MEM BUDGET_GB
 * LOAD_MBPS IDLE_W ACTIVE_W DRAW DESCRIPTION..." ("max" for no limit, "-" for unknown where the column allows
 * it).
 * *out is malloc'ed ([*n], the caller frees it).  Returns 0, or -1 with err naming the file,
 * line and column. */
int cluster_load_catalogue(const char *path, CatalogueEntry **out, int *n, char *err,
                           size_t errlen);
/* The catalogue's path: $HEADSPLIT_DEVICE_CATALOGUE, else the given default. */
const char *cluster_catalogue_path(const char *fallback);

/* Empty cluster of n ranks: devices zeroed, links zeroed (unlimited, no delay), uniform
 * jitter, BCAST_AUTO, no name. */
void cluster_init(Cluster *cl, int n);
/* Frees what cluster_init allocated; accepts NULL and a zeroed struct. */
void cluster_free(Cluster *cl);
/* The link a -> b. */
static inline NetLink *cluster_link(const Cluster *cl, int a, int b)
{
    return &cl->link[(size_t)a * (size_t)cl->n + (size_t)b];
}
/* Sets the medium of every link (relay and frame overhead kept). */
void cluster_set_medium(Cluster *cl, Medium m);

/* Parses a link description: comma-separated key=value items (rtt=10ms, jitter=2ms,
 * bw=200mbit, frame=0.2ms, medium=shared|switched, relay=ap|none) and presets (wifi: 10 ms
 * RTT, 2 ms jitter, 200 Mbit/s, shared through an AP, 0.2 ms per frame; ethernet: 0.2 ms
 * RTT, 1 Gbit/s, switched),
 * applied left to right so that "wifi,rtt=20ms" changes the preset's RTT.  Times take s, ms
 * (the default) or us; rates bit, kbit, mbit (the default), gbit or MB (bytes).  Returns 0,
 * or -1 with err saying which item is wrong (without a file or option name: callers add
 * theirs). */
int cluster_parse_link(const char *spec, NetLink *out, char *err, size_t errlen);
/* Reads a link matrix file into out[size*size]: lines "SRC DST SPEC" with ranks 0..size-1 or
 * '*' (any rank), '#' comments; later lines override earlier ones; the diagonal is never set.
 * Returns 0, or -1 with err naming the file and line. */
int cluster_load_link_matrix(const char *path, int size, NetLink *out, char *err,
                             size_t errlen);
/* Reads a devices file: lines "RANK mem=SIZE speed=X" for worker ranks 1..size-1 (either
 * key may be left out; '#' comments).  Fills mem[size] (bytes, 0 where not given) and
 * speed[size] (relative to the fastest measured worker, 0 where not given).  Returns 0, or
 * -1 with err naming the file and line. */
int cluster_load_devices(const char *path, int size, size_t *mem, double *speed, char *err,
                         size_t errlen);

/* Measurements are noisy; placement must not change with the noise.  Relative speeds[n]
 * within 30% of each other all become 1.0 (identical boards), others are rounded to 5% of
 * the fastest. */
void cluster_stabilise_speeds(double *speed, int n);
/* One-way latencies lat_ms[size*size]: within a factor 2 (+ 0.05 ms) of each other all
 * become the median (a uniform network), rounded to 0.1 ms; else each is rounded to 0.1 ms.
 * A LAN's 0.1 ms stays (an exchange-heavy plan pays it on every hop: 34 hops a token are
 * 3.4 ms on Gbit ethernet); one host's loopback (under 0.05 ms) rounds to 0.  The diagonal
 * is 0.  The median of an even count is the upper middle value. */
void cluster_stabilise_latencies(double *lat_ms, int size);
/* One-way latency standard deviation (ms) for predictions: the median over links of
 * (p95 - median RTT) / 1.645 / sqrt 2, rounded to 0.1 ms; 0 where the stabilised latencies
 * lat_ms are all 0 (a LAN).  Matrices [size*size]. */
double cluster_latency_sd_ms(const double *rtt_ms, const double *rtt_p95_ms,
                             const double *lat_ms, int size);

#endif
