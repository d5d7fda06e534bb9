// Tests of init-method parsing, launcher environments and unique ids.
// Environment variables are saved, cleared, and restored around each test.
#include <stdlib.h>

#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bootstrap/rendezvous.h"
#include "bootstrap/store.h"
#include "common/status.h"
#include "common/time.h"

namespace omniccl::bootstrap {
namespace {

using Kind = RendezvousSpec::Kind;

/// Runs fn, expecting an omniccl::Error with `status` whose message contains
/// every string in `needles`.
void expect_error(const std::function<void()>& fn, Status status, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << status_name(e.status()) << ": " << e.what();
    for (const auto& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "message '" << e.what() << "' lacks '" << n << "'";
    }
    return;
  }
  ADD_FAILURE() << "no omniccl::Error thrown (expected " << status_name(status) << ")";
}

/// Every variable these tests touch.
const char* const kVars[] = {
    "MASTER_ADDR",          "MASTER_PORT", "RANK",     "WORLD_SIZE",   "LOCAL_RANK",   "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "PMI_RANK",    "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "OMNICCL_SOCKET_ADDR",
};

/// Clears the launcher variables for a test and restores them afterwards.
class RendezvousTest : public ::testing::Test {
 protected:
  /// Saves and unsets every variable in kVars.
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(v);
    }
  }
  /// Restores the saved values.
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  /// setenv(name, value) for this test only.
  static void set(const char* name, const char* value) { setenv(name, value, 1); }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// --- env:// ---------------------------------------------------------------

/// torchrun: MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE.
TEST_F(RendezvousTest, EnvTorchrun) {
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", "29500");
  set("RANK", "1");
  set("WORLD_SIZE", "4");
  auto s = parse_init_method("env://", -1, -1);
  EXPECT_EQ(s.kind, Kind::kTcp);
  EXPECT_EQ(s.host, "127.0.0.1");
  EXPECT_EQ(s.port, 29500);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.world_size, 4);
}

/// Open MPI, MPICH/Hydra and Slurm variable pairs.
TEST_F(RendezvousTest, EnvLauncherFlavours) {
  set("MASTER_ADDR", "localhost");
  set("MASTER_PORT", "1234");
  const std::pair<const char*, const char*> pairs[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"},
  };
  for (const auto& [rank_var, size_var] : pairs) {
    set(rank_var, "2");
    set(size_var, "3");
    auto s = parse_init_method("env://", -1, -1);
    EXPECT_EQ(s.rank, 2) << rank_var;
    EXPECT_EQ(s.world_size, 3) << size_var;
    EXPECT_EQ(s.host, "localhost");
    EXPECT_EQ(s.port, 1234);
    unsetenv(rank_var);
    unsetenv(size_var);
  }
}

/// The first pair present wins: RANK over OMPI over PMI over SLURM.
TEST_F(RendezvousTest, EnvPrecedence) {
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", "29500");
  set("SLURM_PROCID", "3");
  set("SLURM_NTASKS", "8");
  set("PMI_RANK", "2");
  set("PMI_SIZE", "7");
  EXPECT_EQ(parse_init_method("env://", -1, -1).rank, 2);
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "6");
  EXPECT_EQ(parse_init_method("env://", -1, -1).world_size, 6);
  set("RANK", "0");
  set("WORLD_SIZE", "5");
  auto s = parse_init_method("env://", -1, -1);
  EXPECT_EQ(s.rank, 0);
  EXPECT_EQ(s.world_size, 5);
}

/// Explicit arguments override the environment, one or both.
TEST_F(RendezvousTest, ExplicitRankAndSize) {
  set("RANK", "1");
  set("WORLD_SIZE", "4");
  auto s = parse_init_method("tcp://127.0.0.1:29500", 2, 3);
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.world_size, 3);
  s = parse_init_method("tcp://127.0.0.1:29500", 3, -1);
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.world_size, 4);
  s = parse_init_method("tcp://127.0.0.1:29500", -1, 2);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.world_size, 2);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  s = parse_init_method("tcp://127.0.0.1:29500", 0, 1);  // no environment needed
  EXPECT_EQ(s.rank, 0);
  EXPECT_EQ(s.world_size, 1);
}

