// Point-to-point listening: a listen transfer reads whole point-to-point
// messages from one peer, one after the other, and the feed (the
// communicator's matching, communicator/p2p_match.h) says where each
// payload lands once its header is in.
#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "algorithm/engine_internal.h"

namespace omniccl {

bool Engine::take_held(int peer, State& s) {
  if (held_.empty() || !held_[size_t(peer)].has) return false;
  Held& h = held_[size_t(peer)];
  s.hdr = h.hdr;
  // The link's own part of the message; the caller's part (payload, sink,
  // stage) stays this transfer's.
  transport::Message& m = s.msg;
  transport::move_progress(m, h.msg);
  h.has = false;
  return true;
}

// A listen reads whole point-to-point messages from one peer, one after the
// other, for as long as the feed has a receive they could match: the header
// first, then the payload wherever the feed lands it. A collective's header
// (the peer has moved on to its next operation) is kept for that operation.
// Between messages: whether this listen ends here (the feed no longer
// listens to the peer, or a collective's message from it is held).
bool Engine::listen_over(State& s, TransferFeed& feed) {
  const int peer = s.t.peer;
  if (held_.size() < size_t(mesh_.size())) held_.resize(size_t(mesh_.size()));
  const bool listening = feed.listening(peer);
  if (listening && !held_[size_t(peer)].has) return false;
  s.complete = true;
  feed.listen_ended(peer, listening);
  return true;
}

// A collective's message arrived where point-to-point messages were read:
// held, with its progress, for the collective's own receive (take_held).
void Engine::hold_message(State& s, TransferFeed& feed) {
  Held& held = held_[size_t(s.t.peer)];
  held.has = true;
  held.hdr = s.hdr;
  held.msg = s.msg;
  held.msg.header = nullptr;
  s.msg = transport::Message{};
  s.msg.header_bytes = sizeof(WireHeader);
  s.complete = true;
  feed.listen_ended(s.t.peer, true);
}

// A point-to-point header is in: the feed says where its payload lands.
void Engine::land_message(State& s, TransferFeed& feed) {
  const WireHeader& h = s.hdr;
  if (h.magic != kWireMagic) {
    std::string msg = str_cat("recv: corrupt message from ", mesh_.describe(s.t.peer),
                              " (bad magic); the byte streams are out of step");
    mesh_.broadcast_error(Status::kInternal, msg);
    throw transport::PeerReportedError(Status::kInternal, msg);
  }
  TransferFeed::Arrival a;
  a.peer = s.t.peer;
  a.tag = h.root;
  a.dtype = static_cast<DType>(h.dtype);
  a.count = h.count;
  a.bytes = h.bytes;
  a.seq = h.seq;
  a.flags = h.algo;
  s.t.dst = feed.land(a, s.land_token);
  s.t.bytes = h.bytes;
  s.msg.payload = {s.t.dst, s.t.bytes, device_};
  s.msg.sink = nullptr;
}

bool Engine::advance_listen(State& s, TransferFeed& feed) {
  const int peer = s.t.peer;
  transport::Link& link = mesh_.link(peer);
  transport::Message& m = s.msg;
  m.header = &s.hdr;
  bool progressed = false;
  for (;;) {
    if (m.header_done == 0 && listen_over(s, feed)) return progressed;
    if (m.header_done < sizeof(WireHeader)) {
      const size_t before = m.header_done;
      try {
        progressed |= link.recv_header(m);
      } catch (const Error& e) {
        // A peer that has left ends a listen that only ANY_SOURCE receives
        // need (between messages); the others may still send.
        if (e.status() != Status::kPeerFailure || before != 0 || feed.named(peer)) throw;
        s.complete = true;
        feed.listen_ended(peer, true);
        return true;
      }
      if (m.header_done < sizeof(WireHeader)) {
        if (m.header_done == 0) feed.quiet(peer);
        return progressed;
      }
      if (s.hdr.magic == kWireMagic && s.hdr.kind != uint8_t(OpKind::kSendRecv)) {
        hold_message(s, feed);
        return true;
      }
      land_message(s, feed);
    }
    progressed |= link.recv_payload(m);
    if (!m.complete) return progressed;
    feed.landed(s.land_token);
    // And listen for the next one.
    m = transport::Message{};
    m.header_bytes = sizeof(WireHeader);
    m.header = &s.hdr;
    s.t.dst = nullptr;
    s.t.bytes = 0;
    progressed = true;
  }
}

}  // namespace omniccl
