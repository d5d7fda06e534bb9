// split.cc - split a communicator in two by rank parity and reduce in each
// half independently.
//
// Ranks 0, 2, ... (color 0) and ranks 1, 3, ... (color 1) each get a new
// communicator; the key (the old rank) keeps them in the old order. Rank r
// holds {2r+1, 2r+2}, so with 4 ranks the even half sums {1, 2} + {5, 6} =
// {6, 8} and the odd half {3, 4} + {7, 8} = {10, 12}.
//
// Run: omniccl-run -n 4 ./split   (or any env:// launcher, see example.hpp)
// Output with 4 ranks, in any order:
//   rank 0: [6, 8] (rank 0 of 2 in the even half)
//   rank 1: [10, 12] (rank 0 of 2 in the odd half)
//   rank 2: [6, 8] (rank 1 of 2 in the even half)
//   rank 3: [10, 12] (rank 1 of 2 in the odd half)
#include <cstdint>
#include <iostream>
#include <vector>

#include "example.hpp"
#include "omniccl.hpp"

int main() try {
  occl::Comm world = occl::Comm::from_env();
  const int rank = world.rank();
  const int color = rank % 2;

  // Collective over `world`: every rank calls split.
  occl::Comm half = world.split(color, /*key=*/rank);

  std::vector<int64_t> data = {2 * rank + 1, 2 * rank + 2};
  half.all_reduce(data, OCCL_SUM);

  std::vector<int64_t> want = {0, 0};
  for (int r = color; r < world.size(); r += 2) {
    want[0] += 2 * r + 1;
    want[1] += 2 * r + 2;
  }
  std::cout << "rank " << rank << ": " << example::format(data) << " (rank " << half.rank() << " of " << half.size()
            << " in the " << (color == 0 ? "even" : "odd") << " half)" << std::endl;
  if (data != want) {
    std::cerr << "rank " << rank << ": WRONG RESULT, expected " << example::format(want) << std::endl;
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << e.what() << std::endl;
  return 1;
}
