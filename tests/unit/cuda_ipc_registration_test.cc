// Registered buffers on the CUDA IPC path (occl_comm_window_register), over
// the emulated GPU runtime (emulated_gpu.h): the cache of peers' mappings
// (one mapping per allocation, a freed and reallocated allocation never
// served from a stale mapping, idle mappings bounded, used ones never
// closed), collectives that read registered buffers in place (results equal
// to the reference, one or two flag steps where the scratch path takes many
// pieces, in place too), a rank whose buffers are not registered where its
// peers' are (a mismatch on every rank), and registrations refused on every
// rank alike when one rank cannot share its buffer. Memory of CUDA's
// virtual memory API (VMM: PyTorch's expandable segments) is mapped too, from
// POSIX descriptors passed between the ranks: once per allocation, never
// stale after a free and a new allocation, and a rank that dies while
// handing one over is an error on its peers, not a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collective/collectives.h"
#include "emulated_ranks.h"
#include "transport/cuda_ipc/ipc_cache.h"

namespace omniccl {
namespace {

using test::cuda_ipc_path;
using test::dev_view;
using test::EmulatedGpu;
using test::EmuStream;
using test::expect_all_ok;
using test::on;
using test::rank_input;
using test::RankChecks;
using test::run_ranks;
using test::status_of;

/// Device memory of `count` int32, filled with rank r's inputs.
int32_t* inputs(EmulatedGpu& gpu, int r, size_t count) {
  auto* p = static_cast<int32_t*>(gpu.device_alloc(count * 4));
  for (size_t i = 0; i < count; ++i) p[i] = rank_input(r, i);
  return p;
}

TEST(IpcCache, OneMappingPerAllocationWhoeverAsks) {
  EmulatedGpu gpu;
  void* p = gpu.device_alloc(4096);
  const GpuIpcHandle h = gpu.ipc_export(p);
  transport::IpcCache cache(gpu, 4);
  char* a = cache.acquire(1, h);
  char* b = cache.acquire(1, h);  // the emulation, as CUDA, refuses a second ipc_open
  EXPECT_EQ(a, b);
  EXPECT_EQ(gpu.open_mappings(), 1);
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(cache.idle(), 1u);
  EXPECT_EQ(cache.acquire(1, h), a) << "an idle mapping serves the allocation again";
  cache.release(a);
  EXPECT_THROW(cache.release(a), Error) << "released more often than acquired";
  gpu.device_free(p);
}

// Memory freed and allocated again (the same descriptor number, very likely
// the same address) has another handle: a new mapping, which shows the new
// contents, never the old one's.
TEST(IpcCache, AFreedAndReallocatedAllocationIsNeverServedStale) {
  EmulatedGpu gpu;
  auto* p = static_cast<int32_t*>(gpu.device_alloc(4096));
  p[0] = 1;
  const GpuIpcHandle old_handle = gpu.ipc_export(p);
  transport::IpcCache cache(gpu, 4);
  auto* old_map = reinterpret_cast<int32_t*>(cache.acquire(1, old_handle));
  ASSERT_EQ(old_map[0], 1);
  cache.release(reinterpret_cast<char*>(old_map));
  gpu.device_free(p);
  auto* q = static_cast<int32_t*>(gpu.device_alloc(4096));
  q[0] = 2;
  const GpuIpcHandle new_handle = gpu.ipc_export(q);
  EXPECT_NE(std::memcmp(old_handle.bytes, new_handle.bytes, sizeof old_handle.bytes), 0);
  auto* new_map = reinterpret_cast<int32_t*>(cache.acquire(1, new_handle));
  EXPECT_EQ(new_map[0], 2) << "the mapping is of the new allocation";
  EXPECT_EQ(cache.open(), 2u);
  cache.release(reinterpret_cast<char*>(new_map));
  gpu.device_free(q);
}

TEST(IpcCache, IdleMappingsAreBoundedAndUsedOnesNeverClosed) {
  EmulatedGpu gpu;
  void* held = gpu.device_alloc(4096);
  transport::IpcCache cache(gpu, 2);
  char* kept = cache.acquire(0, gpu.ipc_export(held));
  std::vector<void*> others;
  for (int i = 0; i < 6; ++i) {
    others.push_back(gpu.device_alloc(4096));
    cache.release(cache.acquire(1, gpu.ipc_export(others.back())));
  }
  EXPECT_EQ(cache.idle(), 2u);
  EXPECT_EQ(cache.open(), 3u) << "two idle mappings and the one in use";
  EXPECT_EQ(gpu.open_mappings(), 3);
  EXPECT_EQ(cache.acquire(0, gpu.ipc_export(held)), kept) << "the used mapping stayed open";
  for (void* o : others) gpu.device_free(o);
  gpu.device_free(held);
}

// VMM memory: mapped from the descriptor `fetch` gives, once per allocation
// (its key); another allocation (freed and made again) is mapped anew and
// shows its own contents; a fetch that fails leaves nothing behind.
TEST(IpcCache, VmmMemoryIsMappedFromItsDescriptorOncePerAllocation) {
  EmulatedGpu gpu;
  gpu.vmm_memory = true;
  auto* p = static_cast<int32_t*>(gpu.device_alloc(4096));
  p[0] = 7;
  int fetched = 0;
  {
    transport::IpcCache cache(gpu, 4);
    const std::string first = "allocation " + std::to_string(gpu.allocation_of(p).id);
    auto fetch_p = [&] {
      ++fetched;
      return gpu.vmm_export(p);
    };
    char* a = cache.acquire_vmm(1, first, 4096, fetch_p);
    char* b = cache.acquire_vmm(1, first, 4096, fetch_p);
    EXPECT_EQ(a, b);
    EXPECT_EQ(fetched, 1);
    EXPECT_EQ(gpu.open_vmm_mappings(), 1);
    EXPECT_EQ(reinterpret_cast<int32_t*>(a)[0], 7);
    cache.release(a);
    cache.release(b);
    gpu.device_free(p);
    auto* q = static_cast<int32_t*>(gpu.device_alloc(4096));
    q[0] = 8;
    const std::string second = "allocation " + std::to_string(gpu.allocation_of(q).id);
    EXPECT_NE(first, second);
    char* c = cache.acquire_vmm(1, second, 4096, [&] {
      ++fetched;
      return gpu.vmm_export(q);
    });
    EXPECT_EQ(reinterpret_cast<int32_t*>(c)[0], 8) << "the mapping is of the new allocation";
    EXPECT_EQ(fetched, 2);
    EXPECT_THROW(cache.acquire_vmm(2, "gone", 4096, []() -> UniqueFd { fail(Status::kPeerFailure, "gone"); }), Error);
    EXPECT_EQ(cache.open(), 2u) << "the failed fetch left no entry";
    cache.release(c);
    gpu.device_free(q);
  }
  EXPECT_EQ(gpu.open_vmm_mappings(), 0) << "the cache closed its VMM mappings with vmm_close";
}

/// Registered all_reduce (one-shot and two-shot, out of place and in place),
/// all_gather, broadcast and reduce_scatter: results, and the flag steps.
void check_registered(Communicator& c, EmulatedGpu& gpu, RankChecks& ck, size_t count) {
  const int n = c.size(), me = c.rank();
  algo::DeviceEngine& e = *c.device_engine();
  EmuStream s;
  int32_t* send = inputs(gpu, me, count * n);
  auto* recv = static_cast<int32_t*>(gpu.device_alloc(count * n * 4));
  const uint64_t ws = c.register_window(send, count * n * 4), wr = c.register_window(recv, count * n * 4);
  const uint64_t before = e.steps();
  coll::all_reduce(c, dev_view(send, count), dev_view(recv, count), int(RedOp::kSum), on(s));
  const bool two_shot = count * 4 >= algo::DeviceEngine::kTwoShotMin;
  ck.expect(e.steps() - before == (two_shot ? 2u : 1u), "all_reduce on registered buffers in one pass");
  ck.expect(s.sync(), "the stream finished");
  bool ok = true;
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (int r = 0; r < n; ++r) want += rank_input(r, i);
    ok &= recv[i] == want;
  }
  ck.expect(ok, "registered all_reduce of " + std::to_string(count));
  coll::all_reduce(c, dev_view(send, count), dev_view(send, count), int(RedOp::kSum), on(s));  // in place
  coll::all_gather(c, dev_view(send, count), dev_view(recv, count * n), on(s));
  ck.expect(s.sync(), "the stream finished");
  ok = true;
  for (size_t i = 0; i < count; ++i) {
    ok &= send[i] == recv[i];
    for (int r = 1; r < n; ++r) ok &= recv[size_t(r) * count + i] == recv[i];
  }
  ck.expect(ok, "in-place all_reduce, then all_gather of its result");
  c.deregister_window(ws);
  c.deregister_window(wr);
  ck.expect(e.regions() == 0, "both buffers deregistered");
  gpu.device_free(send);
  gpu.device_free(recv);
}

TEST(CudaIpcRegistration, CollectivesReadRegisteredBuffersInPlace) {
  for (int n : {2, 3}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    expect_all_ok(run_ranks(
        n,
        [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
          ck.expect(c.device_engine() != nullptr, "the device path");
          check_registered(c, gpu, ck, 1000);   // one-shot
          check_registered(c, gpu, ck, 70001);  // two-shot, slices of unequal length
        },
        20000, {}, cuda_ipc_path()));
  }
}

// Broadcast from rank 1 and reduce_scatter in place, on registered buffers.
TEST(CudaIpcRegistration, BroadcastAndInPlaceReduceScatter) {
  expect_all_ok(run_ranks(
      3,
      [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
        const int n = c.size(), me = c.rank();
        const size_t count = 3000;
        EmuStream s;
        int32_t* buf = inputs(gpu, me, count * n);
        const uint64_t w = c.register_window(buf, count * n * 4);
        const uint64_t before = c.device_engine()->steps();
        coll::reduce_scatter(c, dev_view(buf, count * n), dev_view(buf + me * count, count), int(RedOp::kSum), on(s));
        ck.expect(s.sync(), "the stream finished");
        bool ok = true;
        for (size_t i = 0; i < count; ++i) {
          int32_t want = 0;
          for (int r = 0; r < n; ++r) want += rank_input(r, me * count + i);
          ok &= buf[me * count + i] == want;
        }
        ck.expect(ok, "in-place reduce_scatter");
        coll::broadcast(c, dev_view(buf, count * n), 1, on(s));
        ck.expect(s.sync(), "the stream finished");
        ck.expect(c.device_engine()->steps() - before == 2, "one step each");
        // Rank 1's buffer after its reduce_scatter: its own block reduced.
        ok = true;
        for (size_t i = 0; i < count * n; ++i) {
          int32_t want = rank_input(1, i);
          if (i / count == 1) {
            want = 0;
            for (int r = 0; r < n; ++r) want += rank_input(r, i);
          }
          ok &= buf[i] == want;
        }
        ck.expect(ok, "broadcast of rank 1's buffer");
        c.deregister_window(w);
        gpu.device_free(buf);
      },
      20000, {}, cuda_ipc_path()));
}

// Rank 0's input is registered, rank 1's is not: the ranks would run
// different protocols, so the call is a mismatch on both, which says so.
TEST(CudaIpcRegistration, BuffersRegisteredOnlyOnSomeRanksAreAMismatch) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
        EmuStream s;
        int32_t* a = inputs(gpu, c.rank(), 32);
        int32_t* b = inputs(gpu, c.rank(), 32);
        auto* out = static_cast<int32_t*>(gpu.device_alloc(64 * 4));
        c.register_window(a, 32 * 4);
        auto work = coll::all_gather(c, dev_view(c.rank() == 0 ? a : b, 32), dev_view(out, 64), on(s, true));
        const Status st = work->wait();
        ck.expect(st == Status::kMismatch && work->message().find("registered") != std::string::npos,
                  std::string("a mismatch naming registered buffers, got ") + status_name(st) + ": " + work->message());
        ck.expect(s.sync(5000), "the stream was released");
      },
      20000, {}, cuda_ipc_path()));
}

