// Tests of the rendezvous stores (TCP and file) and local_address_towards.
// Every wait is bounded; only 127.0.0.1 is used.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bootstrap/liveness.h"
#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"
#include "bootstrap/util.h"
#include "common/fd.h"
#include "common/net.h"
#include "common/status.h"

namespace omniccl::bootstrap {
namespace {

using namespace std::chrono_literals;

/// A listening TCP socket on 127.0.0.1 that nothing serves (the kernel
/// still completes connections into its backlog); *port is its port.
UniqueFd loopback_listener(uint16_t* port) {
  net::SocketAddress addr;
  UniqueFd l = net::listen_tcp("127.0.0.1", addr);
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) return UniqueFd();
  *port = ntohs(a.sin_port);
  return l;
}

/// Milliseconds since start.
int64_t ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

/// Runs fn, expecting an omniccl::Error with `status` whose message contains
/// every string in `needles`; returns the message.
std::string expect_error(const std::function<void()>& fn, Status status, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << status_name(e.status()) << ": " << e.what();
    for (const auto& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "message '" << e.what() << "' lacks '" << n << "'";
    }
    return e.what();
  }
  ADD_FAILURE() << "no omniccl::Error thrown (expected " << status_name(status) << ")";
  return {};
}

/// A fresh directory under /tmp, removed with its contents at scope end.
struct TempDir {
  std::string path;
  /// Creates the directory.
  TempDir() {
    char tmpl[] = "/tmp/occl_store_test.XXXXXX";
    const char* p = mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path = p != nullptr ? p : "/tmp";
  }
  /// Removes the directory tree.
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// A TCP port on 127.0.0.1 that was free a moment ago.
uint16_t free_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  EXPECT_EQ(getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  return ntohs(a.sin_port);
}

/// A raw blocking TCP connection to 127.0.0.1:port (for garbage clients).
UniqueFd raw_connect(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

/// Sends bytes on a raw socket, ignoring errors (the server may drop us).
void raw_send(int fd, const std::string& bytes) { (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL); }

/// Whether the server closes fd (EOF or reset) within timeout_ms; replies
/// the server might send first are skipped.
bool closed_by_server(int fd, int timeout_ms) {
  auto deadline = Deadline::after_ms(timeout_ms);
  char buf[4096];
  while (!deadline.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, deadline.remaining_ms(timeout_ms)) <= 0) continue;
    ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r == 0) return true;
    if (r < 0 && errno != EAGAIN && errno != EINTR) return true;
  }
  return false;
}

/// A request header with arbitrary fields, for crafted messages.
std::string raw_header(uint16_t cmd, uint32_t key_len, uint64_t value_len, uint16_t version = 1) {
  std::string h(wire::kHeaderBytes, '\0');
  wire::encode_header(wire::Header{static_cast<wire::Cmd>(cmd), key_len, value_len}, h.data());
  wire::put_le(h.data() + 4, version, 2);
  return h;
}

// ---------------------------------------------------------------------------
// Behaviour both stores share.
// ---------------------------------------------------------------------------

enum class Kind { kTcp, kFile };

/// Runs each test against a TCP store server and against a file store.
class StoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  /// Starts the backing server or directory.
  void SetUp() override {
    if (GetParam() == Kind::kTcp) {
      server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
    } else {
      dir_ = std::make_unique<TempDir>();
    }
  }

  /// A new client of the same store.
  std::unique_ptr<Store> client() {
    if (GetParam() == Kind::kTcp) {
      return connect_tcp_store("127.0.0.1", server_->port(), Deadline::after_ms(5000));
    }
    return open_file_store(dir_->path + "/store");
  }

  /// What error messages name as the store's location.
  std::string where() const {
    if (GetParam() == Kind::kTcp) return "127.0.0.1:" + std::to_string(server_->port());
    return dir_->path + "/store";
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TempDir> dir_;
};

/// set/get/check/erase, overwriting, and erase of an absent key.
TEST_P(StoreTest, SetGetCheckErase) {
  auto s = client();
  EXPECT_FALSE(s->check("a"));
  s->set("a", "1");
  EXPECT_TRUE(s->check("a"));
  EXPECT_EQ(s->get("a", Deadline::after_ms(5000)), "1");
  s->set("a", "two");
  EXPECT_EQ(s->get("a", Deadline::after_ms(5000)), "two");
  s->set("empty", "");
  EXPECT_TRUE(s->check("empty"));
  EXPECT_EQ(s->get("empty", Deadline::after_ms(5000)), "");
  s->erase("a");
  EXPECT_FALSE(s->check("a"));
  s->erase("a");  // absent: fine
  s->erase("never-set");
  auto other = client();  // a second client sees the same data
  EXPECT_TRUE(other->check("empty"));
  EXPECT_FALSE(other->check("a"));
}

/// add on absent keys, existing integers, negative deltas and non-integers.
TEST_P(StoreTest, Add) {
  auto s = client();
  EXPECT_EQ(s->add("n", 5), 5);
  EXPECT_EQ(s->add("n", 10), 15);
  EXPECT_EQ(s->add("n", -20), -5);
  EXPECT_EQ(s->get("n", Deadline::after_ms(5000)), "-5");
  s->set("m", "41");
  EXPECT_EQ(s->add("m", 1), 42);
  EXPECT_EQ(s->add("m", 0), 42);
  s->set("text", "hello");
  expect_error([&] { s->add("text", 1); }, Status::kInvalidArgument, {"text", "not an integer"});
  s->set("big", "9223372036854775807");
  expect_error([&] { s->add("big", 1); }, Status::kInvalidArgument, {"overflow"});
  // The store stays usable after a refused add.
  EXPECT_EQ(s->add("n", 6), 1);
  EXPECT_EQ(s->get("text", Deadline::after_ms(5000)), "hello");
}

