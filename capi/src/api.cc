// extern "C" shims: arguments in, TensorView/Communicator calls, status out.
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "collective/collectives.h"
#include "communicator/communicator.h"
#include "communicator/pending.h"
#include "dlpack.h"
#include "omniccl/omniccl.h"
#include "status.h"

#define OCCL_API extern "C" __attribute__((visibility("default")))

/// A communicator handle. Created ready (impl set), or, with
/// occl_config_t.blocking = 0, pending: the first poll that finds the
/// creation finished moves its result into impl and publishes `ready`.
struct occl_comm {
  explicit occl_comm(std::shared_ptr<omniccl::Communicator> c) : impl(std::move(c)), ready(true) {}
  explicit occl_comm(std::unique_ptr<omniccl::PendingComm> p) : pending(std::move(p)) {}

  std::shared_ptr<omniccl::Communicator> impl;  ///< read without mu once ready
  std::atomic<bool> ready{false};
  std::mutex mu;  ///< guards pending and the failure below
  std::unique_ptr<omniccl::PendingComm> pending;
  omniccl::Status failed = omniccl::Status::kSuccess;  ///< creation failed with this
  std::string failed_message;
};

struct occl_work {
  std::shared_ptr<omniccl::Work> impl;
};

namespace omniccl::capi {
namespace {

/// The handle's communicator (the handle holds it), finishing a
/// non-blocking creation that has completed; fails while it is still
/// being created, or when it could not be.
Communicator& comm_ref(occl_comm_t comm) {
  check_arg(comm != nullptr, "comm is NULL");
  if (comm->ready.load(std::memory_order_acquire)) return *comm->impl;
  std::lock_guard<std::mutex> lock(comm->mu);
  if (comm->pending) {
    std::shared_ptr<Communicator> made;
    std::string msg;
    Status st = comm->pending->poll(made, msg);
    if (st == Status::kInProgress) {
      fail(Status::kInProgress,
           "the communicator is still being created (poll occl_comm_get_async_error until it "
           "reports OCCL_SUCCESS)");
    }
    comm->pending.reset();
    if (st == Status::kSuccess) {
      comm->impl = std::move(made);
      comm->ready.store(true, std::memory_order_release);
      return *comm->impl;
    }
    comm->failed = st;
    comm->failed_message = msg;
  }
  fail(Status::kCommFailed, "the communicator could not be created (", status_name(comm->failed),
       "): ", comm->failed_message);
}

/// A reference that keeps the communicator alive for the whole call, so an
/// occl_comm_abort on another thread (which frees the handle) cannot free it
/// under a call that is still returning (operations use Calling instead).
std::shared_ptr<Communicator> comm_of(occl_comm_t comm) {
  comm_ref(comm);
  return comm->impl;
}

/// The communicator of a handle for one operation's call, this thread its
/// issuer until the call returns (Communicator::IssueGuard: one atomic
/// compare-and-swap, none when nested or when this thread keeps issuing,
/// issuer.h). abort() waits for the issuer to
/// leave, so the call needs no reference of its own: comm_of's two atomic
/// count updates, full barriers both, each waited for this rank's last
/// writes into a peer's ring to complete (a fifth of an 8-byte scatter's
/// call on its root).
class Calling {
 public:
  explicit Calling(occl_comm_t comm) : c_(comm_ref(comm)), issuing_(c_) {}
  Communicator& operator*() const { return c_; }

