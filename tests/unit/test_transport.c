/* The transport without MPI (link specs and matrices: test_cluster.c): the in-process base
 * (point-to-point order per tag, broadcast, gatherv layout, allgather, accounting), and the
 * emulation and fault layers' delivery times, the shared channel's queueing (switched, shared,
 * through an access point) and compute dilation's factor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cluster.h"
#include "netmodel.h"
#include "transport.h"
#include "util.h"
#include "wire.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Three ranks as threads. */
enum { N = 3 };

typedef struct {
    InprocWorld *w;
    int rank;
    NetLink *links; /* emulation, or NULL */
    double delivered_after; /* rank 0: seconds from a message's send to its delivery */
    uint64_t bytes, msgs;
    int ok;
} Arg;

static void *collectives(void *p)
{
    Arg *a = p;
    Transport t;
    transport_inproc_init(&t, a->w, a->rank);
    int ok = 1;
    /* Point to point: two tags sent in one order, received in the other. */
    if (a->rank == 1) {
        int x = 11, y = 22;
        TransportReq r1, r2;
        transport_isend(&t, &x, sizeof x, 2, 5, &r1);
        transport_isend(&t, &y, sizeof y, 2, 6, &r2);
        transport_wait(&t, &r1);
        transport_wait(&t, &r2);
    } else if (a->rank == 2) {
        int x = 0, y = 0;
        TransportReq r1, r2;
        transport_irecv(&t, &y, sizeof y, 1, 6, &r2);
        transport_irecv(&t, &x, sizeof x, 1, 5, &r1);
        transport_wait(&t, &r2);
        transport_wait(&t, &r1);
        ok &= x == 11 && y == 22;
    }
    /* A group [2, 0]: broadcast from 2, then a gather at 2 with displacements. */
    TransportGroup *g = transport_group_create(&t, (const int[]){2, 0}, 2);
    ok &= (g != NULL) == (a->rank != 1);
    if (g) {
        double v = a->rank == 2 ? 3.5 : 0;
        TransportReq r;
        transport_ibcast(&t, g, &v, sizeof v, &r);
        transport_wait(&t, &r);
        ok &= v == 3.5;
        int mine[2] = {a->rank * 10, a->rank * 10 + 1}, got[6] = {0};
        const int counts[2] = {(int)sizeof mine, (int)sizeof mine};
        const int displs[2] = {4 * (int)sizeof(int), 0};
        transport_igatherv(&t, g, mine, sizeof mine, got, counts, displs, &r);
        transport_wait(&t, &r);
        if (a->rank == 2) /* member 1 (rank 0) lands at 0, the root at 4 */
            ok &= got[0] == 0 && got[1] == 1 && got[4] == 20 && got[5] == 21;
        transport_group_free(&t, g);
    }
    int all[N] = {0}, me = 100 + a->rank;
    transport_allgather(&t, &me, sizeof me, all);
    for (int r = 0; r < N; r++)
        ok &= all[r] == 100 + r;
    ok &= transport_agree_errors(&t, a->rank == 2 ? "rank 2 is unwell" : NULL) == 1;
    a->bytes = t.bytes_sent;
    a->msgs = t.msgs_sent;
    a->ok = ok;
    transport_finalize(&t);
    return NULL;
}

static void run_threads(Arg *args, void *(*fn)(void *), NetLink *links)
{
    InprocWorld *w = transport_inproc_world(N);
    pthread_t th[N];
    for (int r = 0; r < N; r++) {
        args[r] = (Arg){.w = w, .rank = r, .links = links};
        assert_int_equal(pthread_create(&th[r], NULL, fn, &args[r]), 0);
    }
    for (int r = 0; r < N; r++)
        pthread_join(th[r], NULL);
    transport_inproc_world_free(w);
}

static void test_inproc_collectives(void **state)
{
    (void)state;
    Arg a[N];
    run_threads(a, collectives, NULL);
    for (int r = 0; r < N; r++)
        assert_true(a[r].ok);
    /* Counted: rank 1's two sends; rank 2's broadcast root; rank 0's gather contribution.
     * The allgather and the error agreement are set-up traffic. */
    assert_int_equal(a[1].bytes, 2 * sizeof(int));
    assert_int_equal(a[1].msgs, 2);
    assert_int_equal(a[2].bytes, sizeof(double));
    assert_int_equal(a[0].bytes, 2 * sizeof(int));
    assert_int_equal(a[0].msgs, 1);
}

