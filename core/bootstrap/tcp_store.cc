// TCP store: a poll()-driven server thread holding a map, and its client.
//
// Wire format: bootstrap/store_wire.h. The server owns every connection in
// one thread; a kGet of an absent key parks the connection until a kSet/kAdd
// of that key answers it, or until the wait bound the get carries passes
// (answered kNotFound: the connection stays usable). Invalid input (bad header, absurd lengths, a
// request while parked, EOF mid-message) drops only that connection.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"
#include "bootstrap/util.h"
#include "common/net.h"
#include "common/fd.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/sha256.h"
#include "common/status.h"

namespace omniccl::bootstrap {

using detail::host_port;
using detail::printable;
using wire::Cmd;

namespace {
/// The longest wait bound a get carries (a day; longer waits re-ask).
constexpr uint64_t kMaxGetWaitMs = 24ull * 3600 * 1000;
/// How long past its wait bound a client waits for the server's answer
/// before it treats the connection as lost.
constexpr int64_t kGetGraceMs = 10000;
/// The longest pause before a client connects again after the server shed
/// its connection.
constexpr auto kShedBackoffMax = std::chrono::milliseconds(200);
/// Connections the server accepts per poll round: between rounds it reads
/// what the accepted ones sent, so a flood of new connections cannot push
/// out a rank's before its request is read.
constexpr int kAcceptBatch = 64;
/// The least time between two reports of shed connections.
constexpr auto kShedReportEvery = std::chrono::seconds(10);

/// This process's soft open-file limit (1024 when it cannot be read).
uint64_t open_file_limit() {
  rlimit rl{};
  return ::getrlimit(RLIMIT_NOFILE, &rl) == 0 ? uint64_t(rl.rlim_cur) : 1024;
}

/// The default of StoreLimits::max_connections for a job of world_size.
size_t default_max_connections(int world_size) {
  return static_cast<size_t>(std::max<uint64_t>(2 * static_cast<uint64_t>(std::max(world_size, 0)) + 16,
                                                std::min<uint64_t>(4096, open_file_limit() / 2)));
}

/// The default of StoreLimits::max_pending.
size_t default_max_pending() { return static_cast<size_t>(std::clamp<uint64_t>(open_file_limit() / 8, 8, 1024)); }
}  // namespace

namespace {

/// Milliseconds elapsed since start.
int64_t elapsed_ms(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

/// strerror() text of err, thread-safely.
std::string errno_text(int err) {
  char buf[256];
  const char* msg = strerror_r(err, buf, sizeof buf);
  return msg;
}

/// Tells a connection about to be shed so (wire::kShedMagic), best effort.
/// What it sent is read and discarded first: a socket closed with unread
/// input is reset, and the reset could overtake the notice.
void say_shed(int fd) {
  char buf[4096];
  for (int i = 0; i < 16 && ::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0; ++i) {}
  (void)::send(fd, wire::kShedMagic, sizeof wire::kShedMagic, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/// The "a.b.c.d:port" text of a connected socket's peer, for logs.
std::string peer_text(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  const auto* sa = reinterpret_cast<const sockaddr*>(&ss);
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) port = ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) port = ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return host_port(net::address_text(sa), port);
}

}  // namespace

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

struct TcpStoreServer::Impl {
  /// One accepted client connection, owned by the server thread.
  struct Conn {
    UniqueFd fd;
    std::string peer;     ///< for logs
    std::string in;       ///< received bytes not yet consumed
    std::string out;      ///< reply bytes not yet sent
    size_t out_off = 0;   ///< bytes of `out` already sent
    bool parked = false;  ///< waiting in a kGet for parked_key
    std::string parked_key;
    Clock::time_point parked_until = Clock::time_point::max();  ///< the get's wait bound
    bool dead = false;                                          ///< to be closed at the end of this poll round
    uint64_t stored = 0;                                        ///< bytes of keys and values this client last wrote
    bool served = false;                                        ///< has completed at least one request
    Clock::time_point idle_since = Clock::now();                ///< connected, or last complete request
    bool authed = true;                                         ///< false until it proved the job token
    bool pending = true;                                        ///< has proven nothing yet (counted in pending_count)
    Digest nonce{};                                             ///< the challenge sent to it
    /// kSetOnClose registrations: set when this connection closes.
    std::unordered_map<std::string, std::string> on_close;
    uint64_t on_close_bytes = 0;
    /// kHeartbeat: set silence_key = silence_notice once this connection
    /// has sent nothing for silence_ms (0: not watched).
    int64_t silence_ms = 0;
    std::string silence_key, silence_notice;
    Clock::time_point last_heard = Clock::now();

    /// Whether reply bytes are waiting to be sent.
    bool out_pending() const { return out_off < out.size(); }
  };

  std::string host;
  uint16_t port = 0;
  UniqueFd listen_fd;
  UniqueFd wake_fd;  ///< eventfd that interrupts poll() for shutdown
  std::atomic<bool> stop{false};
  pid_t owner_pid = 0;
  std::thread thread;

  // State below is touched only by the server thread.
  std::unordered_map<uint64_t, Conn> conns;
  uint64_t next_id = 1;
  StoreLimits limits;
  std::string token;     ///< OMNICCL_JOB_TOKEN; empty = no authentication
  std::string identity;  ///< "pid P on HOST", the answer to a heartbeat
  /// A stored value and the connection charged for it (its last writer).
  struct Entry {
    std::string value;
    uint64_t owner = 0;
  };
  std::unordered_map<std::string, Entry> data;
  uint64_t stored_bytes = 0;        ///< keys + values in `data`
  uint64_t buffered_bytes = 0;      ///< unprocessed input of every connection
  Clock::time_point refused_log{};  ///< last "connection refused" warning
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;
  Clock::time_point accept_resume{};  ///< accept paused until then (EMFILE)
  /// Connections that have proven nothing (Conn::pending), and their ids in
  /// the order they were accepted (ids of proven or closed ones are skipped
  /// when met), so the oldest is found at once however many there are.
  size_t pending_count = 0;
  std::deque<uint64_t> pending_order;
  /// A descriptor held in reserve: when the process has none left, closing it
  /// lets the server accept (and close) a connection instead of leaving it in
  /// the listen queue, where it would keep the listening socket readable.
  UniqueFd spare_fd;
  /// Connections closed or refused to protect the job, by reason, and what
  /// the last report said (reports summarise; none is per connection).
  struct ShedCounts {
    uint64_t for_newer = 0;  ///< pending, the oldest, closed to admit a newer one
    uint64_t timed_out = 0;  ///< pending past handshake_timeout_ms
    uint64_t no_fds = 0;     ///< refused at accept: out of descriptors
    uint64_t all_busy = 0;   ///< refused at accept: max_connections proven ones open
    uint64_t total() const { return for_newer + timed_out + no_fds + all_busy; }
  };
  ShedCounts shed, shed_reported;
  Clock::time_point shed_report_at{};
  Clock::time_point accept_error_log{};  ///< last "accept failed" warning

