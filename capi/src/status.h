// The one place exceptions become occl_status_t (and the thread-local message).
#pragma once

#include <string>

#include "omniccl/omniccl.h"

namespace omniccl::capi {

/// Records msg as this thread's last error and returns status.
occl_status_t set_error(occl_status_t status, const std::string& msg);
/// Clears the thread's last error.
void clear_error();

/// Runs fn; turns omniccl::Error / bad_alloc / other exceptions into a status
/// and the thread-local message. Returns OCCL_SUCCESS if fn returns.
template <typename Fn>
occl_status_t guard(const char* func, Fn&& fn);

}  // namespace omniccl::capi

#include "status_inl.h"
