#include "tuning/tcp_calibration.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "common/cpus.h"
#include "common/fd.h"
#include "common/log.h"
#include "common/net.h"
#include "common/settings.h"
#include "common/status.h"
#include "common/time.h"
#include "transport/tcp/tcp_link.h"
#include "tuning/calibration_file.h"

namespace omniccl {

using calibration_file::rate_text;

namespace {

constexpr const char* kMagic = "omniccl-tcp-calibration 1";
/// Messages timed per socket count, alternating (1, 2, 1, 2, ...).
constexpr int kReps = 10;
constexpr auto kLimit = std::chrono::seconds(2);

std::mutex g_mu;
// The decision this process made, and the cache file it was made for.
// Guarded by g_mu.
std::optional<TcpStreamsChoice> g_memo;
std::string g_memo_path;


int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Two loopback links of `streams` sockets each way's end: [0] sends, [1]
/// receives, as Mesh builds them between two ranks of one host.
std::array<std::unique_ptr<transport::TcpLink>, 2> loopback_pair(int streams) {
  net::SocketAddress addr;
  UniqueFd listener = net::listen_tcp("127.0.0.1", addr);
  std::vector<UniqueFd> out, in;
  for (int i = 0; i < streams; ++i) {
    const Deadline deadline = Deadline::after_ms(2000);
    out.push_back(net::connect_to(addr, deadline));
    UniqueFd fd = net::accept_until(listener.get(), deadline);
    if (!fd.valid()) fail(Status::kInternal, "no loopback connection within 2 s");
    in.push_back(std::move(fd));
  }
  for (auto* fds : {&out, &in}) {
    for (const UniqueFd& fd : *fds) transport::apply_congestion(fd.get(), "auto", /*same_host=*/true, 1);
  }
  return {std::make_unique<transport::TcpLink>(std::move(out), 1),
          std::make_unique<transport::TcpLink>(std::move(in), 0)};
}

/// Times kReps one-way messages of kTcpProbeBytes over one socket and over
/// two, in turn, from this thread to a helper thread; rates[i]: the fastest
/// with i + 1 sockets. Both threads spin and yield when nothing moved (a
/// host with one free core). False (with *error) when a message failed or
/// took longer than kLimit.
bool time_streams(double (&rates)[2], std::string* error) {
  std::array<std::unique_ptr<transport::TcpLink>, 2> pair[2] = {loopback_pair(1), loopback_pair(2)};
  const size_t bytes = kTcpProbeBytes;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::array<uint64_t, 5> hdr_out{}, hdr_in{};  // the engine's header size
  static_assert(sizeof hdr_out == transport::kEngineHeaderBytes);
  std::atomic<int> go{0}, done{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> end_ns{0};
  std::string thread_error;
  std::thread receiver([&] {
    try {
      for (int k = 1;; ++k) {
        while (go.load(std::memory_order_acquire) < k) {
          if (stop.load(std::memory_order_relaxed)) return;
          std::this_thread::yield();
        }
        transport::TcpLink& link = *pair[(k - 1) % 2][1];
        transport::Message m;
        m.header = hdr_in.data();
        m.header_bytes = sizeof hdr_in;
        while (m.header_done < m.header_bytes) {
          if (stop.load(std::memory_order_relaxed)) return;
          if (!link.recv_header(m)) std::this_thread::yield();
        }
        m.payload = {dst.data(), bytes, DeviceKind::kCPU};
        while (!m.complete) {
          if (stop.load(std::memory_order_relaxed)) return;
          if (!link.recv_payload(m)) std::this_thread::yield();
        }
        end_ns.store(now_ns(), std::memory_order_relaxed);
        done.store(k, std::memory_order_release);
      }
    } catch (const std::exception& e) {
      thread_error = e.what();
      done.store(-1, std::memory_order_release);
    }
  });
  double best[2] = {1e30, 1e30};
  bool ok = true;
  for (int k = 1; ok && k <= 2 * kReps; ++k) {
    transport::TcpLink& link = *pair[(k - 1) % 2][0];
    hdr_out[0] = uint64_t(k);
    transport::Message m;
    m.header = hdr_out.data();
    m.header_bytes = sizeof hdr_out;
    m.payload = {src.data(), bytes, DeviceKind::kCPU};
    const auto until = std::chrono::steady_clock::now() + kLimit;
    const int64_t start = now_ns();
    go.store(k, std::memory_order_release);
    try {
      while (!m.complete && std::chrono::steady_clock::now() <= until) {
        if (!link.send(m)) std::this_thread::yield();
      }
    } catch (const std::exception& e) {
      *error = str_cat("a TCP calibration transfer failed: ", e.what());
      ok = false;
      break;
    }
    while (done.load(std::memory_order_acquire) != k && done.load(std::memory_order_acquire) >= 0 &&
           std::chrono::steady_clock::now() <= until) {
      std::this_thread::yield();
    }
    if (done.load(std::memory_order_acquire) != k) {
      *error = thread_error.empty() ? str_cat("a TCP calibration transfer of ", bytes, " bytes took over 2 s")
                                    : str_cat("a TCP calibration transfer failed: ", thread_error);
      ok = false;
      break;
    }
    double& b = best[(k - 1) % 2];
    b = std::min(b, double(end_ns.load(std::memory_order_relaxed) - start) * 1e-9);
  }
  stop.store(true);
  receiver.join();
  if (!ok) return false;
  for (int i = 0; i < 2; ++i) rates[i] = double(bytes) / best[i] / 1e9;
  return true;
}

TcpStreamsChoice calibrate() {
  const std::string path = tcp_calibration_cache_path();
  std::string mode = "cached";
  if (auto v = get_setting("OMNICCL_TCP_CALIBRATION")) mode = *v;
  check_arg(mode == "cached" || mode == "force", "OMNICCL_TCP_CALIBRATION is '", mode, "'; use cached or force");

  UniqueFd lock = calibration_file::lock(path);  // may be invalid: then measure without one
  std::string why;
  if (mode == "cached") {
    if (auto text = calibration_file::read(path, &why)) {
      if (auto rates = parse_tcp_calibration(*text)) {
        return tcp_choice_from_rates(*rates, str_cat("from the cache ", path));
      }
      why = str_cat(path, " is not a valid TCP calibration for this host and kernel");
    }
  } else {
    why = "OMNICCL_TCP_CALIBRATION=force";
  }
  // On a thread of its own that may use every CPU: a launcher may have bound
  // this rank to one, and the probe needs two cores, as two ranks have.
  std::string error;
  std::optional<TcpRates> rates;
  std::thread probe([&] {
    cpus::allow_every_cpu();
    try {
      rates = measure_tcp_rates(&error);
    } catch (const std::exception& e) {
      error = str_cat("the TCP probe failed: ", e.what());
    }
  });
  probe.join();
  if (!rates) {
    TcpStreamsChoice c;
    c.reason = str_cat("1 data socket per pair of ranks on this host (not measured: ", error, ")");
    return c;
  }
  std::string how = str_cat("calibrated: ", why, "; cached in ", path);
  std::string werr;
  if (!calibration_file::write(path, format_tcp_calibration(*rates), &werr)) {
    how = str_cat("calibrated: ", why, "; not cached: ", werr);
  }
  return tcp_choice_from_rates(*rates, how);
}

}  // namespace

int tcp_streams_from_rates(const TcpRates& r) { return r.two_gbps >= kTcpTwoStreamsGain * r.one_gbps ? 2 : 1; }

TcpStreamsChoice tcp_choice_from_rates(const TcpRates& r, const std::string& how) {
  TcpStreamsChoice c;
  c.streams = tcp_streams_from_rates(r);
  c.reason = str_cat(c.streams, c.streams == 1 ? " data socket" : " data sockets",
                     " per pair of ranks on this host (one-way ", kTcpProbeBytes >> 20, " MiB over loopback: one socket ",
                     rate_text(r.one_gbps), " GB/s, two ", rate_text(r.two_gbps), " GB/s; two are used from ", kTcpTwoStreamsGain,
                     "x; ", how, ")");
  return c;
}

std::string tcp_calibration_cache_path() {
  return calibration_file::path("OMNICCL_TCP_CALIBRATION_FILE", "omniccl-tcp-calibration");
}

std::optional<TcpRates> measure_tcp_rates(std::string* error) {
  double r[2] = {0, 0};
  if (!time_streams(r, error)) return std::nullopt;
  return TcpRates{r[0], r[1]};
}

std::string format_tcp_calibration(const TcpRates& r) {
  return str_cat(kMagic, "\nmachine ", calibration_file::machine_key(), "\none_socket_gbps ", r.one_gbps,
                 "\ntwo_sockets_gbps ", r.two_gbps, "\n");
}

std::optional<TcpRates> parse_tcp_calibration(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return std::nullopt;
  if (!std::getline(in, line) || line != str_cat("machine ", calibration_file::machine_key())) return std::nullopt;
  TcpRates r;
  for (auto [name, field] : {std::pair{"one_socket_gbps ", &r.one_gbps}, std::pair{"two_sockets_gbps ", &r.two_gbps}}) {
    if (!std::getline(in, line) || !calibration_file::parse_rate(line, name, field)) return std::nullopt;
  }
  if (std::getline(in, line)) return std::nullopt;  // trailing garbage
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
