// Matched probes (occl_mprobe / occl_improbe, then occl_mrecv): the message a
// matched probe finds is taken out of matching, so only occl_mrecv with its
// handle receives it, whatever other receives are posted; with real ranks
// through the C ABI.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

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

class Mprobe : public ::testing::TestWithParam<std::string> {};

// Rank 1 sends two messages with one tag; rank 0's matched probe takes the
// first, so a plain receive then gets the second, and occl_mrecv the first.
TEST_P(Mprobe, TakesTheMessageOutOfMatching) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank == 1) {
      int32_t a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
      Tensor1D ta(a, 3, dl_int(32)), tb(b, 3, dl_int(32));
      RANK_OK(occl_send_tagged(&ta, 0, 5, comm, nullptr, nullptr), rank);
      RANK_OK(occl_send_tagged(&tb, 0, 5, comm, nullptr, nullptr), rank);
      return all_reduce_works(comm, rank, n);
    }
    occl_message_t m = 12345;
    occl_recv_status_t st{};
    RANK_OK(occl_mprobe(OCCL_ANY_SOURCE, 5, comm, nullptr, &m, &st), rank);
    RANK_CHECK(m != OCCL_MESSAGE_NULL && m != OCCL_MESSAGE_NO_PROC, rank, cat("mprobe's message ", m));
    RANK_CHECK(st.source == 1 && st.tag == 5 && st.count == 3 && st.bytes == 12, rank,
               cat("mprobe status ", st.source, " ", st.tag, " ", st.count));
    int32_t got[3] = {0, 0, 0};
    Tensor1D tg(got, 3, dl_int(32));
    RANK_OK(occl_recv_tagged(&tg, 1, 5, comm, nullptr, &st, nullptr), rank);
    RANK_CHECK(got[0] == 4 && got[2] == 6, rank, cat("a plain receive after mprobe got ", got[0], "; want 4"));
    RANK_OK(occl_mrecv(&tg, &m, comm, nullptr, &st, nullptr), rank);
    RANK_CHECK(got[0] == 1 && got[2] == 3 && st.source == 1 && st.tag == 5 && st.count == 3, rank,
               cat("mrecv got ", got[0], " from ", st.source));
    RANK_CHECK(m == OCCL_MESSAGE_NULL, rank, "mrecv left its message set");
    // Received already: refused, naming the message.
    occl_status_t s = occl_mrecv(&tg, &m, comm, nullptr, &st, nullptr);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT && contains_ci(occl_last_error(), "MESSAGE_NULL"), rank,
               cat(occl_status_string(s), ": ", occl_last_error()));
    occl_message_t stale = 999;
    s = occl_mrecv(&tg, &stale, comm, nullptr, &st, nullptr);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT && contains_ci(occl_last_error(), "not held"), rank,
               cat(occl_status_string(s), ": ", occl_last_error()));
    // Nothing there: improbe says so.
    int flag = 1;
    m = 7;
    RANK_OK(occl_improbe(1, 5, comm, nullptr, &flag, &m, nullptr), rank);
    RANK_CHECK(flag == 0 && m == OCCL_MESSAGE_NULL, rank, cat("improbe with nothing: ", flag, " ", m));
    s = occl_mprobe(0, 1, comm, nullptr, nullptr, nullptr);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT, rank, cat("mprobe with NULL message gave ", occl_status_string(s)));
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// improbe until the message is there, then a non-blocking mrecv (Imrecv);
// truncation through mrecv leaves the communicator usable; PROC_NULL.
TEST_P(Mprobe, ImprobeImrecvTruncationAndProcNull) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    const int other = 1 - rank;
    int32_t out[4] = {rank, rank, rank, rank};
    Tensor1D to(out, 4, dl_int(32));
    RANK_OK(occl_send_tagged(&to, other, 8, comm, nullptr, nullptr), rank);
    RANK_OK(occl_send_tagged(&to, other, 9, comm, nullptr, nullptr), rank);
    int flag = 0;
    occl_message_t m = OCCL_MESSAGE_NULL;
    occl_recv_status_t st{};
    for (int i = 0; i < 20000 && flag == 0; ++i) {
      RANK_OK(occl_improbe(OCCL_ANY_SOURCE, 8, comm, nullptr, &flag, &m, &st), rank);
      if (flag == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    RANK_CHECK(flag == 1 && st.source == other && st.count == 4, rank, "improbe never found the message");
    int32_t got[4] = {-1, -1, -1, -1};
    Tensor1D tg(got, 4, dl_int(32));
    occl_work_t w = nullptr;
    RANK_OK(occl_mrecv(&tg, &m, comm, nullptr, nullptr, &w), rank);
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_recv_status(w, &st), rank);
    RANK_OK(occl_work_free(w), rank);
    RANK_CHECK(got[3] == other && st.tag == 8 && st.count == 4, rank, cat("imrecv got ", got[3]));
    // Into a smaller tensor: truncated, first part kept, communicator usable.
    RANK_OK(occl_mprobe(other, 9, comm, nullptr, &m, nullptr), rank);
    int32_t small[2] = {-1, -1};
    Tensor1D ts(small, 2, dl_int(32));
    occl_status_t s = occl_mrecv(&ts, &m, comm, nullptr, &st, nullptr);
    RANK_CHECK(s == OCCL_ERR_TRUNCATED && small[1] == other && st.count == 2, rank,
               cat(occl_status_string(s), ": ", occl_last_error()));
    // PROC_NULL.
    RANK_OK(occl_mprobe(OCCL_PROC_NULL, 0, comm, nullptr, &m, &st), rank);
    RANK_CHECK(m == OCCL_MESSAGE_NO_PROC && st.source == OCCL_PROC_NULL, rank, cat("mprobe PROC_NULL: ", m));
    RANK_OK(occl_mrecv(&tg, &m, comm, nullptr, &st, nullptr), rank);
    RANK_CHECK(st.source == OCCL_PROC_NULL && st.count == 0 && m == OCCL_MESSAGE_NULL, rank, "mrecv NO_PROC");
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// A matched probe of a synchronous send to this rank itself does not
// complete it; the mrecv does. A posted receive cannot take the probed message.
TEST_P(Mprobe, OfASynchronousSendToSelf) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    int32_t v = 40 + rank, got = 0;
    Tensor1D tv(&v, 1, dl_int(32)), tg(&got, 1, dl_int(32));
    occl_work_t sw = nullptr, rw = nullptr;
    RANK_OK(occl_ssend_tagged(&tv, rank, 3, comm, nullptr, &sw), rank);
    occl_message_t m = OCCL_MESSAGE_NULL;
    RANK_OK(occl_mprobe(rank, 3, comm, nullptr, &m, nullptr), rank);
    RANK_CHECK(occl_work_test(sw) == OCCL_ERR_IN_PROGRESS, rank, "mprobe completed the issend");
    // An irecv posted now must not get the probed message.
    int32_t other = -1;
    Tensor1D to(&other, 1, dl_int(32));
    RANK_OK(occl_recv_tagged(&to, rank, 3, comm, nullptr, nullptr, &rw), rank);
    RANK_OK(occl_mrecv(&tg, &m, comm, nullptr, nullptr, nullptr), rank);
    RANK_CHECK(got == 40 + rank && other == -1, rank, cat("mrecv got ", got, ", the irecv ", other));
    RANK_OK(occl_work_wait(sw), rank);
    RANK_OK(occl_work_free(sw), rank);
    int cancelled = 0;
    RANK_OK(occl_work_cancel(rw, comm, &cancelled), rank);
    RANK_CHECK(cancelled == 1, rank, "the irecv was not pending any more");
    RANK_OK(occl_work_wait(rw), rank);
    RANK_OK(occl_work_free(rw), rank);
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Transports, Mprobe, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
