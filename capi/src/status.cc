#include "status.h"

#include <cstring>

#include "omniccl/omniccl.h"

namespace omniccl::capi {

namespace {
thread_local std::string g_last_error;
}

occl_status_t set_error(occl_status_t status, const std::string& msg) {
  g_last_error = msg;
  return status;
}

void clear_error() { g_last_error.clear(); }

}  // namespace omniccl::capi

extern "C" {

__attribute__((visibility("default"))) const char* occl_last_error(void) { return omniccl::capi::g_last_error.c_str(); }

__attribute__((visibility("default"))) const char* occl_status_string(occl_status_t status_arg) {
  // A C caller may pass any int; in C++ an enum value outside the enumerators'
  // range is undefined behaviour (UBSan reports 999), so read it as an int.
  int status = 0;
  static_assert(sizeof status == sizeof status_arg);
  std::memcpy(&status, &status_arg, sizeof status);
  switch (status) {
    case OCCL_SUCCESS: return "OCCL_SUCCESS: no error";
    case OCCL_ERR_INVALID_ARGUMENT: return "OCCL_ERR_INVALID_ARGUMENT: an argument is invalid";
    case OCCL_ERR_UNSUPPORTED: return "OCCL_ERR_UNSUPPORTED: the request is not supported";
    case OCCL_ERR_TIMEOUT: return "OCCL_ERR_TIMEOUT: a deadline passed";
    case OCCL_ERR_PEER_FAILURE: return "OCCL_ERR_PEER_FAILURE: a peer exited or disconnected";
    case OCCL_ERR_MISMATCH: return "OCCL_ERR_MISMATCH: ranks called different operations";
    case OCCL_ERR_SYSTEM: return "OCCL_ERR_SYSTEM: an operating-system call failed";
    case OCCL_ERR_INTERNAL: return "OCCL_ERR_INTERNAL: internal error";
    case OCCL_ERR_ABORTED: return "OCCL_ERR_ABORTED: the communicator was aborted";
    case OCCL_ERR_IN_PROGRESS: return "OCCL_ERR_IN_PROGRESS: the operation has not completed";
    case OCCL_ERR_VERSION: return "OCCL_ERR_VERSION: header and library versions do not fit";
    case OCCL_ERR_OUT_OF_MEMORY: return "OCCL_ERR_OUT_OF_MEMORY: out of memory";
    case OCCL_ERR_COMM_FAILED: return "OCCL_ERR_COMM_FAILED: the communicator failed earlier";
    case OCCL_ERR_INTERRUPTED: return "OCCL_ERR_INTERRUPTED: the caller interrupted a blocking call";
    case OCCL_ERR_TRUNCATED: return "OCCL_ERR_TRUNCATED: a message was larger than its receive buffer";
  }
  return "unknown status";
}

}  // extern "C"
