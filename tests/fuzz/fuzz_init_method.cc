// Fuzzes init-method and launcher-environment parsing: the input is split at
// NUL bytes into an init method and values for the env:// variables. Every
// outcome must be a RendezvousSpec or an omniccl::Error.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "common/status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace omniccl;
  static const char* const kVars[] = {"MASTER_ADDR",          "MASTER_PORT", "RANK",         "WORLD_SIZE",
                                      "OMPI_COMM_WORLD_RANK", "PMI_SIZE",    "SLURM_PROCID", "OMNICCL_SOCKET_ADDR"};
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      parts.emplace_back();
    } else {
      parts.back().push_back(static_cast<char>(data[i]));
    }
  }
  for (size_t v = 0; v < sizeof kVars / sizeof *kVars; ++v) {
    if (v + 1 < parts.size()) {
      ::setenv(kVars[v], parts[v + 1].c_str(), 1);
    } else {
      ::unsetenv(kVars[v]);
    }
  }
  for (int rank : {0, 3, -1}) {
    try {
      auto spec = bootstrap::parse_init_method(parts[0], rank, rank < 0 ? -1 : 4);
      (void)spec;
    } catch (const Error&) {}
  }
  return 0;
}
