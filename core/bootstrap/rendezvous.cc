// Init-method parsing, launcher environments, and unique ids.
//
// Unique id layout (kUniqueIdBytes = 128, integers little endian):
//
//   offset size  field
//        0    8  magic "OCCLUID1"
//        8    2  version (2)
//       10    2  TCP port of the store server (non-zero)
//       12    8  random session token (non-zero)
//       20    1  host length n (1..75)
//       21    n  host (printable ASCII, no spaces)
//     21+n  ...  zero padding up to offset 96 (checked: garbage rarely has it)
//       96   32  the job secret: random bytes; the store server and every
//                mesh connection of this id's ranks require proof of it
//                (HMAC challenge-response, never sent itself)
#include "bootstrap/rendezvous.h"

#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "bootstrap/liveness.h"
#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"
#include "bootstrap/util.h"
#include "common/net.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/sha256.h"
#include "common/status.h"

namespace omniccl::bootstrap {

namespace {

constexpr char kUidMagic[8] = {'O', 'C', 'C', 'L', 'U', 'I', 'D', '1'};
constexpr uint16_t kUidVersion = 2;
constexpr size_t kUidHostOffset = 21;
constexpr size_t kUidSecretOffset = 96;
constexpr size_t kUidSecretBytes = kUniqueIdBytes - kUidSecretOffset;
constexpr size_t kUidMaxHost = kUidSecretOffset - kUidHostOffset;

/// A launcher's pair of rank and size variables.
struct EnvPair {
  const char* rank;
  const char* size;
};

/// Launcher environments, in the order they are consulted.
constexpr EnvPair kEnvPairs[] = {
    {"RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
};

/// The integer in environment variable `name` (value `text`).
int env_int(const char* name, const std::string& text) {
  auto v = detail::parse_int64(text);
  if (!v) {
    fail(Status::kInvalidArgument, name, "='", detail::printable(text), "' is not an integer");
  }
  if (*v < INT_MIN || *v > INT_MAX) {
    fail(Status::kInvalidArgument, name, "='", detail::printable(text), "' is out of range");
  }
  return static_cast<int>(*v);
}

/// Parses a TCP port (1..65535); `what` names where the text came from.
uint16_t parse_port(const std::string& text, const std::string& what) {
  auto v = detail::parse_int64(text);
  if (!v || *v < 1 || *v > 65535) {
    fail(Status::kInvalidArgument, what, " '", detail::printable(text), "' is not a port number (1..65535)");
  }
  return static_cast<uint16_t>(*v);
}

/// Fills spec->rank and spec->world_size from the arguments, taking -1 from
/// the first launcher environment present, and validates them.
void resolve_rank(int rank, int world_size, RendezvousSpec* spec) {
  std::string rank_src = "given by the caller";
  std::string size_src = "given by the caller";
  if (rank == -1 || world_size == -1) {
    const EnvPair* found = nullptr;
    for (const auto& p : kEnvPairs) {
      if (get_setting(p.rank) || get_setting(p.size)) {
        found = &p;
        break;
      }
    }
    if (found == nullptr) {
      fail(Status::kInvalidArgument, rank == -1 ? "rank" : "world size",
           " was not given and none of RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/"
           "OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS is set; "
           "pass rank and world size explicitly or start the program with a launcher "
           "(omniccl-run, torchrun, mpirun, srun)");
    }
    if (rank == -1) {
      auto v = get_setting(found->rank);
      if (!v) {
        fail(Status::kInvalidArgument, found->size, " is set but ", found->rank,
             " is not; set both or pass the rank explicitly");
      }
      rank = env_int(found->rank, *v);
      rank_src = str_cat("from ", found->rank);
    }
    if (world_size == -1) {
      auto v = get_setting(found->size);
      if (!v) {
        fail(Status::kInvalidArgument, found->rank, " is set but ", found->size,
             " is not; set both or pass the world size explicitly");
      }
      world_size = env_int(found->size, *v);
      size_src = str_cat("from ", found->size);
    }
  }
  if (world_size < 1) {
    fail(Status::kInvalidArgument, "world size ", world_size, " (", size_src, ") must be at least 1");
  }
  if (rank < 0 || rank >= world_size) {
    fail(Status::kInvalidArgument, "rank ", rank, " (", rank_src, ") is outside world size ", world_size, " (",
         size_src, "); valid ranks are 0..", world_size - 1);
  }
  spec->rank = rank;
  spec->world_size = world_size;
}

/// Splits "host:port" / "[v6]:port" of a tcp:// init method.
void parse_host_port(const std::string& init_method, const std::string& rest, RendezvousSpec* spec) {
  std::string host;
  std::string port_text;
  const std::string usage = "; expected tcp://host:port (IPv6: tcp://[::1]:29500)";
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      fail(Status::kInvalidArgument, "init method '", init_method, "' has no port after the bracketed address", usage);
    }
    host = rest.substr(1, close - 1);
    port_text = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos) {
      fail(Status::kInvalidArgument, "init method '", init_method, "' has no port", usage);
    }
    host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      fail(Status::kInvalidArgument, "init method '", init_method, "': an IPv6 address needs brackets", usage);
    }
  }
  if (host.empty()) {
    fail(Status::kInvalidArgument, "init method '", init_method, "' has no host", usage);
  }
  spec->host = host;
  spec->port = parse_port(port_text, str_cat("port in init method '", init_method, "':"));
}

