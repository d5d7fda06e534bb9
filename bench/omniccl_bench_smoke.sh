#!/usr/bin/env bash
# Smoke test of omniccl-bench (CTest omniccl_bench.smoke, label bench).
# Usage: omniccl_bench_smoke.sh OMNICCL_RUN OMNICCL_BENCH
#   1. every collective, 8 B .. 64 KiB, with -c: every row must show #wrong 0
#   2. --csv: the first line must be exactly the documented header, and every
#      data row must have 13 columns and check 0.
set -u
run=$1
bench=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0

# 1. table with result checks
if ! timeout 120 "$run" -n 2 --no-prefix "$bench" --coll all -b 8 -e 64K -f 8 -n 5 -w 1 -c \
    >"$out/table.txt" 2>"$out/table.err"; then
  echo "FAIL: table run exited non-zero"; cat "$out/table.txt" "$out/table.err"; fail=1
fi
rows=$(grep -vc '^#' "$out/table.txt" || true)
# 8 collectives x 5 sizes (8, 64, 512, 4K, 32K) + 1 barrier row
expected=$((8 * 5 + 1))
if [ "$rows" -ne "$expected" ]; then
  echo "FAIL: expected $expected result rows, got $rows"; cat "$out/table.txt"; fail=1
fi
# the last column of every result row is #wrong
bad=$(grep -v '^#' "$out/table.txt" | awk '$NF != "0"' || true)
if [ -n "$bad" ]; then echo "FAIL: rows with wrong elements:"; echo "$bad"; fail=1; fi
grep -q '^# Out of bounds values : 0 OK' "$out/table.txt" || { echo "FAIL: no 'Out of bounds values : 0 OK'"; fail=1; }

# 2. CSV header and rows
header='peer,transport,collective,ranks,bytes,count,dtype,iters,time_us,time_max_us,algbw_GBps,busbw_GBps,check'
if ! timeout 120 "$run" -n 2 --no-prefix "$bench" --coll allreduce,alltoall,barrier --sizes 8,1M -n 3 -w 1 -c --csv \
    >"$out/csv.txt" 2>"$out/csv.err"; then
  echo "FAIL: csv run exited non-zero"; cat "$out/csv.txt" "$out/csv.err"; fail=1
fi
first=$(head -n 1 "$out/csv.txt")
if [ "$first" != "$header" ]; then
  echo "FAIL: CSV header is '$first'"; fail=1
fi
badcsv=$(tail -n +2 "$out/csv.txt" | awk -F, 'NF != 13 || $1 != "omniccl" || $4 != 2 || $13 != "0"' || true)
if [ -n "$badcsv" ] || [ "$(tail -n +2 "$out/csv.txt" | wc -l)" -ne 5 ]; then
  echo "FAIL: CSV rows:"; cat "$out/csv.txt"; fail=1
fi

if [ "$fail" -eq 0 ]; then
  cat "$out/table.txt"
  echo "omniccl-bench smoke: 1 passed, 0 failed"
else
  echo "omniccl-bench smoke: 0 passed, 1 failed"
fi
exit "$fail"
