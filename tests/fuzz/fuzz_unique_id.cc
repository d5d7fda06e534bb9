// Fuzzes the unique-id decoder: any 128 bytes (or fewer, zero-padded) must
// decode or be refused with omniccl::Error, for any rank/size.
#include <cstdint>
#include <cstring>

#include "bootstrap/rendezvous.h"
#include "common/status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace omniccl;
  char id[bootstrap::kUniqueIdBytes] = {};
  std::memcpy(id, data, size < sizeof id ? size : sizeof id);
  int rank = 0, world = 1;
  if (size >= sizeof id + 8) {
    std::memcpy(&rank, data + sizeof id, 4);
    std::memcpy(&world, data + sizeof id + 4, 4);
  }
  try {
    auto spec = bootstrap::decode_unique_id(id, rank, world);
    (void)spec;
  } catch (const Error&) {}
  return 0;
}