/* The message forms (src/transport/message.c) over the emulated link: rank 1 sends rank 2
 * [hdr | 4 floats] stamped in place (layer set), rank 2 takes it (delivered: not before the
 * link's one-way time); then a gather of [hdr | rank] at rank 0 from both, each member's
 * header checked and delivered. */
static void *messages(void *p)
{
    Arg *a = p;
    Transport t;
    transport_inproc_init(&t, a->w, a->rank);
    transport_push_emulation(&t, a->links, 1);
    int ok = 1;
    enum { B = sizeof(WireHdr) + 4 * sizeof(float) };
    unsigned char msg[B] = {0};
    WireHdr h = {.cmd = WIRE_STEP, .pos = 9, .n = 1};
    if (a->rank == 1) {
        memcpy(msg, &h, sizeof h);
        for (int i = 0; i < 4; i++)
            ((float *)(void *)(msg + sizeof h))[i] = 0.5f * (float)i;
        transport_msg_send(&t, msg, B, 2, 3, 7);
        WireHdr s;
        memcpy(&s, msg, sizeof s);
        ok &= s.magic == WIRE_MAGIC && s.src == 1 && s.layer == 7 && s.t_send > 0;
    } else if (a->rank == 2) {
        TransportReq r;
        transport_irecv(&t, msg, B, 1, 3, &r);
        WireHdr g = transport_msg_take(&t, &r, msg, B, 1, "test message", 7, NULL);
        ok &= time_now() - g.t_send >= 0.0049; /* rtt=10ms: 5 ms one way at least */
        ok &= g.magic == WIRE_MAGIC && g.cmd == WIRE_STEP && g.flags == 0 && g.pos == 9 &&
              g.src == 1 && g.layer == 7;
        ok &= ((float *)(void *)(msg + sizeof g))[3] == 1.5f;
    }
    TransportGroup *grp = transport_group_create(&t, (const int[]){0, 1, 2}, 3);
    enum { G = sizeof(WireHdr) + sizeof(int) };
    unsigned char mine[G], all[3 * G];
    memcpy(mine, &h, sizeof h);
    memcpy(mine + sizeof h, &a->rank, sizeof(int));
    transport_msg_stamp(&t, mine, 4);
    const int counts[3] = {0, G, G}, displs[3] = {0, 0, G};
    TransportReq r;
    transport_igatherv(&t, grp, mine, a->rank == 0 ? 0 : G, all, counts, displs, &r);
    if (a->rank == 0) {
        transport_msg_gathered(&t, &r, all, counts, displs, 3, 2, "test gather", 4, NULL);
        for (int m = 1; m < 3; m++) {
            WireHdr g;
            int v;
            memcpy(&g, all + displs[m], sizeof g);
            memcpy(&v, all + displs[m] + sizeof g, sizeof v);
            ok &= g.magic == WIRE_MAGIC && g.src == m && g.layer == 4 && v == m;
            ok &= time_now() - g.t_send >= 0.0049;
        }
    } else {
        transport_wait(&t, &r);
    }
    transport_group_free(&t, grp);
    a->bytes = t.bytes_sent;
    a->ok = ok;
    transport_finalize(&t);
    return NULL;
}

static void test_messages(void **state)
{
    (void)state;
    NetLink links[N * N];
    char err[256];
    assert_int_equal(cluster_parse_link("rtt=10ms", &links[0], err, sizeof err), 0);
    for (int i = 1; i < N * N; i++)
        links[i] = links[0];
    Arg a[N];
    run_threads(a, messages, links);
    for (int r = 0; r < N; r++)
        assert_true(a[r].ok);
    /* counted as the operations under them: rank 1's send and its gather contribution */
    assert_int_equal(a[1].bytes, sizeof(WireHdr) + 4 * sizeof(float) + sizeof(WireHdr) +
                                     sizeof(int));
}

