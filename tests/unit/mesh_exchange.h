// Helpers for tests that build real meshes with threads as ranks: the
// address exchange the ranks' Mesh::create calls share, session numbers, and
// a pair of meshes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
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
  o.transports.forced = transport;
  o.tcp_ip = "127.0.0.1";
  o.deadline = Deadline::after_ms(30000);
  o.token = token;
  return o;
}

/// A fresh session number: it names the abstract unix sockets and shared
/// segments, and test processes may run at once.
inline uint64_t fresh_session() { return std::random_device{}() | (uint64_t{std::random_device{}()} << 32) | 1; }

/// Field `i` of an address record (Endpoint::encode: fields separated by
/// 0x1f) replaced by `value`. Field 1 is the host's identity: ranks whose
/// records name another host take each other for ranks of other hosts.
inline std::string with_field(const std::string& blob, int i, const std::string& value) {
  size_t start = 0;
  for (int k = 0; k < i; ++k) start = blob.find('\x1f', start) + 1;
  const size_t end = blob.find('\x1f', start);
  return blob.substr(0, start) + value + (end == std::string::npos ? std::string() : blob.substr(end));
}
inline constexpr int kHostField = 1;

/// Two meshes over `transport` ("shm" or "tcp"), built by two threads, each
/// rank's options passed through `adjust` first; with `other_hosts`, each
/// rank sees the other's record with another host's identity. The test
/// fails (both null) naming each rank's error when one cannot be built.
inline std::vector<std::unique_ptr<transport::Mesh>> two_meshes(
    const std::string& transport, const std::function<void(transport::MeshOptions&)>& adjust = {},
    bool other_hosts = false) {
  Exchange ex;
  const uint64_t session = fresh_session();
  std::vector<std::unique_ptr<transport::Mesh>> meshes(2);
  std::string errors[2];
  auto build = [&](int rank) {
    try {
      transport::MeshOptions o = loopback_options(rank, 2, session, transport);
      if (adjust) adjust(o);
      meshes[static_cast<size_t>(rank)] = transport::Mesh::create(o, [&](const std::string& mine) {
        auto all = ex.all_gather(rank, mine);
        if (other_hosts) all[size_t(1 - rank)] = with_field(all[size_t(1 - rank)], kHostField, "elsewhere");
        return all;
      });
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  };
  std::thread b0(build, 0), b1(build, 1);
  b0.join();
  b1.join();
  EXPECT_TRUE(meshes[0] && meshes[1]) << "rank 0: " << errors[0] << "\nrank 1: " << errors[1];
  return meshes;
}
}  // namespace omniccl::test
