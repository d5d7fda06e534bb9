// File descriptors handed between processes of one host (SCM_RIGHTS over an
// abstract unix socket): how the CUDA IPC transport gives peers the POSIX
// file descriptor of memory from CUDA's virtual memory API (cuMemCreate),
// which, unlike a cudaIpcMemHandle_t, cannot travel as text in a record.
//
// The exchange, on a connection to an FdServer's socket:
//   connector -> server   : "OCFD", the offer's id (8 bytes, host order)
//   server    -> connector: "OCOK" with the descriptor attached, or "OCNO"
//                           (no such offer), then the server closes.
// Who may take a descriptor: the server asks the kernel who connected
// (SO_PEERCRED) and answers only the processes it was told to trust (the
// communicator's peers on this host, by pid, as the endpoint exchange named
// them; that exchange itself proves the job's token) running as its own
// user. Anyone else is closed on without a byte, whatever it knows. The
// connector checks in turn that the socket's owner is the process it expects,
// so a stranger that took the socket's name cannot hand it a descriptor of
// its own. The name carries random bytes, so it cannot be taken in advance.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "common/time.h"

namespace omniccl::transport {

/// Offers descriptors to trusted processes of this host, on a thread of its
/// own that only waits in poll() between connections.
class FdServer {
 public:
  /// Listens on a fresh abstract unix socket; answers only processes whose
  /// pid is in `trusted` and whose uid is this process's.
  explicit FdServer(std::vector<pid_t> trusted);
  /// Stops the thread and closes every descriptor still offered.
  ~FdServer();
  FdServer(const FdServer&) = delete;
  FdServer& operator=(const FdServer&) = delete;

  /// The socket's abstract name (without the leading '@'), for fetch_fd.
  const std::string& name() const { return name_; }
  /// Offers `fd` under a new id (returned) until withdraw_all.
  uint64_t offer(UniqueFd fd);
  /// Closes every offered descriptor: connectors asking for them get "OCNO".
  void withdraw_all();
  /// Connections closed unanswered because of who made them (tests, the log).
  int strangers() const { return strangers_.load(); }

 private:
  void serve();
  void answer(UniqueFd conn);

  std::vector<pid_t> trusted_;
  std::string name_;
  UniqueFd listener_;
  UniqueFd stop_;  ///< an eventfd: written once to end the thread
  std::mutex mu_;
  std::map<uint64_t, UniqueFd> offers_;
  uint64_t next_id_ = 0;
  std::atomic<int> strangers_{0};
  std::thread thread_;
};

/// Takes offer `id` from the FdServer whose socket is `name` and which must
/// belong to process `owner`. Throws Error(kPeerFailure) when the owner
/// closed the connection or is not who answers, kInvalidArgument when it has
/// no such offer, kTimeout at the deadline. `tick` (may be empty; may throw:
/// a check that the owner is still alive) runs at least every 100 ms while
/// it waits. `what` names the exchange in messages.
UniqueFd fetch_fd(const std::string& name, pid_t owner, uint64_t id, Deadline deadline,
                  const std::function<void()>& tick, const std::string& what);

}  // namespace omniccl::transport