// A rank that cannot share its buffer (here: host memory; VMM memory) makes
// the registration fail on every rank, with that rank's reason; the
// communicator stays usable.
TEST(CudaIpcRegistration, ARegistrationOneRankCannotMakeFailsOnEveryRank) {
  expect_all_ok(run_ranks(
      3,
      [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
        ck.expect(c.device_engine() != nullptr, "the device path");
        std::vector<int32_t> host(16);
        int32_t* mine = inputs(gpu, c.rank(), 16);
        std::string why;
        Status st = status_of([&] { c.register_window(c.rank() == 1 ? host.data() : mine, 64); }, &why);
        ck.expect(st == Status::kInvalidArgument && why.find("rank 1") != std::string::npos,
                  "host memory on rank 1 refused everywhere: " + why);
        // Rank 2's allocations are VMM memory made without a shareable
        // handle type from here on: no process can map them.
        gpu.vmm_memory = c.rank() == 2;
        gpu.vmm_fd_shareable = false;
        st = status_of([&] { c.register_window(mine, 64); }, &why);
        ck.expect(st == Status::kUnsupported && why.find("rank 2") != std::string::npos &&
                      why.find("virtual memory") != std::string::npos,
                  "VMM memory on rank 2 refused everywhere: " + why);
        st = status_of([&] { c.deregister_window(c.rank() == 0 ? 99 : 1); }, &why);
        ck.expect(st == Status::kInvalidArgument, "an unknown handle on one rank fails on every rank: " + why);
        ck.expect(c.usable(), "the communicator is still usable");
        ck.expect(c.device_engine()->regions() == 0, "nothing stayed registered");
      },
      20000, {}, cuda_ipc_path()));
}

