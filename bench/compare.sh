#!/usr/bin/env bash
# bench/compare.sh - OmniCCL against Open MPI, MPICH and Gloo on this machine,
# in one run, with the same sizes, iteration schedule and CSV; then the ratio
# table of bench/report.py (OmniCCL / best peer, PASS/MISS per target of
# issue 12) and single-thread memcpy bandwidth as the physical reference.
#
# Usage: bench/compare.sh [--no-install] [--quick]
#   BUILD_DIR    OmniCCL build directory (default: build-bench)
#   RESULTS_DIR  where the CSVs and the report go
#                (default: $BUILD_DIR/bench-results/<UTC date-time>)
#   JOBS         parallel compile jobs (default 2)
#   BUDGET_S     wall-clock budget of the measurements in seconds (default
#                660): each run's `timeout` is cut to what is left of it
#                (the blocked-CPU and footprint phases, ~30 s, go first), a
#                run with under 10 s left is skipped, and the report marks
#                what is missing as NO DATA. With a load average around 2 on
#                a 2-core machine the whole comparison takes about 5 minutes.
#   --no-install do not apt-get install the peers (they must be there)
#   --quick      sizes 8,1M only and fewer phases' sizes (a minute or so)
#
# Steps: (1) install Debian's openmpi-bin libopenmpi-dev mpich libmpich-dev
# libgloo-dev (apt-get, no stdin) unless present; (2) build omniccl-bench and
# omniccl-run, and the peer benchmarks (bench/peers/) and bench/memcpy_bw.c;
# (3) run every phase below, each run bounded by `timeout`; (4) report.
#
# Phases (sizes 8, 64K, 1M, 16M, 256M; float32 sum; -n auto: 1000 iterations
# up to 64 KiB, 50 at 1 MiB, 10 at 16 MiB, 3 at 256 MiB; -c: every point is
# checked once after timing, so the check column shows each library's wrong
# elements):
#   shm2   2 ranks, every collective. OmniCCL shared memory; Open MPI ob1 +
#          vader (btl self,vader); MPICH (ch4:ucx, its shared memory); Gloo
#          TCP over loopback (Gloo has no shared-memory transport).
#   tcp2   2 ranks, every collective, TCP forced: OMNICCL_TRANSPORT=tcp;
#          Open MPI btl self,tcp; MPICH MPIR_CVAR_NOLOCAL=1 with
#          UCX_TLS=tcp,self; Gloo TCP.
#   shm4   4 ranks on 2 cores (taskset -c 0,1 where the machine has more),
#          every collective and barrier; sizes 8, 1M, 16M, 256M.
#   blocked  CPU share of a rank blocked ~1 s in a barrier (2 ranks), each
#          library in its shm2 setting (and OmniCCL also over TCP).
#   footprint  OmniCCL's resident memory per communicator and its growth over
#          10,000 all_reduces of 1 MiB (2 ranks shm and tcp, 4 ranks shm).
# Only loopback carries traffic: MASTER_ADDR=127.0.0.1, Open MPI
# oob/btl_tcp_if_include lo, MPICH -iface lo and UCX_NET_DEVICES=lo, Gloo's
# device bound to 127.0.0.1.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
jobs=${JOBS:-2}
install=1
quick=0
for arg in "$@"; do
  case $arg in
    --no-install) install=0 ;;
    --quick) quick=1 ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
stamp=$(date -u +%Y%m%dT%H%M%SZ)
results=${RESULTS_DIR:-$build/bench-results/$stamp}
mkdir -p "$results"
start=$SECONDS
budget=${BUDGET_S:-660}

# log MESSAGE: a progress line with the elapsed time, also kept in run.log.
log() { printf '[compare %4ds] %s\n' "$((SECONDS - start))" "$*" | tee -a "$results/run.log" >&2; }
# load PHASE: record the machine's load before a phase (others may share it).
load() { printf '%s %s\n' "$1" "$(uptime)" >>"$results/load.txt"; log "load before $1: $(uptime | sed 's/.*load average/load average/')"; }

# ---------------------------------------------------------------------------
# 1. Install the peers
# ---------------------------------------------------------------------------
need_install=0
for f in /usr/bin/mpicc.openmpi /usr/bin/mpirun.openmpi /usr/bin/mpicc.mpich /usr/bin/mpirun.mpich \
         /usr/include/gloo/allreduce.h; do
  [ -e "$f" ] || need_install=1