 private:
  Communicator& c_;
  Communicator::IssueGuard issuing_;
};

/// A collective's call on comm, this thread its issuer (Calling): an
/// argument error found before the operation was issued is also told to the
/// peers, whose matching call would otherwise wait for this rank
/// (Communicator::reject_collective). `fn_name`: the C function.
template <typename Fn>
std::shared_ptr<Work> collective(occl_comm_t comm, const char* fn_name, Fn&& fn) {
  Calling on(comm);
  try {
    return fn(*on);
  } catch (const Error& e) {
    if (e.status() != Status::kInvalidArgument && e.status() != Status::kUnsupported) throw;
    std::string call = fn_name;
    if (call.starts_with("occl_")) call.erase(0, 5);
    if (call.ends_with("_ex")) call.erase(call.size() - 3);
    (*on).reject_collective(call.c_str(), e.what());
    throw;
  }
}

/// Frees a handle: a ready communicator is aborted (local, bounded; with
/// as_failure its peers hear that this rank failed rather than that it left),
/// a pending creation cancelled.
void free_comm(occl_comm_t comm, bool as_failure) {
  std::unique_ptr<occl_comm> owned(comm);
  std::unique_ptr<PendingComm> pending;
  {
    std::lock_guard<std::mutex> lock(owned->mu);
    pending = std::move(owned->pending);
  }
  if (pending) pending->cancel();
  if (owned->impl) owned->impl->abort(as_failure);
}

/// Reads a caller's occl_options_t (NULL = defaults), only the fields its
/// version has.
CallOptions call_options(const occl_options_t* o, bool async) {
  CallOptions call;
  call.async = async;
  if (o == nullptr) return call;
  check_arg(o->magic == OCCL_OPTIONS_MAGIC, "options: magic is 0x", std::hex, o->magic, std::dec,
            "; initialise occl_options_t with OCCL_OPTIONS_INIT");
  if (o->version < 1 || o->size < offsetof(occl_options_t, stream)) {
    fail(Status::kVersion, "options: version ", o->version, " / size ", o->size, " is not a valid occl_options_t");
  }
  occl_options_t c = OCCL_OPTIONS_INIT;
  std::memcpy(&c, o, std::min(o->size, sizeof c));
  if (c.timeout_ms != OCCL_CONFIG_UNDEF_INT64) {
    check_arg(c.timeout_ms > 0, "options.timeout_ms must be positive (or OCCL_CONFIG_UNDEF_INT64), got ", c.timeout_ms);
    call.timeout_ms = c.timeout_ms;
  }
  call.stream = c.stream;
  call.interrupt = InterruptHook{c.interrupt, c.interrupt_data};
  return call;
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
  check_arg(c.blocking == 0 || c.blocking == 1, "config.blocking must be 0 or 1, got ", c.blocking);
  out.blocking = c.blocking == 1;
  out.validate();
  return out;
}

void store_work(occl_work_t* work, const std::shared_ptr<Work>& w) {
  if (work != nullptr) *work = new occl_work{w};
}

/// Runs one operation: blocking when work == NULL, else stores a handle.
template <typename Fn>
occl_status_t op(const char* name, const occl_options_t* options, occl_work_t* work, Fn&& fn) {
  if (work != nullptr) *work = nullptr;
  return guard(name, [&] { store_work(work, fn(call_options(options, work != nullptr))); });
}

std::vector<int64_t> vec(const int64_t* p, int n) {
  return p == nullptr ? std::vector<int64_t>() : std::vector<int64_t>(p, p + n);
}

/// Creates the communicator, or starts creating it (blocking = 0); returns
/// whether it is still in progress.
bool finish_init(occl_comm_t* comm, const bootstrap::RendezvousSpec& spec, const occl_config_t* config) {
  CommConfig cfg = resolve_config(config, CommConfig::from_environment());
  if (!cfg.blocking) {
    cfg.validate();
    *comm = new occl_comm(PendingComm::init(spec, cfg));
    return true;
  }
  *comm = new occl_comm(Communicator::create(spec, cfg));
  return false;
}

/// OCCL_ERR_IN_PROGRESS (without touching the last error) when a
/// non-blocking creation was started, else the guard's status.
occl_status_t started(occl_status_t st, bool in_progress) {
  return st == OCCL_SUCCESS && in_progress ? OCCL_ERR_IN_PROGRESS : st;
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
  bool in_progress = false;
  occl_status_t st = guard("occl_comm_init", [&] {
    check_arg(comm != nullptr, "comm is NULL");
    *comm = nullptr;
    check_arg(init_method != nullptr, "init_method is NULL (use \"env://\", \"tcp://host:port\" or \"file:///path\")");
    in_progress = finish_init(comm, bootstrap::parse_init_method(init_method, rank, world_size), config);
  });
  return started(st, in_progress);
}

OCCL_API occl_status_t occl_comm_init_unique_id(occl_comm_t* comm, int world_size, const occl_unique_id_t* id, int rank,
                                                const occl_config_t* config) {
  bool in_progress = false;
  occl_status_t st = guard("occl_comm_init_unique_id", [&] {
    check_arg(comm != nullptr, "comm is NULL");
    *comm = nullptr;
    check_arg(id != nullptr, "id is NULL");
    check_arg(world_size >= 1, "world_size must be at least 1, got ", world_size);
    check_arg(rank >= 0 && rank < world_size, "rank ", rank, " is outside world size ", world_size);
    in_progress = finish_init(comm, bootstrap::decode_unique_id(id->internal, rank, world_size), config);
  });
  return started(st, in_progress);
}

OCCL_API occl_status_t occl_comm_split(occl_comm_t comm, int color, int key, const occl_config_t* config,
                                       occl_comm_t* newcomm) {
  bool in_progress = false;
  occl_status_t st = guard("occl_comm_split", [&] {
    check_arg(newcomm != nullptr, "newcomm is NULL");
    *newcomm = nullptr;
    auto keep = comm_of(comm);
    Communicator& c = *keep;
    check_arg(color >= 0 || color == OCCL_SPLIT_NOCOLOR, "color ", color,
              " is negative (use OCCL_SPLIT_NOCOLOR to take no part)");
    CommConfig cfg = resolve_config(config, c.config());
    if (!cfg.blocking && color == OCCL_SPLIT_NOCOLOR) {
      // A rank that takes no part knows its answer now; its part of the
      // split still runs on comm, in order (errors show on comm's async
      // error).
      Communicator* parent = &c;
      c.submit([parent, key, cfg](Engine&) { parent->split_in_op(OCCL_SPLIT_NOCOLOR, key, cfg, nullptr); }, true);
      return;
    }
    if (!cfg.blocking) {
      *newcomm = new occl_comm(PendingComm::split(c, color, key, cfg));
      in_progress = true;
      return;
    }
    auto child = c.split(color, key, &cfg);
    if (child) *newcomm = new occl_comm(std::move(child));
  });
  return started(st, in_progress);
}

OCCL_API occl_status_t occl_comm_destroy(occl_comm_t comm) {
  return guard("occl_comm_destroy", [&] {
    if (comm != nullptr) free_comm(comm, /*as_failure=*/false);
  });
}

OCCL_API occl_status_t occl_comm_abort(occl_comm_t comm) {
  return guard("occl_comm_abort", [&] {
    if (comm != nullptr) free_comm(comm, /*as_failure=*/true);
  });
}

OCCL_API occl_status_t occl_comm_get_async_error(occl_comm_t comm, occl_status_t* async_error) {
  return guard("occl_comm_get_async_error", [&] {
    check_arg(async_error != nullptr, "async_error is NULL");
    *async_error = OCCL_ERR_IN_PROGRESS;
    std::shared_ptr<Communicator> c;
    try {
      c = comm_of(comm);
    } catch (const Error& e) {
      if (comm == nullptr) throw;
      if (e.status() == Status::kInProgress) return;
      std::lock_guard<std::mutex> lock(comm->mu);  // creation failed: report its own status
      *async_error = static_cast<occl_status_t>(comm->failed);
      set_error(*async_error, str_cat("occl_comm_get_async_error: ", comm->failed_message));
      return;
    }
    std::string msg;
    Status st = c->async_error(msg);
    *async_error = static_cast<occl_status_t>(st);
    if (st != Status::kSuccess) set_error(*async_error, str_cat("occl_comm_get_async_error: ", msg));
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

static occl_status_t send_impl(const char* fn, const DLTensor* tensor, int peer, occl_comm_t comm,
                               const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work,
            [&](const CallOptions& call) { return coll::send(*Calling(comm), to_view(tensor, "tensor"), peer, call); });
}
OCCL_API occl_status_t occl_send(const DLTensor* tensor, int peer, occl_comm_t comm, occl_work_t* work) {
  return send_impl("occl_send", tensor, peer, comm, nullptr, work);
}
OCCL_API occl_status_t occl_send_ex(const DLTensor* tensor, int peer, occl_comm_t comm, const occl_options_t* options,
                                    occl_work_t* work) {
  return send_impl("occl_send_ex", tensor, peer, comm, options, work);
}

static occl_status_t recv_impl(const char* fn, const DLTensor* tensor, int peer, occl_comm_t comm,
                               const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work,
            [&](const CallOptions& call) { return coll::recv(*Calling(comm), to_view(tensor, "tensor"), peer, call); });
}
OCCL_API occl_status_t occl_recv(const DLTensor* tensor, int peer, occl_comm_t comm, occl_work_t* work) {
  return recv_impl("occl_recv", tensor, peer, comm, nullptr, work);
}
OCCL_API occl_status_t occl_recv_ex(const DLTensor* tensor, int peer, occl_comm_t comm, const occl_options_t* options,
                                    occl_work_t* work) {
  return recv_impl("occl_recv_ex", tensor, peer, comm, options, work);
}

namespace {
void fill_status(occl_recv_status_t* out, const RecvStatus& rs) {
  if (out == nullptr) return;
  out->source = rs.source;
  out->tag = rs.tag;
  out->bytes = static_cast<int64_t>(rs.bytes);
  out->count = static_cast<int64_t>(rs.bytes / std::max<uint64_t>(rs.elem_bytes, 1));
}
}  // namespace

OCCL_API occl_status_t occl_send_tagged(const DLTensor* tensor, int peer, int tag, occl_comm_t comm,
                                        const occl_options_t* options, occl_work_t* work) {
  return op("occl_send_tagged", options, work, [&](const CallOptions& call) {
    return coll::send_tagged(*Calling(comm), to_view(tensor, "tensor"), peer, tag, call);
  });
}

OCCL_API occl_status_t occl_ssend_tagged(const DLTensor* tensor, int peer, int tag, occl_comm_t comm,
                                         const occl_options_t* options, occl_work_t* work) {
  return op("occl_ssend_tagged", options, work, [&](const CallOptions& call) {
    return coll::ssend_tagged(*Calling(comm), to_view(tensor, "tensor"), peer, tag, call);
  });
}

OCCL_API occl_status_t occl_work_cancel(occl_work_t work, occl_comm_t comm, int* cancelled) {
  if (cancelled != nullptr) *cancelled = 0;
  return guard("occl_work_cancel", [&] {
    check_arg(work != nullptr && work->impl != nullptr, "work is NULL");
    std::shared_ptr<Communicator> c = comm_of(comm);
    const bool done = c->cancel(work->impl);
    if (cancelled != nullptr) *cancelled = done ? 1 : 0;
  });
}

OCCL_API occl_status_t occl_recv_tagged(const DLTensor* tensor, int source, int tag, occl_comm_t comm,
                                        const occl_options_t* options, occl_recv_status_t* status, occl_work_t* work) {
  RecvStatus rs;
  const bool blocking = work == nullptr;
  occl_status_t st = op("occl_recv_tagged", options, work, [&](const CallOptions& call) {
    return coll::recv_tagged(*Calling(comm), to_view(tensor, "tensor"), source, tag, call, &rs);
  });
  if (blocking) {
    fill_status(status, rs);
  }
  return st;
}

OCCL_API occl_status_t occl_work_recv_status(occl_work_t work, occl_recv_status_t* status) {
  return guard("occl_work_recv_status", [&] {
    check_arg(work != nullptr && work->impl != nullptr, "work is NULL");
    check_arg(status != nullptr, "status is NULL");
    if (!work->impl->done()) fail(Status::kInProgress, "the operation has not completed yet");
    fill_status(status, work->impl->recv_status());
  });
}

OCCL_API occl_status_t occl_sendrecv(const DLTensor* sendbuf, int dest, int sendtag, const DLTensor* recvbuf,
                                     int source, int recvtag, occl_comm_t comm, const occl_options_t* options,
                                     occl_recv_status_t* status) {
  RecvStatus rs;
  occl_status_t st = guard("occl_sendrecv", [&] {
    std::shared_ptr<Communicator> c = comm_of(comm);
    TensorView send = to_view(sendbuf, "sendbuf");
    TensorView recv = to_view(recvbuf, "recvbuf");
    CallOptions call = call_options(options, true);
    call.interrupt = {};
    coll::check_p2p_args(*c, dest, sendtag, true);
    coll::check_p2p_args(*c, source, recvtag, false);
    std::shared_ptr<Work> rw = coll::recv_tagged(*c, recv, source, recvtag, call, nullptr);
    std::shared_ptr<Work> sw;
    try {
      sw = coll::send_tagged(*c, send, dest, sendtag, call);
    } catch (...) {
      rw->wait();  // it writes into recvbuf: never return before it ends
      throw;
    }
    Status sst = sw->wait();
    Status rst = rw->wait();
    rs = rw->recv_status();
    if (rst != Status::kSuccess) throw Error(rst, str_cat("recv: ", rw->message()));
    if (sst != Status::kSuccess) throw Error(sst, str_cat("send: ", sw->message()));
  });
  fill_status(status, rs);
  return st;
}

OCCL_API occl_status_t occl_iprobe(int source, int tag, occl_comm_t comm, const occl_options_t* options, int* flag,
                                   occl_recv_status_t* status) {
  return guard("occl_iprobe", [&] {
    std::shared_ptr<Communicator> c = comm_of(comm);
    check_arg(flag != nullptr, "flag is NULL");
    std::optional<RecvStatus> rs = c->iprobe(source, tag, call_options(options, false));
    *flag = rs ? 1 : 0;
    if (rs) fill_status(status, *rs);
  });
}

static_assert(OCCL_MESSAGE_NULL == omniccl::kMessageNull && OCCL_MESSAGE_NO_PROC == omniccl::kMessageNoProc,
              "message numbers as the matcher's");

OCCL_API occl_status_t occl_mprobe(int source, int tag, occl_comm_t comm, const occl_options_t* options,
                                   occl_message_t* message, occl_recv_status_t* status) {
  if (message != nullptr) *message = OCCL_MESSAGE_NULL;
  return guard("occl_mprobe", [&] {
    std::shared_ptr<Communicator> c = comm_of(comm);
    check_arg(message != nullptr, "message is NULL");
    RecvStatus rs = c->mprobe(source, tag, call_options(options, false));
    *message = rs.message;
    fill_status(status, rs);
  });
}

OCCL_API occl_status_t occl_improbe(int source, int tag, occl_comm_t comm, const occl_options_t* options, int* flag,
                                    occl_message_t* message, occl_recv_status_t* status) {
  if (message != nullptr) *message = OCCL_MESSAGE_NULL;
  return guard("occl_improbe", [&] {
    std::shared_ptr<Communicator> c = comm_of(comm);
    check_arg(flag != nullptr, "flag is NULL");
    check_arg(message != nullptr, "message is NULL");
    std::optional<RecvStatus> rs = c->improbe(source, tag, call_options(options, false));
    *flag = rs ? 1 : 0;
    if (!rs) return;
    *message = rs->message;
    fill_status(status, *rs);
  });
}

OCCL_API occl_status_t occl_mrecv(const DLTensor* tensor, occl_message_t* message, occl_comm_t comm,
                                  const occl_options_t* options, occl_recv_status_t* status, occl_work_t* work) {
  RecvStatus rs;
  const bool blocking = work == nullptr;
  occl_status_t st = op("occl_mrecv", options, work, [&](const CallOptions& call) {
    std::shared_ptr<Communicator> c = comm_of(comm);
    check_arg(message != nullptr, "message is NULL");
    TensorView t = to_view(tensor, "tensor");
    return coll::mrecv(*c, *message, t, call, &rs);  // *message: OCCL_MESSAGE_NULL once taken
  });
  if (blocking) fill_status(status, rs);
  return st;
}

OCCL_API occl_status_t occl_comm_window_register(occl_comm_t comm, void* buffer, size_t bytes, occl_window_t* window) {
  return guard("occl_comm_window_register", [&] {
    if (window != nullptr) *window = OCCL_WINDOW_NULL;
    Calling on(comm);
    // A bad argument still takes part, so that the peers fail with it
    // rather than wait for this rank.
    const uint64_t got = (*on).register_window(buffer, bytes, window == nullptr ? "window is NULL" : "");
    *window = got;
  });
}

OCCL_API occl_status_t occl_comm_window_deregister(occl_comm_t comm, occl_window_t* window) {
  return guard("occl_comm_window_deregister", [&] {
    Calling on(comm);
    const char* bad = window == nullptr             ? "window is NULL"
                      : *window == OCCL_WINDOW_NULL ? "*window is OCCL_WINDOW_NULL"
                                                    : "";
    (*on).deregister_window(window != nullptr ? *window : OCCL_WINDOW_NULL, bad);
    *window = OCCL_WINDOW_NULL;
  });
}

OCCL_API occl_status_t occl_probe(int source, int tag, occl_comm_t comm, const occl_options_t* options,
                                  occl_recv_status_t* status) {
  return guard("occl_probe", [&] {
    std::shared_ptr<Communicator> c = comm_of(comm);
    fill_status(status, c->probe(source, tag, call_options(options, false)));
  });
}

static occl_status_t broadcast_impl(const char* fn, const DLTensor* tensor, int root, occl_comm_t comm,
                                    const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn,
                      [&](Communicator& c) { return coll::broadcast(c, to_view(tensor, "tensor"), root, call); });
  });
}
OCCL_API occl_status_t occl_broadcast(const DLTensor* tensor, int root, occl_comm_t comm, occl_work_t* work) {
  return broadcast_impl("occl_broadcast", tensor, root, comm, nullptr, work);
}
OCCL_API occl_status_t occl_broadcast_ex(const DLTensor* tensor, int root, occl_comm_t comm,
                                         const occl_options_t* options, occl_work_t* work) {
  return broadcast_impl("occl_broadcast_ex", tensor, root, comm, options, work);
}

