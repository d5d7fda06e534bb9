// example.hpp - output and self-check helpers shared by the C++ examples
// (not part of the wrapper in omniccl.hpp).
//
// Launching: every example joins its job with env://, so it runs under any
// torchrun/mpirun-style launcher, e.g. with 4 ranks:
//   omniccl-run -n 4 ./all_reduce_cpp
//   torchrun --nproc-per-node 4 --no-python ./all_reduce_cpp
//   MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 mpirun -n 4 ./all_reduce_cpp
// The examples work with any number of ranks; the outputs documented in each
// file are for 4. Lines from different ranks come out in any order.
#ifndef OMNICCL_EXAMPLES_EXAMPLE_HPP_
#define OMNICCL_EXAMPLES_EXAMPLE_HPP_

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace example {

/// "[a, b, ...]".
template <typename T>
std::string format(const std::vector<T>& v) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < v.size(); ++i) out << (i == 0 ? "" : ", ") << v[i];
  out << ']';
  return out.str();
}

/// Prints "rank R: [a, b, ...]" and compares `got` with the documented
/// `want`. Returns 0 if equal, else prints the expected values to stderr and
/// returns 1: use it as main's return value, so CI catches regressions.
template <typename T>
int report(int rank, const std::vector<T>& got, const std::vector<T>& want) {
  std::cout << "rank " << rank << ": " << format(got) << std::endl;
  if (got == want) return 0;
  std::cerr << "rank " << rank << ": WRONG RESULT, expected " << format(want) << std::endl;
  return 1;
}

}  // namespace example

#endif  // OMNICCL_EXAMPLES_EXAMPLE_HPP_
