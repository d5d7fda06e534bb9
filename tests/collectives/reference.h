// Serial reference for the multi-rank collective tests (matrix_test.cc,
// api_test.cc): dtypes, reduce ops, deterministic inputs and the expected
// results, computed here without calling anything from the library.
//
// Inputs are pure functions of (case number, rank, element index), so every
// rank can compute every other rank's input, and from that the reference
// result, locally.
//
// Reduction inputs are chosen so that the reference is exact where the
// library's result is exact:
//  - integers: full-range values (sums and products wrap, MIN/MAX see
//    negatives); products use mostly odd values so they do not vanish.
//  - floating types: small integers in [-8, 8] (sums of 8 ranks, also after
//    PREMUL_SUM by 0.5 or -1.5, stay exact even in bfloat16), products of
//    {-2, -1, 1, 2}; AVG, which divides, is compared with a tolerance of the
//    dtype.
//  - bool: 0/1 patterns biased so that AND-like and OR-like results are
//    not constant.
//  - complex: both parts small integers in [-8, 8]; products of factors
//    from {1, -1, i, -i, 1 + i, 1 - i} (magnitude at most 2^(n/2)), exact in
//    complex64 for the rank counts tested.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness.h"

namespace occl_ref {

// ---------------------------------------------------------------------------
// dtypes

// kF8E4M3 (float8_e4m3fn) and kF8E5M2 (float8_e5m2) are not in kAllDT: the
// matrix suites predate them; the soak test (tests/soak) draws them.
enum class DT {
  kI8,
  kI16,
  kI32,
  kI64,
  kU8,
  kU16,
  kU32,
  kU64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kBool,
  kF8E4M3,
  kF8E5M2,
  kC64,
  kC128
};

inline constexpr DT kAllDT[] = {DT::kI8,  DT::kI16,  DT::kI32, DT::kI64, DT::kU8,   DT::kU16, DT::kU32, DT::kU64,
                                DT::kF16, DT::kBF16, DT::kF32, DT::kF64, DT::kBool, DT::kC64, DT::kC128};

inline const char* dt_name(DT d) {
  switch (d) {
    case DT::kI8: return "int8";
    case DT::kI16: return "int16";
    case DT::kI32: return "int32";
    case DT::kI64: return "int64";
    case DT::kU8: return "uint8";
    case DT::kU16: return "uint16";
    case DT::kU32: return "uint32";
    case DT::kU64: return "uint64";
    case DT::kF16: return "float16";
    case DT::kBF16: return "bfloat16";
    case DT::kF32: return "float32";
    case DT::kF64: return "float64";
    case DT::kBool: return "bool";
    case DT::kF8E4M3: return "float8_e4m3fn";
    case DT::kF8E5M2: return "float8_e5m2";
    case DT::kC64: return "complex64";
    case DT::kC128: return "complex128";
  }
  return "?";
}

inline size_t dt_size(DT d) {
  switch (d) {
    case DT::kI8:
    case DT::kU8:
    case DT::kBool:
    case DT::kF8E4M3:
    case DT::kF8E5M2: return 1;
    case DT::kI16:
    case DT::kU16:
    case DT::kF16:
    case DT::kBF16: return 2;
    case DT::kI32:
    case DT::kU32:
    case DT::kF32: return 4;
    case DT::kI64:
    case DT::kU64:
    case DT::kF64:
    case DT::kC64: return 8;
    case DT::kC128: return 16;
  }
  return 0;
}

inline DLDataType dt_dl(DT d) {
  using namespace omniccl::testing;
  switch (d) {
    case DT::kI8: return dl_int(8);
    case DT::kI16: return dl_int(16);
    case DT::kI32: return dl_int(32);
    case DT::kI64: return dl_int(64);
    case DT::kU8: return dl_uint(8);
    case DT::kU16: return dl_uint(16);
    case DT::kU32: return dl_uint(32);
    case DT::kU64: return dl_uint(64);
    case DT::kF16: return dl_float(16);
    case DT::kBF16: return dl_bfloat16();
    case DT::kF32: return dl_float(32);
    case DT::kF64: return dl_float(64);
    case DT::kBool: return dl_bool();
    case DT::kF8E4M3: return {kDLFloat8_e4m3fn, 8, 1};
    case DT::kF8E5M2: return {kDLFloat8_e5m2, 8, 1};
    case DT::kC64: return {kDLComplex, 64, 1};
    case DT::kC128: return {kDLComplex, 128, 1};
  }
  return dl_uint(8);
}

inline bool dt_float(DT d) {
  return d == DT::kF16 || d == DT::kBF16 || d == DT::kF32 || d == DT::kF64 || d == DT::kF8E4M3 || d == DT::kF8E5M2;
}

inline bool dt_complex(DT d) { return d == DT::kC64 || d == DT::kC128; }

// ---------------------------------------------------------------------------
// reduce ops

inline const char* op_name(occl_red_op_t op) {
  switch (op) {
    case OCCL_SUM: return "SUM";
    case OCCL_PROD: return "PROD";
    case OCCL_MIN: return "MIN";
    case OCCL_MAX: return "MAX";
    case OCCL_AVG: return "AVG";
    case OCCL_BAND: return "BAND";
    case OCCL_BOR: return "BOR";
    case OCCL_BXOR: return "BXOR";
    case OCCL_PREMUL_SUM: return "PREMUL_SUM";
    case OCCL_LAND: return "LAND";
    case OCCL_LOR: return "LOR";
    case OCCL_LXOR: return "LXOR";
    case OCCL_MAXLOC: return "MAXLOC";
    case OCCL_MINLOC: return "MINLOC";
    default: break;  // OCCL_RED_OP_MAX_ENUM is not an op
  }
  return "?";
}

inline bool op_logical(occl_red_op_t op) { return op == OCCL_LAND || op == OCCL_LOR || op == OCCL_LXOR; }

/// The truth value of x as the logical ops give it (1 or 0, in R).
template <class R>
R truth(bool t) {
  return static_cast<R>(t ? 1 : 0);
}
/// a LAND/LOR/LXOR b, nonzero being true.
template <class R>
R logical(occl_red_op_t op, R a, R b) {
  const bool x = a != R(0), y = b != R(0);
  return truth<R>(op == OCCL_LAND ? (x && y) : op == OCCL_LOR ? (x || y) : (x != y));
}

/// Whether `op` is defined for `d` (the undefined pairs are error tests
/// elsewhere): bitwise ops need integer or bool, AVG/PREMUL_SUM not bool,
/// MIN/MAX not complex, logical ops every real dtype.
inline bool op_defined(occl_red_op_t op, DT d) {
  if (op == OCCL_BAND || op == OCCL_BOR || op == OCCL_BXOR) return !dt_float(d) && !dt_complex(d);
  if (op == OCCL_MIN || op == OCCL_MAX || op_logical(op)) return !dt_complex(d);
  if (op == OCCL_MAXLOC || op == OCCL_MINLOC) {
    return !dt_complex(d) && d != DT::kBool && (!dt_float(d) || d == DT::kF32 || d == DT::kF64);
  }
  if (op == OCCL_AVG || op == OCCL_PREMUL_SUM) return d != DT::kBool;
  return true;
}

/// One reduce op as a test uses it: `kind` says the semantics, `handle` is
/// what is passed to the library (kind itself, or a created PREMUL_SUM op),
/// `scalar` is the PREMUL_SUM factor (1 for the plain OCCL_PREMUL_SUM).
struct Op {
  occl_red_op_t kind = OCCL_SUM;
  occl_red_op_t handle = OCCL_SUM;
  double scalar = 1.0;
  std::string name() const {
    if (kind != OCCL_PREMUL_SUM) return op_name(kind);
    std::ostringstream os;
    os << "PREMUL_SUM(" << scalar << ")";
    return os.str();
  }
};

// ---------------------------------------------------------------------------
// hashing: deterministic inputs

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint64_t hash3(uint64_t cs, uint64_t rank, uint64_t idx) {
  return mix64(mix64(cs * 0x100000001b3ull + rank) ^ (idx * 0xd6e8feb86659fd93ull));
}

// ---------------------------------------------------------------------------
// float16 / bfloat16 codecs (round to nearest even), independent of the library

inline float f16_to_f32(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 0x1f) return m ? std::nanf("") : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  return sign * std::ldexp(static_cast<float>(m + 1024), e - 25);
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;           // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;          // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {                               // normal half (>= 2^-14)
    const uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);  // round to nearest even
    return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
  }
  // Subnormal half (or zero): count units of 2^-24, nearest even.
  const float scaled = std::bit_cast<float>(ax) * 16777216.0f;  // exact (power of two)
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---------------------------------------------------------------------------
// Models: one per dtype family. Each has
//   S              storage type of one element
//   R              reference value type
//   gen(op, h)     the input value for hash h (R, exactly representable in S)
//   store(R) -> S, load(S) -> R
//   pre(op, x)     PREMUL_SUM pre-multiplication (identity for other ops)
//   combine(op, a, b)
//   finish(op, acc, n)   AVG division
//   ok(op, got, want)    comparison (exact, or with a tolerance for AVG)

