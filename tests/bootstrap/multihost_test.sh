#!/usr/bin/env bash
# Multi-host, simulated: three "hosts", each a network namespace with its own
# hostname (a UTS namespace per rank, same name per host), joined by veth
# pairs to a bridge in a fourth namespace, addresses 10.77.0.1-3/24. Five
# ranks: 0 and 1 on hostA, 2 and 3 on hostB, 4 on hostC, so ranks on one
# host use shared memory and the others TCP over non-loopback addresses (the
# "mixed" path). Cases, each bounded:
#   (1) a job completes (all_reduce and split, sums checked), over "mixed";
#   (2) hostC's link is taken down (ip link set down) mid-job: every rank
#       ends with an error within the timeout (OMNICCL_TIMEOUT=8s), none hangs;
#   (3) 15% packet loss on hostC's link (tc netem; nftables where the kernel
#       has no netem) mid-job: the job still completes with correct sums;
#   (4) this machine's single-copy calibration cache is left alone: each
#       simulated host keeps its own (its hostname makes it another host, so
#       the machine's cache, measured again by them, flipped between two
#       hosts' results on every run, measured while the tests loaded the CPUs).
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); where namespaces cannot be
# created it exits 77 (CTest: skipped) saying why. Namespaces, links and the
# ranks in them are removed on exit, whatever happens.
# Usage: multihost_test.sh PATH/TO/rendezvous_probe
PROBE=${1:?usage: $0 rendezvous_probe}
source "$(dirname "$0")/lib.sh"

# The cache a rank of this machine reads (copy_calibration.cc,
# calibration_cache_path).
if [[ -n ${XDG_RUNTIME_DIR:-} && ${XDG_RUNTIME_DIR:0:1} == / && -d $XDG_RUNTIME_DIR && -O $XDG_RUNTIME_DIR ]]; then
  host_cache=$XDG_RUNTIME_DIR/omniccl-shm-calibration
else
  host_cache=/tmp/omniccl-shm-calibration-$(id -u)
fi
# Other tests may write it meanwhile (a fresh machine's first communicator
# measures), under this machine's hostname; a simulated host's name there
# is what this test must not leave.
simulated_cache() { [[ -r $host_cache ]] && sed -n 2p "$host_cache" | grep -Eq '^machine host[ABC] '; }

id=$(( $$ % 100000 ))
SW=occl-sw-$id
HOSTS=(A B C)
ns_of() { echo "occl-$1-$id"; }
cleanup_netns() {
  local ns p
  for ns in "$(ns_of A)" "$(ns_of B)" "$(ns_of C)" "$SW"; do
    # Only the ranks this test started live in these namespaces.
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  cleanup
}
trap cleanup_netns EXIT

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root to create network namespaces (uid $(id -u))"
command -v ip >/dev/null || skip "the ip tool (iproute2) is not installed"
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
ip netns add "$SW" 2>"$TMP/netns.err" || skip "cannot create a network namespace: $(cat "$TMP/netns.err")"
unshare --uts true 2>"$TMP/uts.err" || skip "cannot create a UTS namespace: $(cat "$TMP/uts.err")"

# The network: a bridge in $SW, one veth pair per host.
setup_net() {
  set -e
  ip -n "$SW" link add br0 type bridge
  ip -n "$SW" link set br0 up
  local i=1 h ns
  for h in "${HOSTS[@]}"; do
    ns=$(ns_of "$h")
    ip netns add "$ns"
    ip link add "v$h$id" type veth peer name "s$h$id"
    ip link set "v$h$id" netns "$ns"
    ip link set "s$h$id" netns "$SW"
    ip -n "$SW" link set "s$h$id" master br0 up
    ip -n "$ns" addr add "10.77.0.$i/24" dev "v$h$id"
    ip -n "$ns" link set "v$h$id" up
    ip -n "$ns" link set lo up
    i=$((i + 1))
  done
  set +e
}
( setup_net ) 2>"$TMP/net.err" || skip "cannot build the veth/bridge network: $(cat "$TMP/net.err")"

# start_host_rank NAME HOST RANK WORLD PORT [VAR=VALUE...]: one rank in
# HOST's namespace, with hostname host$HOST and that host's own calibration
# cache (real hosts do not share one), bounded by timeout 150.
start_host_rank() {
  local name=$1 host=$2 rank=$3 size=$4 port=$5
  shift 5
  ip netns exec "$(ns_of "$host")" unshare --uts sh -c 'hostname "$0" && exec "$@"' "host$host" \
    env OMNICCL_SHM_CALIBRATION_FILE="$TMP/shm-calibration-host$host" \
    "$@" RANK="$rank" WORLD_SIZE="$size" MASTER_ADDR=10.77.0.1 MASTER_PORT="$port" OMNICCL_DEBUG=INFO \
    timeout 150 "$PROBE" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  PIDS+=($!)
  eval "PID_$name=$!"
}
PLACE=(A A B B C)  # rank -> host
WANT=(mixed mixed mixed mixed tcp)  # rank -> its transport (hostC has no local peer)
start_job() {  # start_job PREFIX [VAR=VALUE...]
  local prefix=$1 r
  shift
  port=$(free_port) || { echo "FAIL: no free port" >&2; exit 1; }
  for r in 0 1 2 3 4; do start_host_rank "$prefix$r" "${PLACE[$r]}" "$r" 5 "$port" "$@"; done
}
wait_rank() {  # wait_rank NAME -> sets rc, took_ms (since $t0)
  local pid
  eval "pid=\$PID_$1"
  wait "$pid"; rc=$?
  took_ms=$(( $(now_ms) - t0 ))
}

