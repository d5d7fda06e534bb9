// A numpy array's memory read through numpy's C API (numpy_view.cc).
#pragma once

#include <Python.h>

#include <cstdint>

#include <omniccl/dlpack.h>

namespace omniccl_py {

/// What numpy_view reads from an array.
struct NumpyView {
  static constexpr int kMaxDims = 32;
  void* data = nullptr;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  DLDataType dtype{};
  bool readonly = false;
};

/// Fills `out` from `obj` if it is exactly a numpy.ndarray that is
/// C-contiguous, in native byte order, of a dtype OmniCCL knows and writable
/// if `writable`; else returns false (no error set) and the caller takes
/// another path. Needs the GIL. The caller keeps `obj` alive while it uses
/// the memory.
bool numpy_view(PyObject* obj, bool writable, NumpyView& out);

/// Whether this build reads numpy arrays through numpy's C API.
bool numpy_view_built();

}  // namespace omniccl_py
