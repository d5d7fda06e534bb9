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
/// Copies of at least kPiecesMin bytes go in memcpy calls of kPiece bytes (see copy.h).
constexpr size_t kPiecesMin = size_t(1) << 20;
constexpr size_t kPiece = size_t(256) << 10;

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

/// Whether [dst, dst + bytes) and [src, src + bytes) share a byte.
bool overlap(const void* dst, const void* src, size_t bytes) {
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  return d < s + bytes && s < d + bytes;
}

/// copy()'s test for pieces once the backward loop is ruled out.
bool pieces(const void* dst, const void* src, size_t bytes) { return bytes >= kPiecesMin && !overlap(dst, src, bytes); }
}  // namespace

bool copy_goes_backward(const void* dst, const void* src, size_t bytes) {
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  const uintptr_t ahead = (d - s) & 4095;
  return bytes >= kBackwardMin && ahead > 0 && ahead < 64 && (!overlap(dst, src, bytes) || d > s);
}

bool copy_goes_in_pieces(const void* dst, const void* src, size_t bytes) {
  return !copy_goes_backward(dst, src, bytes) && pieces(dst, src, bytes);
}

void copy(void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  if (copy_goes_backward(dst, src, bytes)) {
    copy_backward(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  } else if (pieces(dst, src, bytes)) {
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    for (size_t done = 0; done < bytes; done += kPiece) {
      std::memcpy(d + done, s + done, bytes - done < kPiece ? bytes - done : kPiece);
    }
  } else {
    std::memmove(dst, src, bytes);
  }
}

}  // namespace omniccl::kernels::cpu
