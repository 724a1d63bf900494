/* comm.h: every MPI call of the engine goes through here: error checking, waiting without
 * spinning, message accounting.  Kernels and the model layer never include <mpi.h>. */
#ifndef HEADSPLIT_COMM_H
#define HEADSPLIT_COMM_H

#include <mpi.h>
#include <stdint.h>

/* Checks an MPI return code; fatal with MPI_Error_string's text. */
#define MPI_CHECK(call) comm_check((call), #call, __FILE__, __LINE__)
void comm_check(int rc, const char *what, const char *file, int line);

typedef enum { WAIT_SLEEP = 0, WAIT_SPIN = 1 } WaitMode;

typedef struct {
    int rank, size;
    WaitMode wait_mode;
    uint64_t bytes_sent;   /* payload bytes this rank put on the wire */
    uint64_t msgs_sent;
    double wait_s;         /* wall time spent waiting for communication */
    uint64_t waits;
} Comm;

/* MPI_Init, errors-return on MPI_COMM_WORLD, MPI_Abort as the fatal hook. */
void comm_init(Comm *cm, int *argc, char ***argv);
void comm_finalize(Comm *cm);

/* Waits for a request: MPI_Test with a bounded sleeping back-off (WAIT_SLEEP) or a busy loop
 * (WAIT_SPIN).  Every wait of the engine goes through here. */
void comm_wait(Comm *cm, MPI_Request *req);

/* Gathers every rank's error string (empty = fine) at rank 0; rank 0 prints the first one
 * as the single message of the run.  Returns 1 on every rank if any rank failed. */
int comm_agree_errors(Comm *cm, MPI_Comm comm, const char *local_err);

/* Creates a communicator over world ranks members[0..n) in that order (collective over
 * MPI_COMM_WORLD: every rank calls it with the same list).  MPI_COMM_NULL for non-members. */
MPI_Comm comm_create(const int *members, int n);

#endif