static occl_status_t scatter_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf, int root,
                                  occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      auto send = c.rank() == root ? to_optional_view(sendbuf, "sendbuf") : std::nullopt;
      return coll::scatter(c, send, to_view(recvbuf, "recvbuf"), root, call);
    });
  });
}
OCCL_API occl_status_t occl_scatter(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                                    occl_work_t* work) {
  return scatter_impl("occl_scatter", sendbuf, recvbuf, root, comm, nullptr, work);
}
OCCL_API occl_status_t occl_scatter_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                                       const occl_options_t* options, occl_work_t* work) {
  return scatter_impl("occl_scatter_ex", sendbuf, recvbuf, root, comm, options, work);
}

static occl_status_t gather_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf, int root,
                                 occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      auto recv = c.rank() == root ? to_optional_view(recvbuf, "recvbuf") : std::nullopt;
      return coll::gather(c, to_view(sendbuf, "sendbuf"), recv, root, call);
    });
  });
}
OCCL_API occl_status_t occl_gather(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                                   occl_work_t* work) {
  return gather_impl("occl_gather", sendbuf, recvbuf, root, comm, nullptr, work);
}
OCCL_API occl_status_t occl_gather_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                                      const occl_options_t* options, occl_work_t* work) {
  return gather_impl("occl_gather_ex", sendbuf, recvbuf, root, comm, options, work);
}

