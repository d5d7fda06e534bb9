#!/usr/bin/env bash
# omniccl-run: -h/--help, and bad usage exits with 2 and a clear message
# (starting nothing).
source "$(dirname "$0")/lib.sh" "$@"

for flag in -h --help; do
  run help "$flag"
  expect_rc help 0
  expect_contains "help $flag" "$TMP/help.out" "Usage: omniccl-run -n N [options] [--] PROGRAM [ARGS...]"
  expect_contains "help $flag" "$TMP/help.out" "--nproc-per-node"
  expect_contains "help $flag" "$TMP/help.out" "--grace SECONDS"
  expect_contains "help $flag" "$TMP/help.out" "--timeout SECONDS"
  expect_eq "help $flag: stderr empty" "" "$(cat "$TMP/help.err")"
done
run help2 -n 2 --help true
expect_rc help2 0
expect_eq "help2: nothing started" "Usage:" "$(head -c 6 "$TMP/help2.out")"

# bad_usage NAME EXPECTED_MESSAGE ARGS...: expects status 2, the message on
# stderr, the --help hint, and no output from a rank.
bad_usage() {
  local name=$1 message=$2
  shift 2
  run "$name" "$@"
  expect_rc "$name" 2
  expect_contains "$name" "$TMP/$name.err" "omniccl-run: error: $message"
  expect_contains "$name" "$TMP/$name.err" "Try 'omniccl-run --help'"
  expect_eq "$name: no rank output" "" "$(cat "$TMP/$name.out")"
}

bad_usage noargs "missing -n N"
bad_usage no_n "missing -n N" echo started
bad_usage n_novalue "option -n needs a value" -n
bad_usage n_zero "-n: 0 is out of range; it must be between 1 and 1024" -n 0 echo started
bad_usage n_big "-n: 1025 is out of range" -n 1025 echo started
bad_usage n_huge "-n: 99999999999999999999 is out of range" -n 99999999999999999999 echo started
bad_usage n_neg "-n: -1 is out of range" -n -1 echo started
bad_usage n_text "-n: 'four' is not a whole number" -n four echo started
bad_usage n_frac "--nproc: '2.5' is not a whole number" --nproc=2.5 echo started
bad_usage n_empty "--nproc-per-node: '' is not a whole number" --nproc-per-node= echo started
bad_usage noprog "missing PROGRAM" -n 2
bad_usage noprog2 "missing PROGRAM" -n 2 --
bad_usage unknown "unknown option '--bogus'" -n 2 --bogus echo started
bad_usage unknown_short "unknown option '-x'" -n 2 -x echo started
bad_usage list "unknown option '--list-settings'" --list-settings
bad_usage grace_neg "--grace: -1 is out of range" -n 2 --grace -1 echo started
bad_usage grace_text "--grace: 'soon' is not a number of seconds" -n 2 --grace soon echo started
bad_usage timeout_zero "--timeout: 0 is out of range" -n 2 --timeout 0 echo started
bad_usage timeout_inf "--timeout: 'inf' is not a number of seconds" -n 2 --timeout inf echo started
bad_usage port_big "--master-port: 70000 is out of range" -n 2 --master-port 70000 echo started
bad_usage port_zero "--master-port: 0 is out of range" -n 2 --master-port 0 echo started
bad_usage addr_empty "--master-addr: the address is empty" -n 2 --master-addr= echo started
bad_usage noprefix_value "option --no-prefix takes no value" -n 2 --no-prefix=1 echo started

# The limits themselves are accepted.
run n1 -n 1 -- echo started
expect_rc n1 0
expect_file_eq n1 "$TMP/n1.out" "[0] started"

# '--' lets PROGRAM start with '-'.
ln -s "$(type -P echo)" "$TMP/-dash-prog"
PATH="$TMP:$PATH" timeout -k 5 60 "$RUN" -n 1 -- -dash-prog hello >"$TMP/dash.out" 2>"$TMP/dash.err"
RC=$?
expect_rc dash 0
expect_file_eq dash "$TMP/dash.out" "[0] hello"

finish
