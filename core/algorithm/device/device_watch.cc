// DeviceEngine's watchdog (device_engine.h): completes operations once
// their streams have passed them, and turns every way an operation can stop
// progressing into an error that releases the stream.
#include <algorithm>

#include "algorithm/device/device_engine.h"
#include "common/log.h"

namespace omniccl::algo {

namespace {

using Clock = std::chrono::steady_clock;
/// How long an operation runs before the watchdog starts reading words in
/// device memory (peers' signatures, the error word) and watching peers'
/// processes: the fast path costs one event query per poll.
constexpr auto kSlow = std::chrono::milliseconds(2);

}  // namespace

void DeviceEngine::watch() {
  try {
    rt_.set_device(window_.device());
  } catch (const Error& e) {
    OCCL_LOG(kWarn, kColl, "device watchdog: ", e.what());
  }
  std::unique_lock lock(mu_);
  auto nap = std::chrono::microseconds(20);
  while (!stop_) {
    if (pending_.empty()) {
      cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      nap = std::chrono::microseconds(20);
      continue;
    }
    Pending& p = pending_.front();
    bool passed = false;
    try {
      passed = rt_.event_done(p.end);
    } catch (const Error& e) {
      fail_all(Status::kSystem, str_cat(p.what, ": ", e.what()), true);
      continue;
    }
    if (passed && !check_error_word(p)) continue;
    if (passed) {
      DeviceDone done = std::move(p.done);
      free_events_.push_back(p.begin);
      free_events_.push_back(p.end);
      pending_.pop_front();
      if (done) done(Status::kSuccess, {});
      nap = std::chrono::microseconds(20);
      continue;
    }
    if (!check_front(p)) continue;
    cv_.wait_for(lock, nap);
    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(1));
  }
}

// False when the operation failed (and with it every pending one).
bool DeviceEngine::check_front(Pending& p) {
  const auto now = Clock::now();
  if (p.started == Clock::time_point{} && rt_.event_done(p.begin)) p.started = now;
  const bool begun = p.started != Clock::time_point{};
  if (!begun || now - p.started < kSlow) return true;
  // The error word first: a peer that found a mismatch may be gone already.
  if (!check_error_word(p)) return false;
  if (const int dead = dead_peer(); dead >= 0) {
    fail_all(Status::kPeerFailure, str_cat(window_.describe(dead), " ended during ", p.what), false);
    return false;
  }
  if (now - p.started > std::chrono::milliseconds(p.timeout_ms)) {
    fail_all(Status::kTimeout, str_cat(p.what, " did not complete within ", p.timeout_ms, " ms: ", missing(p)), true);
    return false;
  }
  return true;
}

// This rank's error word: set by its own signature check (a peer called
// another operation) or by a peer that failed. False when set (everything
// pending has failed then).
bool DeviceEngine::check_error_word(const Pending& p) {
  uint64_t err = 0;
  try {
    err = rt_.read_value(window_.flags(rank_) + kErrorWord);
  } catch (const Error& e) {
    fail_all(Status::kSystem, str_cat(p.what, ": ", e.what()), true);
    return false;
  }
  if (err == 0 || err >= kReleased) return true;
  const auto st = static_cast<Status>(err & 0xff);
  // A collective's check names the peer's index; a receive's, its sender.
  const int who = p.peer >= 0 ? p.peer : int(err >> 8) - 1;
  const std::string peer = who >= 0 && who < size_ ? window_.describe(who) : std::string("a peer");
  if (st == Status::kMismatch && p.peer >= 0) {
    fail_all(
        st,
        str_cat("mismatched send and receive: ", peer, "'s message differs in size or tag from this rank's ", p.what),
        false);
  } else if (st == Status::kMismatch) {
    fail_all(st,
             str_cat("mismatched call: ", peer, "'s call #", p.seq,
                     " on CUDA tensors is another operation than this rank's ", p.what,
                     " (operation, dtype, count, root, reduce op, or which buffers are registered differ)"),
             false);
  } else {
    fail_all(st == Status::kSuccess ? Status::kPeerFailure : st,
             str_cat(peer, " failed during ", p.what, " (", status_name(st), "); its own error names the cause"),
             false);
  }
  return false;
}

