/* netmodel.h: the one network model that the link emulation (src/transport/layers.c), the
 * analytic cost model (src/plan/cost.c) and the simulator (src/sim/des.c) all charge.
 *
 * A message of B bytes on link l occupies the medium for its airtime: B / bandwidth on a
 * switched link (each pair its own full-duplex path, no queueing), and on a shared medium
 * (one half-duplex channel per network: WiFi) B / bandwidth plus the per-transmission
 * overhead frame_s, twice over when an access point relays it (station -> AP -> station).
 * Transmissions on a shared medium queue behind each other: one starts at
 * max(ready, channel free) and frees the channel airtime later; the message counts as
 * delivered one-way latency (rtt/2) after its transmission ends.  Pure, header only. */
#ifndef HEADSPLIT_NETMODEL_H
#define HEADSPLIT_NETMODEL_H

#include "cluster.h"

/* One-way latency of l in seconds: half its round trip. */
static inline double net_latency_s(const NetLink *l) { return 0.5 * l->rtt_s; }

/* 1 when transmissions on l queue on one channel. */
static inline int net_is_shared(const NetLink *l) { return l->medium == MEDIUM_SHARED; }

/* Seconds a message of `bytes` occupies the medium of l (0 bandwidth: unlimited). */
static inline double net_airtime_s(const NetLink *l, double bytes)
{
    double s = l->bw_Bps > 0 ? bytes / l->bw_Bps : 0;
    if (!net_is_shared(l))
        return s;
    return (s + l->frame_s) * (l->relay_ap ? 2.0 : 1.0);
}

/* Seconds until the last of n messages of `bytes` each, all ready at once, has been
 * transmitted (latency not included): n airtimes queued on a shared medium, one on a
 * switched one (each on its own path). */
static inline double net_burst_s(const NetLink *l, double bytes, int n)
{
    if (n <= 0)
        return 0;
    return net_airtime_s(l, bytes) * (net_is_shared(l) ? (double)n : 1.0);
}

/* A transmission ready at `ready` on a shared channel free at *free_at: returns when it ends
 * and advances *free_at to that time. */
static inline double net_queue_s(double *free_at, double ready, double airtime)
{
    double start = ready > *free_at ? ready : *free_at;
    *free_at = start + airtime;
    return *free_at;
}

#endif
