// Tests for kernels/: the DType/RedOp tables and the CPU reduction kernels.
//
// Every expected value comes from a scalar reference written here (wide
// integer arithmetic, double-based float16/bfloat16 encoding via ldexp and
// nearbyint), never from the code under test.
#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/half_f16c.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/stream.h"
#include "kernels/types.h"

namespace omniccl::kernels {

// Readable parameter names in gtest output (found by ADL).
void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
void PrintTo(RedOp op, std::ostream* os) { *os << redop_name(op); }

namespace {

using cpu::bfloat16_to_float;
using cpu::float_to_bfloat16;
using cpu::float_to_half;
using cpu::half_to_float;

constexpr DType kAllDTypes[] = {
    DType::kInt8,   DType::kInt16,        DType::kInt32,      DType::kInt64,     DType::kUInt8,     DType::kUInt16,
    DType::kUInt32, DType::kUInt64,       DType::kFloat16,    DType::kBFloat16,  DType::kFloat32,   DType::kFloat64,
    DType::kBool,   DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kComplex64, DType::kComplex128};
constexpr RedOp kAllOps[] = {RedOp::kSum,  RedOp::kProd, RedOp::kMin,    RedOp::kMax,       RedOp::kAvg,
                             RedOp::kBAnd, RedOp::kBOr,  RedOp::kBXor,   RedOp::kPreMulSum, RedOp::kLAnd,
                             RedOp::kLOr,  RedOp::kLXor, RedOp::kMaxLoc, RedOp::kMinLoc};

/// LAND / LOR / LXOR of two truth values.
bool ref_logical(RedOp op, bool x, bool y) {
  return op == RedOp::kLAnd ? (x && y) : op == RedOp::kLOr ? (x || y) : (x != y);
}

// ---------------------------------------------------------------------------
// Reference float16 / bfloat16 codec (double based, independent of half.h).

/// A small binary floating format: `mant` stored mantissa bits, exponent
/// `bias`, 1 sign bit, exponent field `exp_bits` wide. finite_only (fp8
/// e4m3fn): no infinities, only all-ones exponent and mantissa is NaN, and
/// what would round beyond the largest finite value is NaN.
struct SmallFloat {
  int mant;
  int exp_bits;
  int bias;
  uint16_t quiet_nan;
  bool finite_only = false;
};
constexpr SmallFloat kHalf{10, 5, 15, 0x7e00};
constexpr SmallFloat kBf16{7, 8, 127, 0x7fc0};
constexpr SmallFloat kE5M2{2, 5, 15, 0x7e};
constexpr SmallFloat kE4M3{3, 4, 7, 0x7f, true};

double ref_decode(const SmallFloat& f, uint16_t h) {
  const int max_exp = (1 << f.exp_bits) - 1;
  const int e = (h >> f.mant) & max_exp;
  const int m = h & ((1 << f.mant) - 1);
  const double sign = ((h >> (f.mant + f.exp_bits)) & 1) ? -1.0 : 1.0;
  if (f.finite_only && e == max_exp && m == (1 << f.mant) - 1) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (e == max_exp && !f.finite_only) {
    return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  }
  if (e == 0) return sign * std::ldexp(m, 1 - f.bias - f.mant);
  return sign * std::ldexp(m + (1 << f.mant), e - f.bias - f.mant);
}

bool ref_is_nan(const SmallFloat& f, uint16_t h) {
  const int max_exp = (1 << f.exp_bits) - 1;
  const int m = h & ((1 << f.mant) - 1);
  if (f.finite_only) return ((h >> f.mant) & max_exp) == max_exp && m == (1 << f.mant) - 1;
  return ((h >> f.mant) & max_exp) == max_exp && m != 0;
}

/// Rounds x to the format, nearest even; NaN gives the canonical NaN.
uint16_t ref_encode(const SmallFloat& f, double x) {
  if (std::isnan(x)) return f.quiet_nan;
  const uint16_t sign = std::signbit(x) ? static_cast<uint16_t>(1u << (f.mant + f.exp_bits)) : 0;
  const int max_exp = (1 << f.exp_bits) - 1;
  // finite_only formats have no Inf: overflow is NaN (canonical here).
  const uint16_t inf = f.finite_only ? f.quiet_nan : static_cast<uint16_t>(sign | (max_exp << f.mant));
  const double a = std::fabs(x);
  if (std::isinf(a)) return inf;
  const int min_normal_exp = 1 - f.bias;
  if (a < std::ldexp(1.0, min_normal_exp)) {
    // Subnormal: a fixed-point grid of 2^(min_normal_exp - mant).
    const double n = std::nearbyint(std::ldexp(a, f.mant - min_normal_exp));
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(n));  // n == 2^mant: min normal
  }
  int e2 = 0;
  std::frexp(a, &e2);                                    // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;                                        // a in [2^e, 2^(e+1))
  double n = std::nearbyint(std::ldexp(a, f.mant - e));  // in [2^mant, 2^(mant+1)]
  if (n == std::ldexp(1.0, f.mant + 1)) {
    n /= 2;
    ++e;
  }
  const int biased = e + f.bias;
  if (f.finite_only) {
    if (biased > max_exp || (biased == max_exp && n == std::ldexp(2.0, f.mant) - 1)) return inf;
  } else if (biased >= max_exp) {
    return inf;
  }
  return static_cast<uint16_t>(sign | (biased << f.mant) | (static_cast<int>(n) - (1 << f.mant)));
}

// ---------------------------------------------------------------------------
// Reference reduction, one element at a time, on raw bytes.

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void store(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

/// Integer op with wrap-around, computed in 128 bits then truncated.
template <class T>
T ref_int(RedOp op, T a, T b) {
  using Wide = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
  const Wide x = a, y = b;
  auto wrap = [](Wide v) {  // keep the low bits, as two's complement does
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<unsigned __int128>(v) &
                                                               std::numeric_limits<std::make_unsigned_t<T>>::max()));
  };
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
    case RedOp::kPreMulSum: return wrap(x + y);
    case RedOp::kProd: return wrap(x * y);
    case RedOp::kMin: return x < y ? a : b;
    case RedOp::kMax: return x > y ? a : b;
    case RedOp::kBAnd: return wrap(x & y);
    case RedOp::kBOr: return wrap(x | y);
    case RedOp::kBXor: return wrap(x ^ y);
    case RedOp::kLAnd:
    case RedOp::kLOr:
    case RedOp::kLXor: return static_cast<T>(ref_logical(op, a != 0, b != 0));
    case RedOp::kMaxLoc:
    case RedOp::kMinLoc: break;  // pairs: see pair_kernels_test.cc
  }
  ADD_FAILURE() << "bad op";
  return 0;
}

/// Which of two ordered (non-NaN) values MIN/MAX picks: 0 for a, 1 for b.
/// Ties between -0 and +0 give -0 for MIN, +0 for MAX.
int ref_pick(RedOp op, double a, double b) {
  if (a == b) {
    const bool a_neg = std::signbit(a);
    if (op == RedOp::kMin) return a_neg ? 0 : 1;
    return a_neg ? 1 : 0;
  }
  if (op == RedOp::kMin) return a < b ? 0 : 1;
  return a > b ? 0 : 1;
}

template <class T>
constexpr T canonical_nan() {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<T>(uint32_t{0x7fc00000});
  } else {
    return std::bit_cast<T>(uint64_t{0x7ff8000000000000});
  }
}

template <class T>
T ref_float(RedOp op, T a, T b) {
  T r{};
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
    case RedOp::kPreMulSum:
      // float: the double sum rounded once to float equals the float sum.
      r = static_cast<T>(static_cast<double>(a) + static_cast<double>(b));
      break;
    case RedOp::kProd: r = static_cast<T>(static_cast<double>(a) * static_cast<double>(b)); break;
    case RedOp::kMin:
    case RedOp::kMax:
      if (std::isnan(a) || std::isnan(b)) return canonical_nan<T>();
      return ref_pick(op, a, b) == 0 ? a : b;
    case RedOp::kLAnd:
    case RedOp::kLOr:
    case RedOp::kLXor: return ref_logical(op, !(a == 0), !(b == 0)) ? T(1) : T(0);  // NaN is true
    default: ADD_FAILURE() << "bad op"; break;
  }
  return std::isnan(r) ? canonical_nan<T>() : r;
}

/// float16/bfloat16: decode, compute in float32, round once.
uint16_t ref_small(const SmallFloat& f, RedOp op, uint16_t a, uint16_t b) {
  const auto fa = static_cast<float>(ref_decode(f, a));
  const auto fb = static_cast<float>(ref_decode(f, b));
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
    case RedOp::kPreMulSum: return ref_encode(f, fa + fb);
    case RedOp::kProd: return ref_encode(f, fa * fb);
    case RedOp::kMin:
    case RedOp::kMax:
      if (ref_is_nan(f, a) || ref_is_nan(f, b)) return f.quiet_nan;
      return ref_pick(op, fa, fb) == 0 ? a : b;
    case RedOp::kLAnd:
    case RedOp::kLOr:
    case RedOp::kLXor: {
      const bool x = ref_is_nan(f, a) || fa != 0, y = ref_is_nan(f, b) || fb != 0;
      return ref_logical(op, x, y) ? ref_encode(f, 1.0f) : uint16_t{0};
    }
    default: ADD_FAILURE() << "bad op"; return 0;
  }
}

