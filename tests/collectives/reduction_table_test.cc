// Every row of bindings/reduction_table.tsv, the table of which reduce op
// the library accepts for which dtype that the Python, Rust and Java tests
// read too, run through occl_all_reduce and occl_reduce_scatter on two
// ranks. An `ok` row must give what reference.h's serial reduction of the
// same inputs gives; a `refused` row must fail with
// OCCL_ERR_INVALID_ARGUMENT and a message naming the op and the dtype.
// PREMUL_SUM is passed as OCCL_PREMUL_SUM itself (a scalar of 1). The
// verdicts must also be those of reference.h's op_defined, which the matrix
// tests use to choose the pairs they run.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"
#include "omniccl/omniccl.h"
#include "reference.h"

namespace {

using occl_ref::Buf;
using occl_ref::cat;
using occl_ref::DT;
using occl_ref::Op;
using omniccl::testing::contains_ci;
using omniccl::testing::Tensor1D;

struct Row {
  occl_red_op_t op;
  DT dtype;
  bool ok;
  std::string text;  // "SUM int8 ok", for messages
};

constexpr DT kEveryDT[] = {DT::kI8,   DT::kI16,    DT::kI32,    DT::kI64,  DT::kU8,  DT::kU16,
                           DT::kU32,  DT::kU64,    DT::kF16,    DT::kBF16, DT::kF32, DT::kF64,
                           DT::kBool, DT::kF8E4M3, DT::kF8E5M2, DT::kC64,  DT::kC128};

std::optional<occl_red_op_t> op_named(const std::string& name) {
  for (int v = OCCL_SUM; v <= OCCL_MINLOC; ++v) {
    if (name == occl_ref::op_name(static_cast<occl_red_op_t>(v))) return static_cast<occl_red_op_t>(v);
  }
  return std::nullopt;
}

std::optional<DT> dtype_named(const std::string& name) {
  for (DT d : kEveryDT) {
    if (name == occl_ref::dt_name(d)) return d;
  }
  return std::nullopt;
}

/// The table's rows; a line this test cannot read fails the test.
std::vector<Row> read_table() {
  const std::string path = std::string(OMNICCL_SOURCE_DIR) + "/bindings/reduction_table.tsv";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cols(line);
    std::string op, dtype, verdict;
    std::getline(cols, op, '\t');
    std::getline(cols, dtype, '\t');
    std::getline(cols, verdict, '\t');
    const auto o = op_named(op);
    const auto d = dtype_named(dtype);
    EXPECT_TRUE(o && d && (verdict == "ok" || verdict == "refused")) << "unreadable row: " << line;
    if (o && d) rows.push_back({*o, *d, verdict == "ok", op + " " + dtype + " " + verdict});
  }
  return rows;
}

constexpr size_t kCount = 8;  // even (MAXLOC/MINLOC pairs), two blocks of 4 for reduce_scatter

/// A refused call: OCCL_ERR_INVALID_ARGUMENT, the message naming op and dtype.
std::string check_refused(occl_status_t st, const Row& row, const char* what) {
  const std::string msg = occl_last_error();
  if (st == OCCL_ERR_INVALID_ARGUMENT && contains_ci(msg, occl_ref::op_name(row.op)) &&
      contains_ci(msg, occl_ref::dt_name(row.dtype))) {
    return {};
  }
  return cat(what, " of ", row.text, ": got ", occl_status_string(st), ": ", msg);
}

/// all_reduce and reduce_scatter of one row on this rank: "" or what was wrong.
std::string run_row(occl_comm_t comm, int rank, int nranks, const Row& row, uint64_t cs) {
  const Op op{row.op, row.op, 1.0};
  const size_t block = kCount / nranks;
  Buf in(row.dtype, kCount), all(row.dtype, kCount), part(row.dtype, block);
  occl_ref::fill_reduce_input(row.dtype, op, in.data(), kCount, 0, rank, cs);
  Tensor1D tin(in.data(), kCount, occl_ref::dt_dl(row.dtype));
  Tensor1D tall(all.data(), kCount, occl_ref::dt_dl(row.dtype));
  Tensor1D tpart(part.data(), static_cast<int64_t>(block), occl_ref::dt_dl(row.dtype));
  const occl_status_t ar = occl_all_reduce(&tin, &tall, row.op, comm, nullptr);
  const occl_status_t rs = occl_reduce_scatter(&tin, &tpart, row.op, comm, nullptr);
  if (!row.ok) {
    const std::string why = check_refused(ar, row, "all_reduce");
    return why.empty() ? check_refused(rs, row, "reduce_scatter") : why;
  }
  if (ar != OCCL_SUCCESS || rs != OCCL_SUCCESS) {
    return cat(row.text, ": all_reduce ", occl_status_string(ar), ", reduce_scatter ", occl_status_string(rs), ": ",
               occl_last_error());
  }
  std::string bad = occl_ref::check_reduce_output(row.dtype, op, all.data(), kCount, 0, nranks, cs);
  if (!bad.empty()) return cat("all_reduce of ", row.text, ": ", bad);
  bad = occl_ref::check_reduce_output(row.dtype, op, part.data(), block, rank * block, nranks, cs);
  return bad.empty() ? bad : cat("reduce_scatter of ", row.text, ": ", bad);
}

TEST(ReductionTable, EveryRowOnTwoRanks) {
  const std::vector<Row> rows = read_table();
  ASSERT_EQ(rows.size(), size_t{(OCCL_MINLOC + 1) * std::size(kEveryDT)}) << "one row per (op, dtype) pair";
  // reference.h states the same rules for the matrix tests; the two must agree.
  for (const Row& row : rows) EXPECT_EQ(row.ok, occl_ref::op_defined(row.op, row.dtype)) << row.text;
  auto opts = omniccl::testing::job_options(2, "shm", 30000, 60);
  auto res = omniccl::testing::run_ranks(opts, [&](occl_comm_t comm, int rank, int nranks) {
    int failed = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string bad = run_row(comm, rank, nranks, rows[i], 1000 + i);
      if (!bad.empty()) {
        std::fprintf(stderr, "rank %d: %s\n", rank, bad.c_str());
        ++failed;
      }
    }
    return failed == 0 ? 0 : 1;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

}  // namespace
