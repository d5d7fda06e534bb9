#include "transport/shm/shm_link.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/futex.h>
#include <sched.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <ctime>
#include <cstring>
#include <string>
#include <new>
#include <random>

#include "common/fd.h"
#include "common/shared_memory.h"
#include "common/log.h"
#include "common/small_copy.h"
#include "common/status.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/stream.h"

namespace omniccl::transport {

namespace {
constexpr size_t kPerRing = sizeof(RingHeader) + kShmRingBytes;
constexpr size_t kHeaderBytes = 4096;

// A random word at a fixed address of this process: a peer that reads it
// back through process_vm_readv knows it reads this process's memory.
const uint64_t& probe_word() {
  static const uint64_t word = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(::getpid());
  }();
  return word;
}

ShmMessage& st(Message& m) { return link_state<ShmMessage>(m); }
const ShmMessage& st(const Message& m) { return link_state<ShmMessage>(m); }
}  // namespace

size_t ShmSegment::bytes_for(int nranks) { return kHeaderBytes + kPerRing * size_t(nranks); }

std::string ShmSegment::name_for(const std::string& session, int rank) {
  return shm_object_name(session, std::to_string(rank));
}

std::unique_ptr<ShmSegment> ShmSegment::create(const std::string& name, int nranks) {
  auto seg = std::unique_ptr<ShmSegment>(new ShmSegment(SharedMapping::create(name, bytes_for(nranks))));
  static_assert(sizeof(SegmentHeader) <= kHeaderBytes);
  auto* sh = new (seg->base()) SegmentHeader;  // placement-new on shared memory (no ownership)
  sh->pid = static_cast<uint64_t>(::getpid());
  sh->probe_addr = reinterpret_cast<uint64_t>(&probe_word());
  sh->probe_value = probe_word();
  sh->wake_word.store(0);
  sh->layout = kShmLayout;
  for (int p = 0; p < nranks; ++p) {
    RingHeader* h = new (seg->ring(p)) RingHeader;  // placement-new on shared memory (no ownership)
    h->consumer_membarrier.store(0);
    h->producer_membarrier.store(0);
    h->consumer_reads_refs.store(0);
    h->producer_writes_refs.store(0);
    h->refs_done.store(0);
    h->split_claim.store(0);
    h->split_dst.store(0);
    h->split_written.store(0);
    h->tail.store(0);
    h->consumer_sleeping.store(0);
    h->producer_sleeping.store(0);
  }
  return seg;
}

std::unique_ptr<ShmSegment> ShmSegment::open(const std::string& name, int nranks) {
  const size_t bytes = bytes_for(nranks);
  auto seg = std::unique_ptr<ShmSegment>(new ShmSegment(SharedMapping::open(name, kHeaderBytes, bytes)));
  // Another version's rings would be misread: refuse them by name first.
  const uint64_t layout = seg->header().layout;
  if (layout != kShmLayout) {
    fail(Status::kInvalidArgument, "shared memory segment ", name, " was made by another OmniCCL version (layout ",
         layout, ", this build writes ", kShmLayout, "): are all ranks of this host using the same OmniCCL version?");
  }
  if (seg->map_->size() < bytes) fail(Status::kInternal, "shared memory segment ", name, " is smaller than expected");
  return seg;
}

ShmSegment::~ShmSegment() = default;

void ShmSegment::unlink() { map_->unlink(); }

RingHeader* ShmSegment::ring(int from) const {
  return reinterpret_cast<RingHeader*>(static_cast<char*>(base()) + kHeaderBytes + kPerRing * size_t(from));
}

char* ShmSegment::ring_data(int from) const { return reinterpret_cast<char*>(ring(from)) + sizeof(RingHeader); }