uint8_t ref_bool(RedOp op, uint8_t a, uint8_t b) {
  const bool x = a != 0, y = b != 0;
  switch (op) {
    case RedOp::kSum:
    case RedOp::kMax:
    case RedOp::kBOr:
    case RedOp::kLOr: return x || y;
    case RedOp::kProd:
    case RedOp::kMin:
    case RedOp::kBAnd:
    case RedOp::kLAnd: return x && y;
    case RedOp::kBXor:
    case RedOp::kLXor: return x != y;
    default: ADD_FAILURE() << "bad op"; return 0;
  }
}

template <class T>
void ref_int_at(RedOp op, const unsigned char* a, const unsigned char* b, unsigned char* out) {
  store<T>(out, ref_int<T>(op, load<T>(a), load<T>(b)));
}

/// out = op(a, b) for one element of type t.
void ref_reduce_one(DType t, RedOp op, const unsigned char* a, const unsigned char* b, unsigned char* out) {
  switch (t) {
    case DType::kInt8: return ref_int_at<int8_t>(op, a, b, out);
    case DType::kInt16: return ref_int_at<int16_t>(op, a, b, out);
    case DType::kInt32: return ref_int_at<int32_t>(op, a, b, out);
    case DType::kInt64: return ref_int_at<int64_t>(op, a, b, out);
    case DType::kUInt8: return ref_int_at<uint8_t>(op, a, b, out);
    case DType::kUInt16: return ref_int_at<uint16_t>(op, a, b, out);
    case DType::kUInt32: return ref_int_at<uint32_t>(op, a, b, out);
    case DType::kUInt64: return ref_int_at<uint64_t>(op, a, b, out);
    case DType::kFloat16: return store<uint16_t>(out, ref_small(kHalf, op, load<uint16_t>(a), load<uint16_t>(b)));
    case DType::kBFloat16: return store<uint16_t>(out, ref_small(kBf16, op, load<uint16_t>(a), load<uint16_t>(b)));
    case DType::kFloat32: return store<float>(out, ref_float<float>(op, load<float>(a), load<float>(b)));
    case DType::kFloat64: return store<double>(out, ref_float<double>(op, load<double>(a), load<double>(b)));
    case DType::kBool: return store<uint8_t>(out, ref_bool(op, a[0], b[0]));
    case DType::kFloat8E4M3FN: return store<uint8_t>(out, static_cast<uint8_t>(ref_small(kE4M3, op, a[0], b[0])));
    case DType::kFloat8E5M2: return store<uint8_t>(out, static_cast<uint8_t>(ref_small(kE5M2, op, a[0], b[0])));
    case DType::kComplex64:
    case DType::kComplex128: ADD_FAILURE() << "complex: see pair_kernels_test.cc"; return;
  }
  ADD_FAILURE() << "bad dtype";
}

// ---------------------------------------------------------------------------
// Test data: random bit patterns mixed with the values that break kernels.

std::vector<unsigned char> special_bytes(DType t) {
  std::vector<unsigned char> out;
  auto add = [&out](auto v) {
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    out.insert(out.end(), p, p + sizeof(v));
  };
  switch (t) {
    case DType::kFloat32:
      for (uint32_t u : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7fc00001u,
                         0x7f800001u, 0xffa00000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu, 0x3f800000u, 0xbf800000u}) {
        add(u);
      }
      break;
    case DType::kFloat64:
      for (uint64_t u : {0x0ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
                         0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff8000000000001ull, 0x7ff0000000000001ull,
                         0x1ull, 0x7fefffffffffffffull, 0x3ff0000000000000ull}) {
        add(u);
      }
      break;
    case DType::kFloat16:
      for (uint16_t u : {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7e01, 0x7c01, 0x0001, 0x83ff, 0x7bff, 0xfbff,
                         0x3c00, 0x0400}) {
        add(u);
      }
      break;
    case DType::kBFloat16:
      for (uint16_t u : {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7fc1, 0x7f81, 0x0001, 0x807f, 0x7f7f, 0xff7f,
                         0x3f80, 0x0080}) {
        add(u);
      }
      break;
    case DType::kBool:
      for (uint8_t u : {0, 1, 2, 255, 128}) add(u);
      break;
    case DType::kFloat8E4M3FN:  // 0, -0, NaN, -NaN, 448, -448, min subnormal, 1, -1, min normal
      for (uint8_t u : {0x00, 0x80, 0x7f, 0xff, 0x7e, 0xfe, 0x01, 0x38, 0xb8, 0x08}) add(u);
      break;
    case DType::kFloat8E5M2:  // 0, -0, Inf, -Inf, NaNs, 57344, min subnormal, 1, min normal
      for (uint8_t u : {0x00, 0x80, 0x7c, 0xfc, 0x7e, 0xfe, 0x7d, 0x7b, 0xfb, 0x01, 0x3c, 0x04}) {
        add(u);
      }
      break;
    default: {
      // Integer extremes: 0, 1, all ones, min and max of the signed reading.
      const size_t n = dtype_size(t);
      for (uint64_t u : {0ull, 1ull, ~0ull, 1ull << (8 * n - 1), ~0ull >> (65 - 8 * n)}) {
        for (size_t i = 0; i < n; ++i) out.push_back(static_cast<unsigned char>(u >> (8 * i)));
      }
      break;
    }
  }
  return out;
}

/// count elements of type t: mostly random bits, every 3rd one a special
/// value, so pairs of specials meet at many positions.
std::vector<unsigned char> make_data(DType t, size_t count, uint64_t seed) {
  const size_t n = dtype_size(t);
  std::vector<unsigned char> data(count * n);
  std::mt19937_64 rng(seed);
  const std::vector<unsigned char> specials = special_bytes(t);
  const size_t num_specials = specials.size() / n;
  for (size_t i = 0; i < count; ++i) {
    unsigned char* p = data.data() + i * n;
    const uint64_t r = rng();
    if (r % 3 == 0) {
      std::memcpy(p, specials.data() + (r / 3 % num_specials) * n, n);
    } else if (t == DType::kBool) {
      p[0] = static_cast<unsigned char>(r % 4 == 1 ? 0 : r >> 8);  // mostly nonzero
    } else if (is_floating(t) && r % 3 == 1) {
      // Moderate magnitudes, so sums and products are not all Inf or 0.
      const double v = std::ldexp(static_cast<double>(r >> 11) / 9007199254740992.0 - 0.5, static_cast<int>(r % 7) - 2);
      if (t == DType::kFloat64) store<double>(p, v);
      if (t == DType::kFloat32) store<float>(p, static_cast<float>(v));
      if (t == DType::kFloat16) store<uint16_t>(p, ref_encode(kHalf, v));
      if (t == DType::kBFloat16) store<uint16_t>(p, ref_encode(kBf16, v));
      if (t == DType::kFloat8E4M3FN) p[0] = static_cast<unsigned char>(ref_encode(kE4M3, v));
      if (t == DType::kFloat8E5M2) p[0] = static_cast<unsigned char>(ref_encode(kE5M2, v));
    } else {
      const uint64_t bits = rng();
      std::memcpy(p, &bits, n);
    }
  }
  return data;
}

std::vector<unsigned char> ref_reduce(DType t, RedOp op, const std::vector<unsigned char>& a,
                                      const std::vector<unsigned char>& b) {
  std::vector<unsigned char> out(a.size());
  const size_t n = dtype_size(t);
  for (size_t i = 0; i < a.size(); i += n) ref_reduce_one(t, op, &a[i], &b[i], &out[i]);
  return out;
}

std::vector<std::pair<DType, RedOp>> defined_pairs() {
  std::vector<std::pair<DType, RedOp>> pairs;
  for (DType t : kAllDTypes) {
    for (RedOp op : kAllOps) {
      // Two-part items have tests of their own (PairKernels).
      if (is_complex(t) || is_loc(op)) continue;
      if (is_defined(op, t)) pairs.emplace_back(t, op);
    }
  }
  return pairs;
}

/// Index of the first element where got and want differ, or -1.
long first_mismatch(const unsigned char* got, const std::vector<unsigned char>& want, size_t n) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) return static_cast<long>(i / n);
  }
  return -1;
}

/// A buffer with `offset` bytes before the data and guard bytes after it.
class Buffer {
 public:
  Buffer(const std::vector<unsigned char>& data, size_t offset)
      : offset_(offset), size_(data.size()), bytes_(offset + data.size() + kGuard, kFill) {
    if (!data.empty()) std::memcpy(bytes_.data() + offset_, data.data(), data.size());
  }
  unsigned char* data() { return bytes_.data() + offset_; }
  bool guards_intact() const {
    for (size_t i = 0; i < bytes_.size(); ++i) {
      if ((i < offset_ || i >= offset_ + size_) && bytes_[i] != kFill) return false;
    }
    return true;
  }

