// all_reduce.cc - sum every rank's vector; every rank gets the sum.
//
// Rank r holds {2r+1, 2r+2}; the in-place SUM leaves
// {1+3+5+7, 2+4+6+8} = {16, 20} on every rank.
//
// Run: omniccl-run -n 4 ./all_reduce   (or any env:// launcher, see example.hpp)
// Output with 4 ranks, in any order:
//   rank 0: [16, 20]
//   rank 1: [16, 20]
//   rank 2: [16, 20]
//   rank 3: [16, 20]
#include <cstdint>
#include <iostream>
#include <vector>

#include "example.hpp"
#include "omniccl.hpp"

int main() try {
  occl::Comm comm = occl::Comm::from_env();
  const int rank = comm.rank();

  std::vector<int64_t> data = {2 * rank + 1, 2 * rank + 2};
  comm.all_reduce(data, OCCL_SUM);

  std::vector<int64_t> want = {0, 0};
  for (int r = 0; r < comm.size(); ++r) {
    want[0] += 2 * r + 1;
    want[1] += 2 * r + 2;
  }
  return example::report(rank, data, want);
} catch (const std::exception& e) {
  std::cerr << e.what() << std::endl;
  return 1;
}
