// Liveness while a communicator is created: telling a stopped rank from a
// slow one.
//
// A process stopped with SIGSTOP (or hung, or on a frozen VM) keeps its
// sockets open and its kernel still acknowledges TCP, so only an
// application-level heartbeat shows it. While a rank sets up, a thread of
// its own sends one every `interval` (setup_heartbeat_interval_ms in
// common/settings.h: five per timeout, at most one a second) on
// the rank's second connection to the rendezvous server (the watch
// connection); the server publishes the rank's notice once that connection
// has been silent for the timeout, and the rank itself concludes that the
// server stopped when a heartbeat gets no answer within the timeout.
//
// The heartbeat comes from a thread that does nothing else and sleeps in
// between, so a rank that is merely slow (many ranks per core, sanitizers)
// still sends it: being slow is not being stopped. A process whose threads
// are all stopped sends nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/time.h"

namespace omniccl::bootstrap {

class Store;

/// The heartbeat thread of one rank on its watch connection `conn` (used by
/// nothing else while the heartbeat runs).
class StoreHeartbeat {
 public:
  /// Starts the thread. `key`: where the server publishes `notice(phase)`
  /// when this rank goes silent; `server`: how to name the server's process
  /// in messages ("rank 0", "the process that created the unique id");
  /// `address`: the rendezvous address, for messages.
  StoreHeartbeat(Store& conn, std::string key, std::string notice_prefix, std::string server, std::string address,
                 int64_t timeout_ms, std::string phase);
  /// Stops the thread (stop()).
  ~StoreHeartbeat();
  StoreHeartbeat(const StoreHeartbeat&) = delete;
  StoreHeartbeat& operator=(const StoreHeartbeat&) = delete;

  /// The phase named in this rank's notice from now on ("link setup").
  void set_phase(const std::string& phase);
  /// Throws Error(kPeerFailure) naming the server's process once a heartbeat
  /// got no answer within the timeout (it stopped responding).
  void check() const;
  /// Ends the thread promptly (also while it waits for an answer). The
  /// server watches the connection until it closes.
  void stop();

 private:
  void run();
  std::string notice() const;

  Store& conn_;
  const std::string key_;
  const std::string notice_prefix_;  ///< "rank 2 (pid P on H)"
  const std::string server_;
  const std::string address_;
  const int64_t timeout_ms_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
  std::string phase_;
  std::string server_identity_;  ///< "pid P on HOST", from the first answer
  std::string verdict_;          ///< set once the server stopped answering
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

/// Ends a member's watch after a setup that succeeded: cancels the departure
/// notice `key` registered (set_on_close) on `conn`, then stops `heartbeat`
/// (may be null). The cancel waits for a heartbeat in flight to be answered,
/// so the connection stays in step: stopping first would abandon that
/// heartbeat, drop the connection and so publish the notice, reporting a
/// rank that finished as gone (seen on a lossy network, where an answer can
/// take a retransmission). A failed cancel is ignored (the connection is
/// gone, and with it the notice is out).
void end_member_watch(Store& conn, const std::string& key, std::unique_ptr<StoreHeartbeat> heartbeat);

}  // namespace omniccl::bootstrap
