#include "transport/tcp/tcp_transport.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>

#include "common/log.h"
#include "common/net.h"
#include "common/status.h"
#include "transport/tcp/tcp_link.h"

namespace omniccl::transport {

namespace {

constexpr char kName[] = "tcp";

/// Its part of an endpoint: "<framing>,<data sockets>,<data sockets on its host>".
struct TcpPart {
  bool offered = false;
  int streams = 1;
  int local_streams = 1;

  std::string encode() const { return str_cat(kTcpFraming, ",", streams, ",", local_streams); }
  static TcpPart of(const Endpoint& e) {
    const std::string& p = e.part(kName);
    TcpPart out;
    if (p.empty()) return out;
    const size_t c1 = p.find(','), c2 = c1 == std::string::npos ? c1 : p.find(',', c1 + 1);
    if (c2 == std::string::npos) fail(Status::kInternal, "malformed TCP part in the address record of rank ", e.rank);
    if (p.substr(0, c1) != std::to_string(kTcpFraming)) {
      fail(Status::kInvalidArgument, "rank ", e.rank, " frames TCP messages as layout ", p.substr(0, c1),
           ", this build as ", kTcpFraming, ": are all ranks using the same OmniCCL version?");
    }
    out.offered = true;
    out.streams = std::atoi(p.c_str() + c1 + 1);
    out.local_streams = std::atoi(p.c_str() + c2 + 1);
    for (int n : {out.streams, out.local_streams}) {
      if (n < 1 || n > kMaxTcpStreams) {
        fail(Status::kInternal, "malformed address record from rank ", e.rank, ": ", p, " (TCP streams)");
      }
    }
    return out;
  }
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(const TcpOptions& o, int size) : options_(o), size_(size) {}
  const char* name() const override { return kName; }
  int priority() const override { return 10; }
  std::string part() override;
  Verdict can_connect(const Endpoint& local, const Endpoint& peer) const override;
  int sockets(const Endpoint& local, const Endpoint& peer) const override;
  std::unique_ptr<Link> connect(LinkSetup& setup) override;
  std::array<std::unique_ptr<Link>, 2> loopback() override;

 private:
  TcpOptions options_;
  int size_;
};

std::string TcpTransport::part() {
  TcpPart p;
  p.streams = options_.streams > 0 ? options_.streams : auto_tcp_streams(size_);
  p.local_streams = options_.streams > 0         ? options_.streams
                    : options_.local_streams > 0 ? std::min(options_.local_streams, p.streams)
                                                 : p.streams;
  return p.encode();
}

// Any two ranks that can reach each other's listener.
Verdict TcpTransport::can_connect(const Endpoint& local, const Endpoint& peer) const {
  for (const Endpoint* e : {&local, &peer}) {
    if (!TcpPart::of(*e).offered) return {false, str_cat("rank ", e->rank, " offers no TCP")};
  }
  if (local.hostname != peer.hostname) return {true, "other host"};
  return {true, "fallback"};  // choose_transport says why the others were refused
}

// A pair of one host takes the smaller of its ranks' counts for this host,
// a pair across hosts the smaller of their counts for other hosts.
int TcpTransport::sockets(const Endpoint& local, const Endpoint& peer) const {
  const TcpPart a = TcpPart::of(local), b = TcpPart::of(peer);
  if (local.host_id == peer.host_id) return std::min(a.local_streams, b.local_streams);
  return std::min(a.streams, b.streams);
}

std::unique_ptr<Link> TcpTransport::connect(LinkSetup& s) {
  std::string changed;
  for (const UniqueFd& fd : s.sockets)
    changed = apply_congestion(fd.get(), options_.congestion, s.same_host(), s.peer->rank);
  if (!changed.empty()) {
    OCCL_LOG(kInfo, kTransport, "rank ", s.local->rank, " -> rank ", s.peer->rank, ": TCP congestion control ",
             changed);
  }
  return std::make_unique<TcpLink>(std::move(s.sockets), s.peer->rank);
}

// Over 127.0.0.1 with options_.streams sockets (at least one). A connection
// to the listener from anyone else (another local process that found it) is
// closed, not used.
std::array<std::unique_ptr<Link>, 2> TcpTransport::loopback() {
  net::SocketAddress addr;
  UniqueFd listener = net::listen_tcp("127.0.0.1", addr);
  std::vector<UniqueFd> out, in;
  const Deadline deadline = Deadline::after_ms(2000);
  for (int i = 0; i < std::max(options_.streams, 1); ++i) {
    out.push_back(net::connect_to(addr, deadline));
    in.push_back(net::accept_own(listener.get(), out.back().get(), deadline));
    if (!in.back().valid()) fail(Status::kInternal, "no loopback connection within 2 s");
  }
  for (auto* fds : {&out, &in}) {
    for (const UniqueFd& fd : *fds) apply_congestion(fd.get(), options_.congestion, /*same_host=*/true, 1);
  }
  return {std::make_unique<TcpLink>(std::move(out), 1), std::make_unique<TcpLink>(std::move(in), 0)};
}

}  // namespace

void TcpOptions::validate() const {
  check_arg(streams >= 0 && streams <= kMaxTcpStreams, "mesh: ", streams,
            " TCP data streams per peer asked for; use 1 to ", kMaxTcpStreams, " (OMNICCL_TCP_STREAMS), or auto");
  check_arg(local_streams >= 0 && local_streams <= kMaxTcpStreams, "mesh: ", local_streams,
            " TCP data streams per peer of this host asked for; use 1 to ", kMaxTcpStreams, ", or 0 (auto)");
  check_congestion_setting(congestion);
}

int auto_tcp_streams(int size) {
  rlimit l{};
  const uint64_t nofile = ::getrlimit(RLIMIT_NOFILE, &l) == 0 ? uint64_t(l.rlim_cur) : 1024;
  const uint64_t needed = uint64_t(std::max(size - 1, 0)) * 3 + 64;
  return needed <= nofile / 2 ? 2 : 1;
}

bool valid_congestion_setting(std::string_view setting) {
  if (setting.empty() || setting.size() > 15) return false;
  return std::all_of(setting.begin(), setting.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; });
}

void check_congestion_setting(std::string_view setting) {
  check_arg(valid_congestion_setting(setting), "OMNICCL_TCP_CONGESTION is '", setting,
            "'; use auto, system or a congestion control algorithm's name (cubic, reno, bbr...)");
}

std::unique_ptr<Transport> make_tcp_transport(const TcpOptions& options, int size) {
  return std::make_unique<TcpTransport>(options, size);
}

}  // namespace omniccl::transport
