// Hardening: sizes that overflow, buffers that overlap, deadlines that do not
// fit a clock, and a communicator used from two threads at once. Each case
// is an answer (a clear error naming the argument, or a correct result),
// never a crash, a wrong result or an instant timeout.
//
// Checks run in forked ranks (tests/harness); a rank prints each failed
// check to stderr and exits non-zero, which fails the test.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"
#include "omniccl/omniccl.h"

namespace {

using omniccl::testing::contains_ci;
using omniccl::testing::dl_float;
using omniccl::testing::dl_int;
using omniccl::testing::dl_uint;
using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::seconds_since;
using omniccl::testing::Tensor1D;
using Clock = std::chrono::steady_clock;

/// `call` must return `want` with occl_last_error() containing every needle.
bool expect_err(int rank, occl_status_t got, occl_status_t want, std::vector<std::string> needles, const char* expr,
                int line) {
  std::string msg = occl_last_error();
  bool good = got == want;
  for (const auto& n : needles) good = good && contains_ci(msg, n);
  if (!good) {
    std::string want_text;
    for (const auto& n : needles) want_text += " '" + n + "'";
    std::fprintf(stderr,
                 "rank %d: CHECK FAILED at line %d: %s\n    returned %s, expected %s\n    message: \"%s\"\n"
                 "    expected it to contain:%s\n",
                 rank, line, expr, occl_status_string(got), occl_status_string(want), msg.c_str(), want_text.c_str());
  }
  return good;
}
#define ERR(call, want, ...) expect_err(rank, (call), (want), {__VA_ARGS__}, #call, __LINE__)
#define BAD_ARG(call, ...) ERR(call, OCCL_ERR_INVALID_ARGUMENT, __VA_ARGS__)

/// An N-d DLTensor with its own shape storage.
struct TensorND {
  DLTensor t{};
  std::vector<int64_t> shape;
  TensorND(void* data, DLDataType dtype, std::vector<int64_t> shp, uint64_t byte_offset = 0) : shape(std::move(shp)) {
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    t.byte_offset = byte_offset;
  }
  TensorND(const TensorND&) = delete;
  TensorND& operator=(const TensorND&) = delete;
  const DLTensor* operator&() const { return &t; }
};

JobOptions job(int nranks) {
  JobOptions o;
  o.nranks = nranks;
  o.job_timeout_s = 60;
  o.timeout_ms = 20000;
  return o;
}

void expect_job_ok(const JobOptions& opts, const omniccl::testing::RankFn& fn) {
  JobResult res = run_ranks(opts, fn);
  EXPECT_TRUE(res.ok()) << "ranks reported failures (see their stderr above):" << res.summary();
}

/// A float32 all_reduce SUM over `count` elements with the right result.
bool all_reduce_works(occl_comm_t comm, int rank, int n, int64_t count = 33) {
  std::vector<float> s(count), r(count, -1.0f);
  for (int64_t i = 0; i < count; ++i) s[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
  Tensor1D ts(s.data(), count, dl_float(32)), tr(r.data(), count, dl_float(32));
  occl_status_t st = occl_all_reduce(&ts, &tr, OCCL_SUM, comm, nullptr);
  if (st != OCCL_SUCCESS) {
    std::fprintf(stderr, "rank %d: all_reduce failed: %s: %s\n", rank, occl_status_string(st), occl_last_error());
    return false;
  }
  const float tri = static_cast<float>(n * (n + 1) / 2);
  for (int64_t i = 0; i < count; ++i) {
    if (r[i] != tri * static_cast<float>(i % 7 + 1)) {
      std::fprintf(stderr, "rank %d: all_reduce result wrong at %lld: %g\n", rank, static_cast<long long>(i), r[i]);
      return false;
    }
  }
  return true;
}

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------
// Checked arithmetic at the C ABI edge
// ---------------------------------------------------------------------------

// Element count x element size overflowing size_t (2^61+1 int64 elements is
// 8 bytes after wrapping) crashed the reduction kernel.
TEST(HardeningTest, ElementCountTimesSizeOverflows) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    bool ok = true;
    int64_t buf[4] = {1, 2, 3, 4}, out[4] = {0, 0, 0, 0};
    // (Each call has one bad tensor, so the message must name that one.)
    TensorND huge(buf, dl_int(64), {(int64_t{1} << 61) + 1}), huge_out(out, dl_int(64), {(int64_t{1} << 61) + 1});
    Tensor1D small(buf, 4, dl_int(64)), small_out(out, 4, dl_int(64));
    ok &= BAD_ARG(occl_all_reduce(&huge, &small_out, OCCL_SUM, comm, nullptr), "sendbuf", "overflow");
    ok &= BAD_ARG(occl_all_reduce(&small, &huge_out, OCCL_SUM, comm, nullptr), "recvbuf", "overflow");
    ok &= BAD_ARG(occl_broadcast(&huge, 0, comm, nullptr), "tensor", "overflow");
    // Within size_t, but more bytes than an address space holds (> PTRDIFF_MAX).
    TensorND half(buf, dl_int(16), {int64_t{1} << 62});
    ok &= BAD_ARG(occl_broadcast(&half, 0, comm, nullptr), "tensor", "bytes");
    ok &= out[0] == 0 && out[3] == 0;
    ok &= all_reduce_works(comm, rank, n);
    return ok ? 0 : 1;
  });
}