/// Writes the unique id of (host, port, token) into out.
void encode_unique_id(const std::string& host, uint16_t port, uint64_t token, const std::string& secret, char* out) {
  check_arg(!host.empty() && host.size() <= kUidMaxHost, "address '", host, "' does not fit in a unique id (at most ",
            kUidMaxHost, " bytes)");
  std::memset(out, 0, kUniqueIdBytes);
  std::memcpy(out, kUidMagic, sizeof kUidMagic);
  wire::put_le(out + 8, kUidVersion, 2);
  wire::put_le(out + 10, port, 2);
  wire::put_le(out + 12, token, 8);
  out[20] = static_cast<char>(host.size());
  std::memcpy(out + kUidHostOffset, host.data(), host.size());
  std::memcpy(out + kUidSecretOffset, secret.data(), kUidSecretBytes);
}

/// The first non-loopback IPv4 address the host name resolves to, or "".
std::string primary_address() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return {};
  int gai_err = 0;
  for (const auto& a : net::resolve(name, 1, /*passive=*/false, &gai_err)) {
    std::string text = net::address_text(a.sa());
    if (a.family == AF_INET && !detail::is_loopback_name(text)) return text;
  }
  return {};
}

/// Keeps the unique-id store servers alive until the process exits.
struct UidServers {
  std::mutex mu;
  std::vector<std::unique_ptr<TcpStoreServer>> servers;
};

/// The process-wide list of unique-id servers.
UidServers& uid_servers() {
  static UidServers s;
  return s;
}

/// First progress report after this long, then one every kReportEvery.
constexpr auto kFirstReport = std::chrono::seconds(5);
constexpr auto kReportEvery = std::chrono::seconds(30);
/// A waiting rank looks for rank 0's failure notice this often.
constexpr auto kSlice = std::chrono::seconds(1);
/// How long rank 0 keeps its server up after publishing a failure, at most.
constexpr auto kNoticeLinger = std::chrono::milliseconds(2500);

/// "0, 2, 3"
std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += str_cat(out.empty() ? "" : ", ", r);
  return out;
}

/// Whole seconds since `t`.
int64_t seconds_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t).count();
}

}  // namespace