 private:
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kFill = 0xa5;
  size_t offset_;
  size_t size_;
  std::vector<unsigned char> bytes_;
};

/// The code paths to test for dtype t: float16 has a hardware (F16C) path on
/// most x86 CPUs and a portable one; both must give the reference bits.
std::vector<bool> f16c_modes(DType t) {
  cpu::f16c::set_enabled_for_testing(true);
  if (t == DType::kFloat16 && cpu::f16c::enabled()) return {true, false};
  return {true};
}

/// Turns the F16C loops on or off for a scope; back on afterwards.
class F16cMode {
 public:
  explicit F16cMode(bool on) { cpu::f16c::set_enabled_for_testing(on); }
  ~F16cMode() { cpu::f16c::set_enabled_for_testing(true); }
  F16cMode(const F16cMode&) = delete;
  F16cMode& operator=(const F16cMode&) = delete;
};

// ---------------------------------------------------------------------------
// The table functions.

TEST(KernelTypes, SizesAndNames) {
  const size_t sizes[] = {1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 1, 1, 1, 8, 16};
  const char* names[] = {"int8",   "int16",         "int32",       "int64",     "uint8",     "uint16",
                         "uint32", "uint64",        "float16",     "bfloat16",  "float32",   "float64",
                         "bool",   "float8_e4m3fn", "float8_e5m2", "complex64", "complex128"};
  static_assert(std::size(kAllDTypes) == kNumDTypes);
  for (int i = 0; i < kNumDTypes; ++i) {
    EXPECT_EQ(dtype_size(kAllDTypes[i]), sizes[i]) << i;
    EXPECT_STREQ(dtype_name(kAllDTypes[i]), names[i]) << i;
  }
  const char* op_names[] = {"SUM",  "PROD",       "MIN",  "MAX", "AVG",  "BAND",   "BOR",
                            "BXOR", "PREMUL_SUM", "LAND", "LOR", "LXOR", "MAXLOC", "MINLOC"};
  static_assert(std::size(kAllOps) == kNumRedOps);
  for (int i = 0; i < kNumRedOps; ++i) EXPECT_STREQ(redop_name(kAllOps[i]), op_names[i]);
}

TEST(KernelTypes, IsFloating) {
  for (DType t : kAllDTypes) {
    const bool want = t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 || t == DType::kFloat64 ||
                      t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
    EXPECT_EQ(is_floating(t), want) << dtype_name(t);
  }
}

TEST(KernelTypes, IsDefinedTable) {
  // Spot checks named in the design.
  EXPECT_FALSE(is_defined(RedOp::kBXor, DType::kFloat32));
  EXPECT_FALSE(is_defined(RedOp::kBAnd, DType::kBFloat16));
  EXPECT_FALSE(is_defined(RedOp::kAvg, DType::kBool));
  EXPECT_FALSE(is_defined(RedOp::kPreMulSum, DType::kBool));
  EXPECT_TRUE(is_defined(RedOp::kBXor, DType::kBool));
  EXPECT_TRUE(is_defined(RedOp::kBAnd, DType::kInt8));
  EXPECT_TRUE(is_defined(RedOp::kAvg, DType::kInt32));
  EXPECT_TRUE(is_defined(RedOp::kPreMulSum, DType::kFloat16));
  EXPECT_TRUE(is_defined(RedOp::kMin, DType::kBool));
  EXPECT_FALSE(is_defined(RedOp::kMin, DType::kComplex64));
  EXPECT_FALSE(is_defined(RedOp::kMaxLoc, DType::kFloat16));
  EXPECT_FALSE(is_defined(RedOp::kLAnd, DType::kComplex64));
  EXPECT_TRUE(is_defined(RedOp::kProd, DType::kComplex128));
  EXPECT_TRUE(is_defined(RedOp::kMinLoc, DType::kUInt8));
  // The whole table: 6 float types and 2 complex types lack 3 bitwise ops,
  // bool lacks 2 scaled ops, complex types lack MIN and MAX and the 3
  // logical ops (which take every other type); MAXLOC and MINLOC take the 8
  // integer types, float32 and float64.
  int defined = 0;
  for (DType t : kAllDTypes) {
    for (RedOp op : kAllOps) {
      const bool bitwise = op == RedOp::kBAnd || op == RedOp::kBOr || op == RedOp::kBXor;
      const bool scaled = op == RedOp::kAvg || op == RedOp::kPreMulSum;
      const bool ordered = op == RedOp::kMin || op == RedOp::kMax;
      const bool loc = op == RedOp::kMaxLoc || op == RedOp::kMinLoc;
      const bool flt = t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 || t == DType::kFloat64 ||
                       t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
      const bool cplx = t == DType::kComplex64 || t == DType::kComplex128;
      const bool loc_ok = !cplx && t != DType::kBool && (!flt || t == DType::kFloat32 || t == DType::kFloat64);
      const bool logical = op == RedOp::kLAnd || op == RedOp::kLOr || op == RedOp::kLXor;
      const bool want = !((bitwise && (flt || cplx)) || (scaled && t == DType::kBool) ||
                          ((ordered || logical) && cplx) || (loc && !loc_ok));
      EXPECT_EQ(is_defined(op, t), want) << redop_name(op) << " " << dtype_name(t);
      defined += want;
    }
  }
  EXPECT_EQ(defined, 17 * 14 - 8 * 3 - 2 - 2 * 2 - 2 * 3 - (17 - 10) * 2);
}

TEST(KernelTypes, UndefinedPairThrows) {
  float a = 1, b = 2;
  EXPECT_THROW(cpu::reduce_inplace(&a, &b, 1, DType::kFloat32, RedOp::kBXor), std::invalid_argument);
  EXPECT_THROW(cpu::reduce(&a, &a, &b, 1, DType::kFloat32, RedOp::kBAnd), std::invalid_argument);
  uint8_t c = 1;
  EXPECT_THROW(cpu::scale_divide(&c, 1, DType::kBool, 2), std::invalid_argument);
  EXPECT_THROW(cpu::scale_multiply(&c, &c, 1, DType::kBool, 2.0), std::invalid_argument);
  EXPECT_THROW(cpu::scale_divide(&a, 1, DType::kFloat32, 0), std::invalid_argument);
  EXPECT_EQ(a, 1.0f);  // nothing written
}

// ---------------------------------------------------------------------------
// Every defined (dtype, op) against the reference.

class ReduceAllPairs : public ::testing::TestWithParam<std::pair<DType, RedOp>> {};

void check_against_reference(DType t, RedOp op) {
  const size_t n = dtype_size(t);
  uint64_t seed = 1;
  for (size_t count : {0, 1, 7, 33, 1000}) {
    // Offsets: aligned, one element in (vector-misaligned), one byte in
    // (not even element aligned; DLPack byte_offset allows it).
    for (size_t offset : {size_t{0}, n, size_t{1}}) {
      SCOPED_TRACE("count " + std::to_string(count) + " offset " + std::to_string(offset));
      const auto a = make_data(t, count, seed++);
      const auto b = make_data(t, count, seed++);
      const auto want = ref_reduce(t, op, a, b);

      Buffer io(a, offset), in(b, offset + 3);
      cpu::reduce_inplace(io.data(), in.data(), count, t, op);
      EXPECT_EQ(first_mismatch(io.data(), want, n), -1) << "reduce_inplace";
      EXPECT_TRUE(io.guards_intact());

      Buffer out(std::vector<unsigned char>(a.size()), offset), ba(a, offset + 1), bb(b, offset + 2);
      cpu::reduce(out.data(), ba.data(), bb.data(), count, t, op);
      EXPECT_EQ(first_mismatch(out.data(), want, n), -1) << "reduce";
      EXPECT_TRUE(out.guards_intact());

      Buffer oa(a, offset), ob(b, offset + 5);
      cpu::reduce(oa.data(), oa.data(), ob.data(), count, t, op);
      EXPECT_EQ(first_mismatch(oa.data(), want, n), -1) << "reduce out == a";
      Buffer pa(a, offset + 7), pb(b, offset);
      cpu::reduce(pb.data(), pa.data(), pb.data(), count, t, op);
      EXPECT_EQ(first_mismatch(pb.data(), want, n), -1) << "reduce out == b";
      EXPECT_TRUE(pb.guards_intact());

      // Both operands the same buffer.
      const auto want_self = ref_reduce(t, op, a, a);
      Buffer self(a, offset);
      cpu::reduce_inplace(self.data(), self.data(), count, t, op);
      EXPECT_EQ(first_mismatch(self.data(), want_self, n), -1) << "reduce_inplace self";
      Buffer self_out(std::vector<unsigned char>(a.size()), offset), sa(a, offset);
      cpu::reduce(self_out.data(), sa.data(), sa.data(), count, t, op);
      EXPECT_EQ(first_mismatch(self_out.data(), want_self, n), -1) << "reduce a == b";
    }
  }
}

TEST_P(ReduceAllPairs, MatchesReference) {
  const auto [t, op] = GetParam();
  for (bool f16c : f16c_modes(t)) {
    SCOPED_TRACE(f16c ? "F16C" : "portable");
    F16cMode mode(f16c);
    check_against_reference(t, op);
  }
}

