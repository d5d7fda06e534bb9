// extern "C" shims: arguments in, TensorView/Communicator calls, status out.
#include <cstring>
#include <memory>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "collective/collectives.h"
#include "communicator/communicator.h"
#include "dlpack.h"
#include "omniccl/omniccl.h"
#include "status.h"

#define OCCL_API extern "C" __attribute__((visibility("default")))

struct occl_comm {
  std::shared_ptr<omniccl::Communicator> impl;
};

struct occl_work {
  std::shared_ptr<omniccl::Work> impl;
};

namespace omniccl::capi {
namespace {

/// A reference that keeps the communicator alive for the whole call, so an
/// occl_comm_abort on another thread (which frees the handle) cannot free it
/// under a call that is still returning.
std::shared_ptr<Communicator> comm_of(occl_comm_t comm) {
  check_arg(comm != nullptr && comm->impl != nullptr, "comm is NULL");
  return comm->impl;
}

/// Applies a caller's occl_config_t over the environment defaults, reading
/// only the fields the caller's version has.
CommConfig resolve_config(const occl_config_t* cfg, const CommConfig& base) {
  CommConfig out = base;
  if (cfg == nullptr) return out;
  check_arg(cfg->magic == OCCL_CONFIG_MAGIC, "config: magic is 0x", std::hex, cfg->magic,
            "; initialise occl_config_t with OCCL_CONFIG_INIT");
  if (cfg->version < 1 || cfg->size < offsetof(occl_config_t, timeout_ms)) {
    fail(Status::kVersion, "config: version ", cfg->version, " / size ", cfg->size, " is not a valid occl_config_t");
  }
  occl_config_t c = OCCL_CONFIG_INIT;
  std::memcpy(&c, cfg, std::min(cfg->size, sizeof c));
  if (c.timeout_ms != OCCL_CONFIG_UNDEF_INT64) out.timeout_ms = c.timeout_ms;
  if (c.transport != nullptr) out.transport = c.transport;
  if (c.algorithm != nullptr) {
    out.algorithm = c.algorithm;
    out.algorithm_source = "config.algorithm";
  }
  out.validate();
  return out;
}

void store_work(occl_work_t* work, const std::shared_ptr<Work>& w) {
  if (work != nullptr) *work = new occl_work{w};
}

/// Runs one operation: blocking when work == NULL, else stores a handle.
template <typename Fn>
occl_status_t op(const char* name, occl_work_t* work, Fn&& fn) {
  if (work != nullptr) *work = nullptr;
  return guard(name, [&] { store_work(work, fn(work != nullptr)); });
}

std::vector<int64_t> vec(const int64_t* p, int n) {
  return p == nullptr ? std::vector<int64_t>() : std::vector<int64_t>(p, p + n);
}

occl_status_t finish_init(occl_comm_t* comm, const bootstrap::RendezvousSpec& spec, const occl_config_t* config) {
  CommConfig cfg = resolve_config(config, CommConfig::from_environment());
  auto c = Communicator::create(spec, cfg);
  *comm = new occl_comm{std::move(c)};
  return OCCL_SUCCESS;
}

}  // namespace
}  // namespace omniccl::capi

using namespace omniccl;
using namespace omniccl::capi;

OCCL_API occl_status_t occl_get_version(int* version) {
  return guard("occl_get_version", [&] {
    check_arg(version != nullptr, "version is NULL");
    *version = OCCL_VERSION_CODE;
  });
}

OCCL_API occl_status_t occl_init_check(int abi_version, int header_version) {
  return guard("occl_init_check", [&] {
    if (abi_version != OCCL_ABI_VERSION || header_version > OCCL_VERSION_CODE) {
      fail(Status::kVersion, "the program was compiled against omniccl.h version ", header_version, " (ABI ",
           abi_version, ") but the library is version ", OCCL_VERSION_CODE, " (ABI ", OCCL_ABI_VERSION,
           "); rebuild the program or install a matching libomniccl");
    }
  });
}

OCCL_API occl_status_t occl_get_unique_id(occl_unique_id_t* id) {
  return guard("occl_get_unique_id", [&] {
    check_arg(id != nullptr, "id is NULL");
    bootstrap::create_unique_id(id->internal);
  });
}

