// PendingComm: a communicator still being created in the background
// (occl_config_t.blocking = 0, NCCL's non-blocking init and split).
//
// init runs Communicator::create on a thread of its own; split runs as an
// asynchronous operation on the parent, in issue order with its other
// operations. Either can be polled, and cancelled promptly in any phase: the
// cancel flag rides on the creation's deadline (Deadline::cancelled_by), so
// every bounded wait of rendezvous, link setup and the split's exchanges
// notices it within 50 ms and ends with kAborted.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "communicator/communicator.h"

namespace omniccl {

class PendingComm {
 public:
  /// Starts Communicator::create(spec, config) in the background.
  static std::unique_ptr<PendingComm> init(const bootstrap::RendezvousSpec& spec, const CommConfig& config);
  /// Queues parent.split(color, key, config) as an asynchronous operation on
  /// parent. The parent must outlive it (its abort fails the queued split).
  static std::unique_ptr<PendingComm> split(Communicator& parent, int color, int key, const CommConfig& config);

  /// Cancels (see cancel()) if still running.
  ~PendingComm();
  PendingComm(const PendingComm&) = delete;
  PendingComm& operator=(const PendingComm&) = delete;

  /// kInProgress while running; then kSuccess with `out` set (nullptr for a
  /// split's OCCL_SPLIT_NOCOLOR), or the error with `message`.
  Status poll(std::shared_ptr<Communicator>& out, std::string& message);

  /// Ends the creation promptly: sets the cancel flag and waits until the
  /// background work has stopped and released what it made. A split that
  /// was cancelled leaves its parent unusable (as any failed operation).
  void cancel();

 private:
  /// What the background work and the handle share (the work may finish
  /// after the handle is gone).
  struct State {
    std::atomic<bool> cancel{false};
    std::atomic<bool> done{false};
    std::mutex mu;
    Status status = Status::kInProgress;
    std::string message;
    std::shared_ptr<Communicator> result;
    /// Records the outcome; a result made after cancel is dropped.
    void finish(Status st, std::string msg, std::shared_ptr<Communicator> comm);
  };
  PendingComm() : state_(std::make_shared<State>()) {}

  std::shared_ptr<State> state_;
  std::thread thread_;          ///< init
  std::shared_ptr<Work> work_;  ///< split
};

}  // namespace omniccl
