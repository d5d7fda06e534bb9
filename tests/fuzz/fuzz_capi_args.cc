// Fuzzes the C ABI's argument checks through the public functions, with a
// one-rank communicator. The input describes DLTensors (ndim, shape,
// dtype, byte_offset) and v-counts/displacements; the harness computes, in
// 128-bit arithmetic, what the call would touch. A call whose true size does
// not fit (overflow, > PTRDIFF_MAX bytes, past the address space) must be
// refused with OCCL_ERR_INVALID_ARGUMENT; a call that fits the harness's
// 4 KiB buffers is made for real (and must not touch memory outside them,
// which AddressSanitizer checks); others are skipped (no memory to give).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "omniccl/omniccl.h"

namespace {

occl_comm_t comm() {
  static occl_comm_t c = [] {
    occl_unique_id_t id;
    occl_comm_t out = nullptr;
    if (occl_get_unique_id(&id) != OCCL_SUCCESS || occl_comm_init_unique_id(&out, 1, &id, 0, nullptr) != OCCL_SUCCESS) {
      std::abort();
    }
    return out;
  }();
  return c;
}

/// Reads fuzz bytes in order; zeros when exhausted.
struct Reader {
  const uint8_t* p;
  size_t n;
  template <typename T>
  T get() {
    T v{};
    size_t k = n < sizeof v ? n : sizeof v;
    std::memcpy(&v, p, k);
    p += k;
    n -= k;
    return v;
  }
};

constexpr size_t kBuf = 4096;
alignas(64) unsigned char g_a[kBuf], g_b[kBuf];

struct Fuzzed {
  DLTensor t{};
  int64_t shape[4] = {};
  __int128 true_bytes = 0;  // -1: does not fit
  bool fits_buffer = false;
};

/// Shapes biased towards both small values and huge ones.
int64_t extent(Reader& r) {
  uint8_t sel = r.get<uint8_t>();
  if (sel < 160) return sel % 9;
  if (sel < 200) return r.get<uint16_t>() % 2048;
  return r.get<int64_t>();
}

void make(Reader& r, Fuzzed& f, unsigned char* buf) {
  f.t.ndim = r.get<uint8_t>() % 5;
  f.t.shape = f.shape;
  static const DLDataType kTypes[] = {{kDLInt, 8, 1},    {kDLInt, 32, 1},     {kDLInt, 64, 1},
                                      {kDLFloat, 16, 1}, {kDLFloat, 32, 1},   {kDLUInt, 64, 1},
                                      {kDLBool, 8, 1},   {kDLComplex, 64, 1}, {kDLComplex, 128, 1}};
  f.t.dtype = kTypes[r.get<uint8_t>() % (sizeof kTypes / sizeof kTypes[0])];
  f.t.device = {kDLCPU, 0};
  uint8_t off_sel = r.get<uint8_t>();
  // Small offsets stay element-aligned (misaligned tensors are a separate
  // question from size checks); huge ones test the address-space check.
  f.t.byte_offset = off_sel < 200   ? 0
                    : off_sel < 240 ? r.get<uint8_t>() / (f.t.dtype.bits / 8) * (f.t.dtype.bits / 8)
                                    : r.get<uint64_t>();
  f.t.data = buf;
  __int128 count = 1;
  bool negative = false, overflow = false;
  for (int i = 0; i < f.t.ndim; ++i) {
    f.shape[i] = extent(r);
    if (f.shape[i] < 0) negative = true;
  }
  // count stays <= 2^64 before each step, so the 128-bit product cannot overflow.
  for (int i = 0; i < f.t.ndim && !negative && !overflow; ++i) {
    count *= f.shape[i];
    if (count > (static_cast<__int128>(1) << 64)) overflow = true;
  }
  const __int128 bytes = negative || overflow ? 0 : count * (f.t.dtype.bits / 8);
  if (negative || overflow || bytes > static_cast<__int128>(PTRDIFF_MAX) ||
      static_cast<__int128>(reinterpret_cast<uintptr_t>(buf)) + f.t.byte_offset + bytes >
          static_cast<__int128>(UINTPTR_MAX)) {
    f.true_bytes = -1;
  } else {
    f.true_bytes = bytes;
  }
  f.fits_buffer = f.true_bytes >= 0 && f.t.byte_offset + f.true_bytes <= static_cast<__int128>(kBuf);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r{data, size};
  const uint8_t op = r.get<uint8_t>() % 4;
  Fuzzed a, b;
  make(r, a, g_a);
  make(r, b, g_b);
  int64_t counts[1] = {r.get<int64_t>() % 4096}, displs[1] = {r.get<int64_t>() % 4096};
  if (r.get<uint8_t>() & 1) counts[0] = r.get<int64_t>();
  if (r.get<uint8_t>() & 1) displs[0] = r.get<int64_t>();
  const bool uses_b = op != 1;  // broadcast takes one tensor
  const bool any_unfit = a.true_bytes < 0 || (uses_b && b.true_bytes < 0);
  const bool all_fit = a.fits_buffer && (!uses_b || b.fits_buffer);
  if (!any_unfit && !all_fit) return 0;  // plausible but more memory than we have
  occl_status_t st = OCCL_SUCCESS;
  switch (op) {
    case 0: st = occl_all_reduce(&a.t, &b.t, OCCL_SUM, comm(), nullptr); break;
    case 1: st = occl_broadcast(&a.t, 0, comm(), nullptr); break;
    case 2: st = occl_all_gatherv(&a.t, &b.t, counts, displs, comm(), nullptr); break;
    case 3: st = occl_all_to_allv(&a.t, counts, displs, &b.t, counts, displs, comm(), nullptr); break;
  }
  if (any_unfit && st != OCCL_ERR_INVALID_ARGUMENT) std::abort();
  return 0;
}
