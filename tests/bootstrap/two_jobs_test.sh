#!/usr/bin/env bash
# Two jobs on one MASTER_PORT. Job A (2 ranks) runs and holds its
# communicator for a while. Job B starts on the same port:
#   - B's rank 0 fails at once naming the taken port and how to choose another;
#   - B's rank 1 never joins A's rendezvous: with job ids (omniccl-run sets
#     OMNICCL_JOB_ID) it is told the rendezvous belongs to another job; without
#     any, that A's rendezvous has already completed. Both at once, not after
#     the deadline (OMNICCL_TIMEOUT=60s here).
# Job A still succeeds.
# Usage: two_jobs_test.sh PATH/TO/rendezvous_probe
PROBE=${1:?usage: $0 rendezvous_probe}
source "$(dirname "$0")/lib.sh"

for mode in with_ids without_ids; do
  port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
  if [[ $mode == with_ids ]]; then ida=(OMNICCL_JOB_ID=job-A); idb=(OMNICCL_JOB_ID=job-B); want="belongs to another job"
  else ida=(-u OMNICCL_JOB_ID); idb=(-u OMNICCL_JOB_ID); want="has already completed without rank 1"; fi
  start_rank a0 0 2 "$port" "${ida[@]}" PROBE_HOLD_MS=8000 OMNICCL_TIMEOUT=60s
  start_rank a1 1 2 "$port" "${ida[@]}" PROBE_HOLD_MS=8000 OMNICCL_TIMEOUT=60s
  if ! wait_for_text "$TMP/a1.out" "probe rank 1 of 2 ok" 30; then
    fail "$mode: job A did not start"; show "$TMP/a0.err"; show "$TMP/a1.err"; continue
  fi
  t0=$(now_ms)
  start_rank b0 0 2 "$port" "${idb[@]}" OMNICCL_TIMEOUT=60s
  start_rank b1 1 2 "$port" "${idb[@]}" OMNICCL_TIMEOUT=60s
  wait "$PID_b0"; rc0=$?
  wait "$PID_b1"; rc1=$?
  took=$(( ($(now_ms) - t0) / 1000 ))
  if ((rc0 == 1)) && grep -q "port $port on 127.0.0.1 is already in use" "$TMP/b0.err" &&
     grep -q "MASTER_PORT=<another port>" "$TMP/b0.err" && grep -q "omniccl-run, which picks a free port" "$TMP/b0.err"; then
    ok "$mode: job B's rank 0 names the taken port $port and how to choose another"
  else
    fail "$mode: job B's rank 0: exit $rc0"; show "$TMP/b0.err"
  fi
  if ((rc1 == 1)) && grep -q "$want" "$TMP/b1.err"; then
    ok "$mode: job B's rank 1 did not join job A's rendezvous ($want)"
  else
    fail "$mode: job B's rank 1: exit $rc1, expected '$want'"; show "$TMP/b1.err"
  fi
  ((took < 8)) && ok "$mode: job B failed within $took s" || fail "$mode: job B took $took s to fail"
  wait "$PID_a0"; ra0=$?
  wait "$PID_a1"; ra1=$?
  ((ra0 == 0 && ra1 == 0)) && ok "$mode: job A finished normally" ||
    { fail "$mode: job A exit $ra0/$ra1"; show "$TMP/a0.err"; show "$TMP/a1.err"; }
done
finish two_jobs_test