// A shape product that wraps to 0 (2^32 x 2^32) returned success; one that
// wraps to a small number moved that many elements.
TEST(HardeningTest, ShapeProductOverflows) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    bool ok = true;
    uint8_t buf[16] = {};
    uint8_t out[16] = {};
    TensorND zero(buf, dl_uint(8), {int64_t{1} << 32, int64_t{1} << 32}), none(out, dl_uint(8), {0});
    ok &= BAD_ARG(occl_all_reduce(&zero, &none, OCCL_SUM, comm, nullptr), "sendbuf", "shape", "overflow");
    TensorND four(buf, dl_uint(8), {int64_t{1} << 62, 4, 1, 1});
    ok &= BAD_ARG(occl_broadcast(&four, 0, comm, nullptr), "tensor", "shape", "overflow");
    TensorND wraps_late(buf, dl_uint(8), {3, kI64Max / 2, 7});
    ok &= BAD_ARG(occl_all_gather(&wraps_late, &none, comm, nullptr), "sendbuf", "overflow");
    // The product is taken in dimension order: a zero extent after the
    // overflow does not make it an empty tensor (found by fuzz_capi_args).
    TensorND zero_after(buf, dl_uint(8), {int64_t{1} << 40, int64_t{1} << 40, 0});
    ok &= BAD_ARG(occl_all_reduce(&zero_after, &none, OCCL_SUM, comm, nullptr), "sendbuf", "overflow");
    ok &= all_reduce_works(comm, rank, n);
    return ok ? 0 : 1;
  });
}

// data + byte_offset + bytes must stay inside the address space.
TEST(HardeningTest, ByteOffsetPastTheAddressSpace) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    bool ok = true;
    float buf[8] = {};
    TensorND far(buf, dl_float(32), {8}, ~uint64_t{0} - 8);
    ok &= BAD_ARG(occl_broadcast(&far, 0, comm, nullptr), "tensor", "byte_offset");
    ok &= all_reduce_works(comm, rank, n);
    return ok ? 0 : 1;
  });
}

