// The transport contract: a Transport (one per communicator and kind: shm,
// tcp) offers this rank's part of its endpoint, says whether two endpoints
// can use it, and makes a Link per peer; a Link carries messages to and from
// one peer. The mesh (mesh.h) connects and wakes ranks, the registry
// (registry.h) chooses a transport per pair; neither knows what a transport
// does inside.
//
// Words used below:
//   endpoint what one rank tells every other at setup: who and where it is,
//            and each transport's part (opaque to all but that transport).
//   link     an ordered, reliable, full-duplex message channel to one peer
//            (the shape of Gloo's Pair::send(buffer, offset, nbytes)).
//   message  a small header then a payload. The caller (the engine) owns the
//            header's contents and checks them; the link moves them. A link
//            delivers messages in the order they were sent.
//   payload  memory named by a MemRef (pointer, bytes, device). How it
//            crosses is the link's business: copies through a shared ring,
//            zero-copy out of that ring, a read straight from the sender's
//            memory (single copy), socket writes and reads.
//   sink     where a received payload goes when it is not copied to memory:
//            a reduction takes it in pieces (PayloadSink).
//   doorbell a wake-up sent over the peer's control socket when the other side
//            said (by "arming") that it is about to sleep.
//   futex    the other wake-up, for peers on this host: a word in the
//            sleeper's shared-memory segment that the peer bumps and
//            FUTEX_WAKEs (no socket, no poll: the awaited rank runs at once).
// Every call is non-blocking: it moves what it can and returns. The caller
// keeps the waiting policy (spin, yield, sleep) and asks the link only how to
// wait (arm_send/arm_recv). Transports know nothing of algorithms.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/device.h"
#include "common/fd.h"
#include "common/status.h"
#include "common/time.h"

namespace omniccl::transport {

/// A run of bytes on a device. The transports of this build (shm, tcp) move
/// host memory; a device transport (CUDA IPC) reads `device` to know what it
/// was handed.
struct MemRef {
  char* ptr = nullptr;
  size_t bytes = 0;
  DeviceKind device = DeviceKind::kCPU;
};

/// Takes a received payload in pieces, in order (a reduction of it).
class PayloadSink {
 public:
  /// Takes a prefix of the n bytes at `data` (the payload's next bytes,
  /// readable only during the call): returns how many, a whole number of
  /// the message's granules. What it leaves is offered again, with more.
  virtual size_t take(const char* data, size_t n) = 0;

 protected:
  ~PayloadSink() = default;
};

/// One message in flight on a link. The caller fills the first part and
/// keeps the object until `complete` (it may move it between calls: a link
/// keeps no pointer to it); the link keeps its progress in the second part
/// (reset it to reuse the object).
struct Message {
  // --- filled by the caller ---
  /// Send: the header to send. Receive: where the header goes.
  void* header = nullptr;
  /// Header size: at most kMaxHeader bytes, the same on both sides.
  uint32_t header_bytes = 0;
  /// Send: the payload. Receive: where it goes (unless `sink`); `bytes` is
  /// what is expected (the caller checks the header before the payload).
  MemRef payload;
  /// Receive: a sink that takes the payload instead of payload.ptr.
  PayloadSink* sink = nullptr;
  /// Receive with a sink: scratch where the link may gather pieces for it.
  MemRef stage;
  /// Receive with a sink: the sink takes whole granules of this many bytes.
  uint32_t granule = 1;
  /// Send: the receiver is known to be waiting for this message (a
  /// collective's step), so the payload may go by reference and the send
  /// then completes only when the receiver has copied it.
  bool may_reference = false;
  /// Receive into CPU memory (no sink): the payload is large and not read
  /// again soon, so the link may store it past the caches (streaming stores).
  bool stream = false;
  /// Receive into memory (no sink): when the payload comes by reference, the
  /// link may let the sender copy part of it into payload.ptr while this side
  /// copies the rest (both cores copy; see ShmLink).
  bool may_split = false;

