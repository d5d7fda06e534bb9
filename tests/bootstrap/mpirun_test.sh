#!/usr/bin/env bash
# The Open MPI command of docs/launchers.md starts 4 ranks on any machine, 2 cores
# included: MASTER_ADDR=... MASTER_PORT=... mpirun -n 4 --oversubscribe
# -x MASTER_ADDR -x MASTER_PORT PROGRAM. Skipped (exit 77, saying why) where
# Open MPI's mpirun is not installed.
# Usage: mpirun_test.sh PATH/TO/rendezvous_probe
PROBE=${1:?usage: $0 rendezvous_probe}
source "$(dirname "$0")/lib.sh"
if ! command -v mpirun >/dev/null || ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
  echo "SKIP: Open MPI's mpirun is not installed (apt-get install openmpi-bin)"
  exit 77
fi
root=()
[[ $(id -u) == 0 ]] && root=(--allow-run-as-root)  # Open MPI refuses root otherwise
# Open MPI's own traffic on loopback only: the runtime's messages between mpirun and the ranks
# (oob) and its byte transfer layers (btl); the ranks' own go to MASTER_ADDR, 127.0.0.1.
loopback=(--mca oob_tcp_if_include lo --mca btl self,tcp --mca btl_tcp_if_include lo)
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMNICCL_TIMEOUT=60s timeout 120 \
  mpirun "${root[@]}" -n 4 --oversubscribe "${loopback[@]}" -x MASTER_ADDR -x MASTER_PORT -x OMNICCL_TIMEOUT \
  "$PROBE" \
  >"$TMP/mpi.out" 2>"$TMP/mpi.err"
rc=$?
n=$(grep -c "probe rank [0-3] of 4 ok" "$TMP/mpi.out")
if ((rc == 0 && n == 4)); then
  ok "mpirun -n 4 --oversubscribe: 4 ranks ran"
else
  fail "mpirun: exit $rc, $n of 4 ranks ok"; show "$TMP/mpi.out"; show "$TMP/mpi.err"
fi
finish mpirun_test
