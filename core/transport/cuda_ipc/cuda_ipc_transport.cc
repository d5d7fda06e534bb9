#include "transport/cuda_ipc/cuda_ipc_transport.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "common/fd.h"
#include "common/gpu_runtime.h"
#include "common/log.h"
#include "common/status.h"
#include "transport/cuda_ipc/fd_passing.h"
#include "transport/cuda_ipc/ipc_cache.h"

namespace omniccl::transport {

namespace {

constexpr size_t kFlagAlign = 256;
constexpr const char* kName = "cuda_ipc";
/// Peers' allocations kept mapped after their last registered buffer went
/// (IpcCache): enough for a training step's buffers to be registered again
/// next step without new mappings.
constexpr size_t kIdleMappings = 32;

size_t flag_bytes(int size) { return (cuda_ipc_flag_words(size) * 8 + kFlagAlign - 1) / kFlagAlign * kFlagAlign; }

std::string to_hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

bool from_hex(const std::string& s, unsigned char* out, size_t n) {
  if (s.size() != 2 * n) return false;
  auto nibble = [](char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; };
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
  return true;
}

/// A peer's part, parsed.
struct Part {
  std::string uuid;
  int device = 0;
  size_t scratch = 0;
  GpuIpcHandle handle;
};

Part parse_part(const std::string& text, int rank) {
  std::istringstream in(text);
  std::string version, hex;
  Part p;
  in >> version >> p.uuid >> p.device >> p.scratch >> hex;
  if (version != "v1" || !in || !from_hex(hex, p.handle.bytes, sizeof p.handle.bytes)) {
    fail(Status::kInvalidArgument, "rank ", rank, "'s CUDA IPC record is of another version or malformed ('",
         text.substr(0, 40), "'): are all ranks running the same build of OmniCCL?");
  }
  return p;
}

/// A peer's process, watched through a pidfd (kill(pid, 0) where there is none).
class PeerProcess {
 public:
  explicit PeerProcess(int pid) : pid_(pid), fd_(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))) {}
  bool gone() const {
    if (fd_.valid()) {
      pollfd p{fd_.get(), POLLIN, 0};
      return ::poll(&p, 1, 0) > 0;
    }
    return ::kill(pid_, 0) != 0 && errno == ESRCH;
  }
  int pid() const { return pid_; }

 private:
  int pid_;
  UniqueFd fd_;
};

class CudaIpcWindow final : public DeviceWindow {
 public:
  CudaIpcWindow(GpuRuntime& rt, int rank, int device, size_t flag_words, size_t scratch, size_t flag_bytes)
      : rt_(rt),
        rank_(rank),
        device_(device),
        flag_words_(flag_words),
        scratch_(scratch),
        flag_bytes_(flag_bytes),
        cache_(rt, kIdleMappings) {}
  ~CudaIpcWindow() override {
    for (const auto& [mapped, base] : ranges_) cache_.release(base);
    for (size_t r = 0; r < bases_.size(); ++r) {
      if (bases_[r] == nullptr) continue;
      try {
        if (int(r) == rank_) {
          if (owns_block_) rt_.device_free(bases_[r]);
        } else {
          rt_.ipc_close(bases_[r]);
        }
      } catch (const std::exception& e) {
        OCCL_LOG(kWarn, kTransport, "releasing rank ", r, "'s CUDA IPC memory: ", e.what());
      }
    }
  }
  /// Every peer's memory is mapped: the window frees this rank's block.
  void own_block() { owns_block_ = true; }
  void add(char* base, int pid) {
    bases_.push_back(base);
    peers_.emplace_back(pid);
  }
  const char* kind() const override { return kName; }
  int device() const override { return device_; }
  uint64_t* flags(int r) override { return reinterpret_cast<uint64_t*>(bases_[size_t(r)]); }
  size_t flag_words() const override { return flag_words_; }
  char* scratch(int r) override { return bases_[size_t(r)] + flag_bytes_; }
  size_t scratch_bytes() const override { return scratch_; }
  bool peer_gone(int r) override { return r != rank_ && peers_[size_t(r)].gone(); }
  std::string describe(int r) const override { return str_cat("rank ", r, " (pid ", peers_[size_t(r)].pid(), ")"); }
  std::string export_range(const void* p, size_t bytes) override;
  char* import_range(int r, const std::string& record, Deadline deadline) override;
  void release_range(char* mapped) override;
  void exports_done() override {
    if (fds_) fds_->withdraw_all();
  }

