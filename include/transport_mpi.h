/* transport_mpi.h: the MPI base transport.  Only src/transport/ and the application's own
 * start-up code include this (and through it <mpi.h>); the engine sees transport.h. */
#ifndef HEADSPLIT_TRANSPORT_MPI_H
#define HEADSPLIT_TRANSPORT_MPI_H

#include "transport.h"

#include <mpi.h>

/* Checks an MPI return code; fatal with MPI_Error_string's text. */
#define MPI_CHECK(call) transport_mpi_check((call), #call, __FILE__, __LINE__)
void transport_mpi_check(int rc, const char *what, const char *file, int line);

/* MPI_Init, errors-return on MPI_COMM_WORLD, MPI_Abort as the fatal hook, and t over
 * MPI_COMM_WORLD (transport_finalize ends with MPI_Finalize). */
void transport_mpi_init(Transport *t, int *argc, char ***argv);
/* Waits for a request of the caller's own MPI calls (sleeping, without a deadline). */
void transport_mpi_wait(Transport *t, MPI_Request *req);

#endif
