// reduce_scatter.cc - sum every rank's vector; each rank gets one part of the
// sum.
//
// Each rank holds size() parts of 2 elements; with 4 ranks rank r holds
// r*8+1 .. r*8+8 (rank 0: 1..8, rank 1: 9..16, rank 2: 17..24, rank 3:
// 25..32). Rank i receives the SUM of every rank's part i, e.g. rank 0 gets
// {1+9+17+25, 2+10+18+26} = {52, 56}.
//
// Run: omniccl-run -n 4 ./reduce_scatter   (or any env:// launcher, see
// example.hpp)
// Output with 4 ranks, in any order:
//   rank 0: [52, 56]
//   rank 1: [60, 64]
//   rank 2: [68, 72]
//   rank 3: [76, 80]
#include <cstdint>
#include <iostream>
#include <vector>

#include "example.hpp"
#include "omniccl.hpp"

int main() try {
  occl::Comm comm = occl::Comm::from_env();
  const int rank = comm.rank();
  const int size = comm.size();

  const int64_t part = 2;
  const int64_t total = part * size;
  std::vector<int64_t> input(total);
  for (int64_t k = 0; k < total; ++k) input[k] = rank * total + k + 1;

  std::vector<int64_t> mine = comm.reduce_scatter(input, OCCL_SUM);

  // Element k of part `rank` is element rank*part + k of every rank's input.
  std::vector<int64_t> want(part, 0);
  for (int r = 0; r < size; ++r) {
    for (int64_t k = 0; k < part; ++k) want[k] += r * total + rank * part + k + 1;
  }
  return example::report(rank, mine, want);
} catch (const std::exception& e) {
  std::cerr << e.what() << std::endl;
  return 1;
}
