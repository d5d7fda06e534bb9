// Synchronous sends (occl_ssend_tagged: complete only once a receive has
// matched the message, to another rank through the receiver's ack, to this
// rank itself when a receive takes it) and cancellation (occl_work_cancel of
// a pending receive or of an unmatched synchronous send to itself), with
// real ranks through the C ABI.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "reference.h"

namespace {

using occl_ref::cat;
using omniccl::testing::all_reduce_works;
using omniccl::testing::contains_ci;
using omniccl::testing::dl_int;
using omniccl::testing::job_options;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::Tensor1D;
using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

class Ssend : public ::testing::TestWithParam<std::string> {};

// To another rank: the send completes only after the receiver (which waits
// 300 ms before posting its receive) has matched it; a standard send of the
// same message completes without waiting for the receive. Small and large
// messages, blocking and not.
TEST_P(Ssend, ToAnotherRankCompletesOnlyOnceMatched) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    constexpr int64_t kDelayMs = 300;
    for (size_t count : {size_t(1), size_t(1) << 18}) {  // 4 B and 1 MiB
      std::vector<int32_t> buf(count, rank == 0 ? 7 : 0);
      Tensor1D t(buf.data(), int64_t(count), dl_int(32));
      if (rank == 0) {
        // Non-blocking: still pending while the receiver waits.
        auto t0 = Clock::now();
        occl_work_t w = nullptr;
        RANK_OK(occl_ssend_tagged(&t, 1, 4, comm, nullptr, &w), rank);
        std::this_thread::sleep_for(std::chrono::milliseconds(kDelayMs / 3));
        RANK_CHECK(occl_work_test(w) == OCCL_ERR_IN_PROGRESS, rank,
                   cat("issend of ", count, " elements completed before its receive was posted"));
        RANK_OK(occl_work_wait(w), rank);
        RANK_OK(occl_work_free(w), rank);
        const int64_t waited = ms_since(t0);
        RANK_CHECK(waited >= kDelayMs - 50, rank, cat("issend completed after ", waited, " ms"));
        // Blocking: returns only after the match.
        t0 = Clock::now();
        RANK_OK(occl_ssend_tagged(&t, 1, 5, comm, nullptr, nullptr), rank);
        const int64_t blocked = ms_since(t0);
        RANK_CHECK(blocked >= kDelayMs - 50, rank, cat("ssend returned after ", blocked, " ms"));
        // A standard send does not wait for the receive (small messages).
        if (count == 1) {
          t0 = Clock::now();
          RANK_OK(occl_send_tagged(&t, 1, 6, comm, nullptr, nullptr), rank);
          const int64_t standard = ms_since(t0);
          RANK_CHECK(standard < kDelayMs - 50, rank, cat("a standard send waited ", standard, " ms"));
        }
      } else {
        for (int tag : {4, 5}) {
          std::this_thread::sleep_for(std::chrono::milliseconds(kDelayMs));
          std::fill(buf.begin(), buf.end(), 0);
          occl_recv_status_t st{};
          RANK_OK(occl_recv_tagged(&t, 0, tag, comm, nullptr, &st, nullptr), rank);
          RANK_CHECK(buf.front() == 7 && buf.back() == 7 && st.tag == tag && st.count == int64_t(count), rank,
                     cat("received ", buf.front(), " with tag ", st.tag, " count ", st.count));
        }
        if (count == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(kDelayMs));
          RANK_OK(occl_recv_tagged(&t, 0, 6, comm, nullptr, nullptr, nullptr), rank);
        }
      }
    }
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// A receiver that never matches the message: the synchronous send ends with
// an error (its deadline; the receiver leaving), never a hang.
TEST_P(Ssend, FailsWhenTheReceiverNeverMatches) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return 0;  // leaves without receiving
    }
    int32_t v = 1;
    Tensor1D t(&v, 1, dl_int(32));
    occl_options_t o = OCCL_OPTIONS_INIT;
    o.timeout_ms = 300;
    auto t0 = Clock::now();
    occl_status_t s = occl_ssend_tagged(&t, 1, 77, comm, &o, nullptr);
    const int64_t took = ms_since(t0);
    RANK_CHECK(
        s == OCCL_ERR_TIMEOUT && took < 1400, rank,
        cat("ssend with a 300 ms deadline: ", occl_status_string(s), " after ", took, " ms: ", occl_last_error()));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
  JobResult left = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int) {
    if (rank == 1) return 0;  // leaves at once without receiving
    int32_t v = 1;
    Tensor1D t(&v, 1, dl_int(32));
    auto t0 = Clock::now();
    occl_status_t s = occl_ssend_tagged(&t, 1, 78, comm, nullptr, nullptr);
    const int64_t took = ms_since(t0);
    RANK_CHECK((s == OCCL_ERR_PEER_FAILURE || s == OCCL_ERR_MISMATCH) && took < 10000, rank,
               cat("ssend to a rank that left: ", occl_status_string(s), " after ", took, " ms: ", occl_last_error()));
    return 0;
  });
  EXPECT_TRUE(left.ok()) << left.summary();
}

