// Checked size arithmetic: every product or sum of caller-supplied sizes,
// counts and displacements goes through these, so a value that does not fit
// is a clear kInvalidArgument naming what overflowed, never a wrapped size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "common/status.h"

namespace omniccl {

/// The most bytes one buffer can span (pointer differences must fit).
inline constexpr uint64_t kMaxBufferBytes = static_cast<uint64_t>(PTRDIFF_MAX);

/// a * b; throws kInvalidArgument with str_cat(what...) + " overflows" when
/// the product does not fit in uint64_t.
template <typename... What>
uint64_t checked_mul(uint64_t a, uint64_t b, What&&... what) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    fail(Status::kInvalidArgument, std::forward<What>(what)..., " overflows (", a, " x ", b, " does not fit 64 bits)");
  }
  return out;
}

/// a + b; throws kInvalidArgument as checked_mul does.
template <typename... What>
uint64_t checked_add(uint64_t a, uint64_t b, What&&... what) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    fail(Status::kInvalidArgument, std::forward<What>(what)..., " overflows (", a, " + ", b, " does not fit 64 bits)");
  }
  return out;
}

}  // namespace omniccl