/// get blocks until another client sets the key.
TEST_P(StoreTest, GetBlocksUntilSet) {
  auto reader = client();
  auto writer = client();
  auto start = Clock::now();
  std::thread t([&] {
    std::this_thread::sleep_for(150ms);
    writer->set("late", "value");
  });
  EXPECT_EQ(reader->get("late", Deadline::after_ms(10000)), "value");
  t.join();
  EXPECT_GE(ms_since(start), 100);
  EXPECT_LT(ms_since(start), 5000);
}

/// add also wakes a get waiting for the key.
TEST_P(StoreTest, AddWakesGet) {
  auto reader = client();
  auto writer = client();
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    writer->add("counter", 7);
  });
  EXPECT_EQ(reader->get("counter", Deadline::after_ms(10000)), "7");
  t.join();
}

/// get gives up with kTimeout naming the key and the store at the deadline,
/// and the client stays usable afterwards.
TEST_P(StoreTest, GetTimesOut) {
  auto s = client();
  auto start = Clock::now();
  expect_error([&] { s->get("missing/key", Deadline::after_ms(300)); }, Status::kTimeout, {"missing/key", where()});
  EXPECT_GE(ms_since(start), 250);
  EXPECT_LT(ms_since(start), 2000);
  s->set("after", "ok");
  EXPECT_EQ(s->get("after", Deadline::after_ms(5000)), "ok");
  // The timed-out key can still be set and read later.
  s->set("missing/key", "now");
  EXPECT_EQ(s->get("missing/key", Deadline::after_ms(5000)), "now");
}

/// 8 threads x 100 adds, each with its own client, give 800 and every
/// intermediate value exactly once.
TEST_P(StoreTest, ConcurrentAddSeparateClients) {
  constexpr int kThreads = 8, kAdds = 100;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto s = client();
      for (int i = 0; i < kAdds; ++i) seen[t].push_back(s->add("ctr", 1));
    });
  }
  for (auto& t : threads) t.join();
  std::set<int64_t> all;
  for (const auto& v : seen) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), size_t{kThreads * kAdds});
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAdds);
  EXPECT_EQ(client()->get("ctr", Deadline::after_ms(5000)), "800");
}

/// 8 threads x 100 adds through one shared client object give 800.
TEST_P(StoreTest, ConcurrentAddSharedClient) {
  auto s = client();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) s->add("shared", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(s->add("shared", 0), 800);
}

/// Values with NUL bytes, every byte value, and 1 MiB round-trip; so do
/// keys with NUL, '/', '%' and other unusual characters.
TEST_P(StoreTest, BinaryAndLargeValues) {
  auto s = client();
  std::string nul("a\0b\0\0c", 6);
  s->set("nul", nul);
  EXPECT_EQ(s->get("nul", Deadline::after_ms(5000)), nul);
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  s->set(bytes, bytes);
  EXPECT_EQ(s->get(bytes, Deadline::after_ms(5000)), bytes);
  std::string big(1 << 20, '\0');
  std::mt19937 rng(42);
  for (auto& c : big) c = static_cast<char>(rng());
  s->set("big", big);
  EXPECT_EQ(s->get("big", Deadline::after_ms(5000)), big);
  EXPECT_EQ(client()->get("big", Deadline::after_ms(5000)), big);
}

/// Keys that a naive file name mapping would confuse stay distinct.
TEST_P(StoreTest, KeysStayDistinct) {
  auto s = client();
  std::vector<std::string> keys = {"a/b", "a%2Fb", "a%2fb", "a_b", "../x", "x", "",  ".",
                                   "..",  "lock",  "k_x",   " ",   "a b",  "~", "A", "a"};
  keys.push_back(std::string(1000, 'k'));
  keys.push_back(std::string(999, 'k') + "j");
  keys.push_back(std::string(300, '/'));
  for (size_t i = 0; i < keys.size(); ++i) s->set(keys[i], "v" + std::to_string(i));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(s->get(keys[i], Deadline::after_ms(5000)), "v" + std::to_string(i)) << "key #" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values(Kind::kTcp, Kind::kFile), [](const auto& info) {
  return info.param == Kind::kTcp ? std::string("Tcp") : std::string("File");
});

// ---------------------------------------------------------------------------
// TCP store specifics.
// ---------------------------------------------------------------------------

/// A client that starts before the server connects once the server is up.
TEST(TcpStore, ClientConnectsBeforeServerStarts) {
  const uint16_t port = free_port();
  std::unique_ptr<Store> s;
  std::string error;
  std::thread t([&] {
    try {
      s = connect_tcp_store("127.0.0.1", port, Deadline::after_ms(10000));
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(300ms);
  TcpStoreServer server("127.0.0.1", port);
  t.join();
  ASSERT_TRUE(s) << error;
  s->set("k", "v");
  EXPECT_EQ(s->get("k", Deadline::after_ms(5000)), "v");
}

/// Nobody listening: kTimeout naming host:port shortly after the deadline.
// Without a job token, a process of another user on this host is refused
// as it connects (it can neither read the records nor claim a rank), while
// this user's processes are served. Needs root, to run a client as another
// user (nobody); skipped otherwise.
TEST(TcpStore, OtherUsersOfThisHostAreRefusedWithoutAToken) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another user";
  TcpStoreServer server("127.0.0.1", 0);
  auto mine = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  mine->set("rank/0", "pid 1 on host");
  const uint16_t port = server.port();
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    try {
      auto s = connect_tcp_store("127.0.0.1", port, Deadline::after_ms(2000));
      ::_exit(s->get("rank/0", Deadline::after_ms(2000)) == "pid 1 on host" ? 1 : 2);
    } catch (const Error&) {
      ::_exit(0);  // refused
    }
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: another user read the record; 2: it was served; 3: setuid failed";
  EXPECT_EQ(mine->get("rank/0", Deadline::after_ms(2000)), "pid 1 on host");
}

// A local process opening many idle connections (more than the server
// serves at once) must not keep the job's own out: connections that never
// completed a request are shed, oldest first, to admit new ones, while those
// of the job that are in use stay. Before, once the cap was reached every new
// connection, a rank's included, was closed at accept.
TEST(TcpStore, IdleStrangersAreShedForTheJobsConnections) {
  StoreLimits limits;
  limits.max_connections = 32;
  TcpStoreServer server("127.0.0.1", 0, limits);
  auto early = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  early->set("rank/0", "r0");
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 100; ++i) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server.port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    idle.push_back(std::move(fd));
  }
  std::this_thread::sleep_for(200ms);  // the server has accepted (or refused) them all
  auto late = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  late->set("rank/1", "r1");
  EXPECT_EQ(late->get("rank/0", Deadline::after_ms(2000)), "r0");
  EXPECT_EQ(early->get("rank/1", Deadline::after_ms(2000)), "r1");
}