  // --- kept by the link ---
  size_t header_done = 0;  ///< header bytes moved
  size_t done = 0;         ///< payload bytes moved (receive with a sink: taken or staged)
  size_t staged = 0;       ///< receive with a sink: bytes in `stage` not yet taken
  bool complete = false;   ///< all moved (by reference: and read by the receiver)
  /// What only the message's link reads and writes (its own struct, through
  /// link_state<T>()): all zero for a fresh message.
  alignas(8) unsigned char link_state[32] = {};
};

/// The link's own part of message `m` as its struct T: trivial (so the
/// bytes, implicitly, are a T), all zero bytes meaning "fresh".
template <class T>
T& link_state(Message& m) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_default_constructible_v<T>,
                "a link's message state is plain data");
  static_assert(sizeof(T) <= sizeof(m.link_state) && alignof(T) <= 8, "Message::link_state is too small for it");
  return *std::launder(reinterpret_cast<T*>(m.link_state));
}
template <class T>
const T& link_state(const Message& m) {
  return link_state<T>(const_cast<Message&>(m));
}
/// Makes `m`'s link part that of a fresh message.
inline void reset_link_state(Message& m) { std::memset(m.link_state, 0, sizeof m.link_state); }
/// Hands the link part of `from` (and its progress) to `to`: the same message
/// continues in another object.
inline void move_progress(Message& to, const Message& from) {
  to.header_done = from.header_done;
  to.done = from.done;
  to.staged = from.staged;
  to.complete = from.complete;
  std::memcpy(to.link_state, from.link_state, sizeof to.link_state);
}

inline constexpr uint32_t kMaxHeader = 64;
/// The most sockets the mesh connects for one link (Transport::sockets).
inline constexpr int kMaxLinkSockets = 16;
/// The engine's header size: a link may copy headers of this size with a
/// fixed-size copy (a few moves instead of a call).
inline constexpr uint32_t kEngineHeaderBytes = 40;
/// The largest payload of the engine's small-step path (Engine::run_quick):
/// a link may give messages of at most kMaxHeader plus this many bytes a
/// path of their own (shared memory: one record written in a few moves).
inline constexpr size_t kSmallPayloadMax = 4096;

/// A receive through m.stage (with a sink): counts the k bytes just read into
/// the stage behind what it held, offers the sink all of it, and moves what
/// the sink left (less than a granule) to the stage's start.
inline void take_staged(Message& m, size_t k) {
  m.done += k;
  m.staged += k;
  const size_t whole = m.staged > 0 ? m.sink->take(m.stage.ptr, m.staged) : 0;
  if (whole > 0 && m.staged > whole) std::memmove(m.stage.ptr, m.stage.ptr + whole, m.staged - whole);
  m.staged -= whole;
}

/// What a whole-message call (Link::send_whole, Link::peek_whole) did.
enum class Whole : uint8_t {
  kDone,    ///< the message moved (or is there to take) in one piece
  kNotYet,  ///< nothing moved: no room yet, or nothing has arrived yet
  kNo,      ///< nothing moved: this link or this message needs send() / recv_header()
};

/// How a sleeper asks to be woken when it arms a wait (arm_send/arm_recv).
/// A link that has only one way (TCP: poll its socket) ignores it.
enum class WakeBy : uint8_t {
  kDoorbell,  ///< over the control socket: the sleeper polls (Mesh::sleep)
  kFutex,     ///< through this rank's futex word (Mesh::sleep_on_futex)
};

/// How to wait for a link to be able to move a message again.
struct WaitOn {
  enum class How : uint8_t {
    kReady,     ///< it can move now: do not sleep
    kDoorbell,  ///< armed: the peer rings over its control socket
    kPoll,      ///< poll `fd` for `events`
    kFutex,     ///< armed: the peer bumps and wakes this rank's futex word
  };
  How how = How::kReady;
  int fd = -1;
  short events = 0;
};

