#include "transport/mesh.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <span>
#include <sstream>

#include "common/cpus.h"
#include "common/gpu_runtime.h"
#include "common/log.h"
#include "common/net.h"
#include "transport/auth.h"
#include "transport/control_wire.h"
#include "transport/mesh_liveness.h"
#include "transport/registry.h"

namespace omniccl::transport {

namespace {

constexpr char kSep = '\x1f';
using wire::Hello;
using wire::kHelloMagic;

// Control message types (one byte) followed by a 4-byte payload length.
constexpr char kDoorbell = 'D';
constexpr char kError = 'E';
constexpr char kBye = 'B';
// How long a destroyed communicator waits for its peers to acknowledge its
// last bytes (net::finish_sending); only a stopped or unreachable peer that
// stopped reading makes it wait this long.
constexpr int kGoodbyeLingerMs = 5000;
constexpr char kQuery = 'Q';
constexpr char kAnswer = 'A';
constexpr char kReady = 'R';
constexpr char kHeartbeat = 'H';  // mesh_liveness.cc
/// A connection to a setup listener must deliver its hello within this time
/// (peers send it right after connecting), whatever the operation deadline.
constexpr int64_t kHandshakeTimeoutMs = 5000;
/// At most this many accepted connections may be mid-hello at once.
constexpr size_t kMaxPendingHandshakes = 64;

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string link_target(const char* path) {
  char buf[256];
  ssize_t n = ::readlink(path, buf, sizeof buf - 1);
  if (n <= 0) return "?";
  return std::string(buf, static_cast<size_t>(n));
}

std::string hostname() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return host;
}

/// Processes that share this id can share memory and abstract unix sockets.
std::string host_identity() {
  return str_cat(hostname(), "|", read_first_line("/proc/sys/kernel/random/boot_id"), "|",
                 link_target("/proc/self/ns/ipc"), "|", link_target("/proc/self/ns/net"));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << std::hex << v;
  return os.str();
}

/// connect_to calling opts.check_peers at least every 100 ms while it waits:
/// a peer that died before it accepted is reported by the check rather than
/// by the deadline.
UniqueFd connect_checked(const net::SocketAddress& addr, const MeshOptions& opts) {
  return net::connect_to(addr, opts.deadline, opts.check_peers);
}

}  // namespace

struct Mesh::Peer {
  int rank = -1;
  int pid = 0;
  std::string hostname;
  bool same_host = false;
  UniqueFd ctrl;
  std::string inbuf;
  bool departed = false;  // sent BYE: destroyed its communicator
  bool closed = false;    // control socket at EOF (after BYE, or not: failed)
  bool failed = false;    // control socket at EOF without BYE: exited, killed or aborted
  bool ready = false;
  bool device_window = false;  ///< its kReady said it mapped every rank's device memory
};

// What the parts of Mesh::create hand on to the next.
struct Mesh::Setup {
  const MeshOptions& opts;
  std::string own_cpus;  // this rank's CPUs (cpus::affinity_text), read once
  UniqueFd unix_listener, tcp_listener;
  std::vector<Endpoint> remote;                // by rank (this rank's own record too)
  std::vector<Transport*> transport;           // by peer
  std::vector<Transport*> device;              // by peer: its device transport, nullptr = staged
  std::vector<std::vector<UniqueFd>> data_fd;  // by peer: the sockets its transport asked for
  /// Sockets its transport asks for to peer p (Transport::sockets; at most
  /// kMaxLinkSockets, which hellos are checked against).
  int data_streams(int p) const {
    const int n = transport[size_t(p)]->sockets(remote[size_t(opts.rank)], remote[size_t(p)]);
    if (n < 0 || n > kMaxLinkSockets) {
      fail(Status::kInternal, transport[size_t(p)]->name(), " asks for ", n, " sockets to rank ", p);
    }
    return n;
  }
};

