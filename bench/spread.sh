#!/usr/bin/env bash
# bench/spread.sh - run-to-run spread of OmniCCL's own 16 MiB points
# (issue 12: <= 25% across three runs).
#
# Runs omniccl-bench RUNS times (default 3) in each setting - shm2 (2 ranks,
# shared memory), tcp2 (2 ranks, OMNICCL_TRANSPORT=tcp), shm4 (4 ranks) -
# every collective at SIZE (default 16M), the settings interleaved so that a
# slow minute of the machine hits all of them; then prints, per setting and
# collective, the times of the runs and the spread: the largest over the
# smallest, minus one. Each run is bounded by `timeout`.
#
# Usage: bench/spread.sh [BUILD_DIR] (default build)   RUNS, SIZE, ITERS (default 20)
set -u
build=${1:-build}
runs=${RUNS:-3} size=${SIZE:-16M} iters=${ITERS:-20}
run=$build/tools/omniccl-run bench=$build/tools/omniccl-bench
[ -x "$bench" ] && [ -x "$run" ] || { echo "spread.sh: build $bench and $run first" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/omniccl-spread.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "# $(date -u +%FT%TZ), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs," \
  "kernel $(uname -r); $runs runs of -n $iters at $size"
for i in $(seq 1 "$runs"); do
  for setting in shm2 tcp2 shm4; do
    n=2 env=()
    [ "$setting" = shm4 ] && n=4
    [ "$setting" = tcp2 ] && env=(OMNICCL_TRANSPORT=tcp)
    timeout 300 env "${env[@]}" "$run" -n "$n" --no-prefix "$bench" --coll all --sizes "$size" \
      -n "$iters" -w 2 --csv 2>/dev/null | grep -v '^#' | grep -v '^peer' >"$out/$setting.$i.csv"
  done
done
printf '%-8s %-16s %-40s %s\n' setting collective "time per op, us (run 1, 2, ...)" spread
for setting in shm2 tcp2 shm4; do
  cat "$out/$setting".*.csv | awk -F, -v s="$setting" '
    { t[$3] = t[$3] sprintf("%s%.0f", ($3 in n) ? ", " : "", $9); n[$3]++
      if (!($3 in lo) || $9 < lo[$3]) lo[$3] = $9
      if (!($3 in hi) || $9 > hi[$3]) hi[$3] = $9 }
    END { for (c in t) printf "%-8s %-16s %-40s %.0f%%\n", s, c, t[c], 100 * (hi[c] / lo[c] - 1) }' | sort -k2
done
