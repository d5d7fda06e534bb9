#include "bootstrap/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <charconv>
#include <cstdio>
#include <cstring>

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

}  // namespace omniccl::bootstrap::detail
