// TensorView: what the core knows of a tensor (no DLPack past capi/).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/device.h"
#include "kernels/types.h"

namespace omniccl {

using kernels::DType;
using kernels::dtype_name;
using kernels::dtype_size;
using kernels::is_logical;
using kernels::RedOp;
using kernels::redop_name;

/// A contiguous run of `count` elements of `dtype` at `data`.
/// On hot paths, read a view just made (the C API fills it field by field)
/// one field at a time rather than copying it whole: a whole copy reads
/// dtype and device with one 2-byte load, which cannot take its bytes from
/// the two 1-byte stores, and waits until they reach the cache, behind the
/// previous operation's stores into a peer's ring line (on shared memory).
/// The collectives' bodies capture the scalars they need for this reason.
struct TensorView {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kUInt8;
  DeviceKind device = DeviceKind::kCPU;
  int device_id = 0;

  size_t bytes() const { return count * dtype_size(dtype); }
  char* bytes_ptr() const { return static_cast<char*>(data); }
};

/// A reduce operation with its parameters.
struct ReduceSpec {
  RedOp op = RedOp::kSum;
  double premul_scalar = 1.0;  ///< PREMUL_SUM only
};

}  // namespace omniccl
