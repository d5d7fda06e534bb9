// occl_scan / occl_exscan and the logical reduce ops, beyond the matrix
// (matrix_test.cc runs them over every dtype, size and rank count): what
// the arguments may not be and what their error messages say, NaN and
// signed zeros as truth values, a single rank's truth values, the _ex forms
// and a longer prefix over 5 ranks. Expected values are written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "harness.h"
#include "omniccl/omniccl.h"

namespace {

using omniccl::testing::contains_ci;
using omniccl::testing::dl_float;
using omniccl::testing::dl_int;
using omniccl::testing::JobOptions;
using omniccl::testing::run_ranks;
using omniccl::testing::Tensor1D;

JobOptions job(int nranks) {
  JobOptions o;
  o.nranks = nranks;
  o.transport = "shm";
  o.job_timeout_s = 60;
  o.timeout_ms = 30000;
  return o;
}

/// st must be OCCL_ERR_INVALID_ARGUMENT with a message holding each needle.
bool refused(occl_status_t st, std::initializer_list<const char*> needles) {
  if (st != OCCL_ERR_INVALID_ARGUMENT) return false;
  const std::string msg = occl_last_error();
  for (const char* n : needles) {
    if (!contains_ci(msg, n)) return false;
  }
  return true;
}

std::string last() { return std::string(" (") + occl_last_error() + ")"; }

int bad_arguments(occl_comm_t comm, int rank) {
  int32_t x[4] = {1, 2, 3, 4}, y[4] = {};
  float f[4] = {};
  Tensor1D tx(x, 4, dl_int(32)), ty(y, 4, dl_int(32)), ty3(y, 3, dl_int(32)), tf(f, 4, dl_float(32));
  Tensor1D overlap(x + 1, 3, dl_int(32)), tx3(x, 3, dl_int(32));
  RANK_CHECK(refused(occl_scan(&tx, &ty, OCCL_AVG, comm, nullptr), {"scan", "AVG", "prefix"}), rank, "AVG" + last());
  RANK_CHECK(refused(occl_exscan(&tx, &ty, OCCL_AVG, comm, nullptr), {"exscan", "AVG"}), rank, "AVG" + last());
  RANK_CHECK(refused(occl_scan(&tx, &ty, OCCL_PREMUL_SUM, comm, nullptr), {"PREMUL_SUM", "prefix"}), rank,
             "PREMUL_SUM" + last());
  occl_red_op_t premul;
  RANK_OK(occl_red_op_create_premul_sum(comm, 2.0, &premul), rank);
  RANK_CHECK(refused(occl_exscan(&tx, &ty, premul, comm, nullptr), {"PREMUL_SUM"}), rank, "premul op" + last());
  RANK_OK(occl_red_op_destroy(comm, premul), rank);
  RANK_CHECK(refused(occl_scan(&tx, &ty, static_cast<occl_red_op_t>(63), comm, nullptr), {"unknown"}), rank,
             "op 63" + last());
  RANK_CHECK(refused(occl_scan(&tx, &ty3, OCCL_SUM, comm, nullptr), {"recvbuf", "3", "4"}), rank, "count" + last());
  RANK_CHECK(refused(occl_exscan(&tx, &tf, OCCL_SUM, comm, nullptr), {"dtype", "int32", "float32"}), rank,
             "dtype" + last());
  RANK_CHECK(refused(occl_scan(&tf, &tf, OCCL_BXOR, comm, nullptr), {"BXOR", "float32"}), rank, "BXOR" + last());
  RANK_CHECK(refused(occl_scan(&tx3, &overlap, OCCL_SUM, comm, nullptr), {"overlap"}), rank, "overlap" + last());
  RANK_CHECK(refused(occl_scan(nullptr, &ty, OCCL_SUM, comm, nullptr), {"sendbuf"}), rank, "NULL" + last());
  RANK_CHECK(occl_scan(&tx, &ty, OCCL_SUM, nullptr, nullptr) == OCCL_ERR_INVALID_ARGUMENT, rank, "NULL comm");
  // Nothing was sent: the communicator still works.
  RANK_OK(occl_scan(&tx, &ty, OCCL_SUM, comm, nullptr), rank);
  return 0;
}

TEST(ScanTest, BadArgumentsAreRefusedWithAMessage) {
  for (int n : {1, 3}) {
    auto res = run_ranks(job(n), [](occl_comm_t comm, int rank, int) { return bad_arguments(comm, rank); });
    EXPECT_TRUE(res.ok()) << n << " ranks" << res.summary();
  }
}

/// Logical ops on floats: NaN is true, -0.0 false; one rank still gets 0/1.
int float_truth(occl_comm_t comm, int rank, int n) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Element j: rank 0 holds a[j], every other rank b[j].
  const float a[5] = {nan, -0.0f, 2.5f, 0.0f, -7.0f}, b[5] = {1.0f, 3.0f, -0.0f, 0.0f, nan};
  float x[5], y[5];
  std::memcpy(x, rank == 0 ? a : b, sizeof x);
  Tensor1D tx(x, 5, dl_float(32)), ty(y, 5, dl_float(32));
  auto truth = [](float v) { return v != 0.0f; };  // NaN != 0 is true
  for (occl_red_op_t op : {OCCL_LAND, OCCL_LOR, OCCL_LXOR}) {
    RANK_OK(occl_all_reduce(&tx, &ty, op, comm, nullptr), rank);
    for (int j = 0; j < 5; ++j) {
      bool want = truth(a[j]);
      for (int r = 1; r < n; ++r) {
        const bool t = truth(b[j]);
        want = op == OCCL_LAND ? want && t : op == OCCL_LOR ? want || t : want != t;
      }
      RANK_CHECK(y[j] == (want ? 1.0f : 0.0f) && !std::signbit(y[j]), rank,
                 "logical op " + std::to_string(op) + " element " + std::to_string(j) + " = " + std::to_string(y[j]));
    }
  }
  return 0;
}

