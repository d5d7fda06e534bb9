// Setup listeners survive stray connections: two meshes are built in this
// process (threads as ranks, an in-memory address exchange), and before the
// higher rank connects, a stranger connects to the lower rank's listeners
// and closes, sends garbage, or sends half a hello and goes silent. The mesh
// must still come up, long before the operation deadline.
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/net.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/time.h"
#include "transport/control_wire.h"
#include "transport/mesh.h"
#include "mesh_exchange.h"

namespace omniccl::transport {
namespace {

using test::Exchange;
using test::loopback_options;

/// Builds a 2-rank TCP mesh; `attack(rank0_blob)` runs in rank 1 before it
/// connects. Returns the seconds the slower rank took; fails the test if
/// either rank failed.
double build_mesh_under(const std::function<void(const std::string&)>& attack, const std::string& token = "",
                        uint64_t* session_out = nullptr) {
  Exchange ex;
  // A fresh session: it names the abstract unix sockets, and these tests may
  // run at the same time in separate processes.
  const uint64_t session = test::fresh_session();
  if (session_out != nullptr) *session_out = session;
  std::unique_ptr<Mesh> meshes[2];
  std::string errors[2];
  double seconds[2] = {0, 0};
  auto run = [&](int rank) {
    const auto t0 = Clock::now();
    try {
      MeshOptions o = loopback_options(rank, 2, session, "tcp", token);
      meshes[rank] = Mesh::create(o, [&](const std::string& mine) {
        auto all = ex.all_gather(rank, mine);
        if (rank == 1) attack(all[0]);
        return all;
      });
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
    seconds[rank] = std::chrono::duration<double>(Clock::now() - t0).count();
  };
  std::thread r0(run, 0), r1(run, 1);
  r0.join();
  r1.join();
  EXPECT_TRUE(meshes[0] && meshes[1]) << "rank 0: " << errors[0] << "\nrank 1: " << errors[1];
  return std::max(seconds[0], seconds[1]);
}

/// Connects to both of rank 0's listeners (control on the unix socket, data
/// on TCP) and does `what` on each connection; the connections stay open
/// until `keep` is destroyed.
void attack_both(const std::string& rank0_blob, const std::function<void(int)>& what, std::vector<UniqueFd>& keep) {
  const Endpoint rank0 = Endpoint::decode(rank0_blob, 0);
  for (const std::string& addr : {rank0.unix_addr, rank0.tcp_addr}) {
    UniqueFd c = net::connect_to(net::SocketAddress{addr}, Deadline::after_ms(5000));
    what(c.get());
    keep.push_back(std::move(c));
  }
}

TEST(Handshake, ConnectAndCloseDoesNotKillSetup) {
  std::vector<UniqueFd> keep;
  double s = build_mesh_under([&](const std::string& blob) {
    attack_both(
        blob, [](int fd) { ::shutdown(fd, SHUT_RDWR); }, keep);
  });
  EXPECT_LT(s, 10.0);
}

TEST(Handshake, GarbageHelloIsDropped) {
  std::vector<UniqueFd> keep;
  double s = build_mesh_under([&](const std::string& blob) {
    attack_both(
        blob,
        [](int fd) {
          const char junk[64] = "GET / HTTP/1.0\r\n\r\n";
          (void)::send(fd, junk, sizeof junk, MSG_NOSIGNAL);
        },
        keep);
  });
  EXPECT_LT(s, 10.0);
}

// Half a hello, then silence: dropped after the short handshake timeout
// (5 s), not after the 30 s deadline; the real peer is not held up by it.
TEST(Handshake, SilentHalfHelloDoesNotStallSetup) {
  std::vector<UniqueFd> keep;
  double s = build_mesh_under([&](const std::string& blob) {
    attack_both(
        blob,
        [](int fd) {
          const char half[10] = {'2', 'H', 'C', 'O'};
          (void)::send(fd, half, sizeof half, MSG_NOSIGNAL);
        },
        keep);
  });
  EXPECT_LT(s, 10.0);
}

// With a job token, a stranger who knows the session (an observer of the
// network can see it) but not the token sends a perfect hello claiming rank
// 1 with a proof made from a wrong token: it is dropped before it can take
// rank 1's place, and the real rank 1 completes the mesh.
TEST(Handshake, WrongTokenCannotTakeARank) {
  std::vector<UniqueFd> keep;
  uint64_t session = 0;
  double s = build_mesh_under(
      [&](const std::string& blob) {
        attack_both(
            blob,
            [&](int fd) {
              const uint32_t channel = keep.empty() ? 0 : 1;  // unix listener: control; TCP: data
              const wire::Hello h{wire::kHelloMagic, channel, session, 1, 0};
              char challenge[36] = {};
              try {
                net::read_all(fd, challenge, sizeof challenge, Deadline::after_ms(2000), "challenge");
              } catch (const Error&) {
                // No challenge (no authentication): send the hello alone.
              }
              std::string msg(reinterpret_cast<const char*>(&h), sizeof h);
              const std::string na(challenge + 4, 32), nc(32, 'n');
              const Digest mac = hmac_sha256("wrong token", std::string("omniccl mesh connector") + na + nc + msg);
              if (std::memcmp(challenge, "OCMA", 4) == 0) {
                msg.append(reinterpret_cast<const char*>(mac.data()), mac.size());
                msg += nc;
              }
              (void)::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
            },
            keep);
      },
      "the right token", &session);
  EXPECT_LT(s, 10.0);
}

// Without a token, a hello proves only the session id, which other users of
// the host can see (segment and socket names). A process of another user
// (a child switched to user nobody, forked before the meshes' threads start)
// connects to rank 0's listeners first with rank 1's hellos; it must be
// dropped, and the real rank 1 connect. Before, its hellos took rank 1's
// place and the mesh failed ("two processes connected as rank 1"). Needs
// root, to become another user; skipped otherwise.
TEST(Handshake, OtherUserCannotTakeARankWithoutAToken) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another user";
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    char buf[1024] = {};
    const ssize_t n = ::read(to_child[0], buf, sizeof buf - 1);
    if (n <= 0) ::_exit(4);
    // "SESSION UNIX_ADDR TCP_ADDR"
    std::string text(buf, size_t(n));
    const size_t a = text.find(' '), b = text.find(' ', a + 1);
    const uint64_t session = std::stoull(text.substr(0, a));
    std::vector<UniqueFd> keep;
    uint32_t channel = 0;  // unix listener: control; TCP: data stream 1
    for (const std::string& addr : {text.substr(a + 1, b - a - 1), text.substr(b + 1)}) {
      try {
        UniqueFd c = net::connect_to(net::SocketAddress{addr}, Deadline::after_ms(2000));
        const wire::Hello h{wire::kHelloMagic, channel++, session, 1, 0};
        (void)::send(c.get(), &h, sizeof h, MSG_NOSIGNAL);
        keep.push_back(std::move(c));
      } catch (const Error&) {}
    }
    (void)::write(from_child[1], "s", 1);
    ::sleep(5);  // holds its connections while the real rank connects
    ::_exit(0);
  }
  uint64_t session = 0;
  double s = build_mesh_under(
      [&](const std::string& blob) {
        const Endpoint rank0 = Endpoint::decode(blob, 0);
        const std::string text = std::to_string(session) + " " + rank0.unix_addr + " " + rank0.tcp_addr;
        ASSERT_EQ(::write(to_child[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
        pollfd p{from_child[0], POLLIN, 0};
        ASSERT_EQ(::poll(&p, 1, 5000), 1) << "the other user's process did not connect";
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // its hellos are read first
      },
      "", &session);
  EXPECT_LT(s, 10.0);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
}

}  // namespace
}  // namespace omniccl::transport
