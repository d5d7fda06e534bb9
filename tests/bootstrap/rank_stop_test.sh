#!/usr/bin/env bash
# A rank that STOPS (SIGSTOP: a hung process, a frozen VM) during
# communicator setup keeps its connections open, yet the others report it
# within 10 s, naming it (rank, pid), long before the deadline
# (OMNICCL_TIMEOUT=60s here; the liveness timeout is the default,
# OMNICCL_SETUP_HEARTBEAT_TIMEOUT=5s):
#   (a) rank 2 stopped while the others wait in the rendezvous (a 4th rank
#       never comes);
#   (b) rank 0, which serves the rendezvous, stopped there;
#   (c) during link setup: rank 2 stops at its first connect to a peer (the
#       stall_connect shim) and is stopped there;
#   (d) during a split: the same, at its first connect of the split;
#   (e) occl_comm_abort of a non-blocking init whose rank 0 is stopped returns
#       within 500 ms;
#   (f) file:// rendezvous: rank 2 stopped while the others wait;
#   (g) no false alarm: 8 ranks on this machine with a 2 s liveness timeout,
#       one of them 3 s late to the rendezvous and another 3 s late to the
#       split (live, busy elsewhere), all complete;
#   (h) a malformed or too short OMNICCL_SETUP_HEARTBEAT_TIMEOUT is an error
#       naming it;
#   (i) a rank stopped before it enters a split, while the others wait in it:
#       on one host they see its process stopped (/proc) and name it within
#       10 s (on another host only the deadline would tell).
# Every stopped process is killed at the end (SIGKILL works on stopped ones).
# Usage: rank_stop_test.sh PATH/TO/rendezvous_probe PATH/TO/libstall_connect.so
# (CASES=ace runs only those cases.)
PROBE=${1:?usage: $0 rendezvous_probe libstall_connect.so}
SHIM=${2:?usage: $0 rendezvous_probe libstall_connect.so}
source "$(dirname "$0")/lib.sh"
# Probes killed (even stopped ones) at exit; probe_pid NAME (lib.sh).
trap kill_probes EXIT

# expect_named CASE RANK VICTIM_PID SURVIVORS...: every survivor exits 1
# within 10 s of the stop (at $stopped) with a message naming the rank and its
# pid as stopped.
expect_named() {
  local case=$1 rank=$2 victim=$3 name pid rc took
  shift 3
  for name in "$@"; do
    eval "pid=\$PID_$name"
    wait "$pid"; rc=$?
    took=$(( $(now_ms) - stopped ))
    if ((rc == 1)) && grep -qE "rank $rank \(pid $victim on [^)]*\)[^;]* stopped responding" "$TMP/$name.err"; then
      ok "$case: $name failed naming rank $rank (pid $victim) as stopped"
    else
      fail "$case: $name: exit $rc, expected 1 and 'rank $rank (pid $victim on ...) ... stopped responding'"
      show "$TMP/$name.err"
    fi
    ((took < 10000)) && ok "$case: $name knew within $took ms" || fail "$case: $name took $took ms (limit 10000)"
  done
}

# start_server NAME SIZE [VAR=VALUE...]: starts rank 0 of SIZE on a free port
# (in $port) and waits until it listens; another port if that one was taken
# meanwhile (other jobs on this machine pick ports too).
start_server() {
  local name=$1 size=$2 try
  shift 2
  for try in 1 2 3 4 5; do
    port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
    start_rank "$name" 0 "$size" "$port" "$@"
    for _ in $(seq 1 100); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
      eval "kill -0 \$PID_$name" 2>/dev/null || break
      sleep 0.1
    done
    echo "note: rank 0 could not listen on port $port (try $try): $(tail -n 1 "$TMP/$name.err")"
  done
  fail "$name: rank 0 never listened"; show "$TMP/$name.err"
  return 1
}

# want CASE: whether to run that case (CASES, default all).
want() { [[ -z "${CASES:-}" || "$CASES" == *"$1"* ]]; }

