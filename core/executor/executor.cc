#include "executor/executor.h"

#include <cstring>

#include "common/status.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/stream.h"

namespace omniccl {

void CpuExecutor::copy(void* dst, const void* src, size_t bytes) {
  kernels::cpu::copy(dst, src, bytes);  // memmove, without its slow distances
}

void CpuExecutor::copy_streaming(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) kernels::cpu::stream_copy(dst, src, bytes);
}

void CpuExecutor::reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op) {
  kernels::cpu::reduce(out, a, b, count, t, op);
}

void CpuExecutor::scale_divide(void* data, size_t count, DType t, int64_t divisor) {
  kernels::cpu::scale_divide(data, count, t, divisor);
}

void CpuExecutor::scale_multiply(void* out, const void* in, size_t count, DType t, double scalar) {
  kernels::cpu::scale_multiply(out, in, count, t, scalar);
}

char* CpuExecutor::scratch(size_t bytes, int slot) {
  if (static_cast<int>(scratch_.size()) <= slot) scratch_.resize(slot + 1);
  auto& buf = scratch_[slot];
  if (buf.size() < bytes) {
    // Nothing in it needs keeping: free first, so growing never copies.
    buf.clear();
    buf.shrink_to_fit();
    buf.resize(bytes);
  }
  return buf.data();
}

namespace {
const char* device_name(DeviceKind d) { return d == DeviceKind::kCPU ? "CPU" : "CUDA"; }
}  // namespace

void fail_call_device(const TensorView* a, const TensorView* b) {
  fail(Status::kInvalidArgument, "the tensors of one call are on different devices (", device_name(a->device), ":",
       a->device_id, " and ", device_name(b->device), ":", b->device_id,
       "); every tensor of an operation must be on the same device");
}

}  // namespace omniccl
