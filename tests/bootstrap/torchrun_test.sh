#!/usr/bin/env bash
# torchrun itself (not faked variables) starts an unchanged OmniCCL program:
#   1. plain torchrun (static rendezvous: its agent store listens on
#      MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True);
#   2. torchrun --standalone;
#   3. two "nodes": two torchrun agents, --nnodes 2 --node_rank 0/1.
# torchrun comes from Debian's python3-torch for /usr/bin/python3 (.ci/run
# installs it; option names with underscores, which every torchrun accepts).
# Where it is missing the test says so and exits 77, which
# CTest reports as skipped.
# Usage: torchrun_test.sh PATH/TO/rendezvous_probe
PROBE=${1:?usage: $0 rendezvous_probe}
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
if ! [[ -x $PY ]] || ! timeout 120 "$PY" -c "import torch.distributed.run" >"$TMP/import.log" 2>&1; then
  echo "SKIP: torchrun is not available ($PY -m torch.distributed.run: $(tail -n 1 "$TMP/import.log" 2>/dev/null));" \
       "install it with: apt-get install python3-torch (.ci/run does)"
  exit 77
fi
# Debian 12's torch 1.13 on Python 3.11 cannot parse its own default
# --redirects/--tee "0" (Python 3.11 no longer iterates the zero member of an
# IntFlag, so torch gets None and fails before starting a worker). Values
# 1 (stdout to a log file, teed to the terminal) parse everywhere; stderr is
# left alone either way.
torchrun() { timeout 120 "$PY" -m torch.distributed.run --redirects 1 --tee 1 "$@"; }
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT OMNICCL_JOB_ID
export OMNICCL_TIMEOUT=60s

# check NAME N RC: N "probe rank R of N ok" lines in $TMP/NAME.out and RC 0.
check() {
  local name=$1 n=$2 rc=$3 got
  got=$(grep -c "probe rank [0-9]* of $n ok" "$TMP/$name.out")
  if ((rc == 0 && got == n)); then
    ok "$name: $n ranks ran (exit 0)"
  else
    fail "$name: exit $rc, $got of $n ranks ok"; show "$TMP/$name.out"; show "$TMP/$name.err"
  fi
}

port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
torchrun --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" --no_python "$PROBE" \
  >"$TMP/plain.out" 2>"$TMP/plain.err"
check plain 2 $?

torchrun --standalone --nproc_per_node 2 --no_python "$PROBE" >"$TMP/standalone.out" 2>"$TMP/standalone.err"
check standalone 2 $?

port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
for node in 0 1; do
  torchrun --nnodes 2 --node_rank "$node" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" \
    --no_python "$PROBE" >"$TMP/node$node.out" 2>"$TMP/node$node.err" &
  PIDS+=($!)
  eval "PID_node$node=$!"
done
wait "$PID_node0"; rc0=$?
wait "$PID_node1"; rc1=$?
cat "$TMP/node0.out" "$TMP/node1.out" >"$TMP/nodes.out"
cat "$TMP/node0.err" "$TMP/node1.err" >"$TMP/nodes.err"
check nodes 4 $((rc0 | rc1))
finish torchrun_test
