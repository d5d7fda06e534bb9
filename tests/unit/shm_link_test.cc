// The shared-memory link at message level (transport/transport.h), both
// ends in this process: headers and payloads arrive in order and intact
// across the ring's wrap, a sink gets whole granules, large payloads go by
// reference only when allowed (and then complete only once read), and waits
// are armed as doorbells or on the sleeper's futex word (woken from another
// process too).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "transport/shm/shm_link.h"

namespace omniccl::transport {
namespace {

/// Two linked ends (ranks 0 and 1) over two segments of this process.
struct Pair {
  std::unique_ptr<ShmSegment> seg[2];
  std::unique_ptr<ShmLink> link[2];
  int doorbells[2] = {0, 0};  // rung at each end's peer

  explicit Pair(bool single_copy = true) {
    const std::string session = std::to_string(std::random_device{}()) + "t";
    std::string name[2];
    for (int r = 0; r < 2; ++r) {
      name[r] = ShmSegment::name_for(session, r);
      seg[r] = ShmSegment::create(name[r], 2);
    }
    for (int r = 0; r < 2; ++r) {
      const int p = 1 - r;
      auto peer_seg = ShmSegment::open(name[p], 2);
      link[r] = std::make_unique<ShmLink>(
          p, peer_seg->ring(r), peer_seg->ring_data(r), seg[r]->ring(p), seg[r]->ring_data(p),
          [this, p] { ++doorbells[p]; }, std::move(peer_seg), single_copy);
    }
    for (auto& s : seg) s->unlink();
  }
};

struct Header {
  uint64_t n;
  char text[24];
};

Message send_msg(Header& h, std::vector<char>& payload, bool may_reference = false) {
  Message m;
  m.header = &h;
  m.header_bytes = sizeof h;
  m.payload = {payload.data(), payload.size(), DeviceKind::kCPU};
  m.may_reference = may_reference;
  return m;
}

std::vector<char> pattern(size_t n, unsigned seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7) & 0xff);
  return v;
}

/// Takes whole granules and keeps them.
struct Keep final : PayloadSink {
  size_t granule;
  std::vector<char> got;
  explicit Keep(size_t g) : granule(g) {}
  size_t take(const char* data, size_t n) override {
    n = n / granule * granule;
    got.insert(got.end(), data, data + n);
    return n;
  }
};

TEST(ShmLinkMessages, SmallMessageArrivesWhole) {
  Pair p;
  Header hs{7, "hello"};
  auto payload = pattern(8, 1);
  Message s = send_msg(hs, payload);
  EXPECT_TRUE(p.link[0]->send(s));
  EXPECT_TRUE(s.complete);
  EXPECT_FALSE(link_state<ShmMessage>(s).by_reference);

  Header hr{};
  std::vector<char> dst(8);
  Message r;
  r.header = &hr;
  r.header_bytes = sizeof hr;
  ASSERT_TRUE(p.link[1]->recv_header(r));
  ASSERT_EQ(r.header_done, sizeof hr);
  EXPECT_EQ(r.done, 0u);  // nothing of the payload before the caller says where it goes
  EXPECT_EQ(hr.n, 7u);
  EXPECT_STREQ(hr.text, "hello");
  r.payload = {dst.data(), dst.size(), DeviceKind::kCPU};
  EXPECT_TRUE(p.link[1]->recv_payload(r));
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(dst, payload);
  // Nothing more is there.
  Header h2{};
  Message r2;
  r2.header = &h2;
  r2.header_bytes = sizeof h2;
  EXPECT_FALSE(p.link[1]->recv_header(r2));
}

