// Vectorized CPU reduction kernels.
//
// Semantics every kernel follows (the core relies on them):
//  - combine is commutative bit for bit: op(a, b) == op(b, a), so every rank of
//    an all_reduce gets identical bytes whatever order partial results meet.
//  - SUM/AVG/PREMUL_SUM combine as a sum; integer sums wrap (two's complement);
//    float16/bfloat16 are computed in float32 and rounded to nearest-even.
//  - MIN/MAX on floating types propagate NaN (any NaN operand gives a NaN).
//  - bool: SUM/MAX/BOR = logical or, PROD/MIN/BAND = logical and, BXOR = xor;
//    outputs are 0 or 1.
//  - Callers check is_defined(op, t) first; kernels assume a defined pair.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/types.h"

namespace omniccl::kernels::cpu {

/// inout[i] = op(inout[i], in[i]) for i < count. Buffers may not overlap
/// unless identical.
void reduce_inplace(void* inout, const void* in, size_t count, DType t, RedOp op);

/// out[i] = op(a[i], b[i]). out may equal a or b.
void reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op);

/// data[i] = data[i] / divisor (AVG finalisation). Integer types truncate
/// toward zero; half types divide in float32. divisor > 0.
void scale_divide(void* data, size_t count, DType t, int64_t divisor);

/// out[i] = in[i] * scalar (PREMUL_SUM pre-multiplication). Integer types
/// multiply by the integral scalar with wrap-around. out may equal in.
void scale_multiply(void* out, const void* in, size_t count, DType t, double scalar);

/// float <-> float16 / bfloat16 conversions (round to nearest even), exposed
/// for tests and reference implementations.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);

}  // namespace omniccl::kernels::cpu