/* Rank 1 sends rank 0 a stamped header; rank 0 measures when it counts as delivered. */
static void *delivery(void *p)
{
    Arg *a = p;
    Transport t;
    transport_inproc_init(&t, a->w, a->rank);
    transport_push_emulation(&t, a->links, 1);
    transport_push_faults(&t, 1, 3, 0.05, -1, 0); /* messages of rank 1 at position 3: +50 ms */
    for (int pos = 2; pos <= 3; pos++) {
        WireHdr h = {0};
        TransportReq r;
        if (a->rank == 1) {
            h.cmd = WIRE_STEP;
            h.pos = pos;
            transport_stamp(&t, &h);
            transport_isend(&t, &h, sizeof h, 0, 1, &r);
            transport_wait(&t, &r);
        } else if (a->rank == 0) {
            transport_irecv(&t, &h, sizeof h, 1, 1, &r);
            transport_wait_link(&t, &r, 1, "test message", 0, NULL);
            transport_deliver(&t, &h, sizeof h);
            /* Sleeps never end early: lower bounds only. */
            double after = time_now() - h.t_send;
            if (pos == 2)
                a->delivered_after = after;
            else
                a->ok = after >= 0.0799;
        }
    }
    transport_finalize(&t);
    return NULL;
}

static void test_emulation_and_stall(void **state)
{
    (void)state;
    NetLink links[N * N];
    char err[256];
    assert_int_equal(cluster_parse_link("rtt=60ms", &links[0], err, sizeof err), 0);
    for (int i = 1; i < N * N; i++)
        links[i] = links[0];
    Arg a[N];
    run_threads(a, delivery, links);
    /* One way is half the RTT (no jitter); the stall adds 50 ms to position 3. */
    assert_true(a[0].delivered_after >= 0.0299);
    assert_true(a[0].ok);
}

/* ---- The shared channel: ranks 1..NB-1 (senders) each send 1 MB at once to the next one
 * (1 -> 2 -> ... -> NB-1 -> 1); every receiver records when its message counts as delivered,
 * from a common start.  `senders` of them send; the others only receive. */
enum { NB = 5, MB1 = 1 << 20 };

typedef struct {
    InprocWorld *w;
    int rank, senders;
    const NetLink *links;
    double sent, done; /* when this rank sent its message / took delivery of one (0: none) */
} BurstArg;

static void *burst(void *p)
{
    BurstArg *a = p;
    Transport t;
    transport_inproc_init(&t, a->w, a->rank);
    transport_push_emulation(&t, a->links, 1);
    unsigned char *buf = xcalloc(1, sizeof(WireHdr) + MB1);
    int dst = a->rank == 0 ? -1 : a->rank % (NB - 1) + 1;
    int src = a->rank == 0 ? -1 : a->rank == 1 ? NB - 1 : a->rank - 1;
    int sends = a->rank >= 1 && a->rank <= a->senders;
    int recvs = src >= 1 && src <= a->senders;
    transport_barrier(&t);
    TransportReq rs = {0}, rr = {0};
    unsigned char *in = xcalloc(1, sizeof(WireHdr) + MB1);
    if (recvs)
        transport_irecv(&t, in, sizeof(WireHdr) + MB1, src, 7, &rr);
    if (sends) {
        WireHdr h = {0};
        h.cmd = WIRE_STEP;
        transport_stamp(&t, &h);
        a->sent = h.t_send;
        memcpy(buf, &h, sizeof h);
        transport_isend(&t, buf, sizeof(WireHdr) + MB1, dst, 7, &rs);
    }
    if (recvs) {
        transport_wait(&t, &rr);
        WireHdr h;
        memcpy(&h, in, sizeof h);
        transport_deliver(&t, &h, sizeof(WireHdr) + MB1);
        a->done = time_now();
    }
    transport_wait(&t, &rs);
    transport_barrier(&t);
    free(in);
    free(buf);
    transport_finalize(&t);
    return NULL;
}

/* From the first send to the last delivery of a burst of `senders` messages over links like
 * `spec`. */
