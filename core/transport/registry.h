// Transport registry: the table of transports and the choice of one per peer
// pair (the shape of NCCL's transport table with its canConnect). It is the
// only code that names a concrete transport: adding one is its folder under
// transport/ and one row of the table in registry.cc (core/CMakeLists.txt
// refuses an include of a transport's folder from anywhere else).
//
// Both ranks of a pair run the same choice over the same two endpoints, so
// they agree on the transport without a further message: can_connect must
// be symmetric.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/cuda_ipc/cuda_ipc_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

namespace omniccl::transport {

/// Every transport's settings, as the communicator's configuration gives
/// them; each transport reads its own part.
struct TransportOptions {
  /// "auto", or the name of the one transport to use (OMNICCL_TRANSPORT).
  std::string forced = "auto";
  ShmOptions shm;
  TcpOptions tcp;
  /// The device transport's settings; its mode also says whether device
  /// memory moves directly at all ("staged": never).
  CudaIpcOptions cuda_ipc;
  /// Throws Error(kInvalidArgument) naming the setting that is wrong.
  void validate() const {
    tcp.validate();
    cuda_ipc.validate();
  }
};

/// Where a communicator's transports are made: this rank of `size`, and the
/// session that names what they share with peers.
struct TransportContext {
  int rank = 0;
  int size = 1;
  std::string session;
};

/// A row of the table: a transport's name and how to make it.
struct TransportFactory {
  const char* name;
  std::unique_ptr<Transport> (*make)(const TransportOptions& options, const TransportContext& where);
  /// A device transport (Transport::moves_device_memory).
  bool device = false;
};

/// The transports of this build, highest priority first.
std::span<const TransportFactory> transport_table();

/// One communicator's transports from `table`: all of them, or only the one
/// that options.forced names (the other message transports then offer
/// nothing: no segment is made when TCP is forced). Device transports are
/// made unless options.cuda_ipc.mode is "staged". Throws Error(kInvalidArgument) when the forced
/// name is in no row.
std::vector<std::unique_ptr<Transport>> make_transports(const TransportOptions& options, const TransportContext& where,
                                                        std::span<const TransportFactory> table = transport_table());

/// One transport by name, for calibrations that time its links
/// (Transport::loopback); throws Error(kInvalidArgument) for an unknown name.
std::unique_ptr<Transport> make_transport(std::string_view name, const TransportOptions& options);

struct TransportChoice {
  Transport* transport = nullptr;
  std::string reason;  ///< "same host and boot id", "OMNICCL_TRANSPORT=tcp"
};

/// Picks the transport between `local` and `peer` among `transports`: the
/// one named by `forced` ("auto" = none), else the highest-priority one whose
/// can_connect agrees. Throws Error(kInvalidArgument) when the forced one
/// cannot connect or is unknown, and Error(kInternal) when none can.
TransportChoice choose_transport(std::span<const std::unique_ptr<Transport>> transports, const Endpoint& local,
                                 const Endpoint& peer, const std::string& forced);

/// Picks the device transport between `local` and `peer` (for CUDA
/// tensors): the highest-priority one whose can_connect agrees, else none
/// (transport nullptr), with the reason: such a pair stages CUDA tensors
/// through host memory. Never fails.
TransportChoice choose_device_transport(std::span<const std::unique_ptr<Transport>> transports, const Endpoint& local,
                                        const Endpoint& peer);

}  // namespace omniccl::transport
