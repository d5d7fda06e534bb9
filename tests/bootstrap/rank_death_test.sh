#!/usr/bin/env bash
# A rank killed (SIGKILL) during communicator setup is reported to the
# others within 10 s, naming it (rank, pid), long before the deadline
# (OMNICCL_TIMEOUT=60s here):
#   (a) while the others wait in the rendezvous (a 4th rank never comes);
#   (b) during link setup: it stops at its first connect to a peer (the
#       stall_connect shim) and is killed there;
#   (c) during a split: the same, at its first connect of the split;
#   (d) and occl_comm_abort of a non-blocking init in link setup returns
#       within 500 ms;
#   (e) file:// rendezvous: ranks 0-2 of 4 wait for rank 3 in a directory;
#       rank 2 is killed (its liveness lock in the directory is released).
# Usage: rank_death_test.sh PATH/TO/rendezvous_probe PATH/TO/libstall_connect.so
PROBE=${1:?usage: $0 rendezvous_probe libstall_connect.so}
SHIM=${2:?usage: $0 rendezvous_probe libstall_connect.so}
source "$(dirname "$0")/lib.sh"
# Probes killed (even stopped ones) at exit; probe_pid NAME (lib.sh).
trap kill_probes EXIT

# expect_named CASE VICTIM_PID SURVIVORS...: every survivor exits 1 within
# 10 s of the kill (at $killed) with a message naming rank 2 and its pid.
expect_named() {
  local case=$1 victim=$2 name pid rc took
  shift 2
  for name in "$@"; do
    eval "pid=\$PID_$name"
    wait "$pid"; rc=$?
    took=$(( $(now_ms) - killed ))
    if ((rc == 1)) && grep -qE "rank 2 \(pid $victim on [^)]*\)" "$TMP/$name.err"; then
      ok "$case: $name failed naming rank 2 (pid $victim)"
    else
      fail "$case: $name: exit $rc, expected 1 and a message naming 'rank 2 (pid $victim on ...)'"; show "$TMP/$name.err"
    fi
    ((took < 10000)) && ok "$case: $name knew within $took ms" || fail "$case: $name took $took ms (limit 10000)"
  done
}

# (a) In the rendezvous: ranks 0-2 of 4 wait for rank 3; rank 2 is killed.
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
for r in 0 1 2; do start_rank "a$r" "$r" 4 "$port" OMNICCL_TIMEOUT=60s; done
sleep 2
victim=$(probe_pid a2)
kill -KILL "$victim"; killed=$(now_ms)
expect_named rendezvous "$victim" a0 a1

# (b) Link setup: rank 2 of 3 stops at its first connect to a peer.
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
start_rank b0 0 3 "$port" OMNICCL_TIMEOUT=60s
start_rank b1 1 3 "$port" OMNICCL_TIMEOUT=60s
start_rank b2 2 3 "$port" OMNICCL_TIMEOUT=60s LD_PRELOAD="$SHIM"
if wait_for_text "$TMP/b2.err" "stall_connect: stalled" 20; then
  victim=$(probe_pid b2)
  kill -KILL "$victim"; killed=$(now_ms)
  expect_named "link setup" "$victim" b0 b1
else
  fail "link setup: rank 2 never reached its first connect"; show "$TMP/b2.err"
fi

# (c) Split: rank 2 of 3 stops at its first connect of the split (its two
# connects of the first communicator pass: same host, control sockets only).
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
start_rank c0 0 3 "$port" OMNICCL_TIMEOUT=60s PROBE_SPLIT=1
start_rank c1 1 3 "$port" OMNICCL_TIMEOUT=60s PROBE_SPLIT=1
start_rank c2 2 3 "$port" OMNICCL_TIMEOUT=60s PROBE_SPLIT=1 LD_PRELOAD="$SHIM" STALL_SKIP=2
if wait_for_text "$TMP/c2.err" "stall_connect: stalled" 20; then
  victim=$(probe_pid c2)
  kill -KILL "$victim"; killed=$(now_ms)
  expect_named split "$victim" c0 c1
else
  fail "split: rank 2 never reached its first connect of the split"; show "$TMP/c2.err"
fi
# (d) occl_comm_abort during link setup: rank 0's non-blocking init waits
# for rank 1, stopped at its first connect; the abort returns at once.
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
start_rank d0 0 2 "$port" OMNICCL_TIMEOUT=60s PROBE_ABORT_AFTER_MS=1500
start_rank d1 1 2 "$port" OMNICCL_TIMEOUT=60s LD_PRELOAD="$SHIM"
wait "$PID_d0"; rc=$?
if ((rc == 0)) && grep -q "stall_connect: stalled" "$TMP/d1.err" &&
   ms=$(grep -oE "abort took [0-9]+ ms" "$TMP/d0.out" | grep -oE "[0-9]+") && ((ms < 500)); then
  ok "abort in link setup: occl_comm_abort returned after $ms ms"
else
  fail "abort in link setup: exit $rc ($(cat "$TMP/d0.out")), expected an abort within 500 ms"; show "$TMP/d0.err"; show "$TMP/d1.err"
fi

# (e) file:// rendezvous: ranks 0-2 of 4 wait for rank 3; rank 2 is killed.
dir="$TMP/file-rdzv"
for r in 0 1 2; do start_rank "e$r" "$r" 4 0 OMNICCL_TIMEOUT=60s PROBE_INIT_METHOD="file://$dir"; done
sleep 2
victim=$(probe_pid e2)
kill -KILL "$victim"; killed=$(now_ms)
expect_named "file:// rendezvous" "$victim" e0 e1
# (f) A rank that arrives after the failure: ranks 0-2 of 4 (a job with an
# identity, as launchers give it) wait; rank 2 is killed; once ranks 0 and 1
# have failed and exited, rank 3 starts. It finds no server, and must learn
# of the failure from rank 0's note on the host within 5 s, not wait out its
# 60 s deadline. The killed rank leaves nothing in /dev/shm (it had made no
# segment yet); rank 0's note is removed at the end.
port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
job="rank-death-f-$$"
for r in 0 1 2; do start_rank "f$r" "$r" 4 "$port" OMNICCL_TIMEOUT=60s OMNICCL_JOB_ID="$job"; done
sleep 2
victim=$(probe_pid f2)
kill -KILL "$victim"; killed=$(now_ms)
expect_named "rendezvous, early ranks" "$victim" f0 f1
start_rank f3 3 4 "$port" OMNICCL_TIMEOUT=60s OMNICCL_JOB_ID="$job"
started=$(now_ms)
wait "$PID_f3"; rc=$?
took=$(( $(now_ms) - started ))
if ((rc == 1)) && grep -q "failed before rank 3 arrived" "$TMP/f3.err" &&
   grep -qE "rank 2 \(pid $victim on [^)]*\)" "$TMP/f3.err" && ((took < 5000)); then
  ok "late rank: failed after $took ms naming rank 2 (pid $victim)"
else
  fail "late rank: exit $rc after $took ms, expected 1 within 5000 ms naming the failure"; show "$TMP/f3.err"
fi
left=$(ls /dev/shm 2>/dev/null | grep -E "^omniccl\.[0-9]+-$victim\." || true)
[[ -z "$left" ]] && ok "late rank: the killed rank left nothing in /dev/shm" || fail "killed rank left: $left"
rm -f /dev/shm/omniccl.*."rdzv.$port"
[[ -n "${SHOW_ALL:-}" ]] && for f in "$TMP"/*.err; do show "$f"; done
finish rank_death_test