std::unique_ptr<Mesh> Mesh::create(const MeshOptions& opts, const AllGatherFn& exchange) {
  opts.transports.validate();
  std::unique_ptr<Mesh> m(new Mesh());
  m->rank_ = opts.rank;
  m->size_ = opts.size;
  m->wake_fd_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!m->wake_fd_.valid()) fail_errno("eventfd", errno);
  m->peers_.resize(opts.size);
  m->links_.resize(opts.size);
  m->answers_.resize(opts.size);
  std::string own_cpus = cpus::affinity_text();
  m->local_cpus_ = std::max(1, cpus::union_count(std::span(&own_cpus, 1)));
  if (opts.size == 1) return m;

  Setup s{opts, std::move(own_cpus), {}, {}, {}, {}, {}};
  m->exchange_endpoints(s, exchange);
  // Nothing shared is made before every record is in (a rank killed while
  // it waits for a late one leaves nothing in /dev/shm), and everything is
  // before a peer connects, since a peer opens it once connected.
  for (auto& t : m->transports_) {
    t->prepare();
    if (m->wake_word_ == nullptr) m->wake_word_ = t->wake_word();
  }
  m->make_host_block(s);
  m->connect_peers(s);
  m->accept_peers(s);
  m->make_links(s);
  m->open_host_block(s);
  m->open_device_window(s);
  std::vector<bool> on_block(size_t(opts.size), false);
  for (int p = 0; p < opts.size; ++p)
    on_block[size_t(p)] = p != opts.rank && s.transport[size_t(p)]->shares_host_memory();
  m->setup_notices(on_block, opts.host_shared_bytes);
  m->ready_barrier(opts.deadline, opts.check_ready ? opts.check_ready : opts.check_peers);
  m->agree_on_device_window();
  // Every peer has mapped what this rank made for it, so the names can go
  // (nothing is left in /dev/shm even if a rank dies later).
  for (auto& t : m->transports_) t->setup_done();
  if (m->host_block_) m->host_block_->unlink();
  return m;
}

// Listens, makes this rank's transports and their parts of its endpoint
// (a shared-memory segment's name unless another transport is forced).
Endpoint Mesh::own_endpoint(Setup& s) {
  const MeshOptions& opts = s.opts;
  const std::string session = hex(opts.session);
  Endpoint me;
  me.rank = opts.rank;
  me.pid = ::getpid();
  me.host_id = host_identity();
  me.hostname = hostname();
  me.cpus = s.own_cpus;
  me.gpu = gpu_in_use();
  me.slicing = opts.slicing;
  net::SocketAddress unix_addr, tcp_addr;
  s.unix_listener = net::listen_unix(str_cat("omniccl.", session, ".", opts.rank), unix_addr);
  s.tcp_listener = net::listen_tcp(opts.tcp_ip, tcp_addr);
  me.unix_addr = unix_addr.text;
  me.tcp_addr = tcp_addr.text;
  if (opts.host_shared_bytes > 0) me.host_block = shm_object_name(session, "host");
  transports_ = make_transports(opts.transports, TransportContext{opts.rank, opts.size, session}, opts.table);
  for (auto& t : transports_) {
    std::string part = t->part();
    if (!part.empty()) me.parts.emplace_back(t->name(), std::move(part));
  }
  return me;
}

// Swaps endpoints with every member and picks each peer's transport.
void Mesh::exchange_endpoints(Setup& s, const AllGatherFn& exchange) {
  const MeshOptions& opts = s.opts;
  const Endpoint me = own_endpoint(s);
  std::vector<std::string> all = exchange(me.encode());
  if (static_cast<int>(all.size()) != opts.size) {
    fail(Status::kInternal, "address exchange returned ", all.size(), " entries for ", opts.size, " ranks");
  }
  s.remote.resize(opts.size);
  s.remote[opts.rank] = me;  // data_streams() reads both records
  s.transport.resize(opts.size);
  s.device.resize(opts.size);
  const Transport* only = nullptr;  // the transport of every peer so far
  bool mixed = false;
  // CPUs of every host's ranks, from the records every rank got (this one's
  // decoded too, first in its host's list), so that all ranks agree.
  const std::string own_cpus = Endpoint::decode(all[opts.rank], opts.rank).cpus;
  any_gpu_ = me.gpu;
  std::map<std::string, std::vector<std::string>> cpus_by_host{{me.host_id, {own_cpus}}};
  for (int p = 0; p < opts.size; ++p) {
    if (p == opts.rank) continue;
    s.remote[p] = Endpoint::decode(all[p], p);
    any_gpu_ |= s.remote[p].gpu;
    add_peer(s, p);
    cpus_by_host[s.remote[p].host_id].push_back(s.remote[p].cpus);
    mixed |= only != nullptr && only != s.transport[p];
    only = s.transport[p];
  }
  transport_name_ = mixed ? "mixed" : only->name();
  note_cpus(me.host_id, own_cpus, cpus_by_host);
  adopt_slicing(me.slicing, s.remote[0].slicing);
}

