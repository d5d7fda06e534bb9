#include "communicator/p2p_match.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <utility>

#include "common/settings.h"

namespace omniccl {

namespace {

constexpr uint64_t kDefaultUnexpectedBytes = uint64_t{256} << 20;

uint64_t unexpected_budget() {
  auto v = get_setting("OMNICCL_P2P_UNEXPECTED_BYTES");
  if (!v) return kDefaultUnexpectedBytes;
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  check_arg(ec == std::errc() && end == v->data() + v->size(), "OMNICCL_P2P_UNEXPECTED_BYTES='", *v,
            "' is not a number of bytes");
  return n;
}

std::string tag_text(int tag) { return tag == kAnyTag ? std::string("ANY_TAG") : std::to_string(tag); }
std::string source_text(int source) {
  return source == kAnySource ? std::string("ANY_SOURCE") : str_cat("rank ", source);
}

}  // namespace

P2PMatcher::P2PMatcher(int rank, int size, Executor* exec)
    : rank_(rank), exec_(exec != nullptr ? exec : &own_exec_), budget_(unexpected_budget()), landing_(size_t(size)) {}

void P2PMatcher::finish(Posted& r, Status st, std::string message, RecvStatus rs) {
  rs.elem_bytes = dtype_size(r.dtype);
  if (r.status != nullptr) *r.status = rs;
  r.work->complete(st, std::move(message), rs);
  r.work.reset();
}

void P2PMatcher::deliver(Posted& r, const Message& m) {
  const uint64_t bytes = m.data.size();
  RecvStatus rs{m.source, m.tag, bytes};
  if (m.dtype != r.dtype) {
    rs.bytes = 0;
    finish(r, Status::kMismatch,
           str_cat("recv from ", source_text(r.source), " (tag ", tag_text(r.tag), "): the message from rank ",
                   m.source, " (tag ", m.tag, ") has dtype ", dtype_name(m.dtype), ", the receive buffer ",
                   dtype_name(r.dtype), "; the message was dropped"),
           rs);
    return;
  }
  const uint64_t n = std::min(bytes, r.capacity);
  if (n > 0) exec_->copy(r.dst, m.data.data(), n);
  if (bytes > r.capacity) {
    rs.bytes = n;
    const size_t es = dtype_size(r.dtype);
    finish(r, Status::kTruncated,
           str_cat("recv from ", source_text(r.source), " (tag ", tag_text(r.tag), "): message truncated: rank ",
                   m.source, " sent ", bytes / es, " elements (tag ", m.tag, "), the receive buffer holds ",
                   r.capacity / es, "; the first ", n / es, " were stored"),
           rs);
    return;
  }
  finish(r, Status::kSuccess, "", rs);
}

void P2PMatcher::answer_probe(Posted& r, std::deque<Message>::iterator it) {
  r.dtype = it->dtype;  // the status's count is in the sender's elements
  RecvStatus rs{it->source, it->tag, it->data.size()};
  if (r.claim) {
    // Still counted in unexpected_bytes_ until mrecv takes it.
    rs.message = next_message_++;
    claimed_.emplace_back(rs.message, std::move(*it));
    unexpected_.erase(it);
  }
  finish(r, Status::kSuccess, "", rs);
}

bool P2PMatcher::mrecv(uint64_t message, Posted& r) {
  for (auto it = claimed_.begin(); it != claimed_.end(); ++it) {
    if (it->first != message) continue;
    Message m = std::move(it->second);
    claimed_.erase(it);
    unexpected_bytes_ -= m.data.size();
    matched(m);  // the sender first: the receiver, once complete, may test it
    deliver(r, m);
    return true;
  }
  return false;
}

bool P2PMatcher::end_probe() {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (!it->probe || !it->once) continue;
    Posted r = std::move(*it);
    posted_.erase(it);
    for (auto m = unexpected_.begin(); m != unexpected_.end(); ++m) {
      if (!matches(r, m->source, m->tag)) continue;
      answer_probe(r, m);
      return true;
    }
    RecvStatus none;
    none.source = kAnySource;  // nothing found
    finish(r, Status::kSuccess, "", none);
    return true;
  }
  return false;
}

bool P2PMatcher::post(Posted r) {
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (!matches(r, it->source, it->tag)) continue;
    if (r.probe) {
      answer_probe(r, it);
      return true;
    }
    Message m = std::move(*it);
    unexpected_.erase(it);
    unexpected_bytes_ -= m.data.size();
    matched(m);  // the sender first: the receiver, once complete, may test it
    deliver(r, m);
    return true;
  }
  posted_.push_back(std::move(r));
  return false;
}