static double burst_s(const char *spec, int senders)
{
    NetLink links[NB * NB];
    char err[256];
    assert_int_equal(cluster_parse_link(spec, &links[0], err, sizeof err), 0);
    for (int i = 1; i < NB * NB; i++)
        links[i] = links[0];
    InprocWorld *w = transport_inproc_world(NB);
    pthread_t th[NB];
    BurstArg a[NB];
    for (int r = 0; r < NB; r++) {
        a[r] = (BurstArg){.w = w, .rank = r, .senders = senders, .links = links};
        assert_int_equal(pthread_create(&th[r], NULL, burst, &a[r]), 0);
    }
    double first = INFINITY, last = 0;
    for (int r = 0; r < NB; r++) {
        pthread_join(th[r], NULL);
        last = a[r].done > last ? a[r].done : last;
        if (a[r].sent > 0)
            first = a[r].sent < first ? a[r].sent : first;
    }
    transport_inproc_world_free(w);
    return last - first;
}

/* The channel's schedule: a transmission takes the first gap at or after its send time,
 * even when its receiver books it after later ones (a receiver busy when it was sent). */
static void test_channel_schedule(void **state)
{
    (void)state;
    void *ch = xcalloc(1, transport_channel_size());
    assert_true(transport_channel_book(ch, 0.0, 1.0) == 1.0);  /* [0, 1) */
    assert_true(transport_channel_book(ch, 1.5, 1.0) == 2.5);  /* [1.5, 2.5) */
    assert_true(transport_channel_book(ch, 0.2, 0.5) == 1.5);  /* the gap [1, 1.5) */
    assert_true(transport_channel_book(ch, 0.0, 2.0) == 4.5);  /* after everything */
    /* sent at 10.5, booked after [12, 13): it went out at 11, when [10, 11) ended */
    assert_true(transport_channel_book(ch, 10.0, 1.0) == 11.0);
    assert_true(transport_channel_book(ch, 12.0, 1.0) == 13.0);
    assert_true(transport_channel_book(ch, 10.5, 1.0) == 12.0);
    assert_true(transport_channel_book(ch, 10.5, 1.5) == 14.5); /* no gap of 1.5 before 13 */
    /* a full schedule forgets its oldest transmissions and goes on */
    double end = 0;
    for (int i = 0; i < 2000; i++)
        end = transport_channel_book(ch, 100.0 + i, 0.5);
    assert_true(end == 100.0 + 1999 + 0.5);
    assert_true(fabs(transport_channel_book(ch, 1900.6, 0.25) - 1900.85) < 1e-9); /* a gap */
    free(ch);
}

static void test_shared_channel(void **state)
{
    (void)state;
    /* 1 MB at 100 Mbit/s: 84 ms on the air. */
    const double air = (sizeof(WireHdr) + MB1) / (100e6 / 8);
    double one = burst_s("bw=100mbit,medium=switched", 1);
    double four_sw = burst_s("bw=100mbit,medium=switched", 4);
    double one_sh = burst_s("bw=100mbit,medium=shared", 1);
    double four_sh = burst_s("bw=100mbit,medium=shared", 4);
    double one_ap = burst_s("bw=100mbit,medium=shared,relay=ap", 1);
    double four_ap = burst_s("bw=100mbit,medium=shared,relay=ap", 4);
    print_message("burst of 1 MB at 100 Mbit/s (air %.3f): switched %.3f / %.3f ms, shared "
                  "%.3f / %.3f ms, through an AP %.3f / %.3f ms (1 / 4 senders)\n", air * 1e3,
                  one * 1e3, four_sw * 1e3, one_sh * 1e3, four_sh * 1e3, one_ap * 1e3,
                  four_ap * 1e3);
    /* Sleeps never end early: each is at least its airtime. */
    assert_true(one >= air && one_sh >= air && one_ap >= 2 * air);
    /* Switched: four paths in parallel, about one send (a loaded host may add a little). */
    assert_true(four_sw < 1.5 * one + 0.02);
    /* Shared: the four transmissions queue on one channel.  Through an access point every
     * transmission takes the air twice.  (Lower bounds only: a loaded host delays a
     * receiver, never a delivery's earliest time.) */
    assert_true(four_sh >= 4 * air - 1e-3);
    assert_true(four_ap >= 4 * 2 * air - 1e-3);
    /* The model the planner and the simulator charge is the same. */
    NetLink l;
    char err[256];
    assert_int_equal(cluster_parse_link("bw=100mbit,medium=shared,relay=ap,frame=1ms", &l, err,
                                        sizeof err), 0);
    assert_true(fabs(net_airtime_s(&l, 12.5e6) - 2 * (1.0 + 1e-3)) < 1e-9);
    assert_true(fabs(net_burst_s(&l, 12.5e6, 4) - 8 * (1.0 + 1e-3)) < 1e-9);
    l.medium = MEDIUM_SWITCHED;
    assert_true(fabs(net_burst_s(&l, 12.5e6, 4) - 1.0) < 1e-9);
}

