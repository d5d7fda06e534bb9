// broadcast.cc - copy one rank's vector to every rank.
//
// Rank r starts with {2r+1, 2r+2}; after the broadcast from rank 0 every
// rank holds rank 0's {1, 2}.
//
// Run: omniccl-run -n 4 ./broadcast   (or any env:// launcher, see example.hpp)
// Output with 4 ranks, in any order:
//   rank 0: [1, 2]
//   rank 1: [1, 2]
//   rank 2: [1, 2]
//   rank 3: [1, 2]
#include <cstdint>
#include <iostream>
#include <vector>

#include "example.hpp"
#include "omniccl.hpp"

int main() try {
  occl::Comm comm = occl::Comm::from_env();
  const int rank = comm.rank();

  const int root = 0;
  std::vector<int64_t> data = {2 * rank + 1, 2 * rank + 2};
  comm.broadcast(data, root);

  return example::report(rank, data, {2 * root + 1, 2 * root + 2});
} catch (const std::exception& e) {
  std::cerr << e.what() << std::endl;
  return 1;
}