  /// The server thread: poll the wake fd, the listening socket and every
  /// connection until `stop` is set.
  void run();
  /// Answers the events of one poll() round on the connections in ids
  /// (their entries start at pfds[base]), dropping those that fail.
  void serve_ready(const std::vector<pollfd>& pfds, size_t base, const std::vector<uint64_t>& ids);
  /// Between poll() rounds: drops idle connections, ends parked gets whose
  /// bound has passed, reports silent ones, and closes the dead.
  void housekeeping();
  /// Accepts every pending connection.
  void accept_all();
  /// Without a job token: whether the connection on fd may stay (not a
  /// process of another user on this host); closes it when not.
  bool admits(int fd);
  /// Closes the oldest connection that has proven nothing (no request
  /// completed, or no token proof) to make room; false when there is none.
  bool shed_oldest_pending();
  /// Takes a newly accepted connection in (or refuses it at the limits) and
  /// reads what it has already sent.
  void admit(int fd);
  /// Out of descriptors with nothing to shed: accepts the next connection
  /// on the reserve descriptor and closes it. kEmpty: nothing was queued
  /// (accept reports EMFILE before it looks); kFailed: no reserve.
  enum class Refusal { kRefused, kEmpty, kFailed };
  Refusal refuse_without_descriptors();
  /// c has proven itself: it no longer counts as pending.
  void mark_proven(Conn& c);
  /// Logs what was shed since the last report: the first time at once, then
  /// at most every kShedReportEvery, and at the end (`final`).
  void report_shedding(bool final);
  /// Handles poll() events of one connection; false = close it.
  bool service(Conn& c, short revents);
  /// Checks a client's answer to the challenge once it is buffered, and
  /// sends the server's proof; false = close c (a wrong answer, or a socket
  /// error). c.authed stays false while the answer is incomplete.
  bool check_answer(Conn& c);
  /// Executes every complete request buffered in c.in; false = close c.
  bool process(uint64_t id, Conn& c);
  /// Executes one validated request; false = close c.
  bool execute(uint64_t id, Conn& c, Cmd cmd, std::string key, std::string value);
  /// kGet: answers the value, or parks c until the key is set or its wait
  /// bound (an optional 8-byte value, in ms) passes.
  void execute_get(uint64_t id, Conn& c, std::string key, const std::string& value);
  /// kAdd: adds the 8-byte value to the key's integer (absent: 0).
  void execute_add(uint64_t id, Conn& c, const std::string& key, const std::string& value);
  /// kSetOnClose: registers (or with an empty value, forgets) a key to set
  /// when c closes, within c's on-close quota.
  void execute_set_on_close(Conn& c, std::string key, std::string value);
  /// kHeartbeat: watches c for silence; answers the server's identity.
  void execute_heartbeat(Conn& c, std::string key, const std::string& value);
  /// Sends as much of c.out as the socket takes; false on a socket error.
  bool flush(Conn& c);
  /// Appends a reply message to c.out.
  static void reply(Conn& c, Cmd code, const std::string& value);
  /// Answers every connection parked on key with value.
  void wake_waiters(const std::string& key, const std::string& value);
  /// Closes connection id and forgets its parked get.
  void close_conn(uint64_t id);
  /// Stores key = value charged to connection id; false (and a kError reply
  /// naming the limit) when a quota would be exceeded.
  bool put(uint64_t id, Conn& c, const std::string& key, std::string value);
  /// Removes key, uncharging its owner.
  void remove(const std::string& key);
  /// Drops connections that stayed silent or stalled mid-message too long.
  void expire_idle();
  /// Answers kNotFound to parked gets whose wait bound has passed; returns
  /// the milliseconds until the next bound (capped at cap_ms).
  int expire_parked(int cap_ms);
  /// Publishes the notice of every watched connection (kHeartbeat) that has
  /// been silent for its limit: its process stopped with its socket open.
  void report_silent();
  /// Sets key = value charged to nobody and answers its waiters.
  void publish(const std::string& key, std::string value);
};

bool TcpStoreServer::Impl::put(uint64_t id, Conn& c, const std::string& key, std::string value) {
  const uint64_t size = key.size() + value.size();
  auto it = data.find(key);
  const uint64_t old_size = it == data.end() ? 0 : key.size() + it->second.value.size();
  const uint64_t mine_after = c.stored + size - (it != data.end() && it->second.owner == id ? old_size : 0);
  const uint64_t total_after = stored_bytes - old_size + size;
  if (mine_after > limits.max_client_bytes || total_after > limits.max_total_bytes) {
    OCCL_LOG(kWarn, kBootstrap, "rendezvous server refused a set of ", size, " bytes from ", c.peer,
             ": store quota exceeded");
    reply(c, Cmd::kError,
          str_cat("store quota exceeded: setting '", printable(key), "' (", size, " bytes) would bring this client to ",
                  mine_after, " bytes (limit ", limits.max_client_bytes, ") and the store to ", total_after,
                  " bytes (limit ", limits.max_total_bytes, ", OMNICCL_STORE_MAX_BYTES)"));
    return false;
  }
  if (it != data.end()) {
    auto oc = conns.find(it->second.owner);
    if (oc != conns.end()) oc->second.stored -= old_size;
    it->second.value = std::move(value);
    it->second.owner = id;
  } else {
    data.emplace(key, Entry{std::move(value), id});
  }
  stored_bytes = total_after;
  c.stored += size;
  return true;
}

void TcpStoreServer::Impl::remove(const std::string& key) {
  auto it = data.find(key);
  if (it == data.end()) return;
  const uint64_t size = key.size() + it->second.value.size();
  auto oc = conns.find(it->second.owner);
  if (oc != conns.end()) oc->second.stored -= size;
  stored_bytes -= size;
  data.erase(it);
}

int TcpStoreServer::Impl::expire_parked(int cap_ms) {
  const auto now = Clock::now();
  auto next = now + std::chrono::milliseconds(cap_ms);
  for (auto& [id, c] : conns) {
    if (c.dead || !c.parked || c.parked_until == Clock::time_point::max()) continue;
    if (c.parked_until > now) {
      next = std::min(next, c.parked_until);
      continue;
    }
    auto wit = waiters.find(c.parked_key);
    if (wit != waiters.end()) {
      auto& v = wit->second;
      v.erase(std::remove(v.begin(), v.end(), id), v.end());
      if (v.empty()) waiters.erase(wit);
    }
    c.parked = false;
    c.parked_key.clear();
    c.parked_until = Clock::time_point::max();
    reply(c, Cmd::kNotFound, {});
    if (!flush(c)) c.dead = true;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, cap_ms));
}

void TcpStoreServer::Impl::expire_idle() {
  const auto now = Clock::now();
  const auto limit = std::chrono::milliseconds(limits.idle_timeout_ms);
  const auto handshake = std::chrono::milliseconds(std::min(limits.handshake_timeout_ms, limits.idle_timeout_ms));
  for (auto& [id, c] : conns) {
    if (c.dead) continue;
    // Proven nothing in time: counted, not logged one by one (a stranger may
    // open thousands; report_shedding() sums them up).
    if (c.pending && now - c.idle_since > handshake) {
      say_shed(c.fd.get());
      c.dead = true;
      ++shed.timed_out;
      continue;
    }
    if (c.parked || c.out_pending()) continue;
    const bool waiting_for_first = !c.served;
    const bool mid_message = !c.in.empty();
    if ((waiting_for_first || mid_message) && now - c.idle_since > limit) {
      OCCL_LOG(kWarn, kBootstrap, "rendezvous server dropped ", c.peer, ": ",
               waiting_for_first ? "no request" : "an unfinished message", " within ", limits.idle_timeout_ms,
               " ms (OMNICCL_STORE_IDLE_TIMEOUT)");
      c.dead = true;
    }
  }
}

void TcpStoreServer::Impl::report_silent() {
  const auto now = Clock::now();
  for (auto& [id, c] : conns) {
    if (c.dead || c.silence_ms <= 0 || now - c.last_heard <= std::chrono::milliseconds(c.silence_ms)) continue;
    OCCL_LOG(kWarn, kBootstrap, "rendezvous server: ", c.peer, " sent no heartbeat for ", c.silence_ms,
             " ms: ", printable(c.silence_notice));
    c.silence_ms = 0;  // once
    publish(c.silence_key, std::move(c.silence_notice));
  }
}

void TcpStoreServer::Impl::publish(const std::string& key, std::string value) {
  remove(key);
  stored_bytes += key.size() + value.size();
  auto& entry = data[key];
  entry.value = std::move(value);
  entry.owner = 0;
  wake_waiters(key, entry.value);
}

StoreLimits StoreLimits::from_environment(int world_size) {
  StoreLimits l;
  if (auto v = get_setting("OMNICCL_STORE_MAX_CONNECTIONS")) {
    auto n = detail::parse_int64(*v);
    check_arg(n && *n >= 1 && *n <= (int64_t{1} << 24), "OMNICCL_STORE_MAX_CONNECTIONS='", *v,
              "' is not a number of connections (1..16777216)");
    l.max_connections = static_cast<size_t>(*n);
  } else {
    l.max_connections = default_max_connections(world_size);
  }
  if (auto v = get_setting("OMNICCL_STORE_MAX_PENDING")) {
    auto n = detail::parse_int64(*v);
    check_arg(n && *n >= 1 && *n <= (int64_t{1} << 24), "OMNICCL_STORE_MAX_PENDING='", *v,
              "' is not a number of connections (1..16777216)");
    l.max_pending = static_cast<size_t>(*n);
  }
  if (auto v = get_setting("OMNICCL_STORE_MAX_BYTES")) {
    auto n = detail::parse_int64(*v);
    check_arg(n && *n >= (int64_t{1} << 20), "OMNICCL_STORE_MAX_BYTES='", *v,
              "' is not a number of bytes of at least 1048576");
    l.max_total_bytes = static_cast<uint64_t>(*n);
    l.max_client_bytes = std::min(l.max_client_bytes, l.max_total_bytes);
  }
  if (auto v = get_setting("OMNICCL_STORE_IDLE_TIMEOUT")) {
    l.idle_timeout_ms = parse_duration_ms(*v, "OMNICCL_STORE_IDLE_TIMEOUT");
  }
  return l;
}

void TcpStoreServer::Impl::run() {
  std::vector<pollfd> pfds;
  std::vector<uint64_t> ids;
  while (!stop.load(std::memory_order_acquire)) {
    pfds.clear();
    ids.clear();
    pfds.push_back({wake_fd.get(), POLLIN, 0});
    const bool accepting = Clock::now() >= accept_resume;
    if (accepting) pfds.push_back({listen_fd.get(), POLLIN, 0});
    const size_t base = pfds.size();
    for (auto& [id, c] : conns) {
      // Back-pressure: read the next request only once the last reply is out.
      pfds.push_back({c.fd.get(), static_cast<short>(c.out_pending() ? POLLOUT : POLLIN), 0});
      ids.push_back(id);
    }
    // Wake at least once a second to drop silent or stalled connections,
    // and in time for the first parked get's wait bound.
    const int cap_ms = accepting && conns.empty() ? -1 : accepting ? 1000 : 100;
    int n = ::poll(pfds.data(), pfds.size(), cap_ms < 0 ? -1 : expire_parked(cap_ms));
    if (n < 0) {
      if (errno == EINTR) continue;
      OCCL_LOG(kWarn, kBootstrap, "rendezvous server ", host_port(host, port), ": poll failed: ", errno_text(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (pfds[0].revents != 0) {
      uint64_t drained = 0;
      ssize_t r = ::read(wake_fd.get(), &drained, sizeof drained);
      (void)r;
    }
    if (stop.load(std::memory_order_acquire)) break;
    if (accepting && pfds[1].revents != 0) {
      try {
        accept_all();
      } catch (const std::exception& e) {  // bad_alloc: the thread must survive
        OCCL_LOG(kWarn, kBootstrap, "rendezvous server: accept failed: ", e.what());
      }
    }
    serve_ready(pfds, base, ids);
    housekeeping();
  }
  report_shedding(/*final=*/true);
}

void TcpStoreServer::Impl::serve_ready(const std::vector<pollfd>& pfds, size_t base, const std::vector<uint64_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    short re = pfds[base + i].revents;
    if (re == 0) continue;
    auto it = conns.find(ids[i]);
    if (it == conns.end() || it->second.dead) continue;
    bool ok = false;
    try {
      ok = service(it->second, re) && process(it->first, it->second);
    } catch (const std::exception& e) {  // e.g. bad_alloc: drop this client only
      OCCL_LOG(kWarn, kBootstrap, "rendezvous server dropped ", it->second.peer, ": ", e.what());
    }
    if (!ok) it->second.dead = true;
  }
}

void TcpStoreServer::Impl::housekeeping() {
  expire_idle();
  (void)expire_parked(0);
  report_silent();
  report_shedding(false);
  // Forget the ids of connections that are no longer pending from the front,
  // so the queue spans at most the handshake timeout's worth of connections.
  while (!pending_order.empty()) {
    auto it = conns.find(pending_order.front());
    if (it != conns.end() && it->second.pending) break;
    pending_order.pop_front();
  }
  std::vector<uint64_t> dead;
  for (auto& [id, c] : conns) {
    if (c.dead) dead.push_back(id);
  }
  for (uint64_t id : dead) close_conn(id);
}

bool TcpStoreServer::Impl::shed_oldest_pending() {
  // Pending: it has not completed a request (or, with a token, not proven
  // it). A rank sends its first request as soon as it has connected (and
  // admit() reads it at once), so the oldest pending connection is the one
  // least likely to be the job's: many idle connections from one process
  // cannot keep a rank out, while the connections the job uses stay.
  while (!pending_order.empty()) {
    const uint64_t id = pending_order.front();
    pending_order.pop_front();
    auto it = conns.find(id);
    if (it == conns.end() || !it->second.pending) continue;
    say_shed(it->second.fd.get());
    close_conn(id);
    return true;
  }
  return false;
}

void TcpStoreServer::Impl::mark_proven(Conn& c) {
  if (!c.pending) return;
  c.pending = false;
  --pending_count;
}

TcpStoreServer::Impl::Refusal TcpStoreServer::Impl::refuse_without_descriptors() {
  if (!spare_fd.valid()) return Refusal::kFailed;
  spare_fd.reset();
  UniqueFd refused(::accept4(listen_fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
  const int err = errno;
  const bool took = refused.valid();
  if (took) {
    say_shed(refused.get());
    ++shed.no_fds;
  }
  refused.reset();
  spare_fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!spare_fd.valid()) return Refusal::kFailed;
  return took || err == ECONNABORTED || err == EINTR ? Refusal::kRefused
         : err == EAGAIN || err == EWOULDBLOCK       ? Refusal::kEmpty
                                                     : Refusal::kFailed;
}

void TcpStoreServer::Impl::report_shedding(bool final) {
  if (shed.total() == shed_reported.total()) return;
  const auto now = Clock::now();
  const bool first = shed_reported.total() == 0;
  if (!first && !final && now - shed_report_at < kShedReportEvery) return;
  const ShedCounts d{shed.for_newer - shed_reported.for_newer, shed.timed_out - shed_reported.timed_out,
                     shed.no_fds - shed_reported.no_fds, shed.all_busy - shed_reported.all_busy};
  const std::string counts = str_cat(d.for_newer, " closed for newer ones, ", d.timed_out, " silent for ",
                                     std::min(limits.handshake_timeout_ms, limits.idle_timeout_ms), " ms, ", d.no_fds,
                                     " refused out of descriptors, ", d.all_busy, " refused with ",
                                     limits.max_connections, " proven connections open");
  if (first) {
    OCCL_LOG(kWarn, kBootstrap, "rendezvous server ", host_port(host, port),
             ": something is opening connections to this port that prove nothing (no request",
             token.empty() ? "" : ", no job token", "); they are shed so that descriptors stay for the job: at most ",
             limits.max_pending, " may wait at once (OMNICCL_STORE_MAX_PENDING; open-file limit ", open_file_limit(),
             "), oldest closed first. So far ", counts, ". Further counts every ",
             std::chrono::seconds(kShedReportEvery).count(), " s, not per connection");
  } else {
    OCCL_LOG(kWarn, kBootstrap, "rendezvous server ", host_port(host, port), ": shed ", d.total(),
             " more connections that proved nothing (", counts, "); ", shed.total(), " in all, ", pending_count,
             " pending now");
  }
  shed_reported = shed;
  shed_report_at = now;
}

bool TcpStoreServer::Impl::admits(int fd) {
  // Without a job token, the kernel still tells who a connection of this
  // host comes from: only this user's processes may read the records or
  // claim a rank. Connections from other hosts cannot be told apart (the
  // server warned at its start that it is open to them).
  const std::optional<uid_t> uid = net::local_peer_uid(fd);
  if (!uid || *uid == ::geteuid()) return true;
  UniqueFd refused(fd);
  if (Clock::now() - refused_log > std::chrono::seconds(1)) {
    refused_log = Clock::now();
    OCCL_LOG(kWarn, kBootstrap, "rendezvous server ", host_port(host, port), ": refused a connection from ",
             peer_text(fd), ", a process of user ", *uid, " on this host: without a job token only processes of ",
             "this job's user (", ::geteuid(), ") may join from this host; give every rank the same ",
             "OMNICCL_JOB_TOKEN to admit other users, see SECURITY.md");
  }
  return false;
}

void TcpStoreServer::Impl::accept_all() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      admit(fd);
      continue;
    }
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK) return;
    if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
    if (err == EMFILE || err == ENFILE) {
      // Out of descriptors: a connection that has proven nothing gives its
      // own back, so that the job's connections still get in; else the
      // reserve descriptor takes the new one off the queue, to close it.
      if (shed_oldest_pending()) {
        ++shed.for_newer;
        continue;
      }
      const Refusal r = refuse_without_descriptors();
      if (r == Refusal::kRefused) continue;
      if (r == Refusal::kEmpty) return;
    }
    // Out of memory, or the reserve is gone: stop accepting for a moment
    // rather than spinning on a listening socket that stays readable.
    if (Clock::now() - accept_error_log > kShedReportEvery) {
      accept_error_log = Clock::now();
      OCCL_LOG(kWarn, kBootstrap, "rendezvous server ", host_port(host, port), ": accept failed: ", errno_text(err),
               "; pausing accepts for 100 ms at a time while it lasts");
    }
    accept_resume = Clock::now() + std::chrono::milliseconds(100);
    return;
  }
}