static occl_status_t reduce_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                 int root, occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      auto recv = c.rank() == root ? to_optional_view(recvbuf, "recvbuf") : std::nullopt;
      return coll::reduce(c, to_view(sendbuf, "sendbuf"), recv, redop, root, call);
    });
  });
}
OCCL_API occl_status_t occl_reduce(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop, int root,
                                   occl_comm_t comm, occl_work_t* work) {
  return reduce_impl("occl_reduce", sendbuf, recvbuf, redop, root, comm, nullptr, work);
}
OCCL_API occl_status_t occl_reduce_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop, int root,
                                      occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return reduce_impl("occl_reduce_ex", sendbuf, recvbuf, redop, root, comm, options, work);
}

// The core takes an occl_red_op_t value as the RedOp of the same number
// (collective/common.h, resolve_op): the two enums must agree.
static_assert(int(OCCL_SUM) == int(RedOp::kSum) && int(OCCL_PROD) == int(RedOp::kProd) &&
                  int(OCCL_MIN) == int(RedOp::kMin) && int(OCCL_MAX) == int(RedOp::kMax) &&
                  int(OCCL_AVG) == int(RedOp::kAvg) && int(OCCL_BAND) == int(RedOp::kBAnd) &&
                  int(OCCL_BOR) == int(RedOp::kBOr) && int(OCCL_BXOR) == int(RedOp::kBXor) &&
                  int(OCCL_PREMUL_SUM) == int(RedOp::kPreMulSum) && int(OCCL_LAND) == int(RedOp::kLAnd) &&
                  int(OCCL_LOR) == int(RedOp::kLOr) && int(OCCL_LXOR) == int(RedOp::kLXor) &&
                  int(OCCL_MAXLOC) == int(RedOp::kMaxLoc) && int(OCCL_MINLOC) == int(RedOp::kMinLoc) &&
                  kernels::kNumRedOps <= OCCL_RED_OP_CUSTOM_BASE,
              "occl_red_op_t values as RedOp's");

