#include "collective/staging.h"

#include <algorithm>
#include <bit>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "common/gpu_runtime.h"
#include "common/status.h"

namespace omniccl::coll {

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kFlagBytes = kAlign;  // the word, alone on its cache line

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// A new block's size for `bytes`: at least 64 KiB, rounded up to an eighth
/// of the next power of two, so that blocks serve operations of nearby sizes
/// while wasting at most an eighth (not up to half, as the power of two
/// itself would) of page-locked memory that is never given back.
size_t block_capacity(size_t bytes) {
  const size_t step = std::max<size_t>(kAlign, std::bit_ceil(bytes) / 8);
  return std::max<size_t>(64 * 1024, (bytes + step - 1) / step * step);
}

/// Host memory, its word and two events for one staged operation; reused
/// once the stream has passed the `done` event of its last use.
struct Block {
  int device = 0;
  size_t capacity = 0;                     ///< bytes after the word
  char* mem = nullptr;                     ///< host_alloc: the word, then the regions
  std::vector<GpuRuntime::Event> ready;    ///< one per slice: its inputs are copied
  std::vector<GpuRuntime::Event> reduced;  ///< one per slice: its share is reduced (DeviceReduction with a rank)
  GpuRuntime::Event done = nullptr;
  char* dev = nullptr;  ///< device scratch of a DeviceReduction (device_alloc), kept with the block
  size_t dev_capacity = 0;
  bool in_use = false;    ///< held by a StagedCall
  bool recorded = false;  ///< `done` was recorded (the stream may still be before it)

  uint32_t* flag() const { return reinterpret_cast<uint32_t*>(mem); }
  char* data() const { return mem + kFlagBytes; }
};

/// Process-wide: blocks outlive communicators (a stream may still copy
/// from a block after the operation that used it was freed). Never freed:
/// freeing page-locked memory synchronises the device.
class BlockPool {
 public:
  static BlockPool& get() {
    static BlockPool* pool = new BlockPool();
    return *pool;
  }

  Block* acquire(GpuRuntime& rt, int device, size_t bytes) {
    std::lock_guard lock(mu_);
    Block* best = nullptr;
    for (auto& b : blocks_) {
      if (b->in_use || b->device != device || b->capacity < bytes) continue;
      if (b->recorded && !rt.event_done(b->done)) continue;  // the stream still copies from it
      if (best == nullptr || b->capacity < best->capacity) best = b.get();
    }
    if (best == nullptr) {
      auto b = std::make_unique<Block>();
      b->device = device;
      b->capacity = block_capacity(bytes);
      b->mem = static_cast<char*>(rt.host_alloc(kFlagBytes + b->capacity));
      b->ready.push_back(rt.event_create());
      b->done = rt.event_create();
      best = b.get();
      blocks_.push_back(std::move(b));
    }
    best->in_use = true;
    best->recorded = false;
    return best;
  }