class Link {
 public:
  virtual ~Link() = default;
  /// Moves as much of message `m` (header, then payload) as it can; true if
  /// anything moved. Sets m.complete when the send is done. Throws
  /// Error(kPeerFailure) when the peer is gone.
  virtual bool send(Message& m) = 0;
  /// Receives the next message's header into m.header; true if anything
  /// moved. The header is all there when m.header_done == m.header_bytes;
  /// nothing of the payload has moved then.
  virtual bool recv_header(Message& m) = 0;
  /// Moves the payload of the message whose header was received into
  /// m.payload.ptr or through m.sink; true if anything moved. Sets
  /// m.complete when all of it has. Throws Error(kPeerFailure).
  virtual bool recv_payload(Message& m) = 0;
  /// About to sleep until `m` (the first incomplete send to this peer) can
  /// move: arms a wait, to be woken as `by` asks where the link can, and
  /// says how to wait (kReady: it can move now).
  virtual WaitOn arm_send(const Message& m, WakeBy by) = 0;
  /// About to sleep until the next message (or more of it) arrives.
  virtual WaitOn arm_recv(const Message& m, WakeBy by) = 0;
  /// Whether this link can wake a sleeper through its futex word (WakeBy::kFutex).
  virtual bool wakes_futex() const { return false; }
  /// Drops any armed wait (called after waking).
  virtual void disarm() = 0;
  /// The caller gives up on receive `m` before it completed (its operation
  /// failed): when this returns, neither the link nor the peer writes into
  /// m's buffers any more (the caller's buffers may be freed next).
  virtual void abandon(Message& /*m*/) noexcept {}
  /// The engine's direct path for small messages (Engine::run_direct):
  /// writes `header_bytes` of header and `bytes` of payload as one whole
  /// message now (kDone), or nothing (kNotYet: no room yet; kNo: this link
  /// has no such path, or the message needs send()). A message sent so is
  /// the same as one sent by send(); it owes a flush() as send() does.
  virtual Whole send_whole(const void* /*header*/, size_t /*header_bytes*/, const void* /*payload*/, size_t /*bytes*/) {
    return Whole::kNo;
  }
  /// The next message, when it is all there in one piece of exactly `bytes`
  /// (header and payload) and nothing of it has been read: its first byte,
  /// valid until take_whole(). Else nullptr, and `why` says kNotYet (nothing
  /// has arrived) or kNo (a message of another size or form, or a link
  /// without this path: recv_header() and recv_payload() take it). Consumes
  /// nothing.
  virtual const char* peek_whole(size_t /*bytes*/, Whole& why) {
    why = Whole::kNo;
    return nullptr;
  }
  /// Consumes the message of `bytes` that peek_whole() returned (owes a
  /// flush(), as a receive does).
  virtual void take_whole(size_t /*bytes*/) {}
  /// Whether send_whole() and peek_whole() can move messages on this link at
  /// all (a caller may skip them where none can).
  virtual bool whole_messages() const { return false; }
  /// Delivers the wake-ups owed for data sent or room made since the last
  /// flush (a peer that armed a wait gets its doorbell). Sends and receives
  /// may defer them to here so that the fence this takes is paid once per
  /// step, while waiting, rather than once per message. Callers flush before
  /// they wait and before an operation returns.
  virtual void flush() {}
  /// Whether bytes this side sent still wait in the link for the peer to
  /// take them (shared memory: records in the ring not yet read); false
  /// where the link cannot tell (TCP). A rank that times an operation waits
  /// for this to turn false, so a send that only filled the ring counts
  /// until it was read (Engine::wait_sends_read).
  virtual bool sends_unread() const { return false; }
  /// A descriptor whose EOF tells that the peer left (TCP), or -1 when the
  /// control socket tells (shared memory).
  virtual int poll_fd() const = 0;
  /// Appends the sockets that carry this link's data (TCP: each of them),
  /// so that closing can wait until what was sent on them has arrived.
  virtual void append_sockets(std::vector<int>& /*out*/) const {}
  /// "shm" or "tcp".
  virtual const char* kind() const = 0;
  /// Whether a payload goes through a socket (the kernel copies it while
  /// this rank sends and receives): the algorithms then start sending before
  /// they copy their own block locally, which overlaps the copy with the peer's
  /// receive.
  virtual bool socket() const { return false; }
};

