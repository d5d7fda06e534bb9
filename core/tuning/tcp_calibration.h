// TCP data sockets between ranks of one host: one or two per pair?
//
// Several sockets per peer let the kernel and a network card spread one
// peer's traffic over queues, cores and congestion windows. Between two
// ranks of one host (loopback) there is no card: one machine measured two
// sockets 5-30% faster for large one-way transfers (while loopback sockets
// were paced), another one socket faster for every collective and size (two
// took up to 1.7x as long at 1 MiB). So the first communicator over TCP on a
// host times one-way messages
// between two threads over real loopback links (TcpLink) with one socket and
// with two, and caches the rates per host and kernel
// (OMNICCL_TCP_CALIBRATION_FILE); pairs of ranks of this host then use two
// sockets only where two were faster by kTcpTwoStreamsGain. Pairs on
// different hosts keep auto_tcp_streams (transport/mesh.h), and
// OMNICCL_TCP_STREAMS=N sets every pair's count, skipping all of this.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace omniccl {

/// The one-way message the probe times: large enough to be striped over
/// two sockets (16 stripes of TcpLink::kStripeBytes), small enough that a
/// rep takes about a millisecond.
inline constexpr size_t kTcpProbeBytes = size_t(4) << 20;
/// Two sockets must move the probe this much faster than one to be used.
inline constexpr double kTcpTwoStreamsGain = 1.1;

/// Rates of one-way kTcpProbeBytes messages over loopback, GB/s: with one
/// data socket, and with two (payload striped). Fastest of a few each,
/// payload bytes over the time from the first send to the receive's end.
struct TcpRates {
  double one_gbps = 0;
  double two_gbps = 0;
};

/// What a pair of ranks of this host asks for, and why (for the log).
struct TcpStreamsChoice {
  int streams = 1;
  std::string reason;  ///< "1 data socket per pair of ranks on this host (one 7.9 GB/s, two 6.8 GB/s; ...)"
};

/// 2 where rates.two_gbps >= kTcpTwoStreamsGain x rates.one_gbps, else 1.
int tcp_streams_from_rates(const TcpRates& rates);

/// The choice that follows from `rates` (`how` ends the reason).
TcpStreamsChoice tcp_choice_from_rates(const TcpRates& rates, const std::string& how);

/// The data sockets a pair of ranks of this host uses when
/// OMNICCL_TCP_STREAMS is auto: the result remembered by this process; else
/// a valid cache file for this host and kernel (unless
/// OMNICCL_TCP_CALIBRATION=force); else a measurement (about 10 ms), written
/// to the cache atomically. Ranks of one host serialize on a lock file next
/// to the cache, so one measures and the others read its result. Never
/// throws for cache, lock or probe trouble (logged; a probe that fails gives
/// 1 socket, uncached); throws Error(kInvalidArgument) for a bad
/// OMNICCL_TCP_CALIBRATION. Logs the choice at INFO (subsystem TRANSPORT).
TcpStreamsChoice decide_local_tcp_streams();

/// The cache file used: OMNICCL_TCP_CALIBRATION_FILE, else
/// $XDG_RUNTIME_DIR/omniccl-tcp-calibration, else /tmp/omniccl-tcp-calibration-<uid>.
std::string tcp_calibration_cache_path();

/// Times both ways now over 127.0.0.1. nullopt, with *error set, when a
/// socket could not be made or a transfer failed or took over 2 s.
std::optional<TcpRates> measure_tcp_rates(std::string* error);

/// Parses a cache file's text; nullopt unless it has the expected format,
/// names this host and kernel, and holds finite positive rates.
std::optional<TcpRates> parse_tcp_calibration(const std::string& text);

/// The cache text for `rates` on this host and kernel.
std::string format_tcp_calibration(const TcpRates& rates);

/// Forgets the decision remembered by this process (for tests).
void reset_tcp_streams_memo();

}  // namespace omniccl