TEST_P(ReduceAllPairs, CommutativeBitForBit) {
  const auto [t, op] = GetParam();
  const size_t n = dtype_size(t);
  // Every special value against every special value, then random data.
  const auto specials = special_bytes(t);
  const size_t k = specials.size() / n;
  std::vector<unsigned char> a, b;
  for (size_t i = 0; i < k; ++i) {
    for (size_t j = 0; j < k; ++j) {
      a.insert(a.end(), specials.begin() + i * n, specials.begin() + (i + 1) * n);
      b.insert(b.end(), specials.begin() + j * n, specials.begin() + (j + 1) * n);
    }
  }
  const auto ra = make_data(t, 517, 99), rb = make_data(t, 517, 100);
  a.insert(a.end(), ra.begin(), ra.end());
  b.insert(b.end(), rb.begin(), rb.end());
  const size_t count = a.size() / n;

  std::vector<unsigned char> first_ab;
  for (bool f16c : f16c_modes(t)) {
    SCOPED_TRACE(f16c ? "F16C" : "portable");
    F16cMode mode(f16c);
    std::vector<unsigned char> ab(a.size()), ba(a.size());
    cpu::reduce(ab.data(), a.data(), b.data(), count, t, op);
    cpu::reduce(ba.data(), b.data(), a.data(), count, t, op);
    EXPECT_EQ(first_mismatch(ab.data(), ba, n), -1);
    auto in_place = b;
    cpu::reduce_inplace(in_place.data(), a.data(), count, t, op);
    EXPECT_EQ(first_mismatch(in_place.data(), ab, n), -1);
    // Every code path gives the same bytes (ranks on different CPUs agree).
    if (first_ab.empty()) first_ab = ab;
    EXPECT_EQ(first_mismatch(ab.data(), first_ab, n), -1);
  }
}

TEST(Reduce, Float16PathsAgreeOnAllValues) {
  if (f16c_modes(DType::kFloat16).size() < 2) GTEST_SKIP() << "CPU has no F16C path";
  // Every float16 value against 31 others spread over the whole range.
  std::vector<uint16_t> a, b;
  for (uint32_t i = 0; i < 65536; ++i) {
    for (uint32_t j = 0; j < 31; ++j) {
      a.push_back(static_cast<uint16_t>(i));
      b.push_back(static_cast<uint16_t>(j * 2113 + i % 13));
    }
  }
  for (RedOp op : {RedOp::kSum, RedOp::kProd}) {
    std::vector<uint16_t> fast(a.size()), portable(a.size());
    cpu::reduce(fast.data(), a.data(), b.data(), a.size(), DType::kFloat16, op);
    {
      F16cMode mode(false);
      cpu::reduce(portable.data(), a.data(), b.data(), a.size(), DType::kFloat16, op);
    }
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(fast[i], portable[i]) << redop_name(op) << std::hex << " a=" << a[i] << " b=" << b[i];
      ASSERT_EQ(fast[i], ref_small(kHalf, op, a[i], b[i])) << std::hex << a[i] << " " << b[i];
    }
  }
  for (double s : {3.0, 0.1, 1e-7, 65504.0}) {
    std::vector<uint16_t> fast(a.size()), portable(a.size());
    cpu::scale_multiply(fast.data(), a.data(), a.size(), DType::kFloat16, s);
    {
      F16cMode mode(false);
      cpu::scale_multiply(portable.data(), a.data(), a.size(), DType::kFloat16, s);
    }
    ASSERT_EQ(fast, portable) << "scale_multiply " << s;
  }
  for (int64_t d : {3, 7, 1 << 20}) {
    auto fast = a, portable = a;
    cpu::scale_divide(fast.data(), fast.size(), DType::kFloat16, d);
    {
      F16cMode mode(false);
      cpu::scale_divide(portable.data(), portable.size(), DType::kFloat16, d);
    }
    ASSERT_EQ(fast, portable) << "scale_divide " << d;
  }
}

std::string pair_name(const ::testing::TestParamInfo<std::pair<DType, RedOp>>& info) {
  return std::string(dtype_name(info.param.first)) + "_" + redop_name(info.param.second);
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReduceAllPairs, ::testing::ValuesIn(defined_pairs()), pair_name);

// Streaming stores (kernels/cpu/stream.h): every byte copied, nothing around
// it touched, at every alignment of the destination.
TEST(Stream, CopyEverySizeAndAlignment) {
  std::mt19937 rng(7);
  std::vector<unsigned char> src(4096 + 64);
  for (auto& c : src) c = static_cast<unsigned char>(rng());
  for (size_t bytes :
       {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, size_t{4096}}) {
    for (size_t doff = 0; doff < 17; ++doff) {
      for (size_t soff : {size_t{0}, size_t{3}}) {
        std::vector<unsigned char> dst(bytes + 64, 0xA5);
        cpu::stream_copy(dst.data() + doff, src.data() + soff, bytes);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= doff && i < doff + bytes;
          const unsigned char want = inside ? src[soff + i - doff] : 0xA5;
          ASSERT_EQ(dst[i], want) << "bytes " << bytes << " dst offset " << doff << " src offset " << soff << " at "
                                  << i;
        }
      }
    }
  }
}

// Copies (kernels/cpu/copy.h): a destination a little ahead of its source
// modulo 4 KiB takes a backward vector loop instead of memcpy's rep movsb.
// Every byte copied and nothing around it touched, at every size and at
// distances inside and outside that window; overlapping regions as memmove
// would leave them.
TEST(Copy, EverySizeAndDistanceAroundThePageOffsets) {
  std::mt19937 rng(11);
  std::vector<unsigned char> src(2 * 65536 + 8192);
  for (auto& c : src) c = static_cast<unsigned char>(rng());
  // 4 KiB-aligned bases, so that the offsets below are the distances modulo 4 KiB.
  auto* src_base =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(src.data()) + 4095) & ~uintptr_t(4095));
  std::vector<unsigned char> dst_store(2 * 65536 + 8192);
  auto* dst_base =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(dst_store.data()) + 4095) & ~uintptr_t(4095));
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{2047}, size_t{2048},
                       size_t{4096}, size_t{65536 + 13}}) {
    for (size_t ahead :
         {size_t{0}, size_t{1}, size_t{8}, size_t{16}, size_t{24}, size_t{63}, size_t{64}, size_t{100}}) {
      std::fill(dst_store.begin(), dst_store.end(), 0xA5);
      unsigned char* d = dst_base + ahead;
      cpu::copy(d, src_base, bytes);
      for (size_t i = 0; i < dst_store.size(); ++i) {
        unsigned char* at = dst_store.data() + i;
        const bool inside = at >= d && at < d + bytes;
        const unsigned char want = inside ? src_base[at - d] : 0xA5;
        ASSERT_EQ(*at, want) << "bytes " << bytes << " destination " << ahead << " ahead, at " << (at - d);
      }
    }
  }
}

TEST(Copy, TheBackwardLoopOnlyWhereTheDestinationIsALittleAhead) {
  alignas(4096) static char page[3 * 4096];
  char* s = page;
  EXPECT_TRUE(cpu::copy_goes_backward(s + 4096 + 8, s, 4096));
  EXPECT_TRUE(cpu::copy_goes_backward(s + 8192 + 24, s, 4096));
  EXPECT_TRUE(cpu::copy_goes_backward(s + 63, s, 4096));
  EXPECT_FALSE(cpu::copy_goes_backward(s + 4096, s, 4096)) << "same page offset";
  EXPECT_FALSE(cpu::copy_goes_backward(s + 4096 + 64, s, 4096)) << "a line or more ahead";
  EXPECT_FALSE(cpu::copy_goes_backward(s, s + 8, 4096)) << "behind the source";
  EXPECT_FALSE(cpu::copy_goes_backward(s + 4096 + 8, s, 512)) << "small: memcpy moves it without rep movsb";
}

TEST(Copy, OverlappingRegionsEndAsMemmoveLeavesThem) {
  std::mt19937 rng(13);
  std::vector<unsigned char> init(20000);
  for (auto& c : init) c = static_cast<unsigned char>(rng());
  for (long shift : {1L, 8L, 24L, 63L, 64L, -8L, -63L}) {
    std::vector<unsigned char> a = init, b = init;
    const size_t n = 15000, from = 2000;
    cpu::copy(a.data() + from + shift, a.data() + from, n);
    std::memmove(b.data() + from + shift, b.data() + from, n);
    ASSERT_EQ(a, b) << "shift " << shift;
  }
}