void TcpStoreServer::Impl::admit(int fd) {
  UniqueFd owned(fd);
  // Another user's connection is refused before it can push anyone out
  // (admits() closes a connection it refuses).
  if (token.empty() && !admits(owned.get())) {
    (void)owned.release();
    return;
  }
  if (pending_count >= limits.max_pending && shed_oldest_pending()) ++shed.for_newer;
  if (conns.size() >= limits.max_connections) {
    if (!shed_oldest_pending()) {
      ++shed.all_busy;
      say_shed(fd);
      return;  // every connection has proven itself: this one is refused
    }
    ++shed.for_newer;
  }
  net::set_nodelay(fd);
  Conn c;
  c.fd = std::move(owned);
  c.peer = peer_text(fd);
  if (!token.empty()) {  // challenge first (see store_wire.h)
    c.authed = false;
    c.nonce = random_nonce();
    c.out.assign(wire::kAuthMagic, sizeof wire::kAuthMagic);
    c.out.append(reinterpret_cast<const char*>(c.nonce.data()), c.nonce.size());
    if (!flush(c)) return;
  }
  OCCL_LOG(kDebug, kBootstrap, "rendezvous server: client ", c.peer, " connected");
  const uint64_t id = next_id++;
  Conn& added = conns.emplace(id, std::move(c)).first->second;
  ++pending_count;
  pending_order.push_back(id);
  // A rank's first request (or token answer) is usually there already:
  // reading it now proves the connection before newer ones can push it out.
  bool ok = false;
  try {
    ok = service(added, POLLIN) && process(id, added);
  } catch (const std::exception& e) {  // e.g. bad_alloc: drop this client only
    OCCL_LOG(kWarn, kBootstrap, "rendezvous server dropped ", added.peer, ": ", e.what());
  }
  if (!ok) close_conn(id);
}

