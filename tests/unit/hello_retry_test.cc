// The connector's side of the mesh handshake against a scripted acceptor:
// a hello that reached the acceptor too late (its handshake timeout passed:
// a lossy link) or a connection closed without a verdict is made again; a
// refusal, or a token on one side only, fails at once naming why; the
// deadline bounds it all. Before the verdict existed, a dropped connection
// left the acceptor waiting for a rank that believed it was connected, until
// the setup deadline (seen under 30% packet loss in the multihost test).
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/fd.h"
#include "common/net.h"
#include "common/status.h"
#include "common/time.h"
#include "transport/auth.h"
#include "transport/control_wire.h"

namespace omniccl::transport {
namespace {

using Script = std::function<void(int attempt, int fd)>;

/// An acceptor on 127.0.0.1 that runs `script` on each accepted connection
/// (attempt 1, 2, ...) in its own thread, until stopped.
class FakeAcceptor {
 public:
  explicit FakeAcceptor(Script script) : script_(std::move(script)) {
    listener_ = net::listen_tcp("127.0.0.1", addr_);
    thread_ = std::thread([this] {
      for (int attempt = 1; !stop_.load(); ++attempt) {
        UniqueFd c = net::accept_until(listener_.get(), Deadline::after_ms(100));
        if (!c.valid()) {
          --attempt;
          continue;
        }
        attempts_.store(attempt);
        script_(attempt, c.get());
        kept_.push_back(std::move(c));
      }
    });
  }
  ~FakeAcceptor() {
    stop_.store(true);
    thread_.join();
  }
  const net::SocketAddress& addr() const { return addr_; }
  int attempts() const { return attempts_.load(); }