// Copies of 1 MiB and more between separate regions go in 256 KiB pieces:
// every byte of sizes that are not a whole number of pieces, nothing around
// them touched; overlapping regions of that size still end as memmove leaves
// them.
TEST(Copy, LargeCopiesGoInPiecesOnlyBetweenSeparateRegions) {
  constexpr size_t kMiB = size_t(1) << 20;
  // Only the addresses matter here: nothing is copied.
  const auto at = [](uintptr_t address) { return reinterpret_cast<const void*>(address); };
  const uintptr_t base = uintptr_t(1) << 32;
  EXPECT_TRUE(cpu::copy_goes_in_pieces(at(base + 4 * kMiB), at(base), kMiB)) << "1 MiB, separate regions";
  EXPECT_TRUE(cpu::copy_goes_in_pieces(at(base), at(base + 4 * kMiB), 4 * kMiB)) << "destination below, adjacent";
  EXPECT_FALSE(cpu::copy_goes_in_pieces(at(base + 4 * kMiB), at(base), kMiB - 1)) << "under 1 MiB";
  EXPECT_FALSE(cpu::copy_goes_in_pieces(at(base + 4096), at(base), 8 * kMiB)) << "overlapping regions";
  EXPECT_FALSE(cpu::copy_goes_in_pieces(at(base + 4 * kMiB + 8), at(base), kMiB)) << "the backward loop's distances";

  std::mt19937 rng(17);
  const size_t room = 5 * kMiB;
  std::vector<unsigned char> src(room), dst(room + 8192);
  for (auto& c : src) c = static_cast<unsigned char>(rng());
  for (size_t bytes : {kMiB, kMiB + 1, 3 * kMiB + (size_t(256) << 10) + 13, 4 * kMiB + 4095}) {
    for (size_t offset : {size_t{0}, size_t{64}, size_t{100}}) {
      std::fill(dst.begin(), dst.end(), 0xA5);
      unsigned char* d = dst.data() + 4096 + offset;
      ASSERT_TRUE(cpu::copy_goes_in_pieces(d, src.data(), bytes) || cpu::copy_goes_backward(d, src.data(), bytes));
      cpu::copy(d, src.data(), bytes);
      for (size_t i = 0; i < dst.size(); ++i) {
        unsigned char* at = dst.data() + i;
        const bool inside = at >= d && at < d + bytes;
        if (*at != (inside ? src[at - d] : 0xA5)) {
          FAIL() << bytes << " bytes at offset " << offset << ": wrong at " << (at - d);
        }
      }
    }
  }
  for (long shift : {1L, 4096L, 300000L, -8L, -300000L}) {
    std::vector<unsigned char> a(src.begin(), src.begin() + 4 * kMiB), b = a;
    const size_t n = 2 * kMiB + 13, from = kMiB;
    cpu::copy(a.data() + from + shift, a.data() + from, n);
    std::memmove(b.data() + from + shift, b.data() + from, n);
    ASSERT_EQ(a, b) << "shift " << shift;
  }
}

TEST(Reduce, ZeroCountTouchesNothing) {
  cpu::reduce_inplace(nullptr, nullptr, 0, DType::kFloat32, RedOp::kSum);
  cpu::reduce(nullptr, nullptr, nullptr, 0, DType::kInt64, RedOp::kMax);
  cpu::scale_divide(nullptr, 0, DType::kInt32, 3);
  cpu::scale_multiply(nullptr, nullptr, 0, DType::kFloat16, 2.0);
}

// ---------------------------------------------------------------------------
// Hand-picked cases with known answers.

template <class T>
T reduce1(T a, T b, DType t, RedOp op) {
  T out{};
  cpu::reduce(&out, &a, &b, 1, t, op);
  return out;
}

template <class T>
uint64_t bits_of(T v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}

TEST(Reduce, IntegerWrapAround) {
  EXPECT_EQ(reduce1<int8_t>(127, 1, DType::kInt8, RedOp::kSum), -128);
  EXPECT_EQ(reduce1<int8_t>(-128, -1, DType::kInt8, RedOp::kSum), 127);
  EXPECT_EQ(reduce1<int8_t>(16, 16, DType::kInt8, RedOp::kProd), 0);
  EXPECT_EQ(reduce1<int8_t>(-128, -1, DType::kInt8, RedOp::kProd), -128);
  EXPECT_EQ(reduce1<uint8_t>(200, 100, DType::kUInt8, RedOp::kSum), 44);
  EXPECT_EQ(reduce1<int16_t>(32767, 1, DType::kInt16, RedOp::kSum), -32768);
  EXPECT_EQ(reduce1<int16_t>(-32768, -1, DType::kInt16, RedOp::kProd), -32768);
  EXPECT_EQ(reduce1<uint16_t>(65535, 65535, DType::kUInt16, RedOp::kProd), 1);
  EXPECT_EQ(reduce1<int32_t>(INT32_MAX, 1, DType::kInt32, RedOp::kSum), INT32_MIN);
  EXPECT_EQ(reduce1<int32_t>(65536, 65536, DType::kInt32, RedOp::kProd), 0);
  EXPECT_EQ(reduce1<uint32_t>(0xffffffffu, 2, DType::kUInt32, RedOp::kProd), 0xfffffffeu);
  EXPECT_EQ(reduce1<int64_t>(INT64_MIN, -1, DType::kInt64, RedOp::kSum), INT64_MAX);
  EXPECT_EQ(reduce1<int64_t>(INT64_MIN, -1, DType::kInt64, RedOp::kProd), INT64_MIN);
  EXPECT_EQ(reduce1<int64_t>(int64_t{1} << 32, int64_t{1} << 32, DType::kInt64, RedOp::kProd), 0);
  EXPECT_EQ(reduce1<uint64_t>(~0ull, 1, DType::kUInt64, RedOp::kSum), 0u);
  EXPECT_EQ(reduce1<uint64_t>(~0ull, ~0ull, DType::kUInt64, RedOp::kProd), 1u);
  // MIN/MAX respect signedness.
  EXPECT_EQ(reduce1<int8_t>(-1, 1, DType::kInt8, RedOp::kMin), -1);
  EXPECT_EQ(reduce1<uint8_t>(255, 1, DType::kUInt8, RedOp::kMin), 1);
  EXPECT_EQ(reduce1<int64_t>(INT64_MIN, INT64_MAX, DType::kInt64, RedOp::kMax), INT64_MAX);
  EXPECT_EQ(reduce1<uint64_t>(~0ull, 0, DType::kUInt64, RedOp::kMax), ~0ull);
}

TEST(Reduce, BoolNormalizes) {
  EXPECT_EQ(reduce1<uint8_t>(2, 0, DType::kBool, RedOp::kSum), 1);
  EXPECT_EQ(reduce1<uint8_t>(2, 128, DType::kBool, RedOp::kProd), 1);
  EXPECT_EQ(reduce1<uint8_t>(2, 0, DType::kBool, RedOp::kMin), 0);
  EXPECT_EQ(reduce1<uint8_t>(2, 4, DType::kBool, RedOp::kBAnd), 1);  // not 2 & 4
  EXPECT_EQ(reduce1<uint8_t>(2, 4, DType::kBool, RedOp::kBXor), 0);  // not 2 ^ 4
  EXPECT_EQ(reduce1<uint8_t>(255, 0, DType::kBool, RedOp::kBXor), 1);
  EXPECT_EQ(reduce1<uint8_t>(255, 255, DType::kBool, RedOp::kMax), 1);
}

TEST(Reduce, FloatSignedZeroAndNaN) {
  const float pz = 0.0f, nz = -0.0f;
  for (auto [a, b] : {std::pair{pz, nz}, std::pair{nz, pz}}) {
    EXPECT_EQ(bits_of(reduce1(a, b, DType::kFloat32, RedOp::kMin)), 0x80000000u);
    EXPECT_EQ(bits_of(reduce1(a, b, DType::kFloat32, RedOp::kMax)), 0u);
    EXPECT_EQ(bits_of(reduce1<double>(a, b, DType::kFloat64, RedOp::kMin)), 0x8000000000000000u);
    EXPECT_EQ(bits_of(reduce1<double>(a, b, DType::kFloat64, RedOp::kMax)), 0u);
  }
  EXPECT_EQ(bits_of(reduce1(nz, nz, DType::kFloat32, RedOp::kSum)), 0x80000000u);
  EXPECT_EQ(bits_of(reduce1(pz, nz, DType::kFloat32, RedOp::kSum)), 0u);
  // Two different NaN payloads: x86 addss returns the first operand's, so a
  // plain a + b would differ by order; the kernels give the canonical NaN.
  const float n1 = std::bit_cast<float>(0x7fc00001u), n2 = std::bit_cast<float>(0xffc00002u);
  for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax}) {
    EXPECT_EQ(bits_of(reduce1(n1, n2, DType::kFloat32, op)), 0x7fc00000u) << redop_name(op);
    EXPECT_EQ(bits_of(reduce1(n2, n1, DType::kFloat32, op)), 0x7fc00000u) << redop_name(op);
    EXPECT_EQ(bits_of(reduce1(1.0f, n2, DType::kFloat32, op)), 0x7fc00000u) << redop_name(op);
    EXPECT_EQ(bits_of(reduce1(n1, -INFINITY, DType::kFloat32, op)), 0x7fc00000u);
  }
  // Inf - Inf is NaN (x86 makes it negative); canonical here too.
  EXPECT_EQ(bits_of(reduce1(INFINITY, -INFINITY, DType::kFloat32, RedOp::kSum)), 0x7fc00000u);
  EXPECT_EQ(bits_of(reduce1<double>(INFINITY, -INFINITY, DType::kFloat64, RedOp::kSum)), 0x7ff8000000000000u);
  EXPECT_EQ(reduce1(3.0f, -INFINITY, DType::kFloat32, RedOp::kMin), -INFINITY);
  EXPECT_EQ(reduce1(3.0, 2.5, DType::kFloat64, RedOp::kMax), 3.0);
}

