/* transport.h: how the engine's ranks talk, behind a small table of functions (as ggml's
 * backends or distributed-llama's synchronizers).  A base transport moves bytes: MPI
 * (transport_mpi.h) or N threads of one process (transport_inproc_*).  Layers stack on it
 * and act at its hooks: link emulation, compute dilation, fault and stall injection.  The
 * front functions below dispatch to the stack and keep what every transport shares: byte and
 * message accounting, waits without spinning, deadlines from the measured RTT, and the run's
 * end naming the rank that stalled.  No MPI type appears here. */
#ifndef HEADSPLIT_TRANSPORT_H
#define HEADSPLIT_TRANSPORT_H

#include "cluster.h"
#include "wire.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct Transport Transport;

/* Ranks that broadcast or gather together; member 0 is the root.  Built collectively. */
typedef struct {
    int n;
    int *members; /* [n] ranks in group order */
    int me;       /* this rank's index, -1 when not a member (then the group is not built) */
    void *impl;
} TransportGroup;

/* A pending operation; the base keeps its handle inside (no allocation per message). */
typedef struct {
    union {
        void *p;
        uint64_t u[2];
    } h;
    int active; /* 0: complete or never posted (waiting returns at once) */
} TransportReq;

typedef enum { WAIT_SLEEP = 0, WAIT_SPIN = 1 } WaitMode;

/* Per-peer counters of deadline misses. */
typedef struct {
    uint64_t misses;  /* waits that passed their deadline */
    uint64_t retries; /* deadline extensions granted (waited for again) */
    double max_wait_s;
} LinkStats;

/* One entry of the stack.  A base implements the communication entries (collective ones
 * over all ranks; a broadcast's or gather's root is group member 0); a layer leaves them NULL
 * and implements hooks, each called top of the stack first.  Every entry may be NULL. */
typedef struct {
    const char *name;
    int (*group_create)(void *self, TransportGroup *g); /* 0, or -1 (fatal) */
    void (*group_free)(void *self, TransportGroup *g);
    void (*isend)(void *self, const void *buf, size_t bytes, int dst, int tag, TransportReq *r);
    void (*irecv)(void *self, void *buf, size_t bytes, int src, int tag, TransportReq *r);
    void (*ibcast)(void *self, TransportGroup *g, void *buf, size_t bytes, TransportReq *r);
    void (*igatherv)(void *self, TransportGroup *g, const void *sbuf, size_t bytes, void *rbuf,
                     const int *counts, const int *displs, TransportReq *r);
    void (*iallgather)(void *self, const void *sbuf, size_t bytes, void *rbuf, TransportReq *r);
    int (*test)(void *self, TransportReq *r); /* 1 when complete (r->active cleared) */
    /* Brackets work that ranks sharing one process must not do at once (HDF5 reads, unless
     * the library is thread-safe); NULL where ranks are processes. */
    void (*exclusive)(void *self, int on);
    void (*finalize)(void *self);
    /* Hooks. */
    void (*on_send)(void *self, Transport *t);   /* a message is being stamped */
    void (*on_wait)(void *self, Transport *t);   /* a wait begins */
    void (*on_resume)(void *self, Transport *t); /* a wait or a delivery has ended */
    void (*on_compute)(void *self, Transport *t, int on); /* the token loop starts / ends */
    /* A message from h->src has arrived: may move *target (the time it counts as delivered,
     * starting at h->t_send); returns 1 when the receiver must wait until *target. */
    int (*deliver)(void *self, Transport *t, const WireHdr *h, size_t bytes, double *target);
    void (*free)(void *self);
} TransportOps;

enum { TRANSPORT_MAX_LAYERS = 6 };