template <class T>
struct IntModel {
  using S = T;
  using R = T;
  static R gen(const Op& op, uint64_t h) {
    switch (op.kind) {
      case OCCL_PROD: return static_cast<T>((h >> 61) != 0 ? (h | 1u) : h);  // mostly odd
      case OCCL_BAND: return static_cast<T>(h | mix64(h));                   // dense bits
      case OCCL_BOR: return static_cast<T>(h & mix64(h) & mix64(h + 1));     // sparse bits
      case OCCL_LAND: return static_cast<T>(h % 8 == 0 ? 0 : h | 0x80);      // mostly true
      case OCCL_LOR: return static_cast<T>(h % 8 == 0 ? h | 0x40 : 0);       // mostly false
      case OCCL_LXOR: return static_cast<T>(h % 2 == 0 ? 0 : h | 0x10);      // either
      default: return static_cast<T>(h);                                     // full range
    }
  }
  static S store(R v) { return v; }
  static R load(S v) { return v; }
  static R pre(const Op& op, R x) {
    if (op.kind != OCCL_PREMUL_SUM) return x;
    return static_cast<T>(static_cast<uint64_t>(x) * static_cast<uint64_t>(static_cast<int64_t>(op.scalar)));
  }
  static R combine(const Op& op, R a, R b) {
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op.kind) {
      case OCCL_SUM:
      case OCCL_AVG:
      case OCCL_PREMUL_SUM: return static_cast<T>(ua + ub);  // wraps
      case OCCL_PROD: return static_cast<T>(ua * ub);        // wraps
      case OCCL_MIN: return b < a ? b : a;
      case OCCL_MAX: return a < b ? b : a;
      case OCCL_BAND: return static_cast<T>(a & b);
      case OCCL_BOR: return static_cast<T>(a | b);
      case OCCL_BXOR: return static_cast<T>(a ^ b);
      case OCCL_LAND:
      case OCCL_LOR:
      case OCCL_LXOR: return logical<T>(op.kind, a, b);
      default: break;  // OCCL_RED_OP_MAX_ENUM is not an op
    }
    return a;
  }
  static R finish(const Op& op, R acc, int n) {
    if (op_logical(op.kind)) return truth<T>(acc != 0);  // one rank's input is made 0/1 too
    if (op.kind != OCCL_AVG) return acc;
    return static_cast<T>(acc / static_cast<T>(n));  // truncates toward zero
  }
  static bool ok(const Op&, S got, R want) { return got == want; }
  static std::string show(R v) {
    std::ostringstream os;
    if constexpr (sizeof(T) == 1)
      os << static_cast<int>(v);
    else
      os << v;
    return os.str();
  }
};