// Every rank slices as rank 0 says, so that their slices' collectives match.
void Mesh::adopt_slicing(const StagedSlicing& own, const StagedSlicing& rank0) {
  slicing_ = rank0;
  if (own.slice_bytes != rank0.slice_bytes || own.gpu_reduce_bytes != rank0.gpu_reduce_bytes) {
    OCCL_LOG(kWarn, kTransport, "rank ", rank_, ": OMNICCL_STAGED_SLICE / OMNICCL_STAGED_GPU_REDUCE are ",
             own.slice_bytes, " / ", own.gpu_reduce_bytes, " here but ", rank0.slice_bytes, " / ",
             rank0.gpu_reduce_bytes, " on rank 0, whose settings every rank follows");
  }
}

// Peer p's record is in: its entry, and the transport to it (logged).
void Mesh::add_peer(Setup& s, int p) {
  const Endpoint& me = s.remote[size_t(rank_)];
  const Endpoint& e = s.remote[size_t(p)];
  auto peer = std::make_unique<Peer>();
  peer->rank = p;
  peer->pid = e.pid;
  peer->same_host = e.host_id == me.host_id;
  peer->hostname = e.hostname;
  local_size_ += peer->same_host;
  peers_[p] = std::move(peer);
  TransportChoice c = choose_transport(transports_, me, e, s.opts.transports.forced);
  s.transport[p] = c.transport;
  const int streams = s.data_streams(p);
  OCCL_LOG(kInfo, kTransport, "rank ", rank_, " -> rank ", p, ": ", c.transport->name(), " (", c.reason, ")",
           streams > 1 ? str_cat(", ", streams, " data streams") : std::string());
  TransportChoice d = choose_device_transport(transports_, me, e);
  s.device[p] = d.transport;
  OCCL_LOG(kInfo, kTransport, "rank ", rank_, " -> rank ", p, ": CUDA tensors ",
           d.transport ? str_cat("over ", d.transport->name()) : std::string("staged through host memory"), " (",
           d.reason, ")");
}

// CUDA tensors move directly only where every pair chose the same device
// transport: its operations need every rank's memory. A rank that cannot map
// a peer's memory (a container without the host's IPC namespace) stages
// instead, and says so in the ready barrier (agree_on_device_window).
void Mesh::open_device_window(Setup& s) {
  Transport* t = nullptr;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (s.device[size_t(p)] == nullptr || (t != nullptr && s.device[size_t(p)] != t)) return;
    t = s.device[size_t(p)];
  }
  if (t == nullptr) return;
  try {
    device_window_ = t->open_window(s.remote);
  } catch (const Error& e) {
    OCCL_LOG(kWarn, kTransport, t->name(), ": ", e.what(), "; CUDA tensors of this communicator are staged");
  }
}

// Every rank keeps its window only if every peer mapped all of them too.
void Mesh::agree_on_device_window() {
  if (!device_window_) return;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || peers_[p]->device_window) continue;
    OCCL_LOG(kInfo, kTransport, describe(p), " could not map every rank's GPU memory: CUDA tensors are staged");
    device_window_.reset();
    return;
  }
  OCCL_LOG(kInfo, kTransport, "CUDA tensors of this communicator move over ", device_window_->kind(), " between all ",
           size_, " ranks");
}

// How many CPUs this host's ranks have, and whether any host's ranks
// outnumber theirs (tuning may depend on it: judged alike on every rank).
void Mesh::note_cpus(const std::string& own_host, const std::string& own_cpus,
                     const std::map<std::string, std::vector<std::string>>& cpus_by_host) {
  local_cpus_ = std::max(1, cpus::union_count(cpus_by_host.at(own_host)));
  OCCL_LOG(kInfo, kTransport, local_size_, " rank(s) of this communicator on this host, on ", local_cpus_,
           " CPU(s) between them (this rank: ", own_cpus, ")",
           local_size_ > local_cpus_ ? ": more ranks than cores" : "");
  for (const auto& [host, lists] : cpus_by_host) {
    any_host_oversubscribed_ |= static_cast<int>(lists.size()) > std::max(1, cpus::union_count(lists));
  }
}

// The lowest-ranked of this rank and the peers it reaches through shared
// memory; -1 when there are no such peers.
int Mesh::host_leader_rank(const Setup& s) const {
  int leader = -1;
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && s.transport[size_t(p)]->shares_host_memory()) {
      leader = std::min(p, rank_);
      break;
    }
  }
  return leader;
}

void Mesh::make_host_block(Setup& s) {
  if (s.opts.host_shared_bytes == 0 || host_leader_rank(s) != rank_) return;
  host_block_ = SharedMapping::create(s.remote[size_t(rank_)].host_block,
                                      host_block_bytes(s.opts.host_shared_bytes, s.opts.size));
  host_leader_ = true;
}

