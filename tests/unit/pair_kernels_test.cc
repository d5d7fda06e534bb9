// CPU kernels on two-part items: complex64 / complex128 and the (value,
// index) pairs of MAXLOC / MINLOC. References are written out here.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "kernels/types.h"

namespace omniccl::kernels {
namespace {

template <class T>
DType complex_of() {
  return sizeof(T) == 4 ? DType::kComplex64 : DType::kComplex128;
}

template <class T>
void complex_sum_prod() {
  const DType t = complex_of<T>();
  // (1 + 2i)(3 - 4i) = 11 + 2i; (1 + 2i) + (3 - 4i) = 4 - 2i.
  T a[4] = {1, 2, -0.5, 0}, b[4] = {3, -4, 2, 8}, out[4];
  cpu::reduce(out, a, b, 2, t, RedOp::kProd);
  EXPECT_EQ(out[0], T(11));
  EXPECT_EQ(out[1], T(2));
  EXPECT_EQ(out[2], T(-1));  // (-0.5)(2 + 8i) = -1 - 4i
  EXPECT_EQ(out[3], T(-4));
  cpu::reduce(out, a, b, 2, t, RedOp::kSum);
  EXPECT_EQ(out[0], T(4));
  EXPECT_EQ(out[1], T(-2));
  EXPECT_EQ(out[2], T(1.5));
  EXPECT_EQ(out[3], T(8));
  // AVG's division and PREMUL_SUM's real factor apply to both parts.
  T c[2] = {3, -6};
  cpu::scale_divide(c, 1, t, 3);
  EXPECT_EQ(c[0], T(1));
  EXPECT_EQ(c[1], T(-2));
  cpu::scale_multiply(c, c, 1, t, 0.5);
  EXPECT_EQ(c[0], T(0.5));
  EXPECT_EQ(c[1], T(-1));
  // In place, count in complex elements.
  cpu::reduce_inplace(a, b, 2, t, RedOp::kSum);
  EXPECT_EQ(a[3], T(8));
}

TEST(PairKernels, ComplexValues) {
  complex_sum_prod<float>();
  complex_sum_prod<double>();
}

/// Random parts with every kind of special value; op(a, b) and op(b, a)
/// must give the same bits at every unaligned offset.
template <class T>
void complex_commutative(RedOp op) {
  const DType t = complex_of<T>();
  const T specials[] = {0,
                        -T(0),
                        std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::quiet_NaN(),
                        -std::numeric_limits<T>::quiet_NaN(),
                        T(1) / 3,
                        std::numeric_limits<T>::max()};
  std::mt19937_64 rng(7);
  const size_t n = 1001;
  std::vector<T> a(2 * n), b(2 * n);
  for (size_t i = 0; i < 2 * n; ++i) {
    const uint64_t r = rng();
    a[i] = r % 3 == 0 ? specials[r / 3 % 7] : T(std::ldexp(double(r >> 11) / 9007199254740992.0 - 0.5, int(r % 9)));
    const uint64_t q = rng();
    b[i] = q % 3 == 0 ? specials[q / 3 % 7] : T(std::ldexp(double(q >> 11) / 9007199254740992.0 - 0.5, int(q % 9)));
  }
  std::vector<unsigned char> ab(2 * n * sizeof(T) + 1), ba(ab.size());
  cpu::reduce(ab.data() + 1, a.data(), b.data(), n, t, op);
  cpu::reduce(ba.data() + 1, b.data(), a.data(), n, t, op);
  EXPECT_EQ(std::memcmp(ab.data(), ba.data(), ab.size()), 0) << redop_name(op) << " " << dtype_name(t);
}

TEST(PairKernels, ComplexCommutativeBitForBit) {
  for (RedOp op : {RedOp::kSum, RedOp::kProd}) {
    complex_commutative<float>(op);
    complex_commutative<double>(op);
  }
}

TEST(PairKernels, ComplexUndefinedOpsThrow) {
  float a[2] = {1, 2}, b[2] = {3, 4};
  EXPECT_THROW(cpu::reduce(a, a, b, 1, DType::kComplex64, RedOp::kMin), std::invalid_argument);
  EXPECT_THROW(cpu::reduce(a, a, b, 1, DType::kComplex64, RedOp::kBAnd), std::invalid_argument);
  EXPECT_THROW(cpu::reduce(a, a, b, 1, DType::kComplex64, RedOp::kMaxLoc), std::invalid_argument);
}

template <class T>
void loc_ties(DType t) {
  // (value, index) pairs; count counts pairs.
  const T a[8] = {5, 7, 2, 1, 3, 4, 9, 0}, b[8] = {5, 3, 2, 6, 1, 2, 8, 1};
  T out[8];
  cpu::reduce(out, a, b, 4, t, RedOp::kMaxLoc);
  const T want_max[8] = {5, 3, 2, 1, 3, 4, 9, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], want_max[i]) << "MAXLOC " << dtype_name(t) << " at " << i;
  cpu::reduce(out, b, a, 4, t, RedOp::kMinLoc);
  const T want_min[8] = {5, 3, 2, 1, 1, 2, 8, 1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], want_min[i]) << "MINLOC " << dtype_name(t) << " at " << i;
}