bool TcpStoreServer::Impl::service(Conn& c, short revents) {
  if (revents & (POLLERR | POLLNVAL)) return false;
  if (revents & POLLOUT) {
    if (!flush(c)) return false;
  }
  if (revents & (POLLIN | POLLHUP)) {
    if (c.out_pending()) return !(revents & POLLHUP) || flush(c);
    // Read what is there, at most 4 MiB per round so one busy client cannot
    // starve the others.
    char buf[64 * 1024];
    size_t budget = 4u << 20;
    while (budget > 0) {
      ssize_t r = ::recv(c.fd.get(), buf, std::min(sizeof buf, budget), 0);
      if (r > 0) {
        if (c.parked) {
          OCCL_LOG(kInfo, kBootstrap, "rendezvous server dropped ", c.peer, ": sent data while waiting for a key");
          return false;
        }
        // Unprocessed input has its own quotas (the same numbers as for
        // stored data), so the server holds at most twice the total.
        if (c.in.size() + static_cast<uint64_t>(r) > limits.max_client_bytes ||
            buffered_bytes + static_cast<uint64_t>(r) > limits.max_total_bytes) {
          OCCL_LOG(kWarn, kBootstrap, "rendezvous server dropped ", c.peer, ": over its input quota (",
                   c.in.size() + static_cast<uint64_t>(r), " bytes buffered; limits ", limits.max_client_bytes,
                   " per client, ", limits.max_total_bytes, " in all)");
          return false;
        }
        c.in.append(buf, static_cast<size_t>(r));
        buffered_bytes += static_cast<uint64_t>(r);
        budget -= static_cast<size_t>(r);
        // Stop reading once a whole maximal message (plus slack) is buffered;
        // process() consumes it before the next round.
        if (c.in.size() > wire::kHeaderBytes + wire::kMaxKeyBytes + wire::kMaxValueBytes) break;
        continue;
      }
      if (r == 0) {
        if (!c.in.empty()) {
          OCCL_LOG(kInfo, kBootstrap, "rendezvous server dropped ", c.peer,
                   ": connection closed in the middle of a message");
        }
        return false;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;  // ECONNRESET and friends
    }
  }
  return true;
}

bool TcpStoreServer::Impl::check_answer(Conn& c) {
  constexpr size_t kAnswer = wire::kMacBytes + wire::kNonceBytes;
  if (c.in.size() < kAnswer) return true;
  Digest mac, theirs;
  std::memcpy(mac.data(), c.in.data(), mac.size());
  std::memcpy(theirs.data(), c.in.data() + mac.size(), theirs.size());
  const std::string_view ns(reinterpret_cast<const char*>(c.nonce.data()), c.nonce.size());
  const std::string_view nc(reinterpret_cast<const char*>(theirs.data()), theirs.size());
  if (!digest_equal(mac, hmac_sha256(token, str_cat(wire::kClientLabel, ns, nc)))) {
    OCCL_LOG(kWarn, kBootstrap, "rendezvous server dropped ", c.peer,
             ": it does not know the job token (OMNICCL_JOB_TOKEN)");
    return false;
  }
  c.in.erase(0, kAnswer);
  buffered_bytes -= kAnswer;
  c.authed = true;
  mark_proven(c);
  const Digest proof = hmac_sha256(token, str_cat(wire::kServerLabel, nc, ns));
  c.out.assign(reinterpret_cast<const char*>(proof.data()), proof.size());
  c.out_off = 0;
  return flush(c);
}

namespace {

/// Why a request header is not acceptable (its command and value length
/// checked; decode_header has checked the rest); empty when it is.
std::string request_problem(const char* bytes, wire::Header* h) {
  std::string why = wire::decode_header(bytes, h);
  if (!why.empty()) return why;
  if (!wire::is_request(h->cmd)) return "sent a reply code as a request";
  bool lengths_ok = h->cmd == Cmd::kSet || h->cmd == Cmd::kSetOnClose ? true
                    : h->cmd == Cmd::kAdd                             ? h->value_len == 8
                    : h->cmd == Cmd::kGet                             ? h->value_len == 0 || h->value_len == 8
                    : h->cmd == Cmd::kHeartbeat
                        ? h->value_len >= 8 && h->key_len + h->value_len - 8 <= wire::kMaxOnCloseBytes
                        : h->value_len == 0;
  if (!lengths_ok) return str_cat("bad value length ", h->value_len, " for its command");
  return {};
}

}  // namespace

bool TcpStoreServer::Impl::process(uint64_t id, Conn& c) {
  if (!c.authed) {
    if (!check_answer(c)) return false;
    // Not yet answered, or the proof still going out (on POLLOUT, then requests).
    if (!c.authed || c.out_pending()) return true;
  }
  size_t off = 0;
  bool ok = true;
  while (!c.parked && !c.out_pending() && c.in.size() - off >= wire::kHeaderBytes) {
    wire::Header h;
    std::string why = request_problem(c.in.data() + off, &h);
    if (!why.empty()) {
      OCCL_LOG(kInfo, kBootstrap, "rendezvous server dropped ", c.peer, ": ", why);
      return false;
    }
    const size_t total = wire::kHeaderBytes + h.key_len + h.value_len;
    if (c.in.size() - off < total) break;  // no reserve(): a claim is not data
    const char* p = c.in.data() + off + wire::kHeaderBytes;
    std::string key(p, h.key_len);
    std::string value(p + h.key_len, h.value_len);
    off += total;
    if (!execute(id, c, h.cmd, std::move(key), std::move(value))) {
      ok = false;
      break;
    }
    if (c.parked && off < c.in.size()) {
      OCCL_LOG(kInfo, kBootstrap, "rendezvous server dropped ", c.peer, ": sent more requests behind a waiting get");
      ok = false;
      break;
    }
  }
  if (off > 0) {
    c.in.erase(0, off);
    buffered_bytes -= off;
    c.served = true;
    if (token.empty()) mark_proven(c);
    c.idle_since = Clock::now();
    c.last_heard = c.idle_since;
  }
  if (c.in.empty() && c.in.capacity() > (1u << 20)) std::string().swap(c.in);
  if (ok && c.out_pending()) ok = flush(c);
  return ok;
}

bool TcpStoreServer::Impl::execute(uint64_t id, Conn& c, Cmd cmd, std::string key, std::string value) {
  switch (cmd) {
    case Cmd::kSet: {
      if (!put(id, c, key, std::move(value))) return true;
      reply(c, Cmd::kOk, {});
      wake_waiters(key, data.at(key).value);
      return true;
    }
    case Cmd::kGet: execute_get(id, c, std::move(key), value); return true;
    case Cmd::kAdd: execute_add(id, c, key, value); return true;
    case Cmd::kCheck: reply(c, data.count(key) != 0 ? Cmd::kOk : Cmd::kNotFound, {}); return true;
    case Cmd::kErase:
      remove(key);
      reply(c, Cmd::kOk, {});
      return true;
    case Cmd::kSetOnClose: execute_set_on_close(c, std::move(key), std::move(value)); return true;
    case Cmd::kHeartbeat: execute_heartbeat(c, std::move(key), value); return true;
    default: return false;
  }
}

void TcpStoreServer::Impl::execute_get(uint64_t id, Conn& c, std::string key, const std::string& value) {
  auto it = data.find(key);
  if (it != data.end()) {
    reply(c, Cmd::kValue, it->second.value);
  } else if (value.size() == 8 && wire::get_le(value.data(), 8) == 0) {
    reply(c, Cmd::kNotFound, {});
  } else {
    c.parked = true;
    c.parked_until = Clock::time_point::max();
    if (value.size() == 8) {
      const uint64_t ms = std::min<uint64_t>(wire::get_le(value.data(), 8), kMaxGetWaitMs);
      c.parked_until = Clock::now() + std::chrono::milliseconds(ms);
    }
    waiters[key].push_back(id);
    c.parked_key = std::move(key);
  }
}

void TcpStoreServer::Impl::execute_add(uint64_t id, Conn& c, const std::string& key, const std::string& value) {
  const auto delta = static_cast<int64_t>(wire::get_le(value.data(), 8));
  int64_t current = 0;
  auto it = data.find(key);
  if (it != data.end()) {
    auto parsed = detail::parse_int64(it->second.value);
    if (!parsed) {
      reply(c, Cmd::kError,
            str_cat("add: the value of key '", printable(key), "' is not an integer ('", printable(it->second.value),
                    "')"));
      return;
    }
    current = *parsed;
  }
  int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result)) {
    reply(c, Cmd::kError, str_cat("add: ", current, " + ", delta, " overflows int64 for key '", printable(key), "'"));
    return;
  }
  if (!put(id, c, key, std::to_string(result))) return;
  std::string encoded(8, '\0');
  wire::put_le(encoded.data(), static_cast<uint64_t>(result), 8);
  reply(c, Cmd::kValue, encoded);
  wake_waiters(key, data.at(key).value);
}

