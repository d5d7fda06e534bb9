// kernels/cuda on any machine, GPU or not: argument checks come before CUDA
// is touched, and without a driver every call that would launch says so.
// (CTest label `unit`: this suite needs no GPU; the no-driver test skips,
// visibly, where /dev/nvidiactl exists.)
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "kernels/cuda/reduce.h"
#include "kernels/cuda/runtime.h"
#include "kernels/types.h"

namespace omniccl::kernels {
namespace {

// Never dereferenced: every call below fails (or returns) before a launch.
void* const kFake = reinterpret_cast<void*>(uintptr_t{0x1000});

bool driver_present() { return std::filesystem::exists("/dev/nvidiactl"); }

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(CudaDispatch, TwoPartItemsHaveNoDeviceKernels) {
  // Complex numbers and MAXLOC / MINLOC pairs are reduced on the host.
  EXPECT_THROW(cuda::reduce(kFake, kFake, kFake, 4, DType::kComplex64, RedOp::kProd, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::reduce(kFake, kFake, kFake, 4, DType::kInt32, RedOp::kMaxLoc, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::scale_divide(kFake, 4, DType::kComplex128, 2, nullptr), std::invalid_argument);
}

TEST(CudaDispatch, UndefinedPairIsRejectedFirst) {
  EXPECT_THROW(cuda::reduce(kFake, kFake, kFake, 4, DType::kFloat32, RedOp::kBXor, nullptr), std::invalid_argument);
  const std::string m =
      message_of([] { cuda::reduce(kFake, kFake, kFake, 4, DType::kBFloat16, RedOp::kBAnd, nullptr); });
  EXPECT_NE(m.find("BAND"), std::string::npos) << m;
  EXPECT_NE(m.find("bfloat16"), std::string::npos) << m;
  EXPECT_THROW(cuda::scale_divide(kFake, 4, DType::kBool, 2, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::scale_divide(kFake, 4, DType::kInt32, 0, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::scale_multiply(kFake, kFake, 4, DType::kBool, 2.0, nullptr), std::invalid_argument);
}

TEST(CudaDispatch, MisalignedPointerIsRejected) {
  auto* odd = static_cast<char*>(kFake) + 2;
  const std::string m = message_of([&] { cuda::reduce(kFake, odd, kFake, 4, DType::kFloat32, RedOp::kSum, nullptr); });
  EXPECT_NE(m.find("not aligned"), std::string::npos) << m;
  EXPECT_NE(m.find(" a "), std::string::npos) << m;  // names the argument
  EXPECT_THROW(cuda::scale_multiply(odd, kFake, 1, DType::kFloat64, 2.0, nullptr), std::invalid_argument);
  // 2-byte alignment is enough for 2-byte elements.
  if (!driver_present()) {
    EXPECT_THROW(cuda::reduce(odd, odd, odd, 1, DType::kFloat16, RedOp::kSum, nullptr), cuda::Error);
  }
}

TEST(CudaDispatch, ZeroCountDoesNothing) {
  cuda::reduce(nullptr, nullptr, nullptr, 0, DType::kFloat32, RedOp::kSum, nullptr);
  cuda::scale_divide(nullptr, 0, DType::kInt8, 3, nullptr);
  cuda::scale_multiply(nullptr, nullptr, 0, DType::kFloat8E4M3FN, 2.0, nullptr);
  cuda::copy(nullptr, nullptr, 0, nullptr);
}

TEST(CudaDispatch, NoDriverSaysSo) {
  if (driver_present()) GTEST_SKIP() << "/dev/nvidiactl exists: this machine has a driver";
  const auto& s = cuda::runtime_status();
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.device_count, 0);
  EXPECT_NE(s.reason.find("cudaGetDeviceCount"), std::string::npos) << s.reason;
  for (auto call : {+[] { cuda::reduce(kFake, kFake, kFake, 4, DType::kFloat32, RedOp::kSum, nullptr); },
                    +[] { cuda::scale_divide(kFake, 4, DType::kInt32, 2, nullptr); },
                    +[] { cuda::scale_multiply(kFake, kFake, 4, DType::kBFloat16, 2.0, nullptr); },
                    +[] { cuda::copy(kFake, static_cast<char*>(kFake) + 64, 4, nullptr); }}) {
    const std::string m = message_of(call);
    EXPECT_NE(m.find("no CUDA driver/GPU found: cudaGetDeviceCount"), std::string::npos) << m;
    EXPECT_THROW(call(), cuda::Error);
  }
}

// The staged path's host-side calls name the CUDA call that failed and
// throw, rather than crash, where there is no driver.
TEST(CudaDispatch, StagingCallsWithoutADriverThrowNamingTheCall) {
  if (driver_present()) GTEST_SKIP() << "/dev/nvidiactl exists: this machine has a driver";
  const std::pair<const char*, void (*)()> calls[] = {
      {"cudaHostAlloc", +[] { cuda::host_alloc(64); }},
      {"cudaEventCreateWithFlags", +[] { cuda::event_create(); }},
      {"cudaMemcpyAsync", +[] { cuda::copy_async(kFake, static_cast<char*>(kFake) + 64, 4, nullptr); }},
      {"cudaGetDevice", +[] { cuda::current_device(); }},
  };
  for (const auto& [name, call] : calls) {
    const std::string m = message_of(call);
    EXPECT_NE(m.find(name), std::string::npos) << m;
    EXPECT_THROW(call(), cuda::Error);
  }
}

}  // namespace
}  // namespace omniccl::kernels
