// Bad input is a clear error, never corruption (DESIGN.md sections 3, 4, 6).
//
// One test per class of bad input. Every check asserts the exact status code
// AND that occl_last_error() names the problem (a case-insensitive substring).
// Multi-rank checks run in forked ranks (tests/harness); a rank prints each
// failed check to stderr and exits non-zero, which fails the test.
//
// Contract points covered beyond the status codes:
//   - validation happens before anything is sent: after a bad-argument error
//     the communicator still works, even when only one rank made bad calls;
//   - init errors are found before any rendezvous (they return at once and
//     leave *comm NULL);
//   - a reduce never modifies non-root inputs (tree and direct, 4 ranks).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"
#include "omniccl/omniccl.h"

namespace {

using omniccl::testing::contains_ci;
using omniccl::testing::dl_bfloat16;
using omniccl::testing::dl_bool;
using omniccl::testing::dl_float;
using omniccl::testing::dl_int;
using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::seconds_since;
using omniccl::testing::Tensor1D;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

std::string join(std::initializer_list<std::string> v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "\"" : ", \"") + s + "\"";
  return out;
}

/// Collects failed checks in a rank; the rank function returns rc().
class Checks {
 public:
  explicit Checks(int rank) : rank_(rank) {}

  bool ok(bool cond, const char* file, int line, const std::string& text) {
    if (!cond) {
      std::fprintf(stderr, "rank %d: CHECK FAILED at %s:%d: %s\n", rank_, file, line, text.c_str());
      ++failures_;
    }
    return cond;
  }

  /// `got` must equal `want` and occl_last_error() must contain every needle.
  bool err(occl_status_t got, occl_status_t want, std::initializer_list<std::string> needles, const char* file,
           int line, const char* expr) {
    std::string msg = occl_last_error();
    bool good = got == want;
    if (want != OCCL_SUCCESS) {
      for (const auto& n : needles) good = good && contains_ci(msg, n);
    }
    if (!good) {
      std::fprintf(stderr,
                   "rank %d: CHECK FAILED at %s:%d: %s\n    returned %s, expected %s\n    message: \"%s\"\n"
                   "    expected the message to contain: %s\n",
                   rank_, file, line, expr, occl_status_string(got), occl_status_string(want), msg.c_str(),
                   join(needles).c_str());
      ++failures_;
    }
    return good;
  }

  int rc() const { return failures_ == 0 ? 0 : 1; }
  int failures() const { return failures_; }

 private:
  int rank_;
  int failures_ = 0;
};

#define CK_TRUE(ck, cond, text) (ck).ok((cond), __FILE__, __LINE__, (text))
#define CK_ERR(ck, call, want, ...) (ck).err((call), (want), {__VA_ARGS__}, __FILE__, __LINE__, #call)
#define CK_OK(ck, call) CK_ERR(ck, call, OCCL_SUCCESS)

/// The same check in the test process itself (gtest assertions).
void expect_err_here(occl_status_t got, occl_status_t want, std::initializer_list<std::string> needles,
                     const char* file, int line, const char* expr) {
  std::string msg = occl_last_error();
  bool good = got == want;
  for (const auto& n : needles) good = good && contains_ci(msg, n);
  if (!good) {
    ADD_FAILURE_AT(file, line) << expr << "\n    returned " << occl_status_string(got) << ", expected "
                               << occl_status_string(want) << "\n    message: \"" << msg
                               << "\"\n    expected the message to contain: " << join(needles);
  }
}
#define EXPECT_OCCL_ERR(call, want, ...) expect_err_here((call), (want), {__VA_ARGS__}, __FILE__, __LINE__, #call)

/// An N-d DLTensor with its own shape/stride storage.
struct TensorND {
  DLTensor t{};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  TensorND(void* data, DLDataType dtype, std::vector<int64_t> shp, std::vector<int64_t> str = {},
           uint64_t byte_offset = 0)
      : shape(std::move(shp)), strides(std::move(str)) {
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.empty() ? nullptr : shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = byte_offset;
  }
  TensorND(const TensorND&) = delete;
  TensorND& operator=(const TensorND&) = delete;
  const DLTensor* operator&() const { return &t; }
};

/// Runs a job and fails the test (with every rank's outcome) unless all ranks exit 0.
void expect_job_ok(const JobOptions& opts, const omniccl::testing::RankFn& fn) {
  JobResult res = run_ranks(opts, fn);
  EXPECT_TRUE(res.ok()) << "ranks reported failures (see their stderr above):" << res.summary();
}

JobOptions job(int nranks) {
  JobOptions o;
  o.nranks = nranks;
  o.job_timeout_s = 60;
  o.timeout_ms = 30000;
  return o;
}

/// An all_reduce SUM of float32 that every rank must complete with the right
/// result: proof that the communicator still works.
bool all_reduce_works(Checks& ck, occl_comm_t comm, int rank, int n, int64_t count = 37) {
  std::vector<float> s(count), r(count, -1.0f);
  for (int64_t i = 0; i < count; ++i) s[i] = static_cast<float>((rank + 1) * (i % 5 + 1));
  Tensor1D ts(s.data(), count, dl_float(32)), tr(r.data(), count, dl_float(32));
  if (!CK_OK(ck, occl_all_reduce(&ts, &tr, OCCL_SUM, comm, nullptr))) return false;
  const float tri = static_cast<float>(n * (n + 1) / 2);
  for (int64_t i = 0; i < count; ++i) {
    if (r[i] != tri * static_cast<float>(i % 5 + 1)) {
      return CK_TRUE(ck, false, "all_reduce result wrong at " + std::to_string(i) + ": " + std::to_string(r[i]));
    }
  }
  return true;
}

/// Reads the rendezvous given to ranks of a create_comm=false job.
std::string test_init() {
  const char* v = std::getenv("OCCL_TEST_INIT");
  return v != nullptr ? v : "";
}

occl_comm_t bogus_comm_value() { return reinterpret_cast<occl_comm_t>(static_cast<uintptr_t>(0x10)); }

template <typename T>
T* shared_block() {
  void* p = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) T();
}
template <typename T>
void free_shared_block(T* p) {
  p->~T();
  ::munmap(p, sizeof(T));
}

// ---------------------------------------------------------------------------
// NULL pointers
// ---------------------------------------------------------------------------

