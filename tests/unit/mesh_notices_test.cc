// The notices of collectives rejected for their arguments (mesh_notices.cc),
// on real meshes (threads as ranks, an in-memory address exchange, loopback
// only):
//   - a rank that learns of a rejection from the notice knows which rank
//     rejected the call (RejectedCall::by): it names that rank in the
//     withdrawal marks it sends on, so the peers that read a mark before the
//     notice can name it too;
//   - the calls withdrawn here are remembered by number, a bounded few.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/time.h"
#include "transport/mesh.h"
#include "mesh_exchange.h"

namespace omniccl::transport {
namespace {

using test::Exchange;
using test::fresh_session;
using test::loopback_options;

/// `n` meshes over `transport`, built by one thread each; empty when one
/// could not be built (the test fails naming why).
std::vector<std::unique_ptr<Mesh>> meshes_of(int n, const std::string& transport) {
  Exchange ex(n);
  const uint64_t session = fresh_session();
  std::vector<std::unique_ptr<Mesh>> meshes(static_cast<size_t>(n));
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> builders;
  for (int r = 0; r < n; ++r) {
    builders.emplace_back([&, r] {
      try {
        meshes[size_t(r)] = Mesh::create(loopback_options(r, n, session, transport),
                                         [&](const std::string& mine) { return ex.all_gather(r, mine); });
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& b : builders) b.join();
  for (int r = 0; r < n; ++r) {
    if (!meshes[size_t(r)]) {
      ADD_FAILURE() << "rank " << r << ": " << errors[size_t(r)];
      return {};
    }
  }
  return meshes;
}

/// The rejection of call `seq` as `mesh` hears of it, within 5 s.
std::optional<RejectedCall> heard(Mesh& mesh, uint64_t seq) {
  const Deadline limit = Deadline::after_ms(5000);
  while (!limit.expired()) {
    try {
      mesh.hear_rejection(seq);
    } catch (const RejectedCall& r) {
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::nullopt;
}

class RejectionNotice : public ::testing::TestWithParam<const char*> {};

// Three ranks; rank 2 rejects call #7. Ranks 0 and 1 hear it from the
// notice alone (no engine, no marks): each knows rank 2 rejected it, where
// it used to know the text only (by = -1, so that the marks it sent on
// named no rank).
TEST_P(RejectionNotice, NamesTheRankThatRejected) {
  auto meshes = meshes_of(3, GetParam());
  ASSERT_EQ(meshes.size(), 3u);
  const std::string why = "rank 2 rejected the arguments of its all_reduce #7 before sending anything: BXOR";
  meshes[2]->reject_call(7, why);
  EXPECT_TRUE(meshes[2]->withdrawn(7));
  for (int r = 0; r < 2; ++r) {
    std::optional<RejectedCall> got = heard(*meshes[size_t(r)], 7);
    ASSERT_TRUE(got.has_value()) << "rank " << r << " did not hear of the rejection within 5 s";
    EXPECT_EQ(got->seq, 7u);
    EXPECT_EQ(got->by, 2) << "rank " << r;
    EXPECT_EQ(got->why, why);
    meshes[size_t(r)]->note_withdrawn(7);
    EXPECT_TRUE(meshes[size_t(r)]->withdrawn(7));
    EXPECT_EQ(meshes[size_t(r)]->peer_rejection(7), nullptr) << "the withdrawn call's notice is spent";
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, RejectionNotice, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// A withdrawn call's late messages name a call only a few back: the numbers
// are kept for the latest 64 calls, not for every call of a long job.
TEST(WithdrawnCalls, TheLatestAreRememberedAndTheOldestForgotten) {
  auto meshes = meshes_of(2, "tcp");
  ASSERT_EQ(meshes.size(), 2u);
  Mesh& m = *meshes[0];
  for (uint64_t seq = 1; seq <= 200; ++seq) m.note_withdrawn(seq);
  for (uint64_t seq = 137; seq <= 200; ++seq) EXPECT_TRUE(m.withdrawn(seq)) << seq;
  for (uint64_t seq = 1; seq <= 136; ++seq) EXPECT_FALSE(m.withdrawn(seq)) << seq;
  EXPECT_FALSE(m.withdrawn(201));
}

}  // namespace
}  // namespace omniccl::transport
