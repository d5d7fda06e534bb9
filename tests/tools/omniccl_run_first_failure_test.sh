#!/usr/bin/env bash
# omniccl-run names the rank that failed first by time, not the first one
# reaped: a rank that says it is failing (one line "RANK MONOTONIC_NS" on
# OMNICCL_RUN_FAILURE_FD, as OmniCCL's Python package does for an uncaught
# exception) counts from then, even when the ranks it took down exit before
# it. Without reports, the first rank to exit is the first failure.
source "$(dirname "$0")/lib.sh" "$@"

# Rank 2 reports its failure (at monotonic time 1 ns: before anything else),
# then takes 1.5 s to exit with 3; rank 1 exits with 5 at once, as a rank
# would that lost its peer.
run reported -n 3 --grace 10 -- bash -c '
  if [ "$RANK" = 2 ]; then echo "2 1" >&"$OMNICCL_RUN_FAILURE_FD"; sleep 1.5; exit 3; fi
  if [ "$RANK" = 1 ]; then sleep 0.2; exit 5; fi
  sleep 3; exit 6'
expect_rc reported 3
expect_contains reported "$TMP/reported.err" "omniccl-run: rank 1 exited with status 5"
expect_contains reported "$TMP/reported.err" "omniccl-run: rank 2 exited with status 3"
expect_eq "reported: last line names rank 2" "omniccl-run: rank 2 failed first (exited with status 3)" \
  "$(tail -n 1 "$TMP/reported.err")"

# No reports: the first rank to exit is the first failure (rank 1, by 1 s).
run unreported -n 3 --grace 10 -- bash -c '
  if [ "$RANK" = 2 ]; then sleep 1.2; kill -KILL $$; fi
  if [ "$RANK" = 1 ]; then sleep 0.2; exit 5; fi
  sleep 2; exit 0'
expect_rc unreported 5
expect_contains unreported "$TMP/unreported.err" "omniccl-run: rank 2 killed by signal 9 (SIGKILL)"
expect_eq "unreported: last line names rank 1" "omniccl-run: rank 1 failed first (exited with status 5)" \
  "$(tail -n 1 "$TMP/unreported.err")"

# OMNICCL_RUN_FAILURE_PIPE names the descriptor's pipe, as /proc shows it.
run pipe -n 2 -- bash -c '[ "$(readlink /proc/self/fd/$OMNICCL_RUN_FAILURE_FD)" = "$OMNICCL_RUN_FAILURE_PIPE" ] && echo same'
expect_rc pipe 0
expect_eq "pipe: both ranks see the named pipe" 2 "$(grep -c same "$TMP/pipe.out")"

# Garbage on the report descriptor is ignored.
run garbage -n 2 -- bash -c 'echo "nonsense 7" >&"$OMNICCL_RUN_FAILURE_FD"; echo "9 5" >&"$OMNICCL_RUN_FAILURE_FD"; exit 0'
expect_rc garbage 0

# Each job gets its own OMNICCL_JOB_ID (the same for all its ranks); one that
# is set is kept.
run jobid -n 3 -- bash -c 'echo "id=$OMNICCL_JOB_ID"'
expect_eq "jobid: one id for the job" 1 "$(sed 's/^\[[0-9]\] //' "$TMP/jobid.out" | sort -u | wc -l)"
expect_contains jobid "$TMP/jobid.out" "id=omniccl-run:"
cp "$TMP/jobid.out" "$TMP/jobid1.out"
run jobid -n 1 -- bash -c 'echo "id=$OMNICCL_JOB_ID"'
[[ "$(sed 's/^\[0\] //' "$TMP/jobid.out")" != "$(sed 's/^\[0\] //' "$TMP/jobid1.out" | head -n 1)" ]] &&
  ok "jobid: a second job gets another id" || fail "jobid: two jobs got the same id"
OMNICCL_JOB_ID=mine run jobid -n 1 -- bash -c 'echo "id=$OMNICCL_JOB_ID"'
expect_contains jobid "$TMP/jobid.out" "[0] id=mine"
finish
