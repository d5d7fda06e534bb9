#!/usr/bin/env bash
# Nothing left behind in /dev/shm when a job is ended during its setup:
#   (a) SIGTERM to omniccl-run while its 4 ranks wait in the rendezvous
#       (rank 3 starts 8 s late): no segment (ranks make theirs only after
#       the address exchange);
#   (b) SIGTERM to omniccl-run during link setup (rank 3 stopped at its
#       first connect to a peer, the others' segments made): the ranks die
#       by SIGTERM's default action, and the launcher removes what they made;
#   (c) the same with SIGINT (Ctrl-C), which the launcher forwards as SIGINT.
# Usage: leftovers_test.sh PATH/TO/rendezvous_probe PATH/TO/libstall_connect.so PATH/TO/omniccl-run
PROBE=${1:?usage: $0 rendezvous_probe libstall_connect.so omniccl-run}
SHIM=${2:?usage: $0 rendezvous_probe libstall_connect.so omniccl-run}
RUN=${3:?usage: $0 rendezvous_probe libstall_connect.so omniccl-run}
source "$(dirname "$0")/lib.sh"
trap kill_probes EXIT

# segments PIDS: the /dev/shm names made by these processes ("1|2|3"; each
# rank's shell prints its pid, then execs the probe).
segments() { ls /dev/shm 2>/dev/null | grep -E "^omniccl\.[0-9]+-($1)\." || true; }

# run_and_term NAME WHEN_REGEX RANK3_COMMAND [SIGNAL]: starts omniccl-run -n 4
# with rank 3 delayed or stalled, waits until $TMP/NAME.err matches WHEN_REGEX
# (or 20 s) and 1 s more, sends the launcher SIGNAL (TERM) and waits for it.
run_and_term() {
  local name=$1 when=$2 rank3=$3 sig=${4:-TERM}
  timeout 60 "$RUN" -n 4 -- bash -c "echo \"probe pid \$\$\" >&2; if [ \$RANK = 3 ]; then $rank3; fi; exec \"$PROBE\"" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" &
  local job=$!
  PIDS+=($job)
  wait_for_text "$TMP/$name.err" "$when" 20 || { fail "$name: never reached '$when'"; show "$TMP/$name.err"; }
  sleep 1
  PIDS_OF_JOB=$(grep -oE "probe pid [0-9]+" "$TMP/$name.err" | grep -oE "[0-9]+" | paste -sd'|')
  kill -"$sig" "$job"
  wait "$job"
}

run_and_term rendezvous "probe pid" "sleep 8"
left=$(segments "$PIDS_OF_JOB")
[[ -z "$left" ]] && ok "rendezvous: nothing left in /dev/shm" || fail "rendezvous: left in /dev/shm: $left"

run_and_term link_setup "stall_connect: stalled" "export LD_PRELOAD=$SHIM"
left=$(segments "$PIDS_OF_JOB")
if [[ -z "$left" ]]; then
  ok "link setup: nothing left in /dev/shm"
else
  fail "link setup: left in /dev/shm: $left"
  for s in $left; do rm -f "/dev/shm/$s"; done
fi
run_and_term link_setup_int "stall_connect: stalled" "export LD_PRELOAD=$SHIM" INT
left=$(segments "$PIDS_OF_JOB")
if [[ -z "$left" ]]; then
  ok "link setup, SIGINT: nothing left in /dev/shm"
else
  fail "link setup, SIGINT: left in /dev/shm: $left"
  for s in $left; do rm -f "/dev/shm/$s"; done
fi
finish leftovers