/// How large calls of communicators that slice them (Endpoint::gpu) are cut
/// (collective/common.h, launch_sliced): OMNICCL_STAGED_SLICE and
/// OMNICCL_STAGED_GPU_REDUCE. Every rank sends its own in its record and
/// all hold rank 0's, so that every rank slices alike.
struct StagedSlicing {
  static constexpr size_t kMinSliceBytes = size_t{64} << 10;
  static constexpr size_t kMaxSliceBytes = size_t{1} << 30;
  /// A slice's bytes (all blocks of a block collective together); calls of
  /// twice this or more run as slices.
  size_t slice_bytes = size_t{8} << 20;
  /// Staged all_reduce, reduce_scatter and reduce calls of this many bytes
  /// or more reduce on the GPU; smaller ones on the host.
  size_t gpu_reduce_bytes = size_t{1} << 20;
};

/// One rank's record of the setup exchange: who and where it is, and each
/// transport's own part, which only that transport reads (NCCL's connect
/// blob): a shared-memory segment's name, a socket count.
struct Endpoint {
  int rank = -1;
  int pid = 0;
  std::string host_id;     ///< processes that share it can share memory (host, boot id, namespaces)
  std::string hostname;    ///< for messages
  std::string unix_addr;   ///< the mesh's listener on this host (control sockets)
  std::string tcp_addr;    ///< the mesh's listener across hosts (control sockets, and sockets for links)
  std::string cpus;        ///< the CPUs it may run on, a cpulist ("0-3,8"; common/cpus.h)
  std::string host_block;  ///< the block it makes if it leads its host's ranks (Mesh::host_shared); "" = none
  /// It had a GPU in use when it joined (the communicator then runs large
  /// calls in slices on every rank: collective/common.h, launch_sliced).
  bool gpu = false;
  /// Its slicing settings (rank 0's hold for every rank).
  StagedSlicing slicing;
  /// Each transport's part, by transport name; a transport that offers
  /// nothing to peers has none.
  std::vector<std::pair<std::string, std::string>> parts;

  /// The part of transport `name`; "" when it has none.
  const std::string& part(std::string_view name) const;
  /// The record as sent in the exchange.
  std::string encode() const;
  /// Parses a record of rank `rank`; throws Error(kInternal) when malformed,
  /// Error(kInvalidArgument) when it comes from a build of another record
  /// shape.
  static Endpoint decode(const std::string& text, int rank);
};

/// A transport's answer to "can these two endpoints use you?", with the
/// reason, which is logged.
struct Verdict {
  bool ok = false;
  std::string reason;  ///< why (or why not): "same host and boot id", "other host"
};

/// Device memory of every rank of a communicator, mapped into this process
/// by a device transport (CUDA IPC): each rank's block, a few flag words
/// then a scratch buffer, which streams of all ranks read and write
/// directly. How operations use it is the algorithms' business
/// (algorithm/device/); the window only maps it and watches the peers.
class DeviceWindow {
 public:
  virtual ~DeviceWindow() = default;
  /// The transport's name ("cuda_ipc").
  virtual const char* kind() const = 0;
  /// This rank's device (the calling thread's current device at setup).
  virtual int device() const = 0;
  /// Rank r's flag words (flag_words() of them), as mapped here.
  virtual uint64_t* flags(int rank) = 0;
  virtual size_t flag_words() const = 0;
  /// Rank r's scratch buffer, as mapped here.
  virtual char* scratch(int rank) = 0;
  /// Its size, the same on every rank.
  virtual size_t scratch_bytes() const = 0;
  /// Whether rank r's process has ended: peers of one host, watched without
  /// their control sockets (pidfd), from any thread.
  virtual bool peer_gone(int r) = 0;
  /// "rank 3 (pid 1234)", for messages.
  virtual std::string describe(int rank) const = 0;

  // Registered memory (occl_comm_window_register): each rank exports a range
  // of its device memory once, every peer maps it, and operations on it read
  // it in place.
  /// This rank's record of device memory [p, p + bytes) for the peers.
  /// Throws kInvalidArgument (not device memory of this rank's device) or
  /// kUnsupported (memory the transport cannot share), saying which.
  virtual std::string export_range(const void* /*p*/, size_t /*bytes*/) {
    fail(Status::kUnsupported, kind(), " cannot share registered memory");
  }
  /// Maps rank r's range from its record: where its first byte is here.
  /// What it asks of rank r (a descriptor of its memory) ends by `deadline`.
  virtual char* import_range(int /*r*/, const std::string& /*record*/, Deadline /*deadline*/) {
    fail(Status::kUnsupported, kind(), " cannot share registered memory");
  }
  /// Gives back what import_range returned (nothing may use it any more).
  virtual void release_range(char* /*mapped*/) {}
  /// Every peer has imported (or failed to import) what export_range last
  /// exported: what was kept for them to take goes.
  virtual void exports_done() {}
};