/// A bracketed MASTER_ADDR is unbracketed.
TEST_F(RendezvousTest, EnvBracketedIpv6) {
  set("MASTER_ADDR", "[::1]");
  set("MASTER_PORT", "29500");
  EXPECT_EQ(parse_init_method("env://", 0, 1).host, "::1");
}

/// Missing or malformed MASTER_ADDR / MASTER_PORT.
TEST_F(RendezvousTest, EnvMasterErrors) {
  expect_error([] { parse_init_method("env://", 0, 1); }, Status::kInvalidArgument, {"MASTER_ADDR", "env://"});
  set("MASTER_ADDR", "127.0.0.1");
  expect_error([] { parse_init_method("env://", 0, 1); }, Status::kInvalidArgument, {"MASTER_PORT", "env://"});
  for (const char* bad : {"abc", "0", "65536", "-1", "12x", "99999999999999999999"}) {
    set("MASTER_PORT", bad);
    expect_error([] { parse_init_method("env://", 0, 1); }, Status::kInvalidArgument,
                 {"MASTER_PORT", std::string("'") + bad + "'", "1..65535"});
  }
  set("MASTER_PORT", "65535");
  EXPECT_EQ(parse_init_method("env://", 0, 1).port, 65535);
  set("MASTER_PORT", "1");
  EXPECT_EQ(parse_init_method("env://", 0, 1).port, 1);
}

/// No launcher variables at all, or half a pair.
TEST_F(RendezvousTest, RankEnvMissing) {
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"rank", "RANK", "WORLD_SIZE", "SLURM_PROCID"});
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", 0, -1); }, Status::kInvalidArgument,
               {"world size", "WORLD_SIZE"});
  set("RANK", "0");
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"WORLD_SIZE", "RANK is set"});
  unsetenv("RANK");
  set("PMI_SIZE", "2");
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"PMI_RANK", "PMI_SIZE is set"});
  // Half a pair is fine when the missing half is given explicitly.
  auto s = parse_init_method("tcp://127.0.0.1:1", 1, -1);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.world_size, 2);
}

/// Environment values that are not integers.
TEST_F(RendezvousTest, RankEnvNotInteger) {
  set("WORLD_SIZE", "4");
  for (const char* bad : {"abc", "1.5", " 1", "1 ", "0x1", "-"}) {
    set("RANK", bad);
    expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
                 {std::string("RANK='") + bad + "'", "not an integer"});
  }
  set("RANK", "3000000000");
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"RANK='3000000000'", "out of range"});
  set("RANK", "0");
  set("WORLD_SIZE", "four");
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"WORLD_SIZE='four'", "not an integer"});
}

/// Out-of-range ranks and sizes name the value and where it came from.
TEST_F(RendezvousTest, RankOutOfRange) {
  set("RANK", "5");
  set("WORLD_SIZE", "4");
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"rank 5 (from RANK) is outside world size 4 (from WORLD_SIZE)"});
  set("RANK", "4");
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"rank 4 (from RANK)"});
  set("RANK", "-1");
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"rank -1 (from RANK)"});
  set("RANK", "0");
  set("WORLD_SIZE", "0");
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"world size 0 (from WORLD_SIZE)", "at least 1"});
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  set("SLURM_PROCID", "4");
  set("SLURM_NTASKS", "4");
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -1, -1); }, Status::kInvalidArgument,
               {"rank 4 (from SLURM_PROCID) is outside world size 4 (from SLURM_NTASKS)"});
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", -2, 4); }, Status::kInvalidArgument,
               {"rank -2 (given by the caller)"});
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", 0, 0); }, Status::kInvalidArgument,
               {"world size 0 (given by the caller)"});
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", 0, -5); }, Status::kInvalidArgument, {"world size -5"});
  expect_error([] { parse_init_method("tcp://127.0.0.1:1", 7, -1); }, Status::kInvalidArgument,
               {"rank 7 (given by the caller) is outside world size 4 (from SLURM_NTASKS)"});
}

// --- tcp:// and file:// ------------------------------------------------------