RendezvousSpec parse_init_method(const std::string& init_method, int rank, int world_size) {
  RendezvousSpec spec;
  if (init_method == "env://") {
    auto addr = get_setting("MASTER_ADDR");
    if (!addr) {
      fail(Status::kInvalidArgument,
           "MASTER_ADDR is not set; env:// needs MASTER_ADDR (the rendezvous host, e.g. the "
           "address of rank 0) and MASTER_PORT");
    }
    auto port = get_setting("MASTER_PORT");
    if (!port) {
      fail(Status::kInvalidArgument,
           "MASTER_PORT is not set; env:// needs MASTER_ADDR and MASTER_PORT (a free TCP port "
           "on MASTER_ADDR, e.g. 29500)");
    }
    spec.kind = RendezvousSpec::Kind::kTcp;
    spec.host = *addr;
    if (spec.host.size() >= 2 && spec.host.front() == '[' && spec.host.back() == ']') {
      spec.host = spec.host.substr(1, spec.host.size() - 2);
    }
    spec.port = parse_port(*port, "MASTER_PORT");
    // Plain torchrun (static rendezvous) starts its agent's TCP store on
    // MASTER_PORT and tells the workers so; rank 0 cannot listen there, and
    // the agent store speaks torch's protocol. The rendezvous then uses the
    // next port, the same on every node (several nodes included).
    auto agent_store = get_setting("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && (*agent_store == "True" || *agent_store == "true" || *agent_store == "1")) {
      const uint16_t master = spec.port;
      spec.port = master < 65535 ? static_cast<uint16_t>(master + 1) : static_cast<uint16_t>(master - 1);
      spec.port_note =
          str_cat("MASTER_PORT ", master, " is torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=", *agent_store,
                  "), so the rendezvous uses port ", spec.port);
    }
  } else if (init_method.rfind("tcp://", 0) == 0) {
    spec.kind = RendezvousSpec::Kind::kTcp;
    parse_host_port(init_method, init_method.substr(6), &spec);
  } else if (init_method.rfind("file://", 0) == 0) {
    spec.kind = RendezvousSpec::Kind::kFile;
    spec.path = init_method.substr(7);
    if (spec.path.empty() || spec.path.front() != '/') {
      fail(Status::kInvalidArgument, "init method '", init_method,
           "' needs an absolute path, like file:///shared/dir/rendezvous (three slashes)");
    }
  } else {
    fail(Status::kInvalidArgument, "unknown init method '", init_method,
         "'; use env://, tcp://host:port or file:///path");
  }
  resolve_rank(rank, world_size, &spec);
  spec.secret = get_setting("OMNICCL_JOB_TOKEN").value_or("");
  return spec;
}

void create_unique_id(char out[kUniqueIdBytes]) {
  std::unique_ptr<TcpStoreServer> server;
  std::string host;
  const Digest random = random_nonce();
  const std::string secret(reinterpret_cast<const char*>(random.data()), kUidSecretBytes);
  detail::raise_open_file_limit();
  const StoreLimits limits = StoreLimits::from_environment(0);
  if (auto configured = get_setting("OMNICCL_SOCKET_ADDR")) {
    host = *configured;  // an explicit choice: failing to bind it is an error
    server = std::make_unique<TcpStoreServer>(host, 0, limits, &secret);
  } else {
    host = primary_address();
    if (!host.empty()) {
      try {
        server = std::make_unique<TcpStoreServer>(host, 0, limits, &secret);
      } catch (const Error& e) {
        OCCL_LOG(kInfo, kBootstrap, "unique id: ", e.what(), "; using 127.0.0.1");
      }
    }
    if (!server) {
      host = "127.0.0.1";
      server = std::make_unique<TcpStoreServer>(host, 0, limits, &secret);
    }
  }
  const uint64_t token = random_u64();
  encode_unique_id(host, server->port(), token, secret, out);
  OCCL_LOG(kInfo, kBootstrap, "unique id: store server on ", detail::host_port(host, server->port()));
  UidServers& s = uid_servers();
  std::lock_guard<std::mutex> lock(s.mu);
  s.servers.push_back(std::move(server));
}

RendezvousSpec decode_unique_id(const char in[kUniqueIdBytes], int rank, int world_size) {
  check_arg(in != nullptr, "unique id is NULL");
  const std::string garbage = "unique id is invalid: ";
  if (std::memcmp(in, kUidMagic, sizeof kUidMagic) != 0) {
    fail(Status::kInvalidArgument, garbage, "bad magic (not produced by occl_get_unique_id, or corrupted in transit)");
  }
  const uint64_t version = wire::get_le(in + 8, 2);
  if (version != kUidVersion) {
    fail(Status::kInvalidArgument, garbage, "version ", version, " is not supported (expected ", kUidVersion,
         "; are all ranks using the same OmniCCL version?)");
  }
  const auto port = static_cast<uint16_t>(wire::get_le(in + 10, 2));
  const uint64_t token = wire::get_le(in + 12, 8);
  const size_t host_len = static_cast<unsigned char>(in[20]);
  if (port == 0) fail(Status::kInvalidArgument, garbage, "port is 0");
  if (token == 0) fail(Status::kInvalidArgument, garbage, "token is 0");
  if (host_len == 0 || host_len > kUidMaxHost) {
    fail(Status::kInvalidArgument, garbage, "host length ", host_len, " is outside 1..", kUidMaxHost);
  }
  for (size_t i = 0; i < host_len; ++i) {
    auto c = static_cast<unsigned char>(in[kUidHostOffset + i]);
    if (c <= 0x20 || c >= 0x7f) {
      fail(Status::kInvalidArgument, garbage, "host contains a non-printable byte");
    }
  }
  for (size_t i = kUidHostOffset + host_len; i < kUidSecretOffset; ++i) {
    if (in[i] != 0) fail(Status::kInvalidArgument, garbage, "padding is not zero");
  }
  RendezvousSpec spec;
  spec.kind = RendezvousSpec::Kind::kUniqueId;
  spec.host.assign(in + kUidHostOffset, host_len);
  spec.port = port;
  spec.token = token;
  spec.secret.assign(in + kUidSecretOffset, kUidSecretBytes);
  resolve_rank(rank, world_size, &spec);
  return spec;
}