void P2PMatcher::matched(Message& m) {
  if (m.sync_work) {
    m.sync_work->complete(Status::kSuccess, "");  // a synchronous send to this rank itself
    m.sync_work.reset();
  } else if (m.sync) {
    acks_.push_back(Ack{m.source, m.seq});
  }
  m.sync = false;
}

bool P2PMatcher::take_ack(Ack& a) {
  if (acks_.empty()) return false;
  a = acks_.front();
  acks_.pop_front();
  return true;
}

void P2PMatcher::await_ack(int peer, uint64_t seq, std::shared_ptr<Work> work) {
  awaiting_.push_back(Awaiting{peer, seq, std::move(work)});
}

void P2PMatcher::sent(const Work* w) {
  for (auto it = awaiting_.begin(); it != awaiting_.end(); ++it) {
    if (it->work.get() != w) continue;
    it->sent = true;
    if (it->acked) {
      it->work->complete(Status::kSuccess, "");
      awaiting_.erase(it);
    }
    return;
  }
}

void P2PMatcher::acked(int peer, uint64_t seq) {
  for (auto it = awaiting_.begin(); it != awaiting_.end(); ++it) {
    if (it->peer != peer || it->seq != seq) continue;
    it->acked = true;
    if (it->sent) {
      it->work->complete(Status::kSuccess, "");
      awaiting_.erase(it);
    }
    return;
  }
  // No such send (it failed when its step ended before the ack came): nothing to do.
}

bool P2PMatcher::awaits(int peer) const {
  return std::any_of(awaiting_.begin(), awaiting_.end(), [&](const Awaiting& a) { return a.peer == peer; });
}

bool P2PMatcher::cancel(const Work* w) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (it->work.get() != w || it->probe) continue;
    Posted r = std::move(*it);
    posted_.erase(it);
    RecvStatus rs;
    rs.source = r.source;
    rs.tag = r.tag;
    rs.cancelled = true;
    finish(r, Status::kSuccess, "", rs);
    return true;
  }
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (it->sync_work.get() != w || w == nullptr) continue;
    std::shared_ptr<Work> work = std::move(it->sync_work);
    unexpected_bytes_ -= it->data.size();
    unexpected_.erase(it);
    RecvStatus rs;
    rs.cancelled = true;
    work->complete(Status::kSuccess, "", rs);
    return true;
  }
  return false;
}

void P2PMatcher::reserve_unexpected(uint64_t bytes, int source, int tag) {
  if (bytes > budget_ || unexpected_bytes_ > budget_ - bytes) {
    fail(Status::kOutOfMemory, "a message from rank ", source, " (tag ", tag, ", ", bytes,
         " bytes) arrived before a receive matching it, and keeping it would exceed the ", budget_,
         " bytes allowed for such messages (", unexpected_bytes_,
         " held now; OMNICCL_P2P_UNEXPECTED_BYTES); post receives in the order messages are sent, or raise the "
         "limit");
  }
  unexpected_bytes_ += bytes;
}

bool P2PMatcher::send_to_self(int tag, const char* src, uint64_t bytes, DType dtype, uint64_t count,
                              const std::shared_ptr<Work>& sync, bool must_match) {
  auto keep = [&] {
    Message m{rank_, tag, dtype, count, std::vector<char>(src, src + bytes)};
    m.sync_work = sync;
    unexpected_.push_back(std::move(m));
  };
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (!matches(*it, rank_, tag)) continue;
    if (it->probe) {
      if (must_match) continue;               // a probe does not match it: look for a receive
      reserve_unexpected(bytes, rank_, tag);  // throws with the probe still posted
      Posted r = std::move(*it);
      posted_.erase(it);
      keep();
      answer_probe(r, std::prev(unexpected_.end()));
      return false;
    }
    Posted r = std::move(*it);
    posted_.erase(it);
    Message m{rank_, tag, dtype, count, std::vector<char>(src, src + bytes)};
    deliver(r, m);
    return true;
  }
  if (must_match) {
    fail(Status::kMismatch, "ssend to this rank itself (tag ", tag,
         "): no matching receive is posted, and a blocking synchronous send to itself can never be matched (post "
         "the receive first, or use a non-blocking issend)");
  }
  reserve_unexpected(bytes, rank_, tag);
  keep();
  return false;
}

