// The notices of collectives rejected for their arguments (mesh_notices.cc),
// on real meshes (threads as ranks, an in-memory address exchange, loopback
// only):
//   - the calls withdrawn here are remembered by number, a bounded few.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

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
