// Endpoint records (transport.h): fields separated by 0x1f, in a fixed
// order, then one field per transport part, its name and its text
// separated by 0x1e. The first field names the record's shape: a rank of a
// build that writes another shape is refused at setup, by name.
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/cpus.h"
#include "common/status.h"
#include "transport/transport.h"

namespace omniccl::transport {

namespace {

constexpr char kSep = '\x1f';
constexpr char kPartSep = '\x1e';
constexpr char kShape[] = "omniccl-endpoint/4";
constexpr size_t kFixedFields = 11;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back().push_back(c);
    }
  }
  return out;
}

void check_text(const std::string& text, const char* what) {
  if (text.find(kSep) != std::string::npos || text.find(kPartSep) != std::string::npos) {
    fail(Status::kInternal, "an address record's ", what, " holds a separator byte");
  }
}

/// A record's number of bytes; kInternal when malformed.
size_t size_field(const std::string& text, int rank) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || n > SIZE_MAX) {
    fail(Status::kInternal, "malformed address record from rank ", rank, ": size '", text, "'");
  }
  return size_t(n);
}

}  // namespace

const std::string& Endpoint::part(std::string_view name) const {
  static const std::string none;
  for (const auto& [n, text] : parts) {
    if (n == name) return text;
  }
  return none;
}

std::string Endpoint::encode() const {
  std::string out =
      str_cat(kShape, kSep, host_id, kSep, pid, kSep, hostname, kSep, unix_addr, kSep, tcp_addr, kSep, cpus, kSep,
              host_block, kSep, gpu ? "1" : "0", kSep, slicing.slice_bytes, kSep, slicing.gpu_reduce_bytes);
  for (const std::string* f : {&host_id, &hostname, &unix_addr, &tcp_addr, &cpus, &host_block}) check_text(*f, "field");
  for (const auto& [name, text] : parts) {
    check_text(name, "transport name");
    check_text(text, "transport part");
    out += str_cat(kSep, name, kPartSep, text);
  }
  return out;
}

Endpoint Endpoint::decode(const std::string& text, int rank) {
  auto f = split(text, kSep);
  if (f[0] != kShape || f.size() < kFixedFields) {
    fail(Status::kInvalidArgument, "address record from rank ", rank, " is not of this build's shape (", kShape,
         "): are all ranks using the same OmniCCL version?");
  }
  Endpoint e;
  e.rank = rank;
  e.host_id = f[1];
  e.pid = std::atoi(f[2].c_str());
  e.hostname = f[3];
  e.unix_addr = f[4];
  e.tcp_addr = f[5];
  e.cpus = f[6];
  e.host_block = f[7];
  e.gpu = f[8] == "1";
  e.slicing.slice_bytes = size_field(f[9], rank);
  e.slicing.gpu_reduce_bytes = size_field(f[10], rank);
  std::vector<int> cpu_numbers;
  if (!cpus::parse(e.cpus, &cpu_numbers)) {
    fail(Status::kInternal, "malformed address record from rank ", rank, ": CPU list '", e.cpus, "'");
  }
  for (size_t i = kFixedFields; i < f.size(); ++i) {
    const size_t cut = f[i].find(kPartSep);
    if (cut == std::string::npos || cut == 0) fail(Status::kInternal, "malformed address record from rank ", rank);
    e.parts.emplace_back(f[i].substr(0, cut), f[i].substr(cut + 1));
  }
  return e;
}

}  // namespace omniccl::transport