static occl_status_t all_reduce_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf,
                                     occl_red_op_t redop, occl_comm_t comm, const occl_options_t* options,
                                     occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      return coll::all_reduce(c, to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), redop, call);
    });
  });
}
OCCL_API occl_status_t occl_all_reduce(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                       occl_comm_t comm, occl_work_t* work) {
  return all_reduce_impl("occl_all_reduce", sendbuf, recvbuf, redop, comm, nullptr, work);
}
OCCL_API occl_status_t occl_all_reduce_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                          occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return all_reduce_impl("occl_all_reduce_ex", sendbuf, recvbuf, redop, comm, options, work);
}

static occl_status_t scan_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                               occl_comm_t comm, const occl_options_t* options, occl_work_t* work, bool exclusive) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      const TensorView send = to_view(sendbuf, "sendbuf"), recv = to_view(recvbuf, "recvbuf");
      return exclusive ? coll::exscan(c, send, recv, redop, call) : coll::scan(c, send, recv, redop, call);
    });
  });
}
OCCL_API occl_status_t occl_scan(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                 occl_comm_t comm, occl_work_t* work) {
  return scan_impl("occl_scan", sendbuf, recvbuf, redop, comm, nullptr, work, false);
}
OCCL_API occl_status_t occl_scan_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                    occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return scan_impl("occl_scan_ex", sendbuf, recvbuf, redop, comm, options, work, false);
}
OCCL_API occl_status_t occl_exscan(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                   occl_comm_t comm, occl_work_t* work) {
  return scan_impl("occl_exscan", sendbuf, recvbuf, redop, comm, nullptr, work, true);
}
OCCL_API occl_status_t occl_exscan_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                      occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return scan_impl("occl_exscan_ex", sendbuf, recvbuf, redop, comm, options, work, true);
}

