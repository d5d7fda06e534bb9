#!/usr/bin/env bash
# Long differential soak run (see "Soak test" in docs/concepts/errors.md).
#
# Usage: scripts/soak.sh DURATION [BUILD_DIR] [SOAK_ARGS...]
#   DURATION   seconds, or with a unit: 90s, 15m, 1h
#   BUILD_DIR  default: build (the soak target is built there first)
#   SOAK_ARGS  passed on, e.g. --ranks 8 --seed 42 (default seed: a fresh one)
# Faults are on; dropped connections too where `unshare -rn` and nft work
# (a network namespace of the run's own; the host's network is untouched).
# The log goes to BUILD_DIR/soak-<seed>.log; the last line holds the counts.
# Exits non-zero when a round failed or a result differed from the reference.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:?usage: $0 DURATION [BUILD_DIR] [SOAK_ARGS...]}
build=${2:-build}
shift $(($# >= 2 ? 2 : 1))

case $duration in
  *h) seconds=$((${duration%h} * 3600)) ;;
  *m) seconds=$((${duration%m} * 60)) ;;
  *s) seconds=${duration%s} ;;
  *) seconds=$duration ;;
esac

cmake --build "$build" --target soak -j2 >/dev/null
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
netns=()
if unshare -rn sh -c 'ip link set lo up && nft list ruleset' >/dev/null 2>&1; then
  netns=(--netns)
else
  echo "soak.sh: no network namespace here (unshare -rn or nft failed): no dropped-connection faults" >&2
fi
log=$build/soak-$seed.log
echo "soak.sh: ${seconds} s, seed $seed, log $log" >&2
rc=0
# The round in progress when the time is up finishes; 300 s is ample for it.
timeout $((seconds + 300)) "$build/tests/soak/soak" --seed "$seed" --seconds "$seconds" --faults on \
  "${netns[@]}" --verbose "$@" >"$log" 2>&1 || rc=$?
grep -E "^soak: (FAIL|DISCREPANCY)" "$log" | head -50 >&2 || true
tail -n 1 "$log"
exit $rc