struct Transport {
    int rank, size;
    WaitMode wait_mode;
    /* Accounting: payload bytes and messages this rank put on the wire in the token loop. */
    uint64_t bytes_sent, msgs_sent, waits;
    double wait_s;           /* wall time spent waiting */
    /* Deadlines: measured RTT (ms, median and p95 per pair, transport_measure_rtt). */
    double *rtt_ms, *rtt_p95_ms; /* [size*size] */
    double margin;           /* deadline margin over the measured RTT (0.15) */
    double timeout_s;        /* hard timeout of one wait in the token loop (10 s) */
    int max_retries;         /* deadline extensions per wait (20) */
    LinkStats *links;        /* [size] by peer */
    /* The wait in progress (a delivery's emulated transit counts against its timeout). */
    double wait_t0, wait_limit_s; /* limit 0: a set-up wait without a timeout */
    const char *wait_what;
    int wait_layer;
    /* Written by the dilation layer, read by the metrics: the factor, the seconds slept to
     * stretch work to the board's time, the board's time for that work (board_s), and the
     * seconds the host itself took beyond it (host_over_s: the host's cores or memory were
     * slower than the board emulated, so the run's times are the host's, not the board's). */
    double slowdown, dilated_s, board_s, host_over_s;
    /* Emulated links: seconds deliveries were noticed after they were due (and after the
     * wait began): the host's scheduling, which real boards on their own cores do not pay. */
    double late_s;
    /* Bytes of weights and KV cache the work since the last communication point streamed
     * (transport_streamed; the dilation layer's board model reads and resets it). */
    double streamed;
    const NetLink *emulated; /* [size*size] the emulation layer's links, or NULL */
    int n_layers;
    struct {
        const TransportOps *ops;
        void *self;
    } layer[TRANSPORT_MAX_LAYERS]; /* [0] the base, then the layers bottom up */
};

/* Sets up the front over a base (rank, size; deadlines at their defaults). */
void transport_init(Transport *t, int rank, int size, const TransportOps *base, void *self);
/* Adds a layer on top. */
void transport_push(Transport *t, const TransportOps *ops, void *self);
/* A sleeping barrier, then every layer's and the base's clean-up. */
void transport_finalize(Transport *t);

/* Groups from member lists (collective: every rank calls with the same list).  NULL for a
 * rank outside the group. */
TransportGroup *transport_group_create(Transport *t, const int *members, int n);
void transport_group_free(Transport *t, TransportGroup *g);

/* Token-loop operations, counted: a send counts its bytes, a broadcast's root counts one
 * message per other member, a gather's non-root member counts its contribution. */
void transport_isend(Transport *t, const void *buf, size_t bytes, int dst, int tag,
                     TransportReq *r);
void transport_irecv(Transport *t, void *buf, size_t bytes, int src, int tag, TransportReq *r);
void transport_ibcast(Transport *t, TransportGroup *g, void *buf, size_t bytes,
                      TransportReq *r);
void transport_igatherv(Transport *t, TransportGroup *g, const void *sbuf, size_t bytes,
                        void *rbuf, const int *counts, const int *displs, TransportReq *r);
/* Set-up and control over all ranks, not counted, waited for at once (sleeping). */
void transport_bcast_all(Transport *t, void *buf, size_t bytes); /* from rank 0 */
void transport_allgather(Transport *t, const void *sbuf, size_t bytes, void *rbuf);
void transport_barrier(Transport *t);

/* Waits without a deadline (bounded sleeping back-off, or spinning). */
void transport_wait(Transport *t, TransportReq *r);
/* Token-loop wait for data from peer: deadline = measured one-way time with the margin plus
 * twice the recent wait at this site (*ewma); a miss is counted and waited for again up to
 * max_retries; past timeout_s the run ends naming this rank, the peer and what it waited
 * for.  A worker's wait allows 10% + 0.2 s more and the controller's 25% + 0.5 s more, so
 * that a fault is named by the rank next to it. */
void transport_wait_link(Transport *t, TransportReq *r, int peer, const char *what, int layer,
                         double *ewma);

/* Fills an outgoing header (magic, src, send time) after the layers' send hooks. */
void transport_stamp(Transport *t, WireHdr *h);
/* After a message with header h (bytes long) has arrived: the layers' delivery rules (the
 * receiver sleeps until the emulated link would have delivered it). */
void transport_deliver(Transport *t, const WireHdr *h, size_t bytes);

/* Messages of the token loop: a WireHdr, then the payload (src/transport/message.c).
 * transport_msg_stamp stamps the header at the front of msg in place (transport_stamp; its
 * layer set where layer >= 0) and returns it; transport_msg_send stamps msg and sends its
 * bytes to dst, waiting for the send; transport_msg_wait waits for a message posted into msg
 * from peer with the deadline (transport_wait_link: what, layer, ewma) and returns its
 * header, the magic checked (a mismatch ends the run naming the layer, what and the peer);
 * transport_msg_take also lets the link deliver it, bytes long (transport_deliver). */
