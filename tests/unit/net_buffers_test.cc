// TCP data sockets get their large buffers before the handshake. The window
// scale and the window clamp are fixed when the connection is made: buffers
// set afterwards leave a 64 KiB clamp on Linux, and 1 MiB broadcasts over
// loopback then ran at 225 us instead of 92 us in most runs (the sender waits
// for window updates). listen_tcp sets them on the listener (accepted
// sockets inherit them) and connect_to before it connects.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>

#include "common/fd.h"
#include "common/net.h"
#include "common/time.h"

namespace omniccl::net {
namespace {

int int_option(int fd, int level, int name) {
  int v = 0;
  socklen_t len = sizeof v;
  EXPECT_EQ(::getsockopt(fd, level, name, &v, &len), 0);
  return v;
}

/// What the kernel reports for a fresh TCP socket given the data buffers by
/// hand (it caps them at net.core.rmem_max / wmem_max and doubles them).
int reference_rcvbuf() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  int buf = 4 << 20;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  return int_option(fd.get(), SOL_SOCKET, SO_RCVBUF);
}

TEST(NetBuffers, TheListenerHasTheDataBuffersBeforeItAccepts) {
  SocketAddress addr;
  UniqueFd listener = listen_tcp("127.0.0.1", addr);
  EXPECT_EQ(int_option(listener.get(), SOL_SOCKET, SO_RCVBUF), reference_rcvbuf());
}

TEST(NetBuffers, BothEndsAdvertiseWindowsAsLargeAsTheirBuffers) {
  SocketAddress addr;
  UniqueFd listener = listen_tcp("127.0.0.1", addr);
  UniqueFd connected = connect_to(addr, Deadline::after_ms(5000));
  UniqueFd accepted = accept_until(listener.get(), Deadline::after_ms(5000));
  ASSERT_TRUE(connected.valid());
  ASSERT_TRUE(accepted.valid());
  for (int fd : {connected.get(), accepted.get()}) {
    const int rcvbuf = int_option(fd, SOL_SOCKET, SO_RCVBUF);
    EXPECT_EQ(rcvbuf, reference_rcvbuf());
    // The largest window this end may advertise: about half the buffer
    // (the rest is the kernel's overhead), not the 64 KiB of a buffer set
    // after the handshake.
    const int clamp = int_option(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP);
    EXPECT_GE(clamp, rcvbuf / 4) << "window clamp " << clamp << " with a receive buffer of " << rcvbuf;
  }
  EXPECT_EQ(int_option(connected.get(), IPPROTO_TCP, TCP_NODELAY), 1);
}

// accept_own takes the connection its own socket made, however many others
// reached the listener first, and closes those: each stranger then reads
// end-of-stream.
TEST(NetAcceptOwn, StrangersThatConnectFirstAreClosedNotAccepted) {
  SocketAddress addr;
  UniqueFd listener = listen_tcp("127.0.0.1", addr);
  UniqueFd stranger1 = connect_to(addr, Deadline::after_ms(5000));
  UniqueFd stranger2 = connect_to(addr, Deadline::after_ms(5000));
  UniqueFd mine = connect_to(addr, Deadline::after_ms(5000));
  ASSERT_TRUE(stranger1.valid() && stranger2.valid() && mine.valid());
  UniqueFd accepted = accept_own(listener.get(), mine.get(), Deadline::after_ms(5000));
  ASSERT_TRUE(accepted.valid());
  const char out = 'x';
  ASSERT_EQ(::send(mine.get(), &out, 1, 0), 1);
  char in = 0;
  EXPECT_EQ(::recv(accepted.get(), &in, 1, 0), 1);
  EXPECT_EQ(in, 'x');
  for (int fd : {stranger1.get(), stranger2.get()}) {
    char c = 0;
    EXPECT_EQ(::recv(fd, &c, 1, 0), 0) << "a stranger's connection was not closed";
  }
}

// Nothing of its own arrives: an invalid fd by the deadline, not a stranger.
TEST(NetAcceptOwn, OnlyStrangersGiveNothingByTheDeadline) {
  SocketAddress addr, other_addr;
  UniqueFd listener = listen_tcp("127.0.0.1", addr);
  UniqueFd other = listen_tcp("127.0.0.1", other_addr);
  UniqueFd stranger = connect_to(addr, Deadline::after_ms(5000));
  UniqueFd elsewhere = connect_to(other_addr, Deadline::after_ms(5000));  // "mine", to another listener
  ASSERT_TRUE(stranger.valid() && elsewhere.valid());
  const auto t0 = std::chrono::steady_clock::now();
  UniqueFd accepted = accept_own(listener.get(), elsewhere.get(), Deadline::after_ms(300));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(accepted.valid());
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 5000);
}

}  // namespace
}  // namespace omniccl::net
