// Creating a communicator prepares the process-wide barrier that lets a
// thread keep the issuer (core/communicator/issuer.h). Registering for it
// waits for an RCU grace period, 10 to 15 ms: done lazily, it stalled the
// 16th call of a process (an 8 MiB TCP gather: 1.5 ms per call, then one of
// 11 to 30 ms). Its own executable, so that nothing in the process has
// registered before the test looks.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "bootstrap/rendezvous.h"
#include "communicator/communicator.h"
#include "communicator/issuer.h"

namespace omniccl {
namespace {

TEST(IssuerPrepare, CreatingACommunicatorRegistersForTheBarrier) {
  ASSERT_FALSE(Issuer::prepared()) << "nothing in this process has asked for the barrier yet";
  char dir_template[] = "/tmp/omniccl_issuer_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  ASSERT_NE(dir, nullptr);
  CommConfig cfg;
  cfg.timeout_ms = 30000;
  auto comm = Communicator::create(bootstrap::parse_init_method(std::string("file://") + dir, 0, 1), cfg);
  EXPECT_TRUE(Issuer::prepared()) << "the first call that keeps the issuer would register (and wait) then";
  comm.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace omniccl