OCCL_API occl_status_t occl_comm_init(occl_comm_t* comm, const char* init_method, int rank, int world_size,
                                      const occl_config_t* config) {
  return guard("occl_comm_init", [&] {
    check_arg(comm != nullptr, "comm is NULL");
    *comm = nullptr;
    check_arg(init_method != nullptr, "init_method is NULL (use \"env://\", \"tcp://host:port\" or \"file:///path\")");
    finish_init(comm, bootstrap::parse_init_method(init_method, rank, world_size), config);
  });
}

OCCL_API occl_status_t occl_comm_init_unique_id(occl_comm_t* comm, int world_size, const occl_unique_id_t* id,
                                                int rank, const occl_config_t* config) {
  return guard("occl_comm_init_unique_id", [&] {
    check_arg(comm != nullptr, "comm is NULL");
    *comm = nullptr;
    check_arg(id != nullptr, "id is NULL");
    check_arg(world_size >= 1, "world_size must be at least 1, got ", world_size);
    check_arg(rank >= 0 && rank < world_size, "rank ", rank, " is outside world size ", world_size);
    finish_init(comm, bootstrap::decode_unique_id(id->internal, rank, world_size), config);
  });
}

OCCL_API occl_status_t occl_comm_split(occl_comm_t comm, int color, int key, const occl_config_t* config,
                                       occl_comm_t* newcomm) {
  return guard("occl_comm_split", [&] {
    check_arg(newcomm != nullptr, "newcomm is NULL");
    *newcomm = nullptr;
    auto keep = comm_of(comm);
    Communicator& c = *keep;
    check_arg(color >= 0 || color == OCCL_SPLIT_NOCOLOR, "color ", color,
              " is negative (use OCCL_SPLIT_NOCOLOR to take no part)");
    CommConfig cfg = resolve_config(config, c.config());
    auto child = c.split(color, key, &cfg);
    if (child) *newcomm = new occl_comm{std::move(child)};
  });
}

OCCL_API occl_status_t occl_comm_destroy(occl_comm_t comm) {
  return guard("occl_comm_destroy", [&] {
    if (comm == nullptr) return;
    std::unique_ptr<occl_comm> owned(comm);
    owned->impl->abort();
  });
}

OCCL_API occl_status_t occl_comm_abort(occl_comm_t comm) {
  return guard("occl_comm_abort", [&] {
    if (comm == nullptr) return;
    std::unique_ptr<occl_comm> owned(comm);
    owned->impl->abort(/*as_failure=*/true);
  });
}

OCCL_API occl_status_t occl_comm_rank(occl_comm_t comm, int* rank) {
  return guard("occl_comm_rank", [&] {
    check_arg(rank != nullptr, "rank is NULL");
    *rank = comm_of(comm)->rank();
  });
}

OCCL_API occl_status_t occl_comm_size(occl_comm_t comm, int* size) {
  return guard("occl_comm_size", [&] {
    check_arg(size != nullptr, "size is NULL");
    *size = comm_of(comm)->size();
  });
}

OCCL_API occl_status_t occl_comm_transport(occl_comm_t comm, const char** name) {
  return guard("occl_comm_transport", [&] {
    check_arg(name != nullptr, "name is NULL");
    *name = comm_of(comm)->transport_name();
  });
}

OCCL_API occl_status_t occl_comm_set_timeout(occl_comm_t comm, int64_t timeout_ms) {
  return guard("occl_comm_set_timeout", [&] { comm_of(comm)->set_timeout(timeout_ms); });
}

OCCL_API occl_status_t occl_red_op_create_premul_sum(occl_comm_t comm, double scalar, occl_red_op_t* op) {
  return guard("occl_red_op_create_premul_sum", [&] {
    check_arg(op != nullptr, "op is NULL");
    *op = static_cast<occl_red_op_t>(comm_of(comm)->create_premul_sum(scalar));
  });
}

OCCL_API occl_status_t occl_red_op_destroy(occl_comm_t comm, occl_red_op_t op) {
  return guard("occl_red_op_destroy", [&] { comm_of(comm)->destroy_reduce_op(op); });
}

