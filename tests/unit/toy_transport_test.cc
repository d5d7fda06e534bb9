// A transport written in this file and plugged in through a table of its own
// (MeshOptions::table), to show what adding a transport takes: a Transport
// (its endpoint part, can_connect, the sockets it wants, connect) and a Link,
// and nothing in the mesh, the engine or the algorithms. The toy moves every
// message over one socket the mesh connects for it, with plain send/recv.
// Two ranks as threads build real meshes over it and run the pipelined
// all_reduce through their engines; every element is checked against a
// value computed here.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "algorithm/algorithms.h"
#include "algorithm/engine.h"
#include "common/net.h"
#include "common/status.h"
#include "transport/mesh.h"
#include "transport/registry.h"
#include "mesh_exchange.h"

namespace omniccl {
namespace {

using transport::Endpoint;
using transport::Link;
using transport::LinkSetup;
using transport::Message;
using transport::Verdict;
using transport::WaitOn;
using transport::WakeBy;

/// Header then payload on one non-blocking socket; a payload taken by a sink
/// (a reduction) goes through the message's stage.
class ToyLink final : public Link {
 public:
  ToyLink(UniqueFd fd, int peer) : fd_(std::move(fd)), peer_(peer) { net::set_nonblocking(fd_.get()); }
  bool send(Message& m) override {
    bool moved = put(static_cast<const char*>(m.header), m.header_bytes, m.header_done);
    if (m.header_done == m.header_bytes) moved |= put(m.payload.ptr, m.payload.bytes, m.done);
    m.complete = m.header_done == m.header_bytes && m.done == m.payload.bytes;
    return moved;
  }
  bool recv_header(Message& m) override { return get(static_cast<char*>(m.header), m.header_bytes, m.header_done); }
  bool recv_payload(Message& m) override {
    bool moved = false;
    if (m.sink == nullptr) {
      moved = get(m.payload.ptr, m.payload.bytes, m.done);
    } else if (m.done < m.payload.bytes) {
      size_t got = 0;
      const size_t room = std::min(m.stage.bytes - m.staged, m.payload.bytes - m.done);
      moved = get(m.stage.ptr + m.staged, room, got);
      if (got > 0) transport::take_staged(m, got);
    }
    m.complete = m.done == m.payload.bytes && m.staged == 0;
    return moved;
  }
  WaitOn arm_send(const Message&, WakeBy) override { return {WaitOn::How::kPoll, fd_.get(), POLLOUT}; }
  WaitOn arm_recv(const Message&, WakeBy) override { return {WaitOn::How::kPoll, fd_.get(), POLLIN}; }
  void disarm() override {}
  int poll_fd() const override { return fd_.get(); }
  const char* kind() const override { return "toy"; }
  bool socket() const override { return true; }

 private:
  bool put(const char* p, size_t n, size_t& done) {
    if (done >= n) return false;
    const ssize_t k = ::send(fd_.get(), p + done, n - done, MSG_NOSIGNAL);
    if (k > 0) done += size_t(k);
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      fail(Status::kPeerFailure, "toy link to rank ", peer_, " broke");
    return k > 0;
  }
  bool get(char* p, size_t n, size_t& done) {
    if (done >= n) return false;
    const ssize_t k = ::recv(fd_.get(), p + done, n - done, 0);
    if (k == 0) fail(Status::kPeerFailure, "toy link: rank ", peer_, " closed it");
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      fail(Status::kPeerFailure, "toy link to rank ", peer_, " broke");
    if (k > 0) done += size_t(k);
    return k > 0;
  }
  UniqueFd fd_;
  int peer_;
};

class ToyTransport final : public transport::Transport {
 public:
  const char* name() const override { return "toy"; }
  int priority() const override { return 30; }
  std::string part() override { return "v1"; }
  Verdict can_connect(const Endpoint& local, const Endpoint& peer) const override {
    if (local.part("toy") != "v1" || peer.part("toy") != "v1") return {false, "a rank without the toy"};
    return {true, "both ranks have the toy"};
  }
  int sockets(const Endpoint&, const Endpoint&) const override { return 1; }
  std::unique_ptr<Link> connect(LinkSetup& s) override {
    return std::make_unique<ToyLink>(std::move(s.sockets.at(0)), s.peer->rank);
  }
  std::array<std::unique_ptr<Link>, 2> loopback() override { return {}; }
};

std::unique_ptr<transport::Transport> make_toy(const transport::TransportOptions&, const transport::TransportContext&) {
  return std::make_unique<ToyTransport>();
}

// The toy first, then this build's transports.
const std::vector<transport::TransportFactory>& table_with_toy() {
  static const std::vector<transport::TransportFactory> table = [] {
    std::vector<transport::TransportFactory> t{{"toy", make_toy}};
    for (const auto& f : transport::transport_table()) t.push_back(f);
    return t;
  }();
  return table;
}

int32_t input(int rank, size_t i) { return int32_t((i * 5 + 1) % 997) * (rank == 0 ? 1 : -2) + rank; }

TEST(ToyTransport, PlugsInThroughATableAndCarriesAnAllReduce) {
  auto meshes = test::two_meshes("auto", [](transport::MeshOptions& o) { o.table = table_with_toy(); });
  ASSERT_TRUE(meshes[0] && meshes[1]);
  for (auto& m : meshes) {
    EXPECT_STREQ(m->transport_name(), "toy");
    EXPECT_STREQ(m->link(1 - m->rank()).kind(), "toy");
  }
  std::vector<std::string> errors(2);
  auto rank_main = [&](int rank) {
    try {
      Engine e(*meshes[size_t(rank)]);
      uint64_t seq = 0;
      for (size_t count : {size_t(1), size_t(1000), size_t(300001)}) {
        std::vector<int32_t> in(count), out(count, -77);
        for (size_t i = 0; i < count; ++i) in[i] = input(rank, i);
        OpSignature sig;
        sig.kind = OpKind::kAllReduce;
        sig.dtype = DType::kInt32;
        sig.redop = RedOp::kSum;
        sig.count = count;
        sig.seq = ++seq;
        sig.algo = 9;
        e.begin(sig, RedOp::kSum, 20000);
        algo::all_reduce_pipelined(e, reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
                                   count, 4096);
        for (size_t i = 0; i < count; ++i) {
          if (out[i] != input(0, i) + input(1, i)) {
            fail(Status::kInternal, "count ", count, ": wrong element ", i, ": ", out[i]);
          }
        }
      }
    } catch (const std::exception& ex) {
      errors[size_t(rank)] = ex.what();
    }
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// A rank whose table lacks the toy offers no part for it: the pair falls
// back to this build's transports, and says why.
TEST(ToyTransport, APairWhereOneRankLacksItFallsBack) {
  auto meshes = test::two_meshes("auto", [](transport::MeshOptions& o) {
    if (o.rank == 0) o.table = table_with_toy();
  });
  ASSERT_TRUE(meshes[0] && meshes[1]);
  for (auto& m : meshes) EXPECT_STREQ(m->transport_name(), "shm");
}

}  // namespace
}  // namespace omniccl
