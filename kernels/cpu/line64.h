// One 64-byte line moved through four SSE2 registers: the round that
// copy.cc's backward loop and stream.cc's streaming stores share. Internal to
// kernels/cpu; include only where OMNICCL_HAVE_SSE2 (SSE2) is available.
#pragma once

#include <emmintrin.h>

namespace omniccl::kernels::cpu::detail {

/// 64 bytes held in registers.
struct Line64 {
  __m128i x0, x1, x2, x3;

  /// Loads 64 bytes from `from` (any alignment).
  static Line64 load(const char* from) {
    return {_mm_loadu_si128(reinterpret_cast<const __m128i*>(from)),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 16)),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 32)),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 48))};
  }
  /// Stores them at `to` (any alignment), through the caches.
  void store(char* to) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to), x0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + 16), x1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + 32), x2);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + 48), x3);
  }
  /// Stores them at `to` (16-byte aligned) past the caches; weakly ordered
  /// (the caller fences).
  void stream(char* to) const {
    _mm_stream_si128(reinterpret_cast<__m128i*>(to), x0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + 16), x1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + 32), x2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + 48), x3);
  }
};

}  // namespace omniccl::kernels::cpu::detail