namespace {

constexpr size_t kLine = 64;
constexpr uint64_t kSkipWord = ~uint64_t(0);
// Set in a record's ready word when the record is a message sent by
// reference: its header, then a RefDesc.
constexpr uint64_t kRefFlag = uint64_t(1) << 62;
// Large writes are cut into records of this size, so that the consumer copies
// one out while the next goes in.
constexpr size_t kMaxRecord = 64 * 1024;
// Room always kept free behind a record for the next record's 0 word.
constexpr size_t kSpare = kLine;

constexpr size_t round_up(size_t n) { return (n + kLine - 1) / kLine * kLine; }

// Room the producer at byte position `head` needs to write anything: a
// 1-byte record (after a skip to the ring's start when too close to its end)
// and the spare line behind it.
// Records of at most this many bytes are never cut: one that does not fit
// before the ring's end starts at the ring's start (the tail is skipped), so
// that the consumer takes a small message with one look.
constexpr size_t kWholeRecord = 16 * 1024;
// Messages (header and payload) of at most this many bytes take send()'s
// one-record path: every message of the engine's small-step path, whatever
// the header size.
constexpr size_t kSmallRecord = kMaxHeader + kSmallPayloadMax;
static_assert(kSmallRecord >= kEngineHeaderBytes + kSmallPayloadMax, "a small-step message is one record");
static_assert(round_up(8 + kSmallRecord) <= kWholeRecord, "a small record is never cut");

// The room the next record needs when `remaining` bytes are left to write at
// `head`; *skip: it starts at the ring's start. A record is at least
// kWholeRecord long (or the whole rest, if shorter): writing into what little
// room a full ring has would cut every message into small records, and a
// producer ahead of its consumer (a stream of broadcasts) would keep it that
// way, the consumer paying for each record.
constexpr size_t room_needed(uint64_t head, size_t remaining, bool* skip) {
  const size_t to_end = kShmRingBytes - static_cast<size_t>(head % kShmRingBytes);
  const size_t rec = round_up(8 + std::min(remaining, kMaxRecord));
  *skip = to_end < 2 * kLine || (rec > to_end && rec <= kWholeRecord);
  return *skip ? to_end + rec + kSpare : std::min({rec, kWholeRecord, to_end}) + kSpare;
}

// Asks for the line at p with write intent, without waiting. send_whole
// asks for the line after the next record's first one: where a small next
// record puts the 0 word behind itself. Otherwise that store finds the line
// where the consumer read it a lap ago (another core's cache, or L3) and,
// stores leaving the store buffer in order, every later store of the call
// waits for it: asked for one call ahead, it is here when needed (8-byte
// all_gather and all_reduce, 2 ranks: 20-27% less time per operation).
// The record's own line is the one the consumer polls, so that one comes
// over when written whatever is done. (x86: PREFETCHW where CPUID offers
// it, else a plain prefetch.)
// Copies an engine header in 8-byte moves. The engine writes it in 8-byte
// words just before (or wider); a 16-byte load across two of them could not
// take its bytes from the store buffer and would wait until they reach the
// cache, behind the previous record's stores to a line the consumer holds.
// (The empty asm keeps the compiler from merging two moves into one.)
inline void copy_header_words(char* out, const void* header) {
  const char* in = static_cast<const char*>(header);
  auto move = [&](size_t i) {
    uint64_t w;
    std::memcpy(&w, in + i, 8);
    asm("" : "+r"(w));
    std::memcpy(out + i, &w, 8);
  };
  static_assert(kEngineHeaderBytes == 40, "five moves, written out (a loop of them was not unrolled)");
  move(0);
  move(8);
  move(16);
  move(24);
  move(32);
}
static_assert(kEngineHeaderBytes % 8 == 0);

#if defined(__x86_64__) || defined(__i386__)
const bool kPrefetchW = [] {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001u, &a, &b, &c, &d) != 0 && (c & bit_PRFCHW) != 0;
}();
#endif
inline void prefetch_for_write(const char* p) {
#if defined(__x86_64__) || defined(__i386__)
  if (kPrefetchW) {
    asm volatile("prefetchw %0" ::"m"(*p));
    return;
  }
#endif
  __builtin_prefetch(p, 1, 3);
}

std::atomic_ref<uint64_t> word_at(char* ring, uint64_t pos) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(ring + pos % kShmRingBytes));
}

// Whether this process registered for membarrier(GLOBAL_EXPEDITED): then a
// peer sleeping with that barrier also orders this process's accesses.
bool membarrier_ready() {
  static const bool ok = [] {
    long cmds = ::syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return false;
    return ::syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  }();
  return ok;
}

/// Maps every page of [p, p + n) into this process now, writable
/// (MADV_POPULATE_WRITE, Linux 5.14+; the contents do not change, so it is
/// safe while the peer uses them). Without it the first pass over a ring takes
/// a page fault per 4 KiB on each side: 0.3-0.7 us more per small operation
/// for the first ~16,000 operations (64 B all_reduce, 2 ranks: 1.4-1.8 us,
/// then 1.05 us), which showed as size cliffs in benchmarks that start small.
/// Where the kernel lacks it the first pass is just slower.
void prefault(void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
  if (::madvise(reinterpret_cast<void*>(a), b - a, MADV_POPULATE_WRITE) != 0) {
    OCCL_LOG(kDebug, kTransport, "ring pages not prefaulted (madvise: ", std::strerror(errno), ")");
  }
}

}  // namespace

