// Init-method parsing, launcher environments, and unique ids.
//
// Unique id layout (kUniqueIdBytes = 128, integers little endian):
//
//   offset size  field
//        0    8  magic "OCCLUID1"
//        8    2  version (1)
//       10    2  TCP port of the store server (non-zero)
//       12    8  random session token (non-zero)
//       20    1  host length n (1..107)
//       21    n  host (printable ASCII, no spaces)
//     21+n  ...  zero padding (checked: garbage rarely has it)
#include "bootstrap/rendezvous.h"

#include <netdb.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"
#include "bootstrap/util.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/status.h"

namespace omniccl::bootstrap {

namespace {

constexpr char kUidMagic[8] = {'O', 'C', 'C', 'L', 'U', 'I', 'D', '1'};
constexpr uint16_t kUidVersion = 1;
constexpr size_t kUidHostOffset = 21;
constexpr size_t kUidMaxHost = kUniqueIdBytes - kUidHostOffset;

/// A launcher's pair of rank and size variables.
struct EnvPair {
  const char* rank;
  const char* size;
};

/// Launcher environments, in the order they are consulted.
constexpr EnvPair kEnvPairs[] = {
    {"RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
};

/// The integer in environment variable `name` (value `text`).
int env_int(const char* name, const std::string& text) {
  auto v = detail::parse_int64(text);
  if (!v) {
    fail(Status::kInvalidArgument, name, "='", detail::printable(text), "' is not an integer");
  }
  if (*v < INT_MIN || *v > INT_MAX) {
    fail(Status::kInvalidArgument, name, "='", detail::printable(text), "' is out of range");
  }
  return static_cast<int>(*v);
}

/// Parses a TCP port (1..65535); `what` names where the text came from.
uint16_t parse_port(const std::string& text, const std::string& what) {
  auto v = detail::parse_int64(text);
  if (!v || *v < 1 || *v > 65535) {
    fail(Status::kInvalidArgument, what, " '", detail::printable(text),
         "' is not a port number (1..65535)");
  }
  return static_cast<uint16_t>(*v);
}

/// Fills spec->rank and spec->world_size from the arguments, taking -1 from
/// the first launcher environment present, and validates them.
void resolve_rank(int rank, int world_size, RendezvousSpec* spec) {
  std::string rank_src = "given by the caller";
  std::string size_src = "given by the caller";
  if (rank == -1 || world_size == -1) {
    const EnvPair* found = nullptr;
    for (const auto& p : kEnvPairs) {
      if (get_setting(p.rank) || get_setting(p.size)) {
        found = &p;
        break;
      }
    }
    if (found == nullptr) {
      fail(Status::kInvalidArgument, rank == -1 ? "rank" : "world size",
           " was not given and none of RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/"
           "OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS is set; "
           "pass rank and world size explicitly or start the program with a launcher "
           "(omniccl-run, torchrun, mpirun, srun)");
    }
    if (rank == -1) {
      auto v = get_setting(found->rank);
      if (!v) {
        fail(Status::kInvalidArgument, found->size, " is set but ", found->rank,
             " is not; set both or pass the rank explicitly");
      }
      rank = env_int(found->rank, *v);
      rank_src = str_cat("from ", found->rank);
    }
    if (world_size == -1) {
      auto v = get_setting(found->size);
      if (!v) {
        fail(Status::kInvalidArgument, found->rank, " is set but ", found->size,
             " is not; set both or pass the world size explicitly");
      }
      world_size = env_int(found->size, *v);
      size_src = str_cat("from ", found->size);
    }
  }
  if (world_size < 1) {
    fail(Status::kInvalidArgument, "world size ", world_size, " (", size_src,
         ") must be at least 1");
  }
  if (rank < 0 || rank >= world_size) {
    fail(Status::kInvalidArgument, "rank ", rank, " (", rank_src, ") is outside world size ",
         world_size, " (", size_src, "); valid ranks are 0..", world_size - 1);
  }
  spec->rank = rank;
  spec->world_size = world_size;
}

/// Splits "host:port" / "[v6]:port" of a tcp:// init method.
void parse_host_port(const std::string& init_method, const std::string& rest,
                     RendezvousSpec* spec) {
  std::string host;
  std::string port_text;
  const std::string usage = "; expected tcp://host:port (IPv6: tcp://[::1]:29500)";
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      fail(Status::kInvalidArgument, "init method '", init_method,
           "' has no port after the bracketed address", usage);
    }
    host = rest.substr(1, close - 1);
    port_text = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos) {
      fail(Status::kInvalidArgument, "init method '", init_method, "' has no port", usage);
    }
    host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      fail(Status::kInvalidArgument, "init method '", init_method,
           "': an IPv6 address needs brackets", usage);
    }
  }
  if (host.empty()) {
    fail(Status::kInvalidArgument, "init method '", init_method, "' has no host", usage);
  }
  spec->host = host;
  spec->port = parse_port(port_text, str_cat("port in init method '", init_method, "':"));
}

