#include "transport/registry.h"

#include <cstdlib>
#include <vector>

#include "common/cpus.h"
#include "common/log.h"
#include "transport/shm/shm_link.h"
#include "transport/tcp/tcp_link.h"

namespace omniccl::transport {

namespace {

constexpr char kSep = '\x1f';
constexpr size_t kEndpointFields = 11;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back().push_back(c);
    }
  }
  return out;
}

// Shared memory: both ranks on one host (same boot, same IPC and network
// namespaces), and both made a segment (none is made when TCP is forced).
Verdict shm_can_connect(const Endpoint& local, const Endpoint& peer) {
  if (local.host_id != peer.host_id) {
    if (local.hostname != peer.hostname) return {false, "other host"};
    return {false, "same host name but another boot id or namespace"};
  }
  for (const Endpoint* e : {&local, &peer}) {
    if (e->shm_name.empty()) return {false, str_cat("rank ", e->rank, " offers no shared memory")};
  }
  std::string reason = "same host and boot id";
  for (const Endpoint* e : {&local, &peer}) {
    if (!e->single_copy) reason += str_cat("; single copy off on rank ", e->rank);
  }
  return {true, reason};
}

std::unique_ptr<Link> shm_make_link(LinkSetup& s) {
  auto seg = ShmSegment::open(s.peer->shm_name, s.nranks);
  const int peer = s.peer->rank;
  return std::make_unique<ShmLink>(peer, seg->ring(s.rank), seg->ring_data(s.rank), s.own_segment->ring(peer),
                                   s.own_segment->ring_data(peer), std::move(s.doorbell), std::move(seg),
                                   s.single_copy);
}

// TCP: any two ranks that can reach each other's listener.
Verdict tcp_can_connect(const Endpoint& local, const Endpoint& peer) {
  if (local.hostname != peer.hostname) return {true, "other host"};
  return {true, "fallback"};  // choose_transport says why the others were refused
}

std::unique_ptr<Link> tcp_make_link(LinkSetup& s) {
  std::string changed;
  for (const UniqueFd& fd : s.data_fds)
    changed = apply_congestion(fd.get(), s.tcp_congestion, s.same_host, s.peer->rank);
  if (!changed.empty()) {
    OCCL_LOG(kInfo, kTransport, "rank ", s.rank, " -> rank ", s.peer->rank, ": TCP congestion control ", changed);
  }
  return std::make_unique<TcpLink>(std::move(s.data_fds), s.peer->rank);
}

constexpr TransportEntry kTransports[] = {
    {"shm", 20, false, shm_can_connect, shm_make_link},
    {"tcp", 10, true, tcp_can_connect, tcp_make_link},
};

}  // namespace

std::string Endpoint::encode() const {
  return str_cat(pid, kSep, host_id, kSep, hostname, kSep, unix_addr, kSep, tcp_addr, kSep, shm_name, kSep,
                 single_copy ? 1 : 0, kSep, tcp_streams, kSep, cpus, kSep, tcp_framing, kSep, local_tcp_streams);
}

Endpoint Endpoint::decode(const std::string& text, int rank) {
  auto f = split(text, kSep);
  if (f.size() != kEndpointFields) {
    fail(Status::kInvalidArgument, "malformed address record from rank ", rank, " (", f.size(),
         " fields, this build writes ", kEndpointFields, "): are all ranks using the same OmniCCL version?");
  }
  if (f[9] != std::to_string(kTcpFraming)) {
    fail(Status::kInvalidArgument, "rank ", rank, " frames TCP messages as layout ", f[9], ", this build as ",
         kTcpFraming, ": are all ranks using the same OmniCCL version?");
  }
  if (f[6] != "0" && f[6] != "1") fail(Status::kInternal, "malformed address record from rank ", rank);
  Endpoint e;
  e.rank = rank;
  e.pid = std::atoi(f[0].c_str());
  e.host_id = f[1];
  e.hostname = f[2];
  e.unix_addr = f[3];
  e.tcp_addr = f[4];
  e.shm_name = f[5];
  e.single_copy = f[6] == "1";
  e.tcp_streams = std::atoi(f[7].c_str());
  if (e.tcp_streams < 1 || e.tcp_streams > kMaxTcpStreams) {
    fail(Status::kInternal, "malformed address record from rank ", rank, ": ", f[7], " TCP streams");
  }
  e.local_tcp_streams = std::atoi(f[10].c_str());
  if (e.local_tcp_streams < 1 || e.local_tcp_streams > kMaxTcpStreams) {
    fail(Status::kInternal, "malformed address record from rank ", rank, ": ", f[10], " TCP streams on its host");
  }
  e.cpus = f[8];
  std::vector<int> cpu_numbers;
  if (!cpus::parse(e.cpus, &cpu_numbers)) {
    fail(Status::kInternal, "malformed address record from rank ", rank, ": CPU list '", e.cpus, "'");
  }
  return e;
}

int pair_tcp_streams(const Endpoint& a, const Endpoint& b) {
  if (a.host_id == b.host_id) return std::min(a.local_tcp_streams, b.local_tcp_streams);
  return std::min(a.tcp_streams, b.tcp_streams);
}

std::span<const TransportEntry> transports() { return kTransports; }

TransportChoice choose_transport(std::span<const TransportEntry> table, const Endpoint& local, const Endpoint& peer,
                                 const std::string& forced) {
  if (!forced.empty() && forced != "auto") {
    for (const TransportEntry& t : table) {
      if (forced != t.name) continue;
      Verdict v = t.can_connect(local, peer);
      if (!v.ok) {
        fail(Status::kInvalidArgument, "OMNICCL_TRANSPORT=", forced, " but rank ", peer.rank, " (on ", peer.hostname,
             ") cannot use it: ", v.reason);
      }
      return {&t, str_cat("OMNICCL_TRANSPORT=", forced)};
    }
    fail(Status::kInvalidArgument, "OMNICCL_TRANSPORT=", forced, " names no transport of this build");
  }
  const TransportEntry* best = nullptr;
  std::string reason, refused;
  for (const TransportEntry& t : table) {
    Verdict v = t.can_connect(local, peer);
    if (!v.ok) {
      refused += str_cat(refused.empty() ? "" : "; ", t.name, ": ", v.reason);
      continue;
    }
    if (best == nullptr || t.priority > best->priority) {
      best = &t;
      reason = std::move(v.reason);
    }
  }
  if (best == nullptr) fail(Status::kInternal, "no transport can connect to rank ", peer.rank, " (", refused, ")");
  // A fallback says why the preferred ones were refused ("rank 1 offers no
  // shared memory" rather than just "fallback").
  if (reason == "fallback" && !refused.empty()) reason = refused;
  return {best, reason};
}

}  // namespace omniccl::transport
