// Plain copies that avoid one slow case of memcpy. glibc moves blocks of more
// than about 2 KiB with `rep movsb`, which on AMD Zen 3 (the development
// machines of this project) runs 8-10x slower when the destination is 8-24
// bytes ahead of the source modulo 4 KiB: in the caches, 4 KiB to 256 KiB
// blocks moved at 2.8-3.0 GB/s there against 20-37 GB/s at every other
// distance (README, Round 18). The loads of each round then seem to depend on
// the stores just made (their addresses agree in the low 12 bits). A copy that
// runs from the end backward never loads where it has just stored, so copy()
// takes such a loop for those distances and memcpy (memmove) elsewhere.
#pragma once

#include <cstddef>

namespace omniccl::kernels::cpu {

/// Whether copy(dst, src, bytes) takes its backward loop: `bytes` of at
/// least 2 KiB, and dst 1-63 bytes ahead of src modulo 4 KiB (and not behind
/// src where the two overlap).
bool copy_goes_backward(const void* dst, const void* src, size_t bytes);

/// dst = src (`bytes` bytes, any alignment); the regions may overlap, with
/// memmove's result.
void copy(void* dst, const void* src, size_t bytes);

}  // namespace omniccl::kernels::cpu