// Calls that need no communicator run here, in the test process.
TEST(ErrorsTest, NullPointersOutsideACommunicator) {
  EXPECT_OCCL_ERR(occl_comm_init(nullptr, "tcp://127.0.0.1:1", 0, 1, nullptr), OCCL_ERR_INVALID_ARGUMENT, "comm",
                  "NULL");
  occl_comm_t c = bogus_comm_value();
  EXPECT_OCCL_ERR(occl_comm_init(&c, nullptr, 0, 1, nullptr), OCCL_ERR_INVALID_ARGUMENT, "init_method", "NULL");
  EXPECT_EQ(c, nullptr) << "on failure *comm must be NULL";
  c = bogus_comm_value();
  EXPECT_OCCL_ERR(occl_comm_init_unique_id(&c, 2, nullptr, 0, nullptr), OCCL_ERR_INVALID_ARGUMENT, "id", "NULL");
  EXPECT_EQ(c, nullptr);
  occl_unique_id_t id{};
  EXPECT_OCCL_ERR(occl_comm_init_unique_id(nullptr, 2, &id, 0, nullptr), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  EXPECT_OCCL_ERR(occl_get_unique_id(nullptr), OCCL_ERR_INVALID_ARGUMENT, "id", "NULL");
  EXPECT_OCCL_ERR(occl_get_version(nullptr), OCCL_ERR_INVALID_ARGUMENT, "version", "NULL");

  int v = 0;
  EXPECT_OCCL_ERR(occl_comm_rank(nullptr, &v), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  EXPECT_OCCL_ERR(occl_comm_size(nullptr, &v), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  const char* name = nullptr;
  EXPECT_OCCL_ERR(occl_comm_transport(nullptr, &name), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  EXPECT_OCCL_ERR(occl_comm_set_timeout(nullptr, 1000), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  occl_red_op_t op;
  EXPECT_OCCL_ERR(occl_red_op_create_premul_sum(nullptr, 2.0, &op), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  occl_comm_t child = bogus_comm_value();
  EXPECT_OCCL_ERR(occl_comm_split(nullptr, 0, 0, nullptr, &child), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  EXPECT_EQ(child, nullptr);

  float buf[4] = {1, 2, 3, 4};
  Tensor1D t(buf, 4, dl_float(32));
  EXPECT_OCCL_ERR(occl_all_reduce(&t, &t, OCCL_SUM, nullptr, nullptr), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  EXPECT_OCCL_ERR(occl_broadcast(&t, 0, nullptr, nullptr), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  EXPECT_OCCL_ERR(occl_send(&t, 1, nullptr, nullptr), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  EXPECT_OCCL_ERR(occl_barrier(nullptr, nullptr), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  occl_work_t w = reinterpret_cast<occl_work_t>(static_cast<uintptr_t>(0x10));
  EXPECT_OCCL_ERR(occl_barrier(nullptr, &w), OCCL_ERR_INVALID_ARGUMENT, "comm", "NULL");
  EXPECT_EQ(w, nullptr) << "a failed call must not leave a work handle behind";
  EXPECT_OCCL_ERR(occl_work_wait(nullptr), OCCL_ERR_INVALID_ARGUMENT, "work", "NULL");
  EXPECT_OCCL_ERR(occl_work_test(nullptr), OCCL_ERR_INVALID_ARGUMENT, "work", "NULL");
  EXPECT_EQ(buf[0], 1.0f);

  // Destroy-style functions accept NULL.
  EXPECT_EQ(occl_comm_destroy(nullptr), OCCL_SUCCESS);
  EXPECT_EQ(occl_comm_abort(nullptr), OCCL_SUCCESS);
  EXPECT_EQ(occl_work_free(nullptr), OCCL_SUCCESS);
}

TEST(ErrorsTest, NullPointers) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    const int peer = 1 - rank;
    std::vector<float> a(8, 1.0f), b(8 * n, 0.0f);
    Tensor1D ta(a.data(), 8, dl_float(32)), tb(b.data(), 8 * n, dl_float(32)), tb8(b.data(), 8, dl_float(32));

    // NULL out-pointers.
    CK_ERR(ck, occl_comm_rank(comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "rank", "NULL");
    CK_ERR(ck, occl_comm_size(comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "size", "NULL");
    CK_ERR(ck, occl_comm_transport(comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "name", "NULL");
    CK_ERR(ck, occl_red_op_create_premul_sum(comm, 2.0, nullptr), OCCL_ERR_INVALID_ARGUMENT, "op", "NULL");
    CK_ERR(ck, occl_comm_split(comm, 0, 0, nullptr, nullptr), OCCL_ERR_INVALID_ARGUMENT, "newcomm", "NULL");

    // NULL tensors.
    CK_ERR(ck, occl_all_reduce(nullptr, &ta, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "sendbuf", "NULL");
    CK_ERR(ck, occl_all_reduce(&ta, nullptr, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "NULL");
    CK_ERR(ck, occl_broadcast(nullptr, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "tensor", "NULL");
    CK_ERR(ck, occl_send(nullptr, peer, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "tensor", "NULL");
    CK_ERR(ck, occl_recv(nullptr, peer, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "tensor", "NULL");
    CK_ERR(ck, occl_all_gather(nullptr, &tb, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "sendbuf", "NULL");
    CK_ERR(ck, occl_all_gather(&ta, nullptr, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "NULL");
    CK_ERR(ck, occl_reduce_scatter(nullptr, &ta, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "sendbuf",
           "NULL");
    CK_ERR(ck, occl_all_to_all(&tb8, nullptr, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "NULL");
    CK_ERR(ck, occl_reduce(nullptr, &ta, OCCL_SUM, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "sendbuf", "NULL");
    CK_ERR(ck, occl_gather(nullptr, &tb, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "sendbuf", "NULL");
    CK_ERR(ck, occl_scatter(&tb, nullptr, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "NULL");
    // A rank that is the root must pass the root-only buffer.
    CK_ERR(ck, occl_reduce(&ta, nullptr, OCCL_SUM, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "NULL",
           "root");
    CK_ERR(ck, occl_gather(&ta, nullptr, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "NULL", "root");
    CK_ERR(ck, occl_scatter(nullptr, &ta, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "sendbuf", "NULL", "root");
    // v-variants: NULL counts.
    CK_ERR(ck, occl_all_gatherv(&ta, &tb, nullptr, nullptr, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recv_counts",
           "NULL");
    int64_t counts[2] = {8, 8};
    CK_ERR(ck, occl_all_to_allv(&tb, nullptr, nullptr, &tb, counts, nullptr, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT,
           "send_counts", "NULL");
    CK_ERR(ck, occl_gatherv(&ta, &tb, nullptr, nullptr, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recv_counts",
           "NULL");
    // The async form of a failing call returns no handle.
    occl_work_t w = reinterpret_cast<occl_work_t>(static_cast<uintptr_t>(0x10));
    CK_ERR(ck, occl_all_reduce(nullptr, &ta, OCCL_SUM, comm, &w), OCCL_ERR_INVALID_ARGUMENT, "sendbuf", "NULL");
    CK_TRUE(ck, w == nullptr, "a failed async call left a work handle");

    // Buffers that are NULL-able on non-roots are accepted there.
    std::vector<float> g(8 * n, -1.0f);
    Tensor1D tg(g.data(), 8 * n, dl_float(32));
    std::fill(a.begin(), a.end(), static_cast<float>(rank + 1));
    CK_OK(ck, occl_gather(&ta, rank == 0 ? &tg : nullptr, 0, comm, nullptr));
    if (rank == 0) {
      for (int i = 0; i < 8 * n; ++i) CK_TRUE(ck, g[i] == static_cast<float>(i / 8 + 1), "gather result");
    }
    std::vector<float> red(8, -1.0f);
    Tensor1D tred(red.data(), 8, dl_float(32));
    CK_OK(ck, occl_reduce(&ta, rank == 0 ? &tred : nullptr, OCCL_SUM, 0, comm, nullptr));
    if (rank == 0) CK_TRUE(ck, red[3] == static_cast<float>(n * (n + 1) / 2), "reduce result");
    std::vector<float> part(8, -1.0f);
    Tensor1D tpart(part.data(), 8, dl_float(32));
    CK_OK(ck, occl_scatter(rank == 0 ? &tg : nullptr, &tpart, 0, comm, nullptr));
    CK_TRUE(ck, part[0] == static_cast<float>(rank + 1), "scatter result");

    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

// ---------------------------------------------------------------------------
// Root and peer out of range
// ---------------------------------------------------------------------------

TEST(ErrorsTest, RootOutOfRange) {
  expect_job_ok(job(4), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    std::vector<int32_t> a(6, rank), big(6 * n, 0), out(6, 0);
    Tensor1D ta(a.data(), 6, dl_int(32)), tbig(big.data(), 6 * n, dl_int(32)), tout(out.data(), 6, dl_int(32));
    std::vector<int64_t> counts(n, 6);
    for (int root : {n, -1, n + 7, INT_MIN, INT_MAX}) {
      const std::string r = std::to_string(root);
      CK_ERR(ck, occl_broadcast(&ta, root, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "root", r);
      CK_ERR(ck, occl_reduce(&ta, &tout, OCCL_SUM, root, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "root", r);
      CK_ERR(ck, occl_gather(&ta, &tbig, root, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "root", r);
      CK_ERR(ck, occl_scatter(&tbig, &ta, root, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "root", r);
      CK_ERR(ck, occl_gatherv(&ta, &tbig, counts.data(), nullptr, root, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT,
             "root", r);
      CK_ERR(ck, occl_scatterv(&tbig, counts.data(), nullptr, &ta, root, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT,
             "root", r);
      occl_work_t w = nullptr;
      CK_ERR(ck, occl_broadcast(&ta, root, comm, &w), OCCL_ERR_INVALID_ARGUMENT, "root", r);
      CK_TRUE(ck, w == nullptr, "failed async broadcast left a work handle");
    }
    CK_TRUE(ck, std::all_of(a.begin(), a.end(), [&](int32_t v) { return v == rank; }), "input was modified");
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

TEST(ErrorsTest, PeerOutOfRange) {
  expect_job_ok(job(3), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    int32_t v[4] = {0, 0, 0, 0};
    Tensor1D t(v, 4, dl_int(32));
    // -1 is OCCL_ANY_SOURCE for a receive, -2 OCCL_PROC_NULL; this rank
    // itself is a valid peer (p2p_test.cc).
    for (int peer : {n, -1, -3, n + 100}) {
      const std::string p = std::to_string(peer);
      CK_ERR(ck, occl_send(&t, peer, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "peer", p);
      if (peer != -1) CK_ERR(ck, occl_recv(&t, peer, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "peer", p);
    }
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

// ---------------------------------------------------------------------------
// Reduce op undefined for the dtype, unknown reduce ops
// ---------------------------------------------------------------------------

TEST(ErrorsTest, ReduceOpUndefinedForDtype) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    alignas(8) unsigned char buf[64] = {};
    alignas(8) unsigned char out[64] = {};
    struct Bad {
      DLDataType dt;
      const char* name;
    };
    const Bad floats[] = {
        {dl_float(16), "float16"}, {dl_bfloat16(), "bfloat16"}, {dl_float(32), "float32"}, {dl_float(64), "float64"}};
    const struct {
      occl_red_op_t op;
      const char* name;
    } bitwise[] = {{OCCL_BAND, "BAND"}, {OCCL_BOR, "BOR"}, {OCCL_BXOR, "BXOR"}};
    for (const auto& f : floats) {
      Tensor1D t(buf, 4, f.dt), o(out, 4, f.dt), o2(out, 2, f.dt);
      for (const auto& b : bitwise) {
        CK_ERR(ck, occl_all_reduce(&t, &o, b.op, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, b.name, f.name);
        CK_ERR(ck, occl_reduce(&t, &o, b.op, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, b.name, f.name);
        CK_ERR(ck, occl_reduce_scatter(&t, &o2, b.op, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, b.name, f.name);
      }
    }
    // Averaging or pre-multiplying truth values is undefined.
    Tensor1D tb(buf, 4, dl_bool()), ob(out, 4, dl_bool());
    CK_ERR(ck, occl_all_reduce(&tb, &ob, OCCL_AVG, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "AVG", "bool");
    CK_ERR(ck, occl_reduce(&tb, &ob, OCCL_AVG, 1, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "AVG", "bool");
    CK_ERR(ck, occl_all_reduce(&tb, &ob, OCCL_PREMUL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "PREMUL_SUM",
           "bool");
    // PREMUL_SUM with a fractional scalar on an integer dtype.
    occl_red_op_t half_op;
    CK_OK(ck, occl_red_op_create_premul_sum(comm, 0.5, &half_op));
    Tensor1D ti(buf, 4, dl_int(32)), oi(out, 4, dl_int(32));
    CK_ERR(ck, occl_all_reduce(&ti, &oi, half_op, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "PREMUL_SUM", "int32",
           "integer");
    CK_OK(ck, occl_red_op_destroy(comm, half_op));

    // The defined pairs next to them still work: BXOR on int32 and bool.
    int32_t x[3] = {rank + 1, 3 * (rank + 1), -1}, y[3] = {0, 0, 0};
    Tensor1D tx(x, 3, dl_int(32)), ty(y, 3, dl_int(32));
    CK_OK(ck, occl_all_reduce(&tx, &ty, OCCL_BXOR, comm, nullptr));
    CK_TRUE(ck, y[0] == (1 ^ 2) && y[1] == (3 ^ 6) && y[2] == 0, "BXOR int32 result");
    uint8_t bx[2] = {1, static_cast<uint8_t>(rank == 0)}, by[2] = {7, 7};
    Tensor1D tbx(bx, 2, dl_bool()), tby(by, 2, dl_bool());
    CK_OK(ck, occl_all_reduce(&tbx, &tby, OCCL_BXOR, comm, nullptr));
    CK_TRUE(ck, by[0] == 0 && by[1] == 1, "BXOR bool result");
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

TEST(ErrorsTest, UnknownReduceOp) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    float a[4] = {1, 2, 3, 4}, b[4] = {0, 0, 0, 0}, h[2] = {0, 0};
    Tensor1D ta(a, 4, dl_float(32)), tb(b, 4, dl_float(32)), th(h, 2, dl_float(32));
    for (int op : {42, 63, -1, OCCL_RED_OP_CUSTOM_BASE, 1000}) {
      const auto o = static_cast<occl_red_op_t>(op);
      const std::string s = std::to_string(op);
      CK_ERR(ck, occl_all_reduce(&ta, &tb, o, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "reduce op", s);
      CK_ERR(ck, occl_reduce(&ta, &tb, o, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "reduce op", s);
      CK_ERR(ck, occl_reduce_scatter(&ta, &th, o, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "reduce op", s);
    }
    // A PREMUL_SUM op that was destroyed is unknown again; so is one destroyed twice.
    occl_red_op_t op;
    CK_OK(ck, occl_red_op_create_premul_sum(comm, 2.0, &op));
    CK_TRUE(ck, static_cast<int>(op) >= OCCL_RED_OP_CUSTOM_BASE, "custom op below OCCL_RED_OP_CUSTOM_BASE");
    CK_OK(ck, occl_red_op_destroy(comm, op));
    CK_ERR(ck, occl_all_reduce(&ta, &tb, op, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "reduce op",
           std::to_string(static_cast<int>(op)));
    CK_ERR(ck, occl_red_op_destroy(comm, op), OCCL_ERR_INVALID_ARGUMENT, std::to_string(static_cast<int>(op)));
    CK_ERR(ck, occl_red_op_destroy(comm, OCCL_SUM), OCCL_ERR_INVALID_ARGUMENT, "reduce op");
    CK_TRUE(ck, b[0] == 0 && b[3] == 0, "recvbuf written by a failing call");
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

// ---------------------------------------------------------------------------
// Size relations between sendbuf and recvbuf
// ---------------------------------------------------------------------------

TEST(ErrorsTest, SizeRelations) {
  expect_job_ok(job(4), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    std::vector<float> s(64, 1.0f), r(64, 0.0f);
    auto T = [&](std::vector<float>& v, int64_t count) { return Tensor1D(v.data(), count, dl_float(32)); };
    {  // all_reduce: recv count != send count
      Tensor1D a = T(s, 8), b = T(r, 7), c = T(r, 9);
      CK_ERR(ck, occl_all_reduce(&a, &b, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "7", "8");
      CK_ERR(ck, occl_all_reduce(&a, &c, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "9", "8");
    }
    {  // all_gather: recv != n * send
      Tensor1D a = T(s, 3), b = T(r, 3 * n - 1), c = T(r, 3), d = T(r, 3 * n + 1);
      for (const DLTensor* bad : {&b, &c, &d}) {
        CK_ERR(ck, occl_all_gather(&a, bad, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf",
               std::to_string(3 * n));
      }
    }
    {  // reduce_scatter: send != n * recv
      Tensor1D a = T(s, 3 * n - 1), b = T(r, 3), c = T(s, 3);
      CK_ERR(ck, occl_reduce_scatter(&a, &b, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "sendbuf",
             std::to_string(3 * n));
      CK_ERR(ck, occl_reduce_scatter(&c, &b, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "sendbuf",
             std::to_string(3 * n));
    }
    {  // all_to_all: count not divisible by n; recv != send
      Tensor1D a = T(s, 10), b = T(r, 10), c = T(s, 12), d = T(r, 8);
      CK_ERR(ck, occl_all_to_all(&a, &b, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "10", "multiple");
      CK_ERR(ck, occl_all_to_all(&c, &d, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "12");
    }
    {  // rooted ops, checked on the root
      Tensor1D a = T(s, 5), small = T(r, 5 * n - 1), wrong = T(r, 4);
      CK_ERR(ck, occl_gather(&a, &small, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf",
             std::to_string(5 * n));
      CK_ERR(ck, occl_scatter(&small, &a, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "sendbuf",
             std::to_string(5 * n));
      CK_ERR(ck, occl_reduce(&a, &wrong, OCCL_SUM, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "recvbuf", "5");
    }
    CK_TRUE(ck, std::all_of(r.begin(), r.end(), [](float v) { return v == 0.0f; }),
            "recvbuf written by a failing call");
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

TEST(ErrorsTest, DtypeDiffersBetweenSendbufAndRecvbuf) {
  expect_job_ok(job(3), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    alignas(8) unsigned char s[512] = {}, r[512] = {};
    const DLDataType f32 = dl_float(32), i32 = dl_int(32);
    Tensor1D f6(s, 6, f32), i6(r, 6, i32), u6(r, 6, omniccl::testing::dl_uint(32));
    Tensor1D f6n(s, 6 * n, f32), i6n(r, 6 * n, i32);
    Tensor1D h12(s, 12, dl_float(16)), bf12(r, 12, dl_bfloat16());
    CK_ERR(ck, occl_all_reduce(&f6, &i6, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float32", "int32");
    CK_ERR(ck, occl_all_reduce(&f6, &u6, OCCL_MAX, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float32", "uint32");
    // Same element size, different type.
    CK_ERR(ck, occl_all_reduce(&h12, &bf12, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float16", "bfloat16");
    CK_ERR(ck, occl_all_gather(&f6, &i6n, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float32", "int32");
    CK_ERR(ck, occl_reduce_scatter(&f6n, &i6, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float32", "int32");
    CK_ERR(ck, occl_all_to_all(&f6, &i6, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float32", "int32");
    CK_ERR(ck, occl_reduce(&f6, &i6, OCCL_SUM, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float32", "int32");
    CK_ERR(ck, occl_gather(&f6, &i6n, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float32", "int32");
    CK_ERR(ck, occl_scatter(&f6n, &i6, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float32", "int32");
    std::vector<int64_t> counts(n, 6);
    CK_ERR(ck, occl_all_gatherv(&f6, &i6n, counts.data(), nullptr, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "float32",
           "int32");
    std::vector<int64_t> two(n, 2);
    CK_ERR(ck, occl_all_to_allv(&f6, two.data(), nullptr, &i6, two.data(), nullptr, comm, nullptr),
           OCCL_ERR_INVALID_ARGUMENT, "float32", "int32");
    CK_TRUE(ck, std::all_of(std::begin(r), std::end(r), [](unsigned char c) { return c == 0; }),
            "recvbuf written by a failing call");
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

TEST(ErrorsTest, OverlappingBuffers) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    std::vector<float> buf(64, 1.0f);
    Tensor1D a(buf.data(), 8, dl_float(32)), shifted(buf.data() + 1, 8, dl_float(32));
    CK_ERR(ck, occl_all_reduce(&a, &shifted, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "overlap");
    // all_gather in place is only allowed at recvbuf + rank * count.
    Tensor1D gathered(buf.data(), 4 * n, dl_float(32));
    Tensor1D wrong_slot(buf.data() + 4 * (1 - rank), 4, dl_float(32));
    CK_ERR(ck, occl_all_gather(&wrong_slot, &gathered, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "overlap");
    // The right in-place layout works.
    for (int i = 0; i < 4; ++i) buf[4 * rank + i] = static_cast<float>(10 * rank + i);
    Tensor1D my_slot(buf.data() + 4 * rank, 4, dl_float(32));
    CK_OK(ck, occl_all_gather(&my_slot, &gathered, comm, nullptr));
    for (int i = 0; i < 4 * n; ++i) {
      CK_TRUE(ck, buf[i] == static_cast<float>(10 * (i / 4) + i % 4), "in-place all_gather result");
    }
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

TEST(ErrorsTest, VectorCountsInvalid) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    std::vector<int32_t> s(16, rank), r(16, -7);
    Tensor1D s4(s.data(), 4, dl_int(32)), r8(r.data(), 8, dl_int(32)), s8(s.data(), 8, dl_int(32));
    int64_t neg[2] = {4, -4}, fits[2] = {4, 4}, too_far[2] = {0, 6}, big[2] = {4, 5};
    CK_ERR(ck, occl_all_gatherv(&s4, &r8, neg, nullptr, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "negative");
    CK_ERR(ck, occl_all_gatherv(&s4, &r8, fits, too_far, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "exceeds");
    int64_t mine_wrong[2] = {3, 3};
    CK_ERR(ck, occl_all_gatherv(&s4, &r8, mine_wrong, nullptr, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT,
           "recv_counts");
    CK_ERR(ck, occl_all_gatherv(&s4, &r8, big, nullptr, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "exceeds");
    int64_t sc[2] = {4, 4}, rc[2] = {4, 4};
    sc[rank] = 3;
    CK_ERR(ck, occl_all_to_allv(&s8, sc, nullptr, &r8, rc, nullptr, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT,
           "send_counts", "recv_counts");
    CK_ERR(ck, occl_gatherv(&s4, &r8, big, nullptr, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "exceeds");
    CK_ERR(ck, occl_scatterv(&s8, neg, nullptr, &r8, rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "negative");
    CK_TRUE(ck, std::all_of(r.begin(), r.end(), [](int32_t v) { return v == -7; }), "recvbuf written");
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

// send/recv that do not fit each other (a larger message than the receive
// buffer, another dtype): p2p_test.cc. Such a receive fails alone and the
// communicator stays usable, as MPI's MPI_ERR_TRUNCATE.

// ---------------------------------------------------------------------------
// Tensor layout: contiguity, extent-1 strides, byte_offset, malformed tensors
// ---------------------------------------------------------------------------

TEST(ErrorsTest, NonContiguousTensor) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    std::vector<float> a(12, 1.0f), b(12, 0.0f);
    const DLDataType f32 = dl_float(32);
    TensorND transposed_a(a.data(), f32, {4, 3}, {1, 4});  // a transposed 3x4 matrix
    TensorND transposed_b(b.data(), f32, {4, 3}, {1, 4});
    TensorND compact_b(b.data(), f32, {4, 3}, {3, 1});
    TensorND strided(a.data(), f32, {6}, {2});  // every other element
    TensorND padded_rows(a.data(), f32, {2, 5}, {6, 1});
    CK_ERR(ck, occl_all_reduce(&transposed_a, &compact_b, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT,
           "sendbuf", "contiguous");
    CK_ERR(ck, occl_all_reduce(&compact_b, &transposed_b, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT,
           "recvbuf", "contiguous");
    CK_ERR(ck, occl_broadcast(&strided, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "contiguous");
    CK_ERR(ck, occl_broadcast(&padded_rows, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "contiguous");
    CK_ERR(ck, occl_send(&transposed_a, 1 - rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "contiguous");
    CK_TRUE(ck, std::all_of(b.begin(), b.end(), [](float v) { return v == 0.0f; }), "recvbuf written");
    // Explicit compact row-major strides are fine.
    TensorND compact_a(a.data(), f32, {4, 3}, {3, 1});
    CK_OK(ck, occl_all_reduce(&compact_a, &compact_b, OCCL_SUM, comm, nullptr));
    CK_TRUE(ck, b[11] == static_cast<float>(n), "all_reduce over explicit compact strides");
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

TEST(ErrorsTest, ExtentOneDimsAcceptAnyStride) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    const DLDataType i32 = dl_int(32);
    std::vector<int32_t> a(6), b(6, -1);
    for (int i = 0; i < 6; ++i) a[i] = (rank + 1) * (i + 1);
    TensorND row(a.data(), i32, {1, 6}, {99, 1});
    TensorND col(b.data(), i32, {6, 1}, {1, 7});
    CK_OK(ck, occl_all_reduce(&row, &col, OCCL_SUM, comm, nullptr));
    for (int i = 0; i < 6; ++i) CK_TRUE(ck, b[i] == 3 * (i + 1), "extent-1 all_reduce result");
    TensorND odd(a.data(), i32, {1, 1, 6, 1}, {0, -5, 1, 12345});
    CK_OK(ck, occl_broadcast(&odd, 0, comm, nullptr));
    for (int i = 0; i < 6; ++i) CK_TRUE(ck, a[i] == i + 1, "extent-1 broadcast result");
    // A 0-d tensor (scalar) is one element.
    int32_t scalar = rank + 5, sum = 0;
    TensorND s0(&scalar, i32, {}), r0(&sum, i32, {});
    CK_OK(ck, occl_all_reduce(&s0, &r0, OCCL_SUM, comm, nullptr));
    CK_TRUE(ck, sum == 11, "0-d all_reduce: " + std::to_string(sum));
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

TEST(ErrorsTest, ByteOffsetHonoured) {
  expect_job_ok(job(3), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    const float sentinel = -123.0f;
    std::vector<float> send(16, sentinel), recv(16, sentinel);
    for (int i = 0; i < 8; ++i) send[3 + i] = static_cast<float>((rank + 1) * (i + 1));
    // sendbuf elements start at data + 12 bytes, recvbuf at data + 20 bytes.
    TensorND ts(send.data(), dl_float(32), {8}, {}, 3 * sizeof(float));
    TensorND tr(recv.data(), dl_float(32), {2, 4}, {4, 1}, 5 * sizeof(float));
    CK_OK(ck, occl_all_reduce(&ts, &tr, OCCL_SUM, comm, nullptr));
    const float tri = static_cast<float>(n * (n + 1) / 2);
    for (int i = 0; i < 16; ++i) {
      float want = (i >= 5 && i < 13) ? tri * static_cast<float>(i - 4) : sentinel;
      CK_TRUE(ck, recv[i] == want, "recv[" + std::to_string(i) + "] = " + std::to_string(recv[i]));
    }
    for (int i = 0; i < 16; ++i) {
      float want = (i >= 3 && i < 11) ? static_cast<float>((rank + 1) * (i - 2)) : sentinel;
      CK_TRUE(ck, send[i] == want, "sendbuf modified at " + std::to_string(i));
    }
    // Broadcast in place through an offset view.
    std::vector<int64_t> bc(10, -1);
    if (rank == 1) {
      for (int i = 0; i < 4; ++i) bc[6 + i] = 100 + i;
    }
    TensorND tb(bc.data(), dl_int(64), {4}, {}, 6 * sizeof(int64_t));
    CK_OK(ck, occl_broadcast(&tb, 1, comm, nullptr));
    for (int i = 0; i < 10; ++i) {
      CK_TRUE(ck, bc[i] == (i >= 6 ? 100 + (i - 6) : -1), "broadcast through byte_offset at " + std::to_string(i));
    }
    return ck.rc();
  });
}

TEST(ErrorsTest, MalformedTensor) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    float buf[8] = {};
    TensorND neg_shape(buf, dl_float(32), {2, -4});
    CK_ERR(ck, occl_broadcast(&neg_shape, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "shape", "negative");
    TensorND no_shape(buf, dl_float(32), {4});
    no_shape.t.shape = nullptr;
    CK_ERR(ck, occl_broadcast(&no_shape, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "shape", "NULL");
    TensorND neg_ndim(buf, dl_float(32), {4});
    neg_ndim.t.ndim = -1;
    CK_ERR(ck, occl_broadcast(&neg_ndim, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "ndim");
    TensorND no_data(nullptr, dl_float(32), {4});
    CK_ERR(ck, occl_broadcast(&no_data, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "data", "NULL");
    // Zero elements with NULL data are fine.
    TensorND empty(nullptr, dl_float(32), {0});
    CK_OK(ck, occl_all_reduce(&empty, &empty, OCCL_SUM, comm, nullptr));
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

// ---------------------------------------------------------------------------
// Devices and dtypes this build does not handle
// ---------------------------------------------------------------------------

TEST(ErrorsTest, NonCpuDevice) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    float host[8] = {};
    float other[8] = {};
    Tensor1D cpu(host, 8, dl_float(32));
    Tensor1D dev(other, 8, dl_float(32));
    dev.get()->device = {kDLCUDA, 0};
    CK_ERR(ck, occl_all_reduce(&dev, &cpu, OCCL_SUM, comm, nullptr), OCCL_ERR_UNSUPPORTED, "sendbuf", "cuda");
    CK_ERR(ck, occl_all_reduce(&cpu, &dev, OCCL_SUM, comm, nullptr), OCCL_ERR_UNSUPPORTED, "recvbuf", "cuda");
    CK_ERR(ck, occl_broadcast(&dev, 0, comm, nullptr), OCCL_ERR_UNSUPPORTED, "cuda");
    CK_ERR(ck, occl_send(&dev, 1 - rank, comm, nullptr), OCCL_ERR_UNSUPPORTED, "cuda");
    dev.get()->device = {kDLCUDA, 3};
    CK_ERR(ck, occl_broadcast(&dev, 0, comm, nullptr), OCCL_ERR_UNSUPPORTED, "cuda:3");
    dev.get()->device = {kDLROCM, 0};
    CK_ERR(ck, occl_broadcast(&dev, 0, comm, nullptr), OCCL_ERR_UNSUPPORTED, "rocm");
    dev.get()->device = {kDLCUDAManaged, 1};
    CK_ERR(ck, occl_broadcast(&dev, 0, comm, nullptr), OCCL_ERR_UNSUPPORTED, "cuda_managed");
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

// A CUDA tensor's error says why it cannot be used. Whether this machine has
// an NVIDIA driver is read from /dev/nvidiactl, not asked of the library.
TEST(ErrorsTest, CudaTensorSaysWhy) {
#ifdef OMNICCL_TEST_CUDA_BUILT
  constexpr bool kBuilt = true;
#else
  constexpr bool kBuilt = false;
#endif
  const bool driver = std::filesystem::exists("/dev/nvidiactl");
  expect_job_ok(job(1), [driver](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    float a[4] = {1, 2, 3, 4}, b[4] = {};
    Tensor1D cpu(b, 4, dl_float(32));
    Tensor1D dev(a, 4, dl_float(32));
    dev.get()->device = {kDLCUDA, 0};
    if (!kBuilt) {
      CK_ERR(ck, occl_all_reduce(&dev, &cpu, OCCL_SUM, comm, nullptr), OCCL_ERR_UNSUPPORTED, "sendbuf", "cuda:0",
             "no CUDA support");
    } else if (!driver) {
      CK_ERR(ck, occl_all_reduce(&dev, &cpu, OCCL_SUM, comm, nullptr), OCCL_ERR_UNSUPPORTED, "sendbuf", "cuda:0",
             "no CUDA driver/GPU found", "cudaGetDeviceCount");
      // The probe's answer is kept: the second call says the same.
      CK_ERR(ck, occl_broadcast(&dev, 0, comm, nullptr), OCCL_ERR_UNSUPPORTED, "no CUDA driver/GPU found");
      dev.get()->device = {kDLCUDAManaged, 2};
      CK_ERR(ck, occl_broadcast(&dev, 0, comm, nullptr), OCCL_ERR_UNSUPPORTED, "cuda_managed:2",
             "no CUDA driver/GPU found");
    } else {
      // With a GPU, CUDA tensors are usable: mixing one with a CPU tensor is the error.
      CK_ERR(ck, occl_all_reduce(&dev, &cpu, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "different devices");
    }
    // CPU collectives are unaffected, before and after CUDA was probed.
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

TEST(ErrorsTest, UnsupportedDtype) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    alignas(16) unsigned char buf[256] = {};
    const DLDataType complex32 = {kDLComplex, 32, 1};  // two float16: not carried
    const DLDataType float4x = {kDLFloat, 32, 4};
    const DLDataType int24 = {kDLInt, 24, 1};
    const DLDataType opaque = {kDLOpaqueHandle, 64, 1};
    Tensor1D c(buf, 4, complex32), v(buf, 4, float4x), i24(buf, 4, int24), op(buf, 4, opaque);
    Tensor1D ok(buf, 4, dl_float(32));
    const DLDataType complex16 = {kDLComplex, 16, 1};
    const DLDataType e4m3fnuz = {kDLFloat8_e4m3fnuz, 8, 1};  // a float8 kind OmniCCL does not carry
    Tensor1D c16(buf, 4, complex16), f8(buf, 4, e4m3fnuz);
    // The dtype is named as users know it, not as "code 5 with 16 bits".
    CK_ERR(ck, occl_all_reduce(&c, &c, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "dtype complex32");
    CK_ERR(ck, occl_broadcast(&c, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "dtype complex32");
    CK_ERR(ck, occl_broadcast(&c16, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "dtype complex16");
    CK_ERR(ck, occl_broadcast(&f8, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "dtype float8_e4m3fnuz");
    CK_ERR(ck, occl_all_reduce(&v, &v, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "lanes", "4");
    CK_ERR(ck, occl_all_gather(&ok, &v, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "lanes");
    CK_ERR(ck, occl_broadcast(&i24, 0, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "dtype int24");
    CK_ERR(ck, occl_send(&op, 1 - rank, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "dtype opaque_handle64");
    all_reduce_works(ck, comm, rank, n);
    return ck.rc();
  });
}

// ---------------------------------------------------------------------------
// Communicator creation
// ---------------------------------------------------------------------------

JobOptions init_job(int nranks) {
  JobOptions o = job(nranks);
  o.create_comm = false;
  return o;
}

/// occl_comm_init that must fail at once (before any rendezvous) with
/// `want` naming every needle, leaving *comm NULL.
#define CK_INIT_FAILS(ck, method, rank, size, cfg, want, ...)                              \
  do {                                                                                     \
    occl_comm_t c_ = bogus_comm_value();                                                   \
    const auto t_ = Clock::now();                                                          \
    CK_ERR(ck, occl_comm_init(&c_, (method), (rank), (size), (cfg)), (want), __VA_ARGS__); \
    CK_TRUE(ck, c_ == nullptr, "*comm is not NULL after a failed init");                   \
    CK_TRUE(ck, seconds_since(t_) < 1.0,                                                   \
            "a bad-argument init took " + std::to_string(seconds_since(t_)) +              \
                " s (validation must come before the rendezvous)");                        \
    if (c_ != nullptr && c_ != bogus_comm_value()) occl_comm_destroy(c_);                  \
  } while (0)

TEST(ErrorsTest, InitBadRankOrWorldSize) {
  expect_job_ok(init_job(1), [](occl_comm_t, int rank, int) {
    Checks ck(rank);
    const std::string init = test_init();
    const char* m = init.c_str();
    CK_INIT_FAILS(ck, m, 1, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "rank 1", "world size 1");
    CK_INIT_FAILS(ck, m, 5, 2, nullptr, OCCL_ERR_INVALID_ARGUMENT, "rank 5", "world size 2");
    CK_INIT_FAILS(ck, m, -2, 2, nullptr, OCCL_ERR_INVALID_ARGUMENT, "rank -2");
    CK_INIT_FAILS(ck, m, INT_MIN, 2, nullptr, OCCL_ERR_INVALID_ARGUMENT, "rank");
    CK_INIT_FAILS(ck, m, 0, 0, nullptr, OCCL_ERR_INVALID_ARGUMENT, "world size 0");
    CK_INIT_FAILS(ck, m, 0, -3, nullptr, OCCL_ERR_INVALID_ARGUMENT, "world size -3");
    // Taken from the environment.
    ::setenv("RANK", "3", 1);
    ::setenv("WORLD_SIZE", "2", 1);
    CK_INIT_FAILS(ck, m, OCCL_FROM_ENV, OCCL_FROM_ENV, nullptr, OCCL_ERR_INVALID_ARGUMENT, "rank 3", "RANK",
                  "world size 2");
    ::setenv("RANK", "zero", 1);
    CK_INIT_FAILS(ck, m, OCCL_FROM_ENV, 2, nullptr, OCCL_ERR_INVALID_ARGUMENT, "RANK", "zero");
    ::unsetenv("RANK");
    ::unsetenv("WORLD_SIZE");
    CK_INIT_FAILS(ck, m, OCCL_FROM_ENV, 2, nullptr, OCCL_ERR_INVALID_ARGUMENT, "RANK");
    // The unique-id form.
    occl_unique_id_t id{};
    occl_comm_t c = bogus_comm_value();
    CK_ERR(ck, occl_comm_init_unique_id(&c, 0, &id, 0, nullptr), OCCL_ERR_INVALID_ARGUMENT, "world");
    CK_TRUE(ck, c == nullptr, "*comm not NULL");
    CK_ERR(ck, occl_comm_init_unique_id(&c, 2, &id, 2, nullptr), OCCL_ERR_INVALID_ARGUMENT, "rank 2");
    CK_ERR(ck, occl_comm_init_unique_id(&c, 2, &id, -1, nullptr), OCCL_ERR_INVALID_ARGUMENT, "rank -1");
    CK_ERR(ck, occl_comm_init_unique_id(&c, 1, &id, 0, nullptr), OCCL_ERR_INVALID_ARGUMENT, "unique id");
    return ck.rc();
  });
}

TEST(ErrorsTest, InitBadMethod) {
  expect_job_ok(init_job(1), [](occl_comm_t, int rank, int) {
    Checks ck(rank);
    CK_INIT_FAILS(ck, "foo://x", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "unknown init method", "foo://x");
    CK_INIT_FAILS(ck, "tcp://nohostport", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "tcp://nohostport", "port");
    CK_INIT_FAILS(ck, "tcp://:29500", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "tcp://:29500", "host");
    CK_INIT_FAILS(ck, "tcp://127.0.0.1:99999", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "99999", "port");
    CK_INIT_FAILS(ck, "tcp://127.0.0.1:http", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "http", "port");
    CK_INIT_FAILS(ck, "tcp://::1:29500", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "IPv6");
    CK_INIT_FAILS(ck, "file://relative/dir", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "file://relative/dir");
    CK_INIT_FAILS(ck, "", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "init method");
    CK_INIT_FAILS(ck, "ENV://", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "ENV://");
    return ck.rc();
  });
}

TEST(ErrorsTest, InitEnvWithoutMasterAddr) {
  expect_job_ok(init_job(1), [](occl_comm_t, int rank, int) {
    Checks ck(rank);
    ::unsetenv("MASTER_ADDR");
    ::unsetenv("MASTER_PORT");
    CK_INIT_FAILS(ck, "env://", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "MASTER_ADDR");
    CK_INIT_FAILS(ck, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, nullptr, OCCL_ERR_INVALID_ARGUMENT, "MASTER_ADDR");
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    CK_INIT_FAILS(ck, "env://", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "MASTER_PORT");
    ::setenv("MASTER_PORT", "not-a-port", 1);
    CK_INIT_FAILS(ck, "env://", 0, 1, nullptr, OCCL_ERR_INVALID_ARGUMENT, "MASTER_PORT", "not-a-port");
    return ck.rc();
  });
}

/// Every rank's init must fail at once with INVALID_ARGUMENT naming `needles`
/// (the environment of the job holds the bad setting).
void expect_env_setting_rejected(const std::map<std::string, std::string>& env,
                                 std::initializer_list<std::string> needles) {
  JobOptions o = init_job(2);
  o.env = env;
  const std::vector<std::string> nd(needles);
  expect_job_ok(o, [&](occl_comm_t, int rank, int n) {
    Checks ck(rank);
    const std::string init = test_init();
    occl_config_t cfg = OCCL_CONFIG_INIT;  // fields left NULL/undefined: the environment applies
    if (env.count("OMNICCL_TIMEOUT") == 0) cfg.timeout_ms = 5000;
    for (const occl_config_t* c :
         {static_cast<const occl_config_t*>(nullptr), static_cast<const occl_config_t*>(&cfg)}) {
      occl_comm_t comm = bogus_comm_value();
      const auto t0 = Clock::now();
      occl_status_t st = occl_comm_init(&comm, init.c_str(), rank, n, c);
      std::string msg = occl_last_error();
      CK_TRUE(ck, st == OCCL_ERR_INVALID_ARGUMENT, std::string("init returned ") + occl_status_string(st) + ": " + msg);
      for (const auto& needle : nd) CK_TRUE(ck, contains_ci(msg, needle), "message '" + msg + "' lacks " + needle);
      CK_TRUE(ck, comm == nullptr, "*comm not NULL");
      CK_TRUE(ck, seconds_since(t0) < 1.0, "init took " + std::to_string(seconds_since(t0)) + " s");
      if (st == OCCL_SUCCESS) occl_comm_destroy(comm);
    }
    return ck.rc();
  });
}

TEST(ErrorsTest, InitBogusTransportFromEnv) {
  expect_env_setting_rejected({{"OMNICCL_TRANSPORT", "bogus"}}, {"transport", "bogus"});
}

TEST(ErrorsTest, InitBogusAlgoFromEnv) {
  expect_env_setting_rejected({{"OMNICCL_ALGO", "bogus"}}, {"OMNICCL_ALGO", "bogus"});
}

TEST(ErrorsTest, InitAlgoACollectiveDoesNotOfferFromEnv) {
  expect_env_setting_rejected({{"OMNICCL_ALGO", "broadcast=bruck"}}, {"OMNICCL_ALGO", "broadcast", "bruck"});
}

TEST(ErrorsTest, InitBogusTimeoutFromEnv) {
  expect_env_setting_rejected({{"OMNICCL_TIMEOUT", "soon"}}, {"OMNICCL_TIMEOUT", "soon"});
}

TEST(ErrorsTest, InitBadConfigFields) {
  expect_job_ok(init_job(2), [](occl_comm_t, int rank, int n) {
    Checks ck(rank);
    const std::string init = test_init();
    const char* m = init.c_str();
    auto cfg_with = [](const char* transport, const char* algorithm, int64_t timeout_ms) {
      occl_config_t c = OCCL_CONFIG_INIT;
      c.transport = transport;
      c.algorithm = algorithm;
      c.timeout_ms = timeout_ms;
      return c;
    };
    occl_config_t c1 = cfg_with("bogus", nullptr, 5000);
    CK_INIT_FAILS(ck, m, rank, n, &c1, OCCL_ERR_INVALID_ARGUMENT, "transport", "bogus");
    occl_config_t c2 = cfg_with(nullptr, "bogus", 5000);
    CK_INIT_FAILS(ck, m, rank, n, &c2, OCCL_ERR_INVALID_ARGUMENT, "algorithm", "bogus");
    occl_config_t c3 = cfg_with(nullptr, "broadcast=bruck", 5000);
    CK_INIT_FAILS(ck, m, rank, n, &c3, OCCL_ERR_INVALID_ARGUMENT, "broadcast", "bruck");
    occl_config_t c4 = cfg_with(nullptr, "all_reduce=ring,all_to_all=tree", 5000);
    CK_INIT_FAILS(ck, m, rank, n, &c4, OCCL_ERR_INVALID_ARGUMENT, "all_to_all", "tree");
    occl_config_t c5 = cfg_with(nullptr, "nosuchop=ring", 5000);
    CK_INIT_FAILS(ck, m, rank, n, &c5, OCCL_ERR_INVALID_ARGUMENT, "nosuchop");
    occl_config_t c6 = cfg_with(nullptr, nullptr, 0);
    CK_INIT_FAILS(ck, m, rank, n, &c6, OCCL_ERR_INVALID_ARGUMENT, "timeout");
    occl_config_t c7 = cfg_with(nullptr, nullptr, -5);
    CK_INIT_FAILS(ck, m, rank, n, &c7, OCCL_ERR_INVALID_ARGUMENT, "timeout", "-5");
    // The failed attempts left nothing behind: the same rendezvous still works.
    occl_config_t good = cfg_with("auto", "ring", 20000);
    occl_comm_t comm = nullptr;
    CK_OK(ck, occl_comm_init(&comm, m, rank, n, &good));
    if (comm != nullptr) {
      all_reduce_works(ck, comm, rank, n, 5000);
      CK_ERR(ck, occl_comm_set_timeout(comm, 0), OCCL_ERR_INVALID_ARGUMENT, "timeout");
      CK_ERR(ck, occl_comm_set_timeout(comm, -1), OCCL_ERR_INVALID_ARGUMENT, "timeout");
      CK_OK(ck, occl_comm_destroy(comm));
    }
    return ck.rc();
  });
}

TEST(ErrorsTest, BadConfigStruct) {
  expect_job_ok(init_job(2), [](occl_comm_t, int rank, int n) {
    Checks ck(rank);
    const std::string init = test_init();
    const char* m = init.c_str();
    occl_config_t bad_magic = OCCL_CONFIG_INIT;
    bad_magic.magic = 0xdeadbeefu;
    bad_magic.timeout_ms = 5000;
    CK_INIT_FAILS(ck, m, rank, n, &bad_magic, OCCL_ERR_INVALID_ARGUMENT, "magic", "OCCL_CONFIG_INIT");
    occl_config_t zeroed;
    std::memset(&zeroed, 0, sizeof zeroed);
    CK_INIT_FAILS(ck, m, rank, n, &zeroed, OCCL_ERR_INVALID_ARGUMENT, "magic");
    // Right magic, impossible version / size: a version error.
    occl_config_t bad_version = OCCL_CONFIG_INIT;
    bad_version.version = 0;
    CK_INIT_FAILS(ck, m, rank, n, &bad_version, OCCL_ERR_VERSION, "version");
    occl_config_t tiny = OCCL_CONFIG_INIT;
    tiny.size = 4;
    CK_INIT_FAILS(ck, m, rank, n, &tiny, OCCL_ERR_VERSION, "size");

    // A caller compiled against an older, shorter struct: fields past `size`
    // are not read (here a bogus algorithm that would otherwise be rejected).
    occl_config_t older = OCCL_CONFIG_INIT;
    older.size = offsetof(occl_config_t, algorithm);
    older.timeout_ms = 20000;
    older.transport = "tcp";
    older.algorithm = "bogus";
    occl_comm_t comm = nullptr;
    CK_OK(ck, occl_comm_init(&comm, m, rank, n, &older));
    if (comm == nullptr) return ck.rc();
    const char* transport = nullptr;
    CK_OK(ck, occl_comm_transport(comm, &transport));
    CK_TRUE(ck, transport != nullptr && std::string(transport) == "tcp",
            "the transport field inside the caller's size was not honoured");
    all_reduce_works(ck, comm, rank, n);

    // occl_comm_split checks its config the same way, before any exchange.
    occl_comm_t child = bogus_comm_value();
    CK_ERR(ck, occl_comm_split(comm, 0, rank, &bad_magic, &child), OCCL_ERR_INVALID_ARGUMENT, "magic");
    CK_TRUE(ck, child == nullptr, "*newcomm not NULL after a failed split");
    occl_config_t bad_algo = OCCL_CONFIG_INIT;
    bad_algo.algorithm = "scatter=ring";
    CK_ERR(ck, occl_comm_split(comm, 0, rank, &bad_algo, &child), OCCL_ERR_INVALID_ARGUMENT, "scatter", "ring");
    CK_ERR(ck, occl_comm_split(comm, -7, rank, nullptr, &child), OCCL_ERR_INVALID_ARGUMENT, "color");
    // ...and the parent still works, as does a correct split.
    all_reduce_works(ck, comm, rank, n);
    child = nullptr;
    CK_OK(ck, occl_comm_split(comm, 0, -rank, nullptr, &child));
    if (child != nullptr) {
      int crank = -1;
      CK_OK(ck, occl_comm_rank(child, &crank));
      CK_TRUE(ck, crank == n - 1 - rank, "split ordered by key");
      all_reduce_works(ck, child, crank, n);
      CK_OK(ck, occl_comm_destroy(child));
    }
    CK_OK(ck, occl_comm_destroy(comm));
    return ck.rc();
  });
}

struct InitShared {
  std::atomic<int> status[8];
};

// Ranks 0 and 1 are started with world size 2, rank 2 with world size 3, on
// one file:// rendezvous. Rank 2 (the inconsistent one) must get MISMATCH
// naming the world size. (Ranks 0 and 1 agree with each other; they may form
// their 2-rank communicator or report the mismatch too.)
TEST(ErrorsTest, InitWorldSizeInconsistent) {
  auto* sh = shared_block<InitShared>();
  ASSERT_NE(sh, nullptr);
  JobOptions o = init_job(3);
  o.init = "file";
  JobResult res = run_ranks(o, [&](occl_comm_t, int rank, int) {
    Checks ck(rank);
    const std::string init = test_init();
    occl_config_t cfg = OCCL_CONFIG_INIT;
    cfg.timeout_ms = 10000;
    // Rank 2 comes first; rank 1 comes late so that rank 0's entry stays
    // readable for a while (rank 0 waits for rank 1).
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(800));
    const int world = rank == 2 ? 3 : 2;
    occl_comm_t comm = nullptr;
    const auto t0 = Clock::now();
    occl_status_t st = occl_comm_init(&comm, init.c_str(), rank, world, &cfg);
    std::string msg = occl_last_error();
    sh->status[rank].store(st);
    std::fprintf(stderr, "rank %d (world size %d): init -> %s after %.3f s: %s\n", rank, world, occl_status_string(st),
                 seconds_since(t0), st == OCCL_SUCCESS ? "" : msg.c_str());
    if (rank == 2) {
      CK_TRUE(ck, st == OCCL_ERR_MISMATCH, std::string("rank 2 got ") + occl_status_string(st));
      CK_TRUE(ck, contains_ci(msg, "world size"), "message lacks 'world size': " + msg);
      CK_TRUE(ck, contains_ci(msg, "3") && contains_ci(msg, "2"), "message lacks both sizes: " + msg);
      CK_TRUE(ck, seconds_since(t0) < 5.0, "detection took too long");
      CK_TRUE(ck, comm == nullptr, "*comm not NULL");
    } else {
      CK_TRUE(ck, st == OCCL_SUCCESS || st == OCCL_ERR_MISMATCH,
              std::string("consistent rank got ") + occl_status_string(st) + ": " + msg);
      if (st == OCCL_ERR_MISMATCH) CK_TRUE(ck, contains_ci(msg, "world size"), "message: " + msg);
      if (st == OCCL_SUCCESS) {
        all_reduce_works(ck, comm, rank, 2);
        CK_OK(ck, occl_comm_destroy(comm));
      }
    }
    return ck.rc();
  });
  EXPECT_TRUE(res.ok()) << res.summary();
  free_shared_block(sh);
}

// Ranks 0 and 1 say world size 3, rank 2 says 4: every rank sees an entry
// that disagrees with it, so every rank must report MISMATCH.
TEST(ErrorsTest, InitWorldSizeInconsistentEveryRankReports) {
  JobOptions o = init_job(3);
  o.init = "file";
  expect_job_ok(o, [](occl_comm_t, int rank, int) {
    Checks ck(rank);
    const std::string init = test_init();
    occl_config_t cfg = OCCL_CONFIG_INIT;
    cfg.timeout_ms = 10000;
    const int world = rank == 2 ? 4 : 3;
    occl_comm_t comm = nullptr;
    const auto t0 = Clock::now();
    occl_status_t st = occl_comm_init(&comm, init.c_str(), rank, world, &cfg);
    std::string msg = occl_last_error();
    std::fprintf(stderr, "rank %d (world size %d): init -> %s after %.3f s: %s\n", rank, world, occl_status_string(st),
                 seconds_since(t0), msg.c_str());
    CK_TRUE(ck, st == OCCL_ERR_MISMATCH, std::string("got ") + occl_status_string(st));
    CK_TRUE(ck, contains_ci(msg, "world size"), "message lacks 'world size': " + msg);
    CK_TRUE(ck, seconds_since(t0) < 5.0, "detection took too long");
    if (st == OCCL_SUCCESS) occl_comm_destroy(comm);
    return ck.rc();
  });
}

// ---------------------------------------------------------------------------
// Validation happens before anything is sent
// ---------------------------------------------------------------------------

// Every rank makes the same bad call of every class (blocking and async), as
// a program with a bug does. Had a rank sent anything, or the ranks numbered
// the rejected calls differently, the all_reduce after them would fail or
// mis-compute. (A call that only some ranks reject fails the others'
// matching call, naming the rejection: reliability_test.cc.)
TEST(ErrorsTest, CommUsableAfterBadArguments) {
  expect_job_ok(job(3), [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    {
      std::vector<float> a(12, 2.0f), b(12, 0.0f);
      Tensor1D ta(a.data(), 12, dl_float(32)), tb(b.data(), 12, dl_float(32)), t5(b.data(), 5, dl_float(32));
      Tensor1D ti(b.data(), 12, dl_int(32));
      TensorND transposed(a.data(), dl_float(32), {4, 3}, {1, 4});
      Tensor1D cuda(a.data(), 12, dl_float(32));
      cuda.get()->device = {kDLCUDA, 0};
      const DLDataType cplx = {kDLComplex, 32, 1};
      Tensor1D tc(a.data(), 6, cplx);
      for (int async = 0; async < 2; ++async) {
        occl_work_t w = nullptr;
        occl_work_t* wp = async ? &w : nullptr;
        CK_ERR(ck, occl_all_reduce(nullptr, &tb, OCCL_SUM, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "NULL");
        CK_ERR(ck, occl_broadcast(&ta, n, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "root");
        CK_ERR(ck, occl_reduce(&ta, &tb, OCCL_SUM, -1, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "root");
        CK_ERR(ck, occl_all_reduce(&ta, &tb, OCCL_BXOR, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "BXOR", "float32");
        CK_ERR(ck, occl_all_reduce(&ta, &tb, static_cast<occl_red_op_t>(42), comm, wp), OCCL_ERR_INVALID_ARGUMENT,
               "42");
        CK_ERR(ck, occl_all_reduce(&ta, &t5, OCCL_SUM, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "recvbuf");
        CK_ERR(ck, occl_all_gather(&ta, &tb, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "recvbuf");
        CK_ERR(ck, occl_all_reduce(&ta, &ti, OCCL_SUM, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "int32");
        CK_ERR(ck, occl_broadcast(&transposed, 0, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "contiguous");
        CK_ERR(ck, occl_all_reduce(&cuda, &tb, OCCL_SUM, comm, wp), OCCL_ERR_UNSUPPORTED, "cuda");
        CK_ERR(ck, occl_broadcast(&tc, 0, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "dtype");
        CK_ERR(ck, occl_send(&ta, n, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "peer");
        CK_ERR(ck, occl_all_to_all(&t5, &t5, comm, wp), OCCL_ERR_INVALID_ARGUMENT, "multiple");
        CK_TRUE(ck, w == nullptr, "a failed async call returned a work handle");
      }
      CK_TRUE(ck, std::all_of(b.begin(), b.end(), [](float v) { return v == 0.0f; }), "recvbuf written");
      CK_TRUE(ck, std::all_of(a.begin(), a.end(), [](float v) { return v == 2.0f; }), "sendbuf written");
    }
    all_reduce_works(ck, comm, rank, n, 1000);
    // Later operations, blocking and async, stay in step.
    std::vector<int64_t> v(5, rank == 2 ? 77 : 0);
    Tensor1D tv(v.data(), 5, dl_int(64));
    CK_OK(ck, occl_broadcast(&tv, 2, comm, nullptr));
    CK_TRUE(ck, v[4] == 77, "broadcast after bad calls");
    occl_work_t w = nullptr;
    CK_OK(ck, occl_barrier(comm, &w));
    CK_OK(ck, occl_work_wait(w));
    occl_work_free(w);
    all_reduce_works(ck, comm, rank, n, 100000);
    return ck.rc();
  });
}

// ---------------------------------------------------------------------------
// A reduce leaves non-root inputs unchanged
// ---------------------------------------------------------------------------

class ReduceInputsTest : public ::testing::TestWithParam<const char*> {};

/// Value at index i of rank r's input (small integers: exact in float).
int32_t input_value(int r, size_t i) { return (r + 1) * static_cast<int32_t>(i % 13 + 1); }

TEST_P(ReduceInputsTest, NonRootInputsUnchanged) {
  JobOptions o = job(4);
  o.algorithm = std::string("reduce=") + GetParam();
  expect_job_ok(o, [](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    occl_red_op_t premul_f = OCCL_SUM, premul_i = OCCL_SUM;
    CK_OK(ck, occl_red_op_create_premul_sum(comm, 2.5, &premul_f));
    CK_OK(ck, occl_red_op_create_premul_sum(comm, 3.0, &premul_i));
    const int64_t tri = n * (n + 1) / 2;  // sum over ranks of (r + 1)
    struct Case {
      const char* name;
      occl_red_op_t fop, iop;
      double fmul;   // float result = fmul * k
      int64_t imul;  // int result = imul * k (before integer division)
      int64_t idiv;  // int result divided (truncating) by this
    };
    const Case cases[] = {
        {"SUM", OCCL_SUM, OCCL_SUM, static_cast<double>(tri), tri, 1},
        {"AVG", OCCL_AVG, OCCL_AVG, static_cast<double>(tri) / n, tri, n},
        {"PREMUL_SUM", premul_f, premul_i, 2.5 * static_cast<double>(tri), 3 * tri, 1},
        {"MAX", OCCL_MAX, OCCL_MAX, static_cast<double>(n), n, 1},
    };
    for (size_t count : {size_t(1), size_t(7), size_t(70001)}) {  // 70001 floats > one 256 KiB staging chunk
      for (const Case& c : cases) {
        for (int is_int = 0; is_int < 2; ++is_int) {
          for (int root = 0; root < n; ++root) {
            const size_t es = 4;
            std::vector<unsigned char> send(count * es), recv(count * es, 0xab), before;
            for (size_t i = 0; i < count; ++i) {
              int32_t v = input_value(rank, i);
              if (is_int) {
                std::memcpy(&send[i * es], &v, es);
              } else {
                float f = static_cast<float>(v);
                std::memcpy(&send[i * es], &f, es);
              }
            }
            before = send;
            const DLDataType dt = is_int ? dl_int(32) : dl_float(32);
            Tensor1D ts(send.data(), static_cast<int64_t>(count), dt), tr(recv.data(), static_cast<int64_t>(count), dt);
            const std::string what = std::string(c.name) + (is_int ? " int32" : " float32") + " count " +
                                     std::to_string(count) + " root " + std::to_string(root);
            // Non-roots pass a recvbuf too: it must be ignored (left untouched).
            if (!CK_OK(ck, occl_reduce(&ts, &tr, is_int ? c.iop : c.fop, root, comm, nullptr))) return ck.rc();
            if (rank != root) {
              if (!CK_TRUE(ck, send == before, "non-root sendbuf modified: " + what)) return ck.rc();
              if (!CK_TRUE(ck, std::all_of(recv.begin(), recv.end(), [](unsigned char b) { return b == 0xab; }),
                           "non-root recvbuf written: " + what)) {
                return ck.rc();
              }
            } else {
              CK_TRUE(ck, send == before, "root sendbuf modified (not in place): " + what);
              for (size_t i = 0; i < count; ++i) {
                const int64_t k = i % 13 + 1;
                bool good;
                if (is_int) {
                  int32_t got;
                  std::memcpy(&got, &recv[i * es], es);
                  good = got == static_cast<int32_t>(c.imul * k / c.idiv);
                } else {
                  float got;
                  std::memcpy(&got, &recv[i * es], es);
                  good = got == static_cast<float>(c.fmul * static_cast<double>(k));
                }
                if (!CK_TRUE(ck, good, "root result wrong at " + std::to_string(i) + ": " + what)) return ck.rc();
              }
            }
          }
        }
      }
    }
    occl_red_op_destroy(comm, premul_f);
    occl_red_op_destroy(comm, premul_i);
    return ck.rc();
  });
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ReduceInputsTest, ::testing::Values("tree", "direct"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
