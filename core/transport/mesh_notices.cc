// Notices a rank must hear of even when its own operation has ended: a
// peer's error report (a mismatch found by the receivers of a broadcast
// whose root has already returned) and a collective a peer rejected for its
// arguments. Waits read them on the control sockets; an operation that
// never waits would not, so each rank also has a word in the host block
// that its peers on this host bump after sending one, and every operation
// first compares that word with the value it last read (one load), reading
// the sockets only when it moved. A peer on another host rings no word: its
// socket is read before every operation (a poll(2) that a TCP operation's
// own system calls dwarf).
#include <poll.h>

#include <cstdlib>

#include "common/log.h"
#include "transport/control_wire.h"
#include "transport/mesh.h"

namespace omniccl::transport {

namespace {

// One word per rank, each on its own cache line: a notice for one rank does
// not disturb the line another rank reads before each operation.
constexpr size_t kWordStride = 64;
// Rejections and withdrawn calls remembered, by number: a notice or a late
// message arrives within milliseconds of the call it names, far fewer calls
// than this later.
constexpr size_t kKeptRejections = 64;

size_t words_offset(size_t user_bytes) { return (user_bytes + kWordStride - 1) / kWordStride * kWordStride; }

// The oldest go first: numbers only grow.
template <class Container>
void keep_recent(Container& c) {
  while (c.size() > kKeptRejections) c.erase(c.begin());
}

}  // namespace

size_t Mesh::host_block_bytes(size_t user_bytes, int size) {
  if (user_bytes == 0) return 0;
  return words_offset(user_bytes) + kWordStride * static_cast<size_t>(size);
}

void Mesh::setup_notices(const std::vector<bool>& on_block, size_t user_bytes) {
  peer_notice_word_.assign(size_t(size_), nullptr);
  char* words = host_block_ ? static_cast<char*>(host_block_->data()) + words_offset(user_bytes) : nullptr;
  auto word = [&](int r) { return reinterpret_cast<std::atomic<uint32_t>*>(words + kWordStride * size_t(r)); };
  if (words != nullptr) {
    notice_word_ = word(rank_);
    notices_seen_ = notice_word_->load(std::memory_order_acquire);
  }
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (words != nullptr && on_block[size_t(p)]) {
      peer_notice_word_[size_t(p)] = word(p);
    } else {
      poll_notices_ = true;
    }
  }
}

void Mesh::ring_notice(int peer) {
  // After the notice is in the socket: a reader that sees the word move
  // finds it there.
  if (size_t(peer) < peer_notice_word_.size() && peer_notice_word_[size_t(peer)] != nullptr) {
    peer_notice_word_[size_t(peer)]->fetch_add(1, std::memory_order_release);
  }
}

void Mesh::take_notices(uint64_t done_seq) {
  if (notice_word_ != nullptr) notices_seen_ = notice_word_->load(std::memory_order_acquire);
  std::vector<pollfd> none;
  sleep(none, 0);
  throw_if_failed();
  drop_rejections_upto(done_seq);
}

void Mesh::hear_rejection(uint64_t seq) {
  std::vector<pollfd> none;
  sleep(none, 0);
  throw_if_rejected(seq);
}

void Mesh::reject_call(uint64_t seq, const std::string& why) {
  own_rejections_.insert(seq);
  keep_recent(own_rejections_);
  peer_rejections_.erase(seq);
  rejections_waiting_ = !peer_rejections_.empty();
  const std::string payload = str_cat(seq, " ", why);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    send_control(p, wire::kRejectedCall, payload, false);
    ring_notice(p);
  }
}

const std::string* Mesh::peer_rejection(uint64_t seq) const {
  auto it = peer_rejections_.find(seq);
  return it == peer_rejections_.end() ? nullptr : &it->second.why;
}

void Mesh::note_rejection(int peer, const std::string& payload) {
  // The rejecting rank tells every peer itself (reject_call) and nobody
  // passes a notice on, so the sender is the rank that rejected the call.
  const uint64_t seq = wire::answer_seq(payload);
  // A call this rank rejected or withdrew already: nobody waits for it.
  if (seq == 0 || withdrawn(seq)) return;
  const size_t space = payload.find(' ');
  std::string why = space == std::string::npos || space + 1 >= payload.size()
                        ? str_cat(describe(peer), " rejected its call #", seq)
                        : payload.substr(space + 1);
  peer_rejections_.emplace(seq, PeerRejection{peer, std::move(why)});
  keep_recent(peer_rejections_);
  rejections_waiting_ = true;
}

void Mesh::note_withdrawn(uint64_t seq) {
  auto it = peer_rejections_.find(seq);
  withdrawn_.insert(seq);
  keep_recent(withdrawn_);
  if (it != peer_rejections_.end()) peer_rejections_.erase(it);
  rejections_waiting_ = !peer_rejections_.empty();
}

void Mesh::drop_rejections_upto(uint64_t seq) {
  while (!peer_rejections_.empty() && peer_rejections_.begin()->first <= seq) {
    auto it = peer_rejections_.begin();
    OCCL_LOG(kWarn, kColl, "collective #", it->first,
             " had completed here (its part was only to send) when a peer rejected it: ", it->second.why,
             "; that peer dropped this rank's data");
    peer_rejections_.erase(it);
  }
  rejections_waiting_ = !peer_rejections_.empty();
}

void Mesh::throw_if_rejected(uint64_t seq) {
  if (!rejections_waiting_) return;
  if (seq > 0) drop_rejections_upto(seq - 1);
  auto it = peer_rejections_.find(seq);
  if (it == peer_rejections_.end()) return;  // a later call: withdrawn when this rank gets there
  throw RejectedCall{seq, it->second.why, it->second.by};
}

void Mesh::fail_from_another_thread(Status status, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(foreign_mu_);
    if (!foreign_failed_.load(std::memory_order_relaxed)) {
      foreign_status_ = status;
      foreign_message_ = message;
    }
    foreign_failed_.store(true, std::memory_order_release);
  }
  wake();
}

void Mesh::adopt_foreign_failure() {
  std::lock_guard<std::mutex> lock(foreign_mu_);
  if (pending_status_ == Status::kSuccess) {
    pending_status_ = foreign_status_;
    pending_message_ = foreign_message_;
    pending_remote_ = false;  // this rank's error: the engine tells every peer
  }
}

}  // namespace omniccl::transport
