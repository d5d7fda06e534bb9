// Vectorized CPU reduction kernels.
//
// Semantics every kernel follows (the core relies on them):
//  - combine is commutative bit for bit: op(a, b) == op(b, a), so every rank of
//    an all_reduce gets identical bytes whatever order partial results meet.
//  - SUM/AVG/PREMUL_SUM combine as a sum; integer sums wrap (two's complement);
//    float16/bfloat16 and the fp8 types (float8_e4m3fn, float8_e5m2) are
//    computed in float32 and rounded once, to nearest-even (fp8.h says what
//    fp8 overflow gives).
//  - MIN/MAX on floating types propagate NaN (any NaN operand gives a NaN).
//  - bool: SUM/MAX/BOR = logical or, PROD/MIN/BAND = logical and, BXOR = xor;
//    outputs are 0 or 1.
//  - complex64 / complex128: SUM adds and PROD multiplies as complex
//    numbers; AVG divides and PREMUL_SUM multiplies both parts by a real.
//  - MAXLOC / MINLOC combine (value, index) pairs (pairs.h says how ties
//    and NaN go). `count` counts items: an item is one element, or one pair
//    of elements for MAXLOC / MINLOC (types.h item_elems).
//  - Callers check is_defined(op, t) first; kernels assume a defined pair.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/types.h"

namespace omniccl::kernels::cpu {

/// inout[i] = op(inout[i], in[i]) for the items i < count. Buffers may not overlap
/// unless identical.
void reduce_inplace(void* inout, const void* in, size_t count, DType t, RedOp op);

/// out[i] = op(a[i], b[i]). out may equal a or b.
void reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op);

/// data[i] = data[i] / divisor (AVG finalisation). Integer types truncate
/// toward zero; half and fp8 types divide in float32. divisor > 0.
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
/// float <-> fp8 conversions (round to nearest even; see fp8.h for overflow).
float fp8_e4m3fn_to_float(uint8_t b);
uint8_t float_to_fp8_e4m3fn(float f);
float fp8_e5m2_to_float(uint8_t b);
uint8_t float_to_fp8_e5m2(float f);

}  // namespace omniccl::kernels::cpu
