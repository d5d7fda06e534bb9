#include "common/cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "common/status.h"

namespace omniccl::cpus {

namespace {

struct CpuSetFree {
  void operator()(cpu_set_t* s) const { CPU_FREE(s); }
};

/// Appends "a" or "a-b" to `out`, comma first unless it is empty.
void append_range(std::string& out, int a, int b) {
  if (!out.empty()) out.push_back(',');
  out += std::to_string(a);
  if (b > a) out += str_cat("-", b);
}

/// Reads a decimal number in [0, kMaxCpu] at text[*i]; false if there is none.
bool read_number(const std::string& text, size_t* i, int* value) {
  const size_t start = *i;
  long v = 0;
  while (*i < text.size() && text[*i] >= '0' && text[*i] <= '9') {
    v = v * 10 + (text[*i] - '0');
    if (v > kMaxCpu) return false;
    ++*i;
  }
  *value = static_cast<int>(v);
  return *i > start;
}

std::string affinity_or_empty() {
  // cpu_set_t holds 1024 CPUs; a larger machine needs a larger set (EINVAL
  // says the kernel's mask does not fit).
  for (int n = 1024; n <= kMaxCpu + 1; n *= 2) {
    std::unique_ptr<cpu_set_t, CpuSetFree> set(CPU_ALLOC(n));
    if (!set) return {};
    const size_t bytes = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(bytes, set.get());
    if (sched_getaffinity(0, bytes, set.get()) != 0) {
      if (errno == EINVAL) continue;
      return {};
    }
    std::string out;
    int first = -1;
    for (int c = 0; c <= n; ++c) {
      const bool in = c < n && CPU_ISSET_S(static_cast<size_t>(c), bytes, set.get());
      if (in && first < 0) first = c;
      if (!in && first >= 0) {
        append_range(out, first, c - 1);
        first = -1;
      }
    }
    return out;
  }
  return {};
}

}  // namespace

std::string affinity_text() {
  std::string t = affinity_or_empty();
  if (!t.empty()) return t;
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::string all;
  append_range(all, 0, static_cast<int>(std::clamp(online, 1L, long{kMaxCpu} + 1)) - 1);
  return all;
}

bool allow_every_cpu() {
  const long conf = ::sysconf(_SC_NPROCESSORS_CONF);
  const int n = static_cast<int>(std::clamp(conf, 1L, long{kMaxCpu} + 1));
  std::unique_ptr<cpu_set_t, CpuSetFree> set(CPU_ALLOC(n));
  if (!set) return false;
  const size_t bytes = CPU_ALLOC_SIZE(n);
  CPU_ZERO_S(bytes, set.get());
  for (int c = 0; c < n; ++c) CPU_SET_S(static_cast<size_t>(c), bytes, set.get());
  return sched_setaffinity(0, bytes, set.get()) == 0;
}

bool parse(const std::string& text, std::vector<int>* out) {
  out->clear();
  std::vector<int> got;
  size_t i = 0;
  while (i < text.size()) {
    int a = 0, b = 0;
    if (!read_number(text, &i, &a)) return false;
    b = a;
    if (i < text.size() && text[i] == '-') {
      ++i;
      if (!read_number(text, &i, &b) || b < a) return false;
    }
    for (int c = a; c <= b; ++c) got.push_back(c);
    if (i < text.size()) {
      if (text[i] != ',' || i + 1 == text.size()) return false;
      ++i;
    }
  }
  if (got.empty()) return false;
  std::sort(got.begin(), got.end());
  got.erase(std::unique(got.begin(), got.end()), got.end());
  *out = std::move(got);
  return true;
}

int union_count(std::span<const std::string> lists) {
  std::vector<int> all, one;
  for (const std::string& l : lists) {
    if (!parse(l, &one)) return 0;
    all.insert(all.end(), one.begin(), one.end());
  }
  std::sort(all.begin(), all.end());
  return static_cast<int>(std::unique(all.begin(), all.end()) - all.begin());
}

}  // namespace omniccl::cpus
