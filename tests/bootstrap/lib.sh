# Helpers for the rendezvous tests; sourced by *_test.sh.
# Every process a test starts is bounded (timeout) and killed on exit.
set -u
TMP=$(mktemp -d "${TMPDIR:-/tmp}/omniccl-rdzv-test.XXXXXX")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
show() { echo "  --- $1:" >&2; sed 's/^/    | /' "$1" >&2; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# free_port: a TCP port nobody uses now, outside the kernel's ephemeral range.
# A port in that range may be the local end of some connection (or of one in
# TIME_WAIT, e.g. left by the previous round of this very test), and then
# binding a server to it fails with "address already in use" although nobody
# listens there. Bash cannot bind port 0, so probe a random port below the
# ephemeral range (or above it, where that range starts low) with /dev/tcp
# and, where `ss` exists, check that no socket uses it at all.
free_port() {
  local p lo=32768 hi=60999 base span
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  if ((lo > 12000)); then
    base=10000 span=$((lo - 10000))
  else
    base=$((hi + 1)) span=$((65535 - hi - 1))
  fi
  for _ in $(seq 1 50); do
    p=$((base + RANDOM % span))
    if command -v ss >/dev/null && ss -Htan "( sport = :$p or sport = :$((p + 1)) )" 2>/dev/null | grep -q .; then
      continue
    fi
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# start_rank NAME RANK WORLD_SIZE PORT [VAR=VALUE...]: starts the probe as one
# rank in the background (bounded by timeout 90); output in $TMP/NAME.{out,err}.
start_rank() {
  local name=$1 rank=$2 size=$3 port=$4
  shift 4
  env "$@" RANK="$rank" WORLD_SIZE="$size" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    timeout 90 "$PROBE" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  PIDS+=($!)
  eval "PID_$name=$!"
}

# wait_for_text FILE REGEX SECONDS: waits until FILE matches; returns 1 on timeout.
wait_for_text() {
  local file=$1 re=$2 limit_ms=$(($(now_ms) + $3 * 1000))
  while (($(now_ms) < limit_ms)); do
    grep -qE "$re" "$file" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# kill_probes: start_rank runs each probe under timeout; a stopped probe
# outlives a killed timeout, so this kills the probes themselves too, then
# cleans up (a trap for tests that stop or kill ranks).
kill_probes() {
  local p c
  for p in "${PIDS[@]}"; do
    for c in $(cat "/proc/$p/task/$p/children" 2>/dev/null); do kill -KILL "$c" 2>/dev/null; done
  done
  cleanup
}

# probe_pid NAME: the pid of the probe itself (start_rank runs it under timeout).
probe_pid() {
  local parent child
  eval "parent=\$PID_$1"
  for _ in $(seq 1 50); do
    child=$(cat "/proc/$parent/task/$parent/children" 2>/dev/null)
    [[ -n "$child" ]] && { echo "${child%% *}"; return 0; }
    sleep 0.1
  done
  return 1
}

# finish NAME: prints the test's verdict and exits.
finish() {
  if ((FAILS > 0)); then
    echo "$1: $FAILS check(s) failed" >&2
    exit 1
  fi
  echo "$1: all checks passed"
  exit 0
}