std::string rendezvous_address(const RendezvousSpec& spec) {
  switch (spec.kind) {
    case RendezvousSpec::Kind::kTcp: return "tcp://" + detail::host_port(spec.host, spec.port);
    case RendezvousSpec::Kind::kFile: return "file://" + spec.path;
    case RendezvousSpec::Kind::kUniqueId: return "unique id (tcp://" + detail::host_port(spec.host, spec.port) + ")";
  }
  return "?";
}

std::string job_id() {
  if (auto v = get_setting("OMNICCL_JOB_ID")) return *v;
  if (auto v = get_setting("TORCHELASTIC_RUN_ID"); v && *v != "none") return "torchrun:" + *v;
  if (auto v = get_setting("SLURM_JOB_ID")) {
    auto step = get_setting("SLURM_STEP_ID");
    return str_cat("slurm:", *v, ".", step ? *step : std::string());
  }
  if (auto v = get_setting("OMPI_MCA_ess_base_jobid")) return "ompi:" + *v;
  return {};
}

std::unique_ptr<TcpStoreServer> start_rendezvous_server(const RendezvousSpec& spec) {
  try {
    auto server = std::make_unique<TcpStoreServer>(spec.host, spec.port, StoreLimits::from_environment(spec.world_size),
                                                   &spec.secret);
    remove_failure_notes(spec.port);  // an earlier run's failure is no news now
    return server;
  } catch (const Error& e) {
    if (std::string(e.what()).find(std::strerror(EADDRINUSE)) == std::string::npos) throw;
    const std::string port = std::to_string(spec.port);
    fail(e.status(), "rank 0 cannot start the rendezvous server: port ", port, " on ", spec.host,
         " is already in use (another job, or another program, listens there",
         spec.port_note.empty() ? "" : str_cat("; ", spec.port_note), "). Give this job a free port: ",
         spec.port_note.empty()
             ? str_cat("MASTER_PORT=<another port> for env://, tcp://", spec.host, ":<another port>, ")
             : "torchrun --master-port <another port>, ",
         "or start it with omniccl-run, which picks a free port. [", e.what(), "]");
  }
}

std::unique_ptr<Store> connect_rendezvous(const RendezvousSpec& spec, Deadline deadline, int64_t timeout_ms) {
  const auto start = Clock::now();
  auto next_report = start + kFirstReport;
  for (;;) {
    Deadline slice = Deadline::min(deadline, Deadline(next_report));
    // In slices of a second: between them, a note that this job's rendezvous
    // failed before this rank arrived ends the wait (failure_notice.cc).
    const bool late_may_learn = spec.kind == RendezvousSpec::Kind::kTcp && spec.rank != 0;
    if (late_may_learn) slice = Deadline::min(slice, Deadline::after_ms(1000));
    try {
      return connect_tcp_store(spec.host, spec.port, slice, &spec.secret);
    } catch (const Error& e) {
      if (e.status() != Status::kTimeout) throw;
      if (std::optional<std::string> why = late_may_learn ? find_failure_note(spec.port, timeout_ms) : std::nullopt) {
        fail(Status::kPeerFailure, "the rendezvous at ", rendezvous_address(spec), " failed before rank ", spec.rank,
             " arrived, and rank 0 has left: ", *why);
      }
      if (Clock::now() < next_report && !deadline.expired()) continue;
      if (deadline.expired()) {
        fail(Status::kTimeout, "rendezvous timed out after ", timeout_ms, " ms: rank ", spec.rank, " of ",
             spec.world_size, " could not reach the rendezvous server at ", rendezvous_address(spec),
             " (served by rank 0", spec.kind == RendezvousSpec::Kind::kUniqueId ? ", the unique id's creator" : "",
             "): it did not start, or MASTER_ADDR/MASTER_PORT differ between ranks. [", e.what(), "]");
      }
      OCCL_LOG(kWarn, kBootstrap, "rank ", spec.rank, " of ", spec.world_size, ": waiting ", seconds_since(start),
               " s for the rendezvous server at ", rendezvous_address(spec),
               " (rank 0 has not started it yet); giving up after ", timeout_ms / 1000, " s (OMNICCL_TIMEOUT)");
      next_report = Clock::now() + kReportEvery;
    }
  }
}

