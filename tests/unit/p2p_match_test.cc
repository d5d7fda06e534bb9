// P2PMatcher (core/communicator/p2p_match.h) on its own, driven as the
// engine's listens drive it: land() when a message's header has been read,
// its payload written where land() said, then landed().
//
// A message that began to land before any receive matched it is staged as
// unexpected; a receive (or probe) posted while its payload is still being
// read must get it once it has all come. (Seen as a hang: mpi4py-style
// object sends, whose second part is received by a blocking receive posted
// right after the first part arrived, under load on shared memory.)
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "communicator/p2p_match.h"

namespace omniccl {
namespace {

/// The header of a message from peer 1 to this rank (0).
TransferFeed::Arrival arrival(int tag, uint64_t bytes, uint64_t seq, uint8_t flags = 0) {
  TransferFeed::Arrival a;
  a.peer = 1;
  a.tag = tag;
  a.dtype = DType::kInt8;
  a.count = bytes;
  a.bytes = bytes;
  a.seq = seq;
  a.flags = flags;
  return a;
}

/// A receive (or probe) from peer 1 with tag into buf.
P2PMatcher::Posted receive(int tag, std::vector<char>& buf, bool probe = false) {
  P2PMatcher::Posted r;
  r.source = 1;
  r.tag = tag;
  r.dst = buf.data();
  r.capacity = buf.size();
  r.dtype = DType::kInt8;
  r.work = std::make_shared<Work>();
  r.probe = probe;
  return r;
}

TEST(P2PMatch, AReceivePostedWhileItsMessageLandsGetsIt) {
  P2PMatcher m(0, 2);
  size_t token = 0;
  // The header has come; no receive matches yet: staged as unexpected.
  char* dst = m.land(arrival(6, 5, 1), 1, token);
  ASSERT_NE(dst, nullptr);
  std::memcpy(dst, "he", 2);  // part of the payload
  std::vector<char> buf(8, 'x');
  P2PMatcher::Posted r = receive(6, buf);
  std::shared_ptr<Work> work = r.work;
  EXPECT_FALSE(m.post(std::move(r))) << "nothing has landed whole yet";
  std::memcpy(dst + 2, "llo", 3);  // the rest of the payload
  m.landed(token);
  ASSERT_TRUE(work->done()) << "the receive posted while its message landed was never completed";
  EXPECT_EQ(work->status(), Status::kSuccess);
  EXPECT_EQ(std::string(buf.data(), 5), "hello");
  EXPECT_EQ(work->recv_status().bytes, 5u);
  EXPECT_EQ(work->recv_status().source, 1);
  EXPECT_EQ(work->recv_status().tag, 6);
  EXPECT_FALSE(m.any_posted());
  EXPECT_EQ(m.unexpected_bytes(), 0u) << "the message was taken, not kept";
}

TEST(P2PMatch, ASynchronousSendMatchedWhileItLandsIsAcked) {
  P2PMatcher m(0, 2);
  size_t token = 0;
  char* dst = m.land(arrival(6, 3, 1, kP2PSync), 1, token);
  std::vector<char> buf(3);
  P2PMatcher::Posted r = receive(6, buf);
  std::shared_ptr<Work> work = r.work;
  EXPECT_FALSE(m.post(std::move(r)));
  std::memcpy(dst, "abc", 3);
  m.landed(token);
  ASSERT_TRUE(work->done());
  P2PMatcher::Ack ack;
  ASSERT_TRUE(m.take_ack(ack)) << "the sender of a matched synchronous send is owed an ack";
  EXPECT_EQ(ack.peer, 1);
  EXPECT_EQ(ack.seq, 1u);
}

TEST(P2PMatch, OnlyAMatchingReceivePostedWhileItLandsGetsIt) {
  P2PMatcher m(0, 2);
  size_t token = 0;
  char* dst = m.land(arrival(6, 2, 1), 1, token);
  std::vector<char> other(2), probed(2), mine(2);
  P2PMatcher::Posted wrong_tag = receive(7, other);
  P2PMatcher::Posted probe = receive(6, probed, /*probe=*/true);
  P2PMatcher::Posted right = receive(kAnyTag, mine);
  std::shared_ptr<Work> w_wrong = wrong_tag.work, w_probe = probe.work, w_right = right.work;
  EXPECT_FALSE(m.post(std::move(wrong_tag)));
  EXPECT_FALSE(m.post(std::move(probe)));
  EXPECT_FALSE(m.post(std::move(right)));
  std::memcpy(dst, "ok", 2);
  m.landed(token);
  EXPECT_FALSE(w_wrong->done()) << "tag 7 does not match tag 6";
  // The probe, posted first, sees it without taking it; the receive after it takes it.
  ASSERT_TRUE(w_probe->done());
  EXPECT_EQ(w_probe->recv_status().tag, 6);
  EXPECT_EQ(w_probe->recv_status().bytes, 2u);
  ASSERT_TRUE(w_right->done());
  EXPECT_EQ(std::string(mine.data(), 2), "ok");
  EXPECT_EQ(m.posted().size(), 1u);
  EXPECT_EQ(m.unexpected_bytes(), 0u);
}

TEST(P2PMatch, WithNoReceivePostedALandedMessageIsKept) {
  P2PMatcher m(0, 2);
  size_t token = 0;
  char* dst = m.land(arrival(6, 2, 1), 1, token);
  std::memcpy(dst, "hi", 2);
  m.landed(token);
  EXPECT_EQ(m.unexpected_bytes(), 2u);
  std::vector<char> buf(2);
  P2PMatcher::Posted r = receive(6, buf);
  std::shared_ptr<Work> work = r.work;
  EXPECT_TRUE(m.post(std::move(r)));
  EXPECT_TRUE(work->done());
  EXPECT_EQ(std::string(buf.data(), 2), "hi");
}

}  // namespace
}  // namespace omniccl
