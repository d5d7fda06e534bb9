// Two ranks as threads of this process, each with its own engine over one of
// a pair of meshes (test::two_meshes): for tests of the engine's steps.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithm/engine.h"
#include "transport/mesh.h"

namespace omniccl::test {

/// Runs body(rank, engine) on two threads, each with an engine over
/// meshes[rank], then after(rank, engine) once body returned (to read the
/// engine's counters). Returns each rank's error ("" if none).
template <typename Body, typename After>
std::vector<std::string> engines_on_two_threads(std::vector<std::unique_ptr<transport::Mesh>>& meshes, Body body,
                                                After after) {
  std::vector<std::string> errors(2);
  auto rank_main = [&](int rank) {
    try {
      Engine e(*meshes[static_cast<size_t>(rank)]);
      body(rank, e);
      after(rank, e);
    } catch (const std::exception& ex) {
      errors[static_cast<size_t>(rank)] = ex.what();
    }
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  return errors;
}

}  // namespace omniccl::test