void TcpStoreServer::Impl::execute_set_on_close(Conn& c, std::string key, std::string value) {
  auto it = c.on_close.find(key);
  uint64_t after = c.on_close_bytes;
  if (it != c.on_close.end()) after -= key.size() + it->second.size();
  if (!value.empty()) after += key.size() + value.size();
  if (after > wire::kMaxOnCloseBytes) {
    reply(c, Cmd::kError,
          str_cat("set-on-close of key '", printable(key), "' refused: a connection may register at most ",
                  wire::kMaxOnCloseBytes, " bytes"));
    return;
  }
  if (it != c.on_close.end()) c.on_close.erase(it);
  if (!value.empty()) c.on_close.emplace(std::move(key), std::move(value));
  c.on_close_bytes = after;
  reply(c, Cmd::kOk, {});
}

void TcpStoreServer::Impl::execute_heartbeat(Conn& c, std::string key, const std::string& value) {
  // At most a year (any longer is never; keeps the time arithmetic in range).
  const auto limit = static_cast<int64_t>(wire::get_le(value.data(), 8));
  c.silence_ms = std::clamp<int64_t>(limit, 0, int64_t{365} * 24 * 3600 * 1000);
  c.silence_key = std::move(key);
  c.silence_notice = value.substr(8);
  c.last_heard = Clock::now();
  reply(c, Cmd::kValue, identity);
}

void TcpStoreServer::Impl::reply(Conn& c, Cmd code, const std::string& value) {
  if (!c.out_pending()) {
    c.out.clear();
    c.out_off = 0;
  }
  char header[wire::kHeaderBytes];
  wire::encode_header(wire::Header{code, 0, value.size()}, header);
  c.out.append(header, sizeof header);
  c.out += value;
}

bool TcpStoreServer::Impl::flush(Conn& c) {
  while (c.out_pending()) {
    ssize_t r = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (r > 0) {
      c.out_off += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  if (c.out.capacity() > (1u << 20)) {
    std::string().swap(c.out);  // do not keep a large reply's buffer around
  } else {
    c.out.clear();
  }
  c.out_off = 0;
  return true;
}

void TcpStoreServer::Impl::wake_waiters(const std::string& key, const std::string& value) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiters.erase(it);
  for (uint64_t id : ids) {
    auto cit = conns.find(id);
    if (cit == conns.end()) continue;
    Conn& w = cit->second;
    if (!w.parked || w.parked_key != key) continue;
    w.parked = false;
    w.parked_key.clear();
    w.parked_until = Clock::time_point::max();
    reply(w, Cmd::kValue, value);
    if (!flush(w)) w.dead = true;
  }
}

void TcpStoreServer::Impl::close_conn(uint64_t id) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  Conn& c = it->second;
  if (c.parked) {
    auto wit = waiters.find(c.parked_key);
    if (wit != waiters.end()) {
      auto& v = wit->second;
      v.erase(std::remove(v.begin(), v.end(), id), v.end());
      if (v.empty()) waiters.erase(wit);
    }
  }
  OCCL_LOG(kDebug, kBootstrap, "rendezvous server: client ", c.peer, " disconnected");
  mark_proven(c);  // it no longer counts as pending either way
  buffered_bytes -= c.in.size();
  // Its kSetOnClose registrations take effect now (bounded by
  // kMaxOnCloseBytes per connection, charged to nobody).
  auto notices = std::move(c.on_close);
  for (auto& [key, value] : notices) publish(key, std::move(value));
  // What it stored stays (other ranks still read it), charged to nobody
  // live, but still counted in the store's total.
  conns.erase(it);
}

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port, StoreLimits limits, const std::string* token)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.host = host;
  s.limits = limits;
  if (s.limits.max_connections == 0) s.limits.max_connections = default_max_connections(0);
  if (s.limits.max_pending == 0) s.limits.max_pending = default_max_pending();
  s.spare_fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  s.token = token != nullptr ? *token : get_setting("OMNICCL_JOB_TOKEN").value_or("");
  int gai_err = 0;
  auto addrs = net::resolve(host, port, /*passive=*/true, &gai_err);
  if (addrs.empty()) {
    fail(Status::kSystem, "cannot bind rendezvous server to ", host_port(host, port), ": cannot resolve '", host,
         "': ", gai_strerror(gai_err));
  }
  int last_err = 0;
  for (const auto& a : addrs) {
    UniqueFd fd(::socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      last_err = errno;
      continue;
    }
    int one = 1;
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a.sa(), a.len) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      last_err = errno;
      continue;
    }
    s.listen_fd = std::move(fd);
    break;
  }
  if (!s.listen_fd.valid()) {
    fail_errno(str_cat("cannot bind rendezvous server to ", host_port(host, port)), last_err);
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(s.listen_fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    fail_errno("getsockname of the rendezvous server socket", errno);
  }
  const auto* sa = reinterpret_cast<const sockaddr*>(&ss);
  s.port = ntohs(sa->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port
                                           : reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  s.wake_fd = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!s.wake_fd.valid()) fail_errno("eventfd for the rendezvous server", errno);
  s.owner_pid = ::getpid();
  char hostname[256] = {};
  (void)gethostname(hostname, sizeof hostname - 1);
  s.identity = str_cat("pid ", s.owner_pid, " on ", hostname);
  Impl* raw = impl_.get();
  s.thread = std::thread([raw] { raw->run(); });
  OCCL_LOG(kInfo, kBootstrap, "rendezvous server listening on ", host_port(host, s.port),
           s.token.empty() ? "" : " (job token required)");
  if (s.token.empty() && !detail::is_loopback_name(host)) {
    OCCL_LOG(kWarn, kBootstrap, "rendezvous server on ", host_port(host, s.port),
             " runs without a job token: processes on other hosts that can reach it can join the job, read "
             "its ranks' records or take a missing rank's place (other users of this host are refused); set "
             "OMNICCL_JOB_TOKEN to the same secret in every rank to close it (omniccl-run sets one for you), "
             "see SECURITY.md");
  }
}

