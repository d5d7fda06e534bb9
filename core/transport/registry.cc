#include "transport/registry.h"

#include "common/status.h"

namespace omniccl::transport {

namespace {

std::unique_ptr<Transport> make_shm(const TransportOptions& o, const TransportContext& w) {
  return make_shm_transport(o.shm, w.rank, w.size, w.session);
}

std::unique_ptr<Transport> make_tcp(const TransportOptions& o, const TransportContext& w) {
  return make_tcp_transport(o.tcp, w.size);
}

// Highest priority first.
constexpr TransportFactory kTransports[] = {
    {"shm", make_shm},
    {"tcp", make_tcp},
};

}  // namespace

std::span<const TransportFactory> transport_table() { return kTransports; }

std::vector<std::unique_ptr<Transport>> make_transports(const TransportOptions& options, const TransportContext& where,
                                                        std::span<const TransportFactory> table) {
  const bool all = options.forced.empty() || options.forced == "auto";
  std::vector<std::unique_ptr<Transport>> out;
  for (const TransportFactory& f : table) {
    if (all || options.forced == f.name) out.push_back(f.make(options, where));
  }
  if (out.empty())
    fail(Status::kInvalidArgument, "OMNICCL_TRANSPORT=", options.forced, " names no transport of this build");
  return out;
}

std::unique_ptr<Transport> make_transport(std::string_view name, const TransportOptions& options) {
  TransportOptions o = options;
  o.forced = std::string(name);
  return std::move(make_transports(o, TransportContext{0, 2, {}}).front());
}

TransportChoice choose_transport(std::span<const std::unique_ptr<Transport>> transports, const Endpoint& local,
                                 const Endpoint& peer, const std::string& forced) {
  if (!forced.empty() && forced != "auto") {
    for (const auto& t : transports) {
      if (forced != t->name()) continue;
      Verdict v = t->can_connect(local, peer);
      if (!v.ok) {
        fail(Status::kInvalidArgument, "OMNICCL_TRANSPORT=", forced, " but rank ", peer.rank, " (on ", peer.hostname,
             ") cannot use it: ", v.reason);
      }
      return {t.get(), str_cat("OMNICCL_TRANSPORT=", forced)};
    }
    fail(Status::kInvalidArgument, "OMNICCL_TRANSPORT=", forced, " names no transport of this build");
  }
  Transport* best = nullptr;
  std::string reason, refused;
  for (const auto& t : transports) {
    Verdict v = t->can_connect(local, peer);
    if (!v.ok) {
      refused += str_cat(refused.empty() ? "" : "; ", t->name(), ": ", v.reason);
      continue;
    }
    if (best == nullptr || t->priority() > best->priority()) {
      best = t.get();
      reason = std::move(v.reason);
    }
  }
  if (best == nullptr) fail(Status::kInternal, "no transport can connect to rank ", peer.rank, " (", refused, ")");
  // A fallback says why the preferred ones were refused ("rank 1 offers no
  // shared memory" rather than just "fallback").
  if (reason == "fallback" && !refused.empty()) reason = refused;
  return {best, reason};
}

}  // namespace omniccl::transport