TEST(TcpStore, ConnectTimesOut) {
  const uint16_t port = free_port();
  auto start = Clock::now();
  expect_error([&] { connect_tcp_store("127.0.0.1", port, Deadline::after_ms(300)); }, Status::kTimeout,
               {"127.0.0.1:" + std::to_string(port)});
  EXPECT_GE(ms_since(start), 250);
  EXPECT_LT(ms_since(start), 2000);
}

/// Binding a port that another server listens on fails with kSystem.
TEST(TcpStore, BindFailureNamesAddress) {
  TcpStoreServer first("127.0.0.1", 0);
  expect_error([&] { TcpStoreServer second("127.0.0.1", first.port()); }, Status::kSystem,
               {"127.0.0.1:" + std::to_string(first.port())});
}

/// set_on_close: the server sets the key when the registering client's
/// connection closes (waking a waiting get); an empty value cancels; more
/// than 4 KiB of registrations per connection is refused.
TEST(TcpStore, SetOnCloseWhenAClientLeaves) {
  TcpStoreServer server("127.0.0.1", 0);
  auto watcher = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  auto leaver = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  leaver->set_on_close("left", "rank 3 left");
  leaver->set_on_close("cancelled", "never seen");
  leaver->set_on_close("cancelled", "");
  expect_error([&] { leaver->set_on_close("big", std::string(5000, 'x')); }, Status::kInvalidArgument,
               {"set-on-close", "4096"});
  EXPECT_FALSE(watcher->check("left"));
  std::thread closer([&] {
    std::this_thread::sleep_for(100ms);
    leaver.reset();
  });
  const auto start = Clock::now();
  EXPECT_EQ(watcher->get("left", Deadline::after_ms(5000)), "rank 3 left");
  EXPECT_LT(ms_since(start), 3000);
  closer.join();
  EXPECT_FALSE(watcher->check("cancelled"));
  EXPECT_FALSE(watcher->check("big"));
}

// A get that times out keeps its connection: the server answers "not
// found" at the client's deadline. (It used to drop the connection and
// reconnect, which fired the connection's set-on-close registrations,
// i.e. a live rank was reported as gone, and on a lossy network the single
// reconnect attempt could fail and end the rendezvous.)
TEST(TcpStore, TimedOutGetKeepsTheConnection) {
  TcpStoreServer server("127.0.0.1", 0);
  auto watcher = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  auto waiter = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  waiter->set_on_close("waiter/left", "1");
  for (int i = 0; i < 3; ++i) {
    const auto start = Clock::now();
    expect_error([&] { waiter->get("never/set", Deadline::after_ms(200)); }, Status::kTimeout, {"never/set"});
    EXPECT_GE(ms_since(start), 150);
    EXPECT_LT(ms_since(start), 2000);
  }
  EXPECT_FALSE(watcher->check("waiter/left")) << "a timed-out get closed the waiter's connection";
  waiter->set("still", "here");
  EXPECT_EQ(watcher->get("still", Deadline::after_ms(5000)), "here");
  // A parked get whose bound passed no longer answers to a later set.
  watcher->set("never/set", "late");
  EXPECT_EQ(waiter->get("never/set", Deadline::after_ms(5000)), "late");
  EXPECT_FALSE(watcher->check("waiter/left"));
}

/// A member's heartbeat (kHeartbeat) keeps its notice unpublished; once it
/// goes silent for its limit the server publishes it; limit 0 stops the
/// watch; the answer names the server's process.
TEST(TcpStore, HeartbeatSilenceIsPublished) {
  TcpStoreServer server("127.0.0.1", 0);
  auto watcher = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  auto member = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  auto quitter = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  const std::string who = member->heartbeat("stopped", "rank 3 stopped responding", 400, Deadline::after_ms(5000));
  EXPECT_NE(who.find("pid " + std::to_string(::getpid()) + " on "), std::string::npos) << who;
  quitter->heartbeat("quit", "never seen", 400, Deadline::after_ms(5000));
  quitter->heartbeat("quit", "", 0, Deadline::after_ms(5000));  // no longer watched
  for (int i = 0; i < 10; ++i) {                                // 1 s of heartbeats every 100 ms: alive
    std::this_thread::sleep_for(100ms);
    member->heartbeat("stopped", "rank 3 stopped responding", 400, Deadline::after_ms(5000));
  }
  EXPECT_FALSE(watcher->check("stopped"));
  const auto start = Clock::now();  // silent from now on, connection open
  EXPECT_EQ(watcher->get("stopped", Deadline::after_ms(5000)), "rank 3 stopped responding");
  EXPECT_GE(ms_since(start), 350);
  EXPECT_LT(ms_since(start), 3000);
  EXPECT_FALSE(watcher->check("quit"));
  expect_error([&] { member->heartbeat("k", std::string(5000, 'x'), 100, Deadline::after_ms(5000)); },
               Status::kPeerFailure, {"heartbeat"});  // over the notice limit: dropped
}