TEST(Reduce, HalfKnownValues) {
  // 1 + 2^-11 is a tie in float16: rounds to even (1.0); 1 + 3*2^-11 -> up.
  EXPECT_EQ(reduce1<uint16_t>(0x3c00, 0x1000, DType::kFloat16, RedOp::kSum), 0x3c00);
  EXPECT_EQ(reduce1<uint16_t>(0x3c01, 0x1000, DType::kFloat16, RedOp::kSum), 0x3c02);
  EXPECT_EQ(reduce1<uint16_t>(0x7bff, 0x7bff, DType::kFloat16, RedOp::kSum), 0x7c00);   // Inf
  EXPECT_EQ(reduce1<uint16_t>(0x7c00, 0xfc00, DType::kFloat16, RedOp::kSum), 0x7e00);   // NaN
  EXPECT_EQ(reduce1<uint16_t>(0x4000, 0x4200, DType::kFloat16, RedOp::kProd), 0x4600);  // 2*3
  EXPECT_EQ(reduce1<uint16_t>(0x0000, 0x8000, DType::kFloat16, RedOp::kMin), 0x8000);
  EXPECT_EQ(reduce1<uint16_t>(0x8000, 0x0000, DType::kFloat16, RedOp::kMax), 0x0000);
  EXPECT_EQ(reduce1<uint16_t>(0xc000, 0x3c00, DType::kFloat16, RedOp::kMin), 0xc000);  // -2
  EXPECT_EQ(reduce1<uint16_t>(0x7e05, 0x3c00, DType::kFloat16, RedOp::kMax), 0x7e00);
  EXPECT_EQ(reduce1<uint16_t>(0x3f80, 0x3f80, DType::kBFloat16, RedOp::kSum), 0x4000);
  EXPECT_EQ(reduce1<uint16_t>(0xffc1, 0x3f80, DType::kBFloat16, RedOp::kSum), 0x7fc0);
  EXPECT_EQ(reduce1<uint16_t>(0x8000, 0x0000, DType::kBFloat16, RedOp::kMin), 0x8000);
}

// ---------------------------------------------------------------------------
// Conversions.

TEST(Conversions, HalfAllBitPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = half_to_float(h);
    const double want = ref_decode(kHalf, h);
    if (ref_is_nan(kHalf, h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // NaN stays NaN: sign and payload kept, quiet bit set.
      ASSERT_EQ(float_to_half(f), h | 0x0200) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    ASSERT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

TEST(Conversions, Bf16AllBitPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = bfloat16_to_float(h);
    if (ref_is_nan(kBf16, h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(float_to_bfloat16(f), h | 0x0040) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), ref_decode(kBf16, h)) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    ASSERT_EQ(float_to_bfloat16(f), h) << std::hex << h;
  }
}

TEST(Conversions, KnownRoundings) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(0.1f), 0x2e66);
  EXPECT_EQ(float_to_half(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // tie at the top rounds to Inf
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);         // tie -> even (0)
  EXPECT_EQ(float_to_half(0x1.000002p-25f), 0x0001);  // just above the tie
  EXPECT_EQ(float_to_half(0x3p-25f), 0x0002);         // 1.5 ulp: tie -> even (2)
  EXPECT_EQ(float_to_half(-0x1p-26f), 0x8000);        // underflow keeps the sign
  EXPECT_EQ(float_to_half(0x1.ff8p-15f), 0x03ff);     // largest subnormal
  EXPECT_EQ(float_to_half(0x1.ffcp-15f), 0x0400);     // tie -> even: smallest normal
  EXPECT_EQ(float_to_half(0x1.ff4p-15f), 0x03fe);     // tie -> even: down
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half(1.0f + 0x3p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);

  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(3.14159265f), 0x4049);
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);  // overflow
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x00000001u)), 0x0000);  // tiny subnormal
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  EXPECT_EQ(bfloat16_to_float(0x4049), std::bit_cast<float>(0x40490000u));
}

/// Floats near every rounding boundary of format f, plus random ones.
std::vector<float> rounding_probes(const SmallFloat& f) {
  std::vector<float> probes;
  for (uint32_t i = 0; i < 65535; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const uint16_t next = static_cast<uint16_t>(i + 1);
    if (ref_is_nan(f, h) || ref_is_nan(f, next) || ((h ^ next) & 0x8000)) continue;
    const double lo = ref_decode(f, h), hi = ref_decode(f, next);
    if (std::isinf(lo) || std::isinf(hi)) continue;
    const auto mid = static_cast<float>((lo + hi) / 2);  // exact: a float
    probes.push_back(mid);
    probes.push_back(std::nextafter(mid, 0.0f));
    probes.push_back(std::nextafter(mid, INFINITY));
    probes.push_back(std::nextafter(mid, -INFINITY));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isnan(v)) probes.push_back(v);
  }
  return probes;
}

TEST(Conversions, HalfRoundingMatchesReference) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (float v : rounding_probes(kHalf)) {
    ASSERT_EQ(float_to_half(v), ref_encode(kHalf, v)) << std::hexfloat << v;
  }
}

TEST(Conversions, Bf16RoundingMatchesReference) {
  for (float v : rounding_probes(kBf16)) {
    ASSERT_EQ(float_to_bfloat16(v), ref_encode(kBf16, v)) << std::hexfloat << v;
  }
}

// ---------------------------------------------------------------------------
// scale_divide / scale_multiply.

/// One float16/bfloat16 element of scale_*: decode, x / s or x * s in
/// float32, round once.
uint16_t ref_small_scale(const SmallFloat& f, const unsigned char* in, float s, bool divide) {
  const uint16_t bits = f.mant + f.exp_bits < 8 ? uint16_t{in[0]} : load<uint16_t>(in);
  const auto x = static_cast<float>(ref_decode(f, bits));
  return ref_encode(f, divide ? x / s : x * s);
}

/// One element of scale_divide's expected output.
void ref_divide_one(DType t, int64_t d, const unsigned char* in, unsigned char* out) {
  auto int_div = [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_signed_v<T>) {
      store<T>(out, static_cast<T>(static_cast<int64_t>(load<T>(in)) / d));
    } else {
      const uint64_t q = static_cast<uint64_t>(load<T>(in)) / static_cast<uint64_t>(d);
      store<T>(out, static_cast<T>(q));
    }
  };
  switch (t) {
    case DType::kInt8: return int_div(int8_t{});
    case DType::kInt16: return int_div(int16_t{});
    case DType::kInt32: return int_div(int32_t{});
    case DType::kInt64: return int_div(int64_t{});
    case DType::kUInt8: return int_div(uint8_t{});
    case DType::kUInt16: return int_div(uint16_t{});
    case DType::kUInt32: return int_div(uint32_t{});
    case DType::kUInt64: return int_div(uint64_t{});
    case DType::kFloat16: return store<uint16_t>(out, ref_small_scale(kHalf, in, static_cast<float>(d), true));
    case DType::kBFloat16: return store<uint16_t>(out, ref_small_scale(kBf16, in, static_cast<float>(d), true));
    case DType::kFloat8E4M3FN:
      return store<uint8_t>(out, static_cast<uint8_t>(ref_small_scale(kE4M3, in, static_cast<float>(d), true)));
    case DType::kFloat8E5M2:
      return store<uint8_t>(out, static_cast<uint8_t>(ref_small_scale(kE5M2, in, static_cast<float>(d), true)));
    case DType::kFloat32: return store<float>(out, load<float>(in) / static_cast<float>(d));
    case DType::kFloat64: return store<double>(out, load<double>(in) / static_cast<double>(d));
    case DType::kComplex64:
    case DType::kComplex128:  // see pair_kernels_test.cc
    case DType::kBool: break;
  }
  ADD_FAILURE() << "bad dtype";
}

