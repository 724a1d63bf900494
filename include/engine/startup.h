/* startup.h: the start-up's collectives: every rank's model checked against rank 0's, the
 * link emulation set up, the cluster measured (speed probe, RTTs, budgets, devices file)
 * into one ClusterInputs, and the few values the app shares between ranks (the speculation
 * mask, energy readings, the exit status).  Built on the transport interface
 * (src/engine/startup.c); src/app/ calls these and no MPI. */
#ifndef HEADSPLIT_STARTUP_H
#define HEADSPLIT_STARTUP_H

#include "transport.h"
#include "config.h"
#include "inputs.h"

#include <stddef.h>
#include <stdint.h>

/* What the measuring phase takes from the command line. */
typedef struct {
    const char *emulate_link; /* uniform link spec (--emulate-link) or NULL */
    const char *link_matrix;  /* per-pair link file (--link-matrix) or NULL */
    const char *devices_file; /* --devices or NULL */
    uint64_t seed;            /* emulation jitter */
    int rtt_pings;
    double timeout_s;
    double slowdown;          /* --emulate-slowdown (0: HEADSPLIT_DEVICE_SLOWDOWN, else 1) */
    size_t mem_budget;        /* --mem-budget (0: HEADSPLIT_DEVICE_MEM_BYTES, else none) */
    double assume_rtt_ms;     /* < 0: plan with the measured RTTs */
    int stall_rank, stall_pos; /* --inject-stall */
    double stall_s;
    int kill_rank, kill_pos;  /* --inject-kill */
} StartupOptions;

/* Returns 1 on every rank if any rank's err is non-empty (rank 0 prints the first one as
 * "headsplit: error: [rank r] ..."); a single process prints its own. */
int startup_agree(Transport *cm, const char *err);
/* All ranks must hold the same model: a checksum of the configuration and the file's size,
 * compared with rank 0's.  Returns 1 on every rank when one differs (rank 0 has said which). */
int startup_check_model(Transport *cm, const ModelConfig *c, const char *path);

/* Collective over every rank: sets up link emulation (a bad link description on any rank
 * is agreed on), deadlines, dilation and the test aids on cm, measures RTTs and every rank's speed (one rank at a time), gathers budgets,
 * reads the devices file at rank 0 and derives the planner's inputs (inputs_derive) into
 * *ci (inputs_free it).  Returns 0; 2 on a bad link description; 1 on another error; every
 * rank returns the same and rank 0 has printed the one message. */
int startup_measure(ClusterInputs *ci, Transport *cm, const ModelConfig *c,
                    const StartupOptions *o);

/* A single process (no startup_measure): the compute dilation of the board it emulates on
 * cm, as startup_measure sets it on every rank of a distributed run, so that its stretches
 * of work between transport_compute points last as on the board.  Returns the factor (1:
 * none). */
double startup_single_board(Transport *cm, const StartupOptions *o);

/* Rank 0's err and mask[n] to every rank: 1 on every rank when err is non-empty at any rank
 * (printed by rank 0), else 0 with mask equal everywhere. */
int startup_share_mask(Transport *cm, unsigned char *mask, int n, const char *err);
/* Every rank's value at every rank (all[size]). */
void startup_gather_double(Transport *cm, double mine, double *all);
/* Rank 0's exit status to every rank. */
int startup_share_status(Transport *cm, int rc);

#endif
