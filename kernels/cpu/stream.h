// Streaming (non-temporal) stores for results that are large and not read
// again soon: they go to memory without first reading each destination line
// into the caches (a regular store's read-for-ownership), and without
// evicting what the caches hold. For a payload far larger than the caches
// that removes a third of the memory traffic of a copy or a reduction.
// Whether a machine gains from them is measured, not assumed
// (core/tuning/copy_calibration.h); these functions just do it.
//
// Both end with a store fence, so a flag published after them (a release
// store, which does not order non-temporal stores on x86) is seen after the
// data. Where the CPU has no such stores they are memcpy and reduce.
#pragma once

#include <cstddef>

#include "kernels/types.h"

namespace omniccl::kernels::cpu {

/// dst = src (`bytes` bytes, any alignment; the regions do not overlap),
/// stored past the caches.
void stream_copy(void* dst, const void* src, size_t bytes);

/// out[i] = op(a[i], b[i]) as reduce() (the same bits), stored past the
/// caches. out may equal a or b.
void stream_reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op);

}  // namespace omniccl::kernels::cpu
