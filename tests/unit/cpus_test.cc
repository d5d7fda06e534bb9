// CPU lists (common/cpus.h): the text ranks swap at setup, parsed back, the
// union of several, and this thread's own affinity written as one.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/cpus.h"

namespace omniccl::cpus {
namespace {

TEST(Cpus, ParsesNumbersAndRangesSortedAndDistinct) {
  std::vector<int> got;
  ASSERT_TRUE(parse("0", &got));
  EXPECT_EQ(got, (std::vector<int>{0}));
  ASSERT_TRUE(parse("8,0-3", &got));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 8}));
  ASSERT_TRUE(parse("2-4,3,4-5", &got));
  EXPECT_EQ(got, (std::vector<int>{2, 3, 4, 5}));
}

TEST(Cpus, RejectsMalformedLists) {
  for (const char* bad : {"", ",", "0,", ",0", "a", "1-", "-1", "3-1", "0--2", "1 2", "0-65537", "99999999999"}) {
    std::vector<int> got{7};
    EXPECT_FALSE(parse(bad, &got)) << "'" << bad << "'";
    EXPECT_TRUE(got.empty()) << "'" << bad << "'";
  }
}

TEST(Cpus, UnionCountsDistinctCpus) {
  const std::vector<std::string> own_cores{"0", "1"}, one_core{"0", "0"}, overlap{"0-3", "2-5"}, none{};
  EXPECT_EQ(union_count(own_cores), 2);
  EXPECT_EQ(union_count(one_core), 1);
  EXPECT_EQ(union_count(overlap), 6);
  EXPECT_EQ(union_count(none), 0);
  const std::vector<std::string> with_bad{"0-3", "x"};
  EXPECT_EQ(union_count(with_bad), 0) << "a malformed list makes the count unknown";
}

// The text for a thread bound to one CPU names that CPU alone; unbound, it
// names as many CPUs as the process may use.
TEST(Cpus, AffinityTextIsThisThreadsMask) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  std::vector<int> got;
  ASSERT_TRUE(parse(affinity_text(), &got)) << affinity_text();
  EXPECT_EQ(static_cast<int>(got.size()), CPU_COUNT(&all));
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all)) last = c;
  }
  ASSERT_GE(last, 0);
  std::string bound;
  std::thread t([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0) bound = affinity_text();
  });
  t.join();
  EXPECT_EQ(bound, std::to_string(last));
}

// A thread bound to one CPU gets back the process's whole mask (here: at
// least the CPUs the process had at the start).
TEST(Cpus, AllowEveryCpuUndoesABinding) {
  std::vector<int> before;
  ASSERT_TRUE(parse(affinity_text(), &before));
  if (before.size() < 2) GTEST_SKIP() << "this process may use one CPU only: " << affinity_text();
  std::string bound, after;
  bool ok = false;
  std::thread t([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(before.front(), &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) return;
    bound = affinity_text();
    ok = allow_every_cpu();
    after = affinity_text();
  });
  t.join();
  EXPECT_EQ(bound, std::to_string(before.front()));
  EXPECT_TRUE(ok);
  std::vector<int> got;
  ASSERT_TRUE(parse(after, &got)) << after;
  for (int c : before) EXPECT_NE(std::find(got.begin(), got.end(), c), got.end()) << "CPU " << c << " in " << after;
}

}  // namespace
}  // namespace omniccl::cpus