/// Receives one message of `bytes` payload bytes from `link`; returns its
/// header's number (the payload checked against pattern(bytes, number)).
uint64_t recv_one(ShmLink& link, size_t bytes) {
  Header h{};
  std::vector<char> dst(bytes);
  Message r;
  r.header = &h;
  r.header_bytes = sizeof h;
  EXPECT_TRUE(link.recv_header(r));
  EXPECT_EQ(r.header_done, sizeof h);
  r.payload = {dst.data(), dst.size(), DeviceKind::kCPU};
  link.recv_payload(r);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(dst, pattern(bytes, static_cast<unsigned>(h.n)));
  return h.n;
}

// A sender that times an operation waits until its receiver has read what
// it sent (Engine::wait_sends_read): the link says so from the ring's
// positions, across the wrap too, and only for its own direction.
TEST(ShmLinkMessages, SendsAreUnreadUntilTheReceiverTakesThemAll) {
  Pair p;
  EXPECT_FALSE(p.link[0]->sends_unread());
  const size_t bytes = 768 << 10;  // three of them cross the 2 MiB ring's end
  for (unsigned i = 0; i < 4; ++i) {
    Header h{i, "chunk"};
    auto payload = pattern(bytes, i);
    Message s = send_msg(h, payload);
    while (!s.complete) {
      p.link[0]->send(s);
      if (!s.complete) {
        // The ring is full: the receiver takes the oldest message first.
        EXPECT_TRUE(p.link[0]->sends_unread());
        EXPECT_EQ(recv_one(*p.link[1], bytes), i - 2);
      }
    }
    EXPECT_TRUE(p.link[0]->sends_unread()) << "message " << i;
    EXPECT_FALSE(p.link[1]->sends_unread()) << "rank 1 sent nothing";
  }
  EXPECT_EQ(recv_one(*p.link[1], bytes), 2u);
  EXPECT_TRUE(p.link[0]->sends_unread()) << "message 3 is still in the ring";
  EXPECT_EQ(recv_one(*p.link[1], bytes), 3u);
  EXPECT_FALSE(p.link[0]->sends_unread());
}

// A producer ahead of its consumer (a stream of broadcasts) writes a small
// message whole or not at all: the room made by reading one small message
// does not take part of a larger one. (Cutting it did: each message then
// reached the consumer as several small records, read one by one, which kept
// the consumer behind.) Messages that do not fit before the ring's end start
// at its start; all arrive intact and in order.
TEST(ShmLinkMessages, SmallMessagesAreWrittenWholeWhenTheRingIsFull) {
  Pair p;
  std::vector<size_t> sizes;  // what is in the ring, in order
  uint64_t n = 0;
  for (;;) {  // fill the ring with 100-byte messages
    Header h{n, "fill"};
    auto payload = pattern(100, static_cast<unsigned>(n));
    Message s = send_msg(h, payload);
    const bool moved = p.link[0]->send(s);
    ASSERT_EQ(moved, s.complete) << "message " << n << " was cut: " << s.header_done << " + " << s.done;
    if (!moved) break;
    sizes.push_back(100);
    ++n;
  }
  ASSERT_GT(n, 1000u);
  // Room for one 100-byte message's record, not for a 4 KiB one.
  uint64_t next = 0;
  ASSERT_EQ(recv_one(*p.link[1], sizes.front()), next++);
  sizes.erase(sizes.begin());
  Header big{n, "big"};
  auto big_payload = pattern(4096, static_cast<unsigned>(n));
  Message s = send_msg(big, big_payload);
  EXPECT_FALSE(p.link[0]->send(s)) << "a 4 KiB message was cut into the room of a 100-byte one";
  EXPECT_EQ(s.header_done, 0u);
  // Reading on until it fits: then it goes in one write.
  while (!p.link[0]->send(s)) {
    ASSERT_FALSE(sizes.empty());
    ASSERT_EQ(recv_one(*p.link[1], sizes.front()), next++);
    sizes.erase(sizes.begin());
  }
  EXPECT_TRUE(s.complete);
  sizes.push_back(4096);
  // And a stream of mixed sizes across the wrap, each written whole.
  const size_t mix[] = {1, 512, 4000, 16000, 100, 9000};
  for (int i = 0; i < 600; ++i) {
    const size_t bytes = mix[i % 6];
    Header h{++n, "mix"};
    auto payload = pattern(bytes, static_cast<unsigned>(n));
    Message m = send_msg(h, payload);
    while (!p.link[0]->send(m)) {
      ASSERT_EQ(m.header_done, 0u) << "message " << n << " was cut";
      ASSERT_FALSE(sizes.empty());
      ASSERT_EQ(recv_one(*p.link[1], sizes.front()), next++);
      sizes.erase(sizes.begin());
    }
    ASSERT_TRUE(m.complete) << "message " << n << " of " << bytes << " bytes was cut";
    sizes.push_back(bytes);
  }
  while (!sizes.empty()) {
    ASSERT_EQ(recv_one(*p.link[1], sizes.front()), next++);
    sizes.erase(sizes.begin());
  }
  EXPECT_EQ(next, n + 1);
}

