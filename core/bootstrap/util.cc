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
  return host == "localhost" || host == "ip6-localhost" || host == "ip6-loopback" ||
         host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0 ||
         host.rfind("localhost.", 0) == 0;
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

std::vector<Address> resolve(const std::string& host, uint16_t port, bool passive,
                             int* gai_err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string service = std::to_string(port);
  addrinfo* res = nullptr;
  int rc = getaddrinfo(h.empty() && passive ? nullptr : h.c_str(), service.c_str(), &hints, &res);
  *gai_err = rc;
  std::vector<Address> out;
  if (rc != 0) return out;
  for (int pass = 0; pass < 2; ++pass) {  // IPv4 first
    for (const addrinfo* p = res; p != nullptr; p = p->ai_next) {
      if ((p->ai_family == AF_INET) != (pass == 0)) continue;
      if (p->ai_addrlen > sizeof(sockaddr_storage)) continue;
      Address a;
      std::memcpy(&a.storage, p->ai_addr, p->ai_addrlen);
      a.len = p->ai_addrlen;
      a.family = p->ai_family;
      out.push_back(a);
    }
  }
  freeaddrinfo(res);
  if (out.empty()) *gai_err = EAI_NONAME;
  return out;
}

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  } else {
    return "?";
  }
  return buf;
}

void set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace omniccl::bootstrap::detail
