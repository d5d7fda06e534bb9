// Float16 loops for x86 CPUs with AVX2 + F16C (vcvtph2ps / vcvtps2ph).
//
// GCC does not vectorize the portable float16 code in ops.h well (each
// conversion is a dozen integer operations), so float16 arithmetic runs about
// four times slower than memory there; these loops convert in hardware and
// stream at memory speed. Results are bit-identical to the portable kernels
// (same round-to-nearest-even, same NaN rules), so ranks on CPUs with and
// without F16C still agree byte for byte. reduce.cc uses them when enabled().
#pragma once

#include <cstddef>

namespace omniccl::kernels::cpu::f16c {

/// Arithmetic a loop applies in float32 between two float16 conversions.
enum class Arith { kAdd, kMul, kDiv };

/// True when the CPU has AVX2 and F16C and the loops have not been switched
/// off with set_enabled_for_testing(false). Always false off x86.
bool enabled();

/// Switches the F16C loops off (false) or back on (true, where the CPU has
/// them), so tests can cover the portable code on any machine.
void set_enabled_for_testing(bool on);

/// out[i] = round(float(a[i]) op float(b[i])), op = kAdd or kMul; a NaN
/// result is the canonical 0x7e00 (as HalfSum / HalfProd). out may equal a
/// or b; any byte alignment. Runs the portable kernels when !enabled().
void combine(void* out, const void* a, const void* b, size_t count, Arith op);

/// out[i] = round(float(in[i]) op s), op = kMul or kDiv (as HalfMultiply /
/// HalfDivide; NaNs are not canonicalized). out may equal in. Runs the
/// portable kernels when !enabled().
void map(void* out, const void* in, size_t count, Arith op, float s);

}  // namespace omniccl::kernels::cpu::f16c