// The leader made its block before it accepted any connection, and every
// member has connected to it (or been accepted by it) by now.
void Mesh::open_host_block(Setup& s) {
  const int leader = host_leader_rank(s);
  if (s.opts.host_shared_bytes == 0 || leader < 0 || leader == rank_) return;
  const std::string& name = s.remote[size_t(leader)].host_block;
  if (name.empty()) fail(Status::kInternal, "rank ", leader, " made no block for its host's ranks");
  const size_t bytes = host_block_bytes(s.opts.host_shared_bytes, s.opts.size);
  try {
    host_block_ = SharedMapping::open(name, bytes, bytes);
  } catch (const Error& e) {
    if (e.status() != Status::kPeerFailure) throw;
    fail(Status::kPeerFailure, "rank ", leader, " failed during link setup: ", e.what());
  }
}

// Lower ranks accept, higher ranks connect; connecting never waits for the
// accept (listen backlog), so the order cannot deadlock.
void Mesh::connect_peers(Setup& s) {
  const MeshOptions& opts = s.opts;
  s.data_fd.resize(opts.size);
  for (int p = 0; p < opts.size; ++p) s.data_fd[p].resize(size_t(p == opts.rank ? 0 : s.data_streams(p)));
  // Every hello goes out first, then the verdicts are read: one round trip
  // for all of them rather than one each (setup over a slow or lossy link).
  struct Out {
    int peer;
    uint32_t channel;  // 0 control, 1 + i data stream i
    net::SocketAddress addr;
    UniqueFd fd;
  };
  std::vector<Out> out;
  for (int p = 0; p < opts.rank; ++p) {
    const Endpoint& e = s.remote[p];
    out.push_back({p, 0, net::SocketAddress{peers_[p]->same_host ? e.unix_addr : e.tcp_addr}, UniqueFd()});
    for (int i = 0; i < s.data_streams(p); ++i) {
      out.push_back({p, uint32_t(1 + i), net::SocketAddress{e.tcp_addr}, UniqueFd()});
    }
  }
  auto hello_of = [&](const Out& o) { return Hello{kHelloMagic, o.channel, opts.session, opts.rank, 0}; };
  auto what_of = [&](const Out& o) { return str_cat("rank ", opts.rank, ": hello to rank ", o.peer); };
  for (Out& o : out) {
    o.fd = auth::connect_and_hello([&] { return connect_checked(o.addr, opts); }, hello_of(o), opts.token,
                                   opts.deadline, opts.check_peers, what_of(o));
  }
  for (Out& o : out) {
    if (auth::read_verdict(o.fd.get(), opts.deadline, opts.check_peers, what_of(o)) != auth::Verdict::kAccepted) {
      OCCL_LOG(kInfo, kTransport, what_of(o),
               ": the peer dropped the setup connection before accepting it (its handshake timeout passed: a slow or "
               "lossy network); connecting again");
      o.fd = auth::connect_hello([&] { return connect_checked(o.addr, opts); }, hello_of(o), opts.token, opts.deadline,
                                 opts.check_peers, what_of(o));
    }
    (o.channel == 0 ? peers_[o.peer]->ctrl : s.data_fd[o.peer][o.channel - 1]) = std::move(o.fd);
  }
}

// A connection accepted by a setup listener whose hello (and token proof)
// is still arriving, with its own short deadline.
struct Mesh::PendingHello {
  UniqueFd fd;
  Deadline until;
  auth::Responder auth;
};

// Every setup connection dropped is logged, with the reason.
void Mesh::log_dropped(const std::string& why) const {
  OCCL_LOG(kWarn, kTransport, "rank ", rank_, ": dropped a setup connection (", why,
           "; a stray client or another job)");
}

