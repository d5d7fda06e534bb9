// Fuzzes the setting parsers: durations (OMNICCL_TIMEOUT and friends),
// algorithm overrides (OMNICCL_ALGO), the store limits and
// OMNICCL_SIGNAL_CLEANUP. Each must accept or throw omniccl::Error; an
// accepted duration is at least 1 ms, and only 0 turns the cleanup off.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bootstrap/store.h"
#include "common/settings.h"
#include "common/signal_cleanup.h"
#include "common/status.h"
#include "tuning/tuning.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace omniccl;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    if (parse_duration_ms(text, "OMNICCL_TIMEOUT") < 1) std::abort();
  } catch (const Error&) {}
  try {
    auto ov = AlgoOverride::parse(text, "OMNICCL_ALGO");
    (void)ov;
  } catch (const Error&) {}
  const std::string cstr = text.substr(0, text.find('\0'));
  for (const char* var : {"OMNICCL_STORE_MAX_CONNECTIONS", "OMNICCL_STORE_MAX_PENDING", "OMNICCL_STORE_MAX_BYTES",
                          "OMNICCL_STORE_IDLE_TIMEOUT"}) {
    ::setenv(var, cstr.c_str(), 1);
    try {
      auto l = bootstrap::StoreLimits::from_environment(4);
      // max_pending stays 0 (automatic) unless its own variable was set (an
      // empty value is unset) and accepted.
      const bool pending_set = std::string(var) == "OMNICCL_STORE_MAX_PENDING" && !cstr.empty();
      if (l.max_connections == 0 || l.idle_timeout_ms < 1 || (pending_set && l.max_pending == 0)) std::abort();
    } catch (const Error&) {}
    ::unsetenv(var);
  }
  ::setenv("OMNICCL_SIGNAL_CLEANUP", cstr.c_str(), 1);
  try {
    if (!signal_cleanup_enabled() && cstr != "0") std::abort();
  } catch (const Error&) {}
  ::unsetenv("OMNICCL_SIGNAL_CLEANUP");
  return 0;
}