/// Well-formed tcp:// methods.
TEST_F(RendezvousTest, TcpMethod) {
  auto s = parse_init_method("tcp://127.0.0.1:29500", 0, 2);
  EXPECT_EQ(s.kind, Kind::kTcp);
  EXPECT_EQ(s.host, "127.0.0.1");
  EXPECT_EQ(s.port, 29500);
  s = parse_init_method("tcp://node-7.cluster:1", 1, 2);
  EXPECT_EQ(s.host, "node-7.cluster");
  EXPECT_EQ(s.port, 1);
  s = parse_init_method("tcp://[::1]:65535", 0, 1);
  EXPECT_EQ(s.host, "::1");
  EXPECT_EQ(s.port, 65535);
}

/// Malformed tcp:// methods name the problem.
TEST_F(RendezvousTest, TcpMethodErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"tcp://127.0.0.1", "no port"},
      {"tcp://", "no port"},
      {"tcp://127.0.0.1:", "not a port number"},
      {"tcp://:29500", "no host"},
      {"tcp://127.0.0.1:0", "not a port number"},
      {"tcp://127.0.0.1:65536", "not a port number"},
      {"tcp://127.0.0.1:http", "not a port number"},
      {"tcp://127.0.0.1:29500/", "not a port number"},
      {"tcp://::1:29500", "brackets"},
      {"tcp://[::1]29500", "no port"},
      {"tcp://[::1]", "no port"},
      {"tcp://[]:29500", "no host"},
  };
  for (const auto& [method, needle] : cases) {
    expect_error([m = method] { parse_init_method(m, 0, 1); }, Status::kInvalidArgument,
                 {std::string("'") + method + "'", needle});
  }
}

/// file:// takes an absolute path.
TEST_F(RendezvousTest, FileMethod) {
  auto s = parse_init_method("file:///tmp/occl/rdzv", 0, 1);
  EXPECT_EQ(s.kind, Kind::kFile);
  EXPECT_EQ(s.path, "/tmp/occl/rdzv");
  for (const char* bad : {"file://tmp/x", "file://", "file://./x"}) {
    expect_error([bad] { parse_init_method(bad, 0, 1); }, Status::kInvalidArgument,
                 {std::string("'") + bad + "'", "absolute path"});
  }
}

/// Unknown schemes list the ones that exist.
TEST_F(RendezvousTest, UnknownMethod) {
  expect_error([] { parse_init_method("foo://bar", 0, 1); }, Status::kInvalidArgument,
               {"unknown init method 'foo://bar'; use env://, tcp://host:port or file:///path"});
  for (const char* bad : {"", "env:", "env://x", "TCP://h:1", "127.0.0.1:29500"}) {
    expect_error([bad] { parse_init_method(bad, 0, 1); }, Status::kInvalidArgument,
                 {std::string("unknown init method '") + bad + "'"});
  }
}

// --- unique ids ---------------------------------------------------------------

/// create -> decode round trip on loopback, and the encoded server works.
TEST_F(RendezvousTest, UniqueIdRoundTrip) {
  set("OMNICCL_SOCKET_ADDR", "127.0.0.1");
  char id[kUniqueIdBytes];
  create_unique_id(id);
  EXPECT_EQ(std::memcmp(id, "OCCLUID1", 8), 0);
  auto s = decode_unique_id(id, 0, 2);
  EXPECT_EQ(s.kind, Kind::kUniqueId);
  EXPECT_EQ(s.host, "127.0.0.1");
  EXPECT_NE(s.port, 0);
  EXPECT_NE(s.token, 0u);
  EXPECT_EQ(s.rank, 0);
  EXPECT_EQ(s.world_size, 2);
  // The id carries a 32-byte secret, and its server requires proof of it.
  ASSERT_EQ(s.secret.size(), 32u);
  auto store = connect_tcp_store(s.host, s.port, Deadline::after_ms(5000), &s.secret);
  const std::string key = std::to_string(s.token) + "/k";
  store->set(key, "v");
  EXPECT_EQ(store->get(key, Deadline::after_ms(5000)), "v");

  char id2[kUniqueIdBytes];
  create_unique_id(id2);
  auto s2 = decode_unique_id(id2, 1, 2);
  EXPECT_NE(s2.token, s.token);
  EXPECT_NE(s2.port, s.port);  // each id has its own server
  EXPECT_NE(s2.secret, s.secret);
}