struct BoolModel {
  using S = uint8_t;
  using R = uint8_t;
  static bool and_like(const Op& op) {
    return op.kind == OCCL_PROD || op.kind == OCCL_MIN || op.kind == OCCL_BAND || op.kind == OCCL_LAND;
  }
  static bool xor_like(const Op& op) { return op.kind == OCCL_BXOR || op.kind == OCCL_LXOR; }
  static R gen(const Op& op, uint64_t h) {
    if (xor_like(op)) return static_cast<R>(h & 1);
    return and_like(op) ? static_cast<R>(h % 8 != 0) : static_cast<R>(h % 8 == 0);
  }
  static S store(R v) { return v; }
  static R load(S v) { return v; }
  static R pre(const Op&, R x) { return x; }
  static R combine(const Op& op, R a, R b) {
    if (xor_like(op)) return static_cast<R>((a != 0) ^ (b != 0));
    if (and_like(op)) return static_cast<R>((a != 0) && (b != 0));
    return static_cast<R>((a != 0) || (b != 0));  // SUM, MAX, BOR, LOR
  }
  static R finish(const Op&, R acc, int) { return acc; }
  static bool ok(const Op&, S got, R want) { return got == want; }
  static std::string show(R v) { return std::to_string(static_cast<int>(v)); }
};