/// Writes the unique id of (host, port, token) into out.
void encode_unique_id(const std::string& host, uint16_t port, uint64_t token, char* out) {
  check_arg(!host.empty() && host.size() <= kUidMaxHost, "address '", host,
            "' does not fit in a unique id (at most ", kUidMaxHost, " bytes)");
  std::memset(out, 0, kUniqueIdBytes);
  std::memcpy(out, kUidMagic, sizeof kUidMagic);
  wire::put_le(out + 8, kUidVersion, 2);
  wire::put_le(out + 10, port, 2);
  wire::put_le(out + 12, token, 8);
  out[20] = static_cast<char>(host.size());
  std::memcpy(out + kUidHostOffset, host.data(), host.size());
}

/// A random non-zero 64-bit token.
uint64_t random_token() {
  std::random_device rd;
  uint64_t t = 0;
  while (t == 0) t = (uint64_t{rd()} << 32) ^ uint64_t{rd()};
  return t;
}

/// The first non-loopback IPv4 address the host name resolves to, or "".
std::string primary_address() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return {};
  int gai_err = 0;
  for (const auto& a : detail::resolve(name, 1, /*passive=*/false, &gai_err)) {
    std::string text = detail::address_text(a.sa());
    if (a.family == AF_INET && !detail::is_loopback_name(text)) return text;
  }
  return {};
}

/// Keeps the unique-id store servers alive until the process exits.
struct UidServers {
  std::mutex mu;
  std::vector<std::unique_ptr<TcpStoreServer>> servers;
};

/// The process-wide list of unique-id servers.
UidServers& uid_servers() {
  static UidServers s;
  return s;
}

}  // namespace

RendezvousSpec parse_init_method(const std::string& init_method, int rank, int world_size) {
  RendezvousSpec spec;
  if (init_method == "env://") {
    auto addr = get_setting("MASTER_ADDR");
    if (!addr) {
      fail(Status::kInvalidArgument,
           "MASTER_ADDR is not set; env:// needs MASTER_ADDR (the rendezvous host, e.g. the "
           "address of rank 0) and MASTER_PORT");
    }
    auto port = get_setting("MASTER_PORT");
    if (!port) {
      fail(Status::kInvalidArgument,
           "MASTER_PORT is not set; env:// needs MASTER_ADDR and MASTER_PORT (a free TCP port "
           "on MASTER_ADDR, e.g. 29500)");
    }
    spec.kind = RendezvousSpec::Kind::kTcp;
    spec.host = *addr;
    if (spec.host.size() >= 2 && spec.host.front() == '[' && spec.host.back() == ']') {
      spec.host = spec.host.substr(1, spec.host.size() - 2);
    }
    spec.port = parse_port(*port, "MASTER_PORT");
  } else if (init_method.rfind("tcp://", 0) == 0) {
    spec.kind = RendezvousSpec::Kind::kTcp;
    parse_host_port(init_method, init_method.substr(6), &spec);
  } else if (init_method.rfind("file://", 0) == 0) {
    spec.kind = RendezvousSpec::Kind::kFile;
    spec.path = init_method.substr(7);
    if (spec.path.empty() || spec.path.front() != '/') {
      fail(Status::kInvalidArgument, "init method '", init_method,
           "' needs an absolute path, like file:///shared/dir/rendezvous (three slashes)");
    }
  } else {
    fail(Status::kInvalidArgument, "unknown init method '", init_method,
         "'; use env://, tcp://host:port or file:///path");
  }
  resolve_rank(rank, world_size, &spec);
  return spec;
}