ShmLink::ShmLink(int peer, RingHeader* out, char* out_data, RingHeader* in, char* in_data,
                 std::function<void()> doorbell, std::unique_ptr<ShmSegment> peer_segment, bool single_copy, bool quiet)
    : out_(out),
      out_data_(out_data),
      in_(in),
      in_data_(in_data),
      doorbell_(std::move(doorbell)),
      peer_segment_(std::move(peer_segment)),
      peer_(peer),
      quiet_(quiet) {
  announce_membarrier();
  prefault(out_data_, kShmRingBytes);
  prefault(in_data_, kShmRingBytes);
  const SegmentHeader& seg = peer_segment_->header();
  peer_pid_ = static_cast<int>(seg.pid);
  if (!single_copy) {
    if (!quiet_)
      OCCL_LOG(kInfo, kTransport, "shared memory from rank ", peer_,
               ": single copy off (OMNICCL_SHM_SINGLE_COPY=0 or calibrated slower)");
    return;
  }
  // Can this process read the peer's memory (same user, ptrace rules allow
  // it, same pid namespace)? Then the peer may send large payloads by
  // reference.
  uint64_t seen = 0;
  iovec local{&seen, sizeof seen};
  iovec remote{reinterpret_cast<void*>(seg.probe_addr), sizeof seen};
  ssize_t k = ::process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0);
  const int err = errno;
  if (k == static_cast<ssize_t>(sizeof seen) && seen == seg.probe_value) {
    in_->consumer_reads_refs.store(1, std::memory_order_release);
    // process_vm_writev asks the kernel the same as process_vm_readv
    // (ptrace access to the peer): this rank may also write into the
    // peer's buffers, to split the copies of what it sends by reference.
    can_write_peer_ = true;
    out_->producer_writes_refs.store(1, std::memory_order_release);
    if (!quiet_)
      OCCL_LOG(kInfo, kTransport, "shared memory from rank ", peer_, ": single copy on (this rank reads pid ",
               peer_pid_, "'s memory)");
  } else {
    if (!quiet_)
      OCCL_LOG(kInfo, kTransport, "shared memory from rank ", peer_, ": single copy unavailable, two copies (",
               k < 0 ? str_cat("process_vm_readv of pid ", peer_pid_, ": ", std::strerror(err))
                     : std::string("the probe read back a different value: another pid namespace"),
               ")");
  }
}

ShmLink::~ShmLink() {
  if (!quiet_)
    OCCL_LOG(kInfo, kTransport, "shared memory with rank ", peer_, ": ", tickets_, " payload(s) sent by reference, ",
             refs_read_, " (", ref_bytes_read_, " bytes) read by reference, ", split_reads_,
             " of them split with the sender; ", split_chunks_written_, " chunk(s) written into rank ", peer_,
             "'s buffers");
}

// Payloads from this size up go by reference where the receiver can read
// them: below it, two copies through the cache-resident ring cost less than
// the system call and page pinning.
constexpr size_t kByReferenceMin = 256 * 1024;

bool ShmLink::by_reference(size_t bytes) const {
  return bytes >= kByReferenceMin && out_->consumer_reads_refs.load(std::memory_order_acquire) != 0;
}

/// Follows the header in a by-reference record.
struct RefDesc {
  uint64_t addr;    ///< the payload's address in the sender's memory
  uint64_t ticket;  ///< the sender's number for it (see refs_done)
};

/// A split by-reference receive: the consumer's dst is shared from payloads
/// of this size up (smaller ones are one chunk).
constexpr size_t kSplitMin = size_t(128) << 10;
constexpr uint64_t kSplitIndexMask = (uint64_t(1) << kSplitIndexBits) - 1;

constexpr size_t split_chunks(size_t bytes) {
  const size_t c = split_chunk(bytes);
  return (bytes + c - 1) / c;
}
static_assert(split_chunks(size_t(1) << 40) < (size_t(1) << kSplitIndexBits), "chunk counts fit their bits");

constexpr size_t kRefChunk = 4 << 20;  // by-reference copy per call (other transfers interleave)

bool ShmLink::ticket_done(uint64_t ticket) const { return out_->refs_done.load(std::memory_order_acquire) >= ticket; }

bool ShmLink::arm_ticket_wait(uint64_t ticket, uint32_t flag) {
  out_->producer_sleeping.store(flag);
  sleeper_fence();
  if (ticket_done(ticket)) {
    out_->producer_sleeping.store(0);
    return false;
  }
  return true;
}

void ShmLink::copy_remote(bool write, char* local, uint64_t remote, size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec l{local + done, n - done};
    iovec r{reinterpret_cast<void*>(remote + done), n - done};
    ssize_t k =
        write ? ::process_vm_writev(peer_pid_, &l, 1, &r, 1, 0) : ::process_vm_readv(peer_pid_, &l, 1, &r, 1, 0);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno == ESRCH) {
      fail(Status::kPeerFailure, "the ", write ? "receiving" : "sending", " process (pid ", peer_pid_,
           write ? ") exited while data was written to it" : ") exited while its data was being read");
    }
    fail_errno(str_cat(write ? "process_vm_writev of " : "process_vm_readv of ", n - done,
                       write ? " bytes to pid " : " bytes from pid ", peer_pid_),
               k < 0 ? errno : EIO);
  }
}

