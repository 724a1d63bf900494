#!/usr/bin/env bash
# check-layering.sh: the layering test (ctest "layering"): no MPI outside the transport layer,
# no wrong-direction include, every header in the layer table, no HDF5 in the planner and
# simulator headers.  The rules, the table and the PENDING exemptions are in
# scripts/check_layering.py.
#   scripts/check-layering.sh [--root DIR]    check the tree
#   scripts/check-layering.sh --self-test     check that planted violations are caught
set -euo pipefail
if ! command -v python3 > /dev/null 2>&1; then
  echo "SKIP: check-layering needs python3 (apt-get install python3)"
  exit 77
fi
exec python3 "$(dirname "$0")/check_layering.py" "$@"