// Moves one pending connection on (its socket `readable` or not): kAccepted
// (it took its slot: a peer's control or data socket), kDropped (refused or
// timed out, logged), or kPending.
Mesh::HelloState Mesh::settle_hello(Setup& s, PendingHello& c, bool readable) {
  auth::Responder::State st = auth::Responder::State::kMore;
  if (readable) st = c.auth.on_readable();
  if (st == auth::Responder::State::kFailed) {
    auth::send_verdict(c.fd.get(), auth::kRefusedMagic);
    log_dropped(c.auth.why());
    return HelloState::kDropped;
  }
  if (st != auth::Responder::State::kDone) {
    if (!c.until.expired()) return HelloState::kPending;
    // A real rank on a slow link connects again when told.
    auth::send_verdict(c.fd.get(), auth::kTimedOutMagic);
    log_dropped("no complete hello within the handshake timeout");
    return HelloState::kDropped;
  }
  const Hello h = c.auth.hello();
  std::string why = wire::check_hello(h, s.opts.session, rank_, size_);
  // Without a token the hello's session id is all a connection proves, and
  // other users of this host can see it (segment and socket names): only this
  // user's processes of this host may connect then, as at the rendezvous.
  if (const std::optional<uid_t> uid = s.opts.token.empty() ? net::local_peer_uid(c.fd.get()) : std::nullopt;
      why.empty() && uid && *uid != ::geteuid()) {
    why = str_cat("a process of user ", *uid, " on this host (without a job token only this job's user's may connect)");
  }
  if (why.empty() && h.channel > s.data_fd[h.rank].size()) {
    why = str_cat("rank ", h.rank, " opened data stream ", h.channel, " of ", s.data_fd[h.rank].size());
  }
  if (!why.empty()) {
    auth::send_verdict(c.fd.get(), auth::kRefusedMagic);
    log_dropped("bad hello: " + why);
    return HelloState::kDropped;
  }
  UniqueFd& slot = h.channel == 0 ? peers_[h.rank]->ctrl : s.data_fd[h.rank][h.channel - 1];
  if (slot.valid()) fail(Status::kMismatch, "two processes connected as rank ", h.rank, " (duplicate rank)");
  auth::send_verdict(c.fd.get(), auth::kAcceptedMagic);
  slot = std::move(c.fd);
  return HelloState::kAccepted;
}

// Takes the connections of the higher ranks. Accepted connections whose
// hello is still arriving are read without blocking, next to the listeners,
// each with its own short deadline: a stray client that connects and closes,
// sends garbage, or sends half a hello and goes silent is dropped (and
// logged) without holding up the peers.
void Mesh::accept_peers(Setup& s) {
  const MeshOptions& opts = s.opts;
  int expected = 0;
  for (int p = opts.rank + 1; p < opts.size; ++p) expected += 1 + s.data_streams(p);
  std::vector<PendingHello> pending;
  uint64_t dropped_at_cap = 0;  // logged once, then counted (a flood would log each)
  while (expected > 0) {
    std::vector<pollfd> pfds = {{s.unix_listener.get(), POLLIN, 0}, {s.tcp_listener.get(), POLLIN, 0}};
    for (const auto& c : pending) pfds.push_back({c.fd.get(), POLLIN, 0});
    int r = ::poll(pfds.data(), pfds.size(), opts.deadline.remaining_ms(100));
    if (r < 0 && errno != EINTR) fail_errno("poll(listeners)", errno);
    for (size_t i = pending.size(); i-- > 0;) {  // back to front: erases
      const HelloState st = settle_hello(s, pending[i], pfds[2 + i].revents & (POLLIN | POLLHUP | POLLERR));
      if (st == HelloState::kPending) continue;
      expected -= st == HelloState::kAccepted;
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    }
    for (int l = 0; l < 2; ++l) {
      if (pfds[l].revents & POLLIN) take_connection(s, pfds[l].fd, pending, dropped_at_cap);
    }
    if (expected > 0 && opts.check_peers) opts.check_peers();
    if (expected > 0 && opts.deadline.expired()) {
      std::string missing;
      for (int p = opts.rank + 1; p < opts.size; ++p) {
        if (!peers_[p]->ctrl.valid()) missing += str_cat(missing.empty() ? "" : ", ", p);
      }
      fail(Status::kTimeout, "rank ", opts.rank, " timed out waiting for connections from rank(s) ", missing);
    }
  }
  if (dropped_at_cap > 1) {
    OCCL_LOG(kWarn, kTransport, "rank ", rank_, ": dropped ", dropped_at_cap, " setup connections in all with ",
             kMaxPendingHandshakes, " handshakes pending or out of descriptors (a stray client or another job)");
  }
}

// Accepts one connection to a setup listener into `pending`. At
// kMaxPendingHandshakes it is closed at once (counted in dropped, logged the
// first time); out of descriptors, the oldest pending one (a stranger's, or
// a peer's that then connects again) is closed to make room, and only a rank
// with none pending fails (its own descriptors are gone).
void Mesh::take_connection(Setup& s, int listen_fd, std::vector<PendingHello>& pending, uint64_t& dropped) {
  int err = 0;
  UniqueFd c = net::accept_now(listen_fd, &err);
  if (!c.valid()) {
    if (err != EMFILE && err != ENFILE) return;
    if (pending.empty()) fail_errno("accept", err);
    pending.erase(pending.begin());
    if (++dropped == 1) log_dropped("out of descriptors: the oldest pending handshake closed");
    return;
  }
  if (pending.size() >= kMaxPendingHandshakes) {
    if (++dropped == 1)
      log_dropped(str_cat(kMaxPendingHandshakes, " handshakes already pending; further ones counted"));
    return;
  }
  const int fd = c.get();
  pending.push_back(PendingHello{std::move(c), Deadline::min(s.opts.deadline, Deadline::after_ms(kHandshakeTimeoutMs)),
                                 auth::Responder(fd, s.opts.token)});
}

