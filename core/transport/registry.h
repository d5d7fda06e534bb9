// Transport registry: the table of transports and the choice of one per peer
// pair (the shape of NCCL's transport table with its canConnect).
//
// Words used below:
//   endpoint  what one rank tells every other at setup: who and where it is
//             (host identity), its addresses, and what it offers (a shared
//             memory segment, single copy).
//   verdict   a transport's answer to "can these two endpoints use you?",
//             with the reason, which is logged.
// Both ranks of a pair run the same choice over the same two endpoints, so
// they agree on the transport without a further message: can_connect must
// be symmetric.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/fd.h"
#include "transport/transport.h"

namespace omniccl::transport {

class ShmSegment;

/// How this build frames messages on TCP data sockets (TcpLink: a large
/// payload starts, and every message ends, on a 64-byte boundary of the
/// stream; 2 had no zeros after a payload). Every setup record
/// carries it: ranks of builds that frame differently refuse each other at
/// setup instead of misreading each other's byte streams.
inline constexpr int kTcpFraming = 3;

/// One rank's record of the setup exchange.
struct Endpoint {
  int rank = -1;
  int pid = 0;
  std::string host_id;            ///< processes that share it can share memory (host, boot id, namespaces)
  std::string hostname;           ///< for messages
  std::string unix_addr;          ///< control listener on this host
  std::string tcp_addr;           ///< control and data listener across hosts
  std::string shm_name;           ///< this rank's segment; "" = it offers no shared memory
  bool single_copy = false;       ///< it asks for large payloads by reference
  int tcp_streams = 1;            ///< data sockets it asks for per TCP peer (a pair uses the smaller count)
  std::string cpus;               ///< the CPUs it may run on, a cpulist ("0-3,8"; common/cpus.h)
  int tcp_framing = kTcpFraming;  ///< its build's kTcpFraming
  /// Data sockets it asks for per TCP peer on its own host (loopback): a
  /// pair of one host uses the smaller of its two ranks' counts.
  int local_tcp_streams = 1;

  /// The record as sent in the exchange (fields in a fixed order).
  std::string encode() const;
  /// Parses a record of rank `rank`; throws Error(kInternal) when malformed,
  /// Error(kInvalidArgument) when it comes from a build of another record
  /// shape or TCP framing (kTcpFraming).
  static Endpoint decode(const std::string& text, int rank);
};

/// Data sockets a TCP link between `a` and `b` uses: the smaller of their
/// local_tcp_streams where they share a host, else of their tcp_streams.
int pair_tcp_streams(const Endpoint& a, const Endpoint& b);

struct Verdict {
  bool ok = false;
  std::string reason;  ///< why (or why not): "same host and boot id", "other host"
};

/// What a transport's factory gets to build the link to one peer.
struct LinkSetup {
  int rank = -1;  ///< this rank
  int nranks = 0;
  const Endpoint* peer = nullptr;
  std::vector<UniqueFd> data_fds;     ///< connected data sockets (transports with needs_data_socket)
  ShmSegment* own_segment = nullptr;  ///< this rank's segment (shm)
  std::function<void()> doorbell;     ///< rings the peer over its control socket
  bool single_copy = false;           ///< this rank's setting
  bool same_host = false;             ///< the peer runs on this host
  std::string tcp_congestion;         ///< MeshOptions::tcp_congestion (tcp)
};

struct TransportEntry {
  const char* name;  ///< "shm", "tcp": also the value that forces it (OMNICCL_TRANSPORT)
  /// Higher is preferred when several can connect.
  int priority;
  /// Setup connects a data socket to the peer for this transport.
  bool needs_data_socket;
  /// Whether `local` and `peer` can use this transport, and why (symmetric).
  Verdict (*can_connect)(const Endpoint& local, const Endpoint& peer);
  /// Builds the link (after setup connected what needs_data_socket asks).
  std::unique_ptr<Link> (*make_link)(LinkSetup& setup);
};

/// The transports this build offers, highest priority first.
std::span<const TransportEntry> transports();

struct TransportChoice {
  const TransportEntry* entry = nullptr;
  std::string reason;  ///< "same host and boot id", "OMNICCL_TRANSPORT=tcp"
};

/// Picks the transport between `local` and `peer` from `table`: the one
/// named by `forced` ("auto" = none), else the highest-priority one whose
/// can_connect agrees. Throws Error(kInvalidArgument) when the forced one
/// cannot connect or is unknown, and Error(kInternal) when none can.
TransportChoice choose_transport(std::span<const TransportEntry> table, const Endpoint& local, const Endpoint& peer,
                                 const std::string& forced);

}  // namespace omniccl::transport
