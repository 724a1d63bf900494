/* mpi.c: the MPI base transport.  Every communicator has MPI_ERRORS_RETURN and every call's
 * return code goes through MPI_CHECK; MPI_Abort is the fatal hook.  A group is a communicator
 * made with MPI_Comm_create (collective over MPI_COMM_WORLD); a request is an MPI_Request. */
#include "transport_mpi.h"

#include "util.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

_Static_assert(sizeof(MPI_Request) <= sizeof(((TransportReq *)0)->h),
               "an MPI_Request fits in a TransportReq");
_Static_assert(sizeof(MPI_Comm) <= sizeof(void *), "an MPI_Comm fits in a pointer");

/* Checks an MPI return code; fatal with MPI_Error_string's text. */
#define MPI_CHECK(call) mpi_check((call), #call, __FILE__, __LINE__)

static void mpi_check(int rc, const char *what, const char *file, int line)
{
    if (rc == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    util_fatal(file, line, "MPI call %s failed: %s", what, msg);
}

static void abort_hook(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

static MPI_Request *req_of(TransportReq *r) { return (MPI_Request *)(void *)&r->h; }

static MPI_Comm comm_of(const TransportGroup *g)
{
    if (!g)
        return MPI_COMM_WORLD;
    MPI_Comm c;
    memcpy(&c, &g->impl, sizeof c);
    return c;
}

static void posted(TransportReq *r) { r->active = *req_of(r) != MPI_REQUEST_NULL; }

static int mpi_group_create(void *self, TransportGroup *g)
{
    (void)self;
    MPI_Group world, grp;
    MPI_Comm out;
    MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_CHECK(MPI_Group_incl(world, g->n, g->members, &grp));
    MPI_CHECK(MPI_Comm_create(MPI_COMM_WORLD, grp, &out));
    if (out != MPI_COMM_NULL)
        MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN);
    MPI_Group_free(&grp);
    MPI_Group_free(&world);
    g->impl = NULL;
    if (g->me >= 0)
        memcpy(&g->impl, &out, sizeof out);
    return 0;
}

static void mpi_group_free(void *self, TransportGroup *g)
{
    (void)self;
    MPI_Comm c = comm_of(g);
    if (c != MPI_COMM_NULL)
        MPI_Comm_free(&c);
}

static void mpi_isend(void *self, const void *buf, size_t bytes, int dst, int tag,
                      TransportReq *r)
{
    (void)self;
    MPI_CHECK(MPI_Isend(buf, (int)bytes, MPI_BYTE, dst, tag, MPI_COMM_WORLD, req_of(r)));
    posted(r);
}

static void mpi_irecv(void *self, void *buf, size_t bytes, int src, int tag, TransportReq *r)
{
    (void)self;
    MPI_CHECK(MPI_Irecv(buf, (int)bytes, MPI_BYTE, src, tag, MPI_COMM_WORLD, req_of(r)));
    posted(r);
}

static void mpi_ibcast(void *self, TransportGroup *g, void *buf, size_t bytes, TransportReq *r)
{
    (void)self;
    MPI_CHECK(MPI_Ibcast(buf, (int)bytes, MPI_BYTE, 0, comm_of(g), req_of(r)));
    posted(r);
}

static void mpi_igatherv(void *self, TransportGroup *g, const void *sbuf, size_t bytes,
                         void *rbuf, const int *counts, const int *displs, TransportReq *r)
{
    (void)self;
    MPI_CHECK(MPI_Igatherv(sbuf, (int)bytes, MPI_BYTE, rbuf, counts, displs, MPI_BYTE, 0,
                           comm_of(g), req_of(r)));
    posted(r);
}

static void mpi_iallgather(void *self, const void *sbuf, size_t bytes, void *rbuf,
                           TransportReq *r)
{
    (void)self;
    MPI_CHECK(MPI_Iallgather(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE,
                             MPI_COMM_WORLD, req_of(r)));
    posted(r);
}

static int mpi_test(void *self, TransportReq *r)
{
    (void)self;
    int done = 0;
    MPI_CHECK(MPI_Test(req_of(r), &done, MPI_STATUS_IGNORE));
    if (done)
        r->active = 0;
    return done;
}

static void mpi_finalize(void *self)
{
    (void)self;
    MPI_Finalize();
}

static const TransportOps mpi_ops = {
    .name = "mpi",
    .group_create = mpi_group_create,
    .group_free = mpi_group_free,
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .ibcast = mpi_ibcast,
    .igatherv = mpi_igatherv,
    .iallgather = mpi_iallgather,
    .test = mpi_test,
    .finalize = mpi_finalize,
};

int transport_mpi_launch_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

void transport_mpi_init(Transport *t, int *argc, char ***argv)
{
    int rank, size, provided;
    /* --serve's slots drive the engine from whichever slot thread runs a step, one thread
     * at a time (serve_slots.c) */
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    transport_init(t, rank, size, &mpi_ops, NULL);
    util_set_rank(rank);
    util_set_fatal_hook(abort_hook);
    /* Short sleeps must be short: the default 50 us timer slack would dominate them. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}