static occl_status_t all_gather_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                     const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      return coll::all_gather(c, to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), call);
    });
  });
}
OCCL_API occl_status_t occl_all_gather(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                       occl_work_t* work) {
  return all_gather_impl("occl_all_gather", sendbuf, recvbuf, comm, nullptr, work);
}
OCCL_API occl_status_t occl_all_gather_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                          const occl_options_t* options, occl_work_t* work) {
  return all_gather_impl("occl_all_gather_ex", sendbuf, recvbuf, comm, options, work);
}

static occl_status_t reduce_scatter_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf,
                                         occl_red_op_t redop, occl_comm_t comm, const occl_options_t* options,
                                         occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      return coll::reduce_scatter(c, to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), redop, call);
    });
  });
}
OCCL_API occl_status_t occl_reduce_scatter(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                           occl_comm_t comm, occl_work_t* work) {
  return reduce_scatter_impl("occl_reduce_scatter", sendbuf, recvbuf, redop, comm, nullptr, work);
}
OCCL_API occl_status_t occl_reduce_scatter_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t redop,
                                              occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return reduce_scatter_impl("occl_reduce_scatter_ex", sendbuf, recvbuf, redop, comm, options, work);
}

static occl_status_t all_to_all_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                     const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      return coll::all_to_all(c, to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), call);
    });
  });
}
OCCL_API occl_status_t occl_all_to_all(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                       occl_work_t* work) {
  return all_to_all_impl("occl_all_to_all", sendbuf, recvbuf, comm, nullptr, work);
}
OCCL_API occl_status_t occl_all_to_all_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                          const occl_options_t* options, occl_work_t* work) {
  return all_to_all_impl("occl_all_to_all_ex", sendbuf, recvbuf, comm, options, work);
}