/// A unique id's store refuses clients without its secret (no token, or
/// another id's), even with OMNICCL_JOB_TOKEN unset everywhere.
TEST_F(RendezvousTest, UniqueIdStoreRequiresItsSecret) {
  set("OMNICCL_SOCKET_ADDR", "127.0.0.1");
  char id[kUniqueIdBytes], other[kUniqueIdBytes];
  create_unique_id(id);
  create_unique_id(other);
  auto s = decode_unique_id(id, 0, 1);
  auto o = decode_unique_id(other, 0, 1);
  const std::string none;
  expect_error(
      [&] {
        auto store = connect_tcp_store(s.host, s.port, Deadline::after_ms(5000), &none);
        store->set("k", "v");
      },
      Status::kPeerFailure, {"requires the job token"});
  expect_error([&] { connect_tcp_store(s.host, s.port, Deadline::after_ms(5000), &o.secret); }, Status::kPeerFailure,
               {"refused this process's job token"});
}

/// Without OMNICCL_SOCKET_ADDR an id is still produced and decodes.
TEST_F(RendezvousTest, UniqueIdDefaultAddress) {
  char id[kUniqueIdBytes];
  create_unique_id(id);
  auto s = decode_unique_id(id, 0, 1);
  EXPECT_FALSE(s.host.empty());
  EXPECT_NE(s.port, 0);
}

/// An address that cannot be bound is an error, not a silent fallback.
TEST_F(RendezvousTest, UniqueIdUnbindableAddress) {
  set("OMNICCL_SOCKET_ADDR", "192.0.2.1");  // TEST-NET-1: never local
  char id[kUniqueIdBytes];
  expect_error([&] { create_unique_id(id); }, Status::kSystem, {"192.0.2.1"});
}

/// decode takes rank and size from the environment like parse_init_method.
TEST_F(RendezvousTest, UniqueIdRankFromEnv) {
  set("OMNICCL_SOCKET_ADDR", "127.0.0.1");
  char id[kUniqueIdBytes];
  create_unique_id(id);
  set("PMI_RANK", "3");
  set("PMI_SIZE", "4");
  auto s = decode_unique_id(id, -1, -1);
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.world_size, 4);
  expect_error([&] { decode_unique_id(id, 4, -1); }, Status::kInvalidArgument,
               {"rank 4 (given by the caller) is outside world size 4 (from PMI_SIZE)"});
}

/// Garbage ids are rejected with kInvalidArgument naming the defect.
TEST_F(RendezvousTest, UniqueIdGarbage) {
  set("OMNICCL_SOCKET_ADDR", "127.0.0.1");
  char good[kUniqueIdBytes];
  create_unique_id(good);
  ASSERT_NO_THROW(decode_unique_id(good, 0, 1));

  char bad[kUniqueIdBytes] = {};
  expect_error([&] { decode_unique_id(bad, 0, 1); }, Status::kInvalidArgument, {"magic"});
  std::mt19937 rng(1);
  for (int i = 0; i < 100; ++i) {
    for (auto& c : bad) c = static_cast<char>(rng());
    expect_error([&] { decode_unique_id(bad, 0, 1); }, Status::kInvalidArgument, {"unique id is invalid"});
  }
  // Mutations of a valid id, one field at a time.
  struct Mutation {
    const char* what;
    std::function<void(char*)> apply;
    const char* needle;
  };
  const Mutation mutations[] = {
      {"magic", [](char* p) { p[3] ^= 1; }, "magic"},
      {"version", [](char* p) { p[8] = 3; }, "version 3"},
      {"port", [](char* p) { p[10] = p[11] = 0; }, "port is 0"},
      {"token", [](char* p) { std::memset(p + 12, 0, 8); }, "token is 0"},
      {"host length 0", [](char* p) { p[20] = 0; }, "host length 0"},
      {"host length 200", [](char* p) { p[20] = static_cast<char>(200); }, "host length 200"},
      {"NUL in host", [](char* p) { p[22] = 0; }, "non-printable"},
      {"padding", [](char* p) { p[95] = 1; }, "padding"},
  };
  for (const auto& m : mutations) {
    char copy[kUniqueIdBytes];
    std::memcpy(copy, good, sizeof copy);
    m.apply(copy);
    expect_error([&] { decode_unique_id(copy, 0, 1); }, Status::kInvalidArgument, {"unique id is invalid", m.needle});
  }
}

}  // namespace
}  // namespace omniccl::bootstrap