// Both ranks exchange by issend + recv (as mpi4py's ring test does): each
// issend is matched by the other's receive, nothing deadlocks.
TEST_P(Ssend, ExchangeByIssendAndRecv) {
  JobResult res = run_ranks(job_options(3, GetParam()), [](occl_comm_t comm, int rank, int n) {
    for (int i = 0; i < 20; ++i) {
      int32_t out = rank * 100 + i, in = -1;
      Tensor1D to(&out, 1, dl_int(32)), ti(&in, 1, dl_int(32));
      occl_work_t w = nullptr;
      RANK_OK(occl_ssend_tagged(&to, (rank + 1) % n, 0, comm, nullptr, &w), rank);
      RANK_OK(occl_recv_tagged(&ti, (rank + n - 1) % n, 0, comm, nullptr, nullptr, nullptr), rank);
      RANK_OK(occl_work_wait(w), rank);
      RANK_OK(occl_work_free(w), rank);
      RANK_CHECK(in == ((rank + n - 1) % n) * 100 + i, rank, cat("round ", i, " got ", in));
    }
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// The exchange mpi4py-style object sends make of an object over 64 KiB (the
// Python binding's isend/issend/irecv): each rank posts a receive for the
// first part, sends its first part (standard) and then the rest
// (synchronous), waits for the first part, receives the rest blocking, then
// waits for its synchronous send. Repeated, with small exchanges between, so
// the steps begin and end at every point of the pattern.
TEST_P(Ssend, TwoPartObjectExchangeRepeated) {
  const int rounds = std::getenv("OMNICCL_TEST_ROUNDS") ? std::atoi(std::getenv("OMNICCL_TEST_ROUNDS")) : 100;
  JobResult res = run_ranks(job_options(2, GetParam()), [rounds](occl_comm_t comm, int rank, int n) {
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    constexpr size_t kFirst = (64 << 10) + 8, kRest = (300 << 10) + 1 - (kFirst - 16);
    std::vector<int8_t> first_out(kFirst), first_in(kFirst), rest_out(kRest), rest_in(kRest);
    for (int i = 0; i < rounds; ++i) {
      // A small isend and a blocking ANY_SOURCE receive first.
      int32_t small_out = rank * 1000 + i, small_in = -1;
      Tensor1D so(&small_out, 1, dl_int(32)), si(&small_in, 1, dl_int(32));
      occl_work_t ws = nullptr;
      RANK_OK(occl_send_tagged(&so, right, 5, comm, nullptr, &ws), rank);
      RANK_OK(occl_recv_tagged(&si, OCCL_ANY_SOURCE, 5, comm, nullptr, nullptr, nullptr), rank);
      RANK_OK(occl_work_wait(ws), rank);
      RANK_OK(occl_work_free(ws), rank);
      RANK_CHECK(small_in == left * 1000 + i, rank, cat("round ", i, ": small message ", small_in));
      std::fill(first_out.begin(), first_out.end(), int8_t(rank + i));
      std::fill(rest_out.begin(), rest_out.end(), int8_t(rank + 2 * i));
      Tensor1D fo(first_out.data(), int64_t(kFirst), dl_int(8)), fi(first_in.data(), int64_t(kFirst), dl_int(8));
      Tensor1D ro(rest_out.data(), int64_t(kRest), dl_int(8)), ri(rest_in.data(), int64_t(kRest), dl_int(8));
      occl_work_t wr = nullptr, w1 = nullptr, w2 = nullptr;
      RANK_OK(occl_recv_tagged(&fi, left, 6, comm, nullptr, nullptr, &wr), rank);
      RANK_OK(occl_send_tagged(&fo, right, 6, comm, nullptr, &w1), rank);
      RANK_OK(occl_ssend_tagged(&ro, right, 6, comm, nullptr, &w2), rank);
      RANK_OK(occl_work_wait(wr), rank);
      RANK_OK(occl_recv_tagged(&ri, left, 6, comm, nullptr, nullptr, nullptr), rank);
      RANK_OK(occl_work_wait(w2), rank);
      RANK_OK(occl_work_wait(w1), rank);
      for (occl_work_t w : {wr, w1, w2}) RANK_OK(occl_work_free(w), rank);
      RANK_CHECK(first_in.front() == int8_t(left + i) && first_in.back() == int8_t(left + i), rank,
                 cat("round ", i, ": first part"));
      RANK_CHECK(rest_in.front() == int8_t(left + 2 * i) && rest_in.back() == int8_t(left + 2 * i), rank,
                 cat("round ", i, ": rest"));
    }
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// To this rank itself: pending until a receive takes it (a probe does not);
// a blocking one with no receive posted is an error, not a hang; one with a
// receive posted first completes.
TEST_P(Ssend, ToSelfCompletesWhenReceived) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    int32_t a = 10 + rank, got = 0;
    Tensor1D ta(&a, 1, dl_int(32)), tg(&got, 1, dl_int(32));
    occl_work_t w = nullptr;
    RANK_OK(occl_ssend_tagged(&ta, rank, 3, comm, nullptr, &w), rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    RANK_CHECK(occl_work_test(w) == OCCL_ERR_IN_PROGRESS, rank, "issend to self completed before its receive");
    occl_recv_status_t st{};
    RANK_OK(occl_probe(rank, 3, comm, nullptr, &st), rank);
    RANK_CHECK(occl_work_test(w) == OCCL_ERR_IN_PROGRESS, rank, "a probe completed the issend");
    RANK_OK(occl_recv_tagged(&tg, rank, 3, comm, nullptr, &st, nullptr), rank);
    RANK_CHECK(got == 10 + rank && st.source == rank && st.tag == 3, rank, cat("received ", got));
    // Complete by the time its receive has returned (a caller may test it at once).
    RANK_CHECK(occl_work_test(w) == OCCL_SUCCESS, rank, "issend to self not complete when its receive returned");
    RANK_OK(occl_work_free(w), rank);
    // Blocking, no receive posted: refused at once.
    occl_status_t s = occl_ssend_tagged(&ta, rank, 8, comm, nullptr, nullptr);
    RANK_CHECK(s == OCCL_ERR_MISMATCH && contains_ci(occl_last_error(), "itself"), rank,
               cat(occl_status_string(s), ": ", occl_last_error()));
    int flag = 1;
    RANK_OK(occl_iprobe(rank, 8, comm, nullptr, &flag, nullptr), rank);
    RANK_CHECK(flag == 0, rank, "the refused ssend left a message behind");
    // Blocking, receive posted first: completes.
    got = 0;
    RANK_OK(occl_recv_tagged(&tg, rank, 9, comm, nullptr, nullptr, &w), rank);
    RANK_OK(occl_ssend_tagged(&ta, rank, 9, comm, nullptr, nullptr), rank);
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_free(w), rank);
    RANK_CHECK(got == 10 + rank, rank, cat("irecv then ssend to self got ", got));
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Cancel: a pending receive (from itself, or from a rank that never sends)
// and an unmatched issend to itself are cancelled, complete successfully and
// move nothing; a completed one is not cancelled; bad arguments are errors.
TEST_P(Ssend, CancelPendingOperations) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    int32_t a = 5, got = -1;
    Tensor1D ta(&a, 1, dl_int(32)), tg(&got, 1, dl_int(32));
    // A receive from itself.
    occl_work_t w = nullptr;
    RANK_OK(occl_recv_tagged(&tg, rank, 1, comm, nullptr, nullptr, &w), rank);
    int cancelled = 0;
    RANK_OK(occl_work_cancel(w, comm, &cancelled), rank);
    RANK_CHECK(cancelled == 1, rank, "a pending receive from itself was not cancelled");
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_free(w), rank);
    // The next message with that tag goes to the next receive, not the cancelled one.
    RANK_OK(occl_send_tagged(&ta, rank, 1, comm, nullptr, nullptr), rank);
    RANK_CHECK(got == -1, rank, "the cancelled receive got the message");
    int32_t got2 = 0;
    Tensor1D tg2(&got2, 1, dl_int(32));
    RANK_OK(occl_recv_tagged(&tg2, rank, 1, comm, nullptr, nullptr, nullptr), rank);
    RANK_CHECK(got2 == 5, rank, cat("the receive after the cancelled one got ", got2));
    // A receive from the other rank, which sends nothing.
    RANK_OK(occl_recv_tagged(&tg, 1 - rank, 2, comm, nullptr, nullptr, &w), rank);
    RANK_OK(occl_work_cancel(w, comm, &cancelled), rank);
    RANK_CHECK(cancelled == 1, rank, "a pending receive from the other rank was not cancelled");
    RANK_OK(occl_work_wait(w), rank);
    RANK_CHECK(got == -1, rank, "the cancelled receive wrote");
    // Cancelling a completed operation does nothing.
    RANK_OK(occl_work_cancel(w, comm, &cancelled), rank);
    RANK_CHECK(cancelled == 0, rank, "a completed receive reported cancelled");
    RANK_OK(occl_work_free(w), rank);
    // An issend to itself that no receive took: cancelled, and its message gone.
    RANK_OK(occl_ssend_tagged(&ta, rank, 3, comm, nullptr, &w), rank);
    RANK_OK(occl_work_cancel(w, comm, &cancelled), rank);
    RANK_CHECK(cancelled == 1, rank, "an unmatched issend to itself was not cancelled");
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_free(w), rank);
    int flag = 1;
    RANK_OK(occl_iprobe(rank, 3, comm, nullptr, &flag, nullptr), rank);
    RANK_CHECK(flag == 0, rank, "the cancelled issend's message is still there");
    // A standard send (already complete) is not cancelled.
    RANK_OK(occl_send_tagged(&ta, rank, 4, comm, nullptr, &w), rank);
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_cancel(w, comm, &cancelled), rank);
    RANK_CHECK(cancelled == 0, rank, "a completed send reported cancelled");
    RANK_OK(occl_work_free(w), rank);
    RANK_OK(occl_recv_tagged(&tg2, rank, 4, comm, nullptr, nullptr, nullptr), rank);
    // Bad arguments.
    occl_status_t s = occl_work_cancel(nullptr, comm, &cancelled);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT && cancelled == 0, rank, cat("NULL work gave ", occl_status_string(s)));
    // A token each way before the collective: a rank that moved on to it
    // while the other still had its receive from it posted would fail that
    // receive ("cannot be matched") before the cancel came (a race that
    // faster wake-ups made frequent).
    int32_t token = 20 + rank, theirs = -1;
    Tensor1D tt(&token, 1, dl_int(32)), th(&theirs, 1, dl_int(32));
    RANK_OK(occl_send_tagged(&tt, 1 - rank, 5, comm, nullptr, nullptr), rank);
    RANK_OK(occl_recv_tagged(&th, 1 - rank, 5, comm, nullptr, nullptr, nullptr), rank);
    RANK_CHECK(theirs == 21 - rank, rank, cat("the token from the other rank was ", theirs));
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Transports, Ssend, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
