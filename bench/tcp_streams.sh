#!/usr/bin/env bash
# bench/tcp_streams.sh - OMNICCL_TCP_STREAMS over a link that is not loopback.
#
# Two ranks in two network namespaces joined by one veth pair (10.78.0.1 and
# .2) that loses packets (`tc netem` loss and delay where the kernel has
# netem, else nftables dropping at random, without delay), so one TCP
# connection is limited the way a lossy network limits it (its congestion
# window), not by the copies. Runs omniccl-bench (2 ranks, forced
# TCP, env:// rendezvous) with 1, 2 and 4 data sockets per pair, alternating,
# and prints its CSV rows with the stream count first.
#
# Usage: bench/tcp_streams.sh [BUILD_DIR] (default build)
#   DELAY   one-way delay per end, netem only (default 1ms: 2 ms round trip)
#   LOSS    loss per end, in per mille (default 10: 1%)
#   SIZES   omniccl-bench --sizes (default 1M,16M)
#   COLLS   omniccl-bench --coll (default bcast,allreduce)
#   STREAMS stream counts to compare (default "1 2 4")
#   ROUNDS  alternations (default 2)
# Needs root (network namespaces, tc netem). Every run is bounded by
# timeout; the namespaces are removed on exit.
set -u
build=${1:-build}
bench=$build/tools/omniccl-bench
[ -x "$bench" ] || { echo "tcp_streams.sh: $bench not built" >&2; exit 2; }
delay=${DELAY:-1ms} loss=${LOSS:-10} sizes=${SIZES:-1M,16M} colls=${COLLS:-bcast,allreduce}
streams=${STREAMS:-1 2 4} rounds=${ROUNDS:-2}
id=$(($$ % 100000))
A=occl-bench-a-$id B=occl-bench-b-$id
cleanup() {
  local ns p
  for ns in "$A" "$B"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "tcp_streams.sh: needs root (network namespaces)" >&2; exit 2; }
set -e
ip netns add "$A"
ip netns add "$B"
ip link add "va$id" type veth peer name "vb$id"
ip link set "va$id" netns "$A"
ip link set "vb$id" netns "$B"
ip -n "$A" addr add 10.78.0.1/24 dev "va$id"
ip -n "$B" addr add 10.78.0.2/24 dev "vb$id"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "va$id" up
ip -n "$B" link set "vb$id" up
set +e
how="netem delay $delay loss $loss/1000"
pct=$(awk -v l="$loss" 'BEGIN { printf "%g%%", l / 10 }')
for end in "$A va$id" "$B vb$id"; do
  read -r ns dev <<<"$end"
  if ! ip netns exec "$ns" tc qdisc add dev "$dev" root netem delay "$delay" loss "$pct" limit 100000 2>/dev/null; then
    how="nftables loss $loss/1000, no added delay (this kernel has no netem)"
    ip netns exec "$ns" nft -f - <<NFT || { echo "tcp_streams.sh: neither netem nor nftables works here" >&2; exit 2; }
table inet occl_bench_loss {
  chain in { type filter hook input priority 0; numgen random mod 1000 < $loss drop; }
  chain out { type filter hook output priority 0; numgen random mod 1000 < $loss drop; }
}
NFT
  fi
done
set +e
echo "# $(date -u +%FT%TZ) $(uname -r) $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs;" \
  "veth pair, $how on each end"
port=$((20000 + RANDOM % 10000))
for _ in $(seq 1 "$rounds"); do
  for n in $streams; do
    port=$((port + 1))
    common=(env OMNICCL_TRANSPORT=tcp OMNICCL_TCP_STREAMS="$n" WORLD_SIZE=2 MASTER_ADDR=10.78.0.1
            MASTER_PORT="$port" OMNICCL_TIMEOUT=120s)
    ip netns exec "$B" "${common[@]}" RANK=1 timeout 300 "$bench" --coll "$colls" --sizes "$sizes" \
      -n 10 -w 2 --csv >/dev/null 2>&1 &
    ip netns exec "$A" "${common[@]}" RANK=0 timeout 300 "$bench" --coll "$colls" --sizes "$sizes" \
      -n 10 -w 2 --csv 2>&1 | grep -v '^#' | grep -v '^peer' | sed "s/^/streams=$n,/"
    wait
  done
done