// Each peer's link from its transport.
void Mesh::make_links(Setup& s) {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    net::set_nonblocking(peers_[p]->ctrl.get());
    LinkSetup ls;
    ls.local = &s.remote[size_t(rank_)];
    ls.peer = &s.remote[size_t(p)];
    ls.sockets = std::move(s.data_fd[p]);
    ls.doorbell = [this, p] { doorbell(p); };
    links_[p] = s.transport[p]->connect(ls);
  }
}

// Every peer has made its links (and so mapped what this rank made for it).
void Mesh::ready_barrier(const Deadline& deadline, const std::function<void()>& check_peers) {
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) send_control(p, kReady, device_window_ ? "D" : "", false);
  }
  for (;;) {
    bool all = true;
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && !peers_[p]->ready) all = false;
    }
    if (all) break;
    if (deadline.expired()) fail(Status::kTimeout, "rank ", rank_, " timed out in the setup barrier");
    std::vector<pollfd> none;
    sleep(none, deadline.remaining_ms(100));
    throw_if_failed();
    // A peer that is ready may be done and gone already; one that is not
    // ready never will be.
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && !peers_[p]->ready && (peers_[p]->failed || peers_[p]->departed)) fail_departed(p);
    }
    bool still_waiting = false;
    for (int p = 0; p < size_; ++p) still_waiting |= p != rank_ && !peers_[p]->ready;
    if (still_waiting && check_peers) check_peers();
  }
}

Mesh::~Mesh() {
  stop_heartbeat();
  // An aborted communicator (occl_comm_abort) ends without goodbye: its peers
  // are told that it failed (its connections close without BYE), not that it
  // left in order. occl_comm_destroy says goodbye.
  if (no_goodbye_.load()) return;
  // A healthy communicator makes sure its goodbye and its last data arrive:
  // a peer still busy (a lossy link, a slower rank asking what this one does)
  // may send after this rank closes, and a TCP socket closed with unread
  // bytes is reset, losing what the peer had not yet received (the BYE among
  // it, so the peer would report a failure). A failed one only says goodbye.
  const bool healthy = pending_status_ == Status::kSuccess && (in_order_.load() || !aborted());
  std::vector<int> streams;
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && peers_[p] && peers_[p]->ctrl.valid() && !peers_[p]->closed) {
      try {
        send_control(p, kBye, "", !healthy);
      } catch (...) {}
      if (healthy) {
        streams.push_back(peers_[p]->ctrl.get());
        if (links_[p]) links_[p]->append_sockets(streams);
      }
    }
  }
  if (healthy) net::finish_sending(streams, Deadline::after_ms(kGoodbyeLingerMs));
}

std::string Mesh::describe(int peer) const {
  if (peer < 0 || peer >= size_ || !peers_[peer]) return str_cat("rank ", peer);
  return str_cat("rank ", peer, " (pid ", peers_[peer]->pid, " on ", peers_[peer]->hostname, ")");
}

void Mesh::throw_if_failed() {
  if (aborted()) fail(Status::kAborted, "the communicator was aborted");
  if (foreign_failed_.load(std::memory_order_acquire)) [[unlikely]]
    adopt_foreign_failure();
  if (pending_status_ == Status::kSuccess) return;
  if (pending_remote_) throw PeerReportedError(pending_status_, pending_message_);
  throw Error(pending_status_, pending_message_);
}

void Mesh::send_queries(uint64_t seq) {
  for (auto& a : answers_) a = PeerAnswer{};
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) send_control(p, kQuery, std::to_string(seq), false);
  }
}

void Mesh::check_peer(int peer) {
  if (aborted()) fail(Status::kAborted, "the communicator was aborted");
  const Peer& p = *peers_[peer];
  if (!p.departed && !p.failed) return;
  // Over TCP the data socket's EOF (or reset) tells, after any data still in
  // flight has been read; shared-memory data was in the rings before the
  // peer closed its control socket, and the caller has consumed what it
  // could since it noticed (see the declaration).
  if (links_[peer] && links_[peer]->poll_fd() >= 0) return;
  fail_departed(peer);
}