/// A TCP relay on 127.0.0.1 between one client and a server at
/// 127.0.0.1:target that passes requests on at once and holds each chunk of
/// the server's answers for `delay`: a slow or lossy network, where an
/// answer can take a retransmission.
class SlowAnswers {
 public:
  /// Listens; the relay thread serves the first client that connects.
  SlowAnswers(uint16_t target, std::chrono::milliseconds delay) : target_(target), delay_(delay) {
    listener_ = loopback_listener(&port_);
    thread_ = std::thread([this] { run(); });
  }
  /// Stops the relay (within 50 ms) and closes both connections.
  ~SlowAnswers() {
    stop_ = true;
    thread_.join();
  }
  SlowAnswers(const SlowAnswers&) = delete;
  SlowAnswers& operator=(const SlowAnswers&) = delete;
  /// The port clients connect to.
  uint16_t port() const { return port_; }

 private:
  void run() {
    UniqueFd client, server;
    std::deque<std::pair<Clock::time_point, std::string>> held;  // answers, with when to pass them on
    char buf[4096];
    while (!stop_) {
      if (!client.valid()) {
        pollfd p{listener_.get(), POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        client = UniqueFd(::accept(listener_.get(), nullptr, nullptr));
        server = UniqueFd(::socket(AF_INET, SOCK_STREAM, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(target_);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(server.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
        continue;
      }
      while (!held.empty() && held.front().first <= Clock::now()) {
        const std::string& chunk = held.front().second;
        if (::send(client.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(chunk.size())) {
          return;
        }
        held.pop_front();
      }
      pollfd p[2] = {{client.get(), POLLIN, 0}, {server.get(), POLLIN, 0}};
      if (::poll(p, 2, 10) <= 0) continue;
      if (p[0].revents != 0) {  // a request: on at once; the client closing closes the server side too
        const ssize_t n = ::recv(client.get(), buf, sizeof buf, 0);
        if (n <= 0 || ::send(server.get(), buf, size_t(n), MSG_NOSIGNAL) != n) return;
      }
      if (p[1].revents != 0) {
        const ssize_t n = ::recv(server.get(), buf, sizeof buf, 0);
        if (n <= 0) return;
        held.emplace_back(Clock::now() + delay_, std::string(buf, size_t(n)));
      }
    }
  }

  uint16_t target_;
  std::chrono::milliseconds delay_;
  uint16_t port_ = 0;
  UniqueFd listener_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// A member whose setup succeeded while a heartbeat was still unanswered (a
/// slow or lossy network) is not reported as gone: end_member_watch cancels
/// its departure notice once that heartbeat is answered, and only then stops
/// the heartbeat and lets the connection close. (Stopping first abandoned the
/// heartbeat, which dropped the connection with the notice registered: the
/// other ranks were told "rank N left during the setup" and failed.)
TEST(TcpStore, FinishedMemberWithAHeartbeatInFlightIsNotReportedGone) {
  TcpStoreServer server("127.0.0.1", 0);
  auto watcher = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  SlowAnswers slow(server.port(), 600ms);
  auto member = connect_tcp_store("127.0.0.1", slow.port(), Deadline::after_ms(5000));
  member->set_on_close("left", "rank 3 left");
  // Its first heartbeat goes out at once and is answered 600 ms later.
  auto heartbeat = std::make_unique<StoreHeartbeat>(*member, "left", "rank 3", "rank 0", "tcp://test", 5000, "setup");
  std::this_thread::sleep_for(150ms);
  const auto start = Clock::now();
  end_member_watch(*member, "left", std::move(heartbeat));
  EXPECT_LT(ms_since(start), 4000);
  member.reset();
  // The server has seen the connection close within 500 ms (loopback).
  expect_error([&] { watcher->get("left", Deadline::after_ms(1000)); }, Status::kTimeout, {"'left'"});
  // A member that fails keeps its notice: dropping the connection publishes it.
  SlowAnswers slow2(server.port(), 0ms);
  member = connect_tcp_store("127.0.0.1", slow2.port(), Deadline::after_ms(5000));
  member->set_on_close("failed", "rank 4 left");
  heartbeat = std::make_unique<StoreHeartbeat>(*member, "failed", "rank 4", "rank 0", "tcp://test", 5000, "setup");
  heartbeat.reset();
  member.reset();
  EXPECT_EQ(watcher->get("failed", Deadline::after_ms(5000)), "rank 4 left");
}

/// A server that accepts (the kernel's backlog) but never answers, like a
/// stopped process: a request other than a waiting get fails after the
/// liveness timeout (+ 2 s), saying so, and a wait check ends a parked get.
TEST(TcpStore, UnansweredRequestMeansAStoppedServer) {
  uint16_t port = 0;
  UniqueFd listener = loopback_listener(&port);
  ASSERT_TRUE(listener.valid());
  ::setenv("OMNICCL_SETUP_HEARTBEAT_TIMEOUT", "300ms", 1);
  auto s = connect_tcp_store("127.0.0.1", port, Deadline::after_ms(5000));
  ::unsetenv("OMNICCL_SETUP_HEARTBEAT_TIMEOUT");
  auto start = Clock::now();
  expect_error([&] { s->check("k"); }, Status::kPeerFailure,
               {"stopped responding", "check of key 'k'", "2300 ms", "OMNICCL_SETUP_HEARTBEAT_TIMEOUT"});
  EXPECT_GE(ms_since(start), 2250);
  EXPECT_LT(ms_since(start), 4000);
  // A get may wait (parked on a live server): only its deadline or a check ends it.
  start = Clock::now();
  s->set_wait_check([start] {
    if (Clock::now() - start > 200ms) fail(Status::kAborted, "check fired");
  });
  expect_error([&] { s->get("k", Deadline::after_ms(20000)); }, Status::kAborted, {"check fired"});
  EXPECT_LT(ms_since(start), 1500);
}

/// The server disappearing during a get gives kPeerFailure quickly; later
/// calls fail the same way instead of hanging.
TEST(TcpStore, ServerGoneMidGet) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  const std::string where = "127.0.0.1:" + std::to_string(server->port());
  auto s = connect_tcp_store("127.0.0.1", server->port(), Deadline::after_ms(5000));
  std::thread killer([&] {
    std::this_thread::sleep_for(150ms);
    server.reset();
  });
  auto start = Clock::now();
  expect_error([&] { s->get("never", Deadline::after_ms(20000)); }, Status::kPeerFailure,
               {"rendezvous server " + where + " closed the connection", "never"});
  EXPECT_LT(ms_since(start), 3000);
  killer.join();
  start = Clock::now();
  expect_error([&] { s->set("k", "v"); }, Status::kPeerFailure, {where});
  EXPECT_LT(ms_since(start), 3000);
}

/// The destructor stops promptly with parked and idle clients, which then
/// see kPeerFailure.
TEST(TcpStore, DestructorIsPrompt) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  const uint16_t port = server->port();
  std::vector<std::unique_ptr<Store>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(connect_tcp_store("127.0.0.1", port, Deadline::after_ms(5000)));
  }
  std::atomic<int> peer_failures{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 8; ++i) {
    waiters.emplace_back([&] {
      auto s = connect_tcp_store("127.0.0.1", port, Deadline::after_ms(5000));
      try {
        s->get("never", Deadline::after_ms(20000));
      } catch (const Error& e) {
        if (e.status() == Status::kPeerFailure) ++peer_failures;
      }
    });
  }
  std::this_thread::sleep_for(200ms);
  auto start = Clock::now();
  server.reset();
  EXPECT_LT(ms_since(start), 1000);
  for (auto& t : waiters) t.join();
  EXPECT_EQ(peer_failures.load(), 8);
}

/// Many clients parked on one key are all answered by one set.
TEST(TcpStore, ManyWaitersWokenTogether) {
  TcpStoreServer server("127.0.0.1", 0);
  constexpr int kClients = 32;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&] {
      auto s = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
      if (s->get("go", Deadline::after_ms(10000)) == "now") ++ok;
    });
  }
  std::this_thread::sleep_for(200ms);
  connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000))->set("go", "now");
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients);
}

