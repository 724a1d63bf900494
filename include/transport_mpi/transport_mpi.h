/* transport_mpi.h: the MPI base transport, as the application's start-up code sees it.  It
 * names nothing of MPI: <mpi.h> is included by src/transport/mpi.c alone, so that no other
 * file reaches it, not even through this header. */
#ifndef HEADSPLIT_TRANSPORT_MPI_H
#define HEADSPLIT_TRANSPORT_MPI_H

#include "transport.h"

/* MPI_Init, errors-return on MPI_COMM_WORLD, MPI_Abort as the fatal hook, and t over
 * MPI_COMM_WORLD (transport_finalize ends with MPI_Finalize). */
void transport_mpi_init(Transport *t, int *argc, char ***argv);

/* This process's rank as its launcher (mpirun, srun) set it in the environment, read before
 * MPI_Init; 0 when started without one. */
int transport_mpi_launch_rank(void);

#endif
