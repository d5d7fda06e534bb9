// Send and recv of CUDA tensors on the staged path (collective/send_recv.cc),
// checked over the emulated GPU runtime (emulated_gpu.h) with ranks as
// forked processes (emulated_ranks.h). What this proves: messages small and
// large arrive intact and in order per pair, tags pick them, ssend and async
// work complete, a CUDA send pairs with a CPU receive and the reverse (the
// wire carries host memory either way), the call returns before its stream
// reaches it, a peer that dies releases the stream with a peer failure, a
// truncated receive is the CPU path's error, and what stays refused says so.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "collective/collectives.h"
#include "common/status.h"
#include "communicator/communicator.h"
#include "emulated_gpu.h"
#include "emulated_ranks.h"

namespace omniccl {
namespace {

using coll::WorkPtr;
using test::dev_view;
using test::EmulatedGpu;
using test::EmuStream;
using test::expect_all_ok;
using test::on;
using test::RankChecks;
using test::run_ranks;
using test::status_of;

/// A host tensor view (the CPU side of a mixed pair).
template <typename T>
TensorView host_view(std::vector<T>& v, DType t) {
  TensorView tv = dev_view(v, t);
  tv.device = DeviceKind::kCPU;
  return tv;
}

/// Waits (bounded) for the communicator's asynchronous error.
Status async_error_within(Communicator& c, std::string& msg, int ms = 10000) {
  for (int i = 0; i < ms / 25 && c.async_error(msg) == Status::kSuccess; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return c.async_error(msg);
}

TEST(GpuStagingP2p, SmallAndLargeMessagesArriveInOrderWithTheirTags) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    const size_t large = (size_t(3) << 20) / 4 + 5;  // several pieces of the transports, odd on purpose
    if (c.rank() == 0) {
      std::vector<int32_t> a(7, 11), b(large), d(3, 33);
      for (size_t i = 0; i < b.size(); ++i) b[i] = int32_t(i * 7 + 1);
      coll::send(c, dev_view(a, DType::kInt32), 1, on(s));
      coll::send(c, dev_view(b, DType::kInt32), 1, on(s));
      coll::send_tagged(c, dev_view(d, DType::kInt32), 1, 5, on(s));
      coll::send_tagged(c, dev_view(a, DType::kInt32), 1, 4, on(s));
      // The reply, sent once the peer has received: on one stream a receive
      // queued before a send ends before it starts, so the two ranks order
      // their large messages against each other's (as on NCCL).
      std::vector<float> back(large, -1.0f);
      coll::recv(c, dev_view(back, DType::kFloat32), 1, on(s));
      ck.expect(s.sync(20000), "the stream finished");
      ck.expect(back.front() == 2.5f && back.back() == 2.5f, "the large reply arrived");
      return;
    }
    std::vector<int32_t> a(7, -1), b(large, -1), d(3, -1), e(7, -1);
    coll::recv(c, dev_view(a, DType::kInt32), 0, on(s));
    coll::recv(c, dev_view(b, DType::kInt32), 0, on(s));
    // Tag 4 was sent after tag 5: it is received first, tag 5 waits.
    RecvStatus st;
    coll::recv_tagged(c, dev_view(e, DType::kInt32), 0, 4, on(s), &st);
    coll::recv_tagged(c, dev_view(d, DType::kInt32), 0, 5, on(s), nullptr);
    ck.expect(st.source == 0 && st.tag == 4, "a blocking call's status names the source and tag");
    std::vector<float> reply(large, 2.5f);
    coll::send(c, dev_view(reply, DType::kFloat32), 0, on(s));
    ck.expect(s.sync(20000), "the stream finished");
    ck.expect(a[0] == 11 && a[6] == 11, "the first small message");
    bool ok = true;
    for (size_t i = 0; i < b.size() && ok; ++i) ok = b[i] == int32_t(i * 7 + 1);
    ck.expect(ok, "the large message, every element");
    ck.expect(e[0] == 11 && d[0] == 33 && d[2] == 33, "tags picked their messages");
  }));
}

