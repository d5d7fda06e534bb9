// Private: the state of a split's liveness heartbeat (mesh_liveness.cc),
// here so that mesh.cc can destroy it.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/time.h"
#include "transport/mesh.h"

namespace omniccl::transport {

/// What Mesh::start_heartbeat started.
struct Mesh::Liveness {
  std::string generation;  ///< the heartbeat's payload
  int64_t timeout_ms = 0;
  std::string what;                      ///< "a split of ..."
  std::vector<char> expected;            ///< by peer
  std::vector<Clock::time_point> heard;  ///< by peer; {} = none of this generation yet
  /// By peer, for those not in the split yet: its pid here (0: not on this
  /// host; -1: not looked up yet) and since when /proc has shown it stopped
  /// ({}: not stopped).
  std::vector<int> local_pid;
  std::vector<Clock::time_point> stopped_since;
  Clock::time_point next_proc_look{};  ///< /proc is read at most every 250 ms
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
};

}  // namespace omniccl::transport