done
if [ "$need_install" = 1 ]; then
  if [ "$install" = 0 ]; then
    echo "compare.sh: Open MPI, MPICH or Gloo missing and --no-install given" >&2; exit 1
  fi
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  log "installing openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 $sudo apt-get update </dev/null >"$results/apt.log" 2>&1 || true
  if ! timeout 900 $sudo apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev \
       mpich libmpich-dev libgloo-dev g++ gcc make cmake </dev/null >>"$results/apt.log" 2>&1; then
    echo "compare.sh: apt-get install failed, see $results/apt.log" >&2; exit 1
  fi
fi

# ---------------------------------------------------------------------------
# 2. Build
# ---------------------------------------------------------------------------
load build
log "building omniccl-bench and omniccl-run in $build"
if ! { cmake -S "$root" -B "$build" -DOMNICCL_WERROR=ON >/dev/null &&
       cmake --build "$build" --target omniccl-bench omniccl-run -j"$jobs" >"$results/build.log" 2>&1; }; then
  echo "compare.sh: build failed, see $results/build.log" >&2; exit 1
fi
peers=$build/bench-peers
mkdir -p "$peers"
cflags="-O2 -std=c11 -D_POSIX_C_SOURCE=200809L -D_ISOC11_SOURCE -Wall -Wextra"
log "building the peer benchmarks in $peers"
{
  mpicc.openmpi $cflags "$here/peers/mpi_bench.c" -o "$peers/mpi_bench_openmpi" &&
  mpicc.mpich $cflags "$here/peers/mpi_bench.c" -o "$peers/mpi_bench_mpich" &&
  g++ -O2 -std=c++17 -Wall -Wextra "$here/peers/gloo_bench.cc" -o "$peers/gloo_bench" -lgloo -pthread &&
  gcc $cflags "$here/memcpy_bw.c" -o "$peers/memcpy_bw"
} >>"$results/build.log" 2>&1 || { echo "compare.sh: peer build failed, see $results/build.log" >&2; exit 1; }

run=$build/tools/omniccl-run
bench=$build/tools/omniccl-bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export UCX_NET_DEVICES=lo
ompi_base=(mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1
           --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo)
mpich_base=(mpirun.mpich -launcher fork -iface lo)

if [ "$quick" = 1 ]; then
  sizes=8,1M
  sizes4=8,1M
else
  sizes=8,64K,1M,16M,256M
  sizes4=8,1M,16M,256M  # 64 KiB left out: MPICH spins 1000 x ~30 ms there
fi
common=(--sizes "$sizes" -n auto -w auto -c --csv)

# runp PHASE PEER LIMIT CMD...: runs one benchmark under `timeout LIMIT`
# (cut to what is left of the budget), CSV to $results/PHASE/PEER.csv
# (whatever it printed before a timeout is kept), stderr to PEER.err.
runp() {
  local phase=$1 peer=$2 limit=$3
  shift 3
  mkdir -p "$results/$phase"
  local left=$((measure_start + budget - SECONDS))
  if [ "$left" -lt 10 ]; then
    log "$phase/$peer: skipped, the ${budget} s budget is spent"
    echo "$phase $peer skipped (budget)" >>"$results/failures.txt"
    return
  fi
  [ "$limit" -le "$left" ] || limit=$left
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" >"$results/$phase/$peer.csv" 2>"$results/$phase/$peer.err" </dev/null || rc=$?
  local rows
  rows=$(grep -c ',' "$results/$phase/$peer.csv" 2>/dev/null || echo 0)
  log "$phase/$peer: exit $rc, $((rows > 0 ? rows - 1 : 0)) points, $((SECONDS - t0)) s"
  [ "$rc" = 0 ] || echo "$phase $peer exit $rc" >>"$results/failures.txt"
}

# Gloo ranks: omniccl-run as a plain launcher, a fresh FileStore each run.
gloo=("$here/peers/run_gloo.sh" "$run" "$peers/gloo_bench")

# pin4 CMD...: 4 ranks on 2 cores: restrict to CPUs 0,1 where there are more.
pin4=()
if [ "$(nproc)" -gt 2 ] && command -v taskset >/dev/null; then pin4=(taskset -c 0,1); fi

# ---------------------------------------------------------------------------
# 3. Runs
# ---------------------------------------------------------------------------
measure_start=$SECONDS
load memcpy
timeout 120 "$peers/memcpy_bw" 256 10 >"$results/memcpy.csv" 2>&1
log "memcpy: $(tail -n 1 "$results/memcpy.csv")"