/// Garbage clients are disconnected and never disturb a legitimate client.
TEST(TcpStore, GarbageClientsAreDropped) {
  TcpStoreServer server("127.0.0.1", 0);
  const uint16_t port = server.port();
  auto good = connect_tcp_store("127.0.0.1", port, Deadline::after_ms(5000));
  int round = 0;
  auto still_fine = [&] {
    const std::string key = "good" + std::to_string(round++);
    good->set(key, "ok");
    EXPECT_EQ(good->get(key, Deadline::after_ms(5000)), "ok");
  };

  std::mt19937 rng(7);
  std::string random_bytes(4096, '\0');
  for (auto& c : random_bytes) c = static_cast<char>(rng());
  const std::vector<std::pair<std::string, std::string>> garbage = {
      {"random bytes", random_bytes},
      {"HTTP", "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"},
      {"1 TB value", raw_header(1, 3, uint64_t{1} << 40) + "key"},
      {"4 GB key", raw_header(2, 0xffffffffu, 0)},
      {"wrong version", raw_header(1, 1, 1, /*version=*/99) + "kv"},
      {"unknown command", raw_header(77, 1, 0) + "k"},
      {"reply code as request", raw_header(0x82, 0, 0)},
      {"get with a value", raw_header(2, 1, 5) + "kvalue"},
      {"add with 3-byte delta", raw_header(3, 1, 3) + "kabc"},
  };
  for (const auto& [what, bytes] : garbage) {
    UniqueFd g = raw_connect(port);
    raw_send(g.get(), bytes);
    EXPECT_TRUE(closed_by_server(g.get(), 3000)) << what;
    still_fine();
  }

  // A truncated header that stays open does not block anyone...
  UniqueFd stalled = raw_connect(port);
  raw_send(stalled.get(), raw_header(1, 3, 10).substr(0, 7));
  still_fine();
  // ...nor does a set whose value never fully arrives; it is not applied.
  UniqueFd partial = raw_connect(port);
  raw_send(partial.get(), raw_header(1, 7, 1 << 20) + "partial" + std::string(1000, 'x'));
  still_fine();
  partial.reset();
  EXPECT_FALSE(good->check("partial"));
  // A client that sends more while parked in a get is dropped.
  UniqueFd chatty = raw_connect(port);
  raw_send(chatty.get(), raw_header(2, 4, 0) + "nope");
  std::this_thread::sleep_for(50ms);
  raw_send(chatty.get(), "more");
  EXPECT_TRUE(closed_by_server(chatty.get(), 3000));
  still_fine();
  // A well-formed raw get is answered.
  UniqueFd raw_get = raw_connect(port);
  good->set("rawkey", "rawvalue");
  raw_send(raw_get.get(), raw_header(2, 6, 0) + "rawkey");
  std::string reply(wire::kHeaderBytes + 8, '\0');
  size_t got = 0;
  auto deadline = Deadline::after_ms(3000);
  while (got < reply.size() && !deadline.expired()) {
    pollfd p{raw_get.get(), POLLIN, 0};
    if (::poll(&p, 1, deadline.remaining_ms(3000)) <= 0) continue;
    ssize_t r = ::recv(raw_get.get(), reply.data() + got, reply.size() - got, 0);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ASSERT_EQ(got, reply.size());
  wire::Header h;
  EXPECT_EQ(wire::decode_header(reply.data(), &h), "");
  EXPECT_EQ(h.cmd, wire::Cmd::kValue);
  EXPECT_EQ(reply.substr(wire::kHeaderBytes), "rawvalue");
  stalled.reset();
  still_fine();
}

/// A server with small limits, for the quota tests.
StoreLimits small_limits() {
  StoreLimits l;
  l.max_connections = 8;
  l.max_total_bytes = 4u << 20;
  l.max_client_bytes = 1u << 20;
  l.idle_timeout_ms = 500;
  return l;
}

// A client storing more than its quota gets an error naming the quota; the
// store (and other clients) go on. Before: a stranger stored 512 MiB.
TEST(TcpStore, PerClientAndTotalQuotas) {
  TcpStoreServer server("127.0.0.1", 0, small_limits());
  auto a = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  a->set("a0", std::string(600 << 10, 'a'));
  expect_error([&] { a->set("a1", std::string(600 << 10, 'a')); }, Status::kInvalidArgument, {"quota", "a1"});
  a->set("a0", std::string(900 << 10, 'a'));  // overwriting its own key is charged once
  std::vector<std::unique_ptr<Store>> others;
  int refused = 0;
  for (int i = 0; i < 6; ++i) {
    others.push_back(connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000)));
    try {
      others.back()->set("o" + std::to_string(i), std::string(900 << 10, 'o'));
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("OMNICCL_STORE_MAX_BYTES"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_GE(refused, 2);  // 4 MiB in all: at most 3 more of 0.9 MiB fit
  a->erase("a0");
  a->set("a2", "small");
  EXPECT_EQ(others[0]->get("a2", Deadline::after_ms(5000)), "small");
}

// A client streaming a message larger than its quota is dropped before the
// server buffers it all.
TEST(TcpStore, BufferedInputCountsAgainstTheQuota) {
  TcpStoreServer server("127.0.0.1", 0, small_limits());
  UniqueFd g = raw_connect(server.port());
  raw_send(g.get(), raw_header(1, 3, 8u << 20) + "big");
  std::string chunk(64 << 10, 'x');
  for (int i = 0; i < 40; ++i) raw_send(g.get(), chunk);
  EXPECT_TRUE(closed_by_server(g.get(), 3000));
  auto ok = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  ok->set("k", "v");
  EXPECT_EQ(ok->get("k", Deadline::after_ms(5000)), "v");
}

// Connections over the cap are closed at accept; silent ones and ones that
// stall mid-message are dropped after the idle timeout, freeing their slots.
// Before: ~20k idle connections used up the process's descriptors.
TEST(TcpStore, ConnectionCapAndIdleTimeout) {
  TcpStoreServer server("127.0.0.1", 0, small_limits());
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(raw_connect(server.port()));
  raw_send(idle[0].get(), raw_header(1, 3, 10).substr(0, 7));  // stalls mid-header
  UniqueFd over = raw_connect(server.port());
  EXPECT_TRUE(closed_by_server(over.get(), 2000)) << "a connection over the cap was served";
  const auto t0 = Clock::now();
  for (auto& c : idle) EXPECT_TRUE(closed_by_server(c.get(), 5000)) << "an idle connection was kept";
  EXPECT_LT(ms_since(t0), 4000);
  auto ok = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  ok->set("k", "v");
  // A client that has been served may stay idle, and one waiting for a key
  // is never dropped for being quiet.
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(ok->get("k", Deadline::after_ms(5000)), "v");
  auto waiter = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  std::thread late([&] {
    std::this_thread::sleep_for(1500ms);
    ok->set("late", "yes");
  });
  EXPECT_EQ(waiter->get("late", Deadline::after_ms(10000)), "yes");
  late.join();
}

/// Sets OMNICCL_JOB_TOKEN for one scope (empty text = unset).
struct JobToken {
  explicit JobToken(const char* token) {
    if (*token != '\0') {
      ::setenv("OMNICCL_JOB_TOKEN", token, 1);
    } else {
      ::unsetenv("OMNICCL_JOB_TOKEN");
    }
  }
  ~JobToken() { ::unsetenv("OMNICCL_JOB_TOKEN"); }
};

// With a job token, a client proves it knows the token (challenge-response);
// one with another token, or none, cannot read or write anything, and gets
// an error that says so. Before: anyone reaching the port could.
TEST(TcpStore, JobTokenRequired) {
  std::unique_ptr<TcpStoreServer> server;
  {
    JobToken t("s3cret-job");
    server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  }
  const uint16_t port = server->port();
  std::unique_ptr<Store> member;
  {
    JobToken t("s3cret-job");
    member = connect_tcp_store("127.0.0.1", port, Deadline::after_ms(5000));
  }
  member->set("addr/0", "secret address");
  {
    JobToken t("wrong");
    expect_error([&] { connect_tcp_store("127.0.0.1", port, Deadline::after_ms(5000)); }, Status::kPeerFailure,
                 {"job token"});
  }
  {
    JobToken t("");
    auto stranger = connect_tcp_store("127.0.0.1", port, Deadline::after_ms(5000));
    expect_error([&] { stranger->get("addr/0", Deadline::after_ms(3000)); }, Status::kPeerFailure,
                 {"OMNICCL_JOB_TOKEN"});
    expect_error([&] { stranger->set("addr/0", "evil"); }, Status::kPeerFailure, {});
  }
  // A raw client that sends a plain request instead of the answer is dropped.
  UniqueFd raw = raw_connect(port);
  raw_send(raw.get(), raw_header(1, 6, 4) + "addr/0" + "evil" + std::string(64, 'x'));
  EXPECT_TRUE(closed_by_server(raw.get(), 3000));
  EXPECT_EQ(member->get("addr/0", Deadline::after_ms(5000)), "secret address");
}

// A client with a token refuses a server that does not ask for it (it would
// otherwise hand its data to anyone listening on the port).
TEST(TcpStore, ClientWithTokenRefusesServerWithout) {
  TcpStoreServer server("127.0.0.1", 0);
  JobToken t("s3cret-job");
  const auto t0 = Clock::now();
  expect_error([&] { connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(3000)); }, Status::kPeerFailure,
               {"did not ask for the job token"});
  EXPECT_LT(ms_since(t0), 5000);
}

/// Keys and values above the wire limits are refused before sending.
TEST(TcpStore, OversizedValueRejected) {
  TcpStoreServer server("127.0.0.1", 0);
  auto s = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  expect_error([&] { s->set("huge", std::string(wire::kMaxValueBytes + 1, 'x')); }, Status::kInvalidArgument,
               {"huge", "64 MiB"});
  s->set("small", "fine");
  EXPECT_EQ(s->get("small", Deadline::after_ms(5000)), "fine");
}

/// Something that is not a store server on the port: kPeerFailure, no hang.
TEST(TcpStore, NonStoreServerIsDetected) {
  uint16_t port = 0;
  UniqueFd listener = loopback_listener(&port);
  ASSERT_TRUE(listener.valid());
  std::thread fake([&] {
    UniqueFd c(::accept(listener.get(), nullptr, nullptr));
    const std::string http = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    raw_send(c.get(), http);
    std::this_thread::sleep_for(300ms);
  });
  auto s = connect_tcp_store("127.0.0.1", port, Deadline::after_ms(5000));
  expect_error([&] { s->get("k", Deadline::after_ms(5000)); }, Status::kPeerFailure, {"invalid reply"});
  fake.join();
}

/// Loopback names map to 127.0.0.1.
TEST(TcpStore, LocalAddressTowardsLoopback) {
  EXPECT_EQ(local_address_towards("127.0.0.1", 29500), "127.0.0.1");
  EXPECT_EQ(local_address_towards("localhost", 29500), "127.0.0.1");
  EXPECT_EQ(local_address_towards("127.0.0.2", 1), "127.0.0.1");
}

// ---------------------------------------------------------------------------
// File store specifics.
// ---------------------------------------------------------------------------

/// The directory is created (with parents) when missing.
TEST(FileStore, CreatesDirectory) {
  TempDir dir;
  const std::string nested = dir.path + "/a/b/c/";
  auto s = open_file_store(nested);
  EXPECT_TRUE(std::filesystem::is_directory(nested));
  s->set("k", "v");
  EXPECT_EQ(open_file_store(dir.path + "/a/b/c")->get("k", Deadline::after_ms(1000)), "v");
}

/// A path that is a regular file is refused.
TEST(FileStore, PathThatIsAFileIsRefused) {
  TempDir dir;
  const std::string file = dir.path + "/plain";
  { UniqueFd fd(::creat(file.c_str(), 0644)); }
  EXPECT_THROW(open_file_store(file), Error);
  expect_error([&] { open_file_store(""); }, Status::kInvalidArgument, {"empty"});
}

/// A file-store get of a missing key ends close to its deadline.
TEST(FileStore, ShortTimeoutIsAccurate) {
  TempDir dir;
  auto s = open_file_store(dir.path);
  auto start = Clock::now();
  expect_error([&] { s->get("nothing", Deadline::after_ms(50)); }, Status::kTimeout, {"nothing", dir.path});
  EXPECT_GE(ms_since(start), 45);
  EXPECT_LT(ms_since(start), 500);
}

/// Liveness marks: held while the holder lives (threads of one process are
/// separate holders), gone without a trace at an orderly end, "died" when
/// the holder went away without removing it, "stopped" when not refreshed.
TEST(FileStore, LivenessMarks) {
  TempDir dir;
  auto watcher = open_file_store(dir.path);
  using Kind = Store::MarkState::Kind;
  EXPECT_EQ(watcher->probe_mark("alive/1", 300).kind, Kind::kAlive);  // none yet
  {
    auto holder = open_file_store(dir.path);
    holder->mark_alive("alive/1", "rank 1 (pid 7 on h)", 50);
    for (int i = 0; i < 8; ++i) {  // refreshed every 50 ms: alive throughout
      EXPECT_EQ(watcher->probe_mark("alive/1", 300).kind, Kind::kAlive);
      std::this_thread::sleep_for(100ms);
    }
    holder->unmark_alive("alive/1");
    EXPECT_EQ(watcher->probe_mark("alive/1", 300).kind, Kind::kAlive);  // orderly end
    holder->mark_alive("alive/1", "rank 1 (pid 7 on h)", 50);
  }  // the holder goes away without removing its mark
  Store::MarkState st = watcher->probe_mark("alive/1", 300);
  EXPECT_EQ(st.kind, Kind::kDied);
  EXPECT_EQ(st.who, "rank 1 (pid 7 on h)");
  auto frozen = open_file_store(dir.path);
  frozen->mark_alive("alive/2", "rank 2 (pid 8 on h)", 60000);  // never refreshed in this test
  EXPECT_EQ(watcher->probe_mark("alive/2", 300).kind, Kind::kAlive);
  EXPECT_EQ(watcher->probe_mark("alive/2", 0).kind, Kind::kAlive);
  std::this_thread::sleep_for(400ms);
  st = watcher->probe_mark("alive/2", 300);
  EXPECT_EQ(st.kind, Kind::kStopped);
  EXPECT_EQ(st.who, "rank 2 (pid 8 on h)");
  EXPECT_EQ(watcher->probe_mark("alive/2", 0).kind, Kind::kAlive);  // 0: no silence check
}

// At most max_pending connections that proved nothing stay open: each newer
// one sheds the oldest, which is told so (kShedMagic) rather than just
// closed, and a client with the job token whose fresh connection is shed
// connects again and is served.
TEST(TcpStore, PendingConnectionsAreCappedAndShedOnesAreTold) {
  JobToken t("s3cret-job");
  StoreLimits limits;
  limits.max_pending = 8;
  TcpStoreServer server("127.0.0.1", 0, limits);
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(raw_connect(server.port()));
  auto member = connect_tcp_store("127.0.0.1", server.port(), Deadline::after_ms(5000));
  member->set("addr/0", "a0");
  int told = 0, open = 0;
  for (auto& fd : idle) {
    // The challenge (36 bytes) came first; a shed connection then has the notice.
    std::string got;
    char buf[256];
    const auto deadline = Deadline::after_ms(200);
    while (!deadline.expired()) {
      pollfd p{fd.get(), POLLIN, 0};
      if (::poll(&p, 1, deadline.remaining_ms(200)) <= 0) continue;
      ssize_t r = ::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (r <= 0) break;
      got.append(buf, static_cast<size_t>(r));
    }
    told += got.size() >= 4 && got.compare(got.size() - 4, 4, std::string(wire::kShedMagic, 4)) == 0;
    open += got.size() == sizeof wire::kAuthMagic + wire::kNonceBytes;
  }
  EXPECT_GE(told, 40 - 8);
  EXPECT_LE(open, 8);
  EXPECT_EQ(member->get("addr/0", Deadline::after_ms(2000)), "a0");
}

// Out of descriptors with nothing to shed (every connection proven), the
// server takes each new connection off the listen queue on its reserve
// descriptor and closes it, instead of spinning on a readable listening
// socket; the connections it serves keep working. The server runs in a child
// process whose open-file limit is 64.
TEST(TcpStore, OutOfDescriptorsRefusesWithoutSpinning) {
  int to_parent[2], to_child[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  ASSERT_EQ(::pipe(to_child), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    rlimit rl{64, 64};
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(3);
    StoreLimits limits;
    limits.max_pending = 1000;
    limits.max_connections = 1000;
    TcpStoreServer server("127.0.0.1", 0, limits);
    const uint16_t port = server.port();
    if (::write(to_parent[1], &port, sizeof port) != sizeof port) ::_exit(4);
    char go = 0;  // the parent has filled the server: measure a second
    if (::read(to_child[0], &go, 1) != 1) ::_exit(5);
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    std::this_thread::sleep_for(1000ms);
    ::getrusage(RUSAGE_SELF, &after);
    const auto us = [](const rusage& r) {
      return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000L + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
    };
    const long cpu_ms = (us(after) - us(before)) / 1000;
    if (::write(to_parent[1], &cpu_ms, sizeof cpu_ms) != sizeof cpu_ms) ::_exit(6);
    (void)::read(to_child[0], &go, 1);  // until the parent is done
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  uint16_t port = 0;
  ASSERT_EQ(::read(to_parent[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  std::vector<std::unique_ptr<Store>> members;
  ::setenv("OMNICCL_TIMEOUT", "1s", 1);  // bounds a refused member's retries
  for (int i = 0; i < 64; ++i) {         // until the child runs out of descriptors
    try {
      auto s = connect_tcp_store("127.0.0.1", port, Deadline::after_ms(1000));
      s->check("k");
      members.push_back(std::move(s));
    } catch (const Error&) {  // refused (and retried) until its deadline
      break;
    }
  }
  ::unsetenv("OMNICCL_TIMEOUT");
  EXPECT_GT(members.size(), 40u);
  EXPECT_LT(members.size(), 64u);
  std::vector<UniqueFd> waiting;  // refused at once, not left queued
  for (int i = 0; i < 10; ++i) waiting.push_back(raw_connect(port));
  ASSERT_EQ(::write(to_child[1], "g", 1), 1);
  long cpu_ms = -1;
  ASSERT_EQ(::read(to_parent[0], &cpu_ms, sizeof cpu_ms), static_cast<ssize_t>(sizeof cpu_ms));
  EXPECT_LT(cpu_ms, 300) << "the server spun while out of descriptors";
  for (auto& fd : waiting) EXPECT_TRUE(closed_by_server(fd.get(), 2000));
  members.front()->set("k", "v");
  EXPECT_EQ(members.back()->get("k", Deadline::after_ms(2000)), "v");
  ASSERT_EQ(::write(to_child[1], "d", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) ::close(fd);
}

// A process's first rendezvous raises its soft open-file limit to the hard
// one, unless OMNICCL_RAISE_NOFILE=0 (each case in a child, whose limits and
// once-per-process flag are its own).
TEST(TcpStore, OpenFileLimitIsRaisedToTheHardOne) {
  for (const bool keep : {false, true}) {
    const pid_t child = ::fork();
    if (child == 0) {
      rlimit rl{256, 1024};
      if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(3);
      if (keep) ::setenv("OMNICCL_RAISE_NOFILE", "0", 1);
      detail::raise_open_file_limit();
      if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(4);
      ::_exit(rl.rlim_cur == (keep ? 256u : 1024u) ? 0 : 1);
    }
    ASSERT_GT(child, 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "OMNICCL_RAISE_NOFILE=" << !keep << ": " << status;
  }
}

}  // namespace
}  // namespace omniccl::bootstrap