RendezvousWait::RendezvousWait(Store& store, std::string prefix, const RendezvousSpec& spec, Deadline deadline,
                               int64_t timeout_ms)
    : store_(store),
      prefix_(std::move(prefix)),
      spec_(spec),
      deadline_(deadline),
      timeout_ms_(timeout_ms),
      start_(Clock::now()),
      next_report_(start_ + kFirstReport),
      heartbeat_timeout_ms_(setup_heartbeat_timeout_ms()) {}

RendezvousWait::~RendezvousWait() {
  // A rank that fails keeps its notices: the others are told it left.
  heartbeat_.reset();
  store_.set_wait_check([deadline = deadline_] { (void)deadline.expired(); });
}

std::string RendezvousWait::describe_self() const {
  char host[256] = {};
  (void)gethostname(host, sizeof host - 1);
  return str_cat("rank ", spec_.rank, " (pid ", ::getpid(), " on ", host, ")");
}

void RendezvousWait::watch_members() {
  store_.set_wait_check([this] { check_local(); });
  if (spec_.kind == RendezvousSpec::Kind::kFile) return;
  watch_ = connect_tcp_store(spec_.host, spec_.port, deadline_, &spec_.secret);
  watch_->set_on_close(prefix_ + "left", str_cat(describe_self(), " left during the setup of ", "the communicator at ",
                                                 rendezvous_address(spec_),
                                                 ": its connection to the rendezvous server closed (the process "
                                                 "exited, was killed, or gave up)"));
  if (heartbeat_timeout_ms_ > 0) {
    const bool uid = spec_.kind == RendezvousSpec::Kind::kUniqueId;
    heartbeat_ = std::make_unique<StoreHeartbeat>(*watch_, prefix_ + "left", describe_self(),
                                                  uid ? "the process that created the unique id" : "rank 0",
                                                  rendezvous_address(spec_), heartbeat_timeout_ms_, phase_);
  }
}

void RendezvousWait::set_phase(const std::string& phase) {
  phase_ = phase;
  if (heartbeat_) heartbeat_->set_phase(phase);
}

void RendezvousWait::check_local() const {
  if (heartbeat_) heartbeat_->check();
  (void)deadline_.expired();  // throws kAborted once the creation is cancelled
}

void RendezvousWait::finish_watch() {
  if (marked_) {
    marked_ = false;
    try {
      store_.unmark_alive(str_cat(prefix_, "alive/", spec_.rank));
    } catch (const Error&) {}
  }
  if (!watch_) {
    heartbeat_.reset();
    return;
  }
  end_member_watch(*watch_, prefix_ + "left", std::move(heartbeat_));
  watch_.reset();
}

void RendezvousWait::check_marks() {
  for (int q = 0; q < spec_.world_size; ++q) {
    if (q == spec_.rank || !store_.check(str_cat(prefix_, "claim/", q))) continue;
    const Store::MarkState st = store_.probe_mark(str_cat(prefix_, "alive/", q), heartbeat_timeout_ms_);
    if (st.kind == Store::MarkState::Kind::kAlive) continue;
    const std::string why =
        st.kind == Store::MarkState::Kind::kDied
            ? str_cat(st.who, " left during the setup of the communicator at ", rendezvous_address(spec_),
                      ": its liveness lock in the directory was released (the process exited, was killed, or gave "
                      "up)")
            : str_cat(st.who, " stopped responding during the setup of the communicator at ", rendezvous_address(spec_),
                      ": its liveness mark was not refreshed for ", heartbeat_timeout_ms_,
                      " ms (the process is stopped (SIGSTOP, a debugger), hung, or its host is frozen; "
                      "OMNICCL_SETUP_HEARTBEAT_TIMEOUT)");
    OCCL_LOG(kWarn, kBootstrap, "rank ", spec_.rank, " of ", spec_.world_size, ": ", why);
    finish_watch();
    fail(Status::kPeerFailure, why);
  }
}