load blocked
runp blocked omniccl 60 "$run" -n 2 --no-prefix "$bench" --blocked-cpu --csv
runp blocked omniccl-tcp 60 env OMNICCL_TRANSPORT=tcp "$run" -n 2 --no-prefix "$bench" --blocked-cpu --csv
runp blocked openmpi 60 "${ompi_base[@]}" --mca btl self,vader -n 2 "$peers/mpi_bench_openmpi" \
  --blocked-cpu --csv --peer-name openmpi --transport shm
runp blocked mpich 60 "${mpich_base[@]}" -n 2 "$peers/mpi_bench_mpich" --blocked-cpu --csv \
  --peer-name mpich --transport shm
runp blocked gloo 60 "${gloo[@]}" 2 --blocked-cpu --csv --peer-name gloo --transport tcp

load footprint
fp_ops=10000
[ "$quick" = 1 ] && fp_ops=1000
runp footprint shm2 120 "$run" -n 2 --no-prefix "$bench" --footprint "$fp_ops" --coll allreduce --sizes 1M --csv
runp footprint tcp2 120 env OMNICCL_TRANSPORT=tcp "$run" -n 2 --no-prefix "$bench" --footprint "$fp_ops" \
  --coll allreduce --sizes 1M --csv
runp footprint shm4 120 "${pin4[@]}" "$run" -n 4 --no-prefix "$bench" --footprint "$fp_ops" \
  --coll allreduce --sizes 1M --csv

load shm2
runp shm2 omniccl 150 "$run" -n 2 --no-prefix "$bench" --coll all "${common[@]}"
runp shm2 openmpi 150 "${ompi_base[@]}" --mca btl self,vader -n 2 "$peers/mpi_bench_openmpi" \
  --coll all "${common[@]}" --peer-name openmpi --transport shm
runp shm2 mpich 150 "${mpich_base[@]}" -n 2 "$peers/mpi_bench_mpich" \
  --coll all "${common[@]}" --peer-name mpich --transport shm
runp shm2 gloo 150 "${gloo[@]}" 2 --coll all "${common[@]}" --peer-name gloo --transport tcp

load tcp2
runp tcp2 omniccl 120 env OMNICCL_TRANSPORT=tcp "$run" -n 2 --no-prefix "$bench" --coll all "${common[@]}"
runp tcp2 openmpi 120 "${ompi_base[@]}" --mca btl self,tcp -n 2 "$peers/mpi_bench_openmpi" \
  --coll all "${common[@]}" --peer-name openmpi --transport tcp
runp tcp2 mpich 120 env MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self "${mpich_base[@]}" -n 2 \
  "$peers/mpi_bench_mpich" --coll all "${common[@]}" --peer-name mpich --transport tcp
runp tcp2 gloo 120 "${gloo[@]}" 2 --coll all "${common[@]}" --peer-name gloo --transport tcp

load shm4
c4=all
common4=(--sizes "$sizes4" -n auto -w auto -c --csv)
runp shm4 omniccl 120 "${pin4[@]}" "$run" -n 4 --no-prefix "$bench" --coll "$c4" "${common4[@]}"
runp shm4 openmpi 120 "${pin4[@]}" "${ompi_base[@]}" --mca btl self,vader -n 4 \
  "$peers/mpi_bench_openmpi" --coll "$c4" "${common4[@]}" --peer-name openmpi --transport shm
runp shm4 mpich 120 "${pin4[@]}" "${mpich_base[@]}" -n 4 "$peers/mpi_bench_mpich" \
  --coll "$c4" "${common4[@]}" --peer-name mpich --transport shm
runp shm4 gloo 120 "${pin4[@]}" "${gloo[@]}" 4 --coll "$c4" "${common4[@]}" \
  --peer-name gloo --transport tcp

# ---------------------------------------------------------------------------
# 4. Report
# ---------------------------------------------------------------------------
{
  echo "date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host=$(hostname)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cores=$(nproc)"
  echo "mem=$(free -g | awk '/Mem:/ {print $2 " GiB"}')"
  echo "kernel=$(uname -r)"
  echo "openmpi=$(dpkg-query -W -f '${Version}' openmpi-bin 2>/dev/null)"
  echo "mpich=$(dpkg-query -W -f '${Version}' mpich 2>/dev/null)"
  echo "gloo=$(dpkg-query -W -f '${Version}' libgloo-dev 2>/dev/null)"
  echo "omniccl=$(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo '+local changes')"
  echo "elapsed_s=$((SECONDS - start))"
} >"$results/machine.txt"
log "total $((SECONDS - start)) s; results in $results"
python3 "$here/report.py" "$results" | tee "$results/report.txt"
exit "${PIPESTATUS[0]}"
