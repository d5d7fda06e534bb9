// Message probes through the C ABI with real ranks: occl_iprobe before and
// after a send, occl_probe with OCCL_ANY_SOURCE / OCCL_ANY_TAG, the probed
// message then received by a receive naming its source and tag, arrival
// order, OCCL_PROC_NULL, and bad arguments.
#include <gtest/gtest.h>

#include <chrono>
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
using omniccl::testing::dl_float;
using omniccl::testing::dl_int;
using omniccl::testing::job_options;
using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::Tensor1D;

std::string text(const occl_recv_status_t& st) {
  return cat("source ", st.source, " tag ", st.tag, " bytes ", st.bytes, " count ", st.count);
}

class Probe : public ::testing::TestWithParam<std::string> {};

// Before the send there is nothing to find (flag 0, status untouched); once
// the sender has sent (it says so by a collective after the send), iprobe
// finds the message without receiving it, and the receive gets it.
TEST_P(Probe, IprobeBeforeAndAfterASend) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank == 0) {
      if (all_reduce_works(comm, rank, n) != 0) return 1;  // rank 1 has iprobed with nothing sent
      int32_t v[3] = {7, 8, 9};
      Tensor1D t(v, 3, dl_int(32));
      RANK_OK(occl_send_tagged(&t, 1, 3, comm, nullptr, nullptr), rank);
      return all_reduce_works(comm, rank, n);
    }
    int flag = -1;
    occl_recv_status_t st{11, 12, 13, 14};
    RANK_OK(occl_iprobe(0, 3, comm, nullptr, &flag, &st), rank);
    RANK_CHECK(flag == 0 && st.source == 11 && st.count == 14, rank, cat("iprobe before the send: flag ", flag));
    RANK_OK(occl_iprobe(OCCL_ANY_SOURCE, OCCL_ANY_TAG, comm, nullptr, &flag, &st), rank);
    RANK_CHECK(flag == 0, rank, cat("iprobe(ANY, ANY) before the send: flag ", flag));
    if (all_reduce_works(comm, rank, n) != 0) return 1;
    // Sent now, but maybe not yet here: poll (bounded).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    flag = 0;
    while (flag == 0 && std::chrono::steady_clock::now() < until) {
      RANK_OK(occl_iprobe(0, 3, comm, nullptr, &flag, &st), rank);
    }
    RANK_CHECK(flag == 1, rank, "iprobe never saw the message");
    RANK_CHECK(st.source == 0 && st.tag == 3 && st.bytes == 12 && st.count == 3, rank, text(st));
    // Probing again finds the same message: it was not received.
    occl_recv_status_t again{};
    RANK_OK(occl_iprobe(0, OCCL_ANY_TAG, comm, nullptr, &flag, &again), rank);
    RANK_CHECK(flag == 1 && again.tag == 3 && again.count == 3, rank, text(again));
    // Another tag is not there.
    RANK_OK(occl_iprobe(0, 4, comm, nullptr, &flag, &again), rank);
    RANK_CHECK(flag == 0, rank, "iprobe(tag 4) found a message");
    int32_t got[3] = {0, 0, 0};
    Tensor1D t(got, 3, dl_int(32));
    occl_recv_status_t rs{};
    RANK_OK(occl_recv_tagged(&t, 0, 3, comm, nullptr, &rs, nullptr), rank);
    RANK_CHECK(got[0] == 7 && got[2] == 9 && rs.count == 3, rank, cat("received ", got[0], " ", got[2]));
    RANK_OK(occl_iprobe(0, OCCL_ANY_TAG, comm, nullptr, &flag, &again), rank);
    RANK_CHECK(flag == 0, rank, "iprobe after the receive still found a message");
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Three ranks: rank 0 probes with ANY_SOURCE / ANY_TAG, sizes its buffer
// from the status and receives exactly the probed message from its source
// and tag, once per sender.
TEST_P(Probe, ProbeAnySourceAnyTagThenReceiveThatMessage) {
  JobResult res = run_ranks(job_options(3, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank != 0) {
      std::vector<float> v(size_t(rank) * 5, float(100 * rank));
      Tensor1D t(v.data(), int64_t(v.size()), dl_float(32));
      RANK_OK(occl_send_tagged(&t, 0, 20 + rank, comm, nullptr, nullptr), rank);
      return all_reduce_works(comm, rank, n);
    }
    std::vector<int> seen(size_t(n), 0);
    for (int i = 1; i < n; ++i) {
      occl_recv_status_t st{};
      RANK_OK(occl_probe(OCCL_ANY_SOURCE, OCCL_ANY_TAG, comm, nullptr, &st), rank);
      RANK_CHECK(st.source >= 1 && st.source < n && st.tag == 20 + st.source && st.count == 5 * st.source &&
                     st.bytes == 4 * st.count,
                 rank, text(st));
      occl_recv_status_t again{};
      RANK_OK(occl_probe(st.source, OCCL_ANY_TAG, comm, nullptr, &again), rank);
      RANK_CHECK(again.source == st.source && again.tag == st.tag && again.count == st.count, rank, text(again));
      std::vector<float> buf(size_t(st.count), -1.0f);
      Tensor1D t(buf.data(), st.count, dl_float(32));
      occl_recv_status_t rs{};
      RANK_OK(occl_recv_tagged(&t, st.source, st.tag, comm, nullptr, &rs, nullptr), rank);
      RANK_CHECK(rs.source == st.source && rs.count == st.count && buf.front() == float(100 * st.source) &&
                     buf.back() == float(100 * st.source),
                 rank, cat("received ", buf.front(), " ", text(rs)));
      seen[size_t(st.source)]++;
    }
    for (int p = 1; p < n; ++p) RANK_CHECK(seen[size_t(p)] == 1, rank, cat("rank ", p, " seen ", seen[size_t(p)]));
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Probes report the first matching message in arrival order; a probe for a
// later tag reads past earlier messages (keeping them), and the receives
// then take each message by tag.
TEST_P(Probe, ProbeFollowsArrivalOrderAndKeepsEarlierMessages) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank == 0) {
      int64_t a = 1;
      int64_t b[2] = {2, 3};
      Tensor1D ta(&a, 1, dl_int(64)), tb(b, 2, dl_int(64));
      RANK_OK(occl_send_tagged(&ta, 1, 1, comm, nullptr, nullptr), rank);
      RANK_OK(occl_send_tagged(&tb, 1, 2, comm, nullptr, nullptr), rank);
      return all_reduce_works(comm, rank, n);
    }
    occl_recv_status_t st{};
    RANK_OK(occl_probe(0, 2, comm, nullptr, &st), rank);
    RANK_CHECK(st.source == 0 && st.tag == 2 && st.count == 2 && st.bytes == 16, rank, text(st));
    RANK_OK(occl_probe(0, OCCL_ANY_TAG, comm, nullptr, &st), rank);
    RANK_CHECK(st.tag == 1 && st.count == 1, rank, cat("probe(ANY_TAG) is not the oldest: ", text(st)));
    int flag = 0;
    RANK_OK(occl_iprobe(OCCL_ANY_SOURCE, 2, comm, nullptr, &flag, &st), rank);
    RANK_CHECK(flag == 1 && st.tag == 2 && st.count == 2, rank, text(st));
    int64_t got[2] = {0, 0};
    Tensor1D t(got, 2, dl_int(64));
    RANK_OK(occl_recv_tagged(&t, 0, 2, comm, nullptr, &st, nullptr), rank);
    RANK_CHECK(got[0] == 2 && got[1] == 3, rank, cat("tag 2 got ", got[0], " ", got[1]));
    RANK_OK(occl_recv_tagged(&t, 0, OCCL_ANY_TAG, comm, nullptr, &st, nullptr), rank);
    RANK_CHECK(got[0] == 1 && st.tag == 1 && st.count == 1, rank, cat("tag 1 got ", got[0]));
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// A probe's sender may be this rank itself.
TEST_P(Probe, ProbeFindsASendToSelf) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    int32_t v[4] = {rank, rank, rank, rank};
    Tensor1D t(v, 4, dl_int(32));
    RANK_OK(occl_send_tagged(&t, rank, 6, comm, nullptr, nullptr), rank);
    occl_recv_status_t st{};
    RANK_OK(occl_probe(OCCL_ANY_SOURCE, 6, comm, nullptr, &st), rank);
    RANK_CHECK(st.source == rank && st.tag == 6 && st.count == 4, rank, text(st));
    int32_t got[4] = {-1, -1, -1, -1};
    Tensor1D g(got, 4, dl_int(32));
    RANK_OK(occl_recv_tagged(&g, rank, 6, comm, nullptr, nullptr, nullptr), rank);
    RANK_CHECK(got[3] == rank, rank, cat("got ", got[3]));
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// PROC_NULL returns at once with MPI's PROC_NULL status; a source out of
// range, a negative tag or a NULL flag is OCCL_ERR_INVALID_ARGUMENT naming
// it, and the communicator stays usable.
TEST_P(Probe, ProcNullAndBadArguments) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    occl_recv_status_t st{1, 2, 3, 4};
    RANK_OK(occl_probe(OCCL_PROC_NULL, 5, comm, nullptr, &st), rank);
    RANK_CHECK(st.source == OCCL_PROC_NULL && st.tag == OCCL_ANY_TAG && st.bytes == 0 && st.count == 0, rank, text(st));
    int flag = 0;
    st = occl_recv_status_t{1, 2, 3, 4};
    RANK_OK(occl_iprobe(OCCL_PROC_NULL, OCCL_ANY_TAG, comm, nullptr, &flag, &st), rank);
    RANK_CHECK(flag == 1 && st.source == OCCL_PROC_NULL && st.tag == OCCL_ANY_TAG && st.count == 0, rank, text(st));
    RANK_OK(occl_probe(OCCL_PROC_NULL, 0, comm, nullptr, nullptr), rank);  // status may be NULL

    occl_status_t s = occl_probe(n, 0, comm, nullptr, &st);
    std::string msg = occl_last_error();
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT && contains_ci(msg, "source") && contains_ci(msg, std::to_string(n)),
               rank, cat(occl_status_string(s), ": ", msg));
    s = occl_iprobe(-7, 0, comm, nullptr, &flag, &st);
    msg = occl_last_error();
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT && contains_ci(msg, "source") && contains_ci(msg, "-7"), rank,
               cat(occl_status_string(s), ": ", msg));
    s = occl_iprobe(0, -3, comm, nullptr, &flag, &st);
    msg = occl_last_error();
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT && contains_ci(msg, "tag"), rank, cat(occl_status_string(s), ": ", msg));
    s = occl_iprobe(0, 0, comm, nullptr, nullptr, &st);
    msg = occl_last_error();
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT && contains_ci(msg, "flag"), rank, cat(occl_status_string(s), ": ", msg));
    s = occl_probe(0, 0, nullptr, nullptr, &st);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT, rank, cat("NULL comm: ", occl_status_string(s)));
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// A blocking probe whose peer moves on to a collective without a matching
// send fails clearly (nothing hangs), and the collective still runs.
TEST_P(Probe, ProbeWithoutASendFailsWhenThePeerMovesOn) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank == 1) {
      occl_recv_status_t st{};
      occl_status_t s = occl_probe(0, 9, comm, nullptr, &st);
      std::string msg = occl_last_error();
      RANK_CHECK(s == OCCL_ERR_MISMATCH && contains_ci(msg, "probe"), rank, cat(occl_status_string(s), ": ", msg));
    }
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Transports, Probe, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// A probed message is kept within OMNICCL_P2P_UNEXPECTED_BYTES like any
// other message that arrived before its receive.
TEST(ProbeLimits, ProbedMessagesCountAgainstTheUnexpectedLimit) {
  JobOptions o = job_options(2);
  o.env["OMNICCL_P2P_UNEXPECTED_BYTES"] = "4096";
  JobResult res = run_ranks(o, [](occl_comm_t comm, int rank, int) {
    std::vector<int32_t> buf(2048, rank);  // 8 KiB
    Tensor1D t(buf.data(), 2048, dl_int(32));
    if (rank == 0) {
      occl_send_tagged(&t, 1, 1, comm, nullptr, nullptr);  // may fail once rank 1 reports
    } else {
      occl_recv_status_t st{};
      occl_status_t s = occl_probe(0, 1, comm, nullptr, &st);
      std::string msg = occl_last_error();
      RANK_CHECK(s == OCCL_ERR_OUT_OF_MEMORY && contains_ci(msg, "OMNICCL_P2P_UNEXPECTED_BYTES"), rank,
                 cat(occl_status_string(s), ": ", msg));
    }
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

}  // namespace
