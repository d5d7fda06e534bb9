// Logging filtered by level (OMNICCL_DEBUG) and subsystem (OMNICCL_DEBUG_SUBSYS).
//
//   OCCL_LOG(kInfo, kTuning, "all_reduce ", bytes, " B -> ring");
// Arguments are only evaluated when the line will be printed.
#pragma once

#include <string>

#include "common/status.h"

namespace omniccl::log {

enum class Level : int { kNone = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };
enum class Subsys : unsigned {
  kInit = 1u << 0,
  kBootstrap = 1u << 1,
  kTransport = 1u << 2,
  kColl = 1u << 3,
  kTuning = 1u << 4,
};

/// True when a message of this level and subsystem is printed.
bool enabled(Level level, Subsys subsys);
/// Prints one line "[omniccl host:pid rank R] SUBSYS LEVEL text" to stderr
/// ("[omniccl host:pid]" before the first communicator gives the rank).
void write(Level level, Subsys subsys, const std::string& text);
/// Sets the rank shown in log lines of this process (the latest comm's).
void set_rank(int rank);

}  // namespace omniccl::log

#define OCCL_LOG(level, subsys, ...)                                                             \
  do {                                                                                           \
    if (::omniccl::log::enabled(::omniccl::log::Level::level, ::omniccl::log::Subsys::subsys)) { \
      ::omniccl::log::write(::omniccl::log::Level::level, ::omniccl::log::Subsys::subsys,        \
                            ::omniccl::str_cat(__VA_ARGS__));                                    \
    }                                                                                            \
  } while (0)
