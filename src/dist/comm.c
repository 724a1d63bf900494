/* comm.c: MPI initialisation, checked calls, sleeping waits and agreement on errors. */
#include "comm.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

void comm_check(int rc, const char *what, const char *file, int line)
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

void comm_init(Comm *cm, int *argc, char ***argv)
{
    memset(cm, 0, sizeof *cm);
    MPI_Init(argc, argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &cm->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &cm->size));
    util_set_rank(cm->rank);
    util_set_fatal_hook(abort_hook);
    /* Short sleeps must be short: the default 50 us timer slack would dominate them. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

void comm_finalize(Comm *cm)
{
    /* A sleeping barrier first, so ranks that finish early do not spin in MPI_Finalize. */
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    MPI_Finalize();
}

void comm_wait(Comm *cm, MPI_Request *req)
{
    double t0 = time_now();
    int done = 0;
    long sleep_ns = 2000;
    cm->waits++;
    for (int spins = 0;; spins++) {
        MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done)
            break;
        if (cm->wait_mode == WAIT_SPIN || spins < 16)
            continue;
        /* Bounded back-off: 2 us doubling to 200 us, well under one layer's work. */
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 200000)
            sleep_ns *= 2;
    }
    cm->wait_s += time_now() - t0;
}

#define ERR_LEN 512

int comm_agree_errors(Comm *cm, MPI_Comm comm, const char *local_err)
{
    int size, rank;
    MPI_CHECK(MPI_Comm_size(comm, &size));
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    char mine[ERR_LEN] = {0};
    if (local_err)
        snprintf(mine, sizeof mine, "%s", local_err);
    char *all = rank == 0 ? xcalloc((size_t)size, ERR_LEN) : NULL;
    MPI_Request req;
    MPI_CHECK(MPI_Igather(mine, ERR_LEN, MPI_CHAR, all, ERR_LEN, MPI_CHAR, 0, comm, &req));
    comm_wait(cm, &req);
    int failed = 0;
    if (rank == 0) {
        int nfail = 0, first = -1;
        for (int r = 0; r < size; r++)
            if (all[(size_t)r * ERR_LEN]) {
                if (first < 0)
                    first = r;
                nfail++;
            }
        if (first >= 0) {
            fprintf(stderr, "headsplit: error: [rank %d] %s", first,
                    all + (size_t)first * ERR_LEN);
            if (nfail > 1)
                fprintf(stderr, " (and %d more rank%s failed)", nfail - 1, nfail > 2 ? "s" : "");
            fputc('\n', stderr);
            failed = 1;
        }
        free(all);
    }
    MPI_CHECK(MPI_Ibcast(&failed, 1, MPI_INT, 0, comm, &req));
    comm_wait(cm, &req);
    return failed;
}

MPI_Comm comm_create(const int *members, int n)
{
    MPI_Group world, g;
    MPI_Comm out;
    MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_CHECK(MPI_Group_incl(world, n, members, &g));
    MPI_CHECK(MPI_Comm_create(MPI_COMM_WORLD, g, &out));
    if (out != MPI_COMM_NULL)
        MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN);
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    return out;
}