// The engine's direct path (send_whole, peek_whole, take_whole): a whole
// message written so reads the same through recv_header/recv_payload and
// the other way round; peek_whole tells "nothing yet" from "another size"
// and consumes nothing; a full ring says "not yet" and writes nothing; the
// messages cross the ring's end (a skip to its start) intact and in order.
TEST(ShmLinkMessages, WholeMessagesMatchTheGeneralCallsAndCrossTheWrap) {
  Pair p;
  Whole why = Whole::kDone;
  EXPECT_EQ(p.link[1]->peek_whole(sizeof(Header) + 8, why), nullptr);
  EXPECT_EQ(why, Whole::kNotYet);
  // send_whole, read by the general calls.
  Header h0{0, "whole"};
  auto pay0 = pattern(8, 0);
  ASSERT_EQ(p.link[0]->send_whole(&h0, sizeof h0, pay0.data(), pay0.size()), Whole::kDone);
  EXPECT_EQ(recv_one(*p.link[1], 8), 0u);
  // send(), read whole; a peek of another size consumes nothing.
  Header h1{1, "general"};
  auto pay1 = pattern(24, 1);
  Message s = send_msg(h1, pay1);
  ASSERT_TRUE(p.link[0]->send(s));
  EXPECT_EQ(p.link[1]->peek_whole(sizeof(Header) + 8, why), nullptr);
  EXPECT_EQ(why, Whole::kNo);
  const char* at = p.link[1]->peek_whole(sizeof(Header) + 24, why);
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(why, Whole::kDone);
  Header got{};
  std::memcpy(&got, at, sizeof got);
  EXPECT_EQ(got.n, 1u);
  EXPECT_STREQ(got.text, "general");
  EXPECT_EQ(std::vector<char>(at + sizeof got, at + sizeof got + 24), pay1);
  p.link[1]->take_whole(sizeof(Header) + 24);
  EXPECT_EQ(p.link[1]->peek_whole(sizeof(Header) + 24, why), nullptr);
  EXPECT_EQ(why, Whole::kNotYet);
  // Fill the ring with whole 1000-byte messages: the last answer is "not
  // yet", with nothing written.
  uint64_t n = 2;
  std::vector<uint64_t> queued;
  for (;;) {
    Header h{n, "fill"};
    auto pay = pattern(1000, static_cast<unsigned>(n));
    const Whole w = p.link[0]->send_whole(&h, sizeof h, pay.data(), pay.size());
    if (w == Whole::kNotYet) break;
    ASSERT_EQ(w, Whole::kDone);
    queued.push_back(n++);
  }
  ASSERT_GT(queued.size(), 1000u);
  // Then write on, reading whenever the ring is full (at its end a message
  // needs the room of the skipped tail too), twice round the ring.
  size_t read = 0;
  auto read_one = [&] {
    ASSERT_LT(read, queued.size());
    at = p.link[1]->peek_whole(sizeof(Header) + 1000, why);
    ASSERT_NE(at, nullptr) << "message " << queued[read];
    std::memcpy(&got, at, sizeof got);
    ASSERT_EQ(got.n, queued[read]);
    ASSERT_EQ(std::vector<char>(at + sizeof got, at + sizeof got + 1000), pattern(1000, static_cast<unsigned>(got.n)));
    p.link[1]->take_whole(sizeof(Header) + 1000);
    ++read;
  };
  for (int i = 0; i < 5000; ++i) {
    Header h{n, "wrap"};
    auto pay = pattern(1000, static_cast<unsigned>(n));
    Whole w;
    while ((w = p.link[0]->send_whole(&h, sizeof h, pay.data(), pay.size())) == Whole::kNotYet) {
      read_one();
      if (HasFatalFailure()) return;
    }
    ASSERT_EQ(w, Whole::kDone) << "message " << n;
    queued.push_back(n++);
  }
  while (read < queued.size()) ASSERT_EQ(recv_one(*p.link[1], 1000), queued[read++]);
}

