// The transport registry's choice per peer pair (transport/registry.h):
// which transport two endpoints get, and the reason that is logged.
#include <gtest/gtest.h>

#include <string>

#include "common/status.h"
#include "transport/registry.h"

namespace omniccl::transport {
namespace {

Endpoint endpoint(int rank, const std::string& host, const std::string& boot = "boot-a") {
  Endpoint e;
  e.rank = rank;
  e.pid = 1000 + rank;
  e.hostname = host;
  e.host_id = host + "|" + boot + "|ipc:[1]|net:[2]";
  e.unix_addr = "unix:@omniccl.x." + std::to_string(rank);
  e.tcp_addr = "tcp:127.0.0.1:" + std::to_string(40000 + rank);
  e.shm_name = "/omniccl.1-" + std::to_string(e.pid) + ".x." + std::to_string(rank);
  e.single_copy = true;
  e.cpus = "0-3,8";
  return e;
}

/// Both directions of the pair must agree (each rank chooses on its own).
TransportChoice choose_both(const Endpoint& a, const Endpoint& b, const std::string& forced = "auto") {
  TransportChoice ab = choose_transport(transports(), a, b, forced);
  TransportChoice ba = choose_transport(transports(), b, a, forced);
  EXPECT_STREQ(ab.entry->name, ba.entry->name);
  return ab;
}

TEST(TransportRegistry, SameHostGetsSharedMemory) {
  TransportChoice c = choose_both(endpoint(0, "hostA"), endpoint(1, "hostA"));
  EXPECT_STREQ(c.entry->name, "shm");
  EXPECT_EQ(c.reason, "same host and boot id");
}

TEST(TransportRegistry, OtherHostGetsTcp) {
  TransportChoice c = choose_both(endpoint(0, "hostA"), endpoint(1, "hostB"));
  EXPECT_STREQ(c.entry->name, "tcp");
  EXPECT_EQ(c.reason, "other host");
}

TEST(TransportRegistry, SameNameButAnotherBootGetsTcp) {
  TransportChoice c = choose_both(endpoint(0, "hostA", "boot-a"), endpoint(1, "hostA", "boot-b"));
  EXPECT_STREQ(c.entry->name, "tcp");
  EXPECT_NE(c.reason.find("another boot id or namespace"), std::string::npos) << c.reason;
}

TEST(TransportRegistry, ForcedTcpOnOneHost) {
  // A rank with TCP forced makes no segment: both sides then choose TCP, the
  // forced one saying so, the other naming the rank without shared memory.
  Endpoint a = endpoint(0, "hostA"), b = endpoint(1, "hostA");
  a.shm_name.clear();
  TransportChoice forced = choose_transport(transports(), a, b, "tcp");
  EXPECT_STREQ(forced.entry->name, "tcp");
  EXPECT_EQ(forced.reason, "OMNICCL_TRANSPORT=tcp");
  TransportChoice other = choose_transport(transports(), b, a, "auto");
  EXPECT_STREQ(other.entry->name, "tcp");
  EXPECT_NE(other.reason.find("rank 0 offers no shared memory"), std::string::npos) << other.reason;
}

TEST(TransportRegistry, ForcedShmOnOneHost) {
  TransportChoice c = choose_both(endpoint(0, "hostA"), endpoint(1, "hostA"), "shm");
  EXPECT_STREQ(c.entry->name, "shm");
  EXPECT_EQ(c.reason, "OMNICCL_TRANSPORT=shm");
}

TEST(TransportRegistry, ForcedShmAcrossHostsIsRefused) {
  try {
    choose_transport(transports(), endpoint(0, "hostA"), endpoint(1, "hostB"), "shm");
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
    choose_transport(transports(), endpoint(0, "hostA"), endpoint(1, "hostA"), "ib");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OMNICCL_TRANSPORT=ib names no transport"), std::string::npos) << e.what();
  }
}

TEST(TransportRegistry, SingleCopyOffStillSharedMemoryAndSaysSo) {
  Endpoint a = endpoint(0, "hostA"), b = endpoint(1, "hostA");
  b.single_copy = false;
  TransportChoice c = choose_both(a, b);
  EXPECT_STREQ(c.entry->name, "shm");
  EXPECT_EQ(c.reason, "same host and boot id; single copy off on rank 1");
}

TEST(TransportRegistry, NoTransportCanConnect) {
  // A table with only shared memory, for two hosts.
  const TransportEntry only_shm[] = {transports()[0]};
  ASSERT_STREQ(only_shm[0].name, "shm");
  try {
    choose_transport(only_shm, endpoint(0, "hostA"), endpoint(1, "hostB"), "auto");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no transport can connect to rank 1 (shm: other host)"), std::string::npos)
        << e.what();
  }
}

TEST(TransportRegistry, PriorityOrdersTheTable) {
  auto table = transports();
  ASSERT_GE(table.size(), 2u);
  for (size_t i = 1; i < table.size(); ++i) EXPECT_GT(table[i - 1].priority, table[i].priority);
}

TEST(TransportRegistry, EndpointRoundTripsAndRejectsMalformedRecords) {
  Endpoint e = endpoint(3, "hostA");
  e.single_copy = false;
  e.tcp_streams = 4;
  e.local_tcp_streams = 3;
  Endpoint d = Endpoint::decode(e.encode(), 3);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.pid, e.pid);
  EXPECT_EQ(d.host_id, e.host_id);
  EXPECT_EQ(d.hostname, e.hostname);
  EXPECT_EQ(d.unix_addr, e.unix_addr);
  EXPECT_EQ(d.tcp_addr, e.tcp_addr);
  EXPECT_EQ(d.shm_name, e.shm_name);
  EXPECT_FALSE(d.single_copy);
  EXPECT_EQ(d.tcp_streams, 4);
  EXPECT_EQ(d.local_tcp_streams, 3);
  EXPECT_EQ(d.cpus, "0-3,8");
  // A stream count outside 1..kMaxTcpStreams is malformed.
  for (int bad : {0, kMaxTcpStreams + 1}) {
    Endpoint b = e;
    b.tcp_streams = bad;
    EXPECT_THROW(Endpoint::decode(b.encode(), 3), Error) << bad;
    b = e;
    b.local_tcp_streams = bad;
    EXPECT_THROW(Endpoint::decode(b.encode(), 3), Error) << bad << " on its host";
  }
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
  EXPECT_THROW(Endpoint::decode("1\x1f"
                                "2",
                                3),
               Error);
  EXPECT_THROW(Endpoint::decode("", 3), Error);
}

// A pair of one host takes the smaller of its ranks' counts for this host
// (the loopback calibration's), a pair across hosts the smaller of their
// counts for other hosts.
TEST(TransportRegistry, PairsOfOneHostUseTheirLocalStreamCount) {
  Endpoint a = endpoint(0, "hostA"), b = endpoint(1, "hostA"), c = endpoint(2, "hostB");
  a.tcp_streams = 2;
  a.local_tcp_streams = 1;
  b.tcp_streams = 4;
  b.local_tcp_streams = 3;
  c.tcp_streams = 3;
  c.local_tcp_streams = 1;
  EXPECT_EQ(pair_tcp_streams(a, b), 1);
  EXPECT_EQ(pair_tcp_streams(b, a), 1);
  EXPECT_EQ(pair_tcp_streams(a, c), 2);
  EXPECT_EQ(pair_tcp_streams(b, c), 3);
  EXPECT_EQ(pair_tcp_streams(c, b), 3);
  a.local_tcp_streams = 2;
  b.local_tcp_streams = 2;
  EXPECT_EQ(pair_tcp_streams(a, b), 2);
}

// Every record carries its build's TCP framing; a rank whose build frames
// TCP messages differently, or writes a record of another shape (an older
// build), is refused at setup, saying so, before any data moves.
TEST(TransportRegistry, RecordsOfAnotherFramingOrShapeAreRefusedByName) {
  Endpoint e = endpoint(3, "hostA");
  EXPECT_EQ(Endpoint::decode(e.encode(), 3).tcp_framing, kTcpFraming);
  Endpoint other = e;
  other.tcp_framing = kTcpFraming + 1;
  try {
    Endpoint::decode(other.encode(), 3);
    ADD_FAILURE() << "another framing was accepted";
  } catch (const Error& err) {
    EXPECT_EQ(err.status(), Status::kInvalidArgument);
    const std::string what = err.what();
    EXPECT_NE(what.find("rank 3 frames TCP messages as layout " + std::to_string(kTcpFraming + 1)), std::string::npos)
        << what;
    EXPECT_NE(what.find("same OmniCCL version"), std::string::npos) << what;
  }
  // The record of the build before the framing field: one field fewer.
  const std::string older = e.encode().substr(0, e.encode().rfind('\x1f'));
  try {
    Endpoint::decode(older, 3);
    ADD_FAILURE() << "a record without the framing field was accepted";
  } catch (const Error& err) {
    EXPECT_EQ(err.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(err.what()).find("same OmniCCL version"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace omniccl::transport
