// Descriptors passed with SCM_RIGHTS (transport/cuda_ipc/fd_passing.h): to
// another process, which then shares the file (not a copy of it); refused to
// a process the server does not trust and to an id it does not offer; not
// taken from a server that is not the expected process; and every wait
// bounded: a server that never answers, one that dies in the exchange, an
// owner found gone while connecting.
#include "transport/cuda_ipc/fd_passing.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

#include "common/net.h"
#include "common/status.h"

namespace omniccl::transport {
namespace {

using Clock = std::chrono::steady_clock;

UniqueFd memfd_with(const std::string& text) {
  UniqueFd fd(::memfd_create("fd_passing_test", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::pwrite(fd.get(), text.data(), text.size(), 0), ssize_t(text.size()));
  return fd;
}

std::string read_at(int fd, size_t n) {
  std::string s(n, '\0');
  return ::pread(fd, s.data(), n, 0) == ssize_t(n) ? s : std::string();
}

Status status_of(const std::function<void()>& fn, std::string* why = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (why != nullptr) *why = e.what();
    return e.status();
  }
  return Status::kSuccess;
}

long ms_since(Clock::time_point t) {
  return long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

// The child takes the descriptor and writes through it; the parent reads
// what it wrote: one file, shared.
TEST(FdPassing, HandsADescriptorToAnotherProcess) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[1]);
    char name[108] = {};
    uint64_t id = 0;
    if (::read(pipe_fds[0], &id, sizeof id) != ssize_t(sizeof id) || ::read(pipe_fds[0], name, 100) <= 0) _exit(2);
    try {
      UniqueFd fd = fetch_fd(name, parent, id, Deadline::after_ms(10000), {}, "the test's offer");
      if (read_at(fd.get(), 5) != "hello") _exit(3);
      if (::pwrite(fd.get(), "world", 5, 0) != 5) _exit(4);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      _exit(5);
    }
    _exit(0);
  }
  ::close(pipe_fds[0]);
  UniqueFd file = memfd_with("hello");
  FdServer server({child});
  const uint64_t id = server.offer(UniqueFd(::dup(file.get())));
  ASSERT_EQ(::write(pipe_fds[1], &id, sizeof id), ssize_t(sizeof id));
  ASSERT_EQ(::write(pipe_fds[1], server.name().c_str(), server.name().size()), ssize_t(server.name().size()));
  ::close(pipe_fds[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read_at(file.get(), 5), "world") << "the child wrote into the same file";
  EXPECT_EQ(server.strangers(), 0);
}

TEST(FdPassing, AProcessTheServerDoesNotTrustGetsNothing) {
  FdServer server({::getppid()});  // not this process
  const uint64_t id = server.offer(memfd_with("secret"));
  std::string why;
  const Status st =
      status_of([&] { fetch_fd(server.name(), ::getpid(), id, Deadline::after_ms(5000), {}, "x"); }, &why);
  EXPECT_EQ(st, Status::kPeerFailure) << why;
  EXPECT_EQ(server.strangers(), 1);
}

TEST(FdPassing, AnIdNotOfferedIsRefusedAndWithdrawnOffersAreGone) {
  FdServer server({::getpid()});
  const uint64_t id = server.offer(memfd_with("abc"));
  EXPECT_EQ(read_at(fetch_fd(server.name(), ::getpid(), id, Deadline::after_ms(5000), {}, "x").get(), 3), "abc");
  EXPECT_EQ(status_of([&] { fetch_fd(server.name(), ::getpid(), id + 7, Deadline::after_ms(5000), {}, "x"); }),
            Status::kInvalidArgument);
  server.withdraw_all();
  EXPECT_EQ(status_of([&] { fetch_fd(server.name(), ::getpid(), id, Deadline::after_ms(5000), {}, "x"); }),
            Status::kInvalidArgument);
  EXPECT_EQ(server.strangers(), 0);
}

// The socket answers, but it is not the owner's: nothing is asked of it.
TEST(FdPassing, ADescriptorIsTakenOnlyFromTheExpectedProcess) {
  FdServer server({::getpid()});
  const uint64_t id = server.offer(memfd_with("abc"));
  std::string why;
  const Status st =
      status_of([&] { fetch_fd(server.name(), ::getppid(), id, Deadline::after_ms(5000), {}, "x"); }, &why);
  EXPECT_EQ(st, Status::kPeerFailure) << why;
  EXPECT_NE(why.find("pid"), std::string::npos) << why;
}

// A listener that never accepts: the connection is made (the backlog takes
// it), the answer never comes.
TEST(FdPassing, AServerThatNeverAnswersEndsAtTheDeadline) {
  net::SocketAddress addr;
  const std::string name = "omniccl-fd-test-silent-" + std::to_string(::getpid());
  UniqueFd silent = net::listen_unix(name, addr);
  const auto start = Clock::now();
  EXPECT_EQ(status_of([&] { fetch_fd(name, ::getpid(), 1, Deadline::after_ms(300), {}, "x"); }), Status::kTimeout);
  EXPECT_GE(ms_since(start), 250);
  EXPECT_LT(ms_since(start), 3000);
}

// The owner reads the request, then exits without answering: the connector
// fails at once, not at its deadline.
TEST(FdPassing, AServerThatDiesInTheExchangeFailsTheConnectorPromptly) {
  const std::string name = "omniccl-fd-test-dies-" + std::to_string(::getpid());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    net::SocketAddress addr;
    UniqueFd listener = net::listen_unix(name, addr);
    UniqueFd conn = net::accept_until(listener.get(), Deadline::after_ms(10000));
    char request[12];
    (void)!::read(conn.get(), request, sizeof request);
    _exit(0);
  }
  const auto start = Clock::now();
  std::string why;
  const Status st = status_of([&] { fetch_fd(name, child, 1, Deadline::after_ms(20000), {}, "x"); }, &why);
  EXPECT_EQ(st, Status::kPeerFailure) << why;
  EXPECT_LT(ms_since(start), 5000);
  ::waitpid(child, nullptr, 0);
}

// Nobody listens (the owner has gone): the tick's verdict ends the wait.
TEST(FdPassing, TheTickEndsTheWaitForAnOwnerThatIsGone) {
  const auto start = Clock::now();
  const std::string name = "omniccl-fd-test-nobody-" + std::to_string(::getpid());
  auto tick = [&] {
    if (ms_since(start) > 200) fail(Status::kPeerFailure, "the owner is gone");
  };
  EXPECT_EQ(status_of([&] { fetch_fd(name, ::getpid(), 1, Deadline::after_ms(20000), tick, "x"); }),
            Status::kPeerFailure);
  EXPECT_LT(ms_since(start), 3000);
}

}  // namespace
}  // namespace omniccl::transport
