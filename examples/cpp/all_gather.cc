// all_gather.cc - concatenate every rank's vector, in rank order, everywhere.
//
// Rank r contributes {2r+1, 2r+2}; every rank receives all of them.
//
// Run: omniccl-run -n 4 ./all_gather   (or any env:// launcher, see example.hpp)
// Output with 4 ranks, in any order:
//   rank 0: [1, 2, 3, 4, 5, 6, 7, 8]
//   rank 1: [1, 2, 3, 4, 5, 6, 7, 8]
//   rank 2: [1, 2, 3, 4, 5, 6, 7, 8]
//   rank 3: [1, 2, 3, 4, 5, 6, 7, 8]
#include <cstdint>
#include <iostream>
#include <numeric>
#include <vector>

#include "example.hpp"
#include "omniccl.hpp"

int main() try {
  occl::Comm comm = occl::Comm::from_env();
  const int rank = comm.rank();

  const std::vector<int64_t> mine = {2 * rank + 1, 2 * rank + 2};
  std::vector<int64_t> all = comm.all_gather(mine);

  std::vector<int64_t> want(all.size());
  std::iota(want.begin(), want.end(), 1);  // 1, 2, ..., 2 * size
  return example::report(rank, all, want);
} catch (const std::exception& e) {
  std::cerr << e.what() << std::endl;
  return 1;
}