TEST(ShmLinkMessages, ManyMessagesAcrossTheWrapToMemoryAndToASink) {
  // 40 messages of 100,003 bytes (about 2 ring lengths): every other one is
  // taken by a sink of 12-byte granules, so granules split by the wrap are
  // staged and handed over whole.
  Pair p;
  constexpr int kMessages = 40;
  constexpr size_t kBytes = 100003 / 12 * 12;
  std::vector<std::vector<char>> payloads;
  std::vector<Header> headers(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    payloads.push_back(pattern(kBytes, unsigned(i)));
    headers[i] = Header{uint64_t(i), "msg"};
  }
  std::vector<char> stage(4096);
  int sent = 0, received = 0;
  Message s = send_msg(headers[0], payloads[0]);
  Header hr{};
  Message r;
  std::vector<char> dst(kBytes);
  std::unique_ptr<Keep> keep;
  auto fresh_recv = [&] {
    r = Message{};
    r.header = &hr;
    r.header_bytes = sizeof hr;
  };
  fresh_recv();
  for (int spins = 0; received < kMessages && spins < 1000000; ++spins) {
    if (sent < kMessages) {
      p.link[0]->send(s);
      if (s.complete && ++sent < kMessages) s = send_msg(headers[sent], payloads[sent]);
    }
    if (r.header_done < sizeof hr) {
      p.link[1]->recv_header(r);
      if (r.header_done < sizeof hr) continue;
      ASSERT_EQ(hr.n, uint64_t(received));
      if (received % 2 == 1) {
        keep = std::make_unique<Keep>(12);
        r.sink = keep.get();
        r.stage = {stage.data(), stage.size(), DeviceKind::kCPU};
        r.granule = 12;
      }
      r.payload = {dst.data(), kBytes, DeviceKind::kCPU};
    }
    p.link[1]->recv_payload(r);
    if (!r.complete) continue;
    const std::vector<char>& got = r.sink ? keep->got : dst;
    ASSERT_EQ(got, payloads[received]) << "message " << received;
    ++received;
    fresh_recv();
  }
  EXPECT_EQ(received, kMessages);
}

TEST(ShmLinkMessages, LargePayloadGoesByReferenceOnlyWhenAllowedAndCompletesWhenRead) {
  Pair p;
  auto payload = pattern(1 << 20, 3);
  for (bool allowed : {false, true}) {
    Header hs{1, "big"};
    Message s = send_msg(hs, payload, allowed);
    Header hr{};
    std::vector<char> dst(payload.size());
    Message r;
    r.header = &hr;
    r.header_bytes = sizeof hr;
    int spins = 0;
    while ((!s.complete || !r.complete) && ++spins < 100000) {
      if (!s.complete) p.link[0]->send(s);
      if (link_state<ShmMessage>(s).by_reference) {
        EXPECT_FALSE(s.complete && !r.complete) << "a by-reference send completed before the receiver read it";
      }
      if (r.header_done < sizeof hr) {
        p.link[1]->recv_header(r);
        if (r.header_done < sizeof hr) continue;
        r.payload = {dst.data(), dst.size(), DeviceKind::kCPU};
      }
      if (!r.complete) p.link[1]->recv_payload(r);
    }
    ASSERT_TRUE(s.complete && r.complete);
    EXPECT_EQ(link_state<ShmMessage>(s).by_reference, allowed);
    EXPECT_EQ(link_state<ShmMessage>(r).by_reference, allowed);
    EXPECT_EQ(dst, payload);
  }
}

