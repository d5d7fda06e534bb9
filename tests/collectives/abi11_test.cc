// Tests of the ABI 1.1 additions with real ranks: per-call options (deadline,
// interrupt check), non-blocking creation (init and split) that can be polled
// and aborted in any phase, and the asynchronous-error query.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "reference.h"

namespace {

using namespace occl_ref;
using omniccl::testing::contains_ci;
using omniccl::testing::dl_int;
using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::seconds_since;
using omniccl::testing::Tensor1D;
using Clock = std::chrono::steady_clock;

JobOptions opts(int n, bool create_comm = true) {
  JobOptions o;
  o.nranks = n;
  o.timeout_ms = 60000;
  o.job_timeout_s = 120;
  o.create_comm = create_comm;
  return o;
}

occl_config_t config(int32_t blocking, int64_t timeout_ms = 60000) {
  occl_config_t cfg = OCCL_CONFIG_INIT;
  cfg.timeout_ms = timeout_ms;
  cfg.blocking = blocking;
  return cfg;
}

/// Polls occl_comm_get_async_error until it is not IN_PROGRESS (at most
/// limit_s); returns the last state.
occl_status_t poll_ready(occl_comm_t comm, double limit_s) {
  auto t0 = Clock::now();
  occl_status_t state = OCCL_ERR_IN_PROGRESS;
  while (seconds_since(t0) < limit_s) {
    if (occl_comm_get_async_error(comm, &state) != OCCL_SUCCESS) return OCCL_ERR_INTERNAL;
    if (state != OCCL_ERR_IN_PROGRESS) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return state;
}

/// all_reduce SUM of (rank + 1) over comm; checks the total.
int check_sum(occl_comm_t comm, int who, int n, const occl_options_t* options = nullptr) {
  int64_t v = 0;
  RANK_OK(occl_comm_rank(comm, reinterpret_cast<int*>(&v)), who);
  v += 1;
  Tensor1D t(&v, 1, dl_int(64));
  RANK_OK(occl_all_reduce_ex(&t, &t, OCCL_SUM, comm, options, nullptr), who);
  RANK_CHECK(v == int64_t(n) * (n + 1) / 2, who, cat("sum over ", n, " ranks is ", v));
  return 0;
}

// ---------------------------------------------------------------------------
// Per-call options

TEST(Options, EveryExOperationWithOptionsMatchesItsV1Form) {
  JobResult res = run_ranks(opts(3), [](occl_comm_t comm, int rank, int n) {
    occl_options_t o = OCCL_OPTIONS_INIT;
    o.timeout_ms = 20000;
    std::vector<int64_t> one(1, rank + 1), all(n, 0), all2(n, 0), big(n, rank + 1);
    Tensor1D t1(one.data(), 1, dl_int(64)), ta(all.data(), n, dl_int(64)), ta2(all2.data(), n, dl_int(64)),
        tb(big.data(), n, dl_int(64));
    RANK_OK(occl_all_gather_ex(&t1, &ta, comm, &o, nullptr), rank);
    for (int i = 0; i < n; ++i) RANK_CHECK(all[i] == i + 1, rank, cat("all_gather_ex element ", i, " = ", all[i]));
    RANK_OK(occl_all_to_all_ex(&tb, &ta2, comm, &o, nullptr), rank);
    for (int i = 0; i < n; ++i) RANK_CHECK(all2[i] == i + 1, rank, cat("all_to_all_ex element ", i, " = ", all2[i]));
    int64_t x = rank == 1 ? 99 : 0;
    Tensor1D tx(&x, 1, dl_int(64));
    RANK_OK(occl_broadcast_ex(&tx, 1, comm, &o, nullptr), rank);
    RANK_CHECK(x == 99, rank, cat("broadcast_ex gave ", x));
    int64_t r = 0;
    Tensor1D tr(&r, 1, dl_int(64));
    RANK_OK(occl_reduce_ex(&t1, &tr, OCCL_MAX, 0, comm, &o, nullptr), rank);
    RANK_CHECK(rank != 0 || r == n, rank, cat("reduce_ex MAX gave ", r));
    RANK_OK(occl_reduce_scatter_ex(&tb, &t1, OCCL_SUM, comm, &o, nullptr), rank);
    RANK_CHECK(one[0] == int64_t(n) * (n + 1) / 2, rank, cat("reduce_scatter_ex gave ", one[0]));
    one[0] = rank + 1;
    RANK_OK(occl_gather_ex(&t1, &ta, 2, comm, &o, nullptr), rank);
    RANK_OK(occl_scatter_ex(&ta, &t1, 2, comm, &o, nullptr), rank);
    RANK_CHECK(one[0] == rank + 1, rank, cat("gather_ex then scatter_ex gave ", one[0]));
    std::vector<int64_t> counts(n, 1);
    RANK_OK(occl_all_gatherv_ex(&t1, &ta, counts.data(), nullptr, comm, &o, nullptr), rank);
    RANK_OK(occl_gatherv_ex(&t1, &ta, counts.data(), nullptr, 0, comm, &o, nullptr), rank);
    RANK_OK(occl_scatterv_ex(&ta, counts.data(), nullptr, &t1, 0, comm, &o, nullptr), rank);
    RANK_OK(occl_all_to_allv_ex(&tb, counts.data(), nullptr, &ta2, counts.data(), nullptr, comm, &o, nullptr), rank);
    occl_work_t w = nullptr;
    RANK_OK(occl_barrier_ex(comm, &o, &w), rank);
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_free(w), rank);
    int64_t p = rank;
    Tensor1D tp(&p, 1, dl_int(64));
    if (rank == 0) RANK_OK(occl_send_ex(&tp, 1, comm, &o, nullptr), rank);
    if (rank == 1) {
      RANK_OK(occl_recv_ex(&tp, 0, comm, &o, nullptr), rank);
      RANK_CHECK(p == 0, rank, cat("recv_ex gave ", p));
    }
    return check_sum(comm, rank, n, &o);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(Options, PerCallDeadlineOverridesTheCommunicators) {
  // The communicator's deadline is 60 s; one call asks for 300 ms.
  JobResult res = run_ranks(opts(2), [](occl_comm_t comm, int rank, int) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      return 0;  // never joins the all_reduce
    }
    occl_options_t o = OCCL_OPTIONS_INIT;
    o.timeout_ms = 300;
    int64_t v = 1;
    Tensor1D t(&v, 1, dl_int(64));
    auto t0 = Clock::now();
    occl_status_t st = occl_all_reduce_ex(&t, &t, OCCL_SUM, comm, &o, nullptr);
    double s = seconds_since(t0);
    std::string msg = occl_last_error();
    RANK_CHECK(st == OCCL_ERR_TIMEOUT, rank, cat("status ", occl_status_string(st), ": ", msg));
    RANK_CHECK(s >= 0.25 && s < 2.0, rank, cat("timed out after ", s, " s, asked for 0.3 s"));
    RANK_CHECK(contains_ci(msg, "rank 1") || contains_ci(msg, "ranks 1") || contains_ci(msg, "1"), rank,
               "the message names the missing rank: " + msg);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

std::atomic<int> g_interrupt_calls{0};
Clock::time_point g_interrupt_after;

int interrupt_after_deadline(void*) {
  g_interrupt_calls.fetch_add(1);
  return Clock::now() >= g_interrupt_after ? 1 : 0;
}

int never_interrupt(void* counter) {
  static_cast<std::atomic<int>*>(counter)->fetch_add(1);
  return 0;
}

TEST(Options, InterruptEndsABlockingCollectiveAndThePeerIsTold) {
  JobResult res = run_ranks(opts(2), [](occl_comm_t comm, int rank, int) {
    int64_t v = 1;
    Tensor1D t(&v, 1, dl_int(64));
    if (rank == 1) {
      // Joins late, after rank 0 interrupted itself (rank 0 stays alive).
      // Its all_reduce may still complete (rank 0's part was sent before
      // rank 0 began to wait), but rank 0 takes part in nothing after it, so
      // the next call must fail promptly, not at the 60 s deadline.
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
      occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr);
      auto t0 = Clock::now();
      occl_status_t st = occl_barrier(comm, nullptr);
      double s = seconds_since(t0);
      std::string msg = occl_last_error();
      RANK_CHECK(st != OCCL_SUCCESS, rank, "the barrier succeeded although rank 0 left");
      RANK_CHECK(contains_ci(msg, "interrupted"), rank, "the error says rank 0 was interrupted: " + msg);
      RANK_CHECK(s < 2.0, rank, cat("the peer's failure took ", s, " s"));
      return 0;
    }
    occl_options_t o = OCCL_OPTIONS_INIT;
    o.interrupt = interrupt_after_deadline;
    g_interrupt_after = Clock::now() + std::chrono::milliseconds(200);
    auto t0 = Clock::now();
    occl_status_t st = occl_all_reduce_ex(&t, &t, OCCL_SUM, comm, &o, nullptr);
    double s = seconds_since(t0);
    RANK_CHECK(st == OCCL_ERR_INTERRUPTED, rank, cat("status ", occl_status_string(st), ": ", occl_last_error()));
    RANK_CHECK(s >= 0.19 && s < 0.35, rank, cat("interrupted after ", s, " s; the check fired at 0.2 s"));
    RANK_CHECK(g_interrupt_calls.load() >= 4, rank, cat("interrupt checked only ", g_interrupt_calls.load(), " times"));
    // The communicator is unusable now, and says why.
    st = occl_barrier(comm, nullptr);
    RANK_CHECK(st == OCCL_ERR_COMM_FAILED, rank, cat("next call: ", occl_status_string(st)));
    occl_status_t async_error = OCCL_SUCCESS;
    RANK_OK(occl_comm_get_async_error(comm, &async_error), rank);
    RANK_CHECK(async_error == OCCL_ERR_INTERRUPTED, rank, cat("async error ", occl_status_string(async_error)));
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // alive while rank 1 finds out
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(Options, InterruptEndsABlockingRecv) {
  JobResult res = run_ranks(opts(2), [](occl_comm_t comm, int rank, int) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return 0;  // never sends
    }
    int64_t v = 0;
    Tensor1D t(&v, 1, dl_int(64));
    occl_options_t o = OCCL_OPTIONS_INIT;
    o.interrupt = interrupt_after_deadline;
    g_interrupt_after = Clock::now() + std::chrono::milliseconds(200);
    auto t0 = Clock::now();
    occl_status_t st = occl_recv_ex(&t, 1, comm, &o, nullptr);
    double s = seconds_since(t0);
    RANK_CHECK(st == OCCL_ERR_INTERRUPTED, rank, cat("status ", occl_status_string(st), ": ", occl_last_error()));
    RANK_CHECK(s < 0.5, rank, cat("interrupted after ", s, " s; the check fired at 0.2 s"));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(Options, AnInterruptCheckThatSaysNoChangesNothing) {
  JobResult res = run_ranks(opts(2), [](occl_comm_t comm, int rank, int n) {
    std::atomic<int> calls{0};
    occl_options_t o = OCCL_OPTIONS_INIT;
    o.interrupt = never_interrupt;
    o.interrupt_data = &calls;
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (check_sum(comm, rank, n, &o) != 0) return 1;
    // Rank 0 waited ~300 ms for rank 1, asking the check as it went.
    RANK_CHECK(rank != 0 || calls.load() >= 3, rank, cat("interrupt asked ", calls.load(), " times in 300 ms"));
    return check_sum(comm, rank, n, &o);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

struct HookOwner {
  std::thread::id owner;
  std::atomic<int> calls{0};
  std::atomic<bool> foreign{false};
};

int record_thread(void* data) {
  auto* h = static_cast<HookOwner*>(data);
  h->calls.fetch_add(1);
  if (std::this_thread::get_id() != h->owner) h->foreign.store(true);
  return 0;
}

TEST(Options, AnInterruptCheckIsOnlyAskedOnTheCallingThreadDuringItsCall) {
  // A blocking collective's check must not stay behind in the engine, where
  // a later operation run by the communicator's worker would call it (with
  // a caller's stack object long gone).
  JobResult res = run_ranks(opts(2), [](occl_comm_t comm, int rank, int n) {
    HookOwner hook;
    hook.owner = std::this_thread::get_id();
    occl_options_t o = OCCL_OPTIONS_INIT;
    o.interrupt = record_thread;
    o.interrupt_data = &hook;
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (check_sum(comm, rank, n, &o) != 0) return 1;
    RANK_CHECK(rank != 0 || hook.calls.load() > 0, rank, "the check was never asked while rank 0 waited");
    const int before = hook.calls.load();
    // Asynchronous point-to-point work runs on the worker and waits there.
    int64_t v = rank;
    Tensor1D t(&v, 1, dl_int(64));
    occl_work_t w = nullptr;
    if (rank == 0) {
      RANK_OK(occl_recv(&t, 1, comm, &w), rank);
      RANK_OK(occl_work_wait(w), rank);
      RANK_CHECK(v == 1, rank, cat("received ", v));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      RANK_OK(occl_send(&t, 0, comm, &w), rank);
      RANK_OK(occl_work_wait(w), rank);
    }
    RANK_OK(occl_work_free(w), rank);
    RANK_CHECK(!hook.foreign.load(), rank, "the check was called on another thread");
    RANK_CHECK(hook.calls.load() == before, rank,
               cat("the check was asked ", hook.calls.load() - before, " times after its call returned"));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// Non-blocking creation

TEST(NonBlocking, InitReturnsAtOnceAndBecomesReady) {
  JobResult res = run_ranks(opts(3, false), [](occl_comm_t, int rank, int n) {
    const char* init = std::getenv("OCCL_TEST_INIT");
    RANK_CHECK(init != nullptr, rank, "OCCL_TEST_INIT is not set");
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    occl_config_t cfg = config(0);
    occl_comm_t comm = nullptr;
    auto t0 = Clock::now();
    occl_status_t st = occl_comm_init(&comm, init, rank, n, &cfg);
    RANK_CHECK(st == OCCL_ERR_IN_PROGRESS && comm != nullptr, rank,
               cat("non-blocking init returned ", occl_status_string(st), ": ", occl_last_error()));
    RANK_CHECK(seconds_since(t0) < 0.2, rank, cat("non-blocking init took ", seconds_since(t0), " s"));
    if (rank != 2) {
      // Rank 2 has not started yet: nothing can be ready.
      int r = -1;
      st = occl_comm_rank(comm, &r);
      RANK_CHECK(st == OCCL_ERR_IN_PROGRESS, rank, cat("rank() before ready: ", occl_status_string(st)));
      occl_status_t state = OCCL_SUCCESS;
      RANK_OK(occl_comm_get_async_error(comm, &state), rank);
      RANK_CHECK(state == OCCL_ERR_IN_PROGRESS, rank, cat("state before ready: ", occl_status_string(state)));
    }
    occl_status_t state = poll_ready(comm, 30);
    RANK_CHECK(state == OCCL_SUCCESS, rank, cat("ready state ", occl_status_string(state), ": ", occl_last_error()));
    if (check_sum(comm, rank, n) != 0) return 1;
    RANK_OK(occl_comm_destroy(comm), rank);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

/// Rank 0 starts a non-blocking init of a 2-rank job whose rank 1 never
/// comes, then aborts it: the abort must return promptly.
void abort_during_rendezvous(const std::string& how) {
  JobOptions o = opts(2, false);
  o.init = how;
  JobResult res = run_ranks(o, [](occl_comm_t, int rank, int n) {
    if (rank == 1) return 0;
    const char* init = std::getenv("OCCL_TEST_INIT");
    RANK_CHECK(init != nullptr, rank, "OCCL_TEST_INIT is not set");
    occl_config_t cfg = config(0);
    occl_comm_t comm = nullptr;
    occl_status_t st = occl_comm_init(&comm, init, rank, n, &cfg);
    RANK_CHECK(st == OCCL_ERR_IN_PROGRESS, rank, cat("init: ", occl_status_string(st), ": ", occl_last_error()));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    occl_status_t state = OCCL_SUCCESS;
    RANK_OK(occl_comm_get_async_error(comm, &state), rank);
    RANK_CHECK(state == OCCL_ERR_IN_PROGRESS, rank, cat("state while rank 1 is missing: ", occl_status_string(state)));
    auto t0 = Clock::now();
    RANK_OK(occl_comm_abort(comm), rank);
    double s = seconds_since(t0);
    RANK_CHECK(s < 0.5, rank, cat("abort during the rendezvous took ", s, " s"));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(NonBlocking, AbortDuringTcpRendezvousIsPrompt) { abort_during_rendezvous("tcp"); }
TEST(NonBlocking, AbortDuringFileRendezvousIsPrompt) { abort_during_rendezvous("file"); }

TEST(NonBlocking, FailedInitIsReportedByTheAsyncErrorQuery) {
  JobResult res = run_ranks(opts(2, false), [](occl_comm_t, int rank, int n) {
    if (rank == 1) return 0;  // never joins
    const char* init = std::getenv("OCCL_TEST_INIT");
    RANK_CHECK(init != nullptr, rank, "OCCL_TEST_INIT is not set");
    occl_config_t cfg = config(0, 500);
    occl_comm_t comm = nullptr;
    occl_status_t st = occl_comm_init(&comm, init, rank, n, &cfg);
    RANK_CHECK(st == OCCL_ERR_IN_PROGRESS, rank, cat("init: ", occl_status_string(st)));
    occl_status_t state = poll_ready(comm, 10);
    std::string msg = occl_last_error();
    RANK_CHECK(state == OCCL_ERR_TIMEOUT, rank, cat("state ", occl_status_string(state), ": ", msg));
    RANK_CHECK(contains_ci(msg, "rank(s) 1"), rank, "the message names the missing rank: " + msg);
    // Operations on the failed handle say so; destroy frees it.
    st = occl_barrier(comm, nullptr);
    RANK_CHECK(st == OCCL_ERR_COMM_FAILED && contains_ci(occl_last_error(), "could not be created"), rank,
               cat("barrier on a failed handle: ", occl_status_string(st), ": ", occl_last_error()));
    RANK_OK(occl_comm_destroy(comm), rank);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(NonBlocking, SplitByParityWithNoColor) {
  JobResult res = run_ranks(opts(5), [](occl_comm_t comm, int rank, int) {
    occl_config_t cfg = config(0);
    // Rank 4 takes no part; 0,2 and 1,3 form two communicators.
    int color = rank == 4 ? OCCL_SPLIT_NOCOLOR : rank % 2;
    occl_comm_t child = reinterpret_cast<occl_comm_t>(&cfg);  // overwritten
    occl_status_t st = occl_comm_split(comm, color, rank, &cfg, &child);
    if (rank == 4) {
      RANK_CHECK(st == OCCL_SUCCESS && child == nullptr, rank,
                 cat("NOCOLOR: ", occl_status_string(st), ", child ", child == nullptr ? "NULL" : "set"));
    } else {
      RANK_CHECK(st == OCCL_ERR_IN_PROGRESS && child != nullptr, rank,
                 cat("split: ", occl_status_string(st), ": ", occl_last_error()));
      occl_status_t state = poll_ready(child, 30);
      RANK_CHECK(state == OCCL_SUCCESS, rank, cat("child state ", occl_status_string(state), ": ", occl_last_error()));
      int size = -1;
      RANK_OK(occl_comm_size(child, &size), rank);
      RANK_CHECK(size == 2, rank, cat("child size ", size));
      if (check_sum(child, rank, 2) != 0) return 1;
      RANK_OK(occl_comm_destroy(child), rank);
    }
    // The parent still works after the split (its part ran in order).
    return check_sum(comm, rank, 5);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(NonBlocking, AbortDuringSplitIsPrompt) {
  JobResult res = run_ranks(opts(2), [](occl_comm_t comm, int rank, int) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return 0;  // never joins the split
    }
    occl_config_t cfg = config(0);
    occl_comm_t child = nullptr;
    occl_status_t st = occl_comm_split(comm, 0, 0, &cfg, &child);
    RANK_CHECK(st == OCCL_ERR_IN_PROGRESS, rank, cat("split: ", occl_status_string(st)));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto t0 = Clock::now();
    RANK_OK(occl_comm_abort(child), rank);
    RANK_CHECK(seconds_since(t0) < 0.2, rank, cat("abort during split took ", seconds_since(t0), " s"));
    // The parent's split operation ends with ABORTED soon after, and the
    // parent reports it as its asynchronous error.
    auto t1 = Clock::now();
    occl_status_t state = OCCL_SUCCESS;
    while (seconds_since(t1) < 5) {
      RANK_OK(occl_comm_get_async_error(comm, &state), rank);
      if (state != OCCL_SUCCESS) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    RANK_CHECK(state == OCCL_ERR_ABORTED, rank, cat("parent async error ", occl_status_string(state)));
    RANK_CHECK(seconds_since(t1) < 1.0, rank, cat("the parent's split ended after ", seconds_since(t1), " s"));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(NonBlocking, BadBlockingValueIsRejected) {
  JobResult res = run_ranks(opts(1, false), [](occl_comm_t, int rank, int n) {
    const char* init = std::getenv("OCCL_TEST_INIT");
    occl_config_t cfg = config(7);
    occl_comm_t comm = nullptr;
    occl_status_t st = occl_comm_init(&comm, init, rank, n, &cfg);
    RANK_CHECK(st == OCCL_ERR_INVALID_ARGUMENT && comm == nullptr && contains_ci(occl_last_error(), "blocking"), rank,
               cat("blocking = 7: ", occl_status_string(st), ": ", occl_last_error()));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(AsyncError, AFailedAsyncOperationIsTheCommunicatorsAsyncError) {
  JobResult res = run_ranks(opts(2), [](occl_comm_t comm, int rank, int) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return 0;
    }
    occl_options_t o = OCCL_OPTIONS_INIT;
    o.timeout_ms = 200;
    occl_work_t w = nullptr;
    RANK_OK(occl_barrier_ex(comm, &o, &w), rank);
    occl_status_t st = occl_work_wait(w);
    RANK_CHECK(st == OCCL_ERR_TIMEOUT, rank, cat("async barrier: ", occl_status_string(st)));
    RANK_OK(occl_work_free(w), rank);
    occl_status_t state = OCCL_SUCCESS;
    RANK_OK(occl_comm_get_async_error(comm, &state), rank);
    RANK_CHECK(state == OCCL_ERR_TIMEOUT && contains_ci(occl_last_error(), "barrier"), rank,
               cat("async error ", occl_status_string(state), ": ", occl_last_error()));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

}  // namespace

// ---------------------------------------------------------------------------
// IPv6: one socket layer for the rendezvous and the transports

namespace ipv6 {

int free_port_v6() {
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 in{};
  in.sin6_family = AF_INET6;
  in.sin6_addr = in6addr_loopback;
  socklen_t len = sizeof in;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&in), sizeof in) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&in), &len) == 0) {
    port = ntohs(in.sin6_port);
  }
  ::close(fd);
  return port;
}

/// Both ranks meet at tcp://[::1]:port; with OMNICCL_SOCKET_ADDR=::1 the
/// mesh listens on ::1 too, so every byte crosses IPv6.
void rendezvous_and_links_on_v6(const char* transport) {
  int port = free_port_v6();
  if (port < 0) GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  JobOptions o = opts(3, false);
  o.env = {{"OMNICCL_SOCKET_ADDR", "::1"}, {"OMNICCL_TRANSPORT", transport}};
  const std::string init = "tcp://[::1]:" + std::to_string(port);
  JobResult res = run_ranks(o, [&](occl_comm_t, int rank, int n) {
    occl_config_t cfg = config(1);
    occl_comm_t comm = nullptr;
    RANK_OK(occl_comm_init(&comm, init.c_str(), rank, n, &cfg), rank);
    const char* name = nullptr;
    RANK_OK(occl_comm_transport(comm, &name), rank);
    RANK_CHECK(std::string(name) == transport, rank, cat("transport ", name));
    if (check_sum(comm, rank, n) != 0) return 1;
    RANK_OK(occl_comm_destroy(comm), rank);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(Ipv6, TcpLinksOverLoopbackV6) { rendezvous_and_links_on_v6("tcp"); }
TEST(Ipv6, SharedMemoryWithControlSocketsFromAV6Rendezvous) { rendezvous_and_links_on_v6("shm"); }

}  // namespace ipv6
