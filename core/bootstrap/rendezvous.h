// Parsing init methods, the environment of launchers, and unique ids.
#pragma once

#include <cstdint>
#include <string>

namespace omniccl::bootstrap {

/// Where ranks meet, and who they are.
struct RendezvousSpec {
  enum class Kind { kTcp, kFile, kUniqueId };
  Kind kind = Kind::kTcp;
  std::string host;   ///< kTcp, kUniqueId
  uint16_t port = 0;  ///< kTcp, kUniqueId
  std::string path;   ///< kFile: directory
  uint64_t token = 0; ///< kUniqueId: random session token (key prefix)
  int rank = -1;
  int world_size = -1;
};

/// Parses "env://", "tcp://host:port" or "file:///path" together with an
/// explicit rank and world size (-1 = take from the environment: RANK/
/// WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE, SLURM_PROCID/
/// SLURM_NTASKS, first pair found). env:// takes host and port from
/// MASTER_ADDR/MASTER_PORT. Validates 0 <= rank < world_size and names the
/// offending value and its source in an Error(kInvalidArgument).
RendezvousSpec parse_init_method(const std::string& init_method, int rank, int world_size);

/// Bytes of an encoded unique id (== OCCL_UNIQUE_ID_BYTES).
inline constexpr size_t kUniqueIdBytes = 128;

/// Creates a unique id: starts a TCP store server that lives until the
/// process exits, and encodes its address with a random token into out.
void create_unique_id(char out[kUniqueIdBytes]);

/// Decodes and validates a unique id (magic, version, lengths); throws
/// Error(kInvalidArgument) for garbage. Sets kind, host, port, token.
RendezvousSpec decode_unique_id(const char in[kUniqueIdBytes], int rank, int world_size);

}  // namespace omniccl::bootstrap
