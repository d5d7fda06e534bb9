#!/usr/bin/env bash
# Smoke test of bench/interleave.sh (CTest interleave.smoke, label bench),
# with Open MPI left out (OPENMPI=0) so that it runs wherever OmniCCL builds.
# Usage: interleave_smoke.sh BUILD_DIR
#   1. two rounds of two variants: four lines in round-then-variant order,
#      each with a positive time for every collective and size asked for;
#   2. over TCP: a line with its points;
#   3. a variant whose job fails: its line says "exit N", N > 0;
#   4. a VARIANTS entry that is not NAME=value (after a good one), a bad
#      TRANSPORT or RANKS: exit 2 with a message naming the bad value, and
#      no job run.
set -u
build=$1
script=$(cd "$(dirname "$0")" && pwd)/interleave.sh
fail=0
out_file=$(mktemp)
trap 'rm -f "$out_file"' EXIT
export OPENMPI=0 ITERS=3 LIMIT=120

# 1.
out=$(ROUNDS=2 VARIANTS="default OMNICCL_SMALL_PATH=0" COLLS=allreduce,gather SIZES=8,1K "$script" "$build")
lines=$(printf '%s\n' "$out" | grep '^round ')
want=$'round 1 default:\nround 1 OMNICCL_SMALL_PATH=0:\nround 2 default:\nround 2 OMNICCL_SMALL_PATH=0:'
got=$(printf '%s\n' "$lines" | sed 's/:.*/:/')
[ "$got" = "$want" ] || { echo "FAIL: lines are"; printf '%s\n' "$out"; fail=1; }
while read -r line; do
  for p in allreduce:8 allreduce:1024 gather:8 gather:1024; do
    printf '%s\n' "$line" | grep -Eq " $p:[0-9]+(\.[0-9]+)?( |\$)" || { echo "FAIL: no $p point in: $line"; fail=1; }
  done
  printf '%s\n' "$line" | grep -Eq ':0(\.0+)?( |$)' && { echo "FAIL: a zero time in: $line"; fail=1; }
done <<<"$lines"

# 2.
out=$(TRANSPORT=tcp ROUNDS=1 COLLS=bcast SIZES=64K "$script" "$build")
printf '%s\n' "$out" | grep -Eq '^round 1 default: bcast:65536:[0-9.]+$' || { echo "FAIL: tcp output"; printf '%s\n' "$out"; fail=1; }

# 3.
out=$(ROUNDS=1 VARIANTS="OMNICCL_ALGO=all_gather=nonsense" COLLS=allgather SIZES=8 "$script" "$build")
printf '%s\n' "$out" | grep -Eq '^round 1 OMNICCL_ALGO=all_gather=nonsense: exit [1-9][0-9]*$' ||
  { echo "FAIL: a failing job is not reported"; printf '%s\n' "$out"; fail=1; }

# 4.
for bad in "VARIANTS=default foo:'foo'" "TRANSPORT=udp:'udp'" "RANKS=two:'two'"; do
  setting=${bad%%:*} name=${bad#*:}
  err=$(env "$setting" "$script" "$build" 2>&1 >"$out_file")
  rc=$?
  [ "$rc" = 2 ] && printf '%s\n' "$err" | grep -q "$name" || { echo "FAIL: $setting: exit $rc, '$err'"; fail=1; }
  ! grep -q '^round ' "$out_file" || { echo "FAIL: $setting: a job ran before the refusal"; fail=1; }
done

[ "$fail" = 0 ] && echo "interleave smoke: OK"
exit "$fail"