TEST(ShmLinkMessages, SingleCopyOffMeansNoReference) {
  Pair p(/*single_copy=*/false);
  auto payload = pattern(1 << 20, 4);
  Header hs{1, "big"};
  Message s = send_msg(hs, payload, true);
  p.link[0]->send(s);
  EXPECT_FALSE(link_state<ShmMessage>(s).by_reference);
  EXPECT_GT(s.header_done + s.done, 0u);
}

TEST(ShmLinkMessages, ReceiveWaitIsADoorbellRungOnFlush) {
  Pair p;
  Header hr{};
  Message r;
  r.header = &hr;
  r.header_bytes = sizeof hr;
  EXPECT_EQ(p.link[1]->arm_recv(r, WakeBy::kDoorbell).how, WaitOn::How::kDoorbell);
  Header hs{2, "wake"};
  std::vector<char> payload = pattern(16, 5);
  Message s = send_msg(hs, payload);
  p.link[0]->send(s);
  EXPECT_EQ(p.doorbells[1], 0);  // deferred to flush
  p.link[0]->flush();
  EXPECT_EQ(p.doorbells[1], 1);
  p.link[1]->disarm();
  EXPECT_EQ(p.link[1]->arm_recv(r, WakeBy::kDoorbell).how, WaitOn::How::kReady);
  p.link[1]->disarm();
}

TEST(ShmLinkMessages, FutexReceiveWaitBumpsTheSleepersWordNotTheDoorbell) {
  Pair p;
  Header hr{};
  Message r;
  r.header = &hr;
  r.header_bytes = sizeof hr;
  const uint32_t seq = p.seg[1]->wake_word().load();
  EXPECT_EQ(p.link[1]->arm_recv(r, WakeBy::kFutex).how, WaitOn::How::kFutex);
  Header hs{3, "futex"};
  std::vector<char> payload = pattern(16, 6);
  Message s = send_msg(hs, payload);
  p.link[0]->send(s);
  EXPECT_EQ(p.seg[1]->wake_word().load(), seq);  // deferred to flush
  p.link[0]->flush();
  EXPECT_EQ(p.seg[1]->wake_word().load(), seq + 1);
  EXPECT_EQ(p.doorbells[1], 0);
  EXPECT_EQ(p.seg[0]->wake_word().load(), 0u);  // the sender's own word is untouched
  p.link[0]->flush();                           // nothing owed: no second wake
  EXPECT_EQ(p.seg[1]->wake_word().load(), seq + 1);
  p.link[1]->disarm();
  EXPECT_EQ(p.link[1]->arm_recv(r, WakeBy::kFutex).how, WaitOn::How::kReady);
  p.link[1]->disarm();
}

TEST(ShmLinkMessages, FutexSendWaitForRoomIsWokenWhenTheReceiverFreesIt) {
  Pair p;
  // Fill the ring from 0 to 1 until a send stalls.
  std::vector<char> payload = pattern(64 * 1024, 8);
  Header hs{4, "fill"};
  Message s;
  for (int i = 0; i < 100; ++i) {
    s = send_msg(hs, payload);
    p.link[0]->send(s);
    if (!s.complete) break;
  }
  ASSERT_FALSE(s.complete) << "the ring never filled";
  const uint32_t seq = p.seg[0]->wake_word().load();
  EXPECT_EQ(p.link[0]->arm_send(s, WakeBy::kFutex).how, WaitOn::How::kFutex);
  // The receiver takes one message: room, and the sender's word is bumped.
  Header hr{};
  std::vector<char> got(payload.size());
  Message r;
  r.header = &hr;
  r.header_bytes = sizeof hr;
  r.payload = {got.data(), got.size(), DeviceKind::kCPU};
  while (!r.complete) {
    p.link[1]->recv_header(r);
    p.link[1]->recv_payload(r);
  }
  p.link[1]->flush();
  EXPECT_EQ(p.seg[0]->wake_word().load(), seq + 1);
  EXPECT_EQ(p.doorbells[0], 0);
  p.link[0]->disarm();
}

