#!/usr/bin/env bash
# Ranks started without omniccl-run (by hand, or as mpirun, srun and torchrun
# start them) that are ended by SIGTERM, SIGINT or SIGHUP remove the
# shared-memory segments they hold, and still die by the signal:
#   (a) link setup: 4 ranks have made their segments, rank 3 is stopped at
#       its first connect to a peer (the stall_connect shim); ranks 0-3 get
#       SIGTERM, SIGINT, SIGHUP, SIGTERM;
#   (b) a split: 3 ranks have made the split's segments, rank 2 is stopped
#       at its first connect of the split; SIGTERM to each;
#   (c) set up and busy: ranks 0-2 of 4 wait in an all_reduce that rank 3
#       does not join; SIGTERM to each;
#   (d) an application's own SIGTERM handler is kept (its rank exits 3, as
#       its handler does, and leaves its segment to the next job), and with
#       OMNICCL_SIGNAL_CLEANUP=0 a rank keeps the default action (it dies by
#       SIGTERM and leaves its segment); the third rank cleans up.
# Each case stops its ranks (SIGSTOP) before sending the signals and
# continues them after, so that no rank sees a peer go before its own signal.
# Usage: signal_cleanup_test.sh PATH/TO/rendezvous_probe PATH/TO/libstall_connect.so
PROBE=${1:?usage: $0 rendezvous_probe libstall_connect.so}
SHIM=${2:?usage: $0 rendezvous_probe libstall_connect.so}
source "$(dirname "$0")/lib.sh"
trap kill_probes EXIT

# start_direct NAME RANK WORLD_SIZE PORT [VAR=VALUE...]: starts the probe as
# one env:// rank, with no launcher and no timeout process in between (env
# execs it), so that PID_NAME is the rank itself and its exit status is its
# own; waits are bounded by expect_exit, and kill_probes ends it at exit. A
# non-interactive shell starts background commands with SIGINT and SIGQUIT
# ignored (which OmniCCL then leaves ignored): env gives them back their
# default action, as a rank started from a terminal or by a launcher has.
start_direct() {
  local name=$1 rank=$2 size=$3 port=$4
  shift 4
  env --default-signal=INT,QUIT "$@" RANK="$rank" WORLD_SIZE="$size" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" OMNICCL_TIMEOUT=60s \
    "$PROBE" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  PIDS+=($!)
  eval "PID_$name=$!"
}

# pids NAME...: their pids as "1|2|3".
pids() {
  local n p out=()
  for n in "$@"; do eval "p=\$PID_$n"; out+=("$p"); done
  (IFS='|'; echo "${out[*]}")
}

# segments PIDS: the /dev/shm names made by these processes ("1|2|3").
segments() { ls /dev/shm 2>/dev/null | grep -E "^omniccl\.[0-9]+-($1)\." || true; }

# wait_segments PIDS N: waits (at most 10 s) until these processes hold N segments.
wait_segments() {
  local limit_ms=$(($(now_ms) + 10000))
  while (($(now_ms) < limit_ms)); do
    (($(segments "$1" | wc -l) >= $2)) && return 0
    sleep 0.1
  done
  return 1
}

# signal_ranks NAME:SIGNAL...: stops them all, sends each its signal, continues them.
signal_ranks() {
  local item p
  for item in "$@"; do eval "p=\$PID_${item%%:*}"; kill -STOP "$p" 2>/dev/null; done
  for item in "$@"; do eval "p=\$PID_${item%%:*}"; kill -"${item##*:}" "$p" 2>/dev/null; done
  for item in "$@"; do eval "p=\$PID_${item%%:*}"; kill -CONT "$p" 2>/dev/null; done
}

# alive PID: the process exists and is not a zombie.
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)
  [[ -n "$state" && "$state" != Z ]]
}

# expect_exit CASE NAME CODE: the rank ends within 15 s with status CODE
# (128 + N: killed by signal N).
expect_exit() {
  local case=$1 name=$2 want=$3 p rc limit_ms=$(($(now_ms) + 15000))
  eval "p=\$PID_$name"
  while alive "$p" && (($(now_ms) < limit_ms)); do sleep 0.05; done
  alive "$p" && kill -KILL "$p"
  wait "$p"; rc=$?
  if ((rc == want)); then
    ok "$case: $name ended with status $rc"
  else
    fail "$case: $name ended with status $rc, expected $want"; show "$TMP/$name.err"
  fi
}

