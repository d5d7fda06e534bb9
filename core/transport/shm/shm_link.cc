#include "transport/shm/shm_link.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "common/fd.h"
#include "common/status.h"

namespace omniccl::transport {

namespace {
constexpr size_t kPerRing = sizeof(RingHeader) + kShmRingBytes;
constexpr size_t kHeaderBytes = 4096;
}  // namespace

size_t ShmSegment::bytes_for(int nranks) { return kHeaderBytes + kPerRing * size_t(nranks); }

std::unique_ptr<ShmSegment> ShmSegment::create(const std::string& name, int nranks) {
  UniqueFd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) fail_errno(str_cat("shm_open(", name, ", O_CREAT)"), errno);
  size_t bytes = bytes_for(nranks);
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    ::shm_unlink(name.c_str());
    fail_errno(str_cat("ftruncate(", name, ", ", bytes, ") - is /dev/shm large enough?"), err);
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    int err = errno;
    ::shm_unlink(name.c_str());
    fail_errno(str_cat("mmap(", name, ")"), err);
  }
  auto seg = std::unique_ptr<ShmSegment>(new ShmSegment(name, base, bytes, true));
  for (int p = 0; p < nranks; ++p) {
    RingHeader* h = new (seg->ring(p)) RingHeader;  // placement-new on shared memory (no ownership)
    h->head.store(0);
    h->tail.store(0);
    h->consumer_sleeping.store(0);
    h->producer_sleeping.store(0);
  }
  return seg;
}

std::unique_ptr<ShmSegment> ShmSegment::open(const std::string& name, int nranks) {
  UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) fail_errno(str_cat("shm_open(", name, ")"), errno);
  size_t bytes = bytes_for(nranks);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    fail(Status::kInternal, "shared memory segment ", name, " is smaller than expected");
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) fail_errno(str_cat("mmap(", name, ")"), errno);
  return std::unique_ptr<ShmSegment>(new ShmSegment(name, base, bytes, false));
}

ShmSegment::~ShmSegment() {
  if (owner_) unlink();
  ::munmap(base_, bytes_);
}

void ShmSegment::unlink() {
  if (owner_ && !unlinked_) {
    ::shm_unlink(name_.c_str());
    unlinked_ = true;
  }
}

RingHeader* ShmSegment::ring(int from) const {
  return reinterpret_cast<RingHeader*>(static_cast<char*>(base_) + kHeaderBytes + kPerRing * size_t(from));
}

char* ShmSegment::ring_data(int from) const {
  return reinterpret_cast<char*>(ring(from)) + sizeof(RingHeader);
}

size_t ShmLink::try_send(const void* data, size_t n) {
  uint64_t head = out_->head.load(std::memory_order_relaxed);
  uint64_t tail = out_->tail.load(std::memory_order_acquire);
  size_t room = kShmRingBytes - static_cast<size_t>(head - tail);
  size_t k = std::min(room, n);
  if (k == 0) return 0;
  size_t pos = static_cast<size_t>(head % kShmRingBytes);
  size_t first = std::min(k, kShmRingBytes - pos);
  std::memcpy(out_data_ + pos, data, first);
  if (k > first) std::memcpy(out_data_, static_cast<const char*>(data) + first, k - first);
  out_->head.store(head + k, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (out_->consumer_sleeping.load(std::memory_order_relaxed) != 0 &&
      out_->consumer_sleeping.exchange(0) != 0) {
    doorbell_();
  }
  return k;
}

size_t ShmLink::try_recv(void* data, size_t n) {
  uint64_t tail = in_->tail.load(std::memory_order_relaxed);
  uint64_t head = in_->head.load(std::memory_order_acquire);
  size_t avail = static_cast<size_t>(head - tail);
  size_t k = std::min(avail, n);
  if (k == 0) return 0;
  size_t pos = static_cast<size_t>(tail % kShmRingBytes);
  size_t first = std::min(k, kShmRingBytes - pos);
  std::memcpy(data, in_data_ + pos, first);
  if (k > first) std::memcpy(static_cast<char*>(data) + first, in_data_, k - first);
  in_->tail.store(tail + k, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (in_->producer_sleeping.load(std::memory_order_relaxed) != 0 &&
      in_->producer_sleeping.exchange(0) != 0) {
    doorbell_();
  }
  return k;
}

std::span<const char> ShmLink::peek() {
  uint64_t tail = in_->tail.load(std::memory_order_relaxed);
  uint64_t head = in_->head.load(std::memory_order_acquire);
  size_t pos = static_cast<size_t>(tail % kShmRingBytes);
  size_t contiguous = std::min(static_cast<size_t>(head - tail), kShmRingBytes - pos);
  return {in_data_ + pos, contiguous};
}

void ShmLink::consume(size_t n) {
  if (n == 0) return;
  uint64_t tail = in_->tail.load(std::memory_order_relaxed);
  in_->tail.store(tail + n, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (in_->producer_sleeping.load(std::memory_order_relaxed) != 0 && in_->producer_sleeping.exchange(0) != 0) {
    doorbell_();
  }
}

bool ShmLink::arm_send_wait() {
  out_->producer_sleeping.store(1);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t head = out_->head.load(std::memory_order_relaxed);
  uint64_t tail = out_->tail.load(std::memory_order_acquire);
  if (head - tail < kShmRingBytes) {
    out_->producer_sleeping.store(0);
    return false;
  }
  return true;
}

bool ShmLink::arm_recv_wait() {
  in_->consumer_sleeping.store(1);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t tail = in_->tail.load(std::memory_order_relaxed);
  uint64_t head = in_->head.load(std::memory_order_acquire);
  if (head != tail) {
    in_->consumer_sleeping.store(0);
    return false;
  }
  return true;
}

void ShmLink::disarm() {
  out_->producer_sleeping.store(0, std::memory_order_relaxed);
  in_->consumer_sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace omniccl::transport