# stop NAME: stops the probe of NAME (SIGSTOP) and records when.
stop() {
  victim=$(probe_pid "$1")
  kill -STOP "$victim"; stopped=$(now_ms)
}

# (a) In the rendezvous: ranks 0-2 of 4 wait for rank 3; rank 2 is stopped.
if want a; then
start_server a0 4 OMNICCL_TIMEOUT=60s
for r in 1 2; do start_rank "a$r" "$r" 4 "$port" OMNICCL_TIMEOUT=60s; done
sleep 2
stop a2
expect_named rendezvous 2 "$victim" a0 a1
kill -KILL "$victim"
fi

# (b) In the rendezvous, rank 0 (the rendezvous server) is stopped.
if want b; then
start_server b0 4 OMNICCL_TIMEOUT=60s
for r in 1 2; do start_rank "b$r" "$r" 4 "$port" OMNICCL_TIMEOUT=60s; done
sleep 2
stop b0
expect_named "rendezvous server" 0 "$victim" b1 b2
kill -KILL "$victim"
fi

# (c) Link setup: rank 2 of 3 stops at its first connect to a peer.
if want c; then
start_server c0 3 OMNICCL_TIMEOUT=60s
start_rank c1 1 3 "$port" OMNICCL_TIMEOUT=60s
start_rank c2 2 3 "$port" OMNICCL_TIMEOUT=60s LD_PRELOAD="$SHIM"
if wait_for_text "$TMP/c2.err" "stall_connect: stalled" 20; then
  stop c2
  expect_named "link setup" 2 "$victim" c0 c1
  kill -KILL "$victim"
else
  fail "link setup: rank 2 never reached its first connect"; show "$TMP/c2.err"
fi
fi

# (d) Split: rank 2 of 3 stops at its first connect of the split (its two
# connects of the first communicator pass: same host, control sockets only).
if want d; then
start_server d0 3 OMNICCL_TIMEOUT=60s PROBE_SPLIT=1
start_rank d1 1 3 "$port" OMNICCL_TIMEOUT=60s PROBE_SPLIT=1
start_rank d2 2 3 "$port" OMNICCL_TIMEOUT=60s PROBE_SPLIT=1 LD_PRELOAD="$SHIM" STALL_SKIP=2
if wait_for_text "$TMP/d2.err" "stall_connect: stalled" 20; then
  stop d2
  expect_named split 2 "$victim" d0 d1
  kill -KILL "$victim"
else
  fail "split: rank 2 never reached its first connect of the split"; show "$TMP/d2.err"
fi
fi

# (e) occl_comm_abort while rank 0 (the server) is stopped: rank 1's
# non-blocking init waits on it; the abort returns at once.
if want e; then
start_server e0 2 OMNICCL_TIMEOUT=60s
stop e0
start_rank e1 1 2 "$port" OMNICCL_TIMEOUT=60s PROBE_ABORT_AFTER_MS=2000
wait "$PID_e1"; rc=$?
if ((rc == 0)) && ms=$(grep -oE "abort took [0-9]+ ms" "$TMP/e1.out" | grep -oE "[0-9]+") && ((ms < 500)); then
  ok "abort with rank 0 stopped: occl_comm_abort returned after $ms ms"
else
  fail "abort with rank 0 stopped: exit $rc ($(cat "$TMP/e1.out")), expected an abort within 500 ms"; show "$TMP/e1.err"
fi
kill -KILL "$victim"
fi

# (f) file:// rendezvous: ranks 0-2 of 4 wait for rank 3; rank 2 is stopped.
if want f; then
dir="$TMP/file-rdzv"
for r in 0 1 2; do start_rank "f$r" "$r" 4 0 OMNICCL_TIMEOUT=60s PROBE_INIT_METHOD="file://$dir"; done
sleep 2
stop f2
expect_named "file:// rendezvous" 2 "$victim" f0 f1
kill -KILL "$victim"
fi

