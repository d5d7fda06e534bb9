// TcpLink's read-ahead on socket 0: a burst of small messages sent before
// the receiver looks is read with a few reads (the rest waits in the cache),
// every message arrives whole and in order, a wait on a message whose bytes
// are cached is not armed on the socket (kReady), and large payloads, one
// socket or striped over two, come out right behind cached small messages;
// a large payload starts, and every message ends, on a 64-byte boundary of
// the stream.
// Two TcpLinks over real loopback connections in one process.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/net.h"
#include "common/time.h"
#include "transport/tcp/tcp_link.h"

namespace omniccl::transport {
namespace {

struct LinkPair {
  std::unique_ptr<TcpLink> a;  // rank 0's link to rank 1
  std::unique_ptr<TcpLink> b;  // rank 1's link to rank 0
};

LinkPair connect_pair(int streams) {
  std::vector<UniqueFd> as, bs;
  for (int i = 0; i < streams; ++i) {
    net::SocketAddress addr;
    UniqueFd listener = net::listen_tcp("127.0.0.1", addr);
    UniqueFd c = net::connect_to(addr, Deadline::after_ms(5000));
    UniqueFd s = net::accept_until(listener.get(), Deadline::after_ms(5000));
    as.push_back(std::move(c));
    bs.push_back(std::move(s));
  }
  return {std::make_unique<TcpLink>(std::move(as), 1), std::make_unique<TcpLink>(std::move(bs), 0)};
}

struct Header {
  uint64_t index;
  uint64_t bytes;
};

// Sends one message (header + payload) to completion, bounded in time.
void send_all(TcpLink& link, Header& h, const std::vector<char>& payload) {
  Message m;
  m.header = &h;
  m.header_bytes = sizeof h;
  m.payload = {const_cast<char*>(payload.data()), payload.size(), DeviceKind::kCPU};
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!m.complete) {
    link.send(m);
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "send of message " << h.index << " stuck";
  }
}

// Receives one message to completion, bounded in time; counts the passes
// that moved nothing.
void recv_all(TcpLink& link, Header& h, std::vector<char>& payload, size_t bytes) {
  Message m;
  m.header = &h;
  m.header_bytes = sizeof h;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (m.header_done < m.header_bytes) {
    link.recv_header(m);
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "header stuck";
  }
  ASSERT_EQ(h.bytes, bytes);
  payload.assign(bytes, 0);
  m.payload = {payload.data(), bytes, DeviceKind::kCPU};
  while (!m.complete) {
    link.recv_payload(m);
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "payload of message " << h.index << " stuck";
  }
}

char byte_of(uint64_t msg, size_t i) { return static_cast<char>((msg * 131 + i * 7 + 3) & 0xff); }

std::vector<char> payload_of(uint64_t msg, size_t bytes) {
  std::vector<char> p(bytes);
  for (size_t i = 0; i < bytes; ++i) p[i] = byte_of(msg, i);
  return p;
}

TEST(TcpLinkCache, ABurstOfSmallMessagesIsReadAheadAndArrivesInOrder) {
  LinkPair l = connect_pair(1);
  constexpr uint64_t kMessages = 200;
  for (uint64_t i = 0; i < kMessages; ++i) {
    Header h{i, 8};
    send_all(*l.a, h, payload_of(i, 8));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // all of it in the receiver's socket
  Header h{};
  std::vector<char> got;
  recv_all(*l.b, h, got, 8);
  EXPECT_EQ(h.index, 0u);
  // One read took the first message and what followed it.
  EXPECT_GT(l.b->cached(), 0u);
  Message next;
  next.header = &h;
  next.header_bytes = sizeof h;
  EXPECT_EQ(l.b->arm_recv(next, WakeBy::kDoorbell).how, WaitOn::How::kReady) << "bytes are cached: no wait";
  EXPECT_EQ(got, payload_of(0, 8));
  for (uint64_t i = 1; i < kMessages; ++i) {
    recv_all(*l.b, h, got, 8);
    ASSERT_EQ(h.index, i);
    ASSERT_EQ(got, payload_of(i, 8)) << "message " << i;
  }
  EXPECT_EQ(l.b->cached(), 0u);
  next.header_done = 0;
  EXPECT_EQ(l.b->arm_recv(next, WakeBy::kDoorbell).how, WaitOn::How::kPoll) << "nothing cached: poll the socket";
}

// Small and large messages mixed, sent from another thread while the
// receiver reads: the large payloads (past the cache's size, and striped
// when there are two sockets) come out right behind cached bytes.
void mixed(int streams) {
  LinkPair l = connect_pair(streams);
  // (3 << 18) + 5 ends on socket 1 of two: the zeros after it go on socket 0.
  const std::vector<size_t> sizes = {8,  40,      1 << 20, 8,   0, 100000,        8, TcpLink::kCacheBytes, 3 << 20, 8,
                                     64, 1 << 16, 8,       777, 8, (1 << 20) + 3, 8, (3 << 18) + 5,        8};
  std::thread sender([&] {
    for (size_t i = 0; i < sizes.size(); ++i) {
      Header h{i, sizes[i]};
      send_all(*l.a, h, payload_of(i, sizes[i]));
    }
  });
  Header h{};
  std::vector<char> got;
  for (size_t i = 0; i < sizes.size(); ++i) {
    recv_all(*l.b, h, got, sizes[i]);
    EXPECT_EQ(h.index, i);
    EXPECT_TRUE(got == payload_of(i, sizes[i])) << "message " << i << " (" << sizes[i] << " bytes)";
  }
  sender.join();
  EXPECT_EQ(l.b->cached(), 0u);
}

TEST(TcpLinkCache, LargePayloadsFollowCachedBytesOnOneSocket) { mixed(1); }

TEST(TcpLinkCache, LargePayloadsFollowCachedBytesOnTwoSockets) { mixed(2); }

/// Reads exactly `n` bytes from a blocking or non-blocking socket, bounded in time.
std::vector<char> read_exactly(int fd, size_t n) {
  std::vector<char> out(n);
  size_t got = 0;
  const Deadline until = Deadline::after_ms(10000);
  while (got < n && !until.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t r = ::recv(fd, out.data() + got, n - got, MSG_DONTWAIT);
    if (r > 0) got += size_t(r);
    if (r == 0) break;
  }
  out.resize(got);
  return out;
}

/// A TcpLink of one socket whose other end is a plain socket, read raw.
struct RawPeer {
  std::unique_ptr<TcpLink> link;
  UniqueFd raw;
};

RawPeer link_to_raw_socket() {
  net::SocketAddress addr;
  UniqueFd listener = net::listen_tcp("127.0.0.1", addr);
  std::vector<UniqueFd> fds;
  fds.push_back(net::connect_to(addr, Deadline::after_ms(5000)));
  RawPeer r;
  r.raw = net::accept_until(listener.get(), Deadline::after_ms(5000));
  if (fds[0].valid() && r.raw.valid()) r.link = std::make_unique<TcpLink>(std::move(fds), 1);
  return r;
}

// A payload of kAlignedPayloadMin bytes or more starts on a 64-byte boundary
// of socket 0's byte stream: zero bytes follow the header up to it, so that
// the payload lands at the same place modulo 64 in the sender's socket pages
// as in 64-byte aligned buffers (the kernel's receive copy ran 2-3.5x slower
// when the two were a few bytes apart). Smaller payloads
// follow their header at once. What the link writes is read raw here.
TEST(TcpLinkFraming, LargePayloadsStartOnA64ByteBoundaryOfTheStream) {
  RawPeer r = link_to_raw_socket();
  ASSERT_TRUE(r.link && r.raw.valid());
  TcpLink& link = *r.link;
  const UniqueFd& raw = r.raw;
  for (size_t bytes : {TcpLink::kAlignedPayloadMin, size_t(100), TcpLink::kAlignedPayloadMin - 1, size_t(3) << 20}) {
    Header h{bytes, bytes};
    const std::vector<char> p = payload_of(bytes, bytes);
    std::thread sender([&] { send_all(link, h, p); });
    const size_t pad = bytes >= TcpLink::kAlignedPayloadMin ? 64 - sizeof h : 0;
    const size_t tail = (64 - (sizeof h + pad + bytes) % 64) % 64;  // EveryMessageEnds... below
    const std::vector<char> wire = read_exactly(raw.get(), sizeof h + pad + bytes + tail);
    sender.join();
    ASSERT_EQ(wire.size(), sizeof h + pad + bytes + tail) << bytes << "-byte payload";
    EXPECT_EQ(std::memcmp(wire.data(), &h, sizeof h), 0) << bytes;
    EXPECT_EQ(std::count(wire.begin() + sizeof h, wire.begin() + long(sizeof h + pad), 0), long(pad)) << bytes;
    EXPECT_TRUE(std::equal(p.begin(), p.end(), wire.begin() + long(sizeof h + pad))) << bytes;
  }
  char extra;
  EXPECT_EQ(::recv(raw.get(), &extra, 1, MSG_DONTWAIT), -1) << "bytes beyond the messages";
}

// Every message, small ones too, ends on a 64-byte boundary of socket 0's
// byte stream: zero bytes follow its payload up to one. The sending thread's
// socket pages are shared by every socket it writes to and start again at
// offset 0 only when everything in them was taken, so a message of another
// length (a barrier's header alone) shifted every later payload there.
// The wire is read raw; with the test's 16-byte header.
TEST(TcpLinkFraming, EveryMessageEndsOnA64ByteBoundaryOfTheStream) {
  RawPeer r = link_to_raw_socket();
  ASSERT_TRUE(r.link && r.raw.valid());
  TcpLink& link = *r.link;
  const UniqueFd& raw = r.raw;
  struct Case {
    size_t bytes, lead, wire;  // payload; header and zeros before it; all on the wire
  };
  for (const Case c :
       {Case{0, 16, 64}, Case{8, 16, 64}, Case{48, 16, 64}, Case{49, 16, 128}, Case{100, 16, 128}, Case{4095, 16, 4160},
        Case{4096, 64, 4160}, Case{4100, 64, 4224}, Case{(1 << 20) + 3, 64, (1 << 20) + 128}}) {
    Header h{c.bytes, c.bytes};
    const std::vector<char> p = payload_of(c.bytes, c.bytes);
    std::thread sender([&] { send_all(link, h, p); });
    const std::vector<char> wire = read_exactly(raw.get(), c.wire);
    sender.join();
    ASSERT_EQ(wire.size(), c.wire) << c.bytes << "-byte payload";
    EXPECT_EQ(std::memcmp(wire.data(), &h, sizeof h), 0) << c.bytes;
    EXPECT_TRUE(std::equal(p.begin(), p.end(), wire.begin() + long(c.lead))) << c.bytes;
    EXPECT_EQ(std::count(wire.begin() + long(c.lead + c.bytes), wire.end(), 0), long(c.wire - c.lead - c.bytes))
        << "zeros after the " << c.bytes << "-byte payload";
  }
  char extra;
  EXPECT_EQ(::recv(raw.get(), &extra, 1, MSG_DONTWAIT), -1) << "bytes beyond the messages";
}

}  // namespace
}  // namespace omniccl::transport
