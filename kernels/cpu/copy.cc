// Copies without memcpy's slow distances (see copy.h).
#include "kernels/cpu/copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__SSE2__)
#include "kernels/cpu/line64.h"
#define OMNICCL_HAVE_SSE2 1
#endif

namespace omniccl::kernels::cpu {

namespace {
/// Below this, glibc's memcpy does not use rep movsb (its threshold is 2112
/// bytes on the development machines).
constexpr size_t kBackwardMin = 2048;

/// dst = src from the last 64 bytes to the first: each round's loads come
/// before its stores and lie below every store made so far, so it is also
/// memmove's result when dst is ahead of an overlapping src.
void copy_backward(char* d, const char* s, size_t bytes) {
  size_t left = bytes;
#ifdef OMNICCL_HAVE_SSE2
  for (; left >= 64; left -= 64) {
    detail::Line64::load(s + left - 64).store(d + left - 64);
  }
#endif
  std::memmove(d, s, left);  // the first bytes (less than a round; all of them without SSE2)
}
}  // namespace

bool copy_goes_backward(const void* dst, const void* src, size_t bytes) {
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  const uintptr_t ahead = (d - s) & 4095;
  const bool overlap = d < s + bytes && s < d + bytes;
  return bytes >= kBackwardMin && ahead > 0 && ahead < 64 && (!overlap || d > s);
}

void copy(void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  if (copy_goes_backward(dst, src, bytes)) {
    copy_backward(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  } else {
    std::memmove(dst, src, bytes);
  }
}

}  // namespace omniccl::kernels::cpu