 private:
  Script script_;
  net::SocketAddress addr_;
  UniqueFd listener_;
  std::atomic<bool> stop_{false};
  std::atomic<int> attempts_{0};
  std::vector<UniqueFd> kept_;
  std::thread thread_;
};

const wire::Hello kHello{wire::kHelloMagic, 0, 42, 1, 0};

UniqueFd connect_to_fake(const FakeAcceptor& a, const std::string& token, int64_t deadline_ms = 10000) {
  return auth::connect_hello([&] { return net::connect_to(a.addr(), Deadline::after_ms(2000)); }, kHello, token,
                             Deadline::after_ms(deadline_ms), {}, "hello to rank 0");
}

/// The error connecting to `a` (with token, deadline) ends in; a failed test
/// (and status kSuccess) when it connects instead.
Error connect_error(const FakeAcceptor& a, const std::string& token, int64_t deadline_ms = 10000) {
  try {
    connect_to_fake(a, token, deadline_ms);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "connected, but the acceptor never accepted this hello";
  return Error(Status::kSuccess, "connected");
}

bool mentions(const Error& e, const char* text) { return std::string(e.what()).find(text) != std::string::npos; }

/// Reads the plain hello (no token) and checks it.
void read_hello(int fd) {
  wire::Hello h{};
  net::read_all(fd, &h, sizeof h, Deadline::after_ms(2000), "hello");
  EXPECT_EQ(std::memcmp(&h, &kHello, sizeof h), 0);
}

/// Runs the real acceptor side (Responder) to the end of the handshake.
void respond(int fd, const std::string& token) {
  auth::Responder r(fd, token);
  auto until = Clock::now() + std::chrono::seconds(5);
  auth::Responder::State st = auth::Responder::State::kMore;
  while (st == auth::Responder::State::kMore && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    st = r.on_readable();
  }
  ASSERT_EQ(st, auth::Responder::State::kDone) << r.why();
}

TEST(HelloRetry, TimedOutAttemptIsMadeAgain) {
  FakeAcceptor a([](int attempt, int fd) {
    if (attempt == 1) {
      auth::send_verdict(fd, auth::kTimedOutMagic);  // "your hello came too late"
      ::shutdown(fd, SHUT_RDWR);
      return;
    }
    read_hello(fd);
    auth::send_verdict(fd, auth::kAcceptedMagic);
  });
  UniqueFd fd = connect_to_fake(a, "");
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(a.attempts(), 2);
}

TEST(HelloRetry, ClosedWithoutVerdictIsMadeAgain) {
  FakeAcceptor a([](int attempt, int fd) {
    if (attempt < 3) {
      ::shutdown(fd, SHUT_RDWR);  // e.g. too many handshakes pending
      return;
    }
    read_hello(fd);
    auth::send_verdict(fd, auth::kAcceptedMagic);
  });
  UniqueFd fd = connect_to_fake(a, "");
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(a.attempts(), 3);
}

TEST(HelloRetry, TheConnectionCarriesNothingBeforeTheVerdictIsRead) {
  FakeAcceptor a([](int, int fd) {
    read_hello(fd);
    auth::send_verdict(fd, auth::kAcceptedMagic);
    (void)::send(fd, "next", 4, MSG_NOSIGNAL);  // the first control bytes
  });
  UniqueFd fd = connect_to_fake(a, "");
  char next[4] = {};
  net::read_all(fd.get(), next, sizeof next, Deadline::after_ms(2000), "next");
  EXPECT_EQ(std::string(next, 4), "next");
}

TEST(HelloRetry, RefusalFailsAtOnce) {
  FakeAcceptor a([](int, int fd) {
    read_hello(fd);
    auth::send_verdict(fd, auth::kRefusedMagic);
    ::shutdown(fd, SHUT_RDWR);
  });
  const auto t0 = Clock::now();
  const Error e = connect_error(a, "");
  EXPECT_EQ(e.status(), Status::kPeerFailure);
  EXPECT_TRUE(mentions(e, "refused the hello")) << e.what();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(a.attempts(), 1);
}

TEST(HelloRetry, TokenHandshakeRetriedAfterTimeout) {
  const std::string token = "job token";
  FakeAcceptor a([&](int attempt, int fd) {
    if (attempt == 1) {
      auth::Responder r(fd, token);  // sends the challenge, then "times out"
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      auth::send_verdict(fd, auth::kTimedOutMagic);
      ::shutdown(fd, SHUT_RDWR);
      return;
    }
    respond(fd, token);
    auth::send_verdict(fd, auth::kAcceptedMagic);
  });
  UniqueFd fd = connect_to_fake(a, token);
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(a.attempts(), 2);
}

TEST(HelloRetry, WrongTokenIsRefusedNotRetried) {
  FakeAcceptor a([](int, int fd) {
    auth::Responder r(fd, "the right token");
    auto until = Clock::now() + std::chrono::seconds(5);
    while (r.on_readable() == auth::Responder::State::kMore && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    auth::send_verdict(fd, auth::kRefusedMagic);
    ::shutdown(fd, SHUT_RDWR);
  });
  const Error e = connect_error(a, "a wrong token");
  EXPECT_TRUE(mentions(e, "OMNICCL_JOB_TOKEN differs")) << e.what();
  EXPECT_EQ(a.attempts(), 1);
}

TEST(HelloRetry, TokenOnTheAcceptorOnlyIsNamed) {
  FakeAcceptor a([](int, int fd) { auth::Responder r(fd, "a token"); });  // challenge sent
  const Error e = connect_error(a, "");
  EXPECT_TRUE(mentions(e, "has none")) << e.what();
}

TEST(HelloRetry, TokenOnTheConnectorOnlyIsNamed) {
  FakeAcceptor a([](int, int fd) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // waits for a plain hello, then times out
    auth::send_verdict(fd, auth::kTimedOutMagic);
    ::shutdown(fd, SHUT_RDWR);
  });
  const Error e = connect_error(a, "a token");
  EXPECT_TRUE(mentions(e, "OMNICCL_JOB_TOKEN unset there")) << e.what();
}

TEST(HelloRetry, AnAcceptorThatNeverAcceptsMeetsTheDeadline) {
  FakeAcceptor a([](int, int fd) { ::shutdown(fd, SHUT_RDWR); });
  const auto t0 = Clock::now();
  const Error e = connect_error(a, "", 1000);
  EXPECT_EQ(e.status(), Status::kTimeout) << e.what();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(4));
  EXPECT_GT(a.attempts(), 1);
}

}  // namespace
}  // namespace omniccl::transport
