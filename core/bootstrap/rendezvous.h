// Parsing init methods, the environment of launchers, and unique ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"

namespace omniccl::bootstrap {

/// Where ranks meet, and who they are.
struct RendezvousSpec {
  enum class Kind { kTcp, kFile, kUniqueId };
  Kind kind = Kind::kTcp;
  std::string host;    ///< kTcp, kUniqueId
  uint16_t port = 0;   ///< kTcp, kUniqueId
  std::string path;    ///< kFile: directory
  uint64_t token = 0;  ///< kUniqueId: random session token (key prefix)
  /// The job token every store and mesh connection proves: kUniqueId: the
  /// 32 random bytes carried in the id; else OMNICCL_JOB_TOKEN ("" = none).
  std::string secret;
  int rank = -1;
  int world_size = -1;
  /// kTcp: why port differs from MASTER_PORT ("" when it does not).
  std::string port_note;
};

/// Parses "env://", "tcp://host:port" or "file:///path" together with an
/// explicit rank and world size (-1 = take from the environment: RANK/
/// WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE, SLURM_PROCID/
/// SLURM_NTASKS, first pair found). env:// takes host and port from
/// MASTER_ADDR/MASTER_PORT. Validates 0 <= rank < world_size and names the
/// offending value and its source in an Error(kInvalidArgument).
RendezvousSpec parse_init_method(const std::string& init_method, int rank, int world_size);

/// Bytes of an encoded unique id (== OCCL_UNIQUE_ID_BYTES).
inline constexpr size_t kUniqueIdBytes = 128;

/// Creates a unique id: starts a TCP store server that lives until the
/// process exits, and encodes its address with a random token into out.
void create_unique_id(char out[kUniqueIdBytes]);

/// Decodes and validates a unique id (magic, version, lengths); throws
/// Error(kInvalidArgument) for garbage. Sets kind, host, port, token.
RendezvousSpec decode_unique_id(const char in[kUniqueIdBytes], int rank, int world_size);

class Store;
class TcpStoreServer;
class StoreHeartbeat;

/// Where ranks meet, for messages: "tcp://host:port", "file:///dir" or
/// "unique id (tcp://host:port)".
std::string rendezvous_address(const RendezvousSpec& spec);

/// This job's identity, checked at rendezvous so that a rank never joins
/// another job's rendezvous: OMNICCL_JOB_ID (omniccl-run sets it), else the
/// launcher's (TORCHELASTIC_RUN_ID unless "none", SLURM_JOB_ID.SLURM_STEP_ID,
/// OMPI_MCA_ess_base_jobid), else "" (no identity known).
std::string job_id();

/// A failed rendezvous told to ranks of its job that arrive after it
/// (failure_notice.cc): rank 0 leaves a note on its host (nothing without a
/// job identity); a rank that finds no server looks for its job's note for
/// `port` younger than its deadline; a server that starts removes its
/// port's notes.
void leave_failure_note(uint16_t port, const std::string& why);
std::optional<std::string> find_failure_note(uint16_t port, int64_t younger_than_ms);
void remove_failure_notes(uint16_t port);

/// Starts rank 0's TCP rendezvous server on spec.host:spec.port. A port that
/// is taken is reported as such, with how to choose another.
std::unique_ptr<TcpStoreServer> start_rendezvous_server(const RendezvousSpec& spec);

/// Connects to the TCP store of spec, reporting (WARN) after a few seconds and
/// then periodically that rank 0's server has not answered yet; the deadline
/// is unchanged.
std::unique_ptr<Store> connect_rendezvous(const RendezvousSpec& spec, Deadline deadline, int64_t timeout_ms);

/// join() found the rendezvous server of an earlier communicator on this
/// address (same job, already completed, or closing): right after a destroy,
/// rank 0 may not have closed its previous server yet. The caller
/// reconnects and joins again for a short while before reporting it.
class StaleRendezvous : public Error {
 public:
  using Error::Error;
};

/// The waiting part of a rendezvous, shared by the ranks through `store`
/// under `prefix`. Ranks join by claiming their number (key "claim/R").
/// Every wait reports the ranks still missing after a few seconds and then
/// periodically (WARN), and ends at `deadline` with an error naming them.
/// Rank 0 publishes a failure ("failed") so that the ranks waiting on its
/// server report the real cause, not a closed connection.
class RendezvousWait {
 public:
  RendezvousWait(Store& store, std::string prefix, const RendezvousSpec& spec, Deadline deadline, int64_t timeout_ms);
  /// Closes the watch connection: if finish_watch() was not called, the
  /// other members are told that this rank left.
  ~RendezvousWait();
  /// Checks the job identity (rank 0 sets it) and that the rendezvous has not
  /// already completed, then claims this rank's number. Throws
  /// StaleRendezvous (ranks other than 0, TCP) for a completed rendezvous of
  /// this job or a server that closed the connection.
  void join();
  /// Waits for `key` (under the prefix) and returns its value.
  std::string get(const std::string& key);
  /// Rank 0, TCP: marks the rendezvous as completed so that a latecomer (a
  /// rank of another job on the same port) is told at once.
  void mark_completed();