// With 3 ranks, sendbuf's count x 3 wrapped to 2, so a 2-element recvbuf
// "matched" a sendbuf of 6148914691236517206 elements.
TEST(HardeningTest, CountTimesRanksOverflows) {
  expect_job_ok(job(3), [](occl_comm_t comm, int rank, int n) {
    bool ok = true;
    uint8_t buf[8] = {};
    const int64_t third = static_cast<int64_t>((~uint64_t{0}) / 3 + 1);  // x3 wraps to 2
    uint8_t other[8] = {};  // apart from buf: no overlap to hide the overflow
    TensorND big(buf, dl_uint(8), {third});
    Tensor1D two(other, 2, dl_uint(8));
    ok &= BAD_ARG(occl_all_gather(&big, &two, comm, nullptr), "sendbuf", "overflow");
    ok &= BAD_ARG(occl_gather(&big, &two, rank, comm, nullptr), "sendbuf", "overflow");
    ok &= BAD_ARG(occl_scatter(&two, &big, rank, comm, nullptr), "recvbuf", "overflow");
    ok &= BAD_ARG(occl_reduce_scatter(&two, &big, OCCL_SUM, comm, nullptr), "recvbuf", "overflow");
    ok &= all_reduce_works(comm, rank, n);
    return ok ? 0 : 1;
  });
}

// Packed displacements are the running sum of the counts; that sum must not
// wrap (it was signed overflow: undefined behaviour).
TEST(HardeningTest, VectorCountSumsOverflow) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    bool ok = true;
    int32_t s[8] = {}, r[8] = {};
    Tensor1D s4(s, 4, dl_int(32)), r8(r, 8, dl_int(32));
    int64_t counts[2] = {kI64Max, kI64Max};
    counts[rank] = 4;
    ok &= BAD_ARG(occl_all_gatherv(&s4, &r8, counts, nullptr, comm, nullptr), "recv_counts");
    int64_t sc[2] = {kI64Max - 1, kI64Max - 1}, rc[2] = {4, 4};
    sc[rank] = 4;
    ok &= BAD_ARG(occl_all_to_allv(&r8, sc, nullptr, &s4, rc, nullptr, comm, nullptr), "send_counts");
    int64_t displs[2] = {kI64Max, kI64Max};
    int64_t fours[2] = {4, 4};
    ok &= BAD_ARG(occl_all_gatherv(&s4, &r8, fours, displs, comm, nullptr), "recv_displs");
    ok &= all_reduce_works(comm, rank, n);
    return ok ? 0 : 1;
  });
}

// Out-of-place v-variants: sendbuf may overlap recvbuf only at this rank's
// own slot (in place), and two ranks' slots in recvbuf must not overlap.
TEST(HardeningTest, VectorOverlap) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    bool ok = true;
    std::vector<int32_t> buf(16, 0);
    Tensor1D recv(buf.data(), 8, dl_int(32));
    Tensor1D wrong_slot(buf.data() + 4 * (1 - rank), 4, dl_int(32));
    Tensor1D straddles(buf.data() + 2, 4, dl_int(32));
    int64_t counts[2] = {4, 4};
    ok &=
        BAD_ARG(occl_all_gatherv(&wrong_slot, &recv, counts, nullptr, comm, nullptr), "sendbuf", "recvbuf", "overlap");
    ok &= BAD_ARG(occl_all_gatherv(&straddles, &recv, counts, nullptr, comm, nullptr), "overlap");
    ok &= BAD_ARG(occl_gatherv(&wrong_slot, &recv, counts, nullptr, rank, comm, nullptr), "overlap");
    ok &= BAD_ARG(occl_scatterv(&recv, counts, nullptr, &wrong_slot, rank, comm, nullptr), "overlap");
    // Two ranks' parts overlapping inside recvbuf.
    std::vector<int32_t> s(4, rank), other(16, 0);
    Tensor1D s4(s.data(), 4, dl_int(32)), r8(other.data(), 8, dl_int(32));
    int64_t displs[2] = {0, 2};
    ok &= BAD_ARG(occl_all_gatherv(&s4, &r8, counts, displs, comm, nullptr), "recv_displs", "overlap");
    std::vector<int32_t> s8(8, rank);
    Tensor1D send8(s8.data(), 8, dl_int(32));
    ok &= BAD_ARG(occl_all_to_allv(&send8, counts, nullptr, &r8, counts, displs, comm, nullptr), "recv_displs",
                  "overlap");
    // The in-place layout still works.
    for (int i = 0; i < 4; ++i) buf[4 * rank + i] = 10 * rank + i;
    Tensor1D mine(buf.data() + 4 * rank, 4, dl_int(32));
    if (occl_all_gatherv(&mine, &recv, counts, nullptr, comm, nullptr) != OCCL_SUCCESS) {
      std::fprintf(stderr, "rank %d: in-place all_gatherv failed: %s\n", rank, occl_last_error());
      ok = false;
    }
    for (int i = 0; i < 8; ++i) ok &= buf[i] == 10 * (i / 4) + i % 4;
    ok &= all_reduce_works(comm, rank, n);
    return ok ? 0 : 1;
  });
}