TEST(GpuStagingP2p, SsendAndAsyncWorkCompleteAndFollowTheStream) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<int64_t> x(5000, c.rank() == 0 ? 9 : -1);
    if (c.rank() == 0) {
      WorkPtr w = coll::ssend_tagged(c, dev_view(x, DType::kInt64), 1, 3, on(s, true));
      ck.expect(w != nullptr && w->wait() == Status::kSuccess, "the ssend completed: " + (w ? w->message() : ""));
    } else {
      WorkPtr w = coll::recv_tagged(c, dev_view(x, DType::kInt64), 0, 3, on(s, true), nullptr);
      ck.expect(w != nullptr && w->wait() == Status::kSuccess, "the receive completed: " + (w ? w->message() : ""));
      // No stream sync: the wait covers the copy back.
      ck.expect(x.front() == 9 && x.back() == 9, "after wait the message is on the device");
      if (w != nullptr) {
        const RecvStatus st = w->recv_status();
        ck.expect(st.source == 0 && st.tag == 3 && st.bytes == x.size() * 8, "the work's status");
      }
    }
    ck.expect(s.sync(10000), "the stream finished");
  }));
}

TEST(GpuStagingP2p, TheCallReturnsBeforeTheStreamReachesIt) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<int32_t> x(1000, c.rank() == 0 ? 5 : 0);
    s.close_gate();  // the GPU is busy with earlier work
    const auto t0 = std::chrono::steady_clock::now();
    if (c.rank() == 0) {
      coll::send(c, dev_view(x, DType::kInt32), 1, on(s));
      x.assign(x.size(), 6);  // "a kernel before the send" writes it: not sent yet
      s.open_gate();
    } else {
      coll::recv(c, dev_view(x, DType::kInt32), 0, on(s));
      ck.expect(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2), "the call did not wait");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ck.expect(x[0] == 0, "nothing was written before the stream reached the receive");
      s.open_gate();
    }
    ck.expect(s.sync(10000), "the stream finished");
    if (c.rank() == 1) ck.expect(x[0] == 6 && x[999] == 6, "the send took the tensor as the stream had it");
  }));
}

TEST(GpuStagingP2p, ACudaTensorPairsWithACpuTensorEitherWay) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    const size_t n = (size_t(1) << 20) + 3;
    std::vector<float> x(n, c.rank() == 0 ? 1.5f : 0.0f), y(n, c.rank() == 1 ? 4.0f : 0.0f);
    if (c.rank() == 0) {  // CUDA tensors here
      coll::send(c, dev_view(x, DType::kFloat32), 1, on(s));
      coll::recv(c, dev_view(y, DType::kFloat32), 1, on(s));
      ck.expect(s.sync(20000), "the stream finished");
      ck.expect(y.front() == 4.0f && y.back() == 4.0f, "a CPU send reached a CUDA receive");
    } else {  // CPU tensors here
      coll::recv(c, host_view(x, DType::kFloat32), 0, CallOptions{});
      coll::send(c, host_view(y, DType::kFloat32), 0, CallOptions{});
      ck.expect(x.front() == 1.5f && x.back() == 1.5f, "a CUDA send reached a CPU receive");
    }
  }));
}