struct F16Codec {
  using S = uint16_t;
  static constexpr double kEps = 1.0 / 1024;  // 2^-10: twice the unit roundoff
  static constexpr int kGenMax = 8;
  static S enc(double v) { return f32_to_f16(static_cast<float>(v)); }
  static double dec(S s) { return f16_to_f32(s); }
};
struct BF16Codec {
  using S = uint16_t;
  static constexpr double kEps = 1.0 / 128;  // 2^-7
  static constexpr int kGenMax = 8;
  static S enc(double v) { return f32_to_bf16(static_cast<float>(v)); }
  static double dec(S s) { return bf16_to_f32(s); }
};
struct F32Codec {
  using S = float;
  static constexpr double kEps = 1.0 / (1 << 23);
  static constexpr int kGenMax = 8;
  static S enc(double v) { return static_cast<float>(v); }
  static double dec(S s) { return s; }
};
struct F64Codec {
  using S = double;
  static constexpr double kEps = 1.0 / (1ull << 52);
  static constexpr int kGenMax = 8;
  static S enc(double v) { return v; }
  static double dec(S s) { return s; }
};

/// float8 decoding from the format's definition: kMant mantissa bits,
/// exponent bias kBias; e4m3fn (kIeee false) has no Inf and one NaN per sign
/// (all bits set), e5m2 (kIeee true) is IEEE-like.
template <int kMant, int kBias, bool kIeee>
struct F8Codec {
  using S = uint8_t;
  static constexpr double kEps = 2.0 / (1 << kMant);  // twice the unit roundoff
  // Inputs that keep every partial sum of up to 6 ranks exact (3 mantissa
  // bits: integers to 16; 2 bits: to 8), as [-8, 8] does for the wider types.
  static constexpr int kGenMax = kMant == 3 ? 2 : 1;
  static double dec(S s) {
    const int e = (s >> kMant) & ((0x80 >> kMant) - 1), m = s & ((1 << kMant) - 1);
    const int emax = (0x80 >> kMant) - 1;
    const double sign = (s & 0x80) ? -1.0 : 1.0;
    if (kIeee && e == emax) return m ? std::nan("") : sign * INFINITY;
    if (!kIeee && e == emax && m == (1 << kMant) - 1) return std::nan("");
    if (e == 0) return sign * std::ldexp(m, 1 - kBias - kMant);
    return sign * std::ldexp(m + (1 << kMant), e - kBias - kMant);
  }
  /// Nearest finite code, ties to an even mantissa: from a table of every
  /// finite code sorted by value (built once by decoding them all).
  static S enc(double v) {
    static const std::vector<std::pair<double, S>> kSorted = [] {
      std::vector<std::pair<double, S>> t;
      for (int c = 0; c < 256; ++c) {
        const double x = dec(static_cast<S>(c));
        if (std::isfinite(x) && !(x == 0 && std::signbit(x))) t.emplace_back(x, static_cast<S>(c));  // one zero
      }
      std::sort(t.begin(), t.end());
      return t;
    }();
    auto hi = std::lower_bound(kSorted.begin(), kSorted.end(), std::pair<double, S>{v, 0});
    if (hi == kSorted.begin()) return hi->second;
    if (hi == kSorted.end()) return kSorted.back().second;
    const auto lo = hi - 1;
    const double dl = v - lo->first, dh = hi->first - v;
    if (dl != dh) return dl < dh ? lo->second : hi->second;
    return (lo->second & 1) == 0 ? lo->second : hi->second;
  }
};
using F8E4M3Codec = F8Codec<3, 7, false>;
using F8E5M2Codec = F8Codec<2, 15, true>;

