#include "bootstrap/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/log.h"
#include "common/settings.h"

namespace omniccl::bootstrap::detail {

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

std::string printable(const std::string& key) {
  constexpr size_t kMax = 200;
  std::string out;
  for (size_t i = 0; i < key.size() && i < kMax; ++i) {
    auto c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (key.size() > kMax) out += "...";
  return out;
}

bool is_loopback_name(const std::string& host) {
  return host == "localhost" || host == "ip6-localhost" || host == "ip6-loopback" || host == "::1" || host == "[::1]" ||
         host.rfind("127.", 0) == 0 || host.rfind("localhost.", 0) == 0;
}

int64_t default_op_timeout_ms() {
  if (auto v = get_setting("OMNICCL_TIMEOUT")) return parse_duration_ms(*v, "OMNICCL_TIMEOUT");
  return 600'000;
}

std::optional<int64_t> parse_int64(const std::string& text) {
  int64_t v = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') ++first;  // from_chars rejects '+'
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (first == last || ec != std::errc() || ptr != last) return std::nullopt;
  return v;
}

void raise_open_file_limit() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (get_setting("OMNICCL_RAISE_NOFILE").value_or("1") == "0") return;
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
    const rlim_t before = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    // Some kernels refuse an unlimited hard limit as a soft one (above
    // fs.nr_open); the soft limit then stays, which is only what it was.
    if (::setrlimit(RLIMIT_NOFILE, &rl) == 0) {
      OCCL_LOG(kDebug, kBootstrap, "raised the open-file limit from ", before, " to ", rl.rlim_cur,
               " (OMNICCL_RAISE_NOFILE=0 keeps it)");
    }
  });
}

}  // namespace omniccl::bootstrap::detail
