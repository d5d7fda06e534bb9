#!/usr/bin/env bash
# bench/interleave.sh - OmniCCL variants and Open MPI alternated, round after
# round, so that a slow minute of the machine hits each of them alike.
#
# A variant is a set of OMNICCL_* settings; each round runs one omniccl-bench
# job per variant, then (where bench/compare.sh has built it) Open MPI's peer
# benchmark with the same collectives, sizes and iteration schedule, and
# prints one line per job: round, who, then "collective:bytes:time_us" per
# point (time per call, the mean over ranks, as in omniccl-bench's CSV).
# Every job is bounded by `timeout`; a job that fails or times out prints
# its exit status instead of points.
#
# Usage: bench/interleave.sh [BUILD_DIR] (default build)
#   COLLS     omniccl-bench --coll (default allgather)
#   SIZES     omniccl-bench --sizes (default 16M,256M)
#   RANKS     ranks (default 2)
#   TRANSPORT shm or tcp (default shm; tcp sets OMNICCL_TRANSPORT=tcp and
#             Open MPI's btl self,tcp instead of self,vader)
#   VARIANTS  space-separated; each `default` or comma-joined settings, e.g.
#             "default OMNICCL_ALGO=all_gather=direct
#              OMNICCL_SHM_SINGLE_COPY=0,OMNICCL_ALGO=all_gather=direct"
#   ROUNDS    rounds (default 3)
#   ITERS     -n and -w of every job (default auto)
#   PEERS     folder with mpi_bench_openmpi (default BUILD_DIR/bench-peers,
#             else build-bench/bench-peers); OPENMPI=0 leaves Open MPI out
#   LIMIT     seconds per job (default 300)
set -u
build=${1:-build}
colls=${COLLS:-allgather} sizes=${SIZES:-16M,256M} ranks=${RANKS:-2}
transport=${TRANSPORT:-shm} variants=${VARIANTS:-default} rounds=${ROUNDS:-3}
iters=${ITERS:-auto} limit=${LIMIT:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
run=$build/tools/omniccl-run bench=$build/tools/omniccl-bench
[ -x "$bench" ] && [ -x "$run" ] || { echo "interleave.sh: build $bench and $run first" >&2; exit 2; }
case $transport in
  shm) btl=self,vader occl_env=() ;;
  tcp) btl=self,tcp occl_env=(OMNICCL_TRANSPORT=tcp) ;;
  *) echo "interleave.sh: TRANSPORT must be shm or tcp, not '$transport'" >&2; exit 2 ;;
esac
case $ranks in
  '' | *[!0-9]*) echo "interleave.sh: RANKS must be a number, not '$ranks'" >&2; exit 2 ;;
esac
for v in $variants; do
  [ "$v" = default ] && continue
  IFS=, read -r -a settings <<<"$v"
  for kv in "${settings[@]}"; do
    [[ $kv =~ ^[A-Z_][A-Z0-9_]*= ]] || { echo "interleave.sh: '$kv' in VARIANTS is not NAME=value" >&2; exit 2; }
  done
done
peer=""
if [ "${OPENMPI:-1}" != 0 ]; then
  for dir in "${PEERS:-}" "$build/bench-peers" "$root/build-bench/bench-peers"; do
    if [ -n "$dir" ] && [ -x "$dir/mpi_bench_openmpi" ] && command -v mpirun.openmpi >/dev/null; then
      peer=$dir/mpi_bench_openmpi
      break
    fi
  done
  [ -n "$peer" ] || echo "# Open MPI left out: no mpi_bench_openmpi (bench/compare.sh builds it) or no mpirun.openmpi"
fi
common=(--coll "$colls" --sizes "$sizes" -n "$iters" -w "$iters" --csv)

# points: the CSV rows of stdin as "collective:bytes:time_us" words.
points() {
  awk -F, '$1 != "peer" && NF >= 9 && $5 ~ /^[0-9]+$/ { printf " %s:%s:%s", $3, $5, $9 }'
}

# job ROUND WHO CMD...: runs one benchmark and prints its line.
job() {
  local round=$1 who=$2 out rc
  shift 2
  out=$(timeout "$limit" "$@" 2>/dev/null)
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "round $round $who: exit $rc"
  else
    echo "round $round $who:$(printf '%s\n' "$out" | points)"
  fi
}

echo "# $(date -u +%FT%TZ), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs," \
  "kernel $(uname -r); $ranks ranks, $transport, $rounds rounds"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for i in $(seq 1 "$rounds"); do
  for v in $variants; do
    settings=()
    [ "$v" = default ] || IFS=, read -r -a settings <<<"$v"
    job "$i" "$v" env "${occl_env[@]}" "${settings[@]}" "$run" -n "$ranks" --no-prefix "$bench" "${common[@]}"
  done
  if [ -n "$peer" ]; then
    job "$i" openmpi mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl "$btl" \
      --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo -n "$ranks" "$peer" "${common[@]}" \
      --peer-name openmpi --transport "$transport"
  fi
done
