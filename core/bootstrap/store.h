// Key-value stores used only while communicators are created (rendezvous).
//
// A Store is shared by all ranks of one rendezvous: TCP (one rank or the
// unique-id creator serves it) or a directory on a shared file system.
// Every wait is bounded by a Deadline; messages on the wire are validated
// (magic, version, lengths) so a stray client cannot crash the server.
#pragma once

#include <cstdint>
#include <memory>
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
};

/// Serves a TCP store from a background thread until destroyed.
class TcpStoreServer {
 public:
  /// Binds host:port (port 0 picks a free one). Throws Error(kSystem) with
  /// the address if binding fails.
  TcpStoreServer(const std::string& host, uint16_t port);
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
/// start later). Throws Error(kTimeout) naming host:port.
std::unique_ptr<Store> connect_tcp_store(const std::string& host, uint16_t port, Deadline deadline);

/// A store in directory `dir` (created if missing): one file per key,
/// written atomically (temp file + rename).
std::unique_ptr<Store> open_file_store(const std::string& dir);

/// The local IP address (text) a TCP connection to host:port would leave
/// from; used to advertise a reachable listening address. Falls back to
/// "127.0.0.1" when host is a loopback name.
std::string local_address_towards(const std::string& host, uint16_t port);

}  // namespace omniccl::bootstrap