void Mesh::fail_departed(int peer) {
  if (peers_[peer]->failed) {
    fail(Status::kPeerFailure, describe(peer),
         " exited, was killed or aborted its communicator: its connection closed without the communicator being "
         "destroyed");
  }
  fail(Status::kPeerFailure, describe(peer), " has destroyed its communicator");
}

void Mesh::throw_if_peer_failed() {
  throw_if_failed();
  if (first_failed_ >= 0) fail_departed(first_failed_);
}

void Mesh::send_control(int peer, char type, const std::string& payload, bool best_effort) {
  Peer& p = *peers_[peer];
  if (!p.ctrl.valid() || p.closed) return;
  std::string msg(5, '\0');
  msg[0] = type;
  uint32_t len = static_cast<uint32_t>(payload.size());
  std::memcpy(&msg[1], &len, 4);
  msg += payload;
  // A split's heartbeat thread sends too (mesh_liveness.cc).
  std::unique_lock<std::mutex> lock(send_mu_, std::defer_lock);
  if (send_locked_) lock.lock();
  if (best_effort) {
    ssize_t w = ::send(p.ctrl.get(), msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;  // a full buffer already holds a wake-up; a dead peer shows up as EOF
    return;
  }
  try {
    net::write_all(p.ctrl.get(), msg.data(), msg.size(), Deadline::after_ms(1000), "control message");
  } catch (const Error&) {
    // The peer is gone or stuck; its own failure is reported elsewhere.
  }
}

std::vector<int> Mesh::control_fds() const {
  std::vector<int> fds;
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && peers_[p] && peers_[p]->ctrl.valid() && !peers_[p]->closed) fds.push_back(peers_[p]->ctrl.get());
  }
  return fds;
}

int Mesh::local_pid(int peer) const {
  if (peer < 0 || peer >= size_ || !peers_[peer] || !peers_[peer]->same_host || !peers_[peer]->ctrl.valid()) return 0;
  // A unix socket's credentials give the peer's pid in this process's pid
  // namespace (0 when it is not visible here), unlike the pid it announced.
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(peers_[peer]->ctrl.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid > 0 ? cred.pid : 0;
}

void Mesh::doorbell(int peer) { send_control(peer, kDoorbell, "", true); }

void Mesh::wake() {
  uint64_t one = 1;
  ssize_t w = ::write(wake_fd_.get(), &one, sizeof one);
  (void)w;
  if (wake_word_ != nullptr) wake_futex(*wake_word_);
}

uint32_t Mesh::futex_seq() const { return wake_word_->load(std::memory_order_acquire); }

void Mesh::sleep_on_futex(uint32_t seq, int timeout_ms) {
  std::atomic<uint32_t>& word = *wake_word_;
  futex_wait(word, seq, timeout_ms);
  if (word.load(std::memory_order_acquire) != seq) {
    // Woken (the usual case, on the hot path): no poll. The control sockets
    // are read at the latest when a wait times out.
    if (aborted()) fail(Status::kAborted, "the communicator was aborted");
    return;
  }
  std::vector<pollfd> none;
  sleep(none, 0);
}

void Mesh::broadcast_error(Status status, const std::string& message) {
  std::string payload(1, static_cast<char>(status));
  payload += message;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    send_control(p, kError, payload, false);
    ring_notice(p);
  }
}

