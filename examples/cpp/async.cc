// async.cc - start two all_reduces without waiting, then wait for both.
//
// A started operation runs in the background while the program goes on;
// operations on one communicator run in the order they were issued. Rank r
// holds sums = {2r+1, 2r+2} and maxes = {r, 10r}; the SUM gives {16, 20} and
// the MAX {3, 30} with 4 ranks. The buffers must stay alive until the Work
// handles are waited for (occl::Work's destructor waits too, for safety).
//
// Run: omniccl-run -n 4 ./async   (or any env:// launcher, see example.hpp)
// Output with 4 ranks, in any order:
//   rank 0: sum [16, 20], max [3, 30]
//   rank 1: sum [16, 20], max [3, 30]
//   rank 2: sum [16, 20], max [3, 30]
//   rank 3: sum [16, 20], max [3, 30]
#include <cstdint>
#include <iostream>
#include <vector>

#include "example.hpp"
#include "omniccl.hpp"

int main() try {
  occl::Comm comm = occl::Comm::from_env();
  const int rank = comm.rank();
  const int size = comm.size();

  std::vector<int64_t> sums = {2 * rank + 1, 2 * rank + 2};
  std::vector<int64_t> maxes = {rank, 10 * rank};
  occl::Work first = comm.all_reduce_async(sums, OCCL_SUM);
  occl::Work second = comm.all_reduce_async(maxes, OCCL_MAX);
  // ... other work could run here, not touching sums or maxes ...
  first.wait();
  second.wait();

  std::vector<int64_t> want_sums = {0, 0};
  for (int r = 0; r < size; ++r) {
    want_sums[0] += 2 * r + 1;
    want_sums[1] += 2 * r + 2;
  }
  const std::vector<int64_t> want_maxes = {size - 1, 10 * (size - 1)};

  std::cout << "rank " << rank << ": sum " << example::format(sums) << ", max " << example::format(maxes) << std::endl;
  if (sums != want_sums || maxes != want_maxes) {
    std::cerr << "rank " << rank << ": WRONG RESULT, expected sum " << example::format(want_sums) << ", max "
              << example::format(want_maxes) << std::endl;
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << e.what() << std::endl;
  return 1;
}