TEST(GpuStagingP2p, AShortMessageLeavesTheRestOfACudaReceiveAsItWas) {
  // A receive's count is an upper bound, as on the CPU path: a shorter
  // message fills the front, and the rest of the tensor keeps what the
  // device held. The first message leaves 77s in the host memory the later
  // receives are staged through, so a tail copied back from there shows.
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    if (c.rank() == 0) {
      std::vector<int32_t> full(8, 77), three(3, 5), two(2, 6);
      coll::send(c, dev_view(full, DType::kInt32), 1, on(s));
      coll::send(c, dev_view(three, DType::kInt32), 1, on(s));
      coll::send(c, host_view(two, DType::kInt32), 1, CallOptions{});  // a CPU sender too
      ck.expect(s.sync(10000), "the stream finished");
      return;
    }
    std::vector<int32_t> first(8, -1), x(8, -1), y(8, -1);
    const size_t reads = EmulatedGpu::copies_now().load();
    coll::recv(c, dev_view(first, DType::kInt32), 0, on(s));
    WorkPtr w = coll::recv(c, dev_view(x, DType::kInt32), 0, on(s, true));
    ck.expect(w != nullptr && w->wait() == Status::kSuccess, "the short receive: " + (w ? w->message() : ""));
    if (w != nullptr) ck.expect(w->recv_status().bytes == 12, "the work says 12 bytes arrived");
    coll::recv(c, dev_view(y, DType::kInt32), 0, on(s));
    ck.expect(s.sync(10000), "the stream finished");
    ck.expect(first[0] == 77 && first[7] == 77, "the full message");
    ck.expect(EmulatedGpu::copies_now().load() - reads == 2,
              "the short receives read their tensors' rest, the full one not");
    const std::vector<int32_t> want_x = {5, 5, 5, -1, -1, -1, -1, -1}, want_y = {6, 6, -1, -1, -1, -1, -1, -1};
    std::string got;
    for (int32_t v : x) got += std::to_string(v) + " ";
    ck.expect(x == want_x, "3 of 8 from a CUDA sender, the rest as it was: " + got);
    got.clear();
    for (int32_t v : y) got += std::to_string(v) + " ";
    ck.expect(y == want_y, "2 of 8 from a CPU sender, the rest as it was: " + got);
  }));
}

TEST(GpuStagingP2p, AMatchedProbesMessageIsReceivedIntoACudaTensor) {
  // mprobe/improbe take a message out of matching; mrecv then receives it
  // into a CUDA tensor on the stream, its status the probe's, a shorter
  // message leaving the rest of the tensor as it was.
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    if (c.rank() == 0) {
      std::vector<int32_t> a(5, 8), b(2, 9);
      coll::send_tagged(c, dev_view(a, DType::kInt32), 1, 7, on(s));
      coll::send_tagged(c, host_view(b, DType::kInt32), 1, 3, CallOptions{});
      ck.expect(s.sync(10000), "the stream finished");
      return;
    }
    const RecvStatus probed = c.mprobe(kAnySource, 7, CallOptions{});
    ck.expect(probed.source == 0 && probed.tag == 7 && probed.bytes == 20, "mprobe found the tag 7 message");
    std::vector<int32_t> x(5, -1), y(4, -1);
    uint64_t m = probed.message;
    TensorView elsewhere = dev_view(x, DType::kInt32);
    elsewhere.device_id = 1;  // not the current device: refused by the checks
    std::string why;
    ck.expect(status_of([&] { coll::mrecv(c, m, elsewhere, on(s), nullptr); }, &why) == Status::kInvalidArgument,
              "a tensor on another device is refused: " + why);
    ck.expect(m == probed.message, "and the message is still held, for another try");
    RecvStatus st;
    coll::mrecv(c, m, dev_view(x, DType::kInt32), on(s), &st);
    ck.expect(m == kMessageNull, "the message was taken");
    ck.expect(st.source == 0 && st.tag == 7 && st.bytes == 20, "a blocking mrecv's status is the probe's");
    std::optional<RecvStatus> found;
    for (int i = 0; i < 400 && !found; ++i) {
      found = c.improbe(0, kAnyTag, CallOptions{});
      if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ck.expect(found && found->tag == 3, "improbe found the tag 3 message");
    uint64_t m2 = found ? found->message : kMessageNull;
    WorkPtr w = coll::mrecv(c, m2, dev_view(y, DType::kInt32), on(s, true), nullptr);
    ck.expect(w != nullptr && w->wait() == Status::kSuccess, "the async mrecv: " + (w ? w->message() : ""));
    if (w != nullptr) ck.expect(w->recv_status().bytes == 8 && w->recv_status().tag == 3, "the work's status");
    ck.expect(s.sync(10000), "the stream finished");
    ck.expect(x == std::vector<int32_t>(5, 8), "the tag 7 message, every element");
    ck.expect(y == std::vector<int32_t>({9, 9, -1, -1}), "the tag 3 message, the rest as it was");
    std::string msg;
    uint64_t gone = 12345;
    const Status bad = status_of([&] { coll::mrecv(c, gone, dev_view(y, DType::kInt32), on(s), nullptr); }, &msg);
    ck.expect(bad == Status::kInvalidArgument && msg.find("not held") != std::string::npos,
              "a message not held is refused before the stream gets any work: " + msg);
    ck.expect(s.sync(10000), "and the stream is free");
  }));
}

