/* The transport without MPI (link specs and matrices: test_cluster.c): the in-process base
 * (point-to-point order per tag, broadcast, gatherv layout, allgather, accounting), and the
 * emulation and fault layers' delivery times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cluster.h"
#include "transport.h"
#include "util.h"
#include "wire.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inproc_collectives),
        cmocka_unit_test(test_emulation_and_stall),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
