#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <sstream>

#include "common/settings.h"

namespace omniccl::log {

namespace {

struct Filter {
  Level level = Level::kWarn;
  unsigned subsys = ~0u;
};

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Filter load_filter() {
  Filter f;
  if (auto v = get_setting("OMNICCL_DEBUG")) {
    std::string s = upper(*v);
    if (s == "NONE")
      f.level = Level::kNone;
    else if (s == "WARN")
      f.level = Level::kWarn;
    else if (s == "INFO")
      f.level = Level::kInfo;
    else if (s == "DEBUG")
      f.level = Level::kDebug;
    else if (s == "TRACE")
      f.level = Level::kTrace;
    else
      std::fprintf(stderr, "[omniccl] OMNICCL_DEBUG='%s' unknown; using WARN\n", v->c_str());
  }
  if (auto v = get_setting("OMNICCL_DEBUG_SUBSYS")) {
    f.subsys = 0;
    std::stringstream ss(upper(*v));
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item == "ALL")
        f.subsys = ~0u;
      else if (item == "INIT")
        f.subsys |= unsigned(Subsys::kInit);
      else if (item == "BOOTSTRAP")
        f.subsys |= unsigned(Subsys::kBootstrap);
      else if (item == "TRANSPORT")
        f.subsys |= unsigned(Subsys::kTransport);
      else if (item == "COLL")
        f.subsys |= unsigned(Subsys::kColl);
      else if (item == "TUNING")
        f.subsys |= unsigned(Subsys::kTuning);
    }
  }
  return f;
}

const Filter& filter() {
  static const Filter f = load_filter();
  return f;
}

std::atomic<int> g_rank{-1};

const char* subsys_name(Subsys s) {
  switch (s) {
    case Subsys::kInit: return "INIT";
    case Subsys::kBootstrap: return "BOOTSTRAP";
    case Subsys::kTransport: return "TRANSPORT";
    case Subsys::kColl: return "COLL";
    case Subsys::kTuning: return "TUNING";
  }
  return "?";
}

const char* level_name(Level l) {
  switch (l) {
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kDebug: return "DEBUG";
    case Level::kTrace: return "TRACE";
    default: return "";
  }
}

}  // namespace

bool enabled(Level level, Subsys subsys) {
  const Filter& f = filter();
  return level <= f.level && (f.subsys & unsigned(subsys)) != 0;
}

void write(Level level, Subsys subsys, const std::string& text) {
  static std::mutex mu;
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  std::lock_guard<std::mutex> lock(mu);
  // Before the first communicator the rank is not known yet: say nothing
  // rather than a made-up "rank -1".
  const int rank = g_rank.load();
  if (rank < 0) {
    std::fprintf(stderr, "[omniccl %s:%d] %s %s %s\n", host, int(getpid()), subsys_name(subsys), level_name(level),
                 text.c_str());
  } else {
    std::fprintf(stderr, "[omniccl %s:%d rank %d] %s %s %s\n", host, int(getpid()), rank, subsys_name(subsys),
                 level_name(level), text.c_str());
  }
}

void set_rank(int rank) { g_rank.store(rank); }

}  // namespace omniccl::log
