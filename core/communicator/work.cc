#include "communicator/work.h"

#include "common/time.h"

namespace omniccl {

void Work::complete(Status status, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = status;
    message_ = std::move(message);
  }
  cv_.notify_all();
}

Status Work::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return status_;
}

bool Work::wait_for(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  // Waits in bounded slices of a saturating deadline: wait_for(INT64_MAX ms)
  // overflows the clock and returns at once.
  const Deadline deadline = Deadline::after_ms(timeout_ms);
  while (!done_) {
    if (deadline.expired()) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(deadline.remaining_ms(3'600'000)));
  }
  return true;
}

bool Work::done() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

Status Work::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::string Work::message() {
  std::lock_guard<std::mutex> lock(mu_);
  return message_;
}

}  // namespace omniccl
