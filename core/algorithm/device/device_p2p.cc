// DeviceEngine's point-to-point transfers (device_engine.h): per pair of
// ranks, messages in order, each in pieces of one slot that the sender
// writes into the receiver's block.
#include <algorithm>

#include "algorithm/device/device_engine.h"
#include "common/hash.h"

namespace omniccl::algo {

namespace {

/// What sender and receiver must agree on (size and tag), in the 24 bits
/// below the message's number.
uint64_t message_word(uint64_t number, uint64_t bytes, int tag) {
  return number << 24 | Fnv1a().word(bytes).word(uint64_t(uint32_t(tag))).low24();
}

}  // namespace

void DeviceEngine::enqueue_p2p(const DeviceP2P& c, DeviceDone done) {
  std::lock_guard lock(mu_);
  if (aborted_) fail(Status::kAborted, "the communicator was aborted");
  if (failed_ != Status::kSuccess) fail(Status::kCommFailed, "the communicator failed earlier: ", failed_message_);
  const size_t peer = size_t(c.peer);
  Pending p;
  p.seq = c.is_send ? ++send_msgs_[peer] : ++recv_msgs_[peer];
  p.peer = c.peer;
  p.what = str_cat(c.is_send ? "send #" : "receive #", p.seq, c.is_send ? " to " : " from ", window_.describe(c.peer),
                   " (", c.bytes, " bytes, tag ", c.tag, ") on CUDA tensors");
  p.timeout_ms = c.timeout_ms;
  p.done = std::move(done);
  p.begin = take_event();
  p.end = take_event();
  try {
    rt_.event_record(p.begin, c.stream);
    const uint64_t meta = message_word(p.seq, c.bytes, c.tag);
    if (c.is_send) {
      rt_.stream_write_value(c.stream, window_.flags(c.peer) + p2p_meta_word(rank_), meta);
      p2p_send(c);
    } else {
      p2p_recv(c, meta);
    }
  } catch (const Error& e) {
    fail_all(e.status(), str_cat(p.what, ": ", e.what()), true);
    throw;
  }
  track(std::move(p), c.stream);
}

// One piece into the peer's slot for this rank, once the slot's previous
// piece was taken.
void DeviceEngine::send_piece(int peer, const char* src, size_t bytes, GpuRuntime::Stream stream) {
  const uint64_t s = ++send_steps_[size_t(peer)];
  if (s > 1) rt_.stream_wait_value(stream, window_.flags(rank_) + p2p_acked_word(peer), s - 1);
  rt_.copy_async(p2p_slot_of(peer, rank_), src, bytes, stream);
  rt_.stream_write_value(stream, window_.flags(peer) + p2p_posted_word(rank_), s);
}

void DeviceEngine::recv_piece(int peer, char* dst, size_t bytes, GpuRuntime::Stream stream) {
  const uint64_t s = ++recv_steps_[size_t(peer)];
  rt_.stream_wait_value(stream, window_.flags(rank_) + p2p_posted_word(peer), s);
  rt_.copy_async(dst, p2p_slot_of(rank_, peer), bytes, stream);
  rt_.stream_write_value(stream, window_.flags(peer) + p2p_acked_word(rank_), s);
}

// The sender's message word: another size or tag fails the receive (error
// word set, this rank's point-to-point waits released).
void DeviceEngine::expect_message(int peer, uint64_t meta, GpuRuntime::Stream stream) {
  uint64_t* own = window_.flags(rank_);
  rt_.stream_wait_value(stream, own + p2p_meta_word(peer), meta >> 24 << 24);
  rt_.check_words_async(own + p2p_meta_word(peer), 1, -1, meta, own + p2p_posted_word(0), 2 * size_t(size_), kReleased,
                        own + kErrorWord, uint32_t(Status::kMismatch), stream);
}

void DeviceEngine::p2p_send(const DeviceP2P& c) {
  const size_t slot = p2p_slot();
  for (uint64_t off = 0; off < c.bytes; off += slot) {
    send_piece(c.peer, c.buf + off, std::min<uint64_t>(slot, c.bytes - off), c.stream);
  }
  if (c.synchronous && c.bytes > 0) {
    rt_.stream_wait_value(c.stream, window_.flags(rank_) + p2p_acked_word(c.peer), send_steps_[size_t(c.peer)]);
  }
}

void DeviceEngine::p2p_recv(const DeviceP2P& c, uint64_t meta) {
  expect_message(c.peer, meta, c.stream);
  const size_t slot = p2p_slot();
  for (uint64_t off = 0; off < c.bytes; off += slot) {
    recv_piece(c.peer, c.buf + off, std::min<uint64_t>(slot, c.bytes - off), c.stream);
  }
}

// A v-variant's blocks as messages, in rounds: piece j of every send, then
// piece j of every receive. A send's piece j waits for its receiver to have
// taken piece j - 1, which the receiver did in round j - 1 after its own
// sends of that round, so no rank waits for one that waits for it.
void DeviceEngine::exchange(const DeviceCall& c) {
  const uint64_t slot = p2p_slot();
  auto pieces = [&](uint64_t bytes) { return (bytes + slot - 1) / slot; };
  uint64_t rounds = 0;
  for (const DevicePart& s : c.sends) {
    if (s.peer == rank_) continue;
    const uint64_t m = ++send_msgs_[size_t(s.peer)];
    rt_.stream_write_value(c.stream, window_.flags(s.peer) + p2p_meta_word(rank_), message_word(m, s.bytes, -2));
    rounds = std::max(rounds, pieces(s.bytes));
  }
  for (const DevicePart& r : c.recvs) {
    if (r.peer == rank_) {
      for (const DevicePart& s : c.sends) {
        if (s.peer == rank_ && r.bytes > 0 && r.dst != s.src) rt_.copy_async(r.dst, s.src, r.bytes, c.stream);
      }
      continue;
    }
    expect_message(r.peer, message_word(++recv_msgs_[size_t(r.peer)], r.bytes, -2), c.stream);
    rounds = std::max(rounds, pieces(r.bytes));
  }
  for (uint64_t j = 0; j < rounds; ++j) {
    for (const DevicePart& s : c.sends) {
      if (s.peer != rank_ && pieces(s.bytes) > j)
        send_piece(s.peer, s.src + j * slot, std::min(slot, s.bytes - j * slot), c.stream);
    }
    for (const DevicePart& r : c.recvs) {
      if (r.peer != rank_ && pieces(r.bytes) > j)
        recv_piece(r.peer, r.dst + j * slot, std::min(slot, r.bytes - j * slot), c.stream);
    }
  }
}

}  // namespace omniccl::algo
