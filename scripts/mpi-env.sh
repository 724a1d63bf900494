# Sourced by the scripts that run mpirun: lets Open MPI run as root (CI, containers) and
# oversubscribe a small machine.  Usage: . scripts/mpi-env.sh; mpirun $MPI_FLAGS -np 5 ...
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Loopback only on one host; no InfiniBand probing noise.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI_FLAGS="--oversubscribe --bind-to none"
