// Whether a host's ranks outnumber their cores is judged from the union of
// the ranks' CPU masks, swapped at setup (Mesh::local_cpus), and not from one
// rank's own mask: mpirun binds each of 2 ranks to a core of its own, and
// each then sees a one-CPU mask. What depends on it: the ring all_gather's
// order (a rank with a core of its own sends its block before it copies it
// into its output, at every size). Real meshes (threads as ranks, an in-memory
// address exchange, loopback TCP; shared memory for the all_gather cases),
// with the CPU list of each rank's record rewritten by the exchange, so the
// cases do not depend on this machine's cores; and one case with real thread
// affinity.
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "algorithm/algorithms.h"
#include "algorithm/engine.h"
#include "common/time.h"
#include "transport/mesh.h"
#include "engine_pair.h"
#include "mesh_exchange.h"

namespace omniccl::transport {
namespace {

constexpr int kCpusField = 6;  // a field of an address record (Endpoint::encode)

using test::Exchange;
using test::kHostField;
using test::loopback_options;
using test::with_field;

struct Rank {
  std::string host = "hostA";  // ranks with the same name share a host
  std::string cpus;            // its CPU list; "" = the record's own (this thread's mask)
  int pin = -1;                // >= 0: the rank's thread binds itself to this CPU first
};

struct Built {
  std::vector<std::unique_ptr<Mesh>> meshes;
  std::vector<std::string> errors;
};

Built build(const std::vector<Rank>& ranks, const std::string& transport = "tcp") {
  const int n = static_cast<int>(ranks.size());
  Exchange ex(n);
  const uint64_t session = test::fresh_session();
  Built b;
  b.meshes.resize(size_t(n));
  b.errors.resize(size_t(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        if (ranks[size_t(r)].pin >= 0) {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(ranks[size_t(r)].pin, &one);
          if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) throw std::runtime_error("pin failed");
        }
        b.meshes[size_t(r)] = Mesh::create(loopback_options(r, n, session, transport), [&](const std::string& mine) {
          auto all = ex.all_gather(r, mine);
          for (size_t p = 0; p < all.size(); ++p) {
            // Rank r sees the ranks of its own host with its own (real) host
            // identity, the others with another.
            if (ranks[p].host != ranks[size_t(r)].host) all[p] = with_field(all[p], kHostField, ranks[p].host + "|x");
            if (!ranks[p].cpus.empty()) all[p] = with_field(all[p], kCpusField, ranks[p].cpus);
          }
          return all;
        });
      } catch (const std::exception& e) {
        b.errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return b;
}

#define ASSERT_BUILT(b)                                                     \
  for (size_t r_ = 0; r_ < (b).meshes.size(); ++r_) {                       \
    ASSERT_TRUE((b).meshes[r_]) << "rank " << r_ << ": " << (b).errors[r_]; \
  }

TEST(MeshCpus, RanksBoundToACoreEachAreNotOversubscribed) {
  Built b = build({{"hostA", "0"}, {"hostA", "1"}});
  ASSERT_BUILT(b);
  for (auto& m : b.meshes) {
    EXPECT_EQ(m->local_size(), 2);
    EXPECT_EQ(m->local_cpus(), 2);
    EXPECT_FALSE(Engine(*m).oversubscribed());
  }
}

TEST(MeshCpus, RanksBoundToOneCoreAreOversubscribed) {
  Built b = build({{"hostA", "0"}, {"hostA", "0"}});
  ASSERT_BUILT(b);
  for (auto& m : b.meshes) {
    EXPECT_EQ(m->local_cpus(), 1);
    EXPECT_TRUE(Engine(*m).oversubscribed());
  }
}

TEST(MeshCpus, UnionOfOverlappingMasksAndOnlyThisHostsRanks) {
  // Ranks 0-2 on host A share CPUs 0-3 and 2-5 (6 CPUs); rank 3 is on host B
  // with CPU 9, which host A's ranks do not count, nor it theirs.
  Built b = build({{"hostA", "0-3"}, {"hostA", "2-5"}, {"hostA", "3"}, {"hostB", "9"}});
  ASSERT_BUILT(b);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(b.meshes[size_t(r)]->local_size(), 3);
    EXPECT_EQ(b.meshes[size_t(r)]->local_cpus(), 6);
    EXPECT_FALSE(Engine(*b.meshes[size_t(r)]).oversubscribed());
  }
  EXPECT_EQ(b.meshes[3]->local_size(), 1);
  EXPECT_EQ(b.meshes[3]->local_cpus(), 1);
  EXPECT_FALSE(Engine(*b.meshes[3]).oversubscribed());
  // Four ranks on host A with 2 CPUs between them: oversubscribed.
  Built four = build({{"hostA", "0"}, {"hostA", "1"}, {"hostA", "0-1"}, {"hostA", "1"}});
  ASSERT_BUILT(four);
  for (auto& m : four.meshes) {
    EXPECT_EQ(m->local_cpus(), 2);
    EXPECT_TRUE(Engine(*m).oversubscribed());
  }
}

// Whether any host of the job runs more ranks than its cores: the same on
// every rank (it decides the all_to_all algorithm, which all ranks must
// agree on), though each host judges its own ranks.
TEST(MeshCpus, EveryRankKnowsWhetherAnyHostIsOversubscribed) {
  // Host A: 2 ranks on 2 CPUs; host B: 2 ranks on one CPU.
  Built mixed = build({{"hostA", "0"}, {"hostA", "1"}, {"hostB", "0"}, {"hostB", "0"}});
  ASSERT_BUILT(mixed);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_TRUE(mixed.meshes[r]->any_host_oversubscribed()) << "rank " << r;
    EXPECT_EQ(Engine(*mixed.meshes[r]).oversubscribed(), r >= 2) << "rank " << r << ": its own host";
  }
  Built roomy = build({{"hostA", "0"}, {"hostA", "1"}, {"hostB", "0-1"}, {"hostB", "3"}});
  ASSERT_BUILT(roomy);
  for (size_t r = 0; r < 4; ++r) EXPECT_FALSE(roomy.meshes[r]->any_host_oversubscribed()) << "rank " << r;
  Built one = build({{"hostA", "0"}, {"hostA", "0"}, {"hostA", "0-1"}});
  ASSERT_BUILT(one);
  for (size_t r = 0; r < 3; ++r) EXPECT_TRUE(one.meshes[r]->any_host_oversubscribed()) << "rank " << r;
}

// Real affinity: each rank's thread binds itself to a different CPU before
// setup (as mpirun binds its ranks), so each sees one CPU of its own.
TEST(MeshCpus, RealBindingToDistinctCpus) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  std::vector<int> usable;
  for (int c = 0; c < CPU_SETSIZE && usable.size() < 2; ++c) {
    if (CPU_ISSET(c, &all)) usable.push_back(c);
  }
  if (usable.size() < 2) GTEST_SKIP() << "this process may use only one CPU";
  Built b = build({{"hostA", "", usable[0]}, {"hostA", "", usable[1]}});
  ASSERT_BUILT(b);
  for (auto& m : b.meshes) {
    EXPECT_EQ(m->local_cpus(), 2);
    EXPECT_FALSE(Engine(*m).oversubscribed());
  }
  Built same = build({{"hostA", "", usable[0]}, {"hostA", "", usable[0]}});
  ASSERT_BUILT(same);
  for (auto& m : same.meshes) {
    EXPECT_EQ(m->local_cpus(), 1);
    EXPECT_TRUE(Engine(*m).oversubscribed());
  }
}

