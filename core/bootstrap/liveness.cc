#include "bootstrap/liveness.h"

#include "bootstrap/store.h"
#include "bootstrap/util.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/status.h"

namespace omniccl::bootstrap {

StoreHeartbeat::StoreHeartbeat(Store& conn, std::string key, std::string notice_prefix, std::string server,
                               std::string address, int64_t timeout_ms, std::string phase)
    : conn_(conn),
      key_(std::move(key)),
      notice_prefix_(std::move(notice_prefix)),
      server_(std::move(server)),
      address_(std::move(address)),
      timeout_ms_(timeout_ms),
      phase_(std::move(phase)) {
  // A stop() ends a wait for an answer at once.
  conn_.set_wait_check([this] {
    if (stopping_.load(std::memory_order_acquire)) fail(Status::kAborted, "heartbeat stopped");
  });
  thread_ = std::thread([this] { run(); });
}

StoreHeartbeat::~StoreHeartbeat() { stop(); }

void StoreHeartbeat::set_phase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = phase;
}

std::string StoreHeartbeat::notice() const {
  std::lock_guard<std::mutex> lock(mu_);
  return str_cat(notice_prefix_, " stopped responding during ", phase_, " of the communicator at ", address_,
                 ": no heartbeat for ", timeout_ms_,
                 " ms while its connection stayed open (the process is stopped (SIGSTOP, a debugger), hung, or "
                 "its host is frozen; OMNICCL_SETUP_HEARTBEAT_TIMEOUT)");
}

void StoreHeartbeat::check() const {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  fail(Status::kPeerFailure, verdict_);
}

void StoreHeartbeat::run() {
  const auto interval = std::chrono::milliseconds(setup_heartbeat_interval_ms(timeout_ms_));
  for (;;) {
    try {
      std::string who = conn_.heartbeat(key_, notice(), timeout_ms_, Deadline::after_ms(timeout_ms_));
      std::lock_guard<std::mutex> lock(mu_);
      server_identity_ = std::move(who);
    } catch (const Error& e) {
      if (stopping_.load(std::memory_order_acquire)) return;
      std::lock_guard<std::mutex> lock(mu_);
      if (e.status() == Status::kTimeout) {
        verdict_ = str_cat(server_, server_identity_.empty() ? std::string() : str_cat(" (", server_identity_, ")"),
                           ", which serves the rendezvous at ", address_, ", stopped responding during ", phase_,
                           ": no answer to this rank's heartbeat for ", timeout_ms_,
                           " ms while its connection stayed open (the process is stopped (SIGSTOP, a debugger), "
                           "hung, or its host is frozen; OMNICCL_SETUP_HEARTBEAT_TIMEOUT)");
        failed_.store(true, std::memory_order_release);
        OCCL_LOG(kWarn, kBootstrap, verdict_);
      }
      // A closed connection: the server went away, which the rank's own
      // requests report (with the rest of the context).
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, interval, [&] { return stop_; })) return;
  }
}

void StoreHeartbeat::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  stopping_.store(true, std::memory_order_release);
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Closing the connection ends the server's watch of it.
  conn_.set_wait_check({});
}

void end_member_watch(Store& conn, const std::string& key, std::unique_ptr<StoreHeartbeat> heartbeat) {
  try {
    conn.set_on_close(key, "");
  } catch (const Error&) {}
  heartbeat.reset();
}

}  // namespace omniccl::bootstrap
