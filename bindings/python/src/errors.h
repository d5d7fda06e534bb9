// Turning C statuses into the Python exceptions of omniccl.errors.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include <omniccl/omniccl.h>

namespace omniccl_py {

namespace py = pybind11;

/// Raises the omniccl.errors exception for `status` carrying `message`
/// (TimeoutError, PeerFailureError, MismatchError, InvalidArgumentError, ...).
/// The classes are Python code; errors._from_status builds the instance.
[[noreturn]] void raise_status(occl_status_t status, const std::string& message);

/// Raises for a failed C call: its status and occl_last_error() (read on the
/// calling thread, right after the call).
[[noreturn]] void raise_last(occl_status_t status, const char* what);

/// Shorthand for an argument error found by the binding itself, before any C
/// call: omniccl.InvalidArgumentError, a ValueError.
[[noreturn]] inline void raise_value(const std::string& message) { raise_status(OCCL_ERR_INVALID_ARGUMENT, message); }

}  // namespace omniccl_py