void ShmLink::read_remote(void* dst, uint64_t remote, size_t n) {
  copy_remote(false, static_cast<char*>(dst), remote, n);
  ref_bytes_read_ += n;
}

bool ShmLink::send_by_reference(Message& m) {
  if (m.header_done == 0) {
    // Header, address and ticket as one record (the ring always has room
    // for a record of this size when it has room for anything).
    RefDesc d{reinterpret_cast<uint64_t>(m.payload.ptr), tickets_ + 1};
    size_t k = write_records(static_cast<const char*>(m.header), m.header_bytes, reinterpret_cast<const char*>(&d),
                             sizeof d, kRefFlag);
    if (k == 0) return false;
    if (k != m.header_bytes + sizeof d) fail(Status::kInternal, "a by-reference record was cut (", k, " bytes)");
    owe_consumer_ = true;
    m.header_done = m.header_bytes;
    st(m).ticket = ++tickets_;
    return true;
  }
  m.complete = ticket_done(st(m).ticket);
  return !m.complete && help_split(m);
}

bool ShmLink::split_open(const Message& m) const {
  if (!can_write_peer_) return false;
  const uint64_t w = out_->split_claim.load(std::memory_order_acquire);
  return (w >> kSplitIndexBits) == st(m).ticket && (w & kSplitIndexMask) < split_chunks(m.payload.bytes);
}

bool ShmLink::help_split(const Message& m) {
  if (!can_write_peer_) return false;
  const size_t n = m.payload.bytes;
  const uint64_t chunks = split_chunks(n);
  uint64_t w = out_->split_claim.load(std::memory_order_acquire);
  for (;;) {
    if ((w >> kSplitIndexBits) != st(m).ticket || (w & kSplitIndexMask) >= chunks) return false;
    if (out_->split_claim.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) break;
  }
  // Claimed chunk i of this ticket: the consumer waits for it before it
  // moves on, so the destination it published stays valid.
  const size_t c = split_chunk(n);
  const size_t at = static_cast<size_t>(w & kSplitIndexMask) * c;
  const uint64_t dst = out_->split_dst.load(std::memory_order_relaxed);
  copy_remote(/*write=*/true, m.payload.ptr + at, dst + at, std::min(c, n - at));
  out_->split_written.fetch_add(1, std::memory_order_release);
  ++split_chunks_written_;
  owe_consumer_ = true;  // a consumer asleep waiting for this chunk
  return true;
}

