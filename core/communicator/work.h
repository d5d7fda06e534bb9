// Work: the state of one operation started asynchronously.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/status.h"

namespace omniccl {

/// What a point-to-point receive got (MPI_Status): the sender's rank and tag
/// and the bytes that arrived. A receive from PROC_NULL (-2) gets source -2,
/// tag -1 (any tag) and 0 bytes.
struct RecvStatus {
  int source = -2;
  int tag = -1;
  uint64_t bytes = 0;
  uint64_t elem_bytes = 1;  ///< element size of the receive buffer (count = bytes / it)
  bool cancelled = false;   ///< the operation was cancelled (MPI_Test_cancelled); it moved nothing
  uint64_t message = 0;     ///< a matched probe's message (P2PMatcher::mrecv), 0 if none
};

class Work {
 public:
  /// Marks the operation finished with status (kSuccess or an error).
  void complete(Status status, std::string message);
  /// A receive finished: records what it got, then completes.
  void complete(Status status, std::string message, const RecvStatus& received) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      recv_ = received;
    }
    complete(status, std::move(message));
  }
  /// Records what a receive got; the work completes later (a staged
  /// receive's, which its operation completes after the copy back).
  void set_received(const RecvStatus& received) {
    std::lock_guard<std::mutex> lock(mu_);
    recv_ = received;
  }
  /// What a finished receive got (defaults for other operations).
  RecvStatus recv_status() {
    std::lock_guard<std::mutex> lock(mu_);
    return recv_;
  }
  /// Blocks until finished; returns the status (message via message()).
  Status wait();
  /// Blocks at most timeout_ms; true if finished.
  bool wait_for(int64_t timeout_ms);
  /// True once finished.
  bool done();
  Status status();
  std::string message();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_ = Status::kSuccess;
  std::string message_;
  RecvStatus recv_;
};

}  // namespace omniccl