TcpStoreServer::~TcpStoreServer() {
  if (!impl_) return;
  if (::getpid() != impl_->owner_pid) {
    // A forked child inherited this object but not the server thread: joining
    // would wait forever and the thread's state may be mid-update. Leave it
    // alone (the parent still serves) and let the process exit.
    (void)impl_.release();
    return;
  }
  impl_->stop.store(true, std::memory_order_release);
  uint64_t one = 1;
  ssize_t r = ::write(impl_->wake_fd.get(), &one, sizeof one);
  (void)r;
  if (impl_->thread.joinable()) impl_->thread.join();
  // impl_ (listening socket, every client connection) closes here.
}

uint16_t TcpStoreServer::port() const { return impl_->port; }

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

namespace {

/// Outcome of one bounded socket operation.
enum class Io { kOk, kClosed, kTimeout, kError };

/// A check run while a request waits (Store::set_wait_check); may throw.
using WaitCheck = std::function<void()>;

/// Waits until fd is ready for `events` or the deadline passes, running
/// `check` (if any) at least every 100 ms.
Io wait_fd(int fd, short events, Deadline deadline, int* err, const WaitCheck* check = nullptr) {
  const bool checked = check != nullptr && *check;
  for (;;) {
    if (checked) (*check)();
    if (deadline.expired()) return Io::kTimeout;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, deadline.remaining_ms(checked ? 100 : 1000));
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return Io::kError;
    }
    if (n > 0) return Io::kOk;  // readiness or error: the next call tells
  }
}

/// Sends len bytes, bounded by deadline.
Io send_all(int fd, const char* p, size_t len, Deadline deadline, int* err, const WaitCheck* check = nullptr) {
  while (len > 0) {
    ssize_t r = ::send(fd, p, len, MSG_NOSIGNAL);
    if (r > 0) {
      p += r;
      len -= static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Io w = wait_fd(fd, POLLOUT, deadline, err, check);
      if (w != Io::kOk) return w;
      continue;
    }
    *err = errno;
    return (errno == EPIPE || errno == ECONNRESET) ? Io::kClosed : Io::kError;
  }
  return Io::kOk;
}

/// Receives exactly len bytes, bounded by deadline.
Io recv_all(int fd, char* p, size_t len, Deadline deadline, int* err, const WaitCheck* check = nullptr) {
  while (len > 0) {
    ssize_t r = ::recv(fd, p, len, 0);
    if (r > 0) {
      p += r;
      len -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return Io::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      Io w = wait_fd(fd, POLLIN, deadline, err, check);
      if (w != Io::kOk) return w;
      continue;
    }
    *err = errno;
    return errno == ECONNRESET ? Io::kClosed : Io::kError;
  }
  return Io::kOk;
}

/// Whether a connected socket is connected to itself (TCP simultaneous open
/// when connecting to a local ephemeral port nobody listens on).
bool self_connected(int fd) {
  sockaddr_storage a{}, b{};
  socklen_t la = sizeof a, lb = sizeof b;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &la) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&b), &lb) != 0) return false;
  return la == lb && std::memcmp(&a, &b, la) == 0;
}

/// One non-blocking connect attempt to every address of host:port, bounded
/// by deadline. Returns a connected socket, or an invalid one with *err set
/// (ETIMEDOUT when the deadline passed).
UniqueFd connect_once(const std::string& host, uint16_t port, Deadline deadline, int* err, std::string* resolve_error,
                      const WaitCheck* check = nullptr) {
  int gai_err = 0;
  auto addrs = net::resolve(host, port, /*passive=*/false, &gai_err);
  if (addrs.empty()) {
    *resolve_error = gai_strerror(gai_err);
    *err = gai_err == EAI_AGAIN ? EAGAIN : EHOSTUNREACH;
    return UniqueFd();
  }
  resolve_error->clear();
  *err = ECONNREFUSED;
  for (const auto& a : addrs) {
    UniqueFd fd(::socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      *err = errno;
      continue;
    }
    if (::connect(fd.get(), a.sa(), a.len) != 0) {
      if (errno != EINPROGRESS && errno != EINTR) {
        *err = errno;
        continue;
      }
      int werr = 0;
      Io w = wait_fd(fd.get(), POLLOUT, deadline, &werr, check);
      if (w == Io::kTimeout) {
        *err = ETIMEDOUT;
        return UniqueFd();
      }
      if (w != Io::kOk) {
        *err = werr;
        continue;
      }
      int so_error = 0;
      socklen_t len = sizeof so_error;
      if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
      if (so_error != 0) {
        *err = so_error;
        continue;
      }
    }
    if (self_connected(fd.get())) {
      *err = ECONNREFUSED;
      continue;
    }
    net::set_nodelay(fd.get());
    return fd;
  }
  return UniqueFd();
}

/// Whether bytes that ended early (io not kOk) are the server's notice that
/// it shed the connection (wire::kShedMagic): nothing was executed, so the
/// client may connect again.
bool shed_notice(Io io, const char* bytes) {
  return io != Io::kOk && io != Io::kTimeout && std::memcmp(bytes, wire::kShedMagic, sizeof wire::kShedMagic) == 0;
}

/// Proves knowledge of the job token to the server on a fresh connection and
/// checks the server's proof (see store_wire.h). Bounded by deadline and by
/// 10 s, whichever comes first. False: the server shed the connection
/// before it was proven (connect again).
bool authenticate(int fd, const std::string& token, const std::string& where, Deadline deadline,
                  const WaitCheck* check = nullptr) {
  deadline = Deadline::min(deadline, Deadline::after_ms(10000));
  int err = 0;
  char challenge[sizeof wire::kAuthMagic + wire::kNonceBytes] = {};
  Io io = recv_all(fd, challenge, sizeof challenge, deadline, &err, check);
  if (shed_notice(io, challenge)) return false;
  if (io == Io::kTimeout) {
    fail(Status::kPeerFailure, "rendezvous server ", where,
         " did not ask for the job token (OMNICCL_JOB_TOKEN is set here; is it unset on rank 0?)");
  }
  if (io != Io::kOk) {
    fail(Status::kPeerFailure, "rendezvous server ", where, " closed the connection before authentication");
  }
  if (std::memcmp(challenge, wire::kAuthMagic, sizeof wire::kAuthMagic) != 0) {
    fail(Status::kPeerFailure, "rendezvous server ", where,
         " did not ask for the job token (OMNICCL_JOB_TOKEN is set here; is it unset on rank 0?)");
  }
  const std::string ns(challenge + sizeof wire::kAuthMagic, wire::kNonceBytes);
  const Digest mine = random_nonce();
  const std::string nc(reinterpret_cast<const char*>(mine.data()), mine.size());
  const Digest mac = hmac_sha256(token, str_cat(wire::kClientLabel, ns, nc));
  std::string answer(reinterpret_cast<const char*>(mac.data()), mac.size());
  answer += nc;
  io = send_all(fd, answer.data(), answer.size(), deadline, &err, check);
  Digest proof{};
  if (io == Io::kOk) io = recv_all(fd, reinterpret_cast<char*>(proof.data()), proof.size(), deadline, &err, check);
  if (shed_notice(io, reinterpret_cast<const char*>(proof.data()))) return false;
  if (io != Io::kOk) {
    fail(Status::kPeerFailure, "rendezvous server ", where,
         " refused this process's job token (OMNICCL_JOB_TOKEN differs from rank 0's)");
  }
  if (!digest_equal(proof, hmac_sha256(token, str_cat(wire::kServerLabel, nc, ns)))) {
    fail(Status::kPeerFailure, "rendezvous server ", where,
         " could not prove it knows the job token: it is not this job's server");
  }
  return true;
}