void RendezvousWait::check_members(bool server_may_close) {
  check_local();
  if (Clock::now() < next_check_) return;
  next_check_ = Clock::now() + std::chrono::milliseconds(250);
  if (spec_.kind == RendezvousSpec::Kind::kFile) {
    check_marks();
    return;
  }
  std::string why;
  try {
    check_failure_notice();
    if (!store_.check(prefix_ + "left")) return;
    why = store_.get(prefix_ + "left", Deadline::after_ms(5000));  // it is there
  } catch (const Error& e) {
    // In the setup barrier every peer may be done, rank 0's server closed
    // with its setup; a peer that died there closes its control socket.
    if (!server_may_close || e.status() != Status::kPeerFailure) throw;
    check_local();  // but a server that stopped answering is still news
    return;
  }
  OCCL_LOG(kWarn, kBootstrap, "rank ", spec_.rank, " of ", spec_.world_size, ": ", why);
  // This rank fails too: its own departure is no news to the others.
  finish_watch();
  if (spec_.rank == 0 && spec_.kind == RendezvousSpec::Kind::kTcp) {
    // The ranks still waiting read the notice from this server: keep it up
    // until they have (each looks at least every 250 ms), or briefly.
    try {
      int waiting = -2;  // neither rank 0 nor the one that left
      for (int q = 0; q < spec_.world_size; ++q) waiting += store_.check(str_cat(prefix_, "claim/", q)) ? 1 : 0;
      const auto until = Clock::now() + kNoticeLinger;
      while (Clock::now() < until && store_.add(prefix_ + "left_seen", 0) < waiting) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    } catch (const Error&) {}
    leave_failure_note(spec_.port, why);
  } else {
    try {
      (void)store_.add(prefix_ + "left_seen", 1);
    } catch (const Error&) {}
  }
  fail(Status::kPeerFailure, why);
}

void RendezvousWait::join() {
  try {
    join_once();
  } catch (const StaleRendezvous&) {
    throw;
  } catch (const Error& e) {
    if (e.status() == Status::kPeerFailure && spec_.rank != 0 && spec_.kind == RendezvousSpec::Kind::kTcp) {
      throw StaleRendezvous(e.status(), e.what());
    }
    throw;
  }
}

void RendezvousWait::join_once() {
  // A unique id's token already identifies its job.
  const std::string mine = spec_.kind == RendezvousSpec::Kind::kUniqueId ? std::string() : job_id();
  auto another_job = [&](const std::string& theirs) {
    fail(Status::kInvalidArgument, "the rendezvous at ", rendezvous_address(spec_), " belongs to another job (job id '",
         detail::printable(theirs), "', this rank's is '", detail::printable(mine),
         "'): two jobs share one rendezvous address; give each job its own port ",
         "(MASTER_PORT), or start them with omniccl-run, which picks a free port");
  };
  if (spec_.rank == 0) {
    store_.set(prefix_ + "job", mine);
  } else if (store_.check(prefix_ + "completed")) {
    // A latecomer, most likely of another job: say so at once.
    if (store_.check(prefix_ + "job")) {
      std::string theirs = store_.get(prefix_ + "job", Deadline::after_ms(5000));
      if (theirs != mine) another_job(theirs);
    }
    throw StaleRendezvous(
        Status::kInvalidArgument,
        str_cat("the rendezvous at ", rendezvous_address(spec_), " has already completed without rank ", spec_.rank,
                ": another job is using this address (two jobs on one MASTER_PORT?), or this rank was started late; "
                "give each job its own port, or start it with omniccl-run, which picks a free port"));
  } else {
    std::string theirs = get("job");
    if (theirs != mine) another_job(theirs);
  }
  if (spec_.kind == RendezvousSpec::Kind::kFile) {
    // The liveness mark goes up before the claim: a claimed member's
    // mark is either held or its holder is gone.
    store_.mark_alive(str_cat(prefix_, "alive/", spec_.rank), describe_self(),
                      setup_heartbeat_interval_ms(heartbeat_timeout_ms_));
    marked_ = true;
  }
  if (store_.add(str_cat(prefix_, "claim/", spec_.rank), 1) > 1) {
    fail(Status::kInvalidArgument, "rank ", spec_.rank, " of ", spec_.world_size,
         " was claimed by more than one process (duplicate rank, or a rendezvous left over from an earlier job)");
  }
}

