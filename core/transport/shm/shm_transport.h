// The shared-memory transport (shm_link.h has its links): ranks of one host
// (same boot, IPC and network namespaces) that both made a segment.
#pragma once

#include <memory>
#include <string>

#include "transport/transport.h"

namespace omniccl::transport {

/// Its settings (OMNICCL_SHM_SINGLE_COPY, after the copy calibration).
struct ShmOptions {
  /// Large payloads of collectives may go by reference (single copy).
  bool single_copy = true;
};

/// The transport of one communicator's rank `rank` of `size`; `session`
/// names its segment.
std::unique_ptr<Transport> make_shm_transport(const ShmOptions& options, int rank, int size,
                                              const std::string& session);

}  // namespace omniccl::transport
