// CUDA reduction, scale and copy kernels: the GPU counterpart of
// kernels/cpu/reduce.h, with the same semantics bit for bit (both run the
// element kernels of kernels/cpu/ops.h and fp8.h, chosen by dispatch.h; for
// float16/bfloat16/fp8 arithmetic the GPU runs their counterparts in
// half_ops.h, which convert with the hardware):
// integer results wrap, float16/bfloat16/fp8 are computed in float32 and
// rounded once, NaN results are the canonical quiet NaN, MIN/MAX order -0
// before +0, bool results are 0 or 1.
//
// Every function enqueues work on `stream` and returns without waiting for
// the GPU (NCCL's contract): results are ready when the stream reaches them.
// Pointers are device pointers (or managed / mapped memory) of the device
// that owns `stream`; each must be aligned to its element size. The kernels
// read and write 16 bytes at a time where all pointers are 16-byte aligned,
// and loop grid-stride over the rest.
//
// Errors: std::invalid_argument for a bad argument (an undefined dtype/op
// pair, divisor <= 0, a misaligned pointer), checked before anything is
// enqueued; kernels::cuda::Error (runtime.h) when CUDA is unusable ("no CUDA
// driver/GPU found: ...") or a launch fails. count == 0 enqueues nothing.
//
// Host-only header: no CUDA headers needed to call these.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/types.h"

namespace omniccl::kernels::cuda {

/// A cudaStream_t (== CUstream); nullptr is the legacy default stream.
using Stream = void*;

/// out[i] = op(a[i], b[i]) for i < count. out may equal a or b.
void reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op, Stream stream);

/// data[i] = data[i] / divisor (AVG finalisation); divisor > 0. Integer
/// types truncate toward zero; half and fp8 types divide in float32.
void scale_divide(void* data, size_t count, DType t, int64_t divisor, Stream stream);

/// out[i] = in[i] * scalar (PREMUL_SUM pre-multiplication). Integer types
/// multiply by (int64)scalar modulo 2^bits. out may equal in.
void scale_multiply(void* out, const void* in, size_t count, DType t, double scalar, Stream stream);

/// dst[0, bytes) = src[0, bytes) by a kernel (16-byte accesses where both
/// are 16-byte aligned); the buffers must not overlap unless equal. For
/// plain copies cudaMemcpyAsync is as fast; this one exists so that copies
/// can run where a copy engine is busy and as the base of fused kernels.
void copy(void* dst, const void* src, size_t bytes, Stream stream);

}  // namespace omniccl::kernels::cuda
