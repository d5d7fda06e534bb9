// The TCP transport (tcp_link.h has its links): any two ranks that reach each
// other's listener; the choice for ranks of other hosts, and the fallback.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "transport/transport.h"

namespace omniccl::transport {

/// The most data sockets one TCP link may use (OMNICCL_TCP_STREAMS).
inline constexpr int kMaxTcpStreams = kMaxLinkSockets;

/// How this build frames messages on TCP data sockets (TcpLink: a large
/// payload starts, and every message ends, on a 64-byte boundary of the
/// stream; 2 had no zeros after a payload). Every endpoint carries it: ranks
/// of builds that frame differently refuse each other at setup instead of
/// misreading each other's byte streams.
inline constexpr int kTcpFraming = 3;

/// Its settings.
struct TcpOptions {
  /// Data sockets per TCP peer (1..kMaxTcpStreams; a pair uses the smaller
  /// count), or 0: auto_tcp_streams(size). OMNICCL_TCP_STREAMS.
  int streams = 0;
  /// With streams 0: data sockets per TCP peer on this host (the loopback
  /// calibration's answer, tuning/tcp_calibration.h), at most
  /// auto_tcp_streams(size); 0: auto_tcp_streams(size), as for other hosts.
  int local_streams = 0;
  /// OMNICCL_TCP_CONGESTION: "auto", "system" or an algorithm's name
  /// (apply_congestion in tcp_link.h).
  std::string congestion = "auto";
  /// Throws Error(kInvalidArgument) naming the setting that is out of range.
  void validate() const;
};

/// Data sockets per TCP peer when none were asked for (OMNICCL_TCP_STREAMS
/// unset or auto) in a job of `size` ranks: 2 while a control socket and two
/// data sockets per peer, and 64 descriptors of room, take at most half of
/// this process's open-file limit (RLIMIT_NOFILE, soft); else 1. Several
/// flows let a network card and the kernel spread one peer's traffic; on
/// loopback the calibration decides (TcpOptions::local_streams).
int auto_tcp_streams(int size);

/// Whether `setting` is a value OMNICCL_TCP_CONGESTION takes: "auto",
/// "system", or an algorithm's name (1-15 of a-z, 0-9, '_', '-').
bool valid_congestion_setting(std::string_view setting);
/// Throws kInvalidArgument, naming the setting, unless valid_congestion_setting.
void check_congestion_setting(std::string_view setting);

/// The transport of one communicator's rank of `size`.
std::unique_ptr<Transport> make_tcp_transport(const TcpOptions& options, int size);

}  // namespace omniccl::transport
