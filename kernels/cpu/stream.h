// Streaming (non-temporal) stores for results that are large and not read
// again soon: they go to memory without first reading each destination line
// into the caches (a regular store's read-for-ownership), and without
// evicting what the caches hold. For a payload far larger than the caches
// that removes a third of the memory traffic of a copy. Whether a machine
// gains from them is measured, not assumed (core/tuning/copy_calibration.h).
// (Reductions do not use them: on the development VM a 16 MiB reduction
// through an L1 block and streaming stores took 3.1 ms vs 2.7 ms, and 2-rank
// reduce / reduce_scatter of 16 MiB were 10% slower with them.)
//
// stream_copy ends with a store fence, so a flag published after it (a
// release store, which does not order non-temporal stores on x86) is seen
// after the data. Where the CPU has no such stores it is memcpy.
#pragma once

#include <cstddef>

namespace omniccl::kernels::cpu {

/// dst = src (`bytes` bytes, any alignment; the regions do not overlap),
/// stored past the caches.
void stream_copy(void* dst, const void* src, size_t bytes);

}  // namespace omniccl::kernels::cpu
