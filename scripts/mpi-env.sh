# Sourced by the scripts that run mpirun: lets Open MPI run as root (CI, containers) and
# oversubscribe a small machine.  Usage: . scripts/mpi-env.sh; mpirun $MPI_FLAGS -np 5 ...
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# One host (no hostfile given, i.e. HEADSPLIT_HOSTFILE unset): start-up and messages over
# loopback only, no InfiniBand probing noise.  With a hostfile the interfaces are left to the
# command line (docs/real-boards.md: --mca btl_tcp_if_include wlan0 --mca oob_tcp_if_include
# wlan0), so that the boards reach each other over their real network.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
if [ -z "${HEADSPLIT_HOSTFILE:-}" ]; then
  export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  MPI_FLAGS="--oversubscribe --bind-to none"
else
  unset OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include
  MPI_FLAGS="--hostfile $HEADSPLIT_HOSTFILE --bind-to none"
fi
