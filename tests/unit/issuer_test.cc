// The communicator's issuer (core/communicator/issuer.h): one thread in a
// call at a time, nested entries, a thread that keeps issuing keeps the
// issuer between calls, another thread takes it from the keeper only when
// the keeper is not in a call, and drain() (abort) waits for the call.
#include "communicator/issuer.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace omniccl {
namespace {

using Entry = Issuer::Entry;
using Clock = std::chrono::steady_clock;

/// Runs `n` calls in a row on this thread (enter and leave).
void calls(Issuer& is, unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    const Entry e = is.enter();
    ASSERT_TRUE(e == Entry::kEntered || e == Entry::kEnteredKept);
    is.leave(e);
  }
}

/// Runs fn on a new thread and returns its result.
template <typename Fn>
auto on_other_thread(Fn fn) {
  decltype(fn()) out{};
  std::thread t([&] { out = fn(); });
  t.join();
  return out;
}

TEST(Issuer, NestedEntriesAndASecondThreadRefusedWhileInACall) {
  Issuer is;
  const Entry outer = is.enter();
  EXPECT_EQ(outer, Entry::kEntered);
  EXPECT_EQ(is.enter(), Entry::kNested);
  EXPECT_EQ(on_other_thread([&] { return is.enter(); }), Entry::kBusy);
  is.leave(outer);
  // Left: another thread enters (a single call does not keep the issuer).
  EXPECT_FALSE(is.kept_by_this_thread());
  const Entry other = on_other_thread([&] {
    const Entry e = is.enter();
    if (e == Entry::kEntered) is.leave(e);
    return e;
  });
  EXPECT_EQ(other, Entry::kEntered);
}

TEST(Issuer, AThreadThatKeepsIssuingKeepsTheIssuerAndGivesItUp) {
  if (!Issuer::can_keep()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here: every call takes the issuer";
  Issuer is;
  calls(is, Issuer::kKeepAfter - 1);
  EXPECT_FALSE(is.kept_by_this_thread());
  calls(is, 1);
  EXPECT_TRUE(is.kept_by_this_thread());
  // Kept: entered without a compare-and-swap, nested inside as before.
  const Entry kept = is.enter();
  EXPECT_EQ(kept, Entry::kEnteredKept);
  EXPECT_EQ(is.enter(), Entry::kNested);
  // In a call: another thread is refused, and the keeper keeps it.
  EXPECT_EQ(on_other_thread([&] { return is.enter(); }), Entry::kBusy);
  EXPECT_TRUE(is.kept_by_this_thread());
  is.leave(kept);
  // Between calls: another thread takes it (and refuses the old keeper
  // while it is in its call).
  std::atomic<int> stage{0};
  std::atomic<int> keeper_entry{-1};
  std::thread other([&] {
    const Entry e = is.enter();
    stage.store(e == Entry::kEntered ? 1 : -1);
    while (stage.load() == 1) std::this_thread::yield();
    if (e == Entry::kEntered) is.leave(e);
    stage.store(3);
  });
  while (stage.load() == 0) std::this_thread::yield();
  ASSERT_EQ(stage.load(), 1) << "the other thread could not take the issuer from an idle keeper";
  EXPECT_FALSE(is.kept_by_this_thread());
  keeper_entry.store(static_cast<int>(is.enter()));
  stage.store(2);
  other.join();
  EXPECT_EQ(keeper_entry.load(), static_cast<int>(Entry::kBusy));
  // The other thread made one call: it does not keep it; this one enters.
  const Entry again = is.enter();
  EXPECT_EQ(again, Entry::kEntered);
  is.leave(again);
}

TEST(Issuer, DrainWaitsForTheKeepersCallAndTakesTheIssuer) {
  Issuer is;
  std::atomic<int> stage{0};
  std::atomic<bool> left{false};
  std::thread keeper([&] {
    calls(is, Issuer::kKeepAfter + 1);
    const Entry e = is.enter();
    stage.store(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    left.store(true);
    is.leave(e);
  });
  while (stage.load() == 0) std::this_thread::yield();
  const auto t0 = Clock::now();
  is.drain();
  EXPECT_TRUE(left.load()) << "drain() returned while the call was still running";
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  keeper.join();
  // Drained: nobody holds it; a new thread enters.
  EXPECT_EQ(on_other_thread([&] {
              const Entry e = is.enter();
              if (e == Entry::kEntered) is.leave(e);
              return e;
            }),
            Entry::kEntered);
  // And drain() with nobody in a call returns at once.
  is.drain();
}

// A thread that read its own keeper word, then lost the issuer before its
// entry went on (preempted, say): another thread took the issuer, came to
// keep it and is in a call. The late entry must be refused; it must not
// take itself for a nested call (it is in none), nor clear the new keeper's
// mark so that a third thread gets in beside it. (It did both once: the
// keeper's busy mark was one flag that every thread which believed itself
// the keeper wrote.)
TEST(Issuer, AFormerKeeperLateToItsEntryIsRefusedAndLeavesTheNewKeepersCallAlone) {
  if (!Issuer::can_keep()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here: no thread keeps the issuer";
  Issuer is;
  std::atomic<int> stage{0};
  std::atomic<int> late{-1};
  std::thread former([&] {
    calls(is, Issuer::kKeepAfter + 1);
    EXPECT_TRUE(is.kept_by_this_thread());
    stage.store(1);
    while (stage.load() != 2) std::this_thread::yield();
    late.store(static_cast<int>(is.enter_as_former_keeper()));
    stage.store(3);
  });
  while (stage.load() != 1) std::this_thread::yield();
  // This thread takes the issuer from the idle keeper, comes to keep it and
  // enters a call.
  calls(is, Issuer::kKeepAfter + 1);
  ASSERT_TRUE(is.kept_by_this_thread());
  const Entry mine = is.enter();
  ASSERT_EQ(mine, Entry::kEnteredKept);
  stage.store(2);
  former.join();
  EXPECT_EQ(late.load(), static_cast<int>(Entry::kBusy)) << "the former keeper's late entry was not refused";
  EXPECT_EQ(on_other_thread([&] { return is.enter(); }), Entry::kBusy)
      << "a third thread got in beside the keeper's call";
  EXPECT_TRUE(is.kept_by_this_thread());
  is.leave(mine);
  // Idle again: another thread takes it.
  EXPECT_EQ(on_other_thread([&] {
              const Entry e = is.enter();
              if (e == Entry::kEntered) is.leave(e);
              return e;
            }),
            Entry::kEntered);
}

// Threads entering at random (keepers made and unmade all the time): never
// two in a call at once, and each gets in.
TEST(Issuer, NeverTwoThreadsInACall) {
  Issuer is;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<bool> stop{false};
  std::vector<long> entered(3, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      unsigned burst = 1 + static_cast<unsigned>(t) * 20;  // thread 2 keeps, thread 0 never does
      while (!stop.load(std::memory_order_relaxed)) {
        for (unsigned i = 0; i < burst; ++i) {
          const Entry e = is.enter();
          if (e == Entry::kBusy) continue;
          ASSERT_NE(e, Entry::kNested);
          if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
          for (int k = 0; k < 50; ++k) std::atomic_signal_fence(std::memory_order_seq_cst);
          inside.fetch_sub(1);
          ++entered[static_cast<size_t>(t)];
          is.leave(e);
        }
        std::this_thread::yield();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  stop.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(overlaps.load(), 0);
  for (int t = 0; t < 3; ++t) EXPECT_GT(entered[static_cast<size_t>(t)], 0) << "thread " << t;
}

}  // namespace
}  // namespace omniccl