std::vector<int> RendezvousWait::missing_ranks() {
  std::vector<int> missing;
  for (int q = 0; q < spec_.world_size; ++q) {
    if (!store_.check(str_cat(prefix_, "claim/", q))) missing.push_back(q);
  }
  return missing;
}

void RendezvousWait::report_progress() {
  next_report_ = Clock::now() + kReportEvery;
  std::vector<int> missing = missing_ranks();
  if (missing.empty()) return;  // everyone is there; the rest is quick
  OCCL_LOG(kWarn, kBootstrap, "rank ", spec_.rank, " of ", spec_.world_size, ": waiting ", seconds_since(start_),
           " s at the rendezvous ", rendezvous_address(spec_), " for rank(s) ", join_ranks(missing),
           " to join; giving up after ", timeout_ms_ / 1000, " s (OMNICCL_TIMEOUT)");
}

void RendezvousWait::check_failure_notice() {
  if (spec_.rank == 0 || !store_.check(prefix_ + "failed")) return;
  std::string why = store_.get(prefix_ + "failed", Deadline::after_ms(5000));  // it is there
  (void)store_.add(prefix_ + "failed_seen", 1);
  fail(Status::kTimeout, why, " [reported by rank 0]");
}

void RendezvousWait::fail_timeout(const std::string& key) {
  // Every member waits for the same deadline: this rank's giving up is not
  // news to report as a departure.
  finish_watch();
  std::vector<int> missing = missing_ranks();
  std::string why = missing.empty() ? str_cat("rendezvous at ", rendezvous_address(spec_), " timed out after ",
                                              timeout_ms_, " ms waiting for '", key, "'")
                                    : str_cat("rendezvous at ", rendezvous_address(spec_), " timed out after ",
                                              timeout_ms_, " ms: rank(s) ", join_ranks(missing), " of world size ",
                                              spec_.world_size, " did not join");
  if (spec_.rank == 0 && spec_.kind == RendezvousSpec::Kind::kTcp) {
    // Tell the ranks waiting on this server why it is about to go away, and
    // give them a moment to read it (each looks once per kSlice).
    try {
      store_.set(prefix_ + "failed", why);
      const int waiting = spec_.world_size - static_cast<int>(missing.size()) - 1;
      const auto until = Clock::now() + kNoticeLinger;
      while (Clock::now() < until && store_.add(prefix_ + "failed_seen", 0) < waiting) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    } catch (const Error&) {}
  }
  fail(Status::kTimeout, why);
}

std::string RendezvousWait::get(const std::string& key) {
  for (;;) {
    Deadline slice = Deadline::min(deadline_, Deadline(std::min(next_report_, Clock::now() + kSlice)));
    try {
      return store_.get(prefix_ + key, slice);
    } catch (const Error& e) {
      if (e.status() == Status::kPeerFailure && spec_.rank != 0) {
        check_local();  // the server stopped answering: say that, not "went away"
        const bool uid = spec_.kind == RendezvousSpec::Kind::kUniqueId;
        fail(Status::kPeerFailure, uid ? "the process that created the unique id" : "rank 0",
             ", which serves the rendezvous at ", rendezvous_address(spec_), ", went away while rank ", spec_.rank,
             " waited for '", key, "' (it exited, was killed, or gave up): ", e.what());
      }
      if (e.status() != Status::kTimeout) throw;
    }
    // Only a wait that lasts looks for rank 0's notice and reports progress:
    // the usual rendezvous costs one request per key.
    check_failure_notice();
    check_members();
    if (deadline_.expired()) fail_timeout(key);
    if (Clock::now() >= next_report_) report_progress();
  }
}

void RendezvousWait::mark_completed() {
  if (spec_.rank == 0 && spec_.kind == RendezvousSpec::Kind::kTcp) store_.set(prefix_ + "completed", "1");
}

uint64_t random_u64() {
  std::random_device rd;
  uint64_t t = 0;
  while (t == 0) t = (uint64_t{rd()} << 32) ^ uint64_t { rd() };
  return t;
}

