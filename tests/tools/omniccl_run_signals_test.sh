#!/usr/bin/env bash
# omniccl-run: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the launcher reach
# every rank exactly once; a second SIGINT kills the ranks; Ctrl-Z/fg stop and
# resume them; ranks die with a SIGKILLed launcher; signals ignored at start
# stay ignored.
source "$(dirname "$0")/lib.sh" "$@"

# Job control on, so background jobs of this script do not start with SIGINT
# and SIGQUIT ignored (what a non-interactive shell does without it).
set -m 2>/dev/null

# start_job NAME N PROGRAM_SCRIPT [OPTIONS...]: starts omniccl-run -n N in the
# background on `bash -c PROGRAM_SCRIPT` with D=$TMP/NAME, waits until N
# ranks have created $D/ready.*; sets JOB to the launcher's pid.
start_job() {
  local name=$1 n=$2 script=$3
  shift 3
  export D="$TMP/$name"
  mkdir -p "$D"
  "$RUN" -n "$n" "$@" -- bash -c "$script" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  JOB=$!
  if ! wait_for_files "$n" "$D/ready."; then
    fail "$name: ranks did not start"
    show "$TMP/$name.err"
  fi
}

# Each forwarded signal, caught by every rank, which then exits with a code.
# The ranks nap with `sleep & wait`, not a foreground `sleep`: bash runs a
# SIGINT trap that arrives during a foreground command only if that command
# died of SIGINT too, and one that had just finished its nap when the
# signal came did not (most likely how a rank of fwd_INT never saw it in
# one CI run of many: the launcher said it forwarded SIGINT to all three).
for spec in TERM:7 HUP:0 QUIT:4 INT:6; do
  sig=${spec%%:*}
  code=${spec##*:}
  name=fwd_$sig
  start_job "$name" 3 "trap 'echo got-$sig; exit $code' $sig; touch \"\$D/ready.\$RANK\"; while :; do sleep 0.1 & wait \$!; done"
  kill -"$sig" "$JOB"
  wait_pid_bounded "$JOB" 20
  expect_rc "$name" "$code"
  for i in 0 1 2; do
    expect_eq "$name: rank $i got SIG$sig once" 1 "$(grep -cxF "[$i] got-$sig" "$TMP/$name.out")"
  done
  expect_contains "$name" "$TMP/$name.err" "omniccl-run: received SIG$sig; forwarding it to ranks 0, 1, 2"
done

# Ctrl-C twice: the first SIGINT is forwarded (the ranks catch it and go on),
# the second kills them all with SIGKILL.
start_job twice 3 "trap 'echo got-INT' INT; touch \"\$D/ready.\$RANK\"; while :; do sleep 0.1 & wait \$!; done"
kill -INT "$JOB"
for ((tries = 0; tries < 100; tries++)); do
  (($(grep -c got-INT "$TMP/twice.out") >= 3)) && break
  sleep 0.1
done
expect_eq "twice: each rank got the first SIGINT" 3 "$(grep -c got-INT "$TMP/twice.out")"
sleep 0.3
kill -0 "$JOB" 2>/dev/null && ok "twice: job survives the first SIGINT" || fail "twice: job ended after the first SIGINT"
kill -INT "$JOB"
wait_pid_bounded "$JOB" 20
expect_rc twice 137
expect_contains twice "$TMP/twice.err" "second SIGINT: killing ranks 0, 1, 2 with SIGKILL"
expect_contains twice "$TMP/twice.err" "(press Ctrl-C again to kill them)"

# Ctrl-Z: SIGTSTP stops the ranks and the launcher; SIGCONT resumes them.
start_job tstp 2 "echo \$\$ >\"\$D/pid.\$RANK\"; touch \"\$D/ready.\$RANK\"; for ((k = 0; k < 20; k++)); do sleep 0.1; done; echo finished"
kill -TSTP "$JOB"
for ((tries = 0; tries < 50; tries++)); do
  [[ "$(proc_state "$JOB")$(proc_state "$(cat "$D/pid.0")")$(proc_state "$(cat "$D/pid.1")")" == TTT ]] && break
  sleep 0.1
done
expect_eq "tstp: launcher and ranks stopped" "TTT" \
  "$(proc_state "$JOB")$(proc_state "$(cat "$D/pid.0")")$(proc_state "$(cat "$D/pid.1")")"
sleep 2.5  # longer than the ranks' own run time: they must not have finished
expect_not_contains tstp "$TMP/tstp.out" "finished"
kill -CONT "$JOB"
wait_pid_bounded "$JOB" 20
expect_rc tstp 0
expect_contains tstp "$TMP/tstp.out" "[0] finished"
expect_contains tstp "$TMP/tstp.out" "[1] finished"

set +m
# A SIGKILLed launcher takes its ranks along (no orphans).
start_job orphan 3 "echo \$\$ >\"\$D/pid.\$RANK\"; touch \"\$D/ready.\$RANK\"; exec sleep 30"
kill -KILL "$JOB"
wait "$JOB" 2>/dev/null
expect_dead orphan "$D"/pid.{0,1,2}

# SIGINT ignored when the launcher starts (a background job without job
# control) stays ignored, for the launcher and for the ranks.
start_job ignored 2 "trap 'echo got-INT' INT; touch \"\$D/ready.\$RANK\"; for ((k = 0; k < 15; k++)); do sleep 0.1; done; echo finished"
kill -INT "$JOB"
wait_pid_bounded "$JOB" 20
expect_rc ignored 0
expect_eq "ignored: both ranks finished" 2 "$(grep -c finished "$TMP/ignored.out")"
expect_not_contains ignored "$TMP/ignored.out" "got-INT"
expect_not_contains ignored "$TMP/ignored.err" "received SIGINT"

finish
