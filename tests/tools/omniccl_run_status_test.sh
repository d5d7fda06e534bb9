#!/usr/bin/env bash
# omniccl-run: exit status, failure reporting, the --grace period and the
# SIGTERM -> SIGKILL escalation for the surviving ranks, exec failures,
# reaping, more ranks than cores.
source "$(dirname "$0")/lib.sh" "$@"

# All ranks succeed: status 0 and nothing on stderr.
run ok -n 4 -- true
expect_rc ok 0
expect_eq "ok: stderr empty" "" "$(cat "$TMP/ok.err")"

# More ranks than cores, each busy for a moment.
run many -n 8 -- bash -c 'for ((k = 0; k < 20000; k++)); do :; done; sleep 0.2; echo "done $RANK"'
expect_rc many 0
expect_eq "many: 8 ranks finished" 8 "$(grep -c 'done' "$TMP/many.out")"
run many64 -n 64 -- bash -c 'echo "$RANK/$WORLD_SIZE"'
expect_rc many64 0
expect_eq "many64: 64 ranks" "$(seq 0 63 | tr '\n' ' ')" \
  "$(sed 's/.* \([0-9]*\)\/64$/\1/' "$TMP/many64.out" | sort -n | tr '\n' ' ')"

# One rank exits 3; the survivors keep running until --grace 1 is over, then
# get SIGTERM. Status 3 and a message naming the rank.
mkdir "$TMP/grace"
export D="$TMP/grace"
run grace -n 4 --grace 1 -- bash -c '
  echo $$ >"$D/pid.$RANK"
  if [ "$RANK" = 2 ]; then sleep 0.3; exit 3; fi
  exec sleep 30'
expect_rc grace 3
expect_contains grace "$TMP/grace.err" "omniccl-run: rank 2 exited with status 3"
expect_contains grace "$TMP/grace.err" "ranks 0, 1, 3; sending SIGTERM"
expect_not_contains grace "$TMP/grace.err" "SIGKILL"
expect_elapsed grace 1200 10000
expect_dead grace "$D"/pid.{0,1,3}

# Survivors that ignore SIGTERM get SIGKILL 5 s later.
mkdir "$TMP/stubborn"
export D="$TMP/stubborn"
run stubborn -n 3 --grace 1 -- bash -c '
  echo $$ >"$D/pid.$RANK"
  if [ "$RANK" = 0 ]; then exit 3; fi
  trap "" TERM
  exec sleep 30'
expect_rc stubborn 3
expect_contains stubborn "$TMP/stubborn.err" "omniccl-run: rank 0 exited with status 3"
expect_contains stubborn "$TMP/stubborn.err" "5 s after SIGTERM: ranks 1, 2; sending SIGKILL"
expect_elapsed stubborn 5500 15000
expect_dead stubborn "$D"/pid.{1,2}

# Survivors that exit by themselves within the grace period are left alone
# (no SIGTERM), and their output arrives.
run selfexit -n 3 --grace 20 -- bash -c '
  if [ "$RANK" = 1 ]; then exit 3; fi
  sleep 1; echo survived; exit 1'
expect_rc selfexit 3
expect_contains selfexit "$TMP/selfexit.out" "[0] survived"
expect_contains selfexit "$TMP/selfexit.out" "[2] survived"
expect_contains selfexit "$TMP/selfexit.err" "omniccl-run: rank 1 exited with status 3"
expect_contains selfexit "$TMP/selfexit.err" "omniccl-run: rank 0 exited with status 1"
expect_not_contains selfexit "$TMP/selfexit.err" "; sending SIGTERM"
expect_elapsed selfexit 900 10000

# The first failure decides the status.
run first -n 2 --grace 20 -- bash -c 'if [ "$RANK" = 1 ]; then exit 5; fi; sleep 1; exit 7'
expect_rc first 5

# --grace 0: the survivors get SIGTERM at once.
run grace0 -n 2 --grace 0 -- bash -c 'if [ "$RANK" = 1 ]; then exit 4; fi; exec sleep 30'
expect_rc grace0 4
expect_elapsed grace0 0 4000

# A rank killed by a signal: "killed by signal N (NAME)", status 128+N.
run killed -n 3 -- bash -c 'if [ "$RANK" = 1 ]; then kill -KILL $$; fi; sleep 0.2'
expect_rc killed 137
expect_contains killed "$TMP/killed.err" "omniccl-run: rank 1 killed by signal 9 (SIGKILL)"
run usr1 -n 2 -- bash -c 'if [ "$RANK" = 0 ]; then kill -USR1 $$; fi; sleep 0.2'
expect_rc usr1 138
expect_contains usr1 "$TMP/usr1.err" "omniccl-run: rank 0 killed by signal 10 (SIGUSR1)"

# The last output of a failing rank comes before the message about it.
run order -n 1 -- bash -c 'echo last words >&2; exit 9'
expect_rc order 9
expect_file_eq order "$TMP/order.err" "[0] last words
omniccl-run: rank 0 exited with status 9"

# PROGRAM that cannot be executed: 127 (not found) / 126 (not executable).
run notfound -n 2 -- /nonexistent/omniccl-test-program
expect_rc notfound 127
expect_contains notfound "$TMP/notfound.err" "cannot execute '/nonexistent/omniccl-test-program'"
run notfound2 -n 2 -- omniccl-no-such-program-on-path
expect_rc notfound2 127
printf '#!/bin/sh\necho hi\n' >"$TMP/noexec.sh"
chmod -x "$TMP/noexec.sh"
run noexec -n 2 -- "$TMP/noexec.sh"
expect_rc noexec 126
expect_contains noexec "$TMP/noexec.err" "Permission denied"

# Ranks are reaped as soon as they exit (no zombie while the job runs).
mkdir "$TMP/reap"
export D="$TMP/reap"
run reap -n 2 -- bash -c '
  if [ "$RANK" = 0 ]; then echo $$ >"$D/pid.0"; exit 0; fi
  for ((k = 0; k < 50; k++)); do [ -s "$D/pid.0" ] && break; sleep 0.1; done
  sleep 1.5
  p=$(cat "$D/pid.0")
  stat=$(cat /proc/$p/stat 2>/dev/null); stat=${stat##*) }
  echo "state of rank 0: ${stat%% *}"'
expect_rc reap 0
expect_contains reap "$TMP/reap.out" "[1] state of rank 0: "
expect_not_contains reap "$TMP/reap.out" "state of rank 0: Z"

finish