# (g) No false alarm: 8 ranks (4 per core here), a 2 s liveness timeout, rank
# 5 arrives 3 s late and rank 3 enters the split 3 s after the others.
if want g; then
start_server g0 8 OMNICCL_TIMEOUT=60s OMNICCL_SETUP_HEARTBEAT_TIMEOUT=2s PROBE_SPLIT=1
for r in 1 2 3 4 5 6 7; do
  extra=()
  ((r == 3)) && extra=(PROBE_SPLIT_DELAY_MS=3000)
  ((r == 5)) && { sleep 3; }
  start_rank "g$r" "$r" 8 "$port" OMNICCL_TIMEOUT=60s OMNICCL_SETUP_HEARTBEAT_TIMEOUT=2s PROBE_SPLIT=1 "${extra[@]}"
done
good=0
for r in 0 1 2 3 4 5 6 7; do
  eval "pid=\$PID_g$r"
  if wait "$pid" && grep -q "split ok" "$TMP/g$r.out"; then good=$((good + 1)); else show "$TMP/g$r.err"; fi
done
((good == 8)) && ok "no false alarm: 8 slow-but-live ranks completed init and split" ||
  fail "no false alarm: only $good of 8 ranks completed"
fi

# (h) A malformed setting is an error naming it.
if want h; then
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
start_rank h0 0 1 "$port" OMNICCL_SETUP_HEARTBEAT_TIMEOUT=nan
wait "$PID_h0"; rc=$?
if ((rc == 1)) && grep -q "OMNICCL_SETUP_HEARTBEAT_TIMEOUT='nan' is not a duration" "$TMP/h0.err"; then
  ok "setting: OMNICCL_SETUP_HEARTBEAT_TIMEOUT=nan refused, naming it"
else
  fail "setting: exit $rc, expected 1 naming OMNICCL_SETUP_HEARTBEAT_TIMEOUT"; show "$TMP/h0.err"
fi
start_rank h1 0 1 "$port" OMNICCL_SETUP_HEARTBEAT_TIMEOUT=10ms
wait "$PID_h1"; rc=$?
if ((rc == 1)) && grep -q "OMNICCL_SETUP_HEARTBEAT_TIMEOUT='10ms' is too short" "$TMP/h1.err"; then
  ok "setting: OMNICCL_SETUP_HEARTBEAT_TIMEOUT=10ms refused as too short"
else
  fail "setting: exit $rc, expected 1 saying 10ms is too short"; show "$TMP/h1.err"
fi
fi

# (i) Rank 2 of 3 is stopped after the first communicator, before its split
# (which it would enter 30 s later); ranks 0 and 1 wait in the split.
if want i; then
start_server i0 3 OMNICCL_TIMEOUT=60s PROBE_SPLIT=1
start_rank i1 1 3 "$port" OMNICCL_TIMEOUT=60s PROBE_SPLIT=1
start_rank i2 2 3 "$port" OMNICCL_TIMEOUT=60s PROBE_SPLIT=1 PROBE_SPLIT_DELAY_MS=30000
if wait_for_text "$TMP/i2.out" "the split comes later" 20; then
  stop i2
  for name in i0 i1; do
    eval "pid=\$PID_$name"
    wait "$pid"; rc=$?
    took=$(( $(now_ms) - stopped ))
    if ((rc == 1)) && grep -qE "rank 2 \(pid $victim on [^)]*\) is stopped and has not entered" "$TMP/$name.err"; then
      ok "stopped before the split: $name failed naming rank 2 (pid $victim) within $took ms"
    else
      fail "stopped before the split: $name: exit $rc, expected 1 and 'rank 2 (pid $victim on ...) is stopped'"
      show "$TMP/$name.err"
    fi
    ((took < 10000)) || fail "stopped before the split: $name took $took ms (limit 10000)"
  done
  kill -KILL "$victim"
else
  fail "stopped before the split: rank 2 never created its first communicator"; show "$TMP/i2.err"
fi
fi

[[ -n "${SHOW_ALL:-}" ]] && for f in "$TMP"/*.err; do show "$f"; done
finish rank_stop_test