static occl_status_t barrier_impl(const char* fn, occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) { return coll::barrier(c, call); });
  });
}
OCCL_API occl_status_t occl_barrier(occl_comm_t comm, occl_work_t* work) {
  return barrier_impl("occl_barrier", comm, nullptr, work);
}
OCCL_API occl_status_t occl_barrier_ex(occl_comm_t comm, const occl_options_t* options, occl_work_t* work) {
  return barrier_impl("occl_barrier_ex", comm, options, work);
}

static occl_status_t all_gatherv_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf,
                                      const int64_t* recv_counts, const int64_t* recv_displs, occl_comm_t comm,
                                      const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      check_arg(recv_counts != nullptr, "recv_counts is NULL");
      return coll::all_gatherv(c, to_view(sendbuf, "sendbuf"), to_view(recvbuf, "recvbuf"), vec(recv_counts, c.size()),
                               vec(recv_displs, c.size()), call);
    });
  });
}
OCCL_API occl_status_t occl_all_gatherv(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                                        const int64_t* recv_displs, occl_comm_t comm, occl_work_t* work) {
  return all_gatherv_impl("occl_all_gatherv", sendbuf, recvbuf, recv_counts, recv_displs, comm, nullptr, work);
}
OCCL_API occl_status_t occl_all_gatherv_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                                           const int64_t* recv_displs, occl_comm_t comm, const occl_options_t* options,
                                           occl_work_t* work) {
  return all_gatherv_impl("occl_all_gatherv_ex", sendbuf, recvbuf, recv_counts, recv_displs, comm, options, work);
}

