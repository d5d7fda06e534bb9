// DeviceEngine's point-to-point transfers (device_engine.h): per pair of
// ranks, messages in order, each in pieces of one slot that the sender
// writes into the receiver's block.
#include <algorithm>

#include "algorithm/device/device_engine.h"

namespace omniccl::algo {

namespace {

/// What sender and receiver must agree on (size and tag), in the 24 bits
/// below the message's number.
uint64_t message_word(uint64_t number, uint64_t bytes, int tag) {
  uint64_t h = 1469598103934665603ull;
  h = (h ^ bytes) * 1099511628211ull;
  h = (h ^ uint64_t(uint32_t(tag))) * 1099511628211ull;
  return number << 24 | ((h ^ (h >> 32)) & 0xffffffu);
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

void DeviceEngine::p2p_send(const DeviceP2P& c) {
  const size_t slot = p2p_slot();
  uint64_t& steps = send_steps_[size_t(c.peer)];
  uint64_t* own = window_.flags(rank_);
  for (uint64_t off = 0; off < c.bytes; off += slot) {
    const size_t k = std::min<uint64_t>(slot, c.bytes - off);
    const uint64_t s = ++steps;
    if (s > 1) rt_.stream_wait_value(c.stream, own + p2p_acked_word(c.peer), s - 1);  // the slot is free
    rt_.copy_async(p2p_slot_of(c.peer, rank_), c.buf + off, k, c.stream);
    rt_.stream_write_value(c.stream, window_.flags(c.peer) + p2p_posted_word(rank_), s);
  }
  if (c.synchronous && c.bytes > 0) rt_.stream_wait_value(c.stream, own + p2p_acked_word(c.peer), steps);
}

// The sender's message word first: another size or tag fails the receive
// (error word set, this rank's point-to-point waits released).
void DeviceEngine::p2p_recv(const DeviceP2P& c, uint64_t meta) {
  uint64_t* own = window_.flags(rank_);
  rt_.stream_wait_value(c.stream, own + p2p_meta_word(c.peer), meta >> 24 << 24);
  rt_.check_words_async(own + p2p_meta_word(c.peer), 1, -1, meta, own + p2p_posted_word(0), 2 * size_t(size_),
                        kReleased, own + kErrorWord, uint32_t(Status::kMismatch), c.stream);
  const size_t slot = p2p_slot();
  uint64_t& steps = recv_steps_[size_t(c.peer)];
  for (uint64_t off = 0; off < c.bytes; off += slot) {
    const size_t k = std::min<uint64_t>(slot, c.bytes - off);
    const uint64_t s = ++steps;
    rt_.stream_wait_value(c.stream, own + p2p_posted_word(c.peer), s);
    rt_.copy_async(c.buf + off, p2p_slot_of(rank_, c.peer), k, c.stream);
    rt_.stream_write_value(c.stream, window_.flags(c.peer) + p2p_acked_word(rank_), s);
  }
}

}  // namespace omniccl::algo