OCCL_API occl_status_t occl_send(const DLTensor* tensor, int peer, occl_comm_t comm, occl_work_t* work) {
  return op("occl_send", work, [&](bool async) {
    return coll::send(*comm_of(comm), to_view(tensor, "tensor"), peer, async);
  });
}

OCCL_API occl_status_t occl_recv(const DLTensor* tensor, int peer, occl_comm_t comm, occl_work_t* work) {
  return op("occl_recv", work, [&](bool async) {
    return coll::recv(*comm_of(comm), to_view(tensor, "tensor"), peer, async);
  });
}

OCCL_API occl_status_t occl_broadcast(const DLTensor* tensor, int root, occl_comm_t comm, occl_work_t* work) {
  return op("occl_broadcast", work, [&](bool async) {
    return coll::broadcast(*comm_of(comm), to_view(tensor, "tensor"), root, async);
  });
}

OCCL_API occl_status_t occl_scatter(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                                    occl_work_t* work) {
  return op("occl_scatter", work, [&](bool async) {
    auto keep = comm_of(comm);
    Communicator& c = *keep;
    auto send = c.rank() == root ? to_optional_view(sendbuf, "sendbuf") : std::nullopt;
    return coll::scatter(c, send, to_view(recvbuf, "recvbuf"), root, async);
  });
}

OCCL_API occl_status_t occl_gather(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                                   occl_work_t* work) {
  return op("occl_gather", work, [&](bool async) {
    auto keep = comm_of(comm);
    Communicator& c = *keep;
    auto recv = c.rank() == root ? to_optional_view(recvbuf, "recvbuf") : std::nullopt;
    return coll::gather(c, to_view(sendbuf, "sendbuf"), recv, root, async);
  });
}

OCCL_API occl_status_t occl_reduce(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop, int root,
                                   occl_comm_t comm, occl_work_t* work) {
  return op("occl_reduce", work, [&](bool async) {
    auto keep = comm_of(comm);
    Communicator& c = *keep;
    auto recv = c.rank() == root ? to_optional_view(recvbuf, "recvbuf") : std::nullopt;
    return coll::reduce(c, to_view(sendbuf, "sendbuf"), recv, redop, root, async);
  });
}

OCCL_API occl_status_t occl_all_reduce(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                       occl_comm_t comm, occl_work_t* work) {
  return op("occl_all_reduce", work, [&](bool async) {
    return coll::all_reduce(*comm_of(comm), to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), redop, async);
  });
}

OCCL_API occl_status_t occl_all_gather(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                       occl_work_t* work) {
  return op("occl_all_gather", work, [&](bool async) {
    return coll::all_gather(*comm_of(comm), to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), async);
  });
}

OCCL_API occl_status_t occl_reduce_scatter(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                           occl_comm_t comm, occl_work_t* work) {
  return op("occl_reduce_scatter", work, [&](bool async) {
    return coll::reduce_scatter(*comm_of(comm), to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), redop,
                                async);
  });
}

OCCL_API occl_status_t occl_all_to_all(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                       occl_work_t* work) {
  return op("occl_all_to_all", work, [&](bool async) {
    return coll::all_to_all(*comm_of(comm), to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), async);
  });
}

OCCL_API occl_status_t occl_barrier(occl_comm_t comm, occl_work_t* work) {
  return op("occl_barrier", work, [&](bool async) { return coll::barrier(*comm_of(comm), async); });
}

OCCL_API occl_status_t occl_all_gatherv(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                                        const int64_t* recv_displs, occl_comm_t comm, occl_work_t* work) {
  return op("occl_all_gatherv", work, [&](bool async) {
    auto keep = comm_of(comm);
    Communicator& c = *keep;
    check_arg(recv_counts != nullptr, "recv_counts is NULL");
    return coll::all_gatherv(c, to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), vec(recv_counts, c.size()),
                             vec(recv_displs, c.size()), async);
  });
}