void Mesh::handle_control(int peer) {
  Peer& p = *peers_[peer];
  char buf[4096];
  for (;;) {
    ssize_t r = ::recv(p.ctrl.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) {
      p.inbuf.append(buf, static_cast<size_t>(r));
      continue;
    }
    if (r == 0 || (r < 0 && errno == ECONNRESET)) {
      p.closed = true;
      // Parse what came before the EOF (it may hold an error notice or BYE).
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
    fail_errno(str_cat("recv(control) from ", describe(peer)), errno);
  }
  size_t pos = 0;
  for (;;) {
    char type = 0;
    std::string payload;
    size_t used;
    try {
      used = wire::next_control_message(p.inbuf, pos, &type, &payload);
    } catch (const Error& e) {
      fail(Status::kInternal, e.what(), " from ", describe(peer));
    }
    if (used == 0) break;
    pos += used;
    if (pos == p.inbuf.size()) {
      p.inbuf.clear();
      pos = 0;
    }
    process_message(peer, type, payload);
  }
  if (pos > 0) p.inbuf.erase(0, pos);
  if (p.closed && !p.departed && !p.failed) {
    // Not an error by itself: only for a wait that still needs this peer
    // (check_peer), the setup, or a split (throw_if_peer_failed).
    p.failed = true;
    if (first_failed_ < 0) first_failed_ = peer;
  }
}

void Mesh::process_message(int peer, char type, const std::string& payload) {
  switch (type) {
    case kDoorbell: return;
    case kReady:
      peers_[peer]->ready = true;
      peers_[peer]->device_window = payload == "D";
      return;
    case kBye: peers_[peer]->departed = true; return;
    case kHeartbeat: note_heartbeat(peer, payload); return;
    case wire::kRejectedCall: note_rejection(peer, payload); return;
    case kError: {
      if (pending_status_ != Status::kSuccess) return;  // the first error is the one to report
      pending_status_ = wire::error_status_of(payload);
      pending_message_ =
          str_cat(payload.empty() ? std::string() : payload.substr(1), " [reported by ", describe(peer), "]");
      pending_remote_ = true;
      return;
    }
    case kQuery: {
      OpStatus st = describer_ ? describer_() : OpStatus{};
      send_control(peer, kAnswer, str_cat(st.seq, kSep, st.desc, kSep, st.signature), false);
      return;
    }
    case kAnswer: {
      auto f = split(payload, kSep);
      PeerAnswer& a = answers_[peer];
      a.answered = true;
      a.seq = wire::answer_seq(f[0]);
      a.desc = f.size() > 1 ? f[1] : std::string();
      a.signature = f.size() > 2 ? f[2] : std::string();
      return;
    }
    default: fail(Status::kInternal, "unknown control message type ", int(type), " from ", describe(peer));
  }
}

void Mesh::sleep(std::vector<pollfd>& fds, int timeout_ms) {
  std::vector<pollfd> all;
  all.reserve(fds.size() + size_ + 1);
  all.push_back({wake_fd_.get(), POLLIN, 0});
  std::vector<int> ctrl_peer;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || !peers_[p] || peers_[p]->closed) continue;
    all.push_back({peers_[p]->ctrl.get(), POLLIN, 0});
    ctrl_peer.push_back(p);
  }
  size_t first_link = all.size();
  for (auto& f : fds) all.push_back({f.fd, f.events, 0});
  int r = ::poll(all.data(), all.size(), timeout_ms);
  if (r < 0 && errno != EINTR) fail_errno("poll", errno);
  if (all[0].revents & POLLIN) {
    uint64_t v;
    ssize_t n = ::read(wake_fd_.get(), &v, sizeof v);
    (void)n;
  }
  for (size_t i = 0; i < ctrl_peer.size(); ++i) {
    if (all[1 + i].revents) handle_control(ctrl_peer[i]);
  }
  if (liveness_) check_heartbeats();
  if (aborted()) fail(Status::kAborted, "the communicator was aborted");
  for (size_t i = 0; i < fds.size(); ++i) fds[i].revents = all[first_link + i].revents;
}

void Mesh::fail_timeout(const std::string& what, uint64_t seq, const std::vector<int>& waiting_on) {
  send_queries(seq);
  // Peers inside an OmniCCL call answer within milliseconds; one that never
  // entered the call cannot answer.
  Deadline window = Deadline::after_ms(1000);
  for (;;) {
    bool all = true;
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && !peers_[p]->closed && !peers_[p]->departed && !answers_[p].answered) all = false;
    }
    if (all || window.expired() || pending_status_ != Status::kSuccess) break;
    std::vector<pollfd> none;
    sleep(none, window.remaining_ms(50));
  }
  // A peer failure or another rank's report explains more than a timeout:
  // first a failed peer this operation waits on, then any.
  throw_if_failed();
  for (int p : waiting_on) {
    if (peers_[p]->failed) fail_departed(p);
  }
  throw_if_peer_failed();
  std::string absent, gone, elsewhere;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (peers_[p]->departed) {
      gone += str_cat(gone.empty() ? "" : ", ", p);
    } else if (!answers_[p].answered) {
      absent += str_cat(absent.empty() ? "" : ", ", p);
    } else if (answers_[p].seq != seq) {
      elsewhere += str_cat("; rank ", p, " is in ", answers_[p].desc.empty() ? "another operation" : answers_[p].desc);
    }
  }
  std::string waited;
  for (int p : waiting_on) waited += str_cat(waited.empty() ? "" : ", ", describe(p));
  std::string msg = str_cat(what, " timed out waiting for ", waited.empty() ? "peers" : waited);
  if (!absent.empty()) {
    msg += str_cat(". Ranks that did not arrive (not inside any OmniCCL call): ", absent);
  } else {
    msg += ". Every rank is inside an OmniCCL call";
  }
  if (!gone.empty()) msg += str_cat("; ranks that destroyed their communicator: ", gone);
  msg += elsewhere + ".";
  fail(Status::kTimeout, msg);
}

}  // namespace omniccl::transport