# expect_none_left CASE NAME...: none of these ranks left a segment.
expect_none_left() {
  local case=$1 left
  shift
  left=$(segments "$(pids "$@")")
  if [[ -z "$left" ]]; then
    ok "$case: nothing left in /dev/shm"
  else
    fail "$case: left in /dev/shm: $left"
    for s in $left; do rm -f "/dev/shm/$s"; done
  fi
}

# (a) Link setup, a different signal per rank.
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
for r in 0 1 2; do start_direct "a$r" "$r" 4 "$port"; done
start_direct a3 3 4 "$port" LD_PRELOAD="$SHIM"
if wait_for_text "$TMP/a3.err" "stall_connect: stalled" 20 && wait_segments "$(pids a0 a1 a2 a3)" 4; then
  ok "link setup: the ranks hold $(segments "$(pids a0 a1 a2 a3)" | wc -l) segments"
  signal_ranks a0:TERM a1:INT a2:HUP a3:TERM
  expect_exit "link setup" a0 143
  expect_exit "link setup" a1 130
  expect_exit "link setup" a2 129
  expect_exit "link setup" a3 143
  expect_none_left "link setup" a0 a1 a2 a3
else
  fail "link setup: the ranks never held their 4 segments with rank 3 stopped"; show "$TMP/a3.err"
fi

# (b) A split: rank 2's two connects of the first communicator pass.
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
start_direct b0 0 3 "$port" PROBE_SPLIT=1
start_direct b1 1 3 "$port" PROBE_SPLIT=1
start_direct b2 2 3 "$port" PROBE_SPLIT=1 LD_PRELOAD="$SHIM" STALL_SKIP=2
if wait_for_text "$TMP/b2.err" "stall_connect: stalled" 20 && wait_segments "$(pids b0 b1 b2)" 3; then
  ok "split: the ranks hold $(segments "$(pids b0 b1 b2)" | wc -l) segments"
  signal_ranks b0:TERM b1:TERM b2:TERM
  for n in b0 b1 b2; do expect_exit split "$n" 143; done
  expect_none_left split b0 b1 b2
else
  fail "split: the ranks never held the split's 3 segments with rank 2 stopped"; show "$TMP/b2.err"
fi

# (c) Set up, ranks 0-2 in an all_reduce that rank 3 does not join.
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
for r in 0 1 2; do start_direct "c$r" "$r" 4 "$port" PROBE_LOOP_OPS=1; done
start_direct c3 3 4 "$port" PROBE_HOLD_MS=60000
if wait_for_text "$TMP/c3.out" "probe rank 3 of 4 ok" 20; then
  sleep 0.5
  signal_ranks c0:TERM c1:TERM c2:TERM c3:TERM
  for n in c0 c1 c2 c3; do expect_exit "in a collective" "$n" 143; done
  expect_none_left "in a collective" c0 c1 c2 c3
else
  fail "in a collective: rank 3 never completed its first all_reduce"; show "$TMP/c3.err"
fi

# (d) An application's handler, and the cleanup turned off.
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
start_direct d0 0 3 "$port" PROBE_OWN_SIGTERM=1
start_direct d1 1 3 "$port" OMNICCL_SIGNAL_CLEANUP=0
start_direct d2 2 3 "$port" LD_PRELOAD="$SHIM"
if wait_for_text "$TMP/d2.err" "stall_connect: stalled" 20 && wait_segments "$(pids d0 d1 d2)" 3; then
  signal_ranks d0:TERM d1:TERM d2:TERM
  expect_exit "own handler" d0 3
  grep -q "probe: own SIGTERM handler" "$TMP/d0.err" && ok "own handler: the application's handler ran" ||
    { fail "own handler: the application's handler did not run"; show "$TMP/d0.err"; }
  expect_exit "cleanup off" d1 143
  expect_exit "cleanup on" d2 143
  for n in d0 d1; do
    [[ -n "$(segments "$(pids "$n")")" ]] && ok "$n: its segment is left (no cleanup handler)" ||
      fail "$n: its segment was removed, though OmniCCL's handler should not have run"
  done
  for s in $(segments "$(pids d0 d1)"); do rm -f "/dev/shm/$s"; done
  expect_none_left "cleanup on" d2
else
  fail "own handler: the ranks never held their 3 segments with rank 2 stopped"; show "$TMP/d2.err"
fi
finish signal_cleanup