  void release(Block* b, bool recorded) {
    std::lock_guard lock(mu_);
    b->recorded = recorded;
    b->in_use = false;
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

/// A device region and its place in the block.
struct Region {
  char* dev = nullptr;
  size_t bytes = 0;
  size_t offset = 0;  ///< in the block's data
  uint8_t use = 0;    ///< Use bits
  size_t rows = 1;    ///< a sliced call's rows (bytes / its row's bytes)
};

class StagedCallImpl final : public StagedCall {
 public:
  StagedCallImpl(GpuRuntime& rt, int device, void* stream) : rt_(rt), device_(device), stream_(stream) {}

  ~StagedCallImpl() override {
    release_stream();
    if (block_ != nullptr) BlockPool::get().release(block_, started_);
  }

  /// Adds a tensor's region (no-op for an empty one).
  void add(const TensorView& t, Use use) {
    if (use == Use::kNone || t.count == 0 || t.data == nullptr) return;
    regions_.push_back(Region{t.bytes_ptr(), t.bytes(), 0, static_cast<uint8_t>(use)});
  }

  /// The stream makes `d.out` from the gathered parts (DeviceReduction);
  /// after plan(): the gathered region goes after the tensors' copies.
  void add_reduction(const DeviceReduction& d) {
    const TensorView& t = *d.out;
    if (t.count == 0 || t.data == nullptr) return;
    red_ = Reduction{t.bytes_ptr(), t.bytes(), total_, t.dtype, d.op, d.ranks, d.rank};
    // Per slice, the parts of every rank's block; with a rank, one slice's
    // parts at a time (n shares of at most an item more than 1/n each).
    const size_t elem = kernels::dtype_size(t.dtype);
    const size_t span = t.bytes() < 2 * d.slice_bytes ? t.bytes() : d.slice_bytes;  // a slice's most
    red_.gathered_bytes = d.rank < 0 ? t.bytes() * size_t(d.ranks) : span + size_t(d.ranks) * elem;
    total_ += align_up(red_.gathered_bytes);
  }

  char* gathered() const { return red_.out != nullptr ? host_base_ + red_.offset : nullptr; }

  /// Merges regions inside another into it; lays them out in the block.
  void plan() {
    std::sort(regions_.begin(), regions_.end(),
              [](const Region& a, const Region& b) { return a.dev != b.dev ? a.dev < b.dev : a.bytes > b.bytes; });
    std::vector<Region> merged;
    for (const Region& r : regions_) {
      if (!merged.empty()) {
        Region& last = merged.back();
        if (r.dev >= last.dev && r.dev + r.bytes <= last.dev + last.bytes) {
          last.use |= r.use;
          continue;
        }
        check_arg(r.dev >= last.dev + last.bytes, "two tensors of this operation overlap in part (", r.bytes,
                  " bytes at device address ", static_cast<const void*>(r.dev), " and ", last.bytes, " bytes at ",
                  static_cast<const void*>(last.dev), ")");
      }
      merged.push_back(r);
    }
    size_t total = 0;
    for (Region& r : merged) {
      r.offset = total;
      total += align_up(r.bytes);
    }
    regions_ = std::move(merged);
    total_ = total;
  }

  TensorView host_view(const TensorView& t) const {
    TensorView v = t;
    v.device = DeviceKind::kCPU;
    v.device_id = 0;
    if (t.count == 0 || t.data == nullptr) return v;
    v.data = host_at(t.bytes_ptr(), t.bytes());
    return v;
  }

  /// The host copy of the `bytes` at device address `dev`, inside a region.
  char* host_at(const char* dev, size_t bytes) const {
    for (const Region& r : regions_) {
      if (dev >= r.dev && dev < r.dev + r.bytes) {
        if (bytes > r.bytes - size_t(dev - r.dev)) fail(Status::kInternal, "staged path: a range beyond its host copy");
        return host_base_ + r.offset + static_cast<size_t>(dev - r.dev);
      }
    }
    fail(Status::kInternal, "staged path: a tensor without a host copy");
  }

  /// Takes a block (host memory for every region) before any view is made.
  void take_block() {
    block_ = BlockPool::get().acquire(rt_, device_, total_);
    host_base_ = block_->data();
    std::atomic_ref<uint32_t>(*block_->flag()).store(0, std::memory_order_release);
  }

  /// Copies slice by slice, only `pieces` (Staging::slice_pieces).
  void set_pieces(size_t slices, size_t piece_bytes, const std::vector<StagedPiece>& pieces) {
    slices_ = std::max<size_t>(slices, 1);
    slice_bytes_ = piece_bytes;
    by_piece_ = true;
    pieces_.clear();
    for (const StagedPiece& p : pieces) {
      if (p.bytes == 0 || p.use == Use::kNone) continue;
      pieces_.push_back(Piece{p.dev, host_at(p.dev, p.bytes), p.bytes, static_cast<uint8_t>(p.use)});
    }
  }

  /// Copies slice by slice; every region must be whole rows of `row_bytes`
  /// (the sliced collectives' tensors all are: one row, or one a rank), since
  /// their bodies read the host copies as laid out slice by slice
  /// (Staging::slice). Anything else is a fault of this library, refused
  /// before the stream is given any work.
  void set_slices(size_t slices, size_t slice_bytes, size_t row_bytes) {
    slices_ = std::max<size_t>(slices, 1);
    slice_bytes_ = slice_bytes;
    row_bytes_ = row_bytes;
    by_slice_ = slices_ > 1;
    for (Region& r : regions_) {
      if (by_slice_ && (row_bytes == 0 || r.bytes % row_bytes != 0)) {
        fail(Status::kInternal, "staged path: a sliced call's tensor of ", r.bytes, " bytes is not whole rows of ",
             row_bytes, " bytes");
      }
      r.rows = by_slice_ ? r.bytes / row_bytes : 1;
    }
  }

  /// The stream's part: slice k's inputs are copied ahead, while the host
  /// still works on slice k - 1; slice k - 1's outputs go back once the
  /// host says it is done (the word reaches k), while it works on slice k.
  void start() {
    while (block_->ready.size() < slices_) block_->ready.push_back(rt_.event_create());
    if (red_.out != nullptr) reserve_device_scratch();
    waiting_ = true;  // from here on the stream must be released
    if (red_.out != nullptr && red_.rank >= 0) {
      start_two_phase();
      return;
    }
    copy_slice(0, Use::kIn);
    rt_.event_record(block_->ready[0], stream_);
    for (size_t k = 1; k < slices_; ++k) {
      copy_slice(k, Use::kIn);
      rt_.event_record(block_->ready[k], stream_);
      rt_.stream_wait_flag(stream_, block_->flag(), static_cast<uint32_t>(k));
      copy_slice(k - 1, Use::kOut);
    }
    rt_.stream_wait_flag(stream_, block_->flag(), static_cast<uint32_t>(slices_));
    copy_slice(slices_ - 1, Use::kOut);
    rt_.event_record(block_->done, stream_);
    started_ = true;
  }

  void wait_ready(Deadline deadline, const transport::Mesh& mesh) override { wait_slice(0, deadline, mesh); }

  void wait_slice(size_t k, Deadline deadline, const transport::Mesh& mesh) override {
    rt_.set_device(device_);
    wait_event(block_->ready.at(k), deadline, mesh, "copied this operation's inputs from the GPU");
  }

  void slice_done(size_t k) override {
    const size_t phases = two_phase() ? 2 : 1;
    if (k + 1 < slices_) set_word(uint32_t(phases * (k + 1)));
  }

  void parts_ready(size_t k) override { set_word(uint32_t(2 * k + 1)); }

  void wait_reduced(size_t k, Deadline deadline, const transport::Mesh& mesh) override {
    wait_event(block_->reduced.at(k), deadline, mesh, "reduced this operation's slice on the GPU");
  }

  void finish(Deadline deadline, const transport::Mesh& mesh) override {
    release_stream();
    wait_event(block_->done, deadline, mesh, "copied this operation's results back to the GPU");
  }

 private:
  /// Enqueues slice k's copies of direction `dir` (kIn: to the host). Its
  /// part of each row (`n` bytes from `lo`) lies in the host copy as the
  /// slice's rows back to back, after the earlier slices' (their rows of
  /// slice_bytes_ each): one strided copy a region.
  void copy_slice(size_t k, Use dir) {
    if (by_piece_) {
      copy_pieces(k, dir);
      return;
    }
    const bool in = dir == Use::kIn;
    if (!by_slice_ && k != (in ? 0 : slices_ - 1)) return;
    for (const Region& r : regions_) {
      if ((r.use & static_cast<uint8_t>(dir)) == 0) continue;
      const size_t row = by_slice_ ? row_bytes_ : r.bytes;
      const size_t lo = by_slice_ ? k * slice_bytes_ : 0;
      const size_t n = by_slice_ ? std::min(slice_bytes_, row - lo) : r.bytes;
      char* host = host_base_ + r.offset + r.rows * lo;
      if (r.rows == 1) {
        rt_.copy_async(in ? host : r.dev + lo, in ? r.dev + lo : host, n, stream_);
      } else if (in) {
        rt_.copy_2d_async(host, n, r.dev + lo, row, n, r.rows, stream_);
      } else {
        rt_.copy_2d_async(r.dev + lo, row, host, n, n, r.rows, stream_);
      }
    }
    if (!in && red_.out != nullptr && !two_phase()) reduce_slice(k);
  }

  /// Slice k's part of each piece of direction `dir`, one copy a piece.
  void copy_pieces(size_t k, Use dir) {
    const bool in = dir == Use::kIn;
    const size_t lo = k * slice_bytes_;
    for (const Piece& p : pieces_) {
      if ((p.use & static_cast<uint8_t>(dir)) == 0 || lo >= p.bytes) continue;
      const size_t n = std::min(slice_bytes_, p.bytes - lo);
      rt_.copy_async(in ? p.host + lo : p.dev + lo, in ? p.dev + lo : p.host + lo, n, stream_);
    }
  }

  bool two_phase() const { return red_.out != nullptr && red_.rank >= 0; }

  void set_word(uint32_t value) { std::atomic_ref<uint32_t>(*block_->flag()).store(value, std::memory_order_release); }

  /// The stream's part of a DeviceReduction with a rank: slice k's share is
  /// reduced once the host has gathered its parts (the word at 2k + 1), and
  /// the slice copied back once the host has gathered the shares (2k + 2),
  /// while the next slice's inputs are already copied.
  void start_two_phase() {
    while (block_->reduced.size() < slices_) block_->reduced.push_back(rt_.event_create());
    copy_slice(0, Use::kIn);
    rt_.event_record(block_->ready[0], stream_);
    for (size_t k = 0; k < slices_; ++k) {
      if (k + 1 < slices_) {
        copy_slice(k + 1, Use::kIn);
        rt_.event_record(block_->ready[k + 1], stream_);
      }
      rt_.stream_wait_flag(stream_, block_->flag(), static_cast<uint32_t>(2 * k + 1));
      reduce_share(k);
      rt_.event_record(block_->reduced[k], stream_);
      rt_.stream_wait_flag(stream_, block_->flag(), static_cast<uint32_t>(2 * k + 2));
      copy_slice(k, Use::kOut);
    }
    rt_.event_record(block_->done, stream_);
    started_ = true;
  }

  /// The bytes of this rank's share of a slice of `len` bytes, and where it begins.
  std::pair<size_t, size_t> share(size_t len) const {
    const size_t elem = kernels::dtype_size(red_.dtype), items = len / elem;
    const uint64_t lo = share_begin(items, red_.rank, red_.ranks), hi = share_begin(items, red_.rank + 1, red_.ranks);
    return {size_t(lo) * elem, size_t(hi - lo) * elem};
  }

  /// Slice k's share: the ranks' parts (in the gathered region, reused a
  /// slice at a time) to the device, reduced in rank order there, and the
  /// result into the host copy of `out`, at the share's place.
  void reduce_share(size_t k) {
    const size_t lo = by_slice_ ? k * slice_bytes_ : 0;
    const size_t len = by_slice_ ? std::min(slice_bytes_, red_.bytes - lo) : red_.bytes;
    const auto [at, bytes] = share(len);
    if (bytes == 0) return;
    const size_t ranks = size_t(red_.ranks);
    char* const parts = block_->dev;
    char* const result = parts + ranks * bytes;
    rt_.copy_async(parts, host_base_ + red_.offset, ranks * bytes, stream_);
    enqueue_chain(result, parts, bytes);
    TensorView out{};
    out.data = red_.out + lo + at;
    out.count = 1;
    rt_.copy_async(host_view(out).bytes_ptr(), result, bytes, stream_);
  }

  /// out = parts[0] op parts[1] op ... (each `len` bytes, device memory) in
  /// rank order (AVG: SUM, then divided), as the CPU kernels would.
  void enqueue_chain(char* out, const char* parts, size_t len) {
    const Reduction& d = red_;
    const size_t count = len / kernels::dtype_size(d.dtype), ranks = size_t(d.ranks);
    const RedOp combine = d.op == RedOp::kAvg ? RedOp::kSum : d.op;
    if (ranks == 1) {  // one rank's value, as the logical ops give it
      if (kernels::is_logical(d.op)) {
        rt_.reduce_async(out, parts, parts, count, d.dtype, RedOp::kLOr, stream_);
      } else {
        rt_.copy_async(out, parts, len, stream_);
      }
    }
    for (size_t q = 1; q < ranks; ++q) {
      rt_.reduce_async(out, q == 1 ? parts : out, parts + q * len, count, d.dtype, combine, stream_);
    }
    if (d.op == RedOp::kAvg) rt_.scale_divide_async(out, count, d.dtype, int64_t(ranks), stream_);
  }

  /// The device scratch a slice's gathered parts are copied into (the
  /// block's, grown when too small: its earlier use has ended, as the block's).
  void reserve_device_scratch() {
    const size_t span = by_slice_ ? slice_bytes_ : red_.bytes, elem = kernels::dtype_size(red_.dtype);
    const size_t ranks = size_t(red_.ranks), share_max = (span / elem + ranks - 1) / ranks * elem;
    const size_t bytes = two_phase() ? (ranks + 1) * share_max : ranks * span;
    if ((two_phase() ? ranks * share_max : ranks * span) > red_.gathered_bytes) {
      fail(Status::kInternal, "staged path: a slice's gathered parts (", ranks, " x ", two_phase() ? share_max : span,
           " bytes) exceed their region (", red_.gathered_bytes, " bytes)");
    }
    if (block_->dev_capacity < bytes) {
      if (block_->dev != nullptr) rt_.device_free(block_->dev);
      block_->dev = nullptr;
      block_->dev_capacity = 0;
      block_->dev = static_cast<char*>(rt_.device_alloc(bytes));
      block_->dev_capacity = bytes;
    }
  }

  /// Enqueues slice k of the DeviceReduction: its gathered parts (one a
  /// rank, back to back in the host copy, as a tensor of `ranks` rows) to
  /// the device, then out = part 0 op part 1 op ... in rank order (AVG:
  /// SUM, then divided), as the CPU kernels would on the host.
  void reduce_slice(size_t k) {
    const size_t lo = by_slice_ ? k * slice_bytes_ : 0;
    const size_t len = by_slice_ ? std::min(slice_bytes_, red_.bytes - lo) : red_.bytes;
    char* const parts = block_->dev;
    rt_.copy_async(parts, host_base_ + red_.offset + size_t(red_.ranks) * lo, size_t(red_.ranks) * len, stream_);
    enqueue_chain(red_.out + lo, parts, len);
  }

  /// Every wait of the stream passes (the last slice's included), whatever
  /// became of the operation.
  void release_stream() {
    if (waiting_) {
      set_word(uint32_t((two_phase() ? 2 : 1) * slices_));
      waiting_ = false;
    }
  }

  /// Polls `event` until the stream has passed it: back to back for the first
  /// 200 us (a small call's copies take a few microseconds: a sleep would
  /// cost more than the wait), then sleeping from 10 us up to 1 ms between polls.
  void wait_event(GpuRuntime::Event event, Deadline deadline, const transport::Mesh& mesh, const char* what) {
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (std::chrono::steady_clock::now() < spin_until) {
      if (rt_.event_done(event)) return;
    }
    auto nap = std::chrono::microseconds(10);
    while (!rt_.event_done(event)) {
      if (mesh.aborted()) fail(Status::kAborted, "the communicator was aborted");
      if (deadline.expired()) {
        fail(Status::kTimeout, "the CUDA stream of this operation has not ", what,
             " before the deadline (the work queued before it on the stream has not finished)");
      }
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(1000));
    }
  }

  GpuRuntime& rt_;
  int device_;
  void* stream_;
  std::vector<Region> regions_;
  size_t total_ = 0;
  Block* block_ = nullptr;
  char* host_base_ = nullptr;
  size_t slices_ = 1;
  size_t slice_bytes_ = 0;
  size_t row_bytes_ = 0;
  bool by_slice_ = false;
  /// A call sliced by pieces (set_pieces): what the stream copies.
  struct Piece {
    char* dev;
    char* host;
    size_t bytes;
    uint8_t use;
  };
  std::vector<Piece> pieces_;
  bool by_piece_ = false;
  /// A DeviceReduction's output (out == nullptr: none); offset: its
  /// gathered parts' region in the block's data.
  struct Reduction {
    char* out = nullptr;
    size_t bytes = 0;
    size_t offset = 0;
    DType dtype = DType::kFloat32;
    RedOp op = RedOp::kSum;
    int ranks = 1;
    int rank = -1;              ///< >= 0: all_reduce's or reduce's share (DeviceReduction)
    size_t gathered_bytes = 0;  ///< the gathered region's
  };
  Reduction red_;
  bool waiting_ = false;  ///< the stream waits for the word
  bool started_ = false;  ///< `done` was recorded
};

}  // namespace

void Staging::plan(std::initializer_list<TensorUse> uses, const CallOptions& call, const DeviceReduction* reduction) {
  const TensorView* first = nullptr;
  for (const TensorUse& u : uses) {
    const TensorView* t = u.tensor;
    if (t == nullptr || t->count == 0) continue;
    if (first == nullptr) {
      first = t;
    } else if (t->device != first->device || t->device_id != first->device_id) {
      fail_call_device(first, t);
    }
  }
  if (first == nullptr || first->device == DeviceKind::kCPU) return;
  GpuRuntime* rt = gpu_runtime();
  if (rt == nullptr) fail(Status::kUnsupported, "this build of OmniCCL has no CUDA support");
  const int current = rt->current_device();
  check_arg(first->device_id == current, "the tensors are on device cuda:", first->device_id,
            " but this thread's current CUDA device is cuda:", current,
            " (make the tensors' device current, e.g. cudaSetDevice, before the call)");
  auto impl = std::make_shared<StagedCallImpl>(*rt, current, call.stream);
  for (const TensorUse& u : uses) {
    if (u.tensor != nullptr) impl->add(*u.tensor, u.use);
  }
  impl->plan();
  if (reduction != nullptr) impl->add_reduction(*reduction);
  impl->take_block();
  call_ = std::move(impl);
}

Staging::~Staging() = default;

TensorView Staging::staged_view(const TensorView& t) const {
  return static_cast<const StagedCallImpl&>(*call_).host_view(t);
}

char* Staging::gathered() const {
  return call_ != nullptr ? static_cast<const StagedCallImpl&>(*call_).gathered() : nullptr;
}

void Staging::slice(size_t slices, size_t slice_bytes, size_t row_bytes) {
  if (call_ != nullptr) static_cast<StagedCallImpl&>(*call_).set_slices(slices, slice_bytes, row_bytes);
}

void Staging::slice_pieces(size_t slices, size_t piece_bytes, const std::vector<StagedPiece>& pieces) {
  if (call_ != nullptr) static_cast<StagedCallImpl&>(*call_).set_pieces(slices, piece_bytes, pieces);
}

std::shared_ptr<StagedCall> Staging::start() {
  static_cast<StagedCallImpl&>(*call_).start();
  return call_;
}

}  // namespace omniccl::coll
