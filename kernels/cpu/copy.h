// Plain copies that avoid two slow cases of memcpy.
//
// glibc moves blocks of more than about 2 KiB with `rep movsb`, which on AMD
// Zen 3 runs several times slower when the destination is a few bytes ahead
// of the source modulo 4 KiB (in the caches, 2.8-3.0 GB/s against 20-37 GB/s
// at other distances): each load then seems to wait for the stores just made,
// whose addresses agree in the low 12 bits. A copy that runs from the end
// backward never loads where it has just stored, so copy() takes such a loop
// for those distances and memcpy (memmove) elsewhere.
//
// Large copies between regions that do not overlap go as memcpy calls of
// 256 KiB, which stay in the caches: on an AMD family 26 machine one 8 MiB
// memmove ran at 46-57 GB/s and the same bytes in 256 KiB pieces at
// 56-65 GB/s.
#pragma once

#include <cstddef>

namespace omniccl::kernels::cpu {

/// Whether copy(dst, src, bytes) takes its backward loop: `bytes` of at
/// least 2 KiB, and dst 1-63 bytes ahead of src modulo 4 KiB (and not behind
/// src where the two overlap).
bool copy_goes_backward(const void* dst, const void* src, size_t bytes);
/// Whether copy(dst, src, bytes) goes as memcpy calls of 256 KiB: `bytes` of
/// at least 1 MiB, regions that do not overlap, and not the backward loop.
bool copy_goes_in_pieces(const void* dst, const void* src, size_t bytes);

/// dst = src (`bytes` bytes, any alignment); the regions may overlap, with
/// memmove's result.
void copy(void* dst, const void* src, size_t bytes);

}  // namespace omniccl::kernels::cpu
