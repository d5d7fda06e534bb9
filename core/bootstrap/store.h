// Key-value stores used only while communicators are created (rendezvous).
//
// A Store is shared by all ranks of one rendezvous: TCP (one rank or the
// unique-id creator serves it) or a directory on a shared file system.
// Every wait is bounded by a Deadline; messages on the wire are validated
// (magic, version, lengths) so a stray client cannot crash the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/time.h"

namespace omniccl::bootstrap {

class Store {
 public:
  virtual ~Store() = default;
  /// Sets key to value (overwrites an existing value).
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// Waits until key exists and returns its value. Throws Error(kTimeout)
  /// naming the key when the deadline passes, Error(kPeerFailure) if the
  /// server went away.
  virtual std::string get(const std::string& key, Deadline deadline) = 0;
  /// Atomically adds delta to the decimal integer at key (absent = 0) and
  /// returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// Whether key exists now (does not wait).
  virtual bool check(const std::string& key) = 0;
  /// Removes key if present.
  virtual void erase(const std::string& key) = 0;
  /// Asks the store to set key = value when this client's connection closes
  /// (the process exited or was killed); value "" cancels. Stores without
  /// connections (file://) do not support it: kInvalidArgument.
  virtual void set_on_close(const std::string& key, const std::string& value);

  // Liveness during setup (bootstrap/liveness.h uses these).

  /// TCP stores: tells the server that this connection's member is alive,
  /// and asks it to set key = notice if the connection then stays silent for
  /// silence_ms (0: stop watching). Returns the server process's
  /// "pid P on HOST". Bounded by deadline (Error(kTimeout): the server did
  /// not answer). Other stores: kInvalidArgument.
  virtual std::string heartbeat(const std::string& key, const std::string& notice, int64_t silence_ms,
                                Deadline deadline);
  /// A check run at least every 100 ms while a request waits (TCP: for the
  /// server's reply; file: for a key); it may throw to end the wait. It must
  /// not use this store. Empty: none.
  virtual void set_wait_check(std::function<void()> check);
  /// File stores: holds a mark under key, with `who` ("rank 2 (pid P on H)"),
  /// that other processes can test with probe_mark() while this store lives, and
  /// refreshes it every `interval_ms` (for a silence check). Others: no-op.
  virtual void mark_alive(const std::string& key, const std::string& who, int64_t interval_ms);
  /// Removes this process's mark (an orderly end: not reported as gone).
  virtual void unmark_alive(const std::string& key);
  /// What probe_mark() found.
  struct MarkState {
    enum class Kind { kAlive, kDied, kStopped } kind = Kind::kAlive;
    std::string who;  ///< the holder's `who` (kDied, kStopped)
  };
  /// File stores: kDied when the holder of the mark under key is gone (its
  /// mark is left but no longer held), kStopped when it holds the mark but
  /// has not refreshed it for silence_ms (> 0; measured by this object's
  /// clock), else kAlive (also when there is no mark: never made, or
  /// removed at an orderly end). Others: kAlive.
  virtual MarkState probe_mark(const std::string& key, int64_t silence_ms);
};

/// What one TCP store server lets its clients use. A client that goes over
/// a limit is refused (kError reply to a set) or dropped (buffered input,
/// silence), logged, and the job goes on.
struct StoreLimits {
  /// Connections served at once; further ones are closed at accept.
  /// 0: max(2 x world size + 16, min(4096, half the open-file limit)):
  /// each rank holds two while it sets up (requests, and the watch whose
  /// closing tells the others it left).
  size_t max_connections = 0;
  /// Bytes of stored keys and values, all clients together; unprocessed
  /// input of all connections has the same limit of its own.
  uint64_t max_total_bytes = uint64_t{256} << 20;
  /// The same two limits for one connection (what it last wrote, and what
  /// it has sent that is not processed yet).
  uint64_t max_client_bytes = uint64_t{80} << 20;
  /// A connection must complete its first request, and any message it has
  /// started, within this time (a connection waiting for a key is exempt).
  int64_t idle_timeout_ms = 10000;
  /// Connections open at once that have proven nothing yet (no request
  /// completed; with a job token, no proof of it): when one more arrives,
  /// the oldest of them is closed. 0: max(8, min(1024, an eighth of the
  /// open-file limit)), so that idle strangers can never hold more than an
  /// eighth of the server process's descriptors.
  size_t max_pending = 0;
  /// A connection that has proven nothing within this time is closed (the
  /// shorter of this and idle_timeout_ms applies).
  int64_t handshake_timeout_ms = 5000;

  /// Defaults overridden by OMNICCL_STORE_MAX_CONNECTIONS,
  /// OMNICCL_STORE_MAX_PENDING, OMNICCL_STORE_MAX_BYTES and
  /// OMNICCL_STORE_IDLE_TIMEOUT, for a job of
  /// `world_size` ranks (0 = unknown).
  static StoreLimits from_environment(int world_size);
};

/// Serves a TCP store from a background thread until destroyed.
class TcpStoreServer {
 public:
  /// Binds host:port (port 0 picks a free one). Throws Error(kSystem) with
  /// the address if binding fails.
  /// `token`: the job token clients must prove; nullptr = OMNICCL_JOB_TOKEN
  /// (unset: no authentication).
  TcpStoreServer(const std::string& host, uint16_t port, StoreLimits limits = StoreLimits::from_environment(0),
                 const std::string* token = nullptr);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  /// The port actually bound.
  uint16_t port() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Connects to a TCP store, retrying until the deadline (the server may
/// start later). Throws Error(kTimeout) naming host:port. A request other
/// than a get that the server leaves unanswered for
/// OMNICCL_SETUP_HEARTBEAT_TIMEOUT + 2 s (a live server answers at once)
/// fails with Error(kPeerFailure): the server's process stopped. `token`: the job
/// token to prove; nullptr = OMNICCL_JOB_TOKEN (unset: none).
std::unique_ptr<Store> connect_tcp_store(const std::string& host, uint16_t port, Deadline deadline,
                                         const std::string* token = nullptr);

/// A store in directory `dir` (created if missing): one file per key,
/// written atomically (temp file + rename).
std::unique_ptr<Store> open_file_store(const std::string& dir);

/// The local IP address (text) a TCP connection to host:port would leave
/// from; used to advertise a reachable listening address. Falls back to
/// "127.0.0.1" when host is a loopback name.
std::string local_address_towards(const std::string& host, uint16_t port);

}  // namespace omniccl::bootstrap
