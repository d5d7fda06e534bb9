// Inline copies of a few bytes, for the small-message paths: no call into
// libc (whose memcpy first dispatches on the size) for an 8-byte payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace omniccl {

/// The largest size copy_small takes.
inline constexpr size_t kSmallCopyMax = 32;

/// Copies n bytes (1..kSmallCopyMax) between buffers that do not overlap, in
/// at most four moves: the first and the last word of the widest size that
/// fits, overlapping in the middle when n is not a multiple of it.
inline void copy_small(void* dst_, const void* src_, size_t n) {
  char* dst = static_cast<char*>(dst_);
  const char* src = static_cast<const char*>(src_);
  auto move = [&]<typename W>(W) {
    W a, b;
    std::memcpy(&a, src, sizeof a);
    std::memcpy(&b, src + n - sizeof b, sizeof b);
    std::memcpy(dst, &a, sizeof a);
    std::memcpy(dst + n - sizeof b, &b, sizeof b);
  };
  if (n >= 16) {
    struct Pair {
      uint64_t lo, hi;
    };
    move(Pair{});
  } else if (n >= 8) {
    move(uint64_t{});
  } else if (n >= 4) {
    move(uint32_t{});
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

/// Copies n bytes between buffers that do not overlap: copy_small up to
/// kSmallCopyMax, memcpy above.
inline void copy_apart(void* dst, const void* src, size_t n) {
  if (n > kSmallCopyMax) {
    std::memcpy(dst, src, n);
  } else if (n > 0) {
    copy_small(dst, src, n);
  }
}

}  // namespace omniccl
