// The transport registry's choice per peer pair (transport/registry.h):
// which transport two endpoints get, and the reason that is logged.
#include <gtest/gtest.h>

#include <string>

#include "common/status.h"
#include "transport/registry.h"

namespace omniccl::transport {
namespace {

/// A shared-memory part (segment name, single copy) and a TCP part (framing,
/// streams, streams on its host), as the transports write them.
std::string shm_part(int pid, int rank, bool single_copy = true) {
  return "/omniccl.1-" + std::to_string(pid) + ".x." + std::to_string(rank) + (single_copy ? "1" : "0");
}
std::string tcp_part(int streams = 1, int local_streams = 1, int framing = kTcpFraming) {
  return std::to_string(framing) + "," + std::to_string(streams) + "," + std::to_string(local_streams);
}

Endpoint endpoint(int rank, const std::string& host, const std::string& boot = "boot-a") {
  Endpoint e;
  e.rank = rank;
  e.pid = 1000 + rank;
  e.hostname = host;
  e.host_id = host + "|" + boot + "|ipc:[1]|net:[2]";
  e.unix_addr = "unix:@omniccl.x." + std::to_string(rank);
  e.tcp_addr = "tcp:127.0.0.1:" + std::to_string(40000 + rank);
  e.cpus = "0-3,8";
  e.parts = {{"shm", shm_part(e.pid, rank)}, {"tcp", tcp_part()}};
  return e;
}

void set_part(Endpoint& e, const std::string& name, const std::string& text) {
  for (auto& [n, t] : e.parts) {
    if (n == name) t = text;
  }
}

/// Every transport of this build (none has made its part: can_connect reads
/// only the two records).
const std::vector<std::unique_ptr<Transport>>& all_transports() {
  static const auto ts = make_transports(TransportOptions{}, TransportContext{0, 2, "x"});
  return ts;
}

/// Both directions of the pair must agree (each rank chooses on its own).
TransportChoice choose_both(const Endpoint& a, const Endpoint& b, const std::string& forced = "auto") {
  TransportChoice ab = choose_transport(all_transports(), a, b, forced);
  TransportChoice ba = choose_transport(all_transports(), b, a, forced);
  EXPECT_STREQ(ab.transport->name(), ba.transport->name());
  return ab;
}

TEST(TransportRegistry, SameHostGetsSharedMemory) {
  TransportChoice c = choose_both(endpoint(0, "hostA"), endpoint(1, "hostA"));
  EXPECT_STREQ(c.transport->name(), "shm");
  EXPECT_EQ(c.reason, "same host and boot id");
}

TEST(TransportRegistry, OtherHostGetsTcp) {
  TransportChoice c = choose_both(endpoint(0, "hostA"), endpoint(1, "hostB"));
  EXPECT_STREQ(c.transport->name(), "tcp");
  EXPECT_EQ(c.reason, "other host");
}

TEST(TransportRegistry, SameNameButAnotherBootGetsTcp) {
  TransportChoice c = choose_both(endpoint(0, "hostA", "boot-a"), endpoint(1, "hostA", "boot-b"));
  EXPECT_STREQ(c.transport->name(), "tcp");
  EXPECT_NE(c.reason.find("another boot id or namespace"), std::string::npos) << c.reason;
}

TEST(TransportRegistry, ForcedTcpOnOneHost) {
  // A rank with TCP forced makes no segment: both sides then choose TCP, the
  // forced one saying so, the other naming the rank without shared memory.
  Endpoint a = endpoint(0, "hostA"), b = endpoint(1, "hostA");
  a.parts = {{"tcp", tcp_part()}};
  TransportChoice forced = choose_transport(all_transports(), a, b, "tcp");
  EXPECT_STREQ(forced.transport->name(), "tcp");
  EXPECT_EQ(forced.reason, "OMNICCL_TRANSPORT=tcp");
  TransportChoice other = choose_transport(all_transports(), b, a, "auto");
  EXPECT_STREQ(other.transport->name(), "tcp");
  EXPECT_NE(other.reason.find("rank 0 offers no shared memory"), std::string::npos) << other.reason;
}

TEST(TransportRegistry, ForcedShmOnOneHost) {
  TransportChoice c = choose_both(endpoint(0, "hostA"), endpoint(1, "hostA"), "shm");
  EXPECT_STREQ(c.transport->name(), "shm");
  EXPECT_EQ(c.reason, "OMNICCL_TRANSPORT=shm");
}

TEST(TransportRegistry, ForcedShmAcrossHostsIsRefused) {
  try {
    choose_transport(all_transports(), endpoint(0, "hostA"), endpoint(1, "hostB"), "shm");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OMNICCL_TRANSPORT=shm but rank 1 (on hostB) cannot use it: other host"),
              std::string::npos)
        << e.what();
  }
}

TEST(TransportRegistry, UnknownForcedTransportIsRefused) {
  try {
    choose_transport(all_transports(), endpoint(0, "hostA"), endpoint(1, "hostA"), "ib");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OMNICCL_TRANSPORT=ib names no transport"), std::string::npos) << e.what();
  }
}

TEST(TransportRegistry, SingleCopyOffStillSharedMemoryAndSaysSo) {
  Endpoint a = endpoint(0, "hostA"), b = endpoint(1, "hostA");
  set_part(b, "shm", shm_part(b.pid, 1, /*single_copy=*/false));
  TransportChoice c = choose_both(a, b);
  EXPECT_STREQ(c.transport->name(), "shm");
  EXPECT_EQ(c.reason, "same host and boot id; single copy off on rank 1");
}

TEST(TransportRegistry, NoTransportCanConnect) {
  // Only shared memory, for two hosts.
  TransportOptions only_shm;
  only_shm.forced = "shm";
  only_shm.cuda_ipc.mode = "staged";  // no device transport either
  const auto ts = make_transports(only_shm, TransportContext{0, 2, "x"});
  ASSERT_EQ(ts.size(), 1u);
  ASSERT_STREQ(ts[0]->name(), "shm");
  try {
    choose_transport(ts, endpoint(0, "hostA"), endpoint(1, "hostB"), "auto");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no transport can connect to rank 1 (shm: other host)"), std::string::npos)
        << e.what();
  }
}

TEST(TransportRegistry, ForcingMakesOnlyThatTransportAndAnUnknownNameIsRefused) {
  TransportOptions o;
  o.forced = "tcp";
  // Forcing names the message transport; the device transport is made too
  // (it carries CUDA tensors only) unless OMNICCL_DEVICE_TRANSPORT=staged.
  auto ts = make_transports(o, TransportContext{0, 2, "x"});
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_STREQ(ts[0]->name(), "tcp");
  EXPECT_STREQ(ts[1]->name(), "cuda_ipc");
  EXPECT_TRUE(ts[1]->moves_device_memory());
  o.cuda_ipc.mode = "staged";
  ts = make_transports(o, TransportContext{0, 2, "x"});
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_STREQ(ts[0]->name(), "tcp");
  o.forced = "ib";
  try {
    make_transports(o, TransportContext{0, 2, "x"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OMNICCL_TRANSPORT=ib names no transport"), std::string::npos) << e.what();
  }
}

// Without a GPU runtime the device transport offers nothing, so every pair
// stages CUDA tensors, with the reason.
TEST(TransportRegistry, TheDeviceTransportIsChosenApartAndNeverFails) {
  const auto& ts = all_transports();
  TransportChoice c = choose_device_transport(ts, endpoint(0, "hostA"), endpoint(1, "hostA"));
  EXPECT_EQ(c.transport, nullptr);
  EXPECT_NE(c.reason.find("cuda_ipc: "), std::string::npos) << c.reason;
  TransportChoice m = choose_transport(ts, endpoint(0, "hostA"), endpoint(1, "hostB"), "auto");
  EXPECT_STREQ(m.transport->name(), "tcp");  // never the device transport for messages
}

TEST(TransportRegistry, PriorityOrdersTheTable) {
  const auto& ts = all_transports();
  ASSERT_GE(ts.size(), 2u);
  for (size_t i = 1; i < ts.size(); ++i) EXPECT_GT(ts[i - 1]->priority(), ts[i]->priority());
  ASSERT_EQ(transport_table().size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) EXPECT_STREQ(transport_table()[i].name, ts[i]->name());
}

TEST(TransportRegistry, EndpointRoundTripsAndRejectsMalformedRecords) {
  Endpoint e = endpoint(3, "hostA");
  e.host_block = "/omniccl.1-1003.x.host";
  e.gpu = true;
  set_part(e, "tcp", tcp_part(4, 3));
  Endpoint d = Endpoint::decode(e.encode(), 3);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.pid, e.pid);
  EXPECT_EQ(d.host_id, e.host_id);
  EXPECT_EQ(d.hostname, e.hostname);
  EXPECT_EQ(d.unix_addr, e.unix_addr);
  EXPECT_EQ(d.tcp_addr, e.tcp_addr);
  EXPECT_EQ(d.cpus, "0-3,8");
  EXPECT_EQ(d.host_block, e.host_block);
  EXPECT_TRUE(d.gpu);
  EXPECT_EQ(d.parts, e.parts);
  EXPECT_EQ(d.part("tcp"), tcp_part(4, 3));
  EXPECT_EQ(d.part("ib"), "");
  // A CPU list that is not a cpulist is malformed, and the message names it.
  for (const char* bad : {"", "x", "3-1", "0,", "1-", "99999999"}) {
    Endpoint b = e;
    b.cpus = bad;
    try {
      Endpoint::decode(b.encode(), 3);
      ADD_FAILURE() << "CPU list '" << bad << "' was accepted";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(std::string("CPU list '") + bad + "'"), std::string::npos) << err.what();
    }
  }
  // A part without its name, and fields that would break the record.
  EXPECT_THROW(Endpoint::decode(e.encode() + "\x1f" + "\x1e" + "x", 3), Error);
  Endpoint sep = e;
  sep.hostname = std::string("a") + '\x1f' + "b";
  EXPECT_THROW(sep.encode(), Error);
  sep = e;
  sep.parts.emplace_back("toy", std::string("a") + '\x1e' + "b");
  EXPECT_THROW(sep.encode(), Error);
  EXPECT_THROW(Endpoint::decode("1\x1f"
                                "2",
                                3),
               Error);
  EXPECT_THROW(Endpoint::decode("", 3), Error);
}

// The TCP transport's socket count per pair: a pair of one host takes the
// smaller of its ranks' counts for this host (the loopback calibration's), a
// pair across hosts the smaller of their counts for other hosts. A count
// outside 1..kMaxTcpStreams is a malformed record.
TEST(TransportRegistry, PairsOfOneHostUseTheirLocalStreamCount) {
  const Transport& tcp = *all_transports()[1];
  ASSERT_STREQ(tcp.name(), "tcp");
  Endpoint a = endpoint(0, "hostA"), b = endpoint(1, "hostA"), c = endpoint(2, "hostB");
  set_part(a, "tcp", tcp_part(2, 1));
  set_part(b, "tcp", tcp_part(4, 3));
  set_part(c, "tcp", tcp_part(3, 1));
  EXPECT_EQ(tcp.sockets(a, b), 1);
  EXPECT_EQ(tcp.sockets(b, a), 1);
  EXPECT_EQ(tcp.sockets(a, c), 2);
  EXPECT_EQ(tcp.sockets(b, c), 3);
  EXPECT_EQ(tcp.sockets(c, b), 3);
  set_part(a, "tcp", tcp_part(2, 2));
  set_part(b, "tcp", tcp_part(4, 2));
  EXPECT_EQ(tcp.sockets(a, b), 2);
  for (int bad : {0, kMaxTcpStreams + 1}) {
    set_part(b, "tcp", tcp_part(bad, 1));
    EXPECT_THROW(tcp.sockets(a, b), Error) << bad;
    set_part(b, "tcp", tcp_part(1, bad));
    EXPECT_THROW(tcp.sockets(a, b), Error) << bad << " on its host";
  }
}

// Every TCP part carries its build's framing, and every record its shape; a
// rank whose build frames TCP messages differently, or writes a record of
// another shape (an older build), is refused at setup, saying so, before any
// data moves.
TEST(TransportRegistry, RecordsOfAnotherFramingOrShapeAreRefusedByName) {
  Endpoint e = endpoint(3, "hostA"), other = endpoint(4, "hostB");
  set_part(other, "tcp", tcp_part(1, 1, kTcpFraming + 1));
  try {
    choose_transport(all_transports(), e, Endpoint::decode(other.encode(), 4), "auto");
    ADD_FAILURE() << "another framing was accepted";
  } catch (const Error& err) {
    EXPECT_EQ(err.status(), Status::kInvalidArgument);
    const std::string what = err.what();
    EXPECT_NE(what.find("rank 4 frames TCP messages as layout " + std::to_string(kTcpFraming + 1)), std::string::npos)
        << what;
    EXPECT_NE(what.find("same OmniCCL version"), std::string::npos) << what;
  }
  // The record of the build before endpoint parts: pid first, 11 fields.
  const std::string older =
      "1000\x1fhostA|b|i|n\x1fhostA\x1f\x1ftcp:127.0.0.1:1\x1f\x1f"
      "1\x1f"
      "1\x1f"
      "0\x1f"
      "3\x1f"
      "1";
  try {
    Endpoint::decode(older, 3);
    ADD_FAILURE() << "a record of the older shape was accepted";
  } catch (const Error& err) {
    EXPECT_EQ(err.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(err.what()).find("same OmniCCL version"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace omniccl::transport
