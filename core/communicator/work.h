// Work: the state of one operation started asynchronously.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/status.h"

namespace omniccl {

class Work {
 public:
  /// Marks the operation finished with status (kSuccess or an error).
  void complete(Status status, std::string message);
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
};

}  // namespace omniccl