namespace {

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Rendezvous::Rendezvous(const RendezvousSpec& spec, Deadline deadline, int64_t timeout_ms) : spec_(spec) {
  detail::raise_open_file_limit();  // before the server sizes its quotas from it
  switch (spec.kind) {
    case RendezvousSpec::Kind::kTcp:
      if (spec.rank == 0) server_ = start_rendezvous_server(spec);
      store_ = connect_rendezvous(spec, deadline, timeout_ms);
      local_ip_ = local_address_towards(spec.host, spec.port);
      break;
    case RendezvousSpec::Kind::kUniqueId:
      store_ = connect_rendezvous(spec, deadline, timeout_ms);
      local_ip_ = local_address_towards(spec.host, spec.port);
      prefix_ = str_cat("uid/", hex(spec.token), "/");
      break;
    case RendezvousSpec::Kind::kFile: store_ = open_file_store(spec.path); break;
  }
  if (auto v = get_setting("OMNICCL_SOCKET_ADDR")) local_ip_ = *v;
  // Every request ends promptly once the creation is cancelled (abort).
  store_->set_wait_check([deadline] { (void)deadline.expired(); });

  // Same job, not completed yet, and a rank number may be claimed once.
  // Right after a destroy, a rank may find rank 0's previous server still
  // up (completed, or closing): it reconnects for a moment before failing.
  // (A server that went away for good is reported as it was, after 3 s.)
  const auto grace_end = Clock::now() + std::chrono::seconds(3);
  for (;;) {
    wait_ = std::make_unique<RendezvousWait>(*store_, prefix_, spec, deadline, timeout_ms);
    std::exception_ptr stale;
    try {
      wait_->join();
      break;
    } catch (const StaleRendezvous&) {
      if (Clock::now() >= grace_end || deadline.expired()) throw;
      stale = std::current_exception();
    }
    wait_.reset();
    store_.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    try {
      store_ = connect_rendezvous(spec, Deadline::min(deadline, Deadline(grace_end)), timeout_ms);
      store_->set_wait_check([deadline] { (void)deadline.expired(); });
    } catch (const Error& e) {
      if (e.status() == Status::kTimeout && !deadline.expired()) std::rethrow_exception(stale);
      throw;
    }
  }
  wait_->watch_members();  // a member that dies during setup is named within a second
  if (spec.rank == 0) {
    session_ = random_u64();
    store_->set(prefix_ + "session", hex(session_));
  } else {
    const std::string text = wait_->get("session");
    char* end = nullptr;
    session_ = std::strtoull(text.c_str(), &end, 16);
    if (text.empty() || end != text.c_str() + text.size() || session_ == 0) {
      fail(Status::kInternal, "the rendezvous at ", rendezvous_address(spec), " holds a malformed session number '",
           detail::printable(text), "'");
    }
  }
}

Rendezvous::~Rendezvous() = default;

std::vector<std::string> Rendezvous::exchange(const std::string& blob) {
  const int n = spec_.world_size;
  store_->set(str_cat(prefix_, "addr/", spec_.rank), str_cat(n, "|", blob));
  std::vector<std::string> all(n);
  for (int p = 0; p < n; ++p) {
    std::string v = wait_->get(str_cat("addr/", p));
    const auto bar = v.find('|');
    const auto their_n = detail::parse_int64(v.substr(0, bar));
    if (bar == std::string::npos || !their_n) {
      fail(Status::kInternal, "the rendezvous at ", rendezvous_address(spec_),
           " holds a malformed address record for rank ", p);
    }
    if (*their_n != n) {
      fail(Status::kMismatch, "world size ", n, " on rank ", spec_.rank, " but rank ", p,
           " was started with world size ", *their_n);
    }
    all[p] = v.substr(bar + 1);
  }
  // Every rank has joined and published; none can finish (and come back on
  // this address) before rank 0 sends its ready, after this.
  wait_->mark_completed();
  wait_->set_phase("link setup");
  return all;
}

void Rendezvous::check_members(bool server_may_close) { wait_->check_members(server_may_close); }

void Rendezvous::finish() {
  wait_->finish_watch();
  // Everyone has read everything (the mesh ends with a barrier): tidy up, so
  // a file:// directory can be reused.
  try {
    store_->erase(str_cat(prefix_, "addr/", spec_.rank));
    store_->erase(str_cat(prefix_, "claim/", spec_.rank));
    if (spec_.rank == 0) {
      store_->erase(prefix_ + "session");
      // A TCP server lives as long as this job: its job id stays, so that a
      // rank of another job is told whose rendezvous it found.
      if (spec_.kind == RendezvousSpec::Kind::kFile) store_->erase(prefix_ + "job");
    }
  } catch (const Error&) {}
  wait_.reset();
  store_.reset();
}

std::unique_ptr<TcpStoreServer> Rendezvous::release_server() { return std::move(server_); }

}  // namespace omniccl::bootstrap
