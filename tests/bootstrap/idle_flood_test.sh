#!/usr/bin/env bash
# A stranger on this host holds as many idle connections to the rendezvous
# port as it can while a 4-rank job, limited to 256 descriptors per rank,
# rendezvous and keeps splitting (keeping its 40 children, ~160 descriptors
# on rank 0) and all_reducing: the job completes with
# correct sums within its bound, and rank 0 says that it sheds strangers in
# a few lines, not one per connection. Once without a job token, once with
# one (a rank proves it a round trip after connecting, during the flood).
# Usage: idle_flood_test.sh PATH/TO/rendezvous_probe PATH/TO/idle_flood
PROBE=${1:?usage: $0 rendezvous_probe idle_flood}
FLOOD=${2:?usage: $0 rendezvous_probe idle_flood}
source "$(dirname "$0")/lib.sh"
trap kill_probes EXIT

LIMIT=${IDLE_FLOOD_LIMIT:-256}   # the job's RLIMIT_NOFILE, soft and hard
STRANGERS=${IDLE_FLOOD_CONNECTIONS:-4000}
SPLITS=${IDLE_FLOOD_SPLITS:-40}
WORLD=4

# run_rank NAME RANK: one rank whose soft and hard descriptor limits are
# $LIMIT (so raising the soft limit cannot help), bounded by timeout 120.
run_rank() {
  local name=$1 rank=$2
  env RANK="$rank" WORLD_SIZE=$WORLD MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" OMNICCL_TIMEOUT=30s \
    ${TOKEN:+OMNICCL_JOB_TOKEN=$TOKEN} \
    PROBE_SPLITS="$SPLITS" PROBE_KEEP_SPLITS=1 bash -c 'ulimit -n "$0" && exec timeout 120 "$1"' "$LIMIT" "$PROBE" \
    >"$TMP/$case.$name.out" 2>"$TMP/$case.$name.err" &
  PIDS+=($!)
  eval "PID_$name=$!"
}

# job CASE [TOKEN]: one flooded job; TOKEN: its OMNICCL_JOB_TOKEN (a rank
# then proves the token one round trip after it connects, while the flood
# goes on).
job() {
  local case=$1 pid rc r took shed_lines
  TOKEN=${2:-}
  port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
  start=$(now_ms)
  run_rank r0 0
  # Rank 0 serves the rendezvous once it listens; the stranger fills it first.
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
  done
  timeout 150 "$FLOOD" "$port" "$STRANGERS" 100 "$TMP/$case.flood.status" >"$TMP/$case.flood.out" 2>&1 &
  FLOOD_PID=$!
  PIDS+=($FLOOD_PID)
  for _ in $(seq 1 100); do
    read -r _ open _ opened _ 2>/dev/null <"$TMP/$case.flood.status" && ((opened >= LIMIT || STRANGERS == 0)) && break
    sleep 0.05
  done
  echo "$case: stranger before the ranks: $(cat "$TMP/$case.flood.status" 2>/dev/null)"
  for r in 1 2 3; do run_rank "r$r" "$r"; done

  for r in 0 1 2 3; do
    eval "pid=\$PID_r$r"
    wait "$pid"; rc=$?
    if ((rc == 0)) && grep -q "splits ok ($SPLITS)" "$TMP/$case.r$r.out"; then
      ok "$case: rank $r: $SPLITS splits and all_reduces correct"
    else
      fail "$case: rank $r exited $rc without finishing its splits"; show "$TMP/$case.r$r.err"
    fi
  done
  took=$(($(now_ms) - start))
  echo "$case: stranger at the end: $(cat "$TMP/$case.flood.status" 2>/dev/null)"
  kill "$FLOOD_PID" 2>/dev/null
  ((took < 90000)) && ok "$case: the job took $took ms" || fail "$case: the job took $took ms (limit 90000)"

  # Shedding is said in a few lines, with counts, not once per connection.
  shed_lines=$(grep -c "rendezvous server" "$TMP/$case.r0.err")
  grep "rendezvous server" "$TMP/$case.r0.err" | head -3 | sed 's/^/  rank 0: /'
  ((shed_lines <= 20)) && ok "$case: rank 0 logged $shed_lines rendezvous server lines" ||
    fail "$case: rank 0 logged $shed_lines rendezvous server lines (limit 20)"

}

job plain
job token "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"

((FAILS == 0)) && echo "PASS" || echo "FAILED: $FAILS check(s)"
exit $((FAILS > 0))