static occl_status_t all_to_allv_impl(const char* fn, const DLTensor* sendbuf, const int64_t* send_counts,
                                      const int64_t* send_displs, const DLTensor* recvbuf, const int64_t* recv_counts,
                                      const int64_t* recv_displs, occl_comm_t comm, const occl_options_t* options,
                                      occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      check_arg(send_counts != nullptr, "send_counts is NULL");
      check_arg(recv_counts != nullptr, "recv_counts is NULL");
      int n = c.size();
      return coll::all_to_allv(c, to_view(sendbuf, "sendbuf"), vec(send_counts, n), vec(send_displs, n),
                               to_view(recvbuf, "recvbuf"), vec(recv_counts, n), vec(recv_displs, n), call);
    });
  });
}
OCCL_API occl_status_t occl_all_to_allv(const DLTensor* sendbuf, const int64_t* send_counts, const int64_t* send_displs,
                                        const DLTensor* recvbuf, const int64_t* recv_counts, const int64_t* recv_displs,
                                        occl_comm_t comm, occl_work_t* work) {
  return all_to_allv_impl("occl_all_to_allv", sendbuf, send_counts, send_displs, recvbuf, recv_counts, recv_displs,
                          comm, nullptr, work);
}
OCCL_API occl_status_t occl_all_to_allv_ex(const DLTensor* sendbuf, const int64_t* send_counts,
                                           const int64_t* send_displs, const DLTensor* recvbuf,
                                           const int64_t* recv_counts, const int64_t* recv_displs, occl_comm_t comm,
                                           const occl_options_t* options, occl_work_t* work) {
  return all_to_allv_impl("occl_all_to_allv_ex", sendbuf, send_counts, send_displs, recvbuf, recv_counts, recv_displs,
                          comm, options, work);
}

static occl_status_t gatherv_impl(const char* fn, const DLTensor* sendbuf, const DLTensor* recvbuf,
                                  const int64_t* recv_counts, const int64_t* recv_displs, int root, occl_comm_t comm,
                                  const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      bool is_root = c.rank() == root;
      check_arg(!is_root || recv_counts != nullptr, "recv_counts is NULL on the root");
      return coll::gatherv(c, to_view(sendbuf, "sendbuf"),
                           is_root ? to_optional_view(recvbuf, "recvbuf") : std::nullopt,
                           is_root ? vec(recv_counts, c.size()) : std::vector<int64_t>(),
                           is_root ? vec(recv_displs, c.size()) : std::vector<int64_t>(), root, call);
    });
  });
}
OCCL_API occl_status_t occl_gatherv(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                                    const int64_t* recv_displs, int root, occl_comm_t comm, occl_work_t* work) {
  return gatherv_impl("occl_gatherv", sendbuf, recvbuf, recv_counts, recv_displs, root, comm, nullptr, work);
}
OCCL_API occl_status_t occl_gatherv_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                                       const int64_t* recv_displs, int root, occl_comm_t comm,
                                       const occl_options_t* options, occl_work_t* work) {
  return gatherv_impl("occl_gatherv_ex", sendbuf, recvbuf, recv_counts, recv_displs, root, comm, options, work);
}

static occl_status_t scatterv_impl(const char* fn, const DLTensor* sendbuf, const int64_t* send_counts,
                                   const int64_t* send_displs, const DLTensor* recvbuf, int root, occl_comm_t comm,
                                   const occl_options_t* options, occl_work_t* work) {
  return op(fn, options, work, [&](const CallOptions& call) {
    return collective(comm, fn, [&](Communicator& c) {
      bool is_root = c.rank() == root;
      check_arg(!is_root || send_counts != nullptr, "send_counts is NULL on the root");
      return coll::scatterv(c, is_root ? to_optional_view(sendbuf, "sendbuf") : std::nullopt,
                            is_root ? vec(send_counts, c.size()) : std::vector<int64_t>(),
                            is_root ? vec(send_displs, c.size()) : std::vector<int64_t>(), to_view(recvbuf, "recvbuf"),
                            root, call);
    });
  });
}
OCCL_API occl_status_t occl_scatterv(const DLTensor* sendbuf, const int64_t* send_counts, const int64_t* send_displs,
                                     const DLTensor* recvbuf, int root, occl_comm_t comm, occl_work_t* work) {
  return scatterv_impl("occl_scatterv", sendbuf, send_counts, send_displs, recvbuf, root, comm, nullptr, work);
}
OCCL_API occl_status_t occl_scatterv_ex(const DLTensor* sendbuf, const int64_t* send_counts, const int64_t* send_displs,
                                        const DLTensor* recvbuf, int root, occl_comm_t comm,
                                        const occl_options_t* options, occl_work_t* work) {
  return scatterv_impl("occl_scatterv_ex", sendbuf, send_counts, send_displs, recvbuf, root, comm, options, work);
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
