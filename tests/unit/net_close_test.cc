// A socket closed while bytes it was sent lie unread makes the kernel reset
// the connection, and a reset throws away what the closing side had written
// but not yet delivered. Ranks that leave while a slower peer still talks to
// them (a stall query, a lossy link) must not lose their last words (their
// goodbye, the last result): net::finish_sending shuts the writing side,
// reads and drops what arrives, and waits (bounded) until the peer has
// acknowledged every byte.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/fd.h"
#include "common/net.h"
#include "common/time.h"

namespace omniccl::net {
namespace {

struct Pair {
  UniqueFd a;  // the reader that talks to b and reads late
  UniqueFd b;  // the side that writes a lot and leaves
};

Pair tcp_pair() {
  SocketAddress addr;
  UniqueFd listener = listen_tcp("127.0.0.1", addr);
  Pair p;
  p.a = connect_to(addr, Deadline::after_ms(5000));
  p.b = accept_until(listener.get(), Deadline::after_ms(5000));
  // A small, fixed receive buffer (no autotuning), so that what b writes
  // stays unacknowledged until a reads it.
  int small = 64 * 1024;
  ::setsockopt(p.a.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  EXPECT_TRUE(p.a.valid());
  EXPECT_TRUE(p.b.valid());
  return p;
}

/// b fills the connection until the kernel takes no more (a's receive
/// buffer and b's send buffer full); returns how many bytes it wrote.
size_t fill(int fd) {
  set_nonblocking(fd);
  std::vector<char> chunk(64 * 1024, 'd');
  size_t total = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int idle = 0;
  while (std::chrono::steady_clock::now() < until && idle < 20) {
    ssize_t w = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      total += static_cast<size_t>(w);
      idle = 0;
    } else {
      ++idle;  // the window may still open a little: try a few more times
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return total;
}

/// Reads until EOF or an error; *err is the errno of a failed read (0 at EOF).
size_t read_to_end(int fd, int* err) {
  std::vector<char> buf(256 * 1024);
  size_t total = 0;
  *err = 0;
  for (;;) {
    ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
    if (r > 0) {
      total += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) *err = errno;
    return total;
  }
}

// Without finish_sending the unread byte makes close() reset the connection
// and the written-but-undelivered tail is lost: this is the failure the
// function exists for (kept as a test so the premise stays true).
TEST(NetClose, PlainCloseWithUnreadBytesLosesTheTail) {
  Pair p = tcp_pair();
  ASSERT_EQ(::send(p.a.get(), "q", 1, MSG_NOSIGNAL), 1);  // never read by b
  size_t written = fill(p.b.get());
  ASSERT_GT(written, 0u);
  p.b.reset();  // plain close
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int err = 0;
  size_t got = read_to_end(p.a.get(), &err);
  EXPECT_LT(got, written);
  EXPECT_EQ(err, ECONNRESET);
}

TEST(NetClose, FinishSendingDeliversEveryByteThenEof) {
  Pair p = tcp_pair();
  ASSERT_EQ(::send(p.a.get(), "q", 1, MSG_NOSIGNAL), 1);  // never read by b's owner
  size_t written = fill(p.b.get());
  ASSERT_GT(written, 0u);
  std::atomic<size_t> got{0};
  std::atomic<int> err{-1};
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // reads late
    int e = 0;
    got = read_to_end(p.a.get(), &e);
    err = e;
  });
  // a also talks while b leaves (a stall query): b must drop it, not reset.
  ASSERT_EQ(::send(p.a.get(), "q", 1, MSG_NOSIGNAL), 1);
  auto t0 = std::chrono::steady_clock::now();
  finish_sending({p.b.get()}, Deadline::after_ms(5000));
  auto took = std::chrono::steady_clock::now() - t0;
  p.b.reset();
  reader.join();
  EXPECT_EQ(got.load(), written);
  EXPECT_EQ(err.load(), 0) << "the reader saw errno " << err.load() << " instead of EOF";
  EXPECT_LT(took, std::chrono::seconds(4));
}

TEST(NetClose, FinishSendingIsBoundedWhenThePeerNeverReads) {
  Pair p = tcp_pair();
  size_t written = fill(p.b.get());
  ASSERT_GT(written, 0u);
  auto t0 = std::chrono::steady_clock::now();
  finish_sending({p.b.get()}, Deadline::after_ms(300));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(NetClose, FinishSendingReturnsAtOnceWhenThePeerIsGone) {
  Pair p = tcp_pair();
  p.a.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(::send(p.b.get(), "x", 1, MSG_NOSIGNAL), 1);  // answered with a reset
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto t0 = std::chrono::steady_clock::now();
  finish_sending({p.b.get()}, Deadline::after_ms(5000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
}

TEST(NetClose, FinishSendingLeavesNonTcpSocketsAlone) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  UniqueFd x(sv[0]), y(sv[1]);
  ASSERT_EQ(::send(x.get(), "z", 1, MSG_NOSIGNAL), 1);  // unread by y: no ack will come
  auto t0 = std::chrono::steady_clock::now();
  finish_sending({x.get()}, Deadline::after_ms(5000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  char c = 0;
  EXPECT_EQ(::send(x.get(), "w", 1, MSG_NOSIGNAL | MSG_DONTWAIT), 1) << "the unix socket was shut down";
  EXPECT_EQ(::recv(y.get(), &c, 1, 0), 1);
}

}  // namespace
}  // namespace omniccl::net