template <class C>
struct FloatModel {
  using S = typename C::S;
  using R = double;
  static R gen(const Op& op, uint64_t h) {
    if (op.kind == OCCL_PROD) {
      static constexpr double kProd[4] = {-2.0, -1.0, 1.0, 2.0};
      return kProd[h & 3];
    }
    if (op_logical(op.kind)) {
      // Zeros of both signs (both false) among nonzero values, biased as
      // IntModel's; NaN is true, tested in scan_test.cc.
      const double zero = (h & 16) != 0 ? -0.0 : 0.0;
      const double value = static_cast<double>(1 + h % C::kGenMax) * ((h & 32) != 0 ? -1 : 1);
      const bool nonzero = op.kind == OCCL_LAND ? h % 8 != 0 : op.kind == OCCL_LOR ? h % 8 == 0 : h % 2 != 0;
      return nonzero ? value : zero;
    }
    return static_cast<double>(static_cast<int>(h % (2 * C::kGenMax + 1)) - C::kGenMax);
  }
  static S store(R v) { return C::enc(v); }
  static R load(S v) { return C::dec(v); }
  static R pre(const Op& op, R x) { return op.kind == OCCL_PREMUL_SUM ? x * op.scalar : x; }
  static R combine(const Op& op, R a, R b) {
    switch (op.kind) {
      case OCCL_PROD: return a * b;
      case OCCL_MIN: return b < a ? b : a;
      case OCCL_MAX: return a < b ? b : a;
      case OCCL_LAND:
      case OCCL_LOR:
      case OCCL_LXOR: return logical<R>(op.kind, a, b);
      default: return a + b;  // SUM, AVG, PREMUL_SUM
    }
  }
  static R finish(const Op& op, R acc, int n) {
    if (op_logical(op.kind)) return truth<R>(acc != 0);  // one rank's input is made 0/1 too
    return op.kind == OCCL_AVG ? acc / n : acc;
  }
  static bool ok(const Op& op, S got, R want) {
    const double g = C::dec(got);
    if (op.kind != OCCL_AVG) return g == want;  // exact by construction
    return std::fabs(g - want) <= C::kEps * std::fabs(want) + 1e-300;
  }
  static std::string show(R v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
  }
};

/// complex64 (T = float) / complex128 (T = double), computed in
/// std::complex<double> with the product written out.
template <class T>
struct ComplexModel {
  struct S {
    T re, im;
  };
  using R = std::complex<double>;
  static R gen(const Op& op, uint64_t h) {
    if (op.kind == OCCL_PROD) {
      static const R kProd[6] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}, {1, 1}, {1, -1}};
      return kProd[h % 6];
    }
    return {double(int(h % 17) - 8), double(int((h >> 8) % 17) - 8)};
  }
  static S store(R v) { return {static_cast<T>(v.real()), static_cast<T>(v.imag())}; }
  static R load(S v) { return {v.re, v.im}; }
  static R pre(const Op& op, R x) { return op.kind == OCCL_PREMUL_SUM ? x * op.scalar : x; }
  static R combine(const Op& op, R a, R b) {
    if (op.kind != OCCL_PROD) return a + b;  // SUM, AVG, PREMUL_SUM
    return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
  }
  static R finish(const Op& op, R acc, int n) { return op.kind == OCCL_AVG ? acc / double(n) : acc; }
  static bool ok(const Op& op, S got, R want) {
    if (op.kind != OCCL_AVG) return got.re == want.real() && got.im == want.imag();
    const double eps = sizeof(T) == 4 ? 1.0 / (1 << 23) : 1.0 / (1ull << 52);
    return std::fabs(got.re - want.real()) <= eps * std::fabs(want.real()) &&
           std::fabs(got.im - want.imag()) <= eps * std::fabs(want.imag());
  }
  static std::string show(R v) {
    std::ostringstream os;
    os.precision(17);
    os << "(" << v.real() << ", " << v.imag() << ")";
    return os.str();
  }
};

