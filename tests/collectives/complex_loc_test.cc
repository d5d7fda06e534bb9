// complex64 / complex128 reductions and MAXLOC / MINLOC pairs, over 1 to 4
// ranks and every reducing algorithm. References are plain loops over the
// ranks' inputs, computed here; inputs are small integers, so every partial
// result is exact and the expected values do not depend on the order an
// algorithm combines in.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"

namespace {

using omniccl::testing::contains_ci;
using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::Tensor1D;

template <class... A>
std::string cat(const A&... a) {
  std::string s;
  ((s +=
    [](const auto& x) {
      if constexpr (std::is_convertible_v<decltype(x), std::string>) {
        return std::string(x);
      } else {
        return std::to_string(x);
      }
    }(a)),
   ...);
  return s;
}

/// One algorithm per reducing collective (OMNICCL_ALGO syntax), set i
/// taking the i-th of each list; "" = tuned.
std::string algo_set(int i) {
  static const char* const all_reduce[] = {"ring", "recursive_doubling", "tree", "direct", "pipelined"};
  static const char* const reduce_scatter[] = {"ring", "recursive_halving", "direct"};
  static const char* const reduce[] = {"tree", "direct"};
  if (i < 0) return "";
  return cat("all_reduce=", all_reduce[i % 5], ",reduce_scatter=", reduce_scatter[i % 3], ",reduce=", reduce[i % 2]);
}

JobOptions job(int nranks, int set) {
  JobOptions o = omniccl::testing::job_options(nranks);
  o.algorithm = algo_set(set);
  return o;
}

// Counts of items: one, odd, not divisible by 3 or 4, and large enough for
// the pipelined ring to cut chunks.
constexpr int64_t kCounts[] = {1, 37, 20011};

// ---------------------------------------------------------------------------
// complex

/// Rank r's element i: small integers, some negative, some zero.
template <class T>
std::complex<T> cinput(int r, int64_t i) {
  return {T((i % 5) - 2 + r), T(((i * 3 + r) % 4) - 1)};
}

template <class T>
DLDataType cdtype() {
  return {kDLComplex, uint8_t(16 * sizeof(T)), 1};
}

enum class CKind { kSum, kProd, kAvg, kPremul };

/// The expected element i of a reduction of n ranks (premul: scalar 0.5).
template <class T>
std::complex<T> cexpect(CKind k, int n, int64_t i) {
  std::complex<T> acc = k == CKind::kProd ? std::complex<T>(1, 0) : std::complex<T>(0, 0);
  for (int r = 0; r < n; ++r) {
    const std::complex<T> x = cinput<T>(r, i);
    if (k == CKind::kProd) {
      acc = {acc.real() * x.real() - acc.imag() * x.imag(), acc.real() * x.imag() + acc.imag() * x.real()};
    } else if (k == CKind::kPremul) {
      acc += x * T(0.5);
    } else {
      acc += x;
    }
  }
  if (k == CKind::kAvg) acc = {acc.real() / T(n), acc.imag() / T(n)};
  return acc;
}

template <class T>
int check_complex(const std::vector<std::complex<T>>& got, CKind k, int n, int64_t first, int rank,
                  const std::string& what) {
  for (size_t j = 0; j < got.size(); ++j) {
    const std::complex<T> want = cexpect<T>(k, n, first + int64_t(j));
    RANK_CHECK(got[j] == want, rank,
               cat(what, " [", j, "]: got (", got[j].real(), ",", got[j].imag(), ") want (", want.real(), ",",
                   want.imag(), ")"));
  }
  return 0;
}

occl_red_op_t op_of(CKind k, occl_red_op_t premul) {
  switch (k) {
    case CKind::kSum: return OCCL_SUM;
    case CKind::kProd: return OCCL_PROD;
    case CKind::kAvg: return OCCL_AVG;
    case CKind::kPremul: return premul;
  }
  return OCCL_SUM;
}

template <class T>
int complex_all_reduce(occl_comm_t comm, int rank, int n, CKind k, occl_red_op_t op, int64_t count) {
  std::vector<std::complex<T>> in(static_cast<size_t>(count)), out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) in[size_t(i)] = cinput<T>(rank, i);
  Tensor1D ts(in.data(), count, cdtype<T>()), tr(out.data(), count, cdtype<T>());
  RANK_OK(occl_all_reduce(&ts, &tr, op, comm, nullptr), rank);
  return check_complex(out, k, n, 0, rank, cat("all_reduce complex", 16 * sizeof(T), " op ", int(op), " n ", count));
}

