// A split's liveness heartbeat over the parent mesh's control sockets
// (Mesh::start_heartbeat in mesh.h).
//
// A stopped process (SIGSTOP, hung, a frozen VM) keeps its sockets open, so
// its peers need a heartbeat to tell. The heartbeat comes from a thread that
// does nothing else and sleeps in between, so a rank that is slow (many
// ranks per core, sanitizers) still sends it; receiving it costs nothing
// extra (it arrives on the control sockets that sleep() already polls). Each
// heartbeat carries the split's generation (the parent's split count), so a
// late one of an earlier split cannot make a peer look as if it had entered
// this one.
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "common/net.h"
#include "common/settings.h"
#include "transport/mesh.h"
#include "transport/mesh_liveness.h"

namespace omniccl::transport {

namespace {
constexpr char kHeartbeat = 'H';

/// Whether /proc/PID/stat shows the process stopped: state T (a signal:
/// SIGSTOP, SIGTSTP) or t (a tracer, such as a debugger). False when it
/// cannot be read.
bool process_stopped(int pid) {
  char path[40];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  // "PID (COMM) S ...": COMM may hold spaces and parentheses, so the state
  // follows the last ')'.
  const char* close = std::strrchr(buf, ')');
  if (n == 0 || close == nullptr || close + 2 >= buf + n) return false;
  return close[2] == 'T' || close[2] == 't';
}
}  // namespace

void Mesh::start_heartbeat(uint64_t generation, int64_t timeout_ms, const std::string& what) {
  stop_heartbeat();
  if (timeout_ms <= 0 || size_ == 1) return;
  auto l = std::make_unique<Liveness>();
  l->generation = std::to_string(generation);
  l->timeout_ms = timeout_ms;
  l->what = what;
  l->expected.assign(size_t(size_), 1);
  l->expected[size_t(rank_)] = 0;
  l->heard.assign(size_t(size_), Clock::time_point{});
  l->local_pid.assign(size_t(size_), -1);
  l->stopped_since.assign(size_t(size_), Clock::time_point{});
  // The control sockets to write to, read here (the thread must not look
  // at the peers' state, which this thread changes while it sleeps).
  std::vector<int> fds = control_fds();
  std::string msg(5, '\0');
  msg[0] = kHeartbeat;
  const auto len = static_cast<uint32_t>(l->generation.size());
  std::memcpy(&msg[1], &len, 4);  // the framing of send_control
  msg += l->generation;
  send_locked_ = true;  // before the thread exists: no send is in flight
  Liveness* raw = l.get();
  const auto interval = std::chrono::milliseconds(setup_heartbeat_interval_ms(timeout_ms));
  l->thread = std::thread([this, raw, interval, fds = std::move(fds), msg = std::move(msg)] {
    std::unique_lock<std::mutex> lock(raw->mu);
    do {
      lock.unlock();
      for (int fd : fds) {
        std::lock_guard<std::mutex> sending(send_mu_);
        try {
          net::write_all(fd, msg.data(), msg.size(), Deadline::after_ms(1000), "heartbeat");
        } catch (const Error&) {
          // best effort: a peer that is gone or stuck is found elsewhere
        }
      }
      lock.lock();
    } while (!raw->cv.wait_for(lock, interval, [raw] { return raw->stop; }));
  });
  liveness_ = std::move(l);
}

void Mesh::expect_heartbeats(const std::vector<int>& peers) {
  if (!liveness_) return;
  std::fill(liveness_->expected.begin(), liveness_->expected.end(), 0);
  for (int p : peers) {
    if (p >= 0 && p < size_ && p != rank_) liveness_->expected[size_t(p)] = 1;
  }
}

void Mesh::stop_heartbeat() {
  if (!liveness_) return;
  {
    std::lock_guard<std::mutex> lock(liveness_->mu);
    liveness_->stop = true;
  }
  liveness_->cv.notify_all();
  if (liveness_->thread.joinable()) liveness_->thread.join();
  liveness_.reset();
  send_locked_ = false;
}

void Mesh::note_heartbeat(int peer, const std::string& payload) {
  if (liveness_ && payload == liveness_->generation) liveness_->heard[size_t(peer)] = Clock::now();
}

void Mesh::check_heartbeats() {
  if (pending_status_ != Status::kSuccess) return;
  const auto now = Clock::now();
  const auto limit = std::chrono::milliseconds(liveness_->timeout_ms);
  // Peers not in the split yet: /proc is read at most every 250 ms.
  const bool look = now >= liveness_->next_proc_look;
  if (look) liveness_->next_proc_look = now + std::chrono::milliseconds(250);
  for (int p = 0; p < size_; ++p) {
    const Clock::time_point heard = liveness_->heard[size_t(p)];
    if (!liveness_->expected[size_t(p)]) continue;
    if (heard == Clock::time_point{}) {
      if (look && stopped_outside(p, now)) return;
      continue;
    }
    if (now - heard <= limit) continue;
    pending_status_ = Status::kPeerFailure;
    pending_message_ = str_cat(describe(p), " stopped responding during ", liveness_->what, ": no heartbeat for ",
                               liveness_->timeout_ms,
                               " ms while its control socket stayed open (the process is stopped (SIGSTOP, a "
                               "debugger), hung, or its host is frozen; OMNICCL_SETUP_HEARTBEAT_TIMEOUT)");
    pending_remote_ = false;
    OCCL_LOG(kWarn, kTransport, "rank ", rank_, ": ", pending_message_);
    return;
  }
}

bool Mesh::stopped_outside(int peer, Clock::time_point now) {
  Liveness& l = *liveness_;
  int& pid = l.local_pid[size_t(peer)];
  if (pid < 0) pid = local_pid(peer);
  if (pid == 0) return false;  // another host: only the deadline tells
  Clock::time_point& since = l.stopped_since[size_t(peer)];
  if (!process_stopped(pid)) {
    since = Clock::time_point{};
    return false;
  }
  if (since == Clock::time_point{}) since = now;
  if (now - since <= std::chrono::milliseconds(l.timeout_ms)) return false;
  pending_status_ = Status::kPeerFailure;
  pending_message_ = str_cat(describe(peer), " is stopped and has not entered ", l.what, ": its process (pid ", pid,
                             " here) has been stopped for more than ", l.timeout_ms, " ms (SIGSTOP, a debugger; /proc/",
                             pid, "/stat says so; OMNICCL_SETUP_HEARTBEAT_TIMEOUT)");
  pending_remote_ = false;
  OCCL_LOG(kWarn, kTransport, "rank ", rank_, ": ", pending_message_);
  return true;
}

}  // namespace omniccl::transport