// ---------------------------------------------------------------------------
// Long deadlines saturate instead of wrapping into the past
// ---------------------------------------------------------------------------

// occl_comm_set_timeout(INT64_MAX) made every operation time out at once
// ("after 0 ms"), blaming the connection.
TEST(HardeningTest, LongestTimeoutDoesNotExpire) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    bool ok = true;
    if (occl_comm_set_timeout(comm, kI64Max) != OCCL_SUCCESS) {
      std::fprintf(stderr, "rank %d: set_timeout(INT64_MAX): %s\n", rank, occl_last_error());
      return 1;
    }
    ok &= all_reduce_works(comm, rank, n);
    // Work handles: a wait of INT64_MAX ms is a wait, not an instant timeout.
    float v = 1.0f, out = 0.0f;
    Tensor1D tv(&v, 1, dl_float(32)), to(&out, 1, dl_float(32));
    occl_work_t w = nullptr;
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ok &= occl_all_reduce(&tv, &to, OCCL_SUM, comm, &w) == OCCL_SUCCESS;
    occl_status_t st = occl_work_wait_for(w, kI64Max);
    if (st != OCCL_SUCCESS || out != static_cast<float>(n)) {
      std::fprintf(stderr, "rank %d: work_wait_for(INT64_MAX) -> %s (%s), out %g\n", rank, occl_status_string(st),
                   occl_last_error(), out);
      ok = false;
    }
    occl_work_free(w);
    return ok ? 0 : 1;
  });
}

// OMNICCL_TIMEOUT=1e10 (seconds) overflowed the clock the same way, in the
// rendezvous and in every operation.
TEST(HardeningTest, HugeTimeoutSettingDoesNotExpire) {
  JobOptions o = job(2);
  o.create_comm = false;
  o.env = {{"OMNICCL_TIMEOUT", "1e10"}};
  expect_job_ok(o, [](occl_comm_t, int rank, int n) {
    const char* init = std::getenv("OCCL_TEST_INIT");
    occl_comm_t comm = nullptr;
    if (occl_comm_init(&comm, init, rank, n, nullptr) != OCCL_SUCCESS) {
      std::fprintf(stderr, "rank %d: init with OMNICCL_TIMEOUT=1e10: %s\n", rank, occl_last_error());
      return 1;
    }
    bool ok = all_reduce_works(comm, rank, n);
    occl_comm_destroy(comm);
    return ok ? 0 : 1;
  });
}

// ---------------------------------------------------------------------------
// Two threads issuing on one communicator
// ---------------------------------------------------------------------------