// The sleeper waits in FUTEX_WAIT (5 s at most) and a forked process writes
// after ~100 ms: the wait ends soon after, woken across processes (a private
// futex would not be), and the message is there.
TEST(ShmLinkMessages, FutexSleeperIsWokenByAWriteFromAnotherProcess) {
  Pair p;
  Header hr{};
  Message r;
  r.header = &hr;
  r.header_bytes = sizeof hr;
  std::atomic<uint32_t>& word = p.seg[1]->wake_word();
  const uint32_t seq = word.load();
  ASSERT_EQ(p.link[1]->arm_recv(r, WakeBy::kFutex).how, WaitOn::How::kFutex);
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::usleep(100 * 1000);
    Header hs{5, "from child"};
    std::vector<char> payload = pattern(32, 9);
    Message s = send_msg(hs, payload);
    p.link[0]->send(s);
    p.link[0]->flush();
    ::_exit(s.complete ? 0 : 1);
  }
  while (word.load() == seq && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    futex_wait(word, seq, 5000);
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NE(word.load(), seq) << "not woken within 5 s";
  EXPECT_LT(waited, 2.0) << "the wait ended by its timeout, not by the wake";
  p.link[1]->disarm();
  EXPECT_TRUE(p.link[1]->recv_header(r));
  EXPECT_EQ(hr.n, 5u);
  EXPECT_STREQ(hr.text, "from child");
}

