// Executor: the one way algorithms and collectives touch tensor memory.
//
// Memory below capi/ always comes with its device (TensorView::device), and
// the work on it (copy, reduce, scale) goes through the executor of that
// device rather than memcpy or a kernel called directly, so an algorithm
// runs unchanged on any device an executor exists for. CPU today: memmove
// and the vectorized kernels of kernels/cpu. CUDA next: kernels/cuda on the
// call's stream (UCC's execution components have the same shape).
//
// Words: `count` is in elements of `t`, `bytes` in bytes. Every function may
// be called with count/bytes 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace omniccl {

class Executor {
 public:
  virtual ~Executor() = default;
  /// The device whose memory this executor works on.
  virtual DeviceKind device() const = 0;
  /// dst = src, `bytes` bytes; the regions may overlap (memmove semantics).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  /// out[i] = op(a[i], b[i]); out may equal a or b (kernels/cpu/reduce.h
  /// gives the semantics every executor follows: bit-identical on every rank).
  virtual void reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op) = 0;
  /// copy() of a large result not read again soon, into a region that does
  /// not overlap src: past the caches where the device has streaming stores
  /// (kernels/cpu/stream.h). Defaults to copy().
  virtual void copy_streaming(void* dst, const void* src, size_t bytes) { copy(dst, src, bytes); }
  /// data[i] /= divisor (AVG finalisation).
  virtual void scale_divide(void* data, size_t count, DType t, int64_t divisor) = 0;
  /// out[i] = in[i] * scalar (PREMUL_SUM pre-multiplication); out may equal in.
  virtual void scale_multiply(void* out, const void* in, size_t count, DType t, double scalar) = 0;
  /// Scratch memory on this device, grown on demand and reused (slot picks
  /// independent buffers); valid until the next call with the same slot.
  virtual char* scratch(size_t bytes, int slot) = 0;
};

/// An executor for CPU memory. Stateless but for its scratch buffers, so each
/// engine owns one.
class CpuExecutor final : public Executor {
 public:
  DeviceKind device() const override { return DeviceKind::kCPU; }
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_streaming(void* dst, const void* src, size_t bytes) override;
  void reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op) override;
  void scale_divide(void* data, size_t count, DType t, int64_t divisor) override;
  void scale_multiply(void* out, const void* in, size_t count, DType t, double scalar) override;
  char* scratch(size_t bytes, int slot) override;

 private:
  std::vector<std::vector<char>> scratch_;
};

/// Throws kInvalidArgument naming tensors a and b, which one call has on
/// different devices (mixed CPU/CUDA, or two GPUs); coll::Staging checks.
[[noreturn]] void fail_call_device(const TensorView* a, const TensorView* b);

}  // namespace omniccl