TEST(GpuStagingP2p, APeerThatDiesReleasesTheStreamWithAPeerFailure) {
  // Rank 1 takes one message, then dies while rank 0's receive waits for it.
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        std::vector<int32_t> x(1 << 16, 1);
        if (c.rank() == 1) {
          coll::recv(c, host_view(x, DType::kInt32), 0, CallOptions{});
          std::fflush(stderr);
          _exit(0);
        }
        coll::send(c, dev_view(x, DType::kInt32), 1, on(s));
        const auto t0 = std::chrono::steady_clock::now();
        WorkPtr w = coll::recv(c, dev_view(x, DType::kInt32), 1, on(s, true));
        ck.expect(w != nullptr && w->wait() == Status::kPeerFailure,
                  "the receive failed with a peer failure: " + (w ? w->message() : ""));
        ck.expect(s.sync(10000), "the stream was released");
        ck.expect(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(15), "within a bound");
        std::string msg;
        ck.expect(async_error_within(c, msg) == Status::kPeerFailure, "the communicator's error: " + msg);
        ck.expect(status_of([&] { coll::send(c, dev_view(x, DType::kInt32), 1, on(s)); }) == Status::kCommFailed,
                  "a later call is refused");
        ck.expect(s.sync(10000), "the refused call holds no stream");
      },
      30000));
}

TEST(GpuStagingP2p, ATruncatedReceiveIsTheCpuPathsErrorAndReleasesTheStream) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<int32_t> big(8, 3), small(5, -1);
    if (c.rank() == 0) {
      coll::send(c, host_view(big, DType::kInt32), 1, CallOptions{});  // to the CPU receive
      coll::send(c, host_view(big, DType::kInt32), 1, CallOptions{});  // to the CUDA one
      return;
    }
    std::string cpu_msg;
    const Status cpu = status_of([&] { coll::recv(c, host_view(small, DType::kInt32), 0, CallOptions{}); }, &cpu_msg);
    WorkPtr w = coll::recv(c, dev_view(small, DType::kInt32), 0, on(s, true));
    ck.expect(cpu == Status::kTruncated, "the CPU receive is truncated: " + cpu_msg);
    ck.expect(w != nullptr && w->wait() == cpu, "the CUDA receive fails the same way: " + (w ? w->message() : ""));
    ck.expect(s.sync(10000), "the stream was released");
  }));
}

TEST(GpuStagingP2p, WhatCannotBeStagedIsRefusedSayingWhy) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<int32_t> x(4, 0);
    std::string msg;
    Status st =
        status_of([&] { coll::recv_tagged(c, dev_view(x, DType::kInt32), kAnySource, 0, on(s), nullptr); }, &msg);
    ck.expect(st == Status::kUnsupported && msg.find("ANY_SOURCE") != std::string::npos, "ANY_SOURCE: " + msg);
    st = status_of([&] { coll::recv_tagged(c, dev_view(x, DType::kInt32), 1 - c.rank(), kAnyTag, on(s), nullptr); },
                   &msg);
    ck.expect(st == Status::kUnsupported && msg.find("ANY_TAG") != std::string::npos, "ANY_TAG: " + msg);
    st = status_of([&] { coll::send(c, dev_view(x, DType::kInt32), c.rank(), on(s)); }, &msg);
    ck.expect(st == Status::kUnsupported && msg.find("itself") != std::string::npos, "to itself: " + msg);
    // PROC_NULL completes at once; none of these broke the communicator.
    ck.expect(coll::send(c, dev_view(x, DType::kInt32), kProcNull, on(s)) == nullptr, "PROC_NULL");
    std::vector<int32_t> y(4, c.rank() + 1);
    coll::all_reduce(c, dev_view(y, DType::kInt32), dev_view(y, DType::kInt32), int(RedOp::kSum), on(s));
    ck.expect(s.sync(10000) && y[0] == 3, "a collective afterwards works");
  }));
}

}  // namespace
}  // namespace omniccl
