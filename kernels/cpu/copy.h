// Plain copies that avoid one slow case of memcpy. glibc moves blocks of more
// than about 2 KiB with `rep movsb`, which on AMD Zen 3 (the development
// machines of this project) runs 8-10x slower when the destination is 8-24
// bytes ahead of the source modulo 4 KiB: in the caches, 4 KiB to 256 KiB
// blocks moved at 2.8-3.0 GB/s there against 20-37 GB/s at every other
// distance (README, Round 18). The loads of each round then seem to depend on
// the stores just made (their addresses agree in the low 12 bits). A copy that
// runs from the end backward never loads where it has just stored, so copy()
// takes such a loop for those distances and memcpy (memmove) elsewhere.
// Copies of 1 MiB and more between regions that do not overlap go as memcpy
// calls of 256 KiB each: on an AMD family 26 machine one 8 MiB memmove ran at
// 46-57 GB/s and the same bytes in 256 KiB pieces at 56-65 GB/s, and TCP
// scatter and all_gather of 16 MiB (which copy the root's or rank's own 8 MiB
// block) took 0.89-0.94 of their time (README, Round 27).
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