void create_unique_id(char out[kUniqueIdBytes]) {
  std::unique_ptr<TcpStoreServer> server;
  std::string host;
  if (auto configured = get_setting("OMNICCL_SOCKET_ADDR")) {
    host = *configured;  // an explicit choice: failing to bind it is an error
    server = std::make_unique<TcpStoreServer>(host, 0);
  } else {
    host = primary_address();
    if (!host.empty()) {
      try {
        server = std::make_unique<TcpStoreServer>(host, 0);
      } catch (const Error& e) {
        OCCL_LOG(kInfo, kBootstrap, "unique id: ", e.what(), "; using 127.0.0.1");
      }
    }
    if (!server) {
      host = "127.0.0.1";
      server = std::make_unique<TcpStoreServer>(host, 0);
    }
  }
  const uint64_t token = random_token();
  encode_unique_id(host, server->port(), token, out);
  OCCL_LOG(kInfo, kBootstrap, "unique id: store server on ",
           detail::host_port(host, server->port()));
  UidServers& s = uid_servers();
  std::lock_guard<std::mutex> lock(s.mu);
  s.servers.push_back(std::move(server));
}

RendezvousSpec decode_unique_id(const char in[kUniqueIdBytes], int rank, int world_size) {
  check_arg(in != nullptr, "unique id is NULL");
  const std::string garbage = "unique id is invalid: ";
  if (std::memcmp(in, kUidMagic, sizeof kUidMagic) != 0) {
    fail(Status::kInvalidArgument, garbage,
         "bad magic (not produced by occl_get_unique_id, or corrupted in transit)");
  }
  const uint64_t version = wire::get_le(in + 8, 2);
  if (version != kUidVersion) {
    fail(Status::kInvalidArgument, garbage, "version ", version, " is not supported (expected ",
         kUidVersion, "; are all ranks using the same OmniCCL version?)");
  }
  const auto port = static_cast<uint16_t>(wire::get_le(in + 10, 2));
  const uint64_t token = wire::get_le(in + 12, 8);
  const size_t host_len = static_cast<unsigned char>(in[20]);
  if (port == 0) fail(Status::kInvalidArgument, garbage, "port is 0");
  if (token == 0) fail(Status::kInvalidArgument, garbage, "token is 0");
  if (host_len == 0 || host_len > kUidMaxHost) {
    fail(Status::kInvalidArgument, garbage, "host length ", host_len, " is outside 1..",
         kUidMaxHost);
  }
  for (size_t i = 0; i < host_len; ++i) {
    auto c = static_cast<unsigned char>(in[kUidHostOffset + i]);
    if (c <= 0x20 || c >= 0x7f) {
      fail(Status::kInvalidArgument, garbage, "host contains a non-printable byte");
    }
  }
  for (size_t i = kUidHostOffset + host_len; i < kUniqueIdBytes; ++i) {
    if (in[i] != 0) fail(Status::kInvalidArgument, garbage, "padding is not zero");
  }
  RendezvousSpec spec;
  spec.kind = RendezvousSpec::Kind::kUniqueId;
  spec.host.assign(in + kUidHostOffset, host_len);
  spec.port = port;
  spec.token = token;
  resolve_rank(rank, world_size, &spec);
  return spec;
}

}  // namespace omniccl::bootstrap
