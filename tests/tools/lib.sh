# Shared helpers for the omniccl-run tests; sourced by omniccl_run_*_test.sh.
# Usage in a test:  source "$(dirname "$0")/lib.sh" "$@"   ($1 = omniccl-run)
# Every launcher run is bounded: `timeout 60` for foreground runs, a bounded
# wait loop plus SIGKILL for background ones.

set -u
RUN=${1:?usage: $0 path/to/omniccl-run}
if [[ ! -x "$RUN" ]]; then
  echo "FAIL: $RUN is not an executable" >&2
  exit 1
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/omniccl-run-test.XXXXXX")
export TMP
trap 'rm -rf "$TMP"' EXIT
FAILS=0
CHECKS=0

# fail MESSAGE: records a failed check.
fail() {
  echo "FAIL: $*" >&2
  FAILS=$((FAILS + 1))
}

# ok NAME: records a passed check.
ok() {
  CHECKS=$((CHECKS + 1))
  echo "ok: $1"
}

# show FILE: prints a file indented, for failure messages.
show() {
  echo "  --- $1:" >&2
  sed 's/^/    | /' "$1" >&2
}

# now_ms: monotonic-enough wall clock in milliseconds.
now_ms() {
  echo $(($(date +%s%N) / 1000000))
}

# run NAME ARGS...: runs omniccl-run ARGS under `timeout 60`; stdout goes to
# $TMP/NAME.out and stderr to $TMP/NAME.err; sets RC and ELAPSED_MS.
run() {
  local name=$1
  shift
  local start
  start=$(now_ms)
  timeout -k 5 60 "$RUN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  RC=$?
  ELAPSED_MS=$(($(now_ms) - start))
  if [[ $RC == 124 && $ELAPSED_MS -ge 59000 ]]; then
    fail "$name: omniccl-run hung (killed by the 60 s test timeout)"
  fi
}

# expect_eq NAME EXPECTED ACTUAL: checks two strings are equal.
expect_eq() {
  if [[ "$2" == "$3" ]]; then
    ok "$1"
  else
    fail "$1: expected [$2], got [$3]"
  fi
}

# expect_rc NAME EXPECTED: checks RC of the last run; shows its stderr if not.
expect_rc() {
  if [[ "$RC" == "$2" ]]; then
    ok "$1: exit status $2"
  else
    fail "$1: expected exit status $2, got $RC"
    [[ -f "$TMP/$1.err" ]] && show "$TMP/$1.err"
  fi
}

# expect_contains NAME FILE TEXT: checks FILE contains the fixed string TEXT.
expect_contains() {
  if grep -qF -- "$3" "$2"; then
    ok "$1: has '$3'"
  else
    fail "$1: '$3' not found in $2"
    show "$2"
  fi
}

# expect_not_contains NAME FILE TEXT: checks FILE lacks the fixed string TEXT.
expect_not_contains() {
  if grep -qF -- "$3" "$2"; then
    fail "$1: '$3' unexpectedly found in $2"
    show "$2"
  else
    ok "$1: no '$3'"
  fi
}

# expect_file_eq NAME FILE EXPECTED_TEXT: checks FILE's exact content (a final
# newline is added to EXPECTED_TEXT).
expect_file_eq() {
  local expected
  expected=$(printf '%s\n' "$3")
  if [[ "$(cat "$2")" == "$expected" ]]; then
    ok "$1"
  else
    fail "$1: content of $2 differs; expected:"
    printf '%s\n' "$3" | sed 's/^/    | /' >&2
    show "$2"
  fi
}

# expect_elapsed NAME MIN_MS MAX_MS: checks ELAPSED_MS of the last run.
expect_elapsed() {
  if ((ELAPSED_MS >= $2 && ELAPSED_MS <= $3)); then
    ok "$1: took ${ELAPSED_MS} ms"
  else
    fail "$1: took ${ELAPSED_MS} ms, expected between $2 and $3 ms"
  fi
}

# expect_dead NAME PIDFILE...: checks the processes whose pids are in the
# files no longer exist (waits up to 3 s for them to go away).
expect_dead() {
  local name=$1 f pid tries
  shift
  for f in "$@"; do
    if [[ ! -s "$f" ]]; then
      fail "$name: pid file $f missing"
      continue
    fi
    pid=$(cat "$f")
    for ((tries = 0; tries < 30; tries++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      fail "$name: process $pid ($f) is still running"
      kill -KILL "$pid" 2>/dev/null
    else
      ok "$name: process from $(basename "$f") is gone"
    fi
  done
}

# wait_for_files COUNT GLOB_PREFIX: waits up to 20 s until COUNT files named
# GLOB_PREFIX* exist; returns 1 on timeout.
wait_for_files() {
  local count=$1 prefix=$2 tries n
  for ((tries = 0; tries < 200; tries++)); do
    n=$(compgen -G "${prefix}*" | wc -l)
    ((n >= count)) && return 0
    sleep 0.1
  done
  return 1
}

# wait_pid_bounded PID SECONDS: waits until PID (a background job of this
# shell) exits, at most SECONDS; then SIGKILLs it. Sets RC to its status.
wait_pid_bounded() {
  local pid=$1 limit=$2 tries
  for ((tries = 0; tries < limit * 10; tries++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    fail "process $pid still running after ${limit} s; killing it"
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid"
  RC=$?
}

# proc_state PID: prints the state letter (R, S, T, Z, ...) of PID, or
# nothing if it does not exist.
proc_state() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  echo "${stat%% *}"
}

# finish: prints the summary and exits 1 if any check failed.
finish() {
  if ((FAILS > 0)); then
    echo "$FAILS check(s) failed, $CHECKS passed"
    exit 1
  fi
  echo "all $CHECKS checks passed"
  exit 0
}