/// Calls f(Model{}) for dtype d.
template <class F>
decltype(auto) with_model(DT d, F&& f) {
  switch (d) {
    case DT::kI8: return f(IntModel<int8_t>{});
    case DT::kI16: return f(IntModel<int16_t>{});
    case DT::kI32: return f(IntModel<int32_t>{});
    case DT::kI64: return f(IntModel<int64_t>{});
    case DT::kU8: return f(IntModel<uint8_t>{});
    case DT::kU16: return f(IntModel<uint16_t>{});
    case DT::kU32: return f(IntModel<uint32_t>{});
    case DT::kU64: return f(IntModel<uint64_t>{});
    case DT::kF16: return f(FloatModel<F16Codec>{});
    case DT::kBF16: return f(FloatModel<BF16Codec>{});
    case DT::kF32: return f(FloatModel<F32Codec>{});
    case DT::kF64: return f(FloatModel<F64Codec>{});
    case DT::kF8E4M3: return f(FloatModel<F8E4M3Codec>{});
    case DT::kF8E5M2: return f(FloatModel<F8E5M2Codec>{});
    case DT::kC64: return f(ComplexModel<float>{});
    case DT::kC128: return f(ComplexModel<double>{});
    case DT::kBool: break;
  }
  return f(BoolModel{});
}

inline bool is_loc(const Op& op) { return op.kind == OCCL_MAXLOC || op.kind == OCCL_MINLOC; }

/// MAXLOC / MINLOC inputs: (value, index) pairs at even global element
/// indices; values 0..3 (ties are common), indices 0..63.
inline int loc_input(uint64_t cs, int rank, size_t idx) {
  const uint64_t h = hash3(cs, rank, idx);
  return idx % 2 == 0 ? int(h % 4) : int((h >> 8) % 64);
}

/// Reduction input: element `count` elements of rank `rank`'s input for case
/// `cs`, global element indices base, base+1, ...
inline void fill_reduce_input(DT d, const Op& op, void* buf, size_t count, size_t base, int rank, uint64_t cs) {
  with_model(d, [&](auto m) {
    using M = decltype(m);
    auto* p = static_cast<typename M::S*>(buf);
    for (size_t j = 0; j < count; ++j) {
      if (is_loc(op)) {
        p[j] = M::store(typename M::R(loc_input(cs, rank, base + j)));
      } else {
        p[j] = M::store(M::gen(op, hash3(cs, rank, base + j)));
      }
    }
  });
}

/// The MAXLOC / MINLOC result of the pair at global element index g (even):
/// the larger (smaller) value, on ties the smaller index.
inline std::pair<int, int> loc_expect(const Op& op, size_t g, int n, uint64_t cs) {
  std::pair<int, int> best{loc_input(cs, 0, g), loc_input(cs, 0, g + 1)};
  for (int r = 1; r < n; ++r) {
    const int v = loc_input(cs, r, g), i = loc_input(cs, r, g + 1);
    const bool ahead = op.kind == OCCL_MAXLOC ? v > best.first : v < best.first;
    if (ahead || (v == best.first && i < best.second)) best = {v, i};
  }
  return best;
}

/// check_reduce_output for MAXLOC / MINLOC: count elements from global
/// index base (both even).
template <class M>
std::string check_loc_output(const Op& op, const typename M::S* p, size_t count, size_t base, int n, uint64_t cs) {
  if constexpr (std::is_arithmetic_v<typename M::R>) {
    for (size_t j = 0; j + 1 < count; j += 2) {
      const auto [v, i] = loc_expect(op, base + j, n, cs);
      if (M::load(p[j]) != typename M::R(v) || M::load(p[j + 1]) != typename M::R(i)) {
        std::ostringstream os;
        os << "pair at element " << j << ": got (" << M::show(M::load(p[j])) << ", " << M::show(M::load(p[j + 1]))
           << "), want (" << v << ", " << i << ")";
        return os.str();
      }
    }
    return {};
  } else {
    return "MAXLOC/MINLOC on a dtype without them";
  }
}