/// How long a live server may leave a request (other than a waiting get)
/// unanswered: the liveness timeout, plus room for a rank's own heartbeat
/// (sent at most a second later) to be the first to tell, naming the
/// server's process. 0: no bound.
int64_t answer_timeout(int64_t liveness_ms) { return liveness_ms > 0 ? liveness_ms + 2000 : 0; }

/// Client side of the TCP store: one connection, one request at a time
/// (a mutex serialises threads sharing the object).
class TcpStore final : public Store {
 public:
  /// Wraps an established connection to host:port.
  TcpStore(std::string host, uint16_t port, UniqueFd fd, int64_t op_timeout_ms, std::string token)
      : host_(std::move(host)),
        port_(port),
        fd_(std::move(fd)),
        op_timeout_ms_(op_timeout_ms),
        answer_timeout_ms_(answer_timeout(setup_heartbeat_timeout_ms())),
        token_(std::move(token)) {}

  /// Sets key to value on the server.
  void set(const std::string& key, const std::string& value) override {
    request(Cmd::kSet, "set", key, value, op_deadline());
  }

  /// Waits (parked on the server, not polling) until key exists or the
  /// deadline passes. The server answers "not found" at the deadline, so a
  /// wait that ends keeps the connection (a late reply on a slow or lossy
  /// network cannot break it); only a server silent kGetGraceMs beyond the
  /// deadline is treated as lost.
  std::string get(const std::string& key, Deadline deadline) override {
    const int64_t bound = deadline.remaining_ms(static_cast<int>(kMaxGetWaitMs));
    std::string encoded(8, '\0');
    wire::put_le(encoded.data(), static_cast<uint64_t>(bound), 8);
    const auto start = Clock::now();
    Reply r = request(Cmd::kGet, "get", key, encoded, Deadline::after_ms(bound + kGetGraceMs));
    if (r.code == Cmd::kNotFound) io_failed(Io::kTimeout, 0, "get", key, start);
    return r.value;
  }

  /// Adds delta to the integer at key on the server.
  int64_t add(const std::string& key, int64_t delta) override {
    std::string encoded(8, '\0');
    wire::put_le(encoded.data(), static_cast<uint64_t>(delta), 8);
    Reply r = request(Cmd::kAdd, "add", key, encoded, op_deadline());
    if (r.value.size() != 8) {
      fail(Status::kPeerFailure, "rendezvous server ", where(), " sent an invalid reply to add");
    }
    return static_cast<int64_t>(wire::get_le(r.value.data(), 8));
  }

  /// Asks the server whether key exists.
  bool check(const std::string& key) override {
    return request(Cmd::kCheck, "check", key, {}, op_deadline()).code == Cmd::kOk;
  }

  /// Erases key on the server.
  void erase(const std::string& key) override { request(Cmd::kErase, "erase", key, {}, op_deadline()); }

  /// Registers key = value to be set by the server when this connection
  /// closes ("" cancels).
  void set_on_close(const std::string& key, const std::string& value) override {
    request(Cmd::kSetOnClose, "set-on-close", key, value, op_deadline());
  }

  /// Refreshes this connection's liveness watch on the server.
  std::string heartbeat(const std::string& key, const std::string& notice, int64_t silence_ms,
                        Deadline deadline) override {
    std::string value(8, '\0');
    wire::put_le(value.data(), static_cast<uint64_t>(silence_ms < 0 ? 0 : silence_ms), 8);
    value += notice;
    return request(Cmd::kHeartbeat, "heartbeat", key, value, deadline).value;
  }

  /// Runs `check` while requests wait.
  void set_wait_check(std::function<void()> check) override {
    std::lock_guard<std::mutex> lock(mu_);
    check_ = std::move(check);
  }

 private:
  /// A decoded reply.
  struct Reply {
    Cmd code = Cmd::kOk;
    std::string value;
  };

  /// "host:port" of the server, for messages.
  std::string where() const { return host_port(host_, port_); }

  /// Deadline for operations the interface gives none.
  Deadline op_deadline() const { return Deadline::after_ms(op_timeout_ms_); }

  /// Sends one request and reads its reply. Any failure drops the
  /// connection (its state is unknown); the next call reconnects once.
  Reply request(Cmd cmd, const char* op, const std::string& key, const std::string& value, Deadline deadline) {
    check_arg(key.size() <= wire::kMaxKeyBytes, "store key of ", key.size(), " bytes is too long (limit 1 MiB)");
    check_arg(value.size() <= wire::kMaxValueBytes, "store value of ", value.size(), " bytes for key '", printable(key),
              "' is too large (limit 64 MiB)");
    std::lock_guard<std::mutex> lock(mu_);
    const auto start = Clock::now();
    // A live server answers every request but a waiting get at once: one
    // unanswered for the liveness timeout comes from a stopped process.
    // (A heartbeat has its own deadline and says what its timeout means.)
    const bool bounded = cmd != Cmd::kGet && cmd != Cmd::kHeartbeat && answer_timeout_ms_ > 0 &&
                         Deadline::after_ms(answer_timeout_ms_).time() < deadline.time();
    if (bounded) deadline = Deadline::min(deadline, Deadline::after_ms(answer_timeout_ms_));
    if (!fd_.valid()) reconnect(deadline);
    Reply r;
    try {
      r = exchange_admitted(cmd, op, key, value, deadline, start);
    } catch (const Error& e) {
      fd_.reset();
      if (bounded && e.status() == Status::kTimeout) {
        fail(Status::kPeerFailure, "rendezvous server ", where(), " stopped responding: no answer to ", op, " of key '",
             printable(key), "' within ", answer_timeout_ms_,
             " ms while its connection stayed open (the process serving it is stopped (SIGSTOP, a debugger), "
             "hung, or its host is frozen; OMNICCL_SETUP_HEARTBEAT_TIMEOUT)");
      }
      throw;
    } catch (...) {
      fd_.reset();
      throw;
    }
    // A refusal (e.g. add on a non-integer) leaves the connection in sync.
    if (r.code == Cmd::kError) fail(Status::kInvalidArgument, r.value);
    return r;
  }

  /// exchange(), on a new connection each time the server sheds the one it
  /// has (a fresh connection among a stranger's flood), until the deadline.
  Reply exchange_admitted(Cmd cmd, const char* op, const std::string& key, const std::string& value, Deadline deadline,
                          Clock::time_point start) {
    for (auto backoff = std::chrono::milliseconds(10);; backoff = std::min(backoff * 2, kShedBackoffMax)) {
      if (std::optional<Reply> r = exchange(cmd, op, key, value, deadline, start)) return *r;
      fd_.reset();
      wait_after_shed(backoff, deadline);
      reconnect(deadline);
    }
  }

  /// Waits a little before connecting again after the server shed this
  /// client's connection; fails once the deadline has passed.
  void wait_after_shed(std::chrono::milliseconds backoff, Deadline deadline) const {
    if (deadline.expired()) {
      fail(Status::kTimeout, "rendezvous server ", where(),
           " kept closing this client's new connections before serving them until the deadline: it sheds "
           "connections that prove nothing, and something is opening many of them (see its log)");
    }
    std::this_thread::sleep_for(std::min(backoff, std::chrono::milliseconds(deadline.remaining_ms(1000))));
  }