# (1) A job across three hosts with a job token (every store and mesh
# connection proves it): mixed transport, sums right, split too.
t0=$(now_ms)
start_job ok OMNICCL_TIMEOUT=30s PROBE_SPLIT=1 OMNICCL_JOB_TOKEN=multihost-test-token
for r in 0 1 2 3 4; do
  wait_rank "ok$r"
  if ((rc == 0)) && grep -q "probe rank $r of 5 split ok" "$TMP/ok$r.out" &&
     grep -q "communicator ready: rank $r of 5 over ${WANT[$r]}" "$TMP/ok$r.err" &&
     grep -q "\[omniccl host${PLACE[$r]}:" "$TMP/ok$r.err"; then
    ok "job: rank $r on host${PLACE[$r]} completed over ${WANT[$r]} ($took_ms ms)"
  else
    fail "job: rank $r on host${PLACE[$r]}: exit $rc"; show "$TMP/ok$r.err"
  fi
done

# (2) hostC's link goes down in the middle of a job.
t0=$(now_ms)
start_job down OMNICCL_TIMEOUT=8s PROBE_LOOP_OPS=100000000
if wait_for_text "$TMP/down4.out" "probe rank 4 of 5 ok" 30; then
  sleep 0.5
  ip -n "$(ns_of C)" link set "vC$id" down
  t0=$(now_ms)
  for r in 0 1 2 3 4; do
    wait_rank "down$r"
    if ((rc == 1)) && grep -qE "OCCL_ERR_(TIMEOUT|PEER_FAILURE)" "$TMP/down$r.err" && ((took_ms < 25000)); then
      ok "link down: rank $r ended with an error $took_ms ms after the link went down"
    else
      fail "link down: rank $r: exit $rc after $took_ms ms (expected 1, a timeout or peer failure, < 25 s)"
      show "$TMP/down$r.err"
    fi
  done
  grep -h "failed:" "$TMP"/down*.err | head -n 5 | sed 's/^/  link down: /'
else
  fail "link down: the job did not start"; show "$TMP/down4.err"
fi
ip -n "$(ns_of C)" link set "vC$id" up

# (3) 15% packet loss on hostC's link, both ways, for a whole job (setup
# included): it completes with correct sums within its timeout. Every lost
# packet costs TCP a retransmission timeout (0.2-1 s, doubling each time the
# same segment or its acknowledgement is lost again), and setup is a few dozen
# round trips to hostC. At 30% both ways (a round trip fails half the time)
# those doublings made runs of 16-106 s here, TCP's tail rather than
# OmniCCL's; at 15% the job still sees retransmissions in every run. The
# deadline (120 s) bounds it; it is not a speed target.
if ip netns exec "$(ns_of C)" tc qdisc add dev "vC$id" root netem loss 15% 2>"$TMP/tc.err" &&
   ip netns exec "$SW" tc qdisc add dev "sC$id" root netem loss 15% 2>>"$TMP/tc.err"; then
  ok "loss: tc netem drops 15% of hostC's packets both ways"
  lossy=1
elif command -v nft >/dev/null && ip netns exec "$(ns_of C)" nft -f - 2>>"$TMP/tc.err" <<'NFT'
table inet occl_loss {
  chain in {
    type filter hook input priority 0;
    numgen random mod 100 < 15 drop
  }
  chain out {
    type filter hook output priority 0;
    numgen random mod 100 < 15 drop
  }
}
NFT
then
  # Kernels built without sch_netem (like some VMs') still have nf_tables.
  ok "loss: this kernel has no netem ($(head -n 1 "$TMP/tc.err")); nftables drops 15% of hostC's packets both ways"
  lossy=1
else
  fail "loss: neither tc netem nor nftables can drop packets here"; show "$TMP/tc.err"
  lossy=0
fi
if ((lossy)); then
  t0=$(now_ms)
  # A message held by TCP's retransmission backoff (several losses in a row:
  # 0.2+0.4+0.8+1.6+3.2 s) looks to the setup liveness check
  # (OMNICCL_SETUP_HEARTBEAT_TIMEOUT, default 5 s) like a stopped process:
  # give it room, as a user of such a link would.
  start_job loss OMNICCL_TIMEOUT=120s OMNICCL_SETUP_HEARTBEAT_TIMEOUT=30s PROBE_LOOP_OPS=20
  for r in 0 1 2 3 4; do
    wait_rank "loss$r"
    if ((rc == 0)) && grep -q "probe rank $r of 5 loop ok" "$TMP/loss$r.out"; then
      ok "loss: rank $r completed 21 all_reduces with correct sums in $took_ms ms"
    else
      fail "loss: rank $r: exit $rc after $took_ms ms"; show "$TMP/loss$r.err"
    fi
  done
fi
# (4) The simulated hosts left this machine's calibration cache alone.
if simulated_cache; then
  fail "cache: a simulated host wrote its calibration over this machine's, $host_cache ($(sed -n 2p "$host_cache"))"
else
  ok "cache: $host_cache holds no simulated host's calibration"
fi
finish multihost_test