/// Two ranks over shared memory with the CPU lists given run the ring
/// all_gather of `block` bytes per rank; checks every block and returns each
/// rank's copy counters (Engine::idle_copy_stats).
std::vector<Engine::IdleCopyStats> ring_all_gather(const std::string& cpus0, const std::string& cpus1, size_t block) {
  Built b = build({{"hostA", cpus0}, {"hostA", cpus1}}, "shm");
  std::vector<Engine::IdleCopyStats> stats(2);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_TRUE(b.meshes[r]) << "rank " << r << ": " << b.errors[r];
    if (!b.meshes[r]) return stats;
  }
  std::vector<char> mine[2], all[2];
  for (int r = 0; r < 2; ++r) {
    mine[r].resize(block);
    for (size_t i = 0; i < block; ++i) mine[r][i] = char((i * 131 + size_t(r) * 17 + (i >> 12)) & 0xff);
    all[r].assign(2 * block, 0);
  }
  OpSignature sig;
  sig.kind = OpKind::kAllGather;
  sig.dtype = DType::kUInt8;
  sig.seq = 1;
  sig.count = block;
  auto errors = test::engines_on_two_threads(
      b.meshes,
      [&](int r, Engine& e) {
        e.begin(sig, RedOp::kSum, 20000);
        algo::all_gather_ring(e, mine[r].data(), all[r].data(), block);
      },
      [&](int r, Engine& e) { stats[size_t(r)] = e.idle_copy_stats(); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
    EXPECT_EQ(std::memcmp(all[r].data(), mine[0].data(), block), 0) << "rank " << r << ": block 0";
    EXPECT_EQ(std::memcmp(all[r].data() + block, mine[1].data(), block), 0) << "rank " << r << ": block 1";
  }
  return stats;
}

// A rank with a core of its own sends its block first and copies it into its
// output in the step's waits (or right after it), at every size: 2 ranks,
// 8-128 MiB blocks, faster than copying first on the VM measured.
TEST(MeshCpus, ARankWithACoreSendsItsAllGatherBlockFirst) {
  constexpr size_t kBlock = size_t(8) << 20;  // above the 4 MiB that oversubscribed ranks send first
  const auto stats = ring_all_gather("0", "1", kBlock);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(stats[r].while_waiting + stats[r].after, kBlock) << "rank " << r << ": its own block, beside the step";
  }
}

// Oversubscribed ranks copy a block above 4 MiB first (no core is free to
// read it while this rank copies), and send smaller ones first.
TEST(MeshCpus, OversubscribedRanksCopyLargeAllGatherBlocksFirst) {
  constexpr size_t kLarge = size_t(8) << 20, kSmall = size_t(1) << 20;
  const auto large = ring_all_gather("0", "0", kLarge);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(large[r].while_waiting + large[r].after + large[r].at_once, 0u) << "rank " << r << ": copied first";
  }
  const auto small = ring_all_gather("0", "0", kSmall);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(small[r].while_waiting + small[r].after, kSmall) << "rank " << r << ": sent first";
  }
}

}  // namespace
}  // namespace omniccl::transport