TEST(PairKernels, LocTiesTakeTheSmallerIndex) {
  loc_ties<int32_t>(DType::kInt32);
  loc_ties<uint8_t>(DType::kUInt8);
  loc_ties<int64_t>(DType::kInt64);
  loc_ties<float>(DType::kFloat32);
  loc_ties<double>(DType::kFloat64);
}

TEST(PairKernels, LocNanAndSignedZero) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double a[4] = {nan, 5, 0.0, 1}, b[4] = {100, 1, -0.0, 1}, ab[4], ba[4];
  for (RedOp op : {RedOp::kMaxLoc, RedOp::kMinLoc}) {
    cpu::reduce(ab, a, b, 2, DType::kFloat64, op);
    cpu::reduce(ba, b, a, 2, DType::kFloat64, op);
    EXPECT_EQ(std::memcmp(ab, ba, sizeof ab), 0) << redop_name(op);
    EXPECT_TRUE(std::isnan(ab[0])) << "a NaN value wins: " << redop_name(op);
    EXPECT_EQ(ab[1], 5);
    EXPECT_EQ(ab[2], 0.0);  // -0 and +0 with equal indices: merged as MAX / MIN would
    EXPECT_EQ(std::signbit(ab[2]), op == RedOp::kMinLoc) << redop_name(op);
  }
}

TEST(PairKernels, LocUnalignedAndInPlace) {
  // Pairs at an odd byte offset, reduced in place.
  std::vector<unsigned char> buf(1 + 6 * sizeof(int32_t));
  const int32_t x[6] = {1, 9, 4, 2, 4, 1}, y[6] = {2, 8, 4, 3, 3, 0};
  std::memcpy(buf.data() + 1, x, sizeof x);
  cpu::reduce_inplace(buf.data() + 1, y, 3, DType::kInt32, RedOp::kMaxLoc);
  int32_t got[6];
  std::memcpy(got, buf.data() + 1, sizeof got);
  const int32_t want[6] = {2, 8, 4, 2, 4, 1};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], want[i]) << i;
}

TEST(PairKernels, LocItemSizes) {
  EXPECT_EQ(item_size(DType::kInt32, RedOp::kMaxLoc), 8u);
  EXPECT_EQ(item_size(DType::kFloat64, RedOp::kMinLoc), 16u);
  EXPECT_EQ(item_size(DType::kComplex128, RedOp::kSum), 16u);
  EXPECT_EQ(item_elems(RedOp::kMaxLoc), 2u);
  EXPECT_EQ(item_elems(RedOp::kProd), 1u);
}

}  // namespace
}  // namespace omniccl::kernels