// Rank 0's first thread is inside an all_reduce (rank 1 joins late); a second
// thread issuing meanwhile gets an error at once instead of pairing with rank
// 1's operation. Which thread wins may differ between ranks (their winners
// would pair with the wrong threads' data), so the first thread's all_reduce
// fails too, promptly, and so does rank 1's: the communicator is unusable on
// every rank, with the reason (tests/collectives/reliability_test.cc has the
// case where the pairing would mix the data).
TEST(HardeningTest, SecondThreadOnOneCommunicatorIsRefused) {
  expect_job_ok(job(2), [](occl_comm_t comm, int rank, int n) {
    bool ok = true;
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
      std::vector<float> x(1000, 1.0f);
      Tensor1D t(x.data(), 1000, dl_float(32));
      const auto t0 = Clock::now();
      ok &= ERR(occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr), OCCL_ERR_INVALID_ARGUMENT, "in use", "thread");
      ok &= seconds_since(t0) < 2.0;
      return ok ? 0 : 1;
    }
    std::atomic<int> first_done{0};
    occl_status_t first_status = OCCL_SUCCESS;
    std::string first_message;
    std::thread first([&] {
      std::vector<float> x(1000, 1.0f);
      Tensor1D t(x.data(), 1000, dl_float(32));
      first_status = occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr);
      first_message = occl_last_error();
      first_done.store(1);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    bool second_checked = false;
    const auto t0 = Clock::now();
    if (first_done.load() == 0) {
      std::vector<float> s(1000, 5.0f), r(1000, 0.0f);
      Tensor1D ts(s.data(), 1000, dl_float(32)), tr(r.data(), 1000, dl_float(32));
      ok &= BAD_ARG(occl_all_reduce(&ts, &tr, OCCL_SUM, comm, nullptr), "comm", "in use", "thread");
      ok &= seconds_since(t0) < 0.2;
      ok &= r[0] == 0.0f;
      second_checked = true;
    }
    first.join();
    if (!second_checked) std::fprintf(stderr, "rank 0: the first all_reduce ended before rank 1 joined\n");
    ok &= second_checked;
    // The first thread's call ended at once (rank 1 has not joined yet).
    ok &= seconds_since(t0) < 0.4;
    if (first_status != OCCL_ERR_INVALID_ARGUMENT || !contains_ci(first_message, "in use")) {
      std::fprintf(stderr, "rank 0: the first thread's all_reduce returned %s: %s\n", occl_status_string(first_status),
                   first_message.c_str());
      ok = false;
    }
    // From then on, from any thread, the communicator says why it failed.
    std::thread later([&] {
      float x[4] = {};
      Tensor1D t(x, 4, dl_float(32));
      ok &= ERR(occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr), OCCL_ERR_COMM_FAILED, "in use");
      ok &= ERR(occl_barrier(comm, nullptr), OCCL_ERR_COMM_FAILED, "in use");
    });
    later.join();
    (void)n;
    return ok ? 0 : 1;
  });
}