/// Compares `count` elements of got (global indices base...) with the
/// reduction over n ranks; returns "" or a description of the first
/// mismatch (and how many there are).
inline std::string check_reduce_output(DT d, const Op& op, const void* got, size_t count, size_t base, int n,
                                       uint64_t cs) {
  return with_model(d, [&](auto m) -> std::string {
    using M = decltype(m);
    const auto* p = static_cast<const typename M::S*>(got);
    if (is_loc(op)) return check_loc_output<M>(op, p, count, base, n, cs);
    size_t bad = 0, first = 0;
    typename M::R first_want{};
    for (size_t j = 0; j < count; ++j) {
      typename M::R acc = M::pre(op, M::load(M::store(M::gen(op, hash3(cs, 0, base + j)))));
      for (int r = 1; r < n; ++r) {
        acc = M::combine(op, acc, M::pre(op, M::load(M::store(M::gen(op, hash3(cs, r, base + j))))));
      }
      acc = M::finish(op, acc, n);
      if (!M::ok(op, p[j], acc)) {
        if (bad++ == 0) {
          first = j;
          first_want = acc;
        }
      }
    }
    if (bad == 0) return {};
    std::ostringstream os;
    os << bad << " of " << count << " elements wrong; first at index " << first << ": got "
       << M::show(M::load(p[first])) << ", want " << M::show(first_want);
    return os.str();
  });
}

// ---------------------------------------------------------------------------
// Data-movement patterns: element `idx` of rank `rank`'s data for case cs.
// Any bit pattern (NaNs included) for non-bool types; 0/1 for bool.

inline void fill_pattern(DT d, void* buf, size_t count, size_t base, int rank, uint64_t cs) {
  const size_t es = dt_size(d);
  auto* p = static_cast<unsigned char*>(buf);
  for (size_t j = 0; j < count; ++j) {
    uint64_t h[2] = {hash3(cs ^ 0x5a5a5a5aull, rank, base + j), 0};
    if (d == DT::kBool) h[0] &= 1;
    if (es > 8) h[1] = mix64(h[0]);  // complex128: 16 bytes
    std::memcpy(p + j * es, h, es);  // little-endian low bytes
  }
}

/// "" if `count` elements at got equal the pattern, else the first difference.
inline std::string check_pattern(DT d, const void* got, size_t count, size_t base, int rank, uint64_t cs) {
  const size_t es = dt_size(d);
  std::vector<unsigned char> want(count * es);
  fill_pattern(d, want.data(), count, base, rank, cs);
  if (count == 0 || std::memcmp(want.data(), got, count * es) == 0) return {};
  const auto* g = static_cast<const unsigned char*>(got);
  size_t bad = 0, first = count;
  for (size_t j = 0; j < count; ++j) {
    if (std::memcmp(g + j * es, want.data() + j * es, es) != 0) {
      if (first == count) first = j;
      ++bad;
    }
  }
  std::ostringstream os;
  os << bad << " of " << count << " elements wrong; first at index " << first << " (expected data of rank " << rank
     << ", element " << base + first << ")";
  return os.str();
}

inline constexpr unsigned char kSentinel = 0xA5;

/// "" if all `bytes` at p are kSentinel.
inline std::string check_sentinel(const void* p, size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) {
    if (b[i] != kSentinel) {
      std::ostringstream os;
      os << "byte " << i << " of " << bytes << " that must stay untouched was overwritten";
      return os.str();
    }
  }
  return {};
}

// ---------------------------------------------------------------------------
// Small utilities

template <class... A>
std::string cat(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

/// A byte buffer of `count` elements of dtype d (at least one byte, so data
/// pointers are never NULL), filled with kSentinel.
struct Buf {
  DT d;
  size_t count;
  std::vector<unsigned char> bytes;
  Buf(DT dt, size_t n) : d(dt), count(n), bytes(std::max<size_t>(1, n * dt_size(dt)), kSentinel) {}
  unsigned char* data() { return bytes.data(); }
  unsigned char* at(size_t elem) { return bytes.data() + elem * dt_size(d); }
  size_t nbytes() const { return count * dt_size(d); }
};

}  // namespace occl_ref