// Registering the same buffer again reuses the peers' mappings.
TEST(CudaIpcRegistration, RegisteringAgainMapsNothingNew) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
        int32_t* buf = inputs(gpu, c.rank(), 1024);
        c.deregister_window(c.register_window(buf, 4096));
        const int mapped = gpu.open_mappings();
        for (int i = 0; i < 5; ++i) c.deregister_window(c.register_window(buf + 16, 1024));
        ck.expect(gpu.open_mappings() == mapped, "the cached mapping served every registration");
      },
      20000, {}, cuda_ipc_path()));
}

// VMM memory on one rank, then on every rank: mapped directly from the
// descriptors its ranks hand over (the same one-pass operations and results
// as cudaMalloc memory), one mapping per peer allocation.
TEST(CudaIpcRegistration, VmmBuffersAreMappedDirectly) {
  expect_all_ok(run_ranks(
      3,
      [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
        ck.expect(c.device_engine() != nullptr, "the device path");
        gpu.vmm_memory = c.rank() == 2;
        check_registered(c, gpu, ck, 1000);
        const int rank2_only = c.rank() == 2 ? 0 : 2;  // rank 2's two buffers
        ck.expect(gpu.open_vmm_mappings() == rank2_only,
                  "rank 2's VMM buffers mapped: " + std::to_string(gpu.open_vmm_mappings()));
        gpu.vmm_memory = true;
        check_registered(c, gpu, ck, 70001);
        ck.expect(gpu.open_vmm_mappings() == rank2_only + 4,
                  "both peers' two VMM buffers mapped: " + std::to_string(gpu.open_vmm_mappings()));
      },
      20000, {}, cuda_ipc_path()));
}