/// One element of scale_multiply's expected output.
void ref_multiply_one(DType t, double s, const unsigned char* in, unsigned char* out) {
  // Integer factor: s truncated toward zero, saturated to int64, NaN -> 0.
  int64_t k = 0;
  if (std::isnan(s)) {
    k = 0;
  } else if (s >= 9223372036854775808.0) {
    k = INT64_MAX;
  } else if (s <= -9223372036854775808.0) {
    k = INT64_MIN;
  } else {
    k = static_cast<int64_t>(std::trunc(s));
  }
  auto int_mul = [&](auto tag) {
    using T = decltype(tag);
    using Wide = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
    const unsigned __int128 p =
        static_cast<unsigned __int128>(static_cast<Wide>(load<T>(in)) * static_cast<__int128>(k));
    using U = std::make_unsigned_t<T>;
    store<T>(out, static_cast<T>(static_cast<U>(p)));
  };
  switch (t) {
    case DType::kInt8: return int_mul(int8_t{});
    case DType::kInt16: return int_mul(int16_t{});
    case DType::kInt32: return int_mul(int32_t{});
    case DType::kInt64: return int_mul(int64_t{});
    case DType::kUInt8: return int_mul(uint8_t{});
    case DType::kUInt16: return int_mul(uint16_t{});
    case DType::kUInt32: return int_mul(uint32_t{});
    case DType::kUInt64: return int_mul(uint64_t{});
    case DType::kFloat16: return store<uint16_t>(out, ref_small_scale(kHalf, in, static_cast<float>(s), false));
    case DType::kBFloat16: return store<uint16_t>(out, ref_small_scale(kBf16, in, static_cast<float>(s), false));
    case DType::kFloat8E4M3FN:
      return store<uint8_t>(out, static_cast<uint8_t>(ref_small_scale(kE4M3, in, static_cast<float>(s), false)));
    case DType::kFloat8E5M2:
      return store<uint8_t>(out, static_cast<uint8_t>(ref_small_scale(kE5M2, in, static_cast<float>(s), false)));
    case DType::kFloat32: return store<float>(out, load<float>(in) * static_cast<float>(s));
    case DType::kFloat64: return store<double>(out, load<double>(in) * s);
    case DType::kComplex64:
    case DType::kComplex128:  // see pair_kernels_test.cc
    case DType::kBool: break;
  }
  ADD_FAILURE() << "bad dtype";
}

bool is_nan_element(DType t, const unsigned char* p) {
  switch (t) {
    case DType::kFloat16: return ref_is_nan(kHalf, load<uint16_t>(p));
    case DType::kBFloat16: return ref_is_nan(kBf16, load<uint16_t>(p));
    case DType::kFloat8E4M3FN: return ref_is_nan(kE4M3, p[0]);
    case DType::kFloat8E5M2: return ref_is_nan(kE5M2, p[0]);
    case DType::kFloat32: return std::isnan(load<float>(p));
    case DType::kFloat64: return std::isnan(load<double>(p));
    default: return false;
  }
}

/// The bits of dtype t's canonical quiet NaN (what every kernel gives for a
/// NaN result, so that CPU and GPU results agree bit for bit: a GPU's
/// arithmetic gives its own NaN, x86's keeps the input's payload).
std::vector<unsigned char> canonical_nan_bits(DType t) {
  std::vector<unsigned char> b(dtype_size(t));
  switch (t) {
    case DType::kFloat16: store<uint16_t>(b.data(), 0x7e00); break;
    case DType::kBFloat16: store<uint16_t>(b.data(), 0x7fc0); break;
    case DType::kFloat8E4M3FN: b[0] = 0x7f; break;
    case DType::kFloat8E5M2: b[0] = 0x7e; break;
    case DType::kFloat32: store<uint32_t>(b.data(), 0x7fc00000u); break;
    case DType::kFloat64: store<uint64_t>(b.data(), 0x7ff8000000000000u); break;
    default: break;
  }
  return b;
}

/// Compares bit for bit, except that where the reference is a NaN the
/// result must be the canonical NaN.
long first_scale_mismatch(DType t, const unsigned char* got, const std::vector<unsigned char>& want) {
  const size_t n = dtype_size(t);
  const std::vector<unsigned char> nan = canonical_nan_bits(t);
  for (size_t i = 0; i < want.size(); i += n) {
    const unsigned char* expect = is_nan_element(t, &want[i]) ? nan.data() : &want[i];
    if (std::memcmp(got + i, expect, n) != 0) return static_cast<long>(i / n);
  }
  return -1;
}

class ScaleAllTypes : public ::testing::TestWithParam<DType> {};

TEST_P(ScaleAllTypes, DivideMatchesReference) {
  const DType t = GetParam();
  for (bool f16c : f16c_modes(t)) {
    SCOPED_TRACE(f16c ? "F16C" : "portable");
    F16cMode mode(f16c);
    uint64_t seed = 11;
    for (int64_t d : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{1000}, int64_t{1} << 40, INT64_MAX}) {
      for (size_t count : {0, 1, 7, 33, 1000}) {
        for (size_t offset : {size_t{0}, size_t{1}}) {
          SCOPED_TRACE("divisor " + std::to_string(d) + " count " + std::to_string(count) + " offset " +
                       std::to_string(offset));
          const auto data = make_data(t, count, seed++);
          std::vector<unsigned char> want(data.size());
          for (size_t i = 0; i < data.size(); i += dtype_size(t)) {
            ref_divide_one(t, d, &data[i], &want[i]);
          }
          Buffer buf(data, offset);
          cpu::scale_divide(buf.data(), count, t, d);
          if (d == 1) {
            // Dividing by 1 leaves the data as it is, NaN payloads included.
            EXPECT_TRUE(count == 0 || std::memcmp(buf.data(), data.data(), data.size()) == 0);
          } else {
            EXPECT_EQ(first_scale_mismatch(t, buf.data(), want), -1);
          }
          EXPECT_TRUE(buf.guards_intact());
        }
      }
    }
  }
}

