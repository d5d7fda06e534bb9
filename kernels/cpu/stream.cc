// Streaming stores (see stream.h).
#include "kernels/cpu/stream.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>

#include "kernels/cpu/line64.h"
#define OMNICCL_HAVE_STREAM 1
#endif

namespace omniccl::kernels::cpu {

namespace {
/// stream_copy without the closing fence.
void stream_unfenced(void* dst, const void* src, size_t bytes) {
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
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) detail::Line64::load(s).stream(d);
  std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace

void stream_copy(void* dst, const void* src, size_t bytes) {
  stream_unfenced(dst, src, bytes);
#ifdef OMNICCL_HAVE_STREAM
  _mm_sfence();  // streaming stores are weakly ordered: before any later store
#endif
}

}  // namespace omniccl::kernels::cpu
