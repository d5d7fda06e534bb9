// Status codes and the one exception type the core throws.
//
// The core reports every failure by throwing omniccl::Error; capi/src/status.cc
// is the single place that turns it back into an occl_status_t plus the
// thread-local message. Status values equal the C enum's values.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace omniccl {

enum class Status : int {
  kSuccess = 0,
  kInvalidArgument = 1,
  kUnsupported = 2,
  kTimeout = 3,
  kPeerFailure = 4,
  kMismatch = 5,
  kSystem = 6,
  kInternal = 7,
  kAborted = 8,
  kInProgress = 9,
  kVersion = 10,
  kOutOfMemory = 11,
  kCommFailed = 12,
  kInterrupted = 13,
  kTruncated = 14,
};

/// Short stable name of a status ("OCCL_ERR_TIMEOUT").
const char* status_name(Status s);

/// Concatenates anything streamable: str_cat("rank ", r, " of ", n).
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

/// The exception every core failure is reported with.
class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

/// Throws Error(status, str_cat(args...)).
template <typename... Args>
[[noreturn]] void fail(Status status, Args&&... args) {
  throw Error(status, str_cat(std::forward<Args>(args)...));
}

/// Throws Error(kSystem) with "<what>: <strerror(err)> (errno N)".
[[noreturn]] void fail_errno(const std::string& what, int err);

/// Throws Error(kInvalidArgument, args...) unless cond holds.
template <typename... Args>
void check_arg(bool cond, Args&&... args) {
  if (!cond) fail(Status::kInvalidArgument, std::forward<Args>(args)...);
}

}  // namespace omniccl