TEST(ScanTest, LogicalOpsOnFloatsTakeNaNAsTrueAndSignedZerosAsFalse) {
  for (int n : {1, 2, 3}) {
    auto res = run_ranks(job(n), [](occl_comm_t comm, int rank, int n) { return float_truth(comm, rank, n); });
    EXPECT_TRUE(res.ok()) << n << " ranks" << res.summary();
  }
}

/// int64 SUM prefixes over 5 ranks, with the _ex forms (options given) and
/// async handles; inputs rank + 1, so rank i's scan is (i+1)(i+2)/2.
int prefix_sums(occl_comm_t comm, int rank, int) {
  int64_t x[3] = {rank + 1, -(rank + 1), 1000}, y[3] = {-5, -5, -5}, z[3] = {-5, -5, -5};
  Tensor1D tx(x, 3, dl_int(64)), ty(y, 3, dl_int(64)), tz(z, 3, dl_int(64));
  occl_options_t opts = OCCL_OPTIONS_INIT;
  opts.timeout_ms = 20000;
  occl_work_t w = nullptr;
  RANK_OK(occl_scan_ex(&tx, &ty, OCCL_SUM, comm, &opts, &w), rank);
  RANK_OK(occl_work_wait(w), rank);
  RANK_OK(occl_work_free(w), rank);
  RANK_OK(occl_exscan_ex(&tx, &tz, OCCL_SUM, comm, nullptr, nullptr), rank);
  const int64_t inc = int64_t(rank + 1) * (rank + 2) / 2, exc = int64_t(rank) * (rank + 1) / 2;
  RANK_CHECK(y[0] == inc && y[1] == -inc && y[2] == 1000 * (rank + 1), rank, "scan_ex: " + std::to_string(y[0]));
  if (rank == 0) {
    RANK_CHECK(z[0] == -5 && z[1] == -5 && z[2] == -5, rank, "exscan_ex wrote rank 0's recvbuf");
  } else {
    RANK_CHECK(z[0] == exc && z[1] == -exc && z[2] == 1000 * rank, rank, "exscan_ex: " + std::to_string(z[0]));
  }
  // In place: the result replaces the input.
  RANK_OK(occl_exscan(&tx, &tx, OCCL_MAX, comm, nullptr), rank);
  if (rank > 0) RANK_CHECK(x[0] == rank && x[1] == -1 && x[2] == 1000, rank, "exscan MAX in place");
  // Empty tensors take part like the others.
  Tensor1D e0(x, 0, dl_int(64)), e1(y, 0, dl_int(64));
  RANK_OK(occl_scan(&e0, &e1, OCCL_PROD, comm, nullptr), rank);
  RANK_OK(occl_exscan(&e0, &e1, OCCL_LXOR, comm, nullptr), rank);
  return 0;
}

TEST(ScanTest, PrefixSumsOverFiveRanksWithOptionsAndHandles) {
  for (const char* transport : {"shm", "tcp"}) {
    JobOptions o = job(5);
    o.transport = transport;
    auto res = run_ranks(o, [](occl_comm_t comm, int rank, int n) { return prefix_sums(comm, rank, n); });
    EXPECT_TRUE(res.ok()) << transport << res.summary();
  }
}

/// A scan that meets an exscan is reported by the rank that receives (rank
/// 0 only sends; whether it hears of it depends on timing).
TEST(ScanTest, MismatchedKindIsReported) {
  auto res = run_ranks(job(2), [](occl_comm_t comm, int rank, int) {
    int32_t x[2] = {1, 2}, y[2] = {};
    Tensor1D tx(x, 2, dl_int(32)), ty(y, 2, dl_int(32));
    const occl_status_t st =
        rank == 0 ? occl_scan(&tx, &ty, OCCL_SUM, comm, nullptr) : occl_exscan(&tx, &ty, OCCL_SUM, comm, nullptr);
    if (rank == 0) return 0;
    RANK_CHECK(st != OCCL_SUCCESS, rank, "a scan matched an exscan");
    const std::string msg = occl_last_error();
    RANK_CHECK(contains_ci(msg, "exscan"), rank, "message does not name the operations: " + msg);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

}  // namespace
