// all_to_all.cc - every rank sends a different part to every rank.
//
// Part j of rank i's vector becomes part i of rank j's result: a transpose.
// Here each part is one element and rank i sends {i*size+0, i*size+1, ...};
// with 4 ranks rank 0 sends {0, 1, 2, 3}, rank 1 {4, 5, 6, 7}, rank 2
// {8, 9, 10, 11}, rank 3 {12, 13, 14, 15}, and rank j receives element j of
// each: {j, 4+j, 8+j, 12+j}.
//
// Run: omniccl-run -n 4 ./all_to_all   (or any env:// launcher, see example.hpp)
// Output with 4 ranks, in any order:
//   rank 0: [0, 4, 8, 12]
//   rank 1: [1, 5, 9, 13]
//   rank 2: [2, 6, 10, 14]
//   rank 3: [3, 7, 11, 15]
#include <cstdint>
#include <iostream>
#include <vector>

#include "example.hpp"
#include "omniccl.hpp"

int main() try {
  occl::Comm comm = occl::Comm::from_env();
  const int rank = comm.rank();
  const int size = comm.size();

  std::vector<int64_t> input(size);
  for (int j = 0; j < size; ++j) input[j] = int64_t{rank} * size + j;

  std::vector<int64_t> result = comm.all_to_all(input);

  std::vector<int64_t> want(size);
  for (int i = 0; i < size; ++i) want[i] = int64_t{i} * size + rank;
  return example::report(rank, result, want);
} catch (const std::exception& e) {
  std::cerr << e.what() << std::endl;
  return 1;
}