// The peers whose signature of this call has not arrived.
std::string DeviceEngine::missing(const Pending& p) {
  if (p.peer >= 0) return str_cat(window_.describe(p.peer), " did not take its part");
  std::string late;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const uint64_t v = rt_.read_value(window_.flags(rank_) + sig_word(q));
    if ((v >> 24) < p.seq) late += str_cat(late.empty() ? "" : ", ", window_.describe(q));
  }
  return late.empty() ? std::string("every rank started it; one has not finished") : late + " did not arrive";
}

// A peer whose process ended without leaving in order, or -1. One that left
// in order had done its part of every operation: what this rank still
// waits for comes from others.
int DeviceEngine::dead_peer() {
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && window_.peer_gone(p) && rt_.read_value(window_.flags(rank_) + bye_word(p)) == 0) return p;
  }
  return -1;
}

// A healthy communicator's end: waits (bounded) until the receivers took
// this rank's last pieces (their acks are written into this rank's block,
// which must outlive them), then tells every peer it left in order.
void DeviceEngine::leave_in_order() {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  for (int p = 0; p < size_; ++p) {
    while (p != rank_ && rt_.read_value(window_.flags(rank_) + p2p_acked_word(p)) < send_steps_[size_t(p)] &&
           Clock::now() < give_up && !window_.peer_gone(p)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // Not into the block of a peer that left already: its memory may be gone.
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && rt_.read_value(window_.flags(rank_) + bye_word(p)) == 0) {
      rt_.write_value(window_.flags(p) + bye_word(rank_), 1);
    }
  }
}

// Every word this rank's stream may wait on (all but the error and bye words).
void DeviceEngine::release_own_waits() {
  for (size_t w = kErrorWord + 1; w < bye_word(0); ++w) {
    rt_.write_value(window_.flags(rank_) + w, kReleased);
  }
}

void DeviceEngine::fail_all(Status st, const std::string& message, bool tell_peers) {
  if (failed_ == Status::kSuccess) {
    failed_ = st;
    failed_message_ = message;
    OCCL_LOG(kWarn, kColl, message);
  }
  try {
    release_own_waits();
  } catch (const Error& e) {
    OCCL_LOG(kWarn, kColl, "releasing this rank's stream: ", e.what());
  }
  for (int p = 0; tell_peers && p < size_; ++p) {
    if (p == rank_) continue;
    try {
      rt_.write_value(window_.flags(p) + kErrorWord, uint64_t(rank_ + 1) << 8 | uint64_t(st));
    } catch (const Error&) {
      // A peer that is gone needs no telling.
    }
  }
  // The communicator's error first, so that a caller woken by its work
  // already finds it there.
  if (on_fail_) on_fail_(failed_, failed_message_);
  while (!pending_.empty()) {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    draining_.push_back(p.end);
    draining_.push_back(p.begin);
    if (p.done) p.done(failed_, failed_message_);
  }
}

DeviceEngine::~DeviceEngine() {
  std::unique_lock lock(mu_);
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (!pending_.empty() && Clock::now() < give_up) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lock.lock();
  }
  if (!pending_.empty()) fail_all(Status::kAborted, "the communicator was destroyed before this operation ended", true);
  if (failed_ == Status::kSuccess && !aborted_) {
    try {
      leave_in_order();
    } catch (const Error& e) {
      OCCL_LOG(kWarn, kColl, "leaving the device window: ", e.what());
    }
  }
  stop_ = true;
  cv_.notify_all();
  lock.unlock();
  watchdog_.join();
  // Released streams run on past their waits: the window's memory stays
  // until they have passed their operations (bounded).
  for (GpuRuntime::Event e : draining_) {
    for (int i = 0; i < 5000; ++i) {
      try {
        if (rt_.event_done(e)) break;
      } catch (const Error&) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (GpuRuntime::Event e : draining_) rt_.event_destroy(e);
  for (GpuRuntime::Event e : free_events_) rt_.event_destroy(e);
}

}  // namespace omniccl::algo