OCCL_API occl_status_t occl_all_to_allv(const DLTensor* sendbuf, const int64_t* send_counts,
                                        const int64_t* send_displs, const DLTensor* recvbuf,
                                        const int64_t* recv_counts, const int64_t* recv_displs, occl_comm_t comm,
                                        occl_work_t* work) {
  return op("occl_all_to_allv", work, [&](bool async) {
    auto keep = comm_of(comm);
    Communicator& c = *keep;
    check_arg(send_counts != nullptr, "send_counts is NULL");
    check_arg(recv_counts != nullptr, "recv_counts is NULL");
    int n = c.size();
    return coll::all_to_allv(c, to_view(sendbuf, "sendbuf"), vec(send_counts, n), vec(send_displs, n),
                             to_view(recvbuf, "recvbuf"), vec(recv_counts, n), vec(recv_displs, n), async);
  });
}

OCCL_API occl_status_t occl_gatherv(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                                    const int64_t* recv_displs, int root, occl_comm_t comm, occl_work_t* work) {
  return op("occl_gatherv", work, [&](bool async) {
    auto keep = comm_of(comm);
    Communicator& c = *keep;
    bool is_root = c.rank() == root;
    check_arg(!is_root || recv_counts != nullptr, "recv_counts is NULL on the root");
    return coll::gatherv(c, to_view(sendbuf, "sendbuf"), is_root ? to_optional_view(recvbuf, "recvbuf") : std::nullopt,
                         is_root ? vec(recv_counts, c.size()) : std::vector<int64_t>(),
                         is_root ? vec(recv_displs, c.size()) : std::vector<int64_t>(), root, async);
  });
}

OCCL_API occl_status_t occl_scatterv(const DLTensor* sendbuf, const int64_t* send_counts, const int64_t* send_displs,
                                     const DLTensor* recvbuf, int root, occl_comm_t comm, occl_work_t* work) {
  return op("occl_scatterv", work, [&](bool async) {
    auto keep = comm_of(comm);
    Communicator& c = *keep;
    bool is_root = c.rank() == root;
    check_arg(!is_root || send_counts != nullptr, "send_counts is NULL on the root");
    return coll::scatterv(c, is_root ? to_optional_view(sendbuf, "sendbuf") : std::nullopt,
                          is_root ? vec(send_counts, c.size()) : std::vector<int64_t>(),
                          is_root ? vec(send_displs, c.size()) : std::vector<int64_t>(), to_view(recvbuf, "recvbuf"),
                          root, async);
  });
}

OCCL_API occl_status_t occl_work_wait(occl_work_t work) {
  if (work == nullptr || !work->impl) return set_error(OCCL_ERR_INVALID_ARGUMENT, "occl_work_wait: work is NULL");
  Status st = work->impl->wait();
  if (st != Status::kSuccess) return set_error(static_cast<occl_status_t>(st), work->impl->message());
  return OCCL_SUCCESS;
}

OCCL_API occl_status_t occl_work_test(occl_work_t work) {
  if (work == nullptr || !work->impl) return set_error(OCCL_ERR_INVALID_ARGUMENT, "occl_work_test: work is NULL");
  if (!work->impl->done()) return OCCL_ERR_IN_PROGRESS;
  Status st = work->impl->status();
  if (st != Status::kSuccess) return set_error(static_cast<occl_status_t>(st), work->impl->message());
  return OCCL_SUCCESS;
}

OCCL_API occl_status_t occl_work_wait_for(occl_work_t work, int64_t timeout_ms) {
  if (work == nullptr || !work->impl) return set_error(OCCL_ERR_INVALID_ARGUMENT, "occl_work_wait_for: work is NULL");
  if (timeout_ms < 0) {
    return set_error(OCCL_ERR_INVALID_ARGUMENT, "occl_work_wait_for: timeout_ms is negative");
  }
  if (!work->impl->wait_for(timeout_ms)) return OCCL_ERR_IN_PROGRESS;
  Status st = work->impl->status();
  if (st != Status::kSuccess) return set_error(static_cast<occl_status_t>(st), work->impl->message());
  return OCCL_SUCCESS;
}

OCCL_API occl_status_t occl_work_free(occl_work_t work) {
  delete work;
  return OCCL_SUCCESS;
}
