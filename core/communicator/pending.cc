#include "communicator/pending.h"

#include <new>

namespace omniccl {

void PendingComm::State::finish(Status st, std::string msg, std::shared_ptr<Communicator> comm) {
  std::shared_ptr<Communicator> dropped;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (cancel.load(std::memory_order_acquire) && st == Status::kSuccess) {
      // Finished just as it was cancelled: nobody will take it.
      dropped = std::move(comm);
      st = Status::kAborted;
      msg = "aborted while the communicator was being created";
    }
    status = st;
    message = std::move(msg);
    result = std::move(comm);
  }
  done.store(true, std::memory_order_release);
  // `dropped` is destroyed here, outside the lock.
}

std::unique_ptr<PendingComm> PendingComm::init(const bootstrap::RendezvousSpec& spec, const CommConfig& config) {
  std::unique_ptr<PendingComm> p(new PendingComm());
  p->thread_ = std::thread([state = p->state_, spec, config] {
    try {
      state->finish(Status::kSuccess, "", Communicator::create(spec, config, &state->cancel));
    } catch (const Error& e) {
      state->finish(e.status(), e.what(), nullptr);
    } catch (const std::bad_alloc&) {
      state->finish(Status::kOutOfMemory, "out of memory while creating the communicator", nullptr);
    } catch (const std::exception& e) {
      state->finish(Status::kInternal, str_cat("internal error: ", e.what()), nullptr);
    }
  });
  return p;
}

std::unique_ptr<PendingComm> PendingComm::split(Communicator& parent, int color, int key, const CommConfig& config) {
  config.validate();
  std::unique_ptr<PendingComm> p(new PendingComm());
  Communicator* comm = &parent;  // alive while its own operation runs
  p->work_ = parent.submit(
      [state = p->state_, comm, color, key, config](Engine&) {
        state->finish(Status::kSuccess, "", comm->split_in_op(color, key, config, &state->cancel));
      },
      true);
  return p;
}

PendingComm::~PendingComm() { cancel(); }

Status PendingComm::poll(std::shared_ptr<Communicator>& out, std::string& message) {
  if (work_ && work_->done() && !state_->done.load(std::memory_order_acquire)) {
    // The split operation failed before it could record a result.
    state_->finish(work_->status(), work_->message(), nullptr);
  }
  if (!state_->done.load(std::memory_order_acquire)) return Status::kInProgress;
  std::lock_guard<std::mutex> lock(state_->mu);
  out = state_->result;
  message = state_->message;
  return state_->status;
}

void PendingComm::cancel() {
  state_->cancel.store(true, std::memory_order_release);
  // init: the thread notices the flag within one bounded wait (<= 50 ms);
  // split: the queued operation notices it when it runs, and holds the state
  // itself, so nothing waits for it here.
  if (thread_.joinable()) thread_.join();
}

}  // namespace omniccl