WireHdr transport_msg_stamp(Transport *t, void *msg, int layer);
void transport_msg_send(Transport *t, void *msg, size_t bytes, int dst, int tag, int layer);
WireHdr transport_msg_wait(Transport *t, TransportReq *r, const void *msg, int peer,
                           const char *what, int layer, double *ewma);
WireHdr transport_msg_take(Transport *t, TransportReq *r, const void *msg, size_t bytes,
                           int peer, const char *what, int layer, double *ewma);
/* A gather's root: waits for the gather posted into buf (the n members' messages at displs,
 * counts bytes each; member 0, the root's own, not read) with the deadline of its last
 * member peer, then checks each message's magic and lets the link deliver it. */
void transport_msg_gathered(Transport *t, TransportReq *r, const unsigned char *buf,
                            const int *counts, const int *displs, int n, int peer,
                            const char *what, int layer, double *ewma);
/* The token loop begins / ends (compute dilation counts from here). */
void transport_compute(Transport *t, int on);
/* Enters (on = 1) or leaves the section in which one rank at a time loads weights. */
void transport_exclusive(Transport *t, int on);

/* Ping-pongs between every pair of ranks (n each), collective; fills rtt_ms / rtt_p95_ms. */
void transport_measure_rtt(Transport *t, int n);
json_t *transport_rtt_json(const Transport *t);
void transport_print_rtt(const Transport *t, FILE *out);
/* Every rank's error string (empty: fine); rank 0 prints the first as the run's single
 * message.  Returns 1 on every rank if any rank failed. */
int transport_agree_errors(Transport *t, const char *local_err);

/* Layers (layers.c).  Emulation (the network model of netmodel.h): every message from a to
 * b is delivered one-way latency (rtt/2 +- jitter/2) after its transmission ends: bytes over
 * bandwidth after it was sent on a switched link; on a shared medium its airtime queued on
 * one channel that every rank's transmissions take in turn (a page of shared memory; links
 * [size*size] copied).  Collective (every rank, the same links) when a link is shared.
 * Dilation: each stretch of work between two communication points lasts factor x its CPU time
 * (<= 1: none).  Faults: messages from stall_rank at position stall_pos arrive
 * stall_s late (once); kill_rank kills itself on the first message of kill_pos (-1: none). */
void transport_push_emulation(Transport *t, const NetLink *links, uint64_t seed);
/* The shared channel's schedule (layers.c; exposed for its unit test): a zeroed block of
 * transport_channel_size() bytes is an idle channel; booking `air` seconds for a
 * transmission sent at `ready` takes the first long enough gap at or after it and returns
 * the transmission's end. */
size_t transport_channel_size(void);
double transport_channel_book(void *channel, double ready, double air);
void transport_push_dilation(Transport *t, double factor);
/* The emulated board behind the dilation: `cores` cores computing in parallel and the memory
 * bandwidth bw_Bps they share; `threads` the kernel threads the rank runs.  A stretch of work
 * then lasts max(factor x CPU time / min(threads, cores), bytes streamed / bw_Bps): threads
 * speed up arithmetic up to the board's cores, never past its memory.  cores <= 1 and
 * bw_Bps 0: the plain factor x CPU time.  After transport_push_dilation. */
void transport_set_board(Transport *t, int cores, double bw_Bps, int threads);
/* The work since the last communication point streamed `bytes` (weights, KV cache). */
void transport_streamed(Transport *t, double bytes);
/* The board model's arithmetic: seconds a stretch of cpu_s CPU time (all threads) and
 * `bytes` streamed must still last after wall_s have passed (<= 0: none). */
double transport_dilation_owed(double factor, double cpu_s, double wall_s, int threads,
                               int cores, double bytes, double bw_Bps);
void transport_push_faults(Transport *t, int stall_rank, int stall_pos, double stall_s,
                           int kill_rank, int kill_pos);

/* Link specs and matrix files are parsed by cluster_parse_link / cluster_load_link_matrix
 * (include/proto/cluster.h). */

/* The in-process base (inproc.c): n ranks as n threads of one process, each with
 * its own Transport over a shared world.  Messages are copied into the receiver's mailbox (a
 * list under a mutex, with a condition variable that a waiting receiver sleeps on). */
typedef struct InprocWorld InprocWorld;
InprocWorld *transport_inproc_world(int n);
void transport_inproc_world_free(InprocWorld *w);
/* Sets up rank's transport in w (call from any thread before that rank starts). */
void transport_inproc_init(Transport *t, InprocWorld *w, int rank);

#endif
