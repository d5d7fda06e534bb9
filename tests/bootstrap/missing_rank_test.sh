#!/usr/bin/env bash
# A rank that never starts: with WORLD_SIZE=4 and a short deadline, the ranks
# that did start say, after a few seconds and before the deadline, whom they
# wait for and where; then every one of them (rank 0 and the others) fails
# with the real cause, the missing rank, never with "the server closed the
# connection". Then the same with rank 0 (the rendezvous server) missing.
# Usage: missing_rank_test.sh PATH/TO/rendezvous_probe
PROBE=${1:?usage: $0 rendezvous_probe}
source "$(dirname "$0")/lib.sh"

port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
start=$(now_ms)
for r in 0 1 2; do start_rank "r$r" "$r" 4 "$port" OMNICCL_TIMEOUT=9s; done
for r in 0 1 2; do
  if wait_for_text "$TMP/r$r.err" "waiting [0-9]+ s at the rendezvous tcp://127\.0\.0\.1:$port for rank\(s\) 3 to join" 8; then
    ok "rank $r reported the missing rank 3 and the address after $(( ($(now_ms) - start) / 1000 )) s, before the 9 s deadline"
  else
    fail "rank $r said nothing about the missing rank 3 within 8 s"; show "$TMP/r$r.err"
  fi
done
for r in 0 1 2; do
  eval "pid=\$PID_r$r"
  wait "$pid"; rc=$?
  if ((rc == 1)) && grep -q "rank(s) 3 of world size 4 did not join" "$TMP/r$r.err"; then
    ok "rank $r failed with the real cause (rank 3 did not join)"
  else
    fail "rank $r: exit $rc, expected 1 and 'rank(s) 3 of world size 4 did not join'"; show "$TMP/r$r.err"
  fi
  if grep -q "closed the connection" "$TMP/r$r.err"; then
    fail "rank $r reports a closed connection instead of the cause"; show "$TMP/r$r.err"
  fi
done
elapsed=$(( ($(now_ms) - start) / 1000 ))
((elapsed < 20)) && ok "all failed within $elapsed s" || fail "took $elapsed s for a 9 s deadline"

# Rank 0, which serves the rendezvous, never starts.
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
for r in 1 2 3; do start_rank "s$r" "$r" 4 "$port" OMNICCL_TIMEOUT=8s; done
for r in 1 2 3; do
  if wait_for_text "$TMP/s$r.err" "waiting [0-9]+ s for the rendezvous server at tcp://127\.0\.0\.1:$port" 7; then
    ok "rank $r reported that rank 0's server at port $port is not up"
  else
    fail "rank $r said nothing about rank 0's server within 7 s"; show "$TMP/s$r.err"
  fi
done
for r in 1 2 3; do
  eval "pid=\$PID_s$r"
  wait "$pid"; rc=$?
  if ((rc == 1)) && grep -q "could not reach the rendezvous server at tcp://127.0.0.1:$port" "$TMP/s$r.err"; then
    ok "rank $r failed naming the unreachable rendezvous server"
  else
    fail "rank $r: exit $rc, expected 1 and 'could not reach the rendezvous server'"; show "$TMP/s$r.err"
  fi
done
finish missing_rank_test
