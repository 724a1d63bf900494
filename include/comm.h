/* comm.h: every MPI call of the engine goes through here: error checking, waiting without
 * spinning, deadlines from the measured RTT, link emulation and message accounting.  Kernels
 * and the model layer never include <mpi.h>. */
#ifndef HEADSPLIT_COMM_H
#define HEADSPLIT_COMM_H

#include "wire.h"

#include <jansson.h>
#include <mpi.h>
#include <stdint.h>

/* Checks an MPI return code; fatal with MPI_Error_string's text. */
#define MPI_CHECK(call) comm_check((call), #call, __FILE__, __LINE__)
void comm_check(int rc, const char *what, const char *file, int line);

typedef enum { WAIT_SLEEP = 0, WAIT_SPIN = 1 } WaitMode;

/* One directed link of the emulated network. */
typedef struct {
    double rtt_s;    /* round trip; one way is half */
    double jitter_s; /* one-way delay varies uniformly by +- jitter/2 */
    double bw_Bps;   /* bytes per second (0: unlimited) */
} Link;

/* Per-peer counters of deadline misses. */
typedef struct {
    uint64_t misses;  /* waits that passed their deadline */
    uint64_t retries; /* deadline extensions granted (waited for again) */
    double max_wait_s;
} LinkStats;

typedef struct {
    int rank, size;
    WaitMode wait_mode;
    uint64_t bytes_sent;   /* payload bytes this rank put on the wire */
    uint64_t msgs_sent;
    double wait_s;         /* wall time spent waiting for communication */
    uint64_t waits;
    /* Link emulation (NULL: real network). */
    Link *emu;             /* [size*size], emu[src*size+dst] */
    uint64_t emu_rng;
    /* Stall injection for tests: messages sent by stall_rank at position stall_pos are
     * delayed by stall_s more. */
    int stall_rank, stall_pos;
    double stall_s;
    /* Fault injection for tests: this rank kills itself (SIGKILL) on the first message of
     * position kill_pos when kill_rank is its rank. */
    int kill_rank, kill_pos;
    /* Measured RTT (ms): median and p95 per pair, filled by comm_measure_rtt. */
    double *rtt_ms, *rtt_p95_ms; /* [size*size] */
    double margin;         /* deadline margin over the measured RTT (0.15) */
    double timeout_s;      /* hard timeout of one wait in the token loop */
    int max_retries;
    LinkStats *links;      /* [size] by peer */
    /* The last wait (comm_deliver's emulated transit counts against its timeout). */
    double wait_t0, wait_limit_s; /* limit 0: a set-up wait without a timeout */
    const char *wait_what;
    int wait_layer;
    /* Compute dilation (device emulation, comm_dilate_start): this rank stands for a device
     * `dilate` times slower than its host core. */
    double dilate;          /* factor (<= 1: off) */
    int dilate_on;
    double dil_cpu0, dil_wall0; /* start of the current stretch of work */
    double dilated_s;       /* wall time added by dilation */
} Comm;

/* MPI_Init, errors-return on MPI_COMM_WORLD, MPI_Abort as the fatal hook. */
void comm_init(Comm *cm, int *argc, char ***argv);
void comm_finalize(Comm *cm);

/* Parses "rtt=10ms,jitter=2ms,bw=200mbit" into a uniform link; -1 with err. */
int comm_parse_link(const char *spec, Link *out, char *err, size_t errlen);
/* Reads a per-pair matrix file: lines "SRC DST rtt=..,jitter=..,bw=.." ('*' for any rank),
 * later lines override earlier ones; -1 with err naming the file and line. */
int comm_load_link_matrix(const char *path, int size, Link *out, char *err, size_t errlen);
/* Turns on emulation with the given matrix ([size*size], copied). */
void comm_set_emulation(Comm *cm, const Link *links, uint64_t seed);

/* Waits for a request with a bounded sleeping back-off (or spinning): set-up waits without a
 * deadline. */
void comm_wait(Comm *cm, MPI_Request *req);
/* Token-loop wait for data from peer: deadline = measured one-way time with the margin plus
 * twice the recent wait at this site; a miss is counted and waited for again up to
 * max_retries; past timeout_s the run ends naming this rank, the peer and what it waited
 * for.  *ewma keeps the site's recent wait.
 * Who reports first: a message known to be held on an emulated link past timeout_s is
 * reported at timeout_s by its receiver; a worker's plain wait allows 10% + 0.2 s more and
 * the controller's (it waits on the whole pipeline) 25% + 0.5 s more, so that a fault is
 * named by the rank next to it rather than by ranks waiting on that rank. */
void comm_wait_link(Comm *cm, MPI_Request *req, int peer, const char *what, int layer,
                    double *ewma);

/* Compute dilation: from now on every stretch of work between two communication points
 * (the end of a wait, and the next wait or stamped send) lasts `dilate` times its CPU time
 * of wall time; the rank sleeps out the difference before it sends or waits.  A rank then
 * computes like a device `dilate` times slower with memory of its own: a sleeping rank
 * uses no host core, so concurrent ranks do not slow each other as CPU quotas on a shared
 * host would (as long as the host has a core per dilate-th of the ranks).  No-op when
 * cm->dilate <= 1. */
void comm_dilate_start(Comm *cm);
void comm_dilate_stop(Comm *cm);

/* Fills the header of an outgoing message (src, time of sending; dilation paid first). */
void comm_stamp(Comm *cm, WireHdr *h);
/* After a message from h->src has arrived: sleeps until the emulated link would have
 * delivered bytes of it (no-op without emulation). */
void comm_deliver(Comm *cm, const WireHdr *h, size_t bytes);

/* Ping-pongs between every pair of ranks (n each), collective over MPI_COMM_WORLD; fills
 * rtt_ms / rtt_p95_ms on every rank. */
void comm_measure_rtt(Comm *cm, int n);
/* JSON: rtt_ms matrix (median), rtt_p95_ms, and this rank's link stats. */
json_t *comm_rtt_json(const Comm *cm);
void comm_print_rtt(const Comm *cm, FILE *out);

/* Gathers every rank's error string (empty = fine) at rank 0; rank 0 prints the first one
 * as the single message of the run.  Returns 1 on every rank if any rank failed. */
int comm_agree_errors(Comm *cm, MPI_Comm comm, const char *local_err);

/* Creates a communicator over world ranks members[0..n) in that order (collective over
 * MPI_COMM_WORLD: every rank calls it with the same list).  MPI_COMM_NULL for non-members. */
MPI_Comm comm_create(const int *members, int n);

#endif