  /// TCP stores (tcp://, env://, unique id): opens a second connection to
  /// the server, kept open while this rank sets up, on which the server is
  /// asked to publish "rank R (pid P on H) left" when it closes (the process
  /// exited, was killed, or gave up), and which carries this rank's
  /// heartbeat (bootstrap/liveness.h): "... stopped responding" when it goes
  /// silent. file://: this rank's liveness mark was made when it joined.
  void watch_members();
  /// Throws Error(kPeerFailure) naming a member that left (its watch
  /// connection closed, or its file:// mark was released) or stopped
  /// responding (heartbeat), rank 0's server that stopped answering, or rank
  /// 0's failure notice. Asks the store at most every 250 ms; called while
  /// waiting for keys and during link setup. server_may_close: the setup
  /// barrier, where rank 0 may already be done and its server closed; that
  /// is not an error there.
  void check_members(bool server_may_close = false);
  /// The phase named when this rank stops responding: "rendezvous" until
  /// every address is read, then "link setup".
  void set_phase(const std::string& phase);
  /// Setup succeeded: cancels this rank's departure notice and closes the
  /// watch connection (so an orderly exit is not reported as a failure).
  void finish_watch();

 private:
  void join_once();
  [[noreturn]] void fail_timeout(const std::string& key);
  std::vector<int> missing_ranks();
  void report_progress();
  void check_failure_notice();
  /// Checks that need no request (a stopped server, an abort); run while
  /// requests wait too (Store::set_wait_check).
  void check_local() const;
  /// file://: throws naming a claimed member whose liveness mark says it
  /// died or stopped.
  void check_marks();
  /// "rank R (pid P on HOST)"
  std::string describe_self() const;

  Store& store_;
  std::string prefix_;
  const RendezvousSpec& spec_;
  Deadline deadline_;
  int64_t timeout_ms_;
  Clock::time_point start_;
  Clock::time_point next_report_;
  std::unique_ptr<Store> watch_;  ///< the connection whose closing tells the others
  Clock::time_point next_check_{};
  int64_t heartbeat_timeout_ms_;  ///< OMNICCL_SETUP_HEARTBEAT_TIMEOUT (0: off)
  std::string phase_ = "rendezvous";
  std::unique_ptr<StoreHeartbeat> heartbeat_;  ///< on watch_
  bool marked_ = false;                        ///< file://: this rank's mark is up
};

/// A whole rendezvous, from connecting to tidying up: what a communicator's
/// creation needs from bootstrap. Rank 0 of tcp:// starts the store server;
/// every rank connects (or opens the file store), claims its number, and all
/// agree on a session number; exchange() then all-gathers one blob per rank
/// (the mesh's addresses) and finish() marks the rendezvous completed and
/// removes this rank's keys so that a file:// directory can be reused.
class Rendezvous {
 public:
  /// Connects and joins; throws like RendezvousWait (missing ranks named).
  Rendezvous(const RendezvousSpec& spec, Deadline deadline, int64_t timeout_ms);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  /// The number every rank of this job agreed on (rank 0 drew it).
  uint64_t session() const { return session_; }
  /// The address this rank's TCP links listen on: the local address that
  /// reaches the rendezvous host (127.0.0.1 for file://), or
  /// OMNICCL_SOCKET_ADDR when set.
  const std::string& local_ip() const { return local_ip_; }
  /// All-gathers `blob` through the store: every rank's, in rank order.
  /// Throws Error(kMismatch) when a rank was started with another world size.
  std::vector<std::string> exchange(const std::string& blob);
  /// Throws Error(kPeerFailure) naming a member that died since it joined
  /// (RendezvousWait::check_members); for the mesh's waits during setup.
  void check_members(bool server_may_close = false);
  /// Marks the rendezvous completed, removes this rank's keys (best effort)
  /// and closes the store connection. Call once everyone has read
  /// everything (after the mesh's barrier).
  void finish();
  /// The TCP store server (rank 0 of tcp://, else null); it must live as
  /// long as the job so that latecomers of another job are told whose
  /// rendezvous they found.
  std::unique_ptr<TcpStoreServer> release_server();

 private:
  const RendezvousSpec& spec_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<Store> store_;
  std::string prefix_ = "omniccl/";
  std::string local_ip_ = "127.0.0.1";
  std::unique_ptr<RendezvousWait> wait_;
  uint64_t session_ = 0;
};

/// A random 64-bit number, never 0 (sessions, tokens).
uint64_t random_u64();

}  // namespace omniccl::bootstrap
