// Helpers for tests that build real meshes with threads as ranks: the
// address exchange the ranks' Mesh::create calls share, and session numbers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "transport/mesh.h"

namespace omniccl::test {

/// The ranks' address blobs, handed out once the expected ranks have posted.
struct Exchange {
  explicit Exchange(int n = 2) : blobs(static_cast<size_t>(n)) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> blobs;
  int posted = 0;

  /// Posts `mine` as rank's blob; returns every blob once `posters` ranks
  /// have posted (or after 30 s, with the missing ones empty).
  std::vector<std::string> all_gather(int rank, const std::string& mine, int posters) {
    std::unique_lock<std::mutex> lock(mu);
    blobs[static_cast<size_t>(rank)] = mine;
    ++posted;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return posted == posters; });
    return blobs;
  }
  /// As above, once every rank has posted.
  std::vector<std::string> all_gather(int rank, const std::string& mine) {
    return all_gather(rank, mine, static_cast<int>(blobs.size()));
  }
};

/// Options for rank `rank` of a mesh of `size` ranks of this process:
/// `transport` ("tcp", "shm" or "auto") over 127.0.0.1, a 30 s deadline.
inline transport::MeshOptions loopback_options(int rank, int size, uint64_t session,
                                               const std::string& transport = "tcp", const std::string& token = "") {
  transport::MeshOptions o;
  o.rank = rank;
  o.size = size;
  o.session = session;
  o.transport = transport;
  o.tcp_ip = "127.0.0.1";
  o.deadline = Deadline::after_ms(30000);
  o.token = token;
  return o;
}

/// A fresh session number: it names the abstract unix sockets and shared
/// segments, and test processes may run at once.
inline uint64_t fresh_session() { return std::random_device{}() | (uint64_t{std::random_device{}()} << 32) | 1; }

}  // namespace omniccl::test