 private:
  GpuRuntime& rt_;
  int rank_;
  int device_;
  size_t flag_words_;
  size_t scratch_;
  size_t flag_bytes_;
  std::vector<char*> bases_;
  std::vector<PeerProcess> peers_;
  bool owns_block_ = false;
  IpcCache cache_;
  /// What import_range handed out: the range's first byte -> its
  /// allocation's base, one entry per import.
  std::multimap<char*, char*> ranges_;
  /// Hands peers the descriptors of this rank's VMM memory; made with the
  /// first such export (a process that never registers VMM memory has no
  /// socket and no thread for it).
  std::unique_ptr<FdServer> fds_;

  std::string export_vmm(const GpuAllocation& a, size_t offset, size_t bytes);
  char* import_vmm(int r, std::istringstream& in, Deadline deadline);
};

// The records, by the kind of memory (GpuMemoryKind):
//   cudaMalloc memory: "r1 <handle hex> <offset in the allocation> <allocation bytes> <range bytes>";
//   VMM memory:        "r2 <socket> <offer id> <allocation key> <offset> <allocation bytes> <range bytes>",
// where <socket> is this rank's FdServer (fd_passing.h), from which each peer
// takes the allocation's descriptor (offer <offer id>) unless its cache
// already maps <allocation key>.
std::string CudaIpcWindow::export_range(const void* p, size_t bytes) {
  const GpuAllocation a = rt_.allocation_of(p);
  const size_t offset = size_t(static_cast<const char*>(p) - static_cast<const char*>(a.base));
  check_arg(offset + bytes <= a.bytes, "the buffer's ", bytes, " bytes run past the end of its allocation (",
            a.bytes - offset, " bytes from the buffer on)");
  if (a.kind == GpuMemoryKind::kVmmFd) return export_vmm(a, offset, bytes);
  if (a.kind != GpuMemoryKind::kLegacyIpc) {
    fail(Status::kUnsupported,
         "the buffer is in memory of CUDA's virtual memory API (cuMemCreate) that was not made shareable as a POSIX "
         "file descriptor (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), so no other process can map it; register a "
         "cudaMalloc buffer, or one allocated with that handle type, or leave it unregistered");
  }
  const GpuIpcHandle h = rt_.ipc_export(a.base);
  return str_cat("r1 ", to_hex(h.bytes, sizeof h.bytes), " ", offset, " ", a.bytes, " ", bytes);
}

std::string CudaIpcWindow::export_vmm(const GpuAllocation& a, size_t offset, size_t bytes) {
  if (!fds_) {
    std::vector<pid_t> peers;
    for (size_t r = 0; r < peers_.size(); ++r) {
      if (int(r) != rank_) peers.push_back(peers_[r].pid());
    }
    fds_ = std::make_unique<FdServer>(std::move(peers));
  }
  fds_->withdraw_all();  // what an earlier registration that failed early left
  const uint64_t offer = fds_->offer(rt_.vmm_export(a.base));
  // Without an id from the runtime, the offer itself is the key: a mapping
  // is then never shared between registrations, but never stale either.
  const std::string key = a.id != 0 ? str_cat("a", a.id) : str_cat("o", offer, "-", fds_->name());
  return str_cat("r2 ", fds_->name(), " ", offer, " ", key, " ", offset, " ", a.bytes, " ", bytes);
}