// A VMM buffer registered again maps nothing new; freed and allocated again
// (the emulation's mmap very likely returns the same address), it is mapped
// anew and the peers read its new contents.
TEST(CudaIpcRegistration, VmmBufferRegisteredAgainOrFreedAndAllocatedAgain) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
        const int n = c.size(), me = c.rank();
        gpu.vmm_memory = true;
        int32_t* buf = inputs(gpu, me, 1024);
        c.deregister_window(c.register_window(buf, 4096));
        ck.expect(gpu.open_vmm_mappings() == 1, "the peer's allocation mapped once");
        for (int i = 0; i < 3; ++i) c.deregister_window(c.register_window(buf + 16, 1024));
        ck.expect(gpu.open_vmm_mappings() == 1, "the cached mapping served every registration");
        gpu.device_free(buf);
        auto* again = static_cast<int32_t*>(gpu.device_alloc(4096));
        for (size_t i = 0; i < 1024; ++i) again[i] = rank_input(me + 5, i);
        auto* out = static_cast<int32_t*>(gpu.device_alloc(size_t(n) * 4096));
        const uint64_t wa = c.register_window(again, 4096), wo = c.register_window(out, size_t(n) * 4096);
        ck.expect(gpu.open_vmm_mappings() == 3, "the new allocations mapped anew");
        EmuStream s;
        coll::all_gather(c, dev_view(again, 1024), dev_view(out, size_t(n) * 1024), on(s));
        ck.expect(s.sync(), "the stream finished");
        bool ok = true;
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < 1024; ++i) ok &= out[size_t(r) * 1024 + i] == rank_input(r + 5, i);
        }
        ck.expect(ok, "every rank read the new contents");
        c.deregister_window(wa);
        c.deregister_window(wo);
        gpu.device_free(again);
        gpu.device_free(out);
      },
      20000, {}, cuda_ipc_path()));
}

// Rank 2 (VMM memory) exits as soon as its record is out (when it maps its
// peers' cudaMalloc buffers); its peers, which map rank 2's buffer after a
// pause, find it gone while asking for its descriptor: a peer failure, long
// before the communicator's timeout.
TEST(CudaIpcRegistration, APeerThatDiesHandingOverItsVmmBufferIsAnErrorNotAHang) {
  const std::vector<int> codes = run_ranks(
      3,
      [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
        gpu.vmm_memory = c.rank() == 2;
        int32_t* buf = inputs(gpu, c.rank(), 256);
        const bool dies = c.rank() == 2;
        gpu.before_ipc_open = [dies] {
          if (dies) _exit(0);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        };
        const auto start = std::chrono::steady_clock::now();
        std::string why;
        const Status st = status_of([&] { c.register_window(buf, 1024); }, &why);
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
        ck.expect(st == Status::kPeerFailure, std::string("a peer failure, got ") + status_name(st) + ": " + why);
        ck.expect(ms < 10000, "within seconds: " + std::to_string(ms) + " ms");
      },
      20000, {}, cuda_ipc_path());
  ASSERT_EQ(codes.size(), 3u);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

// Where CUDA tensors are staged, registering succeeds and changes nothing.
TEST(CudaIpcRegistration, WithoutTheDevicePathRegisteringIsHarmless) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
    ck.expect(c.device_engine() == nullptr, "staged");
    int32_t* buf = inputs(gpu, c.rank(), 64);
    std::string why;
    const Status st = status_of([&] { c.deregister_window(c.register_window(buf, 256)); }, &why);
    ck.expect(st == Status::kSuccess, "registered and deregistered: " + why);
  }));
}

}  // namespace
}  // namespace omniccl
