#include "transport/registry.h"

#include <algorithm>

#include "common/status.h"

namespace omniccl::transport {

namespace {

std::unique_ptr<Transport> make_shm(const TransportOptions& o, const TransportContext& w) {
  return make_shm_transport(o.shm, w.rank, w.size, w.session);
}

std::unique_ptr<Transport> make_tcp(const TransportOptions& o, const TransportContext& w) {
  return make_tcp_transport(o.tcp, w.size);
}

std::unique_ptr<Transport> make_cuda_ipc(const TransportOptions& o, const TransportContext& w) {
  return make_cuda_ipc_transport(o.cuda_ipc, w.rank, w.size);
}

// Highest priority first.
constexpr TransportFactory kTransports[] = {
    {"shm", make_shm},
    {"tcp", make_tcp},
    {"cuda_ipc", make_cuda_ipc, true},
};

}  // namespace

std::span<const TransportFactory> transport_table() { return kTransports; }

std::vector<std::unique_ptr<Transport>> make_transports(const TransportOptions& options, const TransportContext& where,
                                                        std::span<const TransportFactory> table) {
  const bool all = options.forced.empty() || options.forced == "auto";
  std::vector<std::unique_ptr<Transport>> out;
  for (const TransportFactory& f : table) {
    const bool wanted = f.device ? options.cuda_ipc.mode != "staged" : all || options.forced == f.name;
    if (wanted) out.push_back(f.make(options, where));
  }
  if (std::none_of(out.begin(), out.end(), [](const auto& t) { return !t->moves_device_memory(); }))
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
      if (forced != t->name() || t->moves_device_memory()) continue;
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
    if (t->moves_device_memory()) continue;
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

TransportChoice choose_device_transport(std::span<const std::unique_ptr<Transport>> transports, const Endpoint& local,
                                        const Endpoint& peer) {
  TransportChoice best;
  std::string refused;
  for (const auto& t : transports) {
    if (!t->moves_device_memory()) continue;
    Verdict v = t->can_connect(local, peer);
    if (!v.ok) {
      refused += str_cat(refused.empty() ? "" : "; ", t->name(), ": ", v.reason);
    } else if (best.transport == nullptr || t->priority() > best.transport->priority()) {
      best = {t.get(), std::move(v.reason)};
    }
  }
  if (best.transport == nullptr) best.reason = refused.empty() ? "OMNICCL_DEVICE_TRANSPORT=staged" : refused;
  return best;
}

}  // namespace omniccl::transport
