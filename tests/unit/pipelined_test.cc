// The pipelined all_reduce (algo::all_reduce_pipelined, OMNICCL_ALGO
// all_reduce=pipelined): the ring's phases on columns of chunks, each column
// one phase behind the one before. Two ranks as threads of this process
// over real meshes (shared memory and TCP), each with its own engine, with
// chunks of a few elements so that every edge shows at small sizes: blocks
// of unequal length (odd counts), a last chunk shorter than the others, a
// block with one chunk fewer than the other, empty blocks (counts 0 and 1),
// in place and out of place, float32 and int32 sums and a max. Every
// element is checked against a value computed here from the inputs' formula.
// (Other rank counts: the collective matrix, which runs every algorithm for
// 1 to 8 ranks, and at 16 MiB.)
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "algorithm/algorithms.h"
#include "algorithm/engine.h"
#include "common/status.h"
#include "transport/mesh.h"
#include "mesh_exchange.h"

namespace omniccl {
namespace {

using test::two_meshes;
using transport::Mesh;

/// Rank r's input element i.
int32_t input(int rank, size_t i) { return int32_t((i * 7 + 3) % 1000) * (rank == 0 ? 1 : -3) + rank; }

struct Case {
  size_t count;
  size_t chunk_bytes;
  bool in_place;
  DType dtype;
  RedOp op;
};

/// Runs every case on both ranks in turn; returns each rank's first error.
std::vector<std::string> run_cases(std::vector<std::unique_ptr<Mesh>>& meshes, const std::vector<Case>& cases) {
  std::vector<std::string> errors(2);
  auto rank_main = [&](int rank) {
    try {
      Engine e(*meshes[size_t(rank)]);
      uint64_t seq = 0;
      for (const Case& c : cases) {
        std::vector<int32_t> in32(c.count), out32(c.count, -77);
        std::vector<float> inf(c.count), outf(c.count, -77.0f);
        for (size_t i = 0; i < c.count; ++i) {
          in32[i] = input(rank, i);
          inf[i] = float(input(rank, i)) * 0.5f;
        }
        const bool f32 = c.dtype == DType::kFloat32;
        const char* src = f32 ? reinterpret_cast<const char*>(inf.data()) : reinterpret_cast<const char*>(in32.data());
        char* dst = f32 ? reinterpret_cast<char*>(outf.data()) : reinterpret_cast<char*>(out32.data());
        if (c.in_place) {
          dst = const_cast<char*>(src);
        }
        OpSignature sig;
        sig.kind = OpKind::kAllReduce;
        sig.dtype = c.dtype;
        sig.redop = c.op;
        sig.count = c.count;
        sig.seq = ++seq;
        sig.algo = 9;
        e.begin(sig, c.op, 20000);
        algo::all_reduce_pipelined(e, src, dst, c.count, c.chunk_bytes);
        for (size_t i = 0; i < c.count; ++i) {
          const int32_t a = input(0, i), b = input(1, i);
          const int32_t want = c.op == RedOp::kMax ? std::max(a, b) : a + b;
          const bool ok = f32 ? reinterpret_cast<const float*>(dst)[i] == float(want) * 0.5f
                              : reinterpret_cast<const int32_t*>(dst)[i] == want;
          if (!ok) {
            throw Error(Status::kInternal, "count " + std::to_string(c.count) + ", chunk " +
                                               std::to_string(c.chunk_bytes) + (c.in_place ? ", in place" : "") +
                                               ": wrong element " + std::to_string(i));
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
  return errors;
}

class Pipelined : public ::testing::TestWithParam<std::string> {};

TEST_P(Pipelined, EveryElementForOddCountsAndShortChunks) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  std::vector<Case> cases;
  // Chunks of 1, 3 and 16 elements; 9 and 17 leave rank 0's block one
  // element and one chunk longer than rank 1's; 1000 and 1001 many chunks.
  for (size_t chunk : {size_t(4), size_t(12), size_t(64)}) {
    for (size_t count : {0, 1, 2, 3, 5, 7, 8, 9, 17, 33, 1000, 1001}) {
      for (bool in_place : {false, true}) {
        cases.push_back({count, chunk, in_place, DType::kFloat32, RedOp::kSum});
        cases.push_back({count, chunk, in_place, DType::kInt32, RedOp::kMax});
      }
    }
  }
  // The chunk the library uses, over several chunks per block.
  cases.push_back({(size_t(3) << 20) / 4 + 5, algo::kPipelineChunk, false, DType::kFloat32, RedOp::kSum});
  cases.push_back({(size_t(3) << 20) / 4 + 5, algo::kPipelineChunk, true, DType::kInt32, RedOp::kSum});
  const auto errors = run_cases(meshes, cases);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

INSTANTIATE_TEST_SUITE_P(Transports, Pipelined, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace omniccl
