// Point-to-point semantics with real ranks, through the C ABI: tag matching
// with messages kept until their receive is posted (in MPI order), wildcards
// (OCCL_ANY_SOURCE / OCCL_ANY_TAG) and the status, a receive count as an
// upper bound, truncation that leaves the communicator usable, sends to self,
// OCCL_PROC_NULL, occl_sendrecv, the unexpected-message limit, and a receive
// from any source while other ranks run a collective.
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

class P2P : public ::testing::TestWithParam<std::string> {};

// The case: tag 1 then tag 2; the receive for tag 2 posted first
// must get 2.0, the tag-1 message is kept and received afterwards.
TEST_P(P2P, TagsAreMatchedAndEarlierMessagesKept) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank == 0) {
      float one = 1.0f, two = 2.0f;
      Tensor1D a(&one, 1, dl_float(32)), b(&two, 1, dl_float(32));
      RANK_OK(occl_send_tagged(&a, 1, 1, comm, nullptr, nullptr), rank);
      RANK_OK(occl_send_tagged(&b, 1, 2, comm, nullptr, nullptr), rank);
    } else {
      float got = 0;
      Tensor1D t(&got, 1, dl_float(32));
      occl_recv_status_t st{};
      RANK_OK(occl_recv_tagged(&t, 0, 2, comm, nullptr, &st, nullptr), rank);
      RANK_CHECK(got == 2.0f, rank, cat("Recv(tag=2) got ", got));
      RANK_CHECK(st.source == 0 && st.tag == 2 && st.bytes == 4 && st.count == 1, rank,
                 cat("status ", st.source, " ", st.tag, " ", st.bytes, " ", st.count));
      RANK_OK(occl_recv_tagged(&t, 0, 1, comm, nullptr, &st, nullptr), rank);
      RANK_CHECK(got == 1.0f && st.tag == 1, rank, cat("Recv(tag=1) got ", got, " tag ", st.tag));
    }
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Non-overtaking: several messages with one tag from one source arrive in
// send order, even when they were kept as unexpected; ANY_TAG takes the
// oldest message whatever its tag.
TEST_P(P2P, SameTagMessagesKeepSendOrderAndAnyTagTakesTheOldest) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    const int k = 6;
    if (rank == 0) {
      for (int i = 0; i < k; ++i) {
        int32_t v = 100 + i;
        Tensor1D t(&v, 1, dl_int(32));
        RANK_OK(occl_send_tagged(&t, 1, i % 2 == 0 ? 5 : 9, comm, nullptr, nullptr), rank);
      }
    } else {
      int32_t v = 0;
      Tensor1D t(&v, 1, dl_int(32));
      occl_recv_status_t st{};
      // Tag 9 first: messages 101, 103, 105; the tag-5 ones wait meanwhile.
      for (int i = 0; i < k / 2; ++i) {
        RANK_OK(occl_recv_tagged(&t, 0, 9, comm, nullptr, &st, nullptr), rank);
        RANK_CHECK(v == 101 + 2 * i, rank, cat("tag 9 message ", i, " is ", v));
      }
      for (int i = 0; i < k / 2; ++i) {
        RANK_OK(occl_recv_tagged(&t, OCCL_ANY_SOURCE, OCCL_ANY_TAG, comm, nullptr, &st, nullptr), rank);
        RANK_CHECK(v == 100 + 2 * i && st.tag == 5 && st.source == 0, rank,
                   cat("ANY_TAG message ", i, " is ", v, " tag ", st.tag));
      }
    }
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ANY_SOURCE: rank 0 receives one message from each other rank, in whatever
// order they come, and the status names each sender once.
TEST_P(P2P, AnySourceGetsEverySenderAndTheStatusNamesIt) {
  JobResult res = run_ranks(job_options(4, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank == 0) {
      std::vector<int> seen(size_t(n), 0);
      for (int i = 1; i < n; ++i) {
        int64_t v = -1;
        Tensor1D t(&v, 1, dl_int(64));
        occl_recv_status_t st{};
        RANK_OK(occl_recv_tagged(&t, OCCL_ANY_SOURCE, 7, comm, nullptr, &st, nullptr), rank);
        RANK_CHECK(st.source >= 1 && st.source < n && v == 1000 * st.source && st.tag == 7, rank,
                   cat("got ", v, " from ", st.source, " tag ", st.tag));
        seen[size_t(st.source)]++;
      }
      for (int p = 1; p < n; ++p) RANK_CHECK(seen[size_t(p)] == 1, rank, cat("rank ", p, " seen ", seen[size_t(p)]));
    } else {
      int64_t v = 1000 * rank;
      Tensor1D t(&v, 1, dl_int(64));
      RANK_OK(occl_send_tagged(&t, 0, 7, comm, nullptr, nullptr), rank);
    }
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// A receive count is an upper bound; a larger message is a truncation
// error for that receive alone, and the communicator stays usable.
TEST_P(P2P, SmallerMessageFitsAndLargerOneIsTruncatedButCommStaysUsable) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank == 0) {
      std::vector<int32_t> three = {1, 2, 3}, eight = {10, 11, 12, 13, 14, 15, 16, 17};
      Tensor1D a(three.data(), 3, dl_int(32)), b(eight.data(), 8, dl_int(32));
      RANK_OK(occl_send(&a, 1, comm, nullptr), rank);
      RANK_OK(occl_send(&b, 1, comm, nullptr), rank);
      RANK_OK(occl_send(&a, 1, comm, nullptr), rank);
    } else {
      std::vector<int32_t> buf(5, -1);
      Tensor1D t(buf.data(), 5, dl_int(32));
      occl_recv_status_t st{};
      RANK_OK(occl_recv_tagged(&t, 0, 0, comm, nullptr, &st, nullptr), rank);
      RANK_CHECK(buf[0] == 1 && buf[2] == 3 && buf[3] == -1, rank, "3 into 5 elements");
      RANK_CHECK(st.count == 3 && st.bytes == 12, rank, cat("status count ", st.count, " bytes ", st.bytes));
      occl_status_t s = occl_recv_tagged(&t, 0, 0, comm, nullptr, &st, nullptr);
      std::string msg = occl_last_error();
      RANK_CHECK(s == OCCL_ERR_TRUNCATED, rank, cat("8 into 5 returned ", occl_status_string(s), ": ", msg));
      RANK_CHECK(contains_ci(msg, "truncat") && contains_ci(msg, "8") && contains_ci(msg, "5"), rank, msg);
      RANK_CHECK(st.count == 5 && buf[0] == 10 && buf[4] == 14, rank, "truncated receive holds the first part");
      // The message after it arrives intact.
      RANK_OK(occl_recv(&t, 0, comm, nullptr), rank);
      RANK_CHECK(buf[0] == 1 && buf[2] == 3, rank, "message after the truncated one");
    }
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// A message of another dtype fails only its receive (the buffer is not
// written); the next message is received normally.
TEST_P(P2P, DtypeMismatchFailsTheReceiveOnly) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank == 0) {
      float f[4] = {1, 2, 3, 4};
      int32_t i[4] = {5, 6, 7, 8};
      Tensor1D a(f, 4, dl_float(32)), b(i, 4, dl_int(32));
      RANK_OK(occl_send(&a, 1, comm, nullptr), rank);
      RANK_OK(occl_send(&b, 1, comm, nullptr), rank);
    } else {
      int32_t buf[4] = {0, 0, 0, 0};
      Tensor1D t(buf, 4, dl_int(32));
      occl_status_t s = occl_recv(&t, 0, comm, nullptr);
      std::string msg = occl_last_error();
      RANK_CHECK(s == OCCL_ERR_MISMATCH && contains_ci(msg, "float32") && contains_ci(msg, "int32"), rank,
                 cat(occl_status_string(s), ": ", msg));
      RANK_CHECK(buf[0] == 0, rank, "a mismatched message was written");
      RANK_OK(occl_recv(&t, 0, comm, nullptr), rank);
      RANK_CHECK(buf[0] == 5 && buf[3] == 8, rank, "next message");
    }
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Sends to self, matched in either order; non-blocking; with tags.
TEST_P(P2P, SendToSelfInEitherOrder) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    int32_t a = 10 + rank, b = 20 + rank, ra = 0, rb = 0;
    Tensor1D ta(&a, 1, dl_int(32)), tb(&b, 1, dl_int(32)), tra(&ra, 1, dl_int(32)), trb(&rb, 1, dl_int(32));
    // Send first (kept until received), then the receive.
    RANK_OK(occl_send_tagged(&ta, rank, 3, comm, nullptr, nullptr), rank);
    occl_recv_status_t st{};
    RANK_OK(occl_recv_tagged(&tra, rank, 3, comm, nullptr, &st, nullptr), rank);
    RANK_CHECK(ra == 10 + rank && st.source == rank && st.tag == 3, rank, "send then recv to self");
    // Receive first (non-blocking), then the send.
    occl_work_t w = nullptr;
    RANK_OK(occl_recv_tagged(&trb, OCCL_ANY_SOURCE, 4, comm, nullptr, nullptr, &w), rank);
    RANK_OK(occl_send_tagged(&tb, rank, 4, comm, nullptr, nullptr), rank);
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_recv_status(w, &st), rank);
    RANK_OK(occl_work_free(w), rank);
    RANK_CHECK(rb == 20 + rank && st.source == rank && st.tag == 4 && st.count == 1, rank, "irecv then send to self");
    // A non-blocking receive from self stays posted while other operations
    // (a collective) run, until its send comes.
    RANK_OK(occl_recv_tagged(&trb, rank, 5, comm, nullptr, nullptr, &w), rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    RANK_CHECK(occl_work_test(w) == OCCL_ERR_IN_PROGRESS, rank, "irecv from self completed without a send");
    if (all_reduce_works(comm, rank, n) != 0) return 1;
    b = 30 + rank;
    RANK_OK(occl_send_tagged(&tb, rank, 5, comm, nullptr, nullptr), rank);
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_free(w), rank);
    RANK_CHECK(rb == 30 + rank, rank, cat("irecv from self across a collective got ", rb));
    // A blocking receive from self with no send posted is an error, not a hang.
    occl_status_t s = occl_recv_tagged(&tra, rank, 99, comm, nullptr, nullptr, nullptr);
    RANK_CHECK(s == OCCL_ERR_MISMATCH && contains_ci(occl_last_error(), "itself"), rank,
               cat(occl_status_string(s), ": ", occl_last_error()));
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// PROC_NULL completes at once, blocking and not, and moves nothing.
TEST_P(P2P, ProcNullCompletesAtOnce) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    int32_t v = 42;
    Tensor1D t(&v, 1, dl_int(32));
    RANK_OK(occl_send(&t, OCCL_PROC_NULL, comm, nullptr), rank);
    occl_recv_status_t st{1, 2, 3, 4};
    RANK_OK(occl_recv_tagged(&t, OCCL_PROC_NULL, 5, comm, nullptr, &st, nullptr), rank);
    RANK_CHECK(v == 42 && st.source == OCCL_PROC_NULL && st.tag == OCCL_ANY_TAG && st.count == 0 && st.bytes == 0, rank,
               cat("status ", st.source, " ", st.tag, " ", st.count));
    occl_work_t w = nullptr;
    RANK_OK(occl_recv_tagged(&t, OCCL_PROC_NULL, OCCL_ANY_TAG, comm, nullptr, nullptr, &w), rank);
    RANK_CHECK(occl_work_test(w) == OCCL_SUCCESS, rank, "PROC_NULL irecv is complete at once");
    RANK_OK(occl_work_recv_status(w, &st), rank);
    RANK_CHECK(st.source == OCCL_PROC_NULL && st.count == 0, rank, "PROC_NULL irecv status");
    RANK_OK(occl_work_free(w), rank);
    RANK_CHECK(v == 42, rank, "PROC_NULL receive wrote");
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Sendrecv around a ring: every rank sends to the right and receives from
// the left at once (large enough that blocking sends would deadlock).
TEST_P(P2P, SendrecvRing) {
  JobResult res = run_ranks(job_options(3, GetParam()), [](occl_comm_t comm, int rank, int n) {
    const int64_t count = 1 << 20;
    std::vector<int32_t> out(size_t(count), rank), in(size_t(count), -1);
    Tensor1D to(out.data(), count, dl_int(32)), ti(in.data(), count, dl_int(32));
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    occl_recv_status_t st{};
    RANK_OK(occl_sendrecv(&to, right, 11, &ti, OCCL_ANY_SOURCE, 11, comm, nullptr, &st), rank);
    RANK_CHECK(in.front() == left && in.back() == left && st.source == left && st.count == count, rank,
               cat("sendrecv got ", in.front(), " from ", st.source));
    // Bad arguments are refused before anything is posted.
    occl_status_t s = occl_sendrecv(&to, n, 0, &ti, left, 0, comm, nullptr, nullptr);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT && contains_ci(occl_last_error(), "peer"), rank, occl_status_string(s));
    s = occl_send_tagged(&to, right, -5, comm, nullptr, nullptr);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT && contains_ci(occl_last_error(), "tag"), rank, occl_status_string(s));
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// A receive from ANY_SOURCE while another rank has already moved on to a
// collective: the collective's first message is left for the collective.
TEST_P(P2P, AnySourceReceiveWhileOthersRunACollective) {
  JobResult res = run_ranks(job_options(3, GetParam()), [](occl_comm_t comm, int rank, int n) {
    if (rank == 1) {
      int32_t v = 77;
      Tensor1D t(&v, 1, dl_int(32));
      RANK_OK(occl_send_tagged(&t, 0, 1, comm, nullptr, nullptr), rank);
    } else if (rank == 0) {
      int32_t v = 0;
      Tensor1D t(&v, 1, dl_int(32));
      occl_recv_status_t st{};
      RANK_OK(occl_recv_tagged(&t, OCCL_ANY_SOURCE, OCCL_ANY_TAG, comm, nullptr, &st, nullptr), rank);
      RANK_CHECK(v == 77 && st.source == 1, rank, cat("got ", v, " from ", st.source));
    }
    for (int i = 0; i < 3; ++i) {
      if (all_reduce_works(comm, rank, n) != 0) return 1;
    }
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// A receive from ANY_SOURCE still gets its message when another rank has
// already destroyed its communicator (that rank is no longer listened to).
TEST_P(P2P, AnySourceReceiveWhenAnotherRankHasLeft) {
  JobResult res = run_ranks(job_options(3, GetParam()), [](occl_comm_t comm, int rank, int) {
    if (rank == 2) return 0;  // the harness destroys its communicator now
    int32_t v = 0;
    Tensor1D t(&v, 1, dl_int(32));
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      v = 55;
      RANK_OK(occl_send_tagged(&t, 0, 3, comm, nullptr, nullptr), rank);
    } else {
      occl_recv_status_t st{};
      RANK_OK(occl_recv_tagged(&t, OCCL_ANY_SOURCE, 3, comm, nullptr, &st, nullptr), rank);
      RANK_CHECK(v == 55 && st.source == 1, rank, cat("got ", v, " from ", st.source));
    }
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Messages of several MiB (striped over the sockets with tcp3) received out
// of order by tag: the later ones wait as unexpected messages while the first
// one asked for arrives; a large one is truncated into a smaller receive;
// each arrives intact, and the link stays in step for a collective after.
TEST_P(P2P, LargeMessagesOutOfOrderAndTruncatedArriveIntact) {
  JobResult res = run_ranks(job_options(2, GetParam()), [](occl_comm_t comm, int rank, int n) {
    const int64_t sizes[3] = {(int64_t(1) << 18) + 3, 150000, (int64_t(3) << 18) + 1};  // int32 elements
    auto value = [](int tag, int64_t i) { return int32_t(tag * 100000000 + i * 7 % 99991); };
    if (rank == 0) {
      for (int tag = 1; tag <= 3; ++tag) {
        std::vector<int32_t> v(static_cast<size_t>(sizes[tag - 1]));
        for (int64_t i = 0; i < sizes[tag - 1]; ++i) v[size_t(i)] = value(tag, i);
        Tensor1D t(v.data(), sizes[tag - 1], dl_int(32));
        RANK_OK(occl_send_tagged(&t, 1, tag, comm, nullptr, nullptr), rank);
      }
    } else {
      auto check = [&](const std::vector<int32_t>& v, int tag, int64_t count) {
        for (int64_t i = 0; i < count; ++i) {
          if (v[size_t(i)] != value(tag, i)) return cat("tag ", tag, " element ", i, ": ", v[size_t(i)]);
        }
        return std::string();
      };
      occl_recv_status_t st{};
      std::vector<int32_t> big(size_t(sizes[2]), -1);
      Tensor1D t3(big.data(), sizes[2], dl_int(32));
      RANK_OK(occl_recv_tagged(&t3, 0, 3, comm, nullptr, &st, nullptr), rank);
      std::string bad = check(big, 3, sizes[2]);
      RANK_CHECK(bad.empty() && st.count == sizes[2] && st.tag == 3, rank, "tag 3: " + bad);
      const int64_t part = 100000;  // tag 1 is larger: truncated
      std::vector<int32_t> small(size_t(part), -1);
      Tensor1D t1(small.data(), part, dl_int(32));
      occl_status_t s = occl_recv_tagged(&t1, 0, 1, comm, nullptr, &st, nullptr);
      RANK_CHECK(s == OCCL_ERR_TRUNCATED, rank, cat("tag 1 into ", part, " elements: ", occl_status_string(s)));
      bad = check(small, 1, part);
      RANK_CHECK(bad.empty() && st.count == part, rank, "truncated tag 1 holds its first part: " + bad);
      std::vector<int32_t> mid(size_t(sizes[1]), -1);
      Tensor1D t2(mid.data(), sizes[1], dl_int(32));
      RANK_OK(occl_recv_tagged(&t2, OCCL_ANY_SOURCE, OCCL_ANY_TAG, comm, nullptr, &st, nullptr), rank);
      bad = check(mid, 2, sizes[1]);
      RANK_CHECK(bad.empty() && st.tag == 2 && st.source == 0, rank, "tag 2: " + bad);
    }
    return all_reduce_works(comm, rank, n, int64_t(1) << 20);  // 4 MiB: striped too
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Transports, P2P, ::testing::Values("shm", "tcp", "tcp3"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// More unexpected data than OMNICCL_P2P_UNEXPECTED_BYTES: a clear error
// naming the setting, not unbounded memory.
TEST(P2PLimits, UnexpectedMessagesBeyondTheLimitFailClearly) {
  JobOptions o = job_options(2);
  o.env["OMNICCL_P2P_UNEXPECTED_BYTES"] = "4096";
  JobResult res = run_ranks(o, [](occl_comm_t comm, int rank, int) {
    std::vector<int32_t> buf(2048, rank);  // 8 KiB
    Tensor1D t(buf.data(), 2048, dl_int(32));
    if (rank == 0) {
      RANK_OK(occl_send_tagged(&t, 1, 1, comm, nullptr, nullptr), rank);
      occl_send_tagged(&t, 1, 2, comm, nullptr, nullptr);  // may fail once rank 1 reports
    } else {
      occl_status_t s = occl_recv_tagged(&t, 0, 2, comm, nullptr, nullptr, nullptr);
      std::string msg = occl_last_error();
      RANK_CHECK(s == OCCL_ERR_OUT_OF_MEMORY && contains_ci(msg, "OMNICCL_P2P_UNEXPECTED_BYTES"), rank,
                 cat(occl_status_string(s), ": ", msg));
    }
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Self sends are kept within the same limit, and the send that would exceed
// it fails alone.
TEST(P2PLimits, SendToSelfBeyondTheLimitFailsThatSend) {
  JobOptions o = job_options(1);
  o.env["OMNICCL_P2P_UNEXPECTED_BYTES"] = "4096";
  JobResult res = run_ranks(o, [](occl_comm_t comm, int rank, int n) {
    std::vector<int32_t> buf(1024, 3);  // 4 KiB: fits once
    Tensor1D t(buf.data(), 1024, dl_int(32));
    RANK_OK(occl_send(&t, 0, comm, nullptr), rank);
    occl_status_t s = occl_send(&t, 0, comm, nullptr);
    RANK_CHECK(s == OCCL_ERR_OUT_OF_MEMORY, rank, occl_status_string(s));
    RANK_OK(occl_recv(&t, 0, comm, nullptr), rank);
    RANK_OK(occl_send(&t, 0, comm, nullptr), rank);  // room again
    RANK_OK(occl_recv(&t, 0, comm, nullptr), rank);
    return all_reduce_works(comm, rank, n);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

}  // namespace
