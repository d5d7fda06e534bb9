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

# free_port: a TCP port nobody listens on now (bind port 0 through bash is not
# possible, so probe a random high port with /dev/tcp).
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 30000))
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