char* CudaIpcWindow::import_range(int r, const std::string& record, Deadline deadline) {
  std::istringstream in(record);
  std::string version;
  in >> version;
  if (version == "r2") return import_vmm(r, in, deadline);
  std::string hex;
  size_t offset = 0, alloc = 0, bytes = 0;
  GpuIpcHandle h;
  in >> hex >> offset >> alloc >> bytes;
  if (version != "r1" || !in || !from_hex(hex, h.bytes, sizeof h.bytes) || offset + bytes > alloc) {
    fail(Status::kInvalidArgument, "rank ", r, "'s record of a registered buffer is malformed ('", record.substr(0, 40),
         "'): are all ranks running the same build of OmniCCL?");
  }
  char* base = nullptr;
  try {
    base = cache_.acquire(r, h);
  } catch (const Error& e) {
    fail(Status::kSystem, "cannot map rank ", r, "'s registered buffer (", e.what(), ")");
  }
  ranges_.emplace(base + offset, base);
  return base + offset;
}

char* CudaIpcWindow::import_vmm(int r, std::istringstream& in, Deadline deadline) {
  std::string socket, key;
  uint64_t offer = 0;
  size_t offset = 0, alloc = 0, bytes = 0;
  in >> socket >> offer >> key >> offset >> alloc >> bytes;
  if (!in || offset + bytes > alloc) {
    fail(Status::kInvalidArgument, "rank ", r,
         "'s record of a registered VMM buffer is malformed: are all ranks running the same build of OmniCCL?");
  }
  const std::string what = str_cat("taking the descriptor of ", describe(r), "'s registered buffer");
  auto alive = [&] {
    if (peers_[size_t(r)].gone()) fail(Status::kPeerFailure, what, ": the process has exited");
  };
  char* base = nullptr;
  try {
    base = cache_.acquire_vmm(r, key, alloc,
                              [&] { return fetch_fd(socket, peers_[size_t(r)].pid(), offer, deadline, alive, what); });
  } catch (const Error& e) {
    if (e.status() == Status::kPeerFailure || e.status() == Status::kTimeout) throw;
    fail(Status::kSystem, "cannot map rank ", r, "'s registered VMM buffer (", e.what(), ")");
  }
  ranges_.emplace(base + offset, base);
  return base + offset;
}

void CudaIpcWindow::release_range(char* mapped) {
  auto it = ranges_.find(mapped);
  if (it == ranges_.end()) return;
  cache_.release(it->second);
  ranges_.erase(it);
}

class CudaIpcTransport final : public Transport {
 public:
  CudaIpcTransport(const CudaIpcOptions& o, int rank, int size) : options_(o), rank_(rank), size_(size) {}
  ~CudaIpcTransport() override {
    if (block_ != nullptr && !window_made_) free_block();
  }
  const char* name() const override { return kName; }
  int priority() const override { return 0; }
  bool moves_device_memory() const override { return true; }
  std::string part() override;
  Verdict can_connect(const Endpoint& local, const Endpoint& peer) const override;
  std::unique_ptr<Link> connect(LinkSetup&) override {
    fail(Status::kInternal, "the cuda_ipc transport carries no messages");
  }
  std::array<std::unique_ptr<Link>, 2> loopback() override {
    fail(Status::kInternal, "the cuda_ipc transport carries no messages");
  }
  std::unique_ptr<DeviceWindow> open_window(std::span<const Endpoint> all) override;

 private:
  void free_block() {
    try {
      rt_->device_free(block_);
    } catch (const std::exception& e) {
      OCCL_LOG(kWarn, kTransport, "freeing the CUDA IPC block: ", e.what());
    }
    block_ = nullptr;
  }
  /// The local ordinal of the GPU named `uuid`, or -1 when it is not visible here.
  int local_ordinal(const std::string& uuid) const;

  CudaIpcOptions options_;
  int rank_;
  int size_;
  GpuRuntime* rt_ = nullptr;
  int device_ = -1;
  char* block_ = nullptr;
  bool window_made_ = false;  ///< the window owns (and frees) the block from then on
  std::string why_not_;       ///< why this rank offers nothing
};

