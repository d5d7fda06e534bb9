#!/usr/bin/env bash
# Re-initialising on the same port right after a destroy: 3 ranks create a
# communicator on one fixed MASTER_PORT, all_reduce, destroy it, and do it
# again at once, 25 times (rank 0 serves every rendezvous on that port, the
# others may come back before rank 0's previous server is gone). Every round
# must succeed, each well within its deadline (OMNICCL_TIMEOUT=20s). Then
# the same with a split in every round.
# Usage: reinit_test.sh PATH/TO/rendezvous_probe
PROBE=${1:?usage: $0 rendezvous_probe}
source "$(dirname "$0")/lib.sh"

rounds=25
for mode in plain split; do
  port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
  extra=(PROBE_REPEAT=$rounds OMNICCL_TIMEOUT=20s)
  [[ $mode == split ]] && extra+=(PROBE_SPLIT=1)
  t0=$(now_ms)
  for r in 0 1 2; do start_rank "$mode$r" "$r" 3 "$port" "${extra[@]}"; done
  for r in 0 1 2; do
    eval "pid=\$PID_$mode$r"
    wait "$pid"; rc=$?
    n=$(grep -c "probe rank $r of 3 ok" "$TMP/$mode$r.out")
    if ((rc == 0 && n == rounds)); then
      ok "$mode: rank $r completed $n rounds on port $port"
    else
      fail "$mode: rank $r: exit $rc after $n of $rounds rounds"; show "$TMP/$mode$r.err"
    fi
  done
  took=$(( $(now_ms) - t0 ))
  # 25 rounds take about a second; one round that waits out its deadline
  # (20 s) shows up here even if it then succeeds.
  ((took < 15000)) && ok "$mode: $rounds rounds took $took ms" || fail "$mode: $rounds rounds took $took ms (limit 15000)"
done
finish reinit_test