char* P2PMatcher::land(const TransferFeed::Arrival& a, uint64_t expected_seq, size_t& token) {
  if (a.seq != expected_seq) {
    fail(Status::kInternal, "recv: message #", a.seq, " from rank ", a.peer, " arrived where #", expected_seq,
         " was due; the byte streams are out of step");
  }
  Landing& l = landing_[size_t(a.peer)];
  l = Landing{};
  l.active = true;
  token = size_t(a.peer);
  if ((a.flags & kP2PAck) != 0) {
    l.ack = true;
    l.ack_seq = a.count;
    return nullptr;  // no payload
  }
  l.msg.sync = (a.flags & kP2PSync) != 0;
  l.msg.seq = a.seq;
  l.msg.source = a.peer;
  l.msg.tag = a.tag;
  l.msg.dtype = a.dtype;
  l.msg.count = a.count;
  l.bytes = a.bytes;
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (!matches(*it, a.peer, a.tag)) continue;
    l.posted = std::move(*it);
    posted_.erase(it);
    if (l.posted.probe) {
      // Kept as unexpected; the probe completes once it has all come.
      l.probed = true;
      reserve_unexpected(a.bytes, a.peer, a.tag);
      l.msg.data.resize(a.bytes);
      return l.msg.data.data();
    }
    if (a.dtype == l.posted.dtype && a.bytes <= l.posted.capacity) {
      l.direct = true;
      return l.posted.dst;
    }
    l.msg.data.resize(a.bytes);  // staged: truncated or of another dtype
    return l.msg.data.data();
  }
  reserve_unexpected(a.bytes, a.peer, a.tag);
  l.msg.data.resize(a.bytes);
  return l.msg.data.data();
}

void P2PMatcher::landed(size_t token) {
  Landing& l = landing_[token];
  if (!l.active) return;
  l.active = false;
  if (l.ack) {
    acked(int(token), l.ack_seq);  // the token is the peer
  } else if (l.probed) {
    unexpected_.push_back(std::move(l.msg));
    const bool claimed = l.posted.claim;
    answer_probe(l.posted, std::prev(unexpected_.end()));
    if (!claimed) offer_to_posted();
  } else if (l.direct) {
    matched(l.msg);
    finish(l.posted, Status::kSuccess, "", RecvStatus{l.msg.source, l.msg.tag, l.bytes});
  } else if (l.posted.work) {
    matched(l.msg);
    deliver(l.posted, l.msg);
  } else {
    unexpected_.push_back(std::move(l.msg));
    offer_to_posted();
  }
  l = Landing{};
}

void P2PMatcher::offer_to_posted() {
  for (auto p = posted_.begin(); p != posted_.end();) {
    const auto it = std::prev(unexpected_.end());
    if (!matches(*p, it->source, it->tag)) {
      ++p;
      continue;
    }
    Posted r = std::move(*p);
    p = posted_.erase(p);
    if (r.probe) {
      const bool claim = r.claim;
      answer_probe(r, it);  // the message stays (or, claimed, leaves matching)
      if (claim) return;
      continue;
    }
    Message m = std::move(*it);
    unexpected_.erase(it);
    unexpected_bytes_ -= m.data.size();
    matched(m);  // the sender first: the receiver, once complete, may test it
    deliver(r, m);
    return;
  }
}

void P2PMatcher::fail_all(Status st, const std::string& message) {
  for (Landing& l : landing_) {
    if (l.active && l.posted.work) finish(l.posted, st, message, RecvStatus{});
    l = Landing{};
  }
  for (Posted& p : posted_) finish(p, st, message, RecvStatus{});
  posted_.clear();
  fail_awaiting(st, [&](int) { return message; });
  for (Message& m : unexpected_) {
    // Synchronous sends to this rank itself: their messages stay receivable.
    if (m.sync_work) m.sync_work->complete(st, message);
    m.sync_work.reset();
  }
  for (auto& [id, m] : claimed_) {
    if (m.sync_work) m.sync_work->complete(st, message);
    m.sync_work.reset();
  }
}

bool P2PMatcher::names(int peer) const {
  return std::any_of(posted_.begin(), posted_.end(), [&](const Posted& p) { return p.source == peer; });
}

bool P2PMatcher::wants(int peer) const {
  return std::any_of(posted_.begin(), posted_.end(),
                     [&](const Posted& p) { return p.source == kAnySource || p.source == peer; });
}

}  // namespace omniccl