bool ShmLink::recv_split(Message& m) {
  const size_t bytes = m.payload.bytes;
  const uint64_t chunks = split_chunks(bytes);
  if (!st(m).split) {
    // Publish: destination first, then the claim word that names the ticket.
    in_->split_dst.store(reinterpret_cast<uint64_t>(m.payload.ptr), std::memory_order_relaxed);
    in_->split_written.store(0, std::memory_order_relaxed);
    in_->split_claim.store(st(m).ticket << kSplitIndexBits, std::memory_order_release);
    st(m).split = true;
    owe_producer_ = true;  // a sender asleep waiting for its ticket may help:
    flush();               // wake it now, not after this side's copies
  }
  if (!st(m).split_claimed) {
    // One chunk per call, so that the step's other transfers keep moving.
    uint64_t w = in_->split_claim.load(std::memory_order_relaxed);
    while ((w & kSplitIndexMask) < chunks &&
           !in_->split_claim.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {}
    if ((w & kSplitIndexMask) < chunks) {
      const size_t c = split_chunk(bytes);
      const size_t at = static_cast<size_t>(w & kSplitIndexMask) * c;
      const size_t n = std::min(c, bytes - at);
      ++st(m).split_mine;  // claimed by this side (abandon counts on it, also if the read fails)
      read_remote(m.payload.ptr + at, st(m).remote + at, n);
      m.done += n;
      return true;
    }
    st(m).split_claimed = true;
  }
  // Every chunk is claimed: done once the sender's are written.
  const uint64_t theirs = chunks - st(m).split_mine;
  if (in_->split_written.load(std::memory_order_acquire) < theirs) return false;
  ref_bytes_read_ += bytes - m.done;  // the sender's chunks (read_remote counted this side's)
  m.done = bytes;
  ++split_reads_;
  ++refs_read_;
  in_->refs_done.fetch_add(1, std::memory_order_release);
  owe_producer_ = true;
  m.complete = true;
  return true;
}

bool ShmLink::recv_by_reference(Message& m) {
  const size_t bytes = m.payload.bytes;
  if (st(m).split || (m.may_split && m.sink == nullptr && bytes >= kSplitMin && m.done == 0 &&
                      in_->producer_writes_refs.load(std::memory_order_relaxed) != 0)) {
    return recv_split(m);
  }
  // One chunk per call, so that the step's other transfers keep moving.
  if (m.done < bytes) {
    if (m.sink == nullptr) {
      size_t n = std::min(kRefChunk, bytes - m.done);
      read_remote(m.payload.ptr + m.done, st(m).remote + m.done, n);
      m.done += n;
    } else {
      // Into the cache-sized stage, then to the sink from there.
      size_t n = std::min(m.stage.bytes, bytes - m.done);
      read_remote(m.stage.ptr, st(m).remote + m.done, n);
      size_t taken = m.sink->take(m.stage.ptr, n);
      if (taken != n) fail(Status::kInternal, "a by-reference payload of ", bytes, " bytes is not whole granules");
      m.done += n;
    }
  }
  if (m.done == bytes) {
    ++refs_read_;
    in_->refs_done.fetch_add(1, std::memory_order_release);
    owe_producer_ = true;
    m.complete = true;
  }
  return true;
}

void ShmLink::announce_membarrier() {
  self_barrier_ = membarrier_ready();
  if (!self_barrier_) return;
  in_->consumer_membarrier.store(1);
  out_->producer_membarrier.store(1);
}

void ShmLink::sleeper_fence() const {
  if (!membarrier_ready() || ::syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

size_t ShmLink::write_records(const char* a, size_t na, const char* b, size_t nb, uint64_t flags) {
  const size_t total = na + nb;
  size_t done = 0;
  while (done < total) {
    bool skip = false;
    const size_t need = room_needed(head_, total - done, &skip);
    size_t room = kShmRingBytes - static_cast<size_t>(head_ - tail_seen_);
    if (room < need) {
      tail_seen_ = out_->tail.load(std::memory_order_acquire);
      room = kShmRingBytes - static_cast<size_t>(head_ - tail_seen_);
      if (room < need) break;
    }
    size_t pos = static_cast<size_t>(head_ % kShmRingBytes);
    size_t to_end = kShmRingBytes - pos;
    if (skip) {
      // Too close to the end for this record: continue at the ring's start.
      word_at(out_data_, head_ + to_end).store(0, std::memory_order_relaxed);
      word_at(out_data_, head_).store(kSkipWord, std::memory_order_release);
      head_ += to_end;
      room -= to_end;
      pos = 0;
      to_end = kShmRingBytes;
    }
    size_t cap = std::min(room - kSpare, to_end) - 8;
    size_t len = std::min({total - done, cap, kMaxRecord});
    char* out = out_data_ + pos + 8;
    if (done < na) {
      size_t from_a = std::min(len, na - done);
      kernels::cpu::copy(out, a + done, from_a);
      if (len > from_a) kernels::cpu::copy(out + from_a, b, len - from_a);
    } else {
      kernels::cpu::copy(out, b + (done - na), len);
    }
    const size_t rec = round_up(8 + len);
    word_at(out_data_, head_ + rec).store(0, std::memory_order_relaxed);
    word_at(out_data_, head_).store((len + 1) | flags, std::memory_order_release);
    flags = 0;
    head_ += rec;
    done += len;
  }
  return done;
}

Whole ShmLink::send_whole(const void* header, size_t header_bytes, const void* payload, size_t bytes) {
  // One record, after a skip to the ring's start when it does not fit
  // before the end (write_records' general case in a few moves; the same
  // records).
  const size_t total = header_bytes + bytes;
  if (total > kSmallRecord) return Whole::kNo;
  const size_t rec = round_up(8 + total);
  size_t pos = static_cast<size_t>(head_ % kShmRingBytes);
  const size_t to_end = kShmRingBytes - pos;
  const bool skip = to_end < std::max(rec, 2 * kLine);  // room_needed's test for a record this small
  const size_t need = (skip ? to_end : 0) + rec + kSpare;
  if (kShmRingBytes - static_cast<size_t>(head_ - tail_seen_) < need) {
    tail_seen_ = out_->tail.load(std::memory_order_acquire);
    if (kShmRingBytes - static_cast<size_t>(head_ - tail_seen_) < need) return Whole::kNotYet;
  }
  if (skip) {
    word_at(out_data_, head_ + to_end).store(0, std::memory_order_relaxed);
    word_at(out_data_, head_).store(kSkipWord, std::memory_order_release);
    head_ += to_end;
    pos = 0;
  }
  char* out = out_data_ + pos + 8;
  if (header_bytes == kEngineHeaderBytes) {
    copy_header_words(out, header);  // a fixed size: a few moves, no call
  } else {
    std::memcpy(out, header, header_bytes);
  }
  copy_apart(out + header_bytes, payload, bytes);
  word_at(out_data_, head_ + rec).store(0, std::memory_order_relaxed);
  word_at(out_data_, head_).store(total + 1, std::memory_order_release);
  head_ += rec;
  owe_consumer_ = true;
  prefetch_for_write(out_data_ + (head_ + kLine) % kShmRingBytes);
  return Whole::kDone;
}

const char* ShmLink::peek_whole(size_t bytes, Whole& why) {
  why = Whole::kNo;
  if (read_off_ != 0) return nullptr;  // a message part-read by recv_header
  uint64_t w = word_at(in_data_, read_pos_).load(std::memory_order_acquire);
  if (w == kSkipWord) {
    read_pos_ += kShmRingBytes - read_pos_ % kShmRingBytes;
    in_->tail.store(read_pos_, std::memory_order_release);
    owe_producer_ = true;
    w = word_at(in_data_, read_pos_).load(std::memory_order_acquire);
  }
  if (w == 0) {
    why = Whole::kNotYet;
    return nullptr;
  }
  if ((w & kRefFlag) != 0 || w - 1 != bytes) return nullptr;  // by reference, or another size
  why = Whole::kDone;
  return in_data_ + read_pos_ % kShmRingBytes + 8;
}

void ShmLink::take_whole(size_t bytes) { next_record(bytes); }

bool ShmLink::send(Message& m) {
  if (m.header_done == 0 && !st(m).by_reference && m.may_reference && by_reference(m.payload.bytes)) {
    st(m).by_reference = true;
  }
  if (st(m).by_reference) return send_by_reference(m);
  // A small message not started yet: one record.
  if (m.header_done == 0 && m.done == 0 &&
      send_whole(m.header, m.header_bytes, m.payload.ptr, m.payload.bytes) == Whole::kDone) {
    m.header_done = m.header_bytes;
    m.done = m.payload.bytes;
    m.complete = true;
    return true;
  }
  // Header and payload as one write (one publish for a small message).
  bool progressed = false;
  const char* header = static_cast<const char*>(m.header);
  while (m.header_done < m.header_bytes || m.done < m.payload.bytes) {
    const size_t hdr_left = m.header_bytes - m.header_done;
    size_t k = write_records(header + m.header_done, hdr_left, m.payload.ptr + m.done, m.payload.bytes - m.done);
    if (k == 0) break;
    const size_t kh = std::min(k, hdr_left);
    m.header_done += kh;
    m.done += k - kh;
    progressed = true;
  }
  if (progressed) owe_consumer_ = true;
  m.complete = m.header_done == m.header_bytes && m.done == m.payload.bytes;
  return progressed;
}

bool ShmLink::recv_header(Message& m) {
  if (m.header_done == 0 && read_off_ == 0) {
    // The common case in one look: a record that begins with the whole
    // header (a small message is one record: header and payload).
    const uint64_t w = word_at(in_data_, read_pos_).load(std::memory_order_acquire);
    if (w == 0) return false;
    const size_t len = static_cast<size_t>(w - 1);
    if ((w & kRefFlag) == 0 && len >= m.header_bytes) {  // (the skip word has the flag)
      const char* at = in_data_ + read_pos_ % kShmRingBytes + 8;
      if (m.header_bytes == kEngineHeaderBytes) {
        std::memcpy(m.header, at, kEngineHeaderBytes);  // a fixed size: a few moves, no call
      } else {
        std::memcpy(m.header, at, m.header_bytes);
      }
      m.header_done = m.header_bytes;
      if (len == m.header_bytes) {
        next_record(len);
      } else {
        read_off_ = m.header_bytes;
      }
      return true;
    }
  }
  bool progressed = false;
  char* header = static_cast<char*>(m.header);
  while (m.header_done < m.header_bytes) {
    bool by_ref = false;
    std::span<const char> avail = peek(&by_ref);
    if (avail.empty()) break;
    if (by_ref) {
      // A message by reference: one record, header and address.
      RefDesc d;
      if (m.header_done != 0 || avail.size() != m.header_bytes + sizeof d) {
        fail(Status::kInternal, "malformed by-reference record from rank ", peer_, " (", avail.size(), " bytes)");
      }
      std::memcpy(header, avail.data(), m.header_bytes);
      std::memcpy(&d, avail.data() + m.header_bytes, sizeof d);
      consume(avail.size());
      m.header_done = m.header_bytes;
      st(m).by_reference = true;
      st(m).remote = d.addr;
      st(m).ticket = d.ticket;
      return true;
    }
    size_t k = std::min(avail.size(), m.header_bytes - m.header_done);
    std::memcpy(header + m.header_done, avail.data(), k);
    consume(k);
    m.header_done += k;
    progressed = true;
  }
  return progressed;
}

namespace {
/// Copies part of a received payload out of the ring: past the caches for a
/// large payload (Message::stream), else memcpy.
void copy_out(const Message& m, char* dst, const char* src, size_t n) {
  if (m.stream) {
    kernels::cpu::stream_copy(dst, src, n);
  } else {
    kernels::cpu::copy(dst, src, n);
  }
}
}  // namespace

bool ShmLink::recv_payload(Message& m) {
  if (st(m).by_reference) return recv_by_reference(m);
  bool progressed = false;
  const size_t bytes = m.payload.bytes;
  if (m.sink == nullptr) {
    if (m.done == 0 && read_off_ != 0 && bytes > 0) {
      // The common case: the rest of the record (after the header) is the
      // whole payload.
      const uint64_t w = word_at(in_data_, read_pos_).load(std::memory_order_relaxed);  // seen by recv_header
      const size_t len = static_cast<size_t>(w - 1);
      if (len - read_off_ == bytes) {
        copy_out(m, m.payload.ptr, in_data_ + read_pos_ % kShmRingBytes + 8 + read_off_, bytes);
        next_record(len);
        m.done = bytes;
        m.complete = true;
        return true;
      }
    }
    // Straight out of the ring into the destination.
    while (m.done < bytes) {
      std::span<const char> avail = peek();
      if (avail.empty()) break;
      size_t k = std::min(avail.size(), bytes - m.done);
      copy_out(m, m.payload.ptr + m.done, avail.data(), k);
      consume(k);
      m.done += k;
      progressed = true;
    }
    m.complete = m.done == bytes;
    return progressed;
  }
  while (m.done < bytes) {
    if (m.staged == 0) {
      // Zero-copy: the sink takes whole granules straight out of the ring.
      std::span<const char> avail = peek();
      size_t n = std::min(avail.size(), bytes - m.done);
      size_t taken = n > 0 ? m.sink->take(avail.data(), n) : 0;
      if (taken > 0) {
        consume(taken);
        m.done += taken;
        progressed = true;
        continue;
      }
    }
    // Only a granule split by the ring's wrap is staged: up to its end.
    size_t want = std::min({m.stage.bytes - m.staged, bytes - m.done, m.granule - m.staged % m.granule});
    size_t k = want > 0 ? try_recv(m.stage.ptr + m.staged, want) : 0;
    take_staged(m, k);
    if (k > 0) progressed = true;
    if (k == 0) break;
  }
  m.complete = m.done == bytes && m.staged == 0;
  return progressed;
}

std::span<const char> ShmLink::peek(bool* by_ref) {
  for (;;) {
    uint64_t w = word_at(in_data_, read_pos_).load(std::memory_order_acquire);
    if (w == 0) return {};
    if (w == kSkipWord) {
      read_pos_ += kShmRingBytes - read_pos_ % kShmRingBytes;
      in_->tail.store(read_pos_, std::memory_order_release);
      owe_producer_ = true;
      continue;
    }
    if (by_ref != nullptr) *by_ref = (w & kRefFlag) != 0;
    size_t len = static_cast<size_t>((w & ~kRefFlag) - 1);
    return {in_data_ + read_pos_ % kShmRingBytes + 8 + read_off_, len - read_off_};
  }
}

void ShmLink::consume(size_t n) {
  if (n == 0) return;
  uint64_t w = word_at(in_data_, read_pos_).load(std::memory_order_relaxed);
  size_t len = static_cast<size_t>((w & ~kRefFlag) - 1);
  read_off_ += n;
  if (read_off_ < len) return;
  next_record(len);
}

void ShmLink::next_record(size_t len) {
  read_pos_ += round_up(8 + len);
  read_off_ = 0;
  in_->tail.store(read_pos_, std::memory_order_release);
  owe_producer_ = true;
}

size_t ShmLink::try_recv(void* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    std::span<const char> avail = peek();
    if (avail.empty()) break;
    size_t k = std::min(avail.size(), n - done);
    kernels::cpu::copy(static_cast<char*>(data) + done, avail.data(), k);
    consume(k);
    done += k;
  }
  return done;
}

void ShmLink::flush() {
  if (!owe_consumer_ && !owe_producer_) return;
  // Pairs with sleeper_fence() in arm_*_wait: either the sleeper sees the new
  // record or room, or this sees its flag and rings. A sleeper that uses
  // membarrier() (and this process registered for it) needs no fence here.
  // The peer's flags are set once and never cleared, so they are read only
  // until seen.
  if (self_barrier_ && owe_consumer_ && !consumer_barrier_) {
    consumer_barrier_ = out_->consumer_membarrier.load(std::memory_order_relaxed) != 0;
  }
  if (self_barrier_ && owe_producer_ && !producer_barrier_) {
    producer_barrier_ = in_->producer_membarrier.load(std::memory_order_relaxed) != 0;
  }
  const bool peers_barrier =
      self_barrier_ && (!owe_consumer_ || consumer_barrier_) && (!owe_producer_ || producer_barrier_);
  if (peers_barrier) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  // The peer sleeps on one thing: wake it once even when it armed both
  // directions (a bit per way it asked for).
  uint32_t found = 0;
  if (owe_consumer_ && out_->consumer_sleeping.load(std::memory_order_relaxed) != 0) {
    found |= out_->consumer_sleeping.exchange(0);
  }
  if (owe_producer_ && in_->producer_sleeping.load(std::memory_order_relaxed) != 0) {
    found |= in_->producer_sleeping.exchange(0);
  }
  owe_consumer_ = owe_producer_ = false;
  if (found != 0) wake_peer(found);
}

void ShmLink::wake_peer(uint32_t flags) {
  if ((flags & kSleepFutex) != 0) wake_futex(peer_segment_->wake_word());
  if ((flags & kSleepDoorbell) != 0) doorbell_();
}

namespace {
uint32_t sleep_flag(WakeBy by) { return by == WakeBy::kFutex ? kSleepFutex : kSleepDoorbell; }
WaitOn::How armed_how(WakeBy by) { return by == WakeBy::kFutex ? WaitOn::How::kFutex : WaitOn::How::kDoorbell; }
}  // namespace

WaitOn ShmLink::arm_send(const Message& m, WakeBy by) {
  const size_t remaining = st(m).by_reference ? m.header_bytes + sizeof(RefDesc)
                                              : (m.header_bytes - m.header_done) + (m.payload.bytes - m.done);
  const uint32_t flag = sleep_flag(by);
  bool armed = false;
  if (st(m).by_reference && m.header_done == m.header_bytes) {
    // Woken when the receiver is done, or when it publishes a split of this
    // payload (it then owes this side a wake-up: recv_split).
    armed = arm_ticket_wait(st(m).ticket, flag);
    if (armed && split_open(m)) {
      out_->producer_sleeping.store(0);
      armed = false;
    }
  } else {
    armed = arm_room_wait(remaining, flag);
  }
  return {armed ? armed_how(by) : WaitOn::How::kReady, -1, 0};
}

WaitOn ShmLink::arm_recv(const Message& m, WakeBy by) {
  in_->consumer_sleeping.store(sleep_flag(by));
  sleeper_fence();
  // Ready: a record to read, or in a split receive a chunk to claim or the
  // sender's chunks all written (help_split wakes this side after each).
  if (word_at(in_data_, read_pos_).load(std::memory_order_acquire) != 0 ||
      (st(m).split && (!st(m).split_claimed || in_->split_written.load(std::memory_order_acquire) >=
                                                   split_chunks(m.payload.bytes) - st(m).split_mine))) {
    in_->consumer_sleeping.store(0);
    return {WaitOn::How::kReady, -1, 0};
  }
  return {armed_how(by), -1, 0};
}

bool ShmLink::arm_room_wait(size_t remaining, uint32_t flag) {
  out_->producer_sleeping.store(flag);
  sleeper_fence();
  tail_seen_ = out_->tail.load(std::memory_order_acquire);
  bool skip = false;
  if (kShmRingBytes - static_cast<size_t>(head_ - tail_seen_) >= room_needed(head_, remaining, &skip)) {
    out_->producer_sleeping.store(0);
    return false;
  }
  return true;
}

void ShmLink::abandon(Message& m) noexcept {
  if (!st(m).split || m.complete) return;
  // Every chunk counted as claimed: the sender takes no more of this payload.
  const uint64_t chunks = split_chunks(m.payload.bytes);
  uint64_t w = in_->split_claim.load(std::memory_order_acquire);
  while ((w >> kSplitIndexBits) == st(m).ticket && (w & kSplitIndexMask) < chunks &&
         !in_->split_claim.compare_exchange_weak(w, (st(m).ticket << kSplitIndexBits) | chunks,
                                                 std::memory_order_acq_rel, std::memory_order_acquire)) {}
  const uint64_t claimed = std::min<uint64_t>(w & kSplitIndexMask, chunks);
  const uint64_t theirs = claimed > st(m).split_mine ? claimed - st(m).split_mine : 0;
  // A chunk the sender claimed is being written now (one system call of at
  // most 256 KiB): wait for it, so that the caller may free the buffer.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (in_->split_written.load(std::memory_order_acquire) < theirs && std::chrono::steady_clock::now() < until) {
    ::sched_yield();
  }
  if (in_->split_written.load(std::memory_order_acquire) < theirs && !quiet_) {
    OCCL_LOG(kWarn, kTransport, "shared memory from rank ", peer_, ": gave up a split receive while rank ", peer_,
             " had still not written a chunk after 5 s");
  }
  st(m).split = false;
}

void ShmLink::disarm() {
  out_->producer_sleeping.store(0, std::memory_order_relaxed);
  in_->consumer_sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace omniccl::transport
