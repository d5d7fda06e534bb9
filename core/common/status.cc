#include "common/status.h"

#include <cstring>

namespace omniccl {

const char* status_name(Status s) {
  switch (s) {
    case Status::kSuccess: return "OCCL_SUCCESS";
    case Status::kInvalidArgument: return "OCCL_ERR_INVALID_ARGUMENT";
    case Status::kUnsupported: return "OCCL_ERR_UNSUPPORTED";
    case Status::kTimeout: return "OCCL_ERR_TIMEOUT";
    case Status::kPeerFailure: return "OCCL_ERR_PEER_FAILURE";
    case Status::kMismatch: return "OCCL_ERR_MISMATCH";
    case Status::kSystem: return "OCCL_ERR_SYSTEM";
    case Status::kInternal: return "OCCL_ERR_INTERNAL";
    case Status::kAborted: return "OCCL_ERR_ABORTED";
    case Status::kInProgress: return "OCCL_ERR_IN_PROGRESS";
    case Status::kVersion: return "OCCL_ERR_VERSION";
    case Status::kOutOfMemory: return "OCCL_ERR_OUT_OF_MEMORY";
    case Status::kCommFailed: return "OCCL_ERR_COMM_FAILED";
    case Status::kInterrupted: return "OCCL_ERR_INTERRUPTED";
    case Status::kTruncated: return "OCCL_ERR_TRUNCATED";
  }
  return "unknown status";
}

void fail_errno(const std::string& what, int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (may not use buf).
  const char* msg = strerror_r(err, buf, sizeof buf);
  fail(Status::kSystem, what, ": ", msg, " (errno ", err, ")");
}

}  // namespace omniccl
