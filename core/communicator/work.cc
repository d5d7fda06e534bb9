#include "communicator/work.h"

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
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done_; });
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