/// What a transport gets to build the link to one peer.
struct LinkSetup {
  const Endpoint* local = nullptr;
  const Endpoint* peer = nullptr;
  /// Connected sockets to the peer, as many as Transport::sockets asked for
  /// (the mesh connects and authenticates them like its control sockets).
  std::vector<UniqueFd> sockets;
  /// Rings the peer over its control socket (WaitOn::How::kDoorbell).
  std::function<void()> doorbell;
  bool same_host() const { return local->host_id == peer->host_id; }
};

/// A transport as the mesh sees it (NCCL's transport table entry, Gloo's
/// device): one object per communicator, which owns what this rank offers
/// every peer (a shared-memory segment) and makes one Link per peer that
/// chose it. The registry (registry.h) is the only code that names one.
class Transport {
 public:
  virtual ~Transport() = default;
  /// "shm", "tcp": also the value of OMNICCL_TRANSPORT that forces it.
  virtual const char* name() const = 0;
  /// Higher is preferred when several can connect.
  virtual int priority() const = 0;
  /// This rank's part of its endpoint (what a peer needs to connect to it),
  /// made once before the exchange; "" offers nothing. It only names what
  /// prepare() makes: ranks may wait long in the exchange (for a late rank),
  /// and one killed there must leave nothing behind.
  virtual std::string part() = 0;
  /// After the exchange, before any peer connects: makes what the peers
  /// will open (a shared-memory segment).
  virtual void prepare() {}
  /// Whether `local` and `peer` can use this transport, and why. Both ranks
  /// of a pair run it over the same two records, so it must be symmetric.
  /// Throws Error(kInvalidArgument) when the peer's part comes from a build
  /// this one cannot talk to.
  virtual Verdict can_connect(const Endpoint& local, const Endpoint& peer) const = 0;
  /// Sockets the mesh connects to `peer` for the link, before connect().
  virtual int sockets(const Endpoint& /*local*/, const Endpoint& /*peer*/) const { return 0; }
  /// Builds the link to setup.peer.
  virtual std::unique_ptr<Link> connect(LinkSetup& setup) = 0;
  /// Every peer has built its links: drops what only setup needed (a
  /// segment's name, so that nothing is left behind if a rank dies later).
  virtual void setup_done() {}
  /// The word this rank sleeps on when its links' peers wake it through a
  /// futex (WakeBy::kFutex), or null: a transport whose links wake so
  /// (Link::wakes_futex) has one.
  virtual std::atomic<uint32_t>* wake_word() { return nullptr; }
  /// Whether its links join processes of one host through shared memory:
  /// ranks so linked share their host's choices (Mesh::host_shared).
  virtual bool shares_host_memory() const { return false; }
  /// Both ends of one link inside this process ([0] rank 0's to rank 1,
  /// [1] rank 1's to rank 0), built as setup builds them between two ranks
  /// of one host, and quiet: for calibrations that time this transport's
  /// links. They may use this object's resources: keep it alive.
  virtual std::array<std::unique_ptr<Link>, 2> loopback() = 0;
  /// Whether this transport moves device memory between ranks (a device
  /// transport: no Link, a DeviceWindow) rather than the engine's messages.
  /// The registry chooses the two kinds separately per pair.
  virtual bool moves_device_memory() const { return false; }
  /// A device transport, when every peer chose it: maps every rank's block
  /// (`all` holds every rank's endpoint, this one's included). Throws
  /// Error(kSystem) naming the rank whose memory cannot be opened.
  virtual std::unique_ptr<DeviceWindow> open_window(std::span<const Endpoint> /*all*/) { return nullptr; }
};

}  // namespace omniccl::transport
