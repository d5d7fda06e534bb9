// Mesh-level setup and teardown: real meshes (threads as ranks, an in-memory
// address exchange, loopback only), where handshake_test.cc, hello_retry_test.cc
// and net_close_test.cc test the same behaviours on single sockets.
//
//   - The goodbye linger (~Mesh, net::finish_sending): a healthy mesh
//     destroyed while a slower peer still has an unread message in flight to
//     it delivers every byte it wrote, then a clean end (EOF), so the peer
//     sees a departure and not a reset connection.
//   - Pipelined hellos (Mesh::connect_peers): every hello goes out before any
//     verdict is read, so an acceptor slow to answer does not hold up the
//     connector's other connections; a hello refused for its job token among
//     several pipelined ones fails at once, naming the reason, and the job's
//     other ranks end promptly too (nothing waits for the deadline).
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
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
#include "transport/mesh.h"
#include "transport/registry.h"
#include "mesh_exchange.h"
#include "transport/transport.h"

namespace omniccl::transport {
namespace {

using Seconds = std::chrono::duration<double>;

using test::Exchange;
using test::fresh_session;
using test::loopback_options;
using test::with_field;

MeshOptions options(int rank, int size, uint64_t session, const std::string& token = "") {
  return loopback_options(rank, size, session, "tcp", token);
}

/// Moves message m on a link until it is complete, or until nothing has
/// moved for idle_ms (the kernel takes no more), or `limit` passes.
void pump_send(Link& link, Message& m, int idle_ms, Deadline limit) {
  auto last = Clock::now();
  while (!m.complete && !limit.expired() && Clock::now() - last < std::chrono::milliseconds(idle_ms)) {
    if (link.send(m)) {
      last = Clock::now();
    } else {
      pollfd p{link.poll_fd(), POLLOUT, 0};
      ::poll(&p, 1, 5);
    }
  }
}

// ---------------------------------------------------------------------------
// The goodbye linger

// Two ranks on "two hosts" (the test gives each record its own host id, so
// the control connection is TCP too, as across machines). Rank 1, the slower
// one, has sent rank 0 a message that rank 0 never reads (it is busy, then
// leaves), and rank 0's last message is more than the sockets' buffers hold
// while rank 1 is not reading. Rank 0 destroys its mesh; rank 1 reads late.
// Without the linger, close() with unread input resets both connections: the
// unsent tail of rank 0's last message is lost and rank 1 reads "reset its
// TCP data connection". With it, rank 1 gets every byte, then EOF, and the
// goodbye: a clean departure.
TEST(MeshGoodbye, SlowerPeerGetsEveryByteAndACleanEnd) {
  Exchange ex(2);
  const uint64_t session = fresh_session();
  std::unique_ptr<Mesh> meshes[2];
  std::string errors[2];
  auto build = [&](int rank) {
    try {
      meshes[rank] = Mesh::create(options(rank, 2, session), [&](const std::string& mine) {
        auto all = ex.all_gather(rank, mine, 2);
        for (size_t r = 0; r < all.size(); ++r) all[r] = with_field(all[r], 1, "host-of-rank-" + std::to_string(r));
        return all;
      });
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  };
  std::thread b0(build, 0), b1(build, 1);
  b0.join();
  b1.join();
  ASSERT_TRUE(meshes[0] && meshes[1]) << "rank 0: " << errors[0] << "\nrank 1: " << errors[1];
  Mesh& m1 = *meshes[1];
  ASSERT_STREQ(m1.transport_name(), "tcp");

  // Rank 1 asks rank 0 what it is doing (a stall query) and sends it data:
  // neither is ever read by rank 0.
  m1.send_queries(1);
  char qh[16] = "unread by rank0";
  Message q;
  q.header = qh;
  q.header_bytes = sizeof qh;
  pump_send(m1.link(0), q, 1000, Deadline::after_ms(5000));
  ASSERT_TRUE(q.complete);

  // Rank 0's last message: as much as the kernel takes without rank 1 reading.
  const size_t kBig = size_t(64) << 20;
  std::vector<char> big(kBig);
  for (size_t i = 0; i < kBig; ++i) big[i] = static_cast<char>((i * 131 + (i >> 12)) & 0xff);
  char lh[16] = "the last result";
  Message last;
  last.header = lh;
  last.header_bytes = sizeof lh;
  last.payload = MemRef{big.data(), kBig, DeviceKind::kCPU};
  pump_send(meshes[0]->link(1), last, 300, Deadline::after_ms(10000));
  ASSERT_EQ(last.header_done, sizeof lh);
  ASSERT_FALSE(last.complete) << "the sockets took all " << kBig << " bytes: nothing would be left to lose";
  const size_t sent = last.done;

  // Rank 0 leaves in order (a healthy occl_comm_destroy) while rank 1 is
  // still busy elsewhere.
  std::atomic<double> destroy_seconds{-1};
  std::thread leaver([&] {
    const auto t0 = Clock::now();
    meshes[0].reset();
    destroy_seconds = Seconds(Clock::now() - t0).count();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // Rank 1 reads rank 0's message, then the next one: the end.
  std::vector<char> got(kBig);
  char rh[16] = {};
  Message in;
  in.header = rh;
  in.header_bytes = sizeof rh;
  in.payload = MemRef{got.data(), kBig, DeviceKind::kCPU};
  std::string end;
  const Deadline limit = Deadline::after_ms(15000);
  try {
    while (!limit.expired()) {
      bool moved = in.header_done < in.header_bytes ? m1.link(0).recv_header(in) : false;
      if (in.header_done == in.header_bytes) moved |= m1.link(0).recv_payload(in);
      if (!moved) {
        pollfd p{m1.link(0).poll_fd(), POLLIN, 0};
        ::poll(&p, 1, 20);
      }
    }
  } catch (const Error& e) {
    end = e.what();
  }
  leaver.join();
  EXPECT_EQ(std::memcmp(rh, lh, sizeof lh), 0);
  EXPECT_EQ(in.done, sent) << "rank 1 received " << in.done << " of the " << sent << " bytes rank 0 wrote";
  EXPECT_EQ(std::memcmp(got.data(), big.data(), std::min(in.done, sent)), 0);
  EXPECT_NE(end.find("closed its TCP data connection"), std::string::npos)
      << "rank 1 did not see a clean end of rank 0's data connection: " << end;
  // The control connection: the goodbye arrived before its end, so rank 0's
  // departure is not a failure.
  for (int i = 0; i < 5; ++i) {
    std::vector<pollfd> none;
    m1.sleep(none, 20);
  }
  try {
    m1.throw_if_failed();
  } catch (const Error& e) {
    ADD_FAILURE() << "rank 1 took rank 0's departure for a failure: " << e.what();
  }
  EXPECT_GE(destroy_seconds.load(), 0.0);
  EXPECT_LT(destroy_seconds.load(), 5.0) << "the linger is bounded by kGoodbyeLingerMs";
}

// ---------------------------------------------------------------------------
// Pipelined hellos

/// Rank 0 of a 4-rank TCP mesh played by the test: on another "host" (its
/// own host id: every connection to it is TCP), it takes each hello as a
/// real rank does (auth::Responder: the token challenge and proof, when the
/// job has a token, at once) but gives its verdict only `delay` after the
/// hello arrived (a slow acceptor), then takes part in the ready barrier. It
/// records when each hello arrived and when it sent its first verdict.
class SlowRankZero {
 public:
  SlowRankZero(int size, uint64_t session, std::chrono::milliseconds delay, std::string token)
      : size_(size), session_(session), delay_(delay), token_(std::move(token)) {
    listener_ = net::listen_tcp("127.0.0.1", addr_);
    start_ = Clock::now();
    thread_ = std::thread([this] { run(); });
  }
  ~SlowRankZero() {
    stop_.store(true);
    thread_.join();
  }
  /// Its address record: TCP only, on another host.
  std::string record() const {
    Endpoint e;
    e.pid = 1;
    e.host_id = "slow-host";
    e.hostname = "slow-host";
    e.tcp_addr = addr_.text;
    e.cpus = "0";
    e.parts = {{"tcp", std::to_string(kTcpFraming) + ",1,1"}};  // framing, TCP streams, TCP streams on its host
    return e.encode();
  }
  std::string error() {
    std::lock_guard<std::mutex> l(mu_);
    return error_;
  }
  /// Seconds from start: the last hello's arrival, the first verdict sent.
  double last_hello() {
    std::lock_guard<std::mutex> l(mu_);
    return last_hello_;
  }
  double first_verdict() {
    std::lock_guard<std::mutex> l(mu_);
    return first_verdict_;
  }
  int hellos() {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int>(conns_.size());
  }

 private:
  struct Conn {
    UniqueFd fd;
    auth::Responder responder;
    bool got = false;  // the whole hello (and the token proof)
    wire::Hello hello{};
    Clock::time_point arrived{};
    bool answered = false;
  };
  double since_start(Clock::time_point t) const { return Seconds(t - start_).count(); }
  void run() {
    const size_t expected = static_cast<size_t>(2 * (size_ - 1));  // control and data from each
    const Deadline limit = Deadline::after_ms(30000);
    std::vector<Conn> conns;
    bool ready_sent = false;
    try {
      while (!stop_.load() && !limit.expired()) {
        std::vector<pollfd> p = {{listener_.get(), POLLIN, 0}};
        for (auto& c : conns) p.push_back({c.fd.get(), static_cast<short>(c.got ? 0 : POLLIN), 0});
        ::poll(p.data(), p.size(), 5);
        if (p[0].revents & POLLIN) {
          UniqueFd fd = net::accept_until(listener_.get(), Deadline::after_ms(0));
          if (fd.valid()) {
            net::set_nonblocking(fd.get());
            const int raw = fd.get();
            conns.push_back(Conn{std::move(fd), auth::Responder(raw, token_)});
          }
        }
        for (auto& c : conns) {
          if (!c.got) {
            const auth::Responder::State st = c.responder.on_readable();
            if (st == auth::Responder::State::kFailed) fail(Status::kInternal, "a hello failed: ", c.responder.why());
            if (st == auth::Responder::State::kDone) {
              c.got = true;
              c.hello = c.responder.hello();
              c.arrived = Clock::now();
              std::lock_guard<std::mutex> l(mu_);
              last_hello_ = std::max(last_hello_, since_start(c.arrived));
              conns_.push_back(c.hello.rank * 2 + static_cast<int>(c.hello.channel));
              const std::string why = wire::check_hello(c.hello, session_, 0, size_);
              if (!why.empty() && error_.empty()) error_ = "bad hello: " + why;
            }
          } else if (!c.answered && Clock::now() - c.arrived >= delay_) {
            auth_send(c.fd.get(), "OCOK", 4);
            c.answered = true;
            std::lock_guard<std::mutex> l(mu_);
            if (first_verdict_ < 0) first_verdict_ = since_start(Clock::now());
          }
        }
        const bool all = conns.size() == expected &&
                         std::all_of(conns.begin(), conns.end(), [](const Conn& c) { return c.answered; });
        if (all && !ready_sent) {
          // The setup barrier: a READY control message on each control
          // connection (type 'R', 4-byte length 0). What the ranks send
          // back (their READY, their goodbye) is left unread.
          for (auto& c : conns) {
            if (c.hello.channel == 0) auth_send(c.fd.get(), "R\0\0\0\0", 5);
          }
          ready_sent = true;
        }
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> l(mu_);
      error_ = e.what();
    }
    std::lock_guard<std::mutex> l(mu_);
    kept_ = std::move(conns);  // closed when the test ends
  }
  static void auth_send(int fd, const char* data, size_t n) {
    net::write_all(fd, data, n, Deadline::after_ms(2000), "fake rank 0");
  }

  int size_;
  uint64_t session_;
  std::chrono::milliseconds delay_;
  std::string token_;
  net::SocketAddress addr_;
  UniqueFd listener_;
  Clock::time_point start_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string error_;
  double last_hello_ = -1;
  double first_verdict_ = -1;
  std::vector<int> conns_;
  std::vector<Conn> kept_;
  std::thread thread_;
};

// Ranks 1-3 are real meshes; rank 0 (another host) answers each hello 2 s
// late. Pipelined, each rank sends both its hellos to rank 0 (control and
// data) and its hellos to the other ranks before waiting for any verdict, so
// rank 0 has every hello before it answers the first, and the mesh is up
// about 2 s after the start. Hello then verdict, one connection at a time,
// would make that 4 s (rank 0's two verdicts one after the other) and delay
// the other ranks' connections behind them. With a job token (what the
// launchers always set) and without.
void slow_acceptor_does_not_serialise(const std::string& token) {
  constexpr int kSize = 4;
  constexpr auto kDelay = std::chrono::milliseconds(2000);
  const uint64_t session = fresh_session();
  SlowRankZero zero(kSize, session, kDelay, token);
  Exchange ex(kSize);
  std::unique_ptr<Mesh> meshes[kSize];
  std::string errors[kSize];
  double seconds[kSize] = {};
  const auto t0 = Clock::now();
  auto build = [&](int rank) {
    try {
      meshes[rank] = Mesh::create(options(rank, kSize, session, token), [&](const std::string& mine) {
        auto all = ex.all_gather(rank, mine, kSize - 1);
        all[0] = zero.record();
        return all;
      });
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
    seconds[rank] = Seconds(Clock::now() - t0).count();
  };
  std::vector<std::thread> ranks;
  for (int r = 1; r < kSize; ++r) ranks.emplace_back(build, r);
  for (auto& t : ranks) t.join();
  for (int r = 1; r < kSize; ++r) {
    EXPECT_TRUE(meshes[r]) << "rank " << r << ": " << errors[r];
  }
  EXPECT_EQ(zero.error(), "");
  EXPECT_EQ(zero.hellos(), 2 * (kSize - 1));
  // Every hello reached the slow acceptor before it gave its first verdict.
  EXPECT_GE(zero.first_verdict(), 1.9);
  EXPECT_LT(zero.last_hello(), zero.first_verdict())
      << "a hello to rank 0 waited for rank 0's verdict on an earlier one (hellos are not pipelined)";
  const double slowest = *std::max_element(seconds + 1, seconds + kSize);
  EXPECT_LT(slowest, 3.0) << "setup took " << slowest << " s: the slow verdicts were waited for one by one";
  for (auto& m : meshes) m.reset();
}

TEST(MeshPipelinedHellos, SlowAcceptorDoesNotSerialiseTheOthers) { slow_acceptor_does_not_serialise(""); }

TEST(MeshPipelinedHellos, SlowAcceptorDoesNotSerialiseTheOthersWithAToken) {
  slow_acceptor_does_not_serialise("the job token");
}

// Four real ranks with a job token; rank 3 has the wrong one. With a token
// each hello waits for the acceptor's challenge and is answered by its proof
// or a refusal before the next goes out (only the verdicts are pipelined):
// rank 0 refuses rank 3's first hello, and rank 3 fails at once, naming the
// token, without trying the others. The others, which dropped its connection
// or never got one, learn through the job (here a shared flag read by
// MeshOptions::check_peers, as the rendezvous does) that rank 3 is gone and
// end within seconds, not at the 30 s deadline; none of them completes a
// mesh with a rank missing.
TEST(MeshPipelinedHellos, RefusedTokenFailsAtOnceAndNothingIsLeftWaiting) {
  constexpr int kSize = 4;
  const uint64_t session = fresh_session();
  Exchange ex(kSize);
  std::atomic<int> gone{-1};
  std::unique_ptr<Mesh> meshes[kSize];
  std::string errors[kSize];
  double seconds[kSize] = {};
  const auto t0 = Clock::now();
  auto build = [&](int rank) {
    try {
      MeshOptions o = options(rank, kSize, session, rank == 3 ? "a wrong token" : "the job token");
      o.check_peers = [&] {
        const int g = gone.load();
        if (g >= 0) fail(Status::kPeerFailure, "rank ", g, " left the job during setup");
      };
      meshes[rank] = Mesh::create(o, [&](const std::string& mine) { return ex.all_gather(rank, mine, kSize); });
    } catch (const std::exception& e) {
      errors[rank] = e.what();
      int none = -1;
      gone.compare_exchange_strong(none, rank);
    }
    seconds[rank] = Seconds(Clock::now() - t0).count();
  };
  std::vector<std::thread> ranks;
  for (int r = 0; r < kSize; ++r) ranks.emplace_back(build, r);
  for (auto& t : ranks) t.join();
  EXPECT_FALSE(meshes[3]);
  EXPECT_NE(errors[3].find("job token"), std::string::npos) << "rank 3: " << errors[3];
  EXPECT_LT(seconds[3], 5.0) << "rank 3: " << errors[3];
  EXPECT_EQ(gone.load(), 3) << "the first rank to fail was not the one with the wrong token";
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(meshes[r]) << "rank " << r << " completed a mesh without rank 3";
    EXPECT_NE(errors[r].find("rank 3"), std::string::npos) << "rank " << r << ": " << errors[r];
    EXPECT_LT(seconds[r], 10.0) << "rank " << r << ": " << errors[r];
  }
}

// ---------------------------------------------------------------------------
// Options

/// Mesh::create with options `o` must throw Error(kInvalidArgument) whose
/// message holds `named`, before the address exchange.
void expect_refused_first(const MeshOptions& o, const std::string& named) {
  bool exchanged = false;
  try {
    Mesh::create(o, [&](const std::string&) {
      exchanged = true;
      return std::vector<std::string>{};
    });
    ADD_FAILURE() << "accepted; expected an error naming '" << named << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
  }
  EXPECT_FALSE(exchanged) << "the address exchange ran before '" << named << "' was refused";
}

// A rank makes its shared-memory segment only once every member's record is
// in (after the address exchange, before connecting): a job killed while its
// ranks wait in the rendezvous for a late rank leaves nothing in /dev/shm.
TEST(MeshSetup, NoSegmentWhileWaitingInTheExchange) {
  Exchange ex;
  const uint64_t session = fresh_session();
  std::ostringstream hex;
  hex << std::hex << session;
  const std::string mark = "." + hex.str() + ".";
  auto segments = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
      n += e.path().filename().string().find(mark) != std::string::npos;
    }
    return n;
  };
  int during[2] = {-1, -1};
  std::unique_ptr<Mesh> meshes[2];
  std::string errors[2];
  auto build = [&](int rank) {
    try {
      // Each rank counts before it posts its record, so the other cannot be
      // past the exchange yet either.
      meshes[rank] = Mesh::create(loopback_options(rank, 2, session, "auto"), [&](const std::string& mine) {
        during[rank] = segments();
        return ex.all_gather(rank, mine);
      });
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  };
  std::thread t0(build, 0), t1(build, 1);
  t0.join();
  t1.join();
  ASSERT_TRUE(meshes[0] && meshes[1]) << errors[0] << " / " << errors[1];
  EXPECT_STREQ(meshes[0]->transport_name(), "shm");
  EXPECT_EQ(during[0], 0) << "segments in /dev/shm while rank 0 waited in the exchange";
  EXPECT_EQ(during[1], 0) << "segments in /dev/shm while rank 1 waited in the exchange";
  EXPECT_EQ(segments(), 0) << "segments left in /dev/shm once the mesh was built";
}

// A data stream count outside 0 (auto) ..kMaxTcpStreams is refused before
// anything is set up (no address exchange), naming the count: the pair's
// count is the smaller of two validated ones, never 0.
TEST(MeshOptionsCheck, TcpStreamsOutsideTheRangeAreRefusedFirst) {
  for (int bad : {-1, -2, kMaxTcpStreams + 1}) {
    MeshOptions o = options(0, 2, fresh_session());
    o.transports.tcp.streams = bad;
    expect_refused_first(o, std::to_string(bad) + " TCP data streams per peer asked for");
  }
}

// The same for the count for peers of this host (TcpOptions::local_streams,
// 0 = auto).
TEST(MeshOptionsCheck, LocalTcpStreamsOutsideTheRangeAreRefusedFirst) {
  for (int bad : {-1, kMaxTcpStreams + 1}) {
    MeshOptions o = options(0, 2, fresh_session());
    o.transports.tcp.local_streams = bad;
    expect_refused_first(o, std::to_string(bad) + " TCP data streams per peer of this host");
  }
}

// Auto (OMNICCL_TCP_STREAMS unset): two data sockets per TCP peer while the
// job's sockets (a control socket and two data sockets per peer, and some
// room) take at most half of this process's open-file limit; one beyond.
TEST(MeshOptionsCheck, AutoTcpStreamsFollowTheOpenFileLimit) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  auto with_limit = [&](rlim_t soft, int size) {
    rlimit l = saved;
    l.rlim_cur = std::min(soft, saved.rlim_max);
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &l), 0);
    const int streams = auto_tcp_streams(size);
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
    return streams;
  };
  if (saved.rlim_max < 1024) GTEST_SKIP() << "the hard open-file limit is below 1024";
  EXPECT_EQ(with_limit(1024, 2), 2);
  EXPECT_EQ(with_limit(1024, 100), 2);  // 99 * 3 + 64 = 361 <= 512
  EXPECT_EQ(with_limit(1024, 200), 1);  // 199 * 3 + 64 = 661 > 512
  EXPECT_EQ(with_limit(256, 2), 2);     // 3 + 64 <= 128
  EXPECT_EQ(with_limit(256, 30), 1);    // 29 * 3 + 64 > 128
}

}  // namespace
}  // namespace omniccl::transport