/* ---- Compute dilation: a stretch of work lasts factor x its CPU time. */
static void test_dilation_factor(void **state)
{
    (void)state;
    InprocWorld *w = transport_inproc_world(1);
    Transport t;
    transport_inproc_init(&t, w, 0);
    transport_push_dilation(&t, 4.0);
    assert_true(t.slowdown == 4.0);
    transport_compute(&t, 1);
    double c0 = time_cpu(), w0 = time_now();
    volatile double x = 0;
    while (time_cpu() - c0 < 0.05)
        for (int i = 0; i < 10000; i++)
            x += 1e-9 * i;
    double cpu = time_cpu() - c0;
    transport_compute(&t, 0);
    double wall = time_now() - w0;
    /* The rank slept out 4x its CPU time (or nothing, if a loaded host already took longer). */
    assert_true(wall >= 4.0 * cpu - 1e-3);
    if (t.dilated_s > 0)
        assert_true(wall <= 4.0 * cpu + 0.02);
    assert_true(t.dilated_s <= 3.0 * cpu + 1e-3);
    transport_finalize(&t);
    transport_inproc_world_free(w);
}

/* ---- The board model: arithmetic shared by the board's cores, memory bandwidth by all. */
static void test_dilation_board(void **state)
{
    (void)state;
    const double f = 8, cpu = 0.01, bw = 5.5e9;
    /* One thread, one core: the plain factor. */
    assert_true(fabs(transport_dilation_owed(f, cpu, 0, 1, 1, 0, 0) - 0.08) < 1e-12);
    /* Four threads on a four-core board: a quarter of the time, if memory allows. */
    assert_true(fabs(transport_dilation_owed(f, cpu, 0, 4, 4, 1e6, bw) - 0.02) < 1e-12);
    /* More threads than cores: only the cores count. */
    assert_true(fabs(transport_dilation_owed(f, cpu, 0, 8, 4, 0, bw) - 0.02) < 1e-12);
    /* Streaming 1 GB: the shared bandwidth binds (1 GB / 5.5 GB/s), whatever the threads. */
    assert_true(fabs(transport_dilation_owed(f, cpu, 0, 4, 4, 1e9, bw) - 1e9 / bw) < 1e-12);
    assert_true(fabs(transport_dilation_owed(f, cpu, 0, 1, 4, 1e9, bw) - 1e9 / bw) < 1e-12);
    /* Time already spent counts against what is owed. */
    assert_true(fabs(transport_dilation_owed(f, cpu, 0.05, 1, 1, 0, 0) - 0.03) < 1e-12);
    /* Set on a stack with dilation; streamed bytes reset at every communication point. */
    InprocWorld *w = transport_inproc_world(1);
    Transport t;
    transport_inproc_init(&t, w, 0);
    transport_push_dilation(&t, 8.0);
    transport_set_board(&t, 4, bw, 4);
    transport_compute(&t, 1);
    transport_streamed(&t, 0.11e9); /* 20 ms at 5.5 GB/s */
    assert_true(t.streamed == 0.11e9);
    double w0 = time_now();
    transport_compute(&t, 0);
    assert_true(time_now() - w0 >= 0.02 - 1e-3); /* slept out the bandwidth floor */
    transport_compute(&t, 1);
    assert_true(t.streamed == 0);
    transport_compute(&t, 0);
    transport_finalize(&t);
    transport_inproc_world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inproc_collectives),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_emulation_and_stall),
        cmocka_unit_test(test_channel_schedule),
        cmocka_unit_test(test_shared_channel),
        cmocka_unit_test(test_dilation_factor),
        cmocka_unit_test(test_dilation_board),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