  /// Re-establishes the connection after an earlier failure (one attempt:
  /// a server that is gone stays gone; but one the server shed before it
  /// was proven is made again, until the deadline).
  void reconnect(Deadline deadline) {
    for (auto backoff = std::chrono::milliseconds(10);; backoff = std::min(backoff * 2, kShedBackoffMax)) {
      int err = 0;
      std::string resolve_error;
      fd_ = connect_once(host_, port_, deadline, &err, &resolve_error, &check_);
      if (!fd_.valid()) {
        fail(Status::kPeerFailure, "rendezvous server ", where(),
             " is no longer reachable: ", resolve_error.empty() ? errno_text(err) : resolve_error);
      }
      if (token_.empty()) return;
      bool proven = false;
      try {
        proven = authenticate(fd_.get(), token_, where(), deadline, &check_);
      } catch (...) {
        fd_.reset();
        throw;
      }
      if (proven) return;
      fd_.reset();
      wait_after_shed(backoff, deadline);
    }
  }

  /// Turns a failed socket operation into the matching Error.
  [[noreturn]] void io_failed(Io io, int err, const char* op, const std::string& key, Clock::time_point start) const {
    if (io == Io::kTimeout) {
      if (std::strcmp(op, "get") == 0) {
        fail(Status::kTimeout, "timed out after ", elapsed_ms(start), " ms waiting for key '", printable(key),
             "' from rendezvous server ", where());
      }
      fail(Status::kTimeout, "timed out after ", elapsed_ms(start), " ms in ", op, " of key '", printable(key),
           "' on rendezvous server ", where());
    }
    if (io == Io::kClosed) {
      fail(Status::kPeerFailure, "rendezvous server ", where(), " closed the connection during ", op, " of key '",
           printable(key), "' (did the server process exit?)");
    }
    fail(Status::kPeerFailure, "connection to rendezvous server ", where(), " failed during ", op, " of key '",
         printable(key), "': ", errno_text(err));
  }

  /// The request/reply exchange on the current connection.
  /// nullopt: the server shed this fresh connection before executing the
  /// request (wire::kShedMagic).
  std::optional<Reply> exchange(Cmd cmd, const char* op, const std::string& key, const std::string& value,
                                Deadline deadline, Clock::time_point start) {
    std::string msg = wire::encode_message(cmd, key, value);
    int err = 0;
    Io io = send_all(fd_.get(), msg.data(), msg.size(), deadline, &err, &check_);
    if (io != Io::kOk) io_failed(io, err, op, key, start);
    char header[wire::kHeaderBytes] = {};
    io = recv_all(fd_.get(), header, sizeof header, deadline, &err, &check_);
    if (shed_notice(io, header)) return std::nullopt;
    if (io != Io::kOk) io_failed(io, err, op, key, start);
    if (std::memcmp(header, wire::kAuthMagic, sizeof wire::kAuthMagic) == 0) {
      fail(Status::kPeerFailure, "rendezvous server ", where(),
           " requires the job token: set OMNICCL_JOB_TOKEN to the same value as on rank 0");
    }
    wire::Header h;
    std::string why = wire::decode_header(header, &h);
    if (why.empty() && (!wire::is_reply(h.cmd) || h.key_len != 0)) why = "not a reply";
    if (!why.empty()) {
      fail(Status::kPeerFailure, "rendezvous server ", where(), " sent an invalid reply to ", op, " of key '",
           printable(key), "' (", why, "); is another program listening on that port?");
    }
    Reply r;
    r.code = h.cmd;
    r.value.resize(h.value_len);
    io = recv_all(fd_.get(), r.value.data(), r.value.size(), deadline, &err, &check_);
    if (io != Io::kOk) io_failed(io, err, op, key, start);
    const bool expected =
        r.code == Cmd::kError || (cmd == Cmd::kGet ? r.code == Cmd::kValue || r.code == Cmd::kNotFound
                                  : cmd == Cmd::kAdd || cmd == Cmd::kHeartbeat ? r.code == Cmd::kValue
                                  : cmd == Cmd::kCheck ? r.code == Cmd::kOk || r.code == Cmd::kNotFound
                                                       : r.code == Cmd::kOk);
    if (!expected) {
      fail(Status::kPeerFailure, "rendezvous server ", where(), " sent an unexpected reply to ", op, " of key '",
           printable(key), "'");
    }
    return r;
  }

  std::mutex mu_;
  std::string host_;
  uint16_t port_;
  UniqueFd fd_;
  int64_t op_timeout_ms_;
  int64_t answer_timeout_ms_;  ///< answer_timeout(OMNICCL_SETUP_HEARTBEAT_TIMEOUT)
  std::string token_;          ///< OMNICCL_JOB_TOKEN; empty = no authentication
  WaitCheck check_;            ///< set_wait_check
};

}  // namespace

void Store::set_on_close(const std::string& key, const std::string&) {
  fail(Status::kInvalidArgument, "this store cannot set key '", printable(key), "' when a client leaves");
}

std::string Store::heartbeat(const std::string& key, const std::string&, int64_t, Deadline) {
  fail(Status::kInvalidArgument, "this store has no heartbeat (key '", printable(key), "')");
}

void Store::set_wait_check(std::function<void()>) {}

void Store::mark_alive(const std::string&, const std::string&, int64_t) {}

void Store::unmark_alive(const std::string&) {}

Store::MarkState Store::probe_mark(const std::string&, int64_t) { return {}; }

std::unique_ptr<Store> connect_tcp_store(const std::string& host, uint16_t port, Deadline deadline,
                                         const std::string* token_override) {
  check_arg(!host.empty(), "rendezvous host is empty");
  check_arg(port != 0, "rendezvous port 0 is not a valid port for ", host);
  const int64_t op_timeout_ms = detail::default_op_timeout_ms();
  const std::string token = token_override != nullptr ? *token_override : get_setting("OMNICCL_JOB_TOKEN").value_or("");
  const auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  int err = 0;
  int last_err = 0;  // the last informative error (not "cut off by our deadline")
  std::string resolve_error;
  bool shed_seen = false;  // the server closed a connection unproven (store_wire.h)
  for (int attempt = 1;; ++attempt) {
    UniqueFd fd = connect_once(host, port, deadline, &err, &resolve_error);
    if (err != ETIMEDOUT || last_err == 0) last_err = err;
    if (fd.valid()) {
      OCCL_LOG(kDebug, kBootstrap, "connected to rendezvous server ", host_port(host, port), " after ", attempt,
               " attempt(s)");
      if (token.empty() || authenticate(fd.get(), token, host_port(host, port), deadline)) {
        return std::make_unique<TcpStore>(host, port, std::move(fd), op_timeout_ms, token);
      }
      shed_seen = true;
    }
    if (deadline.expired()) break;
    // Refused (server not up yet), unreachable, resolving: all may heal
    // before the deadline, so wait a little and try again.
    auto left = std::chrono::milliseconds(deadline.remaining_ms(1000));
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
    if (deadline.expired()) break;
  }
  fail(Status::kTimeout, "timed out after ", elapsed_ms(start), " ms connecting to rendezvous server ",
       host_port(host, port),
       " (last error: ", resolve_error.empty() ? errno_text(last_err) : "cannot resolve host: " + resolve_error,
       shed_seen ? "; the server shed some of this client's connections before they were proven: something else "
                   "is opening many connections to it"
                 : "",
       "); is the server (rank 0 / MASTER_ADDR) running and reachable?");
}

std::string local_address_towards(const std::string& host, uint16_t port) {
  if (detail::is_loopback_name(host)) return "127.0.0.1";
  int gai_err = 0;
  auto addrs = net::resolve(host, port == 0 ? 1 : port, /*passive=*/false, &gai_err);
  if (addrs.empty()) {
    fail(Status::kInvalidArgument, "cannot resolve rendezvous host '", host, "': ", gai_strerror(gai_err));
  }
  int last_err = 0;
  for (const auto& a : addrs) {
    // connect() on a UDP socket sends nothing; it only picks the route and
    // thereby the source address.
    UniqueFd fd(::socket(a.family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid() || ::connect(fd.get(), a.sa(), a.len) != 0) {
      last_err = errno;
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      last_err = errno;
      continue;
    }
    std::string addr = net::address_text(reinterpret_cast<const sockaddr*>(&ss));
    return detail::is_loopback_name(addr) ? "127.0.0.1" : addr;
  }
  fail_errno(str_cat("cannot find a local address that reaches ", host_port(host, port)), last_err);
}

}  // namespace omniccl::bootstrap