// A call holds no reference to its communicator (the C API's calls run as
// its issuer, and occl_comm_abort waits for the issuer to return before it
// frees anything). Rank 0's second thread is blocked in a broadcast from rank
// 1, which never comes; the first thread aborts the communicator. The call
// returns ABORTED and nothing it still touches on its way out has been freed
// (the sanitizer builds run this: a freed communicator under the returning
// call is a use after free there, and a crash or a hang here). Twice: with
// the broadcast the thread's first call (it enters with a compare-and-swap),
// and after 20 barriers on that thread (it keeps the issuer between calls,
// and abort must take it over).
TEST(HardeningTest, AbortFromAnotherThreadWaitsForTheCall) {
  JobOptions o = job(2);
  o.create_comm = false;  // rank 0's communicators are freed by the aborts
  expect_job_ok(o, [](occl_comm_t, int rank, int n) {
    const char* init = std::getenv("OCCL_TEST_INIT");
    bool ok = true;
    for (const int calls_before : {0, 20}) {
      occl_comm_t comm = nullptr;
      if (occl_comm_init(&comm, init, rank, n, nullptr) != OCCL_SUCCESS) {
        std::fprintf(stderr, "rank %d: init: %s\n", rank, occl_last_error());
        return 1;
      }
      if (rank == 1) {  // never broadcasts; leaves once rank 0 has aborted
        for (int i = 0; i < calls_before; ++i) ok &= occl_barrier(comm, nullptr) == OCCL_SUCCESS;
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        occl_comm_destroy(comm);
        continue;
      }
      int64_t v = 7;
      Tensor1D t(&v, 1, dl_int(64));
      std::atomic<int> entered{0};
      occl_status_t st = OCCL_SUCCESS;
      std::string msg;
      std::thread caller([&] {
        for (int i = 0; i < calls_before; ++i) ok &= occl_barrier(comm, nullptr) == OCCL_SUCCESS;
        entered.store(1);
        st = occl_broadcast(&t, 1, comm, nullptr);
        if (st != OCCL_SUCCESS) msg = occl_last_error();
      });
      while (entered.load() == 0) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const auto t0 = Clock::now();
      const occl_status_t ast = occl_comm_abort(comm);
      const double abort_s = seconds_since(t0);
      caller.join();
      if (ast != OCCL_SUCCESS || abort_s > 2.0) {
        std::fprintf(stderr, "rank 0 (%d calls before): abort returned %s after %.2f s\n", calls_before,
                     occl_status_string(ast), abort_s);
        ok = false;
      }
      if (st != OCCL_ERR_ABORTED || v != 7) {
        std::fprintf(stderr, "rank 0 (%d calls before): the blocked broadcast returned %s (%s), value %lld\n",
                     calls_before, occl_status_string(st), msg.c_str(), static_cast<long long>(v));
        ok = false;
      }
    }
    return ok ? 0 : 1;
  });
}

// ---------------------------------------------------------------------------
// Leftover shared memory of a job killed during init
// ---------------------------------------------------------------------------

/// This process's pid namespace inode (as segment names carry it).
std::string pid_namespace() {
  char buf[64] = {};
  ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  std::string digits;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] >= '0' && buf[i] <= '9') digits.push_back(buf[i]);
  }
  return digits;
}

bool shm_exists(const std::string& name) { return ::access(("/dev/shm/" + name).c_str(), F_OK) == 0; }

void make_shm(const std::string& name) {
  int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << name;
  ::close(fd);
}

// Segments are unlinked at the setup barrier, so a job killed before it left
// 2 MiB x n per rank in /dev/shm for good. Their names now carry the creator's
// pid, and the next job on the host removes those whose process is gone
// (never one of a live process).
TEST(HardeningTest, LeftoverSegmentsOfDeadProcessesAreRemoved) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // `child` is now a pid of no process
  const std::string ns = pid_namespace();
  const std::string dead = "omniccl." + ns + "-" + std::to_string(child) + ".dead5e55.0";
  const std::string live = "omniccl." + ns + "-" + std::to_string(::getpid()) + ".11fe.0";
  make_shm(dead);
  make_shm(live);
  JobOptions o = job(2);
  o.transport = "shm";
  expect_job_ok(o, [](occl_comm_t comm, int rank, int n) { return all_reduce_works(comm, rank, n) ? 0 : 1; });
  EXPECT_FALSE(shm_exists(dead)) << dead << " (its process is gone) is still in /dev/shm";
  EXPECT_TRUE(shm_exists(live)) << live << " (its process is alive) was removed";
  ::shm_unlink(("/" + dead).c_str());
  ::shm_unlink(("/" + live).c_str());
}

// ---------------------------------------------------------------------------
// Job token
// ---------------------------------------------------------------------------

// With OMNICCL_JOB_TOKEN set on every rank, tcp:// and env:// rendezvous
// authenticate every store connection and the job runs as before.
TEST(HardeningTest, JobTokenRendezvous) {
  for (const char* init : {"tcp", "env"}) {
    JobOptions o = job(3);
    o.init = init;
    o.env = {{"OMNICCL_JOB_TOKEN", "0123456789abcdef-job"}};
    expect_job_ok(o, [](occl_comm_t comm, int rank, int n) { return all_reduce_works(comm, rank, n) ? 0 : 1; });
  }
}

}  // namespace