template <class T>
int complex_reduce_scatter_and_reduce(occl_comm_t comm, int rank, int n, CKind k, occl_red_op_t op, int64_t count) {
  std::vector<std::complex<T>> in(static_cast<size_t>(count * n)), out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count * n; ++i) in[size_t(i)] = cinput<T>(rank, i);
  Tensor1D ts(in.data(), count * n, cdtype<T>()), tr(out.data(), count, cdtype<T>());
  RANK_OK(occl_reduce_scatter(&ts, &tr, op, comm, nullptr), rank);
  if (check_complex(out, k, n, count * rank, rank, cat("reduce_scatter complex", 16 * sizeof(T), " op ", int(op))))
    return 1;
  const int root = n - 1;
  std::vector<std::complex<T>> whole(static_cast<size_t>(count * n));
  Tensor1D tw(whole.data(), count * n, cdtype<T>());
  RANK_OK(occl_reduce(&ts, rank == root ? &tw : nullptr, op, root, comm, nullptr), rank);
  if (rank != root) return 0;
  return check_complex(whole, k, n, 0, rank, cat("reduce complex", 16 * sizeof(T), " op ", int(op)));
}

template <class T>
int complex_all(occl_comm_t comm, int rank, int n) {
  occl_red_op_t premul{};
  RANK_OK(occl_red_op_create_premul_sum(comm, 0.5, &premul), rank);
  for (CKind k : {CKind::kSum, CKind::kProd, CKind::kAvg, CKind::kPremul}) {
    for (int64_t count : kCounts) {
      if (complex_all_reduce<T>(comm, rank, n, k, op_of(k, premul), count)) return 1;
    }
    if (complex_reduce_scatter_and_reduce<T>(comm, rank, n, k, op_of(k, premul), 37)) return 1;
  }
  RANK_OK(occl_red_op_destroy(comm, premul), rank);
  return 0;
}

class ComplexTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ComplexTest, SumProdAvgPremul) {
  const auto [n, set] = GetParam();
  JobResult res = run_ranks(job(n, set), [](occl_comm_t comm, int rank, int nranks) {
    if (complex_all<float>(comm, rank, nranks)) return 1;
    return complex_all<double>(comm, rank, nranks);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Ranks, ComplexTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Values(-1, 0, 1, 2, 3, 4)));

// ---------------------------------------------------------------------------
// MAXLOC / MINLOC

/// Rank r's pair k: values 0..3 (many ties across ranks), indices that make
/// the lower ranks' indices larger, so ties are decided by index, not rank.
template <class T>
void loc_input(int r, int n, int64_t k, T* pair) {
  pair[0] = T((k * 7 + r * 3) % 4);
  pair[1] = T((n - 1 - r) * 10 + k % 3);
}

template <class T>
void loc_expect(bool max, int n, int64_t k, T* pair) {
  loc_input<T>(0, n, k, pair);
  for (int r = 1; r < n; ++r) {
    T x[2];
    loc_input<T>(r, n, k, x);
    const bool better = max ? x[0] > pair[0] : x[0] < pair[0];
    if (better || (x[0] == pair[0] && x[1] < pair[1])) {
      pair[0] = x[0];
      pair[1] = x[1];
    }
  }
}

template <class T>
int check_loc(const std::vector<T>& got, bool max, int n, int64_t first_pair, int rank, const std::string& what) {
  for (size_t j = 0; j < got.size() / 2; ++j) {
    T want[2];
    loc_expect<T>(max, n, first_pair + int64_t(j), want);
    RANK_CHECK(got[2 * j] == want[0] && got[2 * j + 1] == want[1], rank,
               cat(what, " pair ", j, ": got (", double(got[2 * j]), ",", double(got[2 * j + 1]), ") want (",
                   double(want[0]), ",", double(want[1]), ")"));
  }
  return 0;
}

template <class T>
int loc_case(occl_comm_t comm, int rank, int n, DLDataType dt, bool max, int64_t pairs) {
  const occl_red_op_t op = max ? OCCL_MAXLOC : OCCL_MINLOC;
  const std::string name = cat(max ? "MAXLOC" : "MINLOC", " bits ", int(dt.bits), " pairs ", pairs);
  std::vector<T> in(static_cast<size_t>(2 * pairs * n)), out(static_cast<size_t>(2 * pairs * n));
  for (int64_t k = 0; k < pairs * n; ++k) loc_input<T>(rank, n, k, &in[size_t(2 * k)]);
  // all_reduce over the first `pairs` pairs, in place.
  std::vector<T> io(in.begin(), in.begin() + 2 * pairs);
  Tensor1D tio(io.data(), 2 * pairs, dt);
  RANK_OK(occl_all_reduce(&tio, &tio, op, comm, nullptr), rank);
  if (check_loc(io, max, n, 0, rank, "all_reduce " + name)) return 1;
  // reduce_scatter: each rank's block is `pairs` whole pairs.
  std::vector<T> block(static_cast<size_t>(2 * pairs));
  Tensor1D ts(in.data(), 2 * pairs * n, dt), tb(block.data(), 2 * pairs, dt);
  RANK_OK(occl_reduce_scatter(&ts, &tb, op, comm, nullptr), rank);
  if (check_loc(block, max, n, pairs * rank, rank, "reduce_scatter " + name)) return 1;
  // reduce to root 0.
  Tensor1D to(out.data(), 2 * pairs * n, dt);
  RANK_OK(occl_reduce(&ts, rank == 0 ? &to : nullptr, op, 0, comm, nullptr), rank);
  if (rank == 0 && check_loc(out, max, n, 0, rank, "reduce " + name)) return 1;
  return 0;
}

template <class T>
int loc_all(occl_comm_t comm, int rank, int n, DLDataType dt) {
  for (bool max : {true, false}) {
    for (int64_t pairs : kCounts) {
      if (loc_case<T>(comm, rank, n, dt, max, pairs)) return 1;
    }
  }
  return 0;
}

class LocTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(LocTest, PairsWithTies) {
  const auto [n, set] = GetParam();
  JobResult res = run_ranks(job(n, set), [](occl_comm_t comm, int rank, int nranks) {
    if (loc_all<int32_t>(comm, rank, nranks, DLDataType{kDLInt, 32, 1})) return 1;
    if (loc_all<double>(comm, rank, nranks, DLDataType{kDLFloat, 64, 1})) return 1;
    if (loc_all<uint8_t>(comm, rank, nranks, DLDataType{kDLUInt, 8, 1})) return 1;
    return loc_all<float>(comm, rank, nranks, DLDataType{kDLFloat, 32, 1});
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Ranks, LocTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Values(-1, 0, 1, 2, 3, 4)));

// ---------------------------------------------------------------------------
// Errors: each names what is wrong, and the communicator keeps working.

/// The call fails with OCCL_ERR_INVALID_ARGUMENT and a message naming every
/// word of `words`.
#define EXPECT_INVALID(call, rank, ...)                                                                           \
  do {                                                                                                            \
    const occl_status_t s_ = (call);                                                                              \
    RANK_CHECK(s_ == OCCL_ERR_INVALID_ARGUMENT, rank, cat(#call, " -> ", occl_status_string(s_)));                \
    for (const char* w_ : {__VA_ARGS__}) {                                                                        \
      RANK_CHECK(contains_ci(occl_last_error(), w_), rank, cat(#call, ": no '", w_, "' in ", occl_last_error())); \
    }                                                                                                             \
  } while (0)

TEST(ComplexLocErrors, UndefinedPairsAndOddCounts) {
  JobResult res = run_ranks(job(3, -1), [](occl_comm_t comm, int rank, int n) {
    std::vector<double> buf(64, 1.0);
    Tensor1D c64(buf.data(), 8, {kDLComplex, 64, 1}), c128(buf.data(), 8, {kDLComplex, 128, 1});
    EXPECT_INVALID(occl_all_reduce(&c64, &c64, OCCL_MIN, comm, nullptr), rank, "MIN", "complex64");
    EXPECT_INVALID(occl_all_reduce(&c128, &c128, OCCL_MAX, comm, nullptr), rank, "MAX", "complex128");
    EXPECT_INVALID(occl_all_reduce(&c64, &c64, OCCL_BXOR, comm, nullptr), rank, "BXOR", "complex64");
    EXPECT_INVALID(occl_all_reduce(&c128, &c128, OCCL_MAXLOC, comm, nullptr), rank, "MAXLOC", "complex128");
    Tensor1D odd(buf.data(), 7, {kDLFloat, 64, 1}), half(buf.data(), 8, {kDLFloat, 16, 1});
    Tensor1D flag(buf.data(), 8, {kDLBool, 8, 1});
    EXPECT_INVALID(occl_all_reduce(&odd, &odd, OCCL_MAXLOC, comm, nullptr), rank, "odd", "pairs", "MAXLOC");
    EXPECT_INVALID(occl_reduce(&odd, &odd, OCCL_MINLOC, 0, comm, nullptr), rank, "odd", "MINLOC");
    EXPECT_INVALID(occl_all_reduce(&half, &half, OCCL_MINLOC, comm, nullptr), rank, "MINLOC", "float16");
    EXPECT_INVALID(occl_all_reduce(&flag, &flag, OCCL_MAXLOC, comm, nullptr), rank, "MAXLOC", "bool");
    // reduce_scatter: a block of 3 elements per rank would split a pair.
    Tensor1D send(buf.data(), 3 * n, {kDLInt, 32, 1}), recv(buf.data() + 32, 3, {kDLInt, 32, 1});
    EXPECT_INVALID(occl_reduce_scatter(&send, &recv, OCCL_MAXLOC, comm, nullptr), rank, "recvbuf", "odd");
    // Values that are no op: between the built-in ones.
    EXPECT_INVALID(occl_all_reduce(&odd, &odd, static_cast<occl_red_op_t>(14), comm, nullptr), rank, "14");
    return omniccl::testing::all_reduce_works(comm, rank, n, 5);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

}  // namespace
