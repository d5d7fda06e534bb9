// Streaming stores (see stream.h).
#include "kernels/cpu/stream.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/reduce.h"

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define OMNICCL_HAVE_STREAM 1
#endif

namespace omniccl::kernels::cpu {

void stream_copy(void* dst, const void* src, size_t bytes) {
#ifdef OMNICCL_HAVE_STREAM
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Regular stores up to the first 16-byte boundary of dst (a streaming
  // store needs an aligned address), then 64 bytes (a line) per round.
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), x0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), x1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), x2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), x3);
  }
  std::memcpy(d, s, bytes);
  _mm_sfence();
#else
  std::memcpy(dst, src, bytes);
#endif
}

void stream_reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op) {
#ifdef OMNICCL_HAVE_STREAM
  // Reduce a block into an L1-resident buffer, then stream it out: the
  // element kernels stay the ones of reduce() (same bits), and the block of
  // a or b that out may share has been read before it is overwritten.
  constexpr size_t kBlock = 8192;
  alignas(64) unsigned char tmp[kBlock];
  const size_t es = dtype_size(t);
  const size_t per = kBlock / es;
  auto* o = static_cast<char*>(out);
  const auto* x = static_cast<const char*>(a);
  const auto* y = static_cast<const char*>(b);
  for (size_t i = 0; i < count; i += per) {
    const size_t m = std::min(per, count - i);
    reduce(tmp, x + i * es, y + i * es, m, t, op);
    stream_copy(o + i * es, tmp, m * es);
  }
  if (count == 0) reduce(out, a, b, 0, t, op);  // validates (dtype, op) as reduce() does
#else
  reduce(out, a, b, count, t, op);
#endif
}

}  // namespace omniccl::kernels::cpu
