#include "tuning/tcp_calibration.h"

#include <algorithm>
#include <array>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "common/fd.h"
#include "common/log.h"
#include "common/net.h"
#include "common/status.h"
#include "common/time.h"
#include "transport/registry.h"
#include "tuning/calibration_file.h"
#include "tuning/one_way_probe.h"

namespace omniccl {

using calibration_file::rate_text;

namespace {

constexpr const char* kMagic = "omniccl-tcp-calibration 1";
/// Messages timed per socket count, alternating (1, 2, 1, 2, ...).
constexpr int kReps = 10;

std::mutex g_mu;
// The decision this process made, and the cache file it was made for.
// Guarded by g_mu.
std::optional<TcpStreamsChoice> g_memo;
std::string g_memo_path;

/// Two loopback links of `streams` sockets, as Mesh builds them between two
/// ranks of one host (Transport::loopback), with their transport: [0] sends,
/// [1] receives.
struct LinkPair {
  explicit LinkPair(int streams) {
    transport::TransportOptions o;
    o.tcp.streams = streams;
    tcp = transport::make_transport("tcp", o);
    link = tcp->loopback();
  }
  std::unique_ptr<transport::Transport> tcp;
  std::array<std::unique_ptr<transport::Link>, 2> link;
};

/// Times kReps one-way messages of kTcpProbeBytes over one socket and over
/// two, in turn, from this thread to a helper thread; rates[i]: the fastest
/// with i + 1 sockets. False (with *error) when a message failed or took
/// longer than 2 s (time_one_way).
bool time_streams(double (&rates)[2], std::string* error) {
  LinkPair pair[2] = {LinkPair(1), LinkPair(2)};
  const size_t bytes = kTcpProbeBytes;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::array<uint64_t, 5> hdr_out{}, hdr_in{};  // the engine's header size
  static_assert(sizeof hdr_out == transport::kEngineHeaderBytes);
  transport::Message out, in;
  auto send = [&](int k, bool first) {
    if (first) {
      hdr_out[0] = uint64_t(k);
      out = transport::Message{};
      out.header = hdr_out.data();
      out.header_bytes = sizeof hdr_out;
      out.payload = {src.data(), bytes, DeviceKind::kCPU};
    }
    const bool moved = pair[(k - 1) % 2].link[0]->send(out);
    return out.complete ? ProbeStep::kDone : moved ? ProbeStep::kMoved : ProbeStep::kIdle;
  };
  auto recv = [&](int k, bool first) {
    transport::Link& link = *pair[(k - 1) % 2].link[1];
    if (first) {
      in = transport::Message{};
      in.header = hdr_in.data();
      in.header_bytes = sizeof hdr_in;
    }
    if (in.header_done < in.header_bytes) {
      if (!link.recv_header(in)) return ProbeStep::kIdle;
      if (in.header_done < in.header_bytes) return ProbeStep::kMoved;
      in.payload = {dst.data(), bytes, DeviceKind::kCPU};
    }
    const bool moved = link.recv_payload(in);
    return in.complete ? ProbeStep::kDone : moved ? ProbeStep::kMoved : ProbeStep::kIdle;
  };
  std::vector<double> seconds;
  if (!time_one_way(2 * kReps, send, recv, &seconds, error)) return false;
  double best[2] = {1e30, 1e30};
  for (int k = 1; k <= 2 * kReps; ++k) {
    double& b = best[(k - 1) % 2];
    b = std::min(b, seconds[size_t(k - 1)]);
  }
  for (int i = 0; i < 2; ++i) rates[i] = double(bytes) / best[i] / 1e9;
  return true;
}

TcpStreamsChoice calibrate() {
  const auto found = calibration_file::read_or_measure<TcpRates>(
      tcp_calibration_cache_path(), "OMNICCL_TCP_CALIBRATION", "TCP calibration", parse_tcp_calibration,
      format_tcp_calibration, measure_tcp_rates);
  if (!found.rates) {
    TcpStreamsChoice c;
    c.reason = str_cat("1 data socket per pair of ranks on this host (not measured: ", found.error, ")");
    return c;
  }
  return tcp_choice_from_rates(*found.rates, found.how);
}

}  // namespace

int tcp_streams_from_rates(const TcpRates& r) { return r.two_gbps >= kTcpTwoStreamsGain * r.one_gbps ? 2 : 1; }

TcpStreamsChoice tcp_choice_from_rates(const TcpRates& r, const std::string& how) {
  TcpStreamsChoice c;
  c.streams = tcp_streams_from_rates(r);
  c.reason =
      str_cat(c.streams, c.streams == 1 ? " data socket" : " data sockets", " per pair of ranks on this host (one-way ",
              kTcpProbeBytes >> 20, " MiB over loopback: one socket ", rate_text(r.one_gbps), " GB/s, two ",
              rate_text(r.two_gbps), " GB/s; two are used from ", kTcpTwoStreamsGain, "x; ", how, ")");
  return c;
}

std::string tcp_calibration_cache_path() {
  return calibration_file::path("OMNICCL_TCP_CALIBRATION_FILE", "omniccl-tcp-calibration");
}

std::optional<TcpRates> measure_tcp_rates(std::string* error) {
  double r[2] = {0, 0};
  try {
    if (!time_streams(r, error)) return std::nullopt;
  } catch (const std::exception& e) {  // no loopback socket, or no connection
    *error = str_cat("the TCP probe failed: ", e.what());
    return std::nullopt;
  }
  return TcpRates{r[0], r[1]};
}

std::string format_tcp_calibration(const TcpRates& r) {
  return calibration_file::format_rates(kMagic, {{"one_socket_gbps", r.one_gbps}, {"two_sockets_gbps", r.two_gbps}});
}

std::optional<TcpRates> parse_tcp_calibration(const std::string& text) {
  TcpRates r;
  if (!calibration_file::parse_rates(text, kMagic,
                                     {{"one_socket_gbps", &r.one_gbps}, {"two_sockets_gbps", &r.two_gbps}})) {
    return std::nullopt;
  }
  return r;
}

TcpStreamsChoice decide_local_tcp_streams() {
  std::lock_guard<std::mutex> lock(g_mu);
  const std::string path = tcp_calibration_cache_path();
  if (!g_memo || g_memo_path != path) {
    g_memo = calibrate();
    g_memo_path = path;
  }
  OCCL_LOG(kInfo, kTransport, g_memo->reason);
  return *g_memo;
}

void reset_tcp_streams_memo() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_memo.reset();
}

}  // namespace omniccl
