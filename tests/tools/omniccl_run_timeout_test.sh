#!/usr/bin/env bash
# omniccl-run --timeout: the job is stopped after the time limit, the ranks
# still running are named, the status is 124.
source "$(dirname "$0")/lib.sh" "$@"

mkdir "$TMP/t"
export D="$TMP/t"
run t -n 3 --timeout 1 -- bash -c '
  echo $$ >"$D/pid.$RANK"
  if [ "$RANK" = 0 ]; then exit 0; fi
  exec sleep 30'
expect_rc t 124
expect_contains t "$TMP/t.err" "omniccl-run: timeout: the job ran longer than 1 s; still running: ranks 1, 2"
expect_elapsed t 900 6000
expect_dead t "$D"/pid.{1,2}

# Fractional seconds; a single rank.
run frac -n 1 --timeout 0.5 -- sleep 30
expect_rc frac 124
expect_contains frac "$TMP/frac.err" "still running: rank 0;"
expect_elapsed frac 400 5000

# Ranks that ignore SIGTERM are SIGKILLed 5 s later; still 124.
run stubborn -n 2 --timeout=1 -- bash -c 'trap "" TERM; exec sleep 30'
expect_rc stubborn 124
expect_contains stubborn "$TMP/stubborn.err" "sending SIGKILL"
expect_elapsed stubborn 5500 15000

# A job that ends in time is not affected, whatever its status.
run intime -n 2 --timeout 20 -- bash -c 'sleep 0.2; exit 0'
expect_rc intime 0
expect_elapsed intime 0 5000
run intime_fail -n 2 --timeout 20 -- bash -c 'exit 3'
expect_rc intime_fail 3
expect_not_contains intime_fail "$TMP/intime_fail.err" "timeout"

# The timeout also ends a --grace period that would last longer.
run graceover -n 2 --grace 30 --timeout 1 -- bash -c 'if [ "$RANK" = 0 ]; then exit 3; fi; exec sleep 30'
expect_rc graceover 124
expect_contains graceover "$TMP/graceover.err" "omniccl-run: rank 0 exited with status 3"
expect_contains graceover "$TMP/graceover.err" "still running: rank 1;"
expect_elapsed graceover 900 6000

finish