TEST_P(ScaleAllTypes, MultiplyMatchesReference) {
  const DType t = GetParam();
  for (bool f16c : f16c_modes(t)) {
    SCOPED_TRACE(f16c ? "F16C" : "portable");
    F16cMode mode(f16c);
    uint64_t seed = 21;
    for (double s : {1.0, 3.0, -1.0, 2.7, -2.7, 0.5, 1e30, -1e30, 1e-3}) {
      for (size_t count : {0, 1, 7, 33, 1000}) {
        for (size_t offset : {size_t{0}, size_t{1}}) {
          SCOPED_TRACE("scalar " + std::to_string(s) + " count " + std::to_string(count) + " offset " +
                       std::to_string(offset));
          const auto data = make_data(t, count, seed++);
          std::vector<unsigned char> want(data.size());
          for (size_t i = 0; i < data.size(); i += dtype_size(t)) {
            ref_multiply_one(t, s, &data[i], &want[i]);
          }
          Buffer in(data, offset), out(std::vector<unsigned char>(data.size()), offset + 2);
          cpu::scale_multiply(out.data(), in.data(), count, t, s);
          EXPECT_EQ(first_scale_mismatch(t, out.data(), want), -1) << "out != in";
          EXPECT_TRUE(out.guards_intact());
          cpu::scale_multiply(in.data(), in.data(), count, t, s);
          EXPECT_EQ(first_scale_mismatch(t, in.data(), want), -1) << "out == in";
          EXPECT_TRUE(in.guards_intact());
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ScaleAllTypes,
                         ::testing::Values(DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8,
                                           DType::kUInt16, DType::kUInt32, DType::kUInt64, DType::kFloat16,
                                           DType::kBFloat16, DType::kFloat32, DType::kFloat64, DType::kFloat8E4M3FN,
                                           DType::kFloat8E5M2),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(Scale, KnownValues) {
  int32_t i[] = {-7, 7, -1, INT32_MIN};
  cpu::scale_divide(i, 4, DType::kInt32, 2);
  EXPECT_EQ(i[0], -3);  // toward zero, not floor
  EXPECT_EQ(i[1], 3);
  EXPECT_EQ(i[2], 0);
  EXPECT_EQ(i[3], INT32_MIN / 2);
  uint64_t u = ~0ull;
  cpu::scale_divide(&u, 1, DType::kUInt64, 3);
  EXPECT_EQ(u, ~0ull / 3);
  int64_t big = INT64_MIN + 1;
  cpu::scale_divide(&big, 1, DType::kInt64, 7);
  EXPECT_EQ(big, (INT64_MIN + 1) / 7);
  uint16_t h = 0x4200;  // 3.0
  cpu::scale_divide(&h, 1, DType::kFloat16, 2);
  EXPECT_EQ(h, 0x3e00);  // 1.5
  int8_t s8 = 100;
  cpu::scale_multiply(&s8, &s8, 1, DType::kInt8, 3.9);  // factor 3, wraps
  EXPECT_EQ(s8, 44);
  uint32_t u32 = 5;
  cpu::scale_multiply(&u32, &u32, 1, DType::kUInt32, -1.0);  // 5 * -1 mod 2^32
  EXPECT_EQ(u32, 0xfffffffbu);
  float f = 3.0f;
  cpu::scale_multiply(&f, &f, 1, DType::kFloat32, 0.5);
  EXPECT_EQ(f, 1.5f);
}

}  // namespace
}  // namespace omniccl::kernels

// ---------------------------------------------------------------------------
// fp8 (float8_e4m3fn, float8_e5m2): hand-computed values, then every bit
// pattern and every rounding boundary against the reference codec.

namespace omniccl::kernels {
namespace {

uint8_t e4m3(float f) { return cpu::float_to_fp8_e4m3fn(f); }
uint8_t e5m2(float f) { return cpu::float_to_fp8_e5m2(f); }

TEST(Fp8, KnownConversions) {
  // e4m3fn: S EEEE MMM, bias 7.
  EXPECT_EQ(e4m3(1.0f), 0x38);      // 0 0111 000
  EXPECT_EQ(e4m3(-1.5f), 0xbc);     // 1 0111 100
  EXPECT_EQ(e4m3(0.1f), 0x1d);      // 1.6 * 2^-4 -> mantissa 4.8 -> 5: 0 0011 101
  EXPECT_EQ(e4m3(448.0f), 0x7e);    // largest finite
  EXPECT_EQ(e4m3(464.0f), 0x7e);    // tie between 448 and (NaN-coded) 480 -> even 448
  EXPECT_EQ(e4m3(465.0f), 0x7f);    // overflow: NaN (no Inf in e4m3fn)
  EXPECT_EQ(e4m3(-1000.0f), 0xff);  // overflow keeps the sign
  EXPECT_EQ(e4m3(INFINITY), 0x7f);
  EXPECT_EQ(e4m3(NAN), 0x7f);
  EXPECT_EQ(e4m3(0x1p-9f), 0x01);   // smallest subnormal
  EXPECT_EQ(e4m3(0x1p-10f), 0x00);  // tie -> even (0)
  EXPECT_EQ(e4m3(0x3p-11f), 0x01);  // 0.75 step -> 1
  EXPECT_EQ(e4m3(0x1p-6f), 0x08);   // smallest normal
  EXPECT_EQ(e4m3(-0.0f), 0x80);
  EXPECT_EQ(cpu::fp8_e4m3fn_to_float(0x7e), 448.0f);
  EXPECT_EQ(cpu::fp8_e4m3fn_to_float(0x01), 0x1p-9f);
  EXPECT_EQ(cpu::fp8_e4m3fn_to_float(0x1d), 0.1015625f);
  EXPECT_EQ(cpu::fp8_e4m3fn_to_float(0xc0), -2.0f);
  EXPECT_TRUE(std::isnan(cpu::fp8_e4m3fn_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(cpu::fp8_e4m3fn_to_float(0xff)));
  EXPECT_EQ(cpu::fp8_e4m3fn_to_float(0x78), 256.0f);  // exponent 15 is a normal number

  // e5m2: S EEEEE MM, bias 15, IEEE-like.
  EXPECT_EQ(e5m2(1.0f), 0x3c);
  EXPECT_EQ(e5m2(0.1f), 0x2e);      // 1.6 * 2^-4 -> mantissa 2.4 -> 2: 0 01011 10
  EXPECT_EQ(e5m2(57344.0f), 0x7b);  // largest finite
  EXPECT_EQ(e5m2(61439.0f), 0x7b);
  EXPECT_EQ(e5m2(61440.0f), 0x7c);  // tie at the top rounds to Inf
  EXPECT_EQ(e5m2(-INFINITY), 0xfc);
  EXPECT_EQ(e5m2(NAN), 0x7e);
  EXPECT_EQ(e5m2(0x1p-16f), 0x01);
  EXPECT_EQ(e5m2(0x1p-17f), 0x00);  // tie -> even (0)
  EXPECT_EQ(e5m2(0x3p-17f), 0x02);  // 1.5 steps: tie -> even (2)
  EXPECT_EQ(cpu::fp8_e5m2_to_float(0x2e), 0.09375f);
  EXPECT_EQ(cpu::fp8_e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(cpu::fp8_e5m2_to_float(0xfc), -INFINITY);
}

TEST(Fp8, KnownReductions) {
  using D = DType;
  EXPECT_EQ(reduce1<uint8_t>(0x38, 0x38, D::kFloat8E4M3FN, RedOp::kSum), 0x40);   // 1+1=2
  EXPECT_EQ(reduce1<uint8_t>(0x38, 0x18, D::kFloat8E4M3FN, RedOp::kSum), 0x38);   // 1+1/16: tie->1
  EXPECT_EQ(reduce1<uint8_t>(0x39, 0x18, D::kFloat8E4M3FN, RedOp::kSum), 0x3a);   // 1.125+1/16->1.25
  EXPECT_EQ(reduce1<uint8_t>(0x7e, 0x7e, D::kFloat8E4M3FN, RedOp::kSum), 0x7f);   // 896: NaN
  EXPECT_EQ(reduce1<uint8_t>(0xfe, 0xfe, D::kFloat8E4M3FN, RedOp::kSum), 0x7f);   // canonical
  EXPECT_EQ(reduce1<uint8_t>(0x40, 0x44, D::kFloat8E4M3FN, RedOp::kProd), 0x4c);  // 2*3=6
  EXPECT_EQ(reduce1<uint8_t>(0x00, 0x80, D::kFloat8E4M3FN, RedOp::kMin), 0x80);   // -0
  EXPECT_EQ(reduce1<uint8_t>(0x80, 0x00, D::kFloat8E4M3FN, RedOp::kMax), 0x00);   // +0
  EXPECT_EQ(reduce1<uint8_t>(0xc0, 0x38, D::kFloat8E4M3FN, RedOp::kMin), 0xc0);   // -2
  EXPECT_EQ(reduce1<uint8_t>(0x38, 0xff, D::kFloat8E4M3FN, RedOp::kMax), 0x7f);   // NaN wins
  EXPECT_EQ(reduce1<uint8_t>(0x3c, 0x3c, D::kFloat8E5M2, RedOp::kSum), 0x40);     // 1+1
  EXPECT_EQ(reduce1<uint8_t>(0x7b, 0x7b, D::kFloat8E5M2, RedOp::kSum), 0x7c);     // Inf
  EXPECT_EQ(reduce1<uint8_t>(0x7c, 0xfc, D::kFloat8E5M2, RedOp::kSum), 0x7e);     // Inf-Inf
  EXPECT_EQ(reduce1<uint8_t>(0x7d, 0x3c, D::kFloat8E5M2, RedOp::kMin), 0x7e);     // NaN
  EXPECT_EQ(reduce1<uint8_t>(0xc0, 0x3c, D::kFloat8E5M2, RedOp::kMin), 0xc0);     // -2

  uint8_t x[2] = {0x44, 0xc4};  // 3, -3
  cpu::scale_divide(x, 2, D::kFloat8E4M3FN, 2);
  EXPECT_EQ(x[0], 0x3c);  // 1.5
  EXPECT_EQ(x[1], 0xbc);
  uint8_t y[1] = {0x3c};  // e5m2 1.0
  cpu::scale_multiply(y, y, 1, D::kFloat8E5M2, 0.5);
  EXPECT_EQ(y[0], 0x38);  // 0.5
  EXPECT_THROW(cpu::reduce(x, x, x, 1, D::kFloat8E5M2, RedOp::kBXor), std::invalid_argument);
}

void check_fp8_all_bits(const SmallFloat& f, float (*to_f)(uint8_t), uint8_t (*from_f)(float)) {
  for (uint32_t i = 0; i < 256; ++i) {
    const auto b = static_cast<uint8_t>(i);
    const float v = to_f(b);
    if (ref_is_nan(f, b)) {
      ASSERT_TRUE(std::isnan(v)) << std::hex << i;
      ASSERT_EQ(from_f(v), f.quiet_nan | (b & 0x80)) << std::hex << i;  // sign kept
      continue;
    }
    ASSERT_EQ(static_cast<double>(v), ref_decode(f, b)) << std::hex << i;
    ASSERT_EQ(std::signbit(v), (b & 0x80) != 0) << std::hex << i;
    ASSERT_EQ(from_f(v), b) << std::hex << i;
  }
}

void check_fp8_rounding(const SmallFloat& f, uint8_t (*from_f)(float)) {
  std::vector<float> probes;
  for (uint32_t i = 0; i < 255; ++i) {
    const auto b = static_cast<uint8_t>(i), next = static_cast<uint8_t>(i + 1);
    if (ref_is_nan(f, b) || ref_is_nan(f, next) || ((b ^ next) & 0x80)) continue;
    const double lo = ref_decode(f, b), hi = ref_decode(f, next);
    if (std::isinf(lo) || std::isinf(hi)) continue;
    const auto mid = static_cast<float>((lo + hi) / 2);
    for (float p : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)}) {
      probes.push_back(p);
      probes.push_back(-p);
    }
  }
  std::mt19937 rng(9);
  for (int i = 0; i < 200000; ++i) {
    const float v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isnan(v)) probes.push_back(v);
  }
  for (float v : probes) {
    const uint8_t got = from_f(v);
    const auto want = static_cast<uint8_t>(ref_encode(f, v));
    if (ref_is_nan(f, want)) {
      ASSERT_TRUE(ref_is_nan(f, got)) << std::hexfloat << v;
    } else {
      ASSERT_EQ(got, want) << std::hexfloat << v;
    }
  }
}

TEST(Fp8, E4M3AllBitPatterns) { check_fp8_all_bits(kE4M3, cpu::fp8_e4m3fn_to_float, cpu::float_to_fp8_e4m3fn); }
TEST(Fp8, E5M2AllBitPatterns) { check_fp8_all_bits(kE5M2, cpu::fp8_e5m2_to_float, cpu::float_to_fp8_e5m2); }
TEST(Fp8, E4M3RoundingMatchesReference) { check_fp8_rounding(kE4M3, cpu::float_to_fp8_e4m3fn); }
TEST(Fp8, E5M2RoundingMatchesReference) { check_fp8_rounding(kE5M2, cpu::float_to_fp8_e5m2); }

}  // namespace
}  // namespace omniccl::kernels
