// Float16 loops using the F16C conversion instructions (see half_f16c.h).
// Blocks of 8 elements go through AVX2 registers; the remaining < 8 use the
// portable kernels from ops.h, which give the same bits.
#include "kernels/cpu/half_f16c.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define OMNICCL_F16C_PATH 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define OMNICCL_F16C_PATH 0
#endif

namespace omniccl::kernels::cpu::f16c {
namespace {

std::atomic<bool> g_switched_off{false};

bool cpu_has_f16c() {
#if OMNICCL_F16C_PATH
  // F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does
  // not know "f16c". AVX2 through the builtin, which also checks that the OS
  // saves the AVX registers (F16C needs that too).
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    return __builtin_cpu_supports("avx2") && (ecx & (1u << 29)) != 0;
  }();
  return has;
#else
  return false;
#endif
}

uint16_t load_half(const unsigned char* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store_half(unsigned char* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }

/// Elements [begin, count) with the portable kernels.
void combine_tail(unsigned char* out, const unsigned char* a, const unsigned char* b, size_t begin, size_t count,
                  Arith op) {
  for (size_t i = begin; i < count; ++i) {
    const uint16_t x = load_half(a + 2 * i), y = load_half(b + 2 * i);
    store_half(out + 2 * i,
               op == Arith::kAdd ? detail::HalfSum<detail::Fp16>{}(x, y) : detail::HalfProd<detail::Fp16>{}(x, y));
  }
}

void map_tail(unsigned char* out, const unsigned char* in, size_t begin, size_t count, Arith op, float s) {
  for (size_t i = begin; i < count; ++i) {
    const uint16_t x = load_half(in + 2 * i);
    store_half(out + 2 * i,
               op == Arith::kMul ? detail::HalfMultiply<detail::Fp16>{s}(x) : detail::HalfDivide<detail::Fp16>{s}(x));
  }
}

#if OMNICCL_F16C_PATH
#define OMNICCL_TARGET_F16C __attribute__((target("avx2,f16c")))

OMNICCL_TARGET_F16C inline __m256 load8(const unsigned char* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

OMNICCL_TARGET_F16C inline void store8(unsigned char* p, __m128i h) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
}

/// float32 -> float16, round to nearest even whatever MXCSR says.
OMNICCL_TARGET_F16C inline __m128i round8(__m256 v) {
  return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/// NaN lanes -> the canonical 0x7e00 (|h| > Inf as a signed 16-bit compare).
OMNICCL_TARGET_F16C inline __m128i canonical8(__m128i h) {
  const __m128i abs = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
  const __m128i nan = _mm_cmpgt_epi16(abs, _mm_set1_epi16(0x7c00));
  return _mm_blendv_epi8(h, _mm_set1_epi16(0x7e00), nan);
}

template <Arith kOp>
OMNICCL_TARGET_F16C inline __m256 arith8(__m256 x, __m256 y) {
  if constexpr (kOp == Arith::kAdd) {
    return _mm256_add_ps(x, y);
  } else if constexpr (kOp == Arith::kMul) {
    return _mm256_mul_ps(x, y);
  } else {
    return _mm256_div_ps(x, y);
  }
}

/// Whole blocks of 8; returns how many elements were done.
template <Arith kOp>
OMNICCL_TARGET_F16C size_t combine_blocks(unsigned char* out, const unsigned char* a, const unsigned char* b,
                                          size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    store8(out + 2 * i, canonical8(round8(arith8<kOp>(load8(a + 2 * i), load8(b + 2 * i)))));
  }
  return i;
}

template <Arith kOp>
OMNICCL_TARGET_F16C size_t map_blocks(unsigned char* out, const unsigned char* in, size_t count, float s) {
  const __m256 scalar = _mm256_set1_ps(s);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    store8(out + 2 * i, canonical8(round8(arith8<kOp>(load8(in + 2 * i), scalar))));
  }
  return i;
}
#endif  // OMNICCL_F16C_PATH

}  // namespace

bool enabled() { return cpu_has_f16c() && !g_switched_off.load(std::memory_order_relaxed); }

void set_enabled_for_testing(bool on) { g_switched_off.store(!on, std::memory_order_relaxed); }

void combine(void* out, const void* a, const void* b, size_t count, Arith op) {
  auto* o = static_cast<unsigned char*>(out);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  size_t done = 0;
#if OMNICCL_F16C_PATH
  if (enabled()) {
    done =
        op == Arith::kAdd ? combine_blocks<Arith::kAdd>(o, x, y, count) : combine_blocks<Arith::kMul>(o, x, y, count);
  }
#endif
  combine_tail(o, x, y, done, count, op);
}

void map(void* out, const void* in, size_t count, Arith op, float s) {
  auto* o = static_cast<unsigned char*>(out);
  const auto* x = static_cast<const unsigned char*>(in);
  size_t done = 0;
#if OMNICCL_F16C_PATH
  if (enabled()) {
    done = op == Arith::kMul ? map_blocks<Arith::kMul>(o, x, count, s) : map_blocks<Arith::kDiv>(o, x, count, s);
  }
#endif
  map_tail(o, x, done, count, op, s);
}

}  // namespace omniccl::kernels::cpu::f16c
