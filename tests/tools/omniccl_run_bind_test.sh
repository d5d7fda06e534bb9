#!/usr/bin/env bash
# omniccl-run: rank i is bound to the i-th of the CPUs it may use (as mpirun
# binds to cores by default), round-robin when the ranks outnumber them; with
# --bind-to none the ranks keep the launcher's CPU mask.
source "$(dirname "$0")/lib.sh" "$@"

if ! command -v taskset >/dev/null; then
  echo "SKIP: taskset (util-linux) is not installed"
  exit 77
fi
if ! taskset -c 0,1 true 2>/dev/null; then
  echo "SKIP: this process may not run on CPUs 0 and 1"
  exit 77
fi

SHOW='grep Cpus_allowed_list /proc/self/status | tr -d "\t "'

# cpus NAME ARGS...: runs omniccl-run ARGS under `taskset -c 0,1`.
cpus() {
  local name=$1
  shift
  timeout -k 5 60 taskset -c 0,1 "$RUN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  RC=$?
}

cpus bound -n 2 -- bash -c "$SHOW"
expect_rc bound 0
expect_contains bound "$TMP/bound.out" "[0] Cpus_allowed_list:0"
expect_contains bound "$TMP/bound.out" "[1] Cpus_allowed_list:1"

cpus one -n 1 -- bash -c "$SHOW"
expect_rc one 0
expect_file_eq one "$TMP/one.out" "[0] Cpus_allowed_list:0"

cpus none -n 2 --bind-to none -- bash -c "$SHOW"
expect_rc none 0
expect_contains none "$TMP/none.out" "[0] Cpus_allowed_list:0-1"
expect_contains none "$TMP/none.out" "[1] Cpus_allowed_list:0-1"

# More ranks than CPUs: bound round-robin by default too (pairwise
# exchanges then always pair ranks on different CPUs in their first round).
cpus over -n 3 -- bash -c "$SHOW"
expect_rc over 0
expect_contains over "$TMP/over.out" "[0] Cpus_allowed_list:0"
expect_contains over "$TMP/over.out" "[1] Cpus_allowed_list:1"
expect_contains over "$TMP/over.out" "[2] Cpus_allowed_list:0"

# ... unless asked not to.
cpus overnone -n 3 --bind-to none -- bash -c "$SHOW"
expect_rc overnone 0
for i in 0 1 2; do expect_contains overnone "$TMP/overnone.out" "[$i] Cpus_allowed_list:0-1"; done

# Asked for: round-robin over the CPUs even then.
cpus forced -n 3 --bind-to=core -- bash -c "$SHOW"
expect_rc forced 0
expect_contains forced "$TMP/forced.out" "[0] Cpus_allowed_list:0"
expect_contains forced "$TMP/forced.out" "[1] Cpus_allowed_list:1"
expect_contains forced "$TMP/forced.out" "[2] Cpus_allowed_list:0"

# The CPUs are those of the launcher's mask, in order: under CPU 1 alone,
# rank 0 gets CPU 1.
timeout -k 5 60 taskset -c 1 "$RUN" -n 1 -- bash -c "$SHOW" >"$TMP/mask.out" 2>"$TMP/mask.err"
RC=$?
expect_rc mask 0
expect_file_eq mask "$TMP/mask.out" "[0] Cpus_allowed_list:1"

# A bad value is a usage error naming the choices.
run badbind -n 2 --bind-to socket -- true
expect_rc badbind 2
expect_contains badbind "$TMP/badbind.err" "omniccl-run: error: --bind-to: 'socket' is not one of core, none"

run bindnov -n 2 --bind-to
expect_rc bindnov 2
expect_contains bindnov "$TMP/bindnov.err" "omniccl-run: error: option --bind-to needs a value"

finish