// A futex wait that nobody wakes ends at its timeout (the engine relies on it
// to read the control sockets), and one whose word already moved returns at once.
TEST(ShmLinkMessages, FutexWaitEndsAtItsTimeoutOrAtOnceIfTheWordMoved) {
  Pair p;
  std::atomic<uint32_t>& word = p.seg[0]->wake_word();
  auto t0 = std::chrono::steady_clock::now();
  futex_wait(word, word.load(), 50);
  const double slept = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(slept, 0.045);
  EXPECT_LT(slept, 2.0);
  const uint32_t old = word.load();
  wake_futex(word);
  EXPECT_EQ(word.load(), old + 1);
  t0 = std::chrono::steady_clock::now();
  futex_wait(word, old, 5000);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

// Split copies: a receive that may split a by-reference payload publishes
// its destination; the sender, while it waits for its ticket, writes chunks
// of the payload into it (one per send() call) while the receiver reads the
// others; the receive ends once every chunk is in, and only then the send.

/// Sends a by-reference message of `payload` from link 0 and reads its header
/// at link 1 into *r (to `dst`, may_split as given).
void start_by_reference(Pair& p, Message& s, Header& hs, Message& r, Header& hr, std::vector<char>& payload,
                        std::vector<char>& dst, bool may_split) {
  s = send_msg(hs, payload, true);
  ASSERT_TRUE(p.link[0]->send(s));
  ASSERT_TRUE(link_state<ShmMessage>(s).by_reference);
  r = Message{};
  r.header = &hr;
  r.header_bytes = sizeof hr;
  ASSERT_TRUE(p.link[1]->recv_header(r));
  ASSERT_TRUE(link_state<ShmMessage>(r).by_reference);
  r.payload = {dst.data(), dst.size(), DeviceKind::kCPU};
  r.may_split = may_split;
}

/// A pair with one by-reference message of `bytes` started (start()): sent
/// from link 0, its header read at link 1 into r (to dst).
class ShmLinkSplit : public ::testing::Test {
 protected:
  void start(size_t bytes, unsigned seed, bool may_split) {
    payload = pattern(bytes, seed);
    dst.assign(bytes, 0);
    hs = Header{seed, "split"};
    start_by_reference(p, s, hs, r, hr, payload, dst, may_split);
  }
  Pair p;
  std::vector<char> payload, dst;
  Header hs{}, hr{};
  Message s, r;
};

TEST_F(ShmLinkSplit, TheWaitingSenderWritesChunksAndTheReceiveEndsWhenAllAreIn) {
  start(1 << 20, 11, true);  // 8 chunks of 128 KiB
  ASSERT_EQ(split_chunk(payload.size()), size_t(128) << 10);
  ASSERT_TRUE(p.link[1]->recv_payload(r));  // publishes, reads chunk 0
  EXPECT_TRUE(link_state<ShmMessage>(r).split);
  EXPECT_EQ(link_state<ShmMessage>(r).split_mine, 1u);
  int written = 0;
  while (p.link[0]->send(s)) ++written;  // the sender takes every chunk left
  EXPECT_EQ(written, 7);
  EXPECT_FALSE(s.complete) << "a split send completed before the receiver had every chunk";
  ASSERT_TRUE(p.link[1]->recv_payload(r));  // nothing left to claim, all written
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(dst, payload);
  p.link[0]->send(s);
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(p.link[0]->split_stats().chunks_written, 7u);
  EXPECT_EQ(p.link[1]->split_stats().split_reads, 1u);
  // A second payload: its ticket is new, the sender of the first one (done)
  // takes no chunk of it.
  auto second = pattern(512 << 10, 12);
  std::vector<char> dst2(second.size(), 0);
  Header hs2{8, "again"}, hr2{};
  Message s2, r2;
  start_by_reference(p, s2, hs2, r2, hr2, second, dst2, true);
  EXPECT_FALSE(p.link[0]->send(s));  // the first message, complete: no help
  while (!r2.complete) {
    ASSERT_TRUE(p.link[1]->recv_payload(r2));  // the receiver alone
  }
  EXPECT_EQ(dst2, second);
  EXPECT_EQ(p.link[0]->split_stats().chunks_written, 7u);
  p.link[0]->send(s2);
  EXPECT_TRUE(s2.complete);
}

TEST_F(ShmLinkSplit, WithoutMaySplitTheReceiverCopiesAlone) {
  start(1 << 20, 13, false);
  for (int i = 0; i < 100 && !r.complete; ++i) {
    EXPECT_FALSE(p.link[0]->send(s));
    p.link[1]->recv_payload(r);
  }
  ASSERT_TRUE(r.complete);
  EXPECT_FALSE(link_state<ShmMessage>(r).split);
  EXPECT_EQ(dst, payload);
  EXPECT_EQ(p.link[0]->split_stats().chunks_written, 0u);
  EXPECT_EQ(p.link[1]->split_stats().split_reads, 0u);
}

TEST_F(ShmLinkSplit, ASleepingSenderIsWokenWhenASplitIsPublished) {
  start(1 << 20, 14, true);
  EXPECT_EQ(p.link[0]->arm_send(s, WakeBy::kDoorbell).how, WaitOn::How::kDoorbell);
  EXPECT_EQ(p.doorbells[0], 0);
  ASSERT_TRUE(p.link[1]->recv_payload(r));  // publishes and rings at once
  EXPECT_EQ(p.doorbells[0], 1);
  p.link[0]->disarm();
  // Armed again with a chunk open: nothing to wait for.
  EXPECT_EQ(p.link[0]->arm_send(s, WakeBy::kDoorbell).how, WaitOn::How::kReady);
  p.link[0]->disarm();
}

TEST_F(ShmLinkSplit, AReceiverWaitingForTheSendersChunkIsWokenWhenItIsWritten) {
  start(256 << 10, 15, true);               // 4 chunks of 64 KiB
  ASSERT_TRUE(p.link[1]->recv_payload(r));  // publishes, chunk 0
  // A split receive with chunks left to claim never sleeps.
  EXPECT_EQ(p.link[1]->arm_recv(r, WakeBy::kDoorbell).how, WaitOn::How::kReady);
  p.link[1]->disarm();
  // The receiver asleep (armed as for any receive): the sender's chunk owes
  // it a wake-up, delivered on the sender's flush.
  Message idle;
  idle.header = &hr;
  idle.header_bytes = sizeof hr;
  ASSERT_EQ(p.link[1]->arm_recv(idle, WakeBy::kDoorbell).how, WaitOn::How::kDoorbell);
  const int rung = p.doorbells[1];
  ASSERT_TRUE(p.link[0]->send(s));  // chunk 1, by the sender
  EXPECT_EQ(p.doorbells[1], rung);  // deferred to flush
  p.link[0]->flush();
  EXPECT_EQ(p.doorbells[1], rung + 1);
  p.link[1]->disarm();
  ASSERT_TRUE(p.link[1]->recv_payload(r));  // chunk 2
  ASSERT_TRUE(p.link[1]->recv_payload(r));  // chunk 3
  // Every chunk claimed, the sender's written: ready, and the next call ends it.
  p.link[1]->recv_payload(r);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(dst, payload);
  p.link[0]->send(s);
  EXPECT_TRUE(s.complete);
}

TEST_F(ShmLinkSplit, AnAbandonedSplitReceiveTakesNoMoreChunksFromTheSender) {
  start(1 << 20, 17, true);
  ASSERT_TRUE(p.link[1]->recv_payload(r));  // publishes, chunk 0
  ASSERT_TRUE(p.link[0]->send(s));          // chunk 1, by the sender
  // The receiver's operation failed: it closes the split before the caller
  // gets its buffer back.
  p.link[1]->abandon(r);
  EXPECT_FALSE(link_state<ShmMessage>(r).split);
  const std::vector<char> after = dst;
  EXPECT_FALSE(p.link[0]->send(s));  // nothing left to claim
  EXPECT_EQ(p.link[0]->split_stats().chunks_written, 1u);
  EXPECT_EQ(dst, after);
  EXPECT_FALSE(s.complete);
}

// A peer's segment made by another OmniCCL version (another layout of rings
// and records) is refused when opened, with an error that says so.
TEST(ShmSegmentLayout, ASegmentOfAnotherVersionIsRefusedByName) {
  const std::string name = ShmSegment::name_for(std::to_string(std::random_device{}()) + "v", 0);
  auto own = ShmSegment::create(name, 2);
  EXPECT_NO_THROW(ShmSegment::open(name, 2));
  for (uint64_t other : {uint64_t(0), kShmLayout + 1}) {
    const_cast<SegmentHeader&>(own->header()).layout = other;
    try {
      ShmSegment::open(name, 2);
      ADD_FAILURE() << "a segment of layout " << other << " was opened";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("was made by another OmniCCL version"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// A peer's segment that is gone before this rank maps it (its creator gave
// up at its deadline, or died, during link setup) is a failed peer, not a
// failed system call: a rank stopped in a split past its peer's deadline got
// OCCL_ERR_SYSTEM ("shm_open(...): No such file or directory") on resuming.
TEST(ShmSegmentGone, OpeningItIsAPeerFailure) {
  const std::string name = ShmSegment::name_for(std::to_string(std::random_device{}()) + "g", 0);
  ShmSegment::create(name, 2).reset();  // made, then unlinked by its owner
  try {
    ShmSegment::open(name, 2);
    ADD_FAILURE() << "a segment that no longer exists was opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kPeerFailure) << e.what();
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace omniccl::transport