std::string CudaIpcTransport::part() {
  if (options_.mode == "staged") return {};
  rt_ = gpu_runtime();
  if (rt_ == nullptr) return {};
  if (options_.mode == "auto" && !gpu_in_use()) {
    why_not_ = "this process had no GPU in use when the communicator was created";
    return {};
  }
  if (!rt_->unavailable_reason().empty()) return {};
  try {
    device_ = rt_->current_device();
    const std::string uuid = rt_->device_uuid(device_);
    block_ = static_cast<char*>(rt_->device_alloc(flag_bytes(size_) + options_.buffer_bytes));
    const GpuIpcHandle h = rt_->ipc_export(block_);
    return str_cat("v1 ", uuid, " ", device_, " ", options_.buffer_bytes, " ", to_hex(h.bytes, sizeof h.bytes));
  } catch (const Error& e) {
    // A GPU that cannot share memory is a reason to stage, not to fail.
    if (block_ != nullptr) free_block();
    why_not_ = e.what();
    OCCL_LOG(kInfo, kTransport, "cuda_ipc: not offered: ", e.what());
    return {};
  }
}

int CudaIpcTransport::local_ordinal(const std::string& uuid) const {
  const int n = rt_->device_count();
  for (int d = 0; d < n; ++d) {
    if (rt_->device_uuid(d) == uuid) return d;
  }
  return -1;
}

Verdict CudaIpcTransport::can_connect(const Endpoint& local, const Endpoint& peer) const {
  const std::string& mine = local.part(kName);
  const std::string& theirs = peer.part(kName);
  if (mine.empty()) return {false, why_not_.empty() ? "no GPU memory offered here" : why_not_};
  if (theirs.empty()) return {false, str_cat("rank ", peer.rank, " offers no GPU memory")};
  if (local.host_id != peer.host_id) return {false, "other host"};
  const Part a = parse_part(mine, local.rank), b = parse_part(theirs, peer.rank);
  if (a.scratch != b.scratch) {
    return {false, str_cat("OMNICCL_CUDA_IPC_BUFFER differs (", a.scratch, " and ", b.scratch, " bytes)")};
  }
  if (a.uuid == b.uuid) return {true, "same GPU"};
  const int ordinal = local_ordinal(b.uuid);
  if (ordinal < 0) return {false, str_cat("rank ", peer.rank, "'s GPU is not visible to this process")};
  if (!rt_->can_access_peer(device_, ordinal)) return {false, "the GPUs have no peer access"};
  return {true, "GPU peer access (NVLink/PCIe)"};
}

std::unique_ptr<DeviceWindow> CudaIpcTransport::open_window(std::span<const Endpoint> all) {
  auto w = std::make_unique<CudaIpcWindow>(*rt_, rank_, device_, cuda_ipc_flag_words(size_), options_.buffer_bytes,
                                           flag_bytes(size_));
  for (const Endpoint& e : all) {
    if (e.rank == rank_) {
      w->add(block_, e.pid);
      continue;
    }
    const Part p = parse_part(e.part(kName), e.rank);
    try {
      w->add(static_cast<char*>(rt_->ipc_open(p.handle)), e.pid);
    } catch (const Error& err) {
      fail(Status::kSystem, "cannot map rank ", e.rank, "'s GPU memory (", err.what(), ")");
    }
  }
  w->own_block();
  window_made_ = true;
  return w;
}

}  // namespace

void CudaIpcOptions::validate() const {
  check_arg(mode == "auto" || mode == "cuda_ipc" || mode == "staged", "OMNICCL_DEVICE_TRANSPORT is '", mode,
            "'; use auto, cuda_ipc or staged");
  check_arg(buffer_bytes >= 4096 && buffer_bytes % 256 == 0, "OMNICCL_CUDA_IPC_BUFFER is ", buffer_bytes,
            " bytes; use at least 4096, a multiple of 256");
}

size_t cuda_ipc_flag_words(int size) { return 1 + 7 * size_t(size); }

std::unique_ptr<Transport> make_cuda_ipc_transport(const CudaIpcOptions& options, int rank, int size) {
  return std::make_unique<CudaIpcTransport>(options, rank, size);
}

}  // namespace omniccl::transport
