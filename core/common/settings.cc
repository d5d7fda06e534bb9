#include "common/settings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/status.h"

namespace omniccl {

namespace {

constexpr SettingInfo kSettings[] = {
    {"OMNICCL_TIMEOUT", "600s", "Deadline of every blocking call (seconds, or with a unit: 500ms, 30s, 10m)."},
    {"OMNICCL_TRANSPORT", "auto", "auto (shared memory between ranks on one host, TCP otherwise), shm, or tcp."},
    {"OMNICCL_ALGO", "(tuned)",
     "Algorithm override: one name for every collective that has it (ring), or "
     "a list such as all_reduce=ring,broadcast=tree. Unknown or unusable names are an error."},
    {"OMNICCL_DEBUG", "WARN", "Log level: NONE, WARN, INFO, DEBUG or TRACE (to stderr)."},
    {"OMNICCL_DEBUG_SUBSYS", "ALL", "Comma list of log subsystems: INIT, BOOTSTRAP, TRANSPORT, COLL, TUNING, ALL."},
    {"OMNICCL_SHM_SINGLE_COPY", "auto",
     "auto: the first communicator on a host measures process_vm_readv against the two-copy ring (a few ms, "
     "cached per host and kernel, see OMNICCL_SHM_CALIBRATION_FILE) and uses single copy only where it is "
     "faster; 1: collectives on shared memory move payloads of 256 KiB and more with one copy (the receiver "
     "reads the sender's buffer with process_vm_readv, where the OS allows it); 0: always two copies through "
     "the shared rings."},
    {"OMNICCL_STREAM_STORES", "auto",
     "auto: payloads of 4 MiB and more received through the shared-memory rings, and local copies of blocks "
     "of 4 MiB and more into a collective's output, are stored with streaming "
     "(non-temporal) stores, past the caches, where the calibration (see OMNICCL_SHM_SINGLE_COPY) measured "
     "them faster than memcpy, except that broadcast, gather, scatter, all_gather and all_to_all (and v-variants) "
     "of 8 MiB and more measure both ways while they run and keep the faster, per rank, kind and size; "
     "1: always; 0: never."},
    {"OMNICCL_SMALL_PATH", "1",
     "1: steps of up to 8 messages of at most 4 KiB each (operations of about 1 KiB and less) move straight "
     "through the links while the rank would spin, without building the engine's step state; 0: every step takes "
     "the general loop. The messages on the wire are the same either way."},
    {"OMNICCL_SHM_SPLIT_COPY", "1",
     "1: a payload a rank reads by reference (see OMNICCL_SHM_SINGLE_COPY) is split in chunks that the receiver "
     "reads (process_vm_readv) and its sender, while it waits, writes into the receiver's buffer "
     "(process_vm_writev), so both cores copy; broadcast, gather and scatter then go by reference where the "
     "calibration finds that faster than the ring; 0: the receiver copies alone. Ranks may differ in it."},
    {"OMNICCL_DEVICE_TRANSPORT", "auto",
     "How CUDA tensors move between ranks of one host. auto: over CUDA IPC (every rank maps its peers' device "
     "buffers; copies, reductions and waits on the caller's stream) where every pair of ranks can reach each "
     "other's GPU memory and the process already used its GPU when the communicator was made; cuda_ipc: also when "
     "it had not (the communicator then sets up the current GPU); staged: always through host memory."},
    {"OMNICCL_CUDA_IPC_BUFFER", "4194304",
     "Bytes of each rank's device scratch buffer for CUDA IPC (at least 4096, a multiple of 256; the same on "
     "every rank, else CUDA tensors are staged): operations move through it in pieces of this size."},
    {"OMNICCL_STAGED_SLICE", "8388608",
     "Bytes of a slice of large calls on communicators where some rank had a GPU in use when they were made "
     "(65536 to 1073741824): calls of twice this or more run as slices of it, and CUDA tensors staged through "
     "host memory are copied slice by slice while the previous slice moves. Rank 0's value holds for every rank."},
    {"OMNICCL_STAGED_GPU_REDUCE", "1048576",
     "On those communicators, all_reduce, reduce_scatter and reduce calls of this many bytes or more reduce on "
     "the GPU (CUDA tensors staged through host memory) or in rank order on the host (CPU tensors); smaller "
     "ones take the host's tuned algorithms. 0: always. Rank 0's value holds for every rank."},
    {"OMNICCL_STAGED_PROFILE", "0",
     "1: each communicator times the phases of its staged calls (CUDA tensors through host memory: the copies "
     "put on the stream, the wait for the worker, for the inputs' copies, the host collective, the wait for the "
     "copies back) and logs their means at WARN when it is destroyed; 0: off."},
    {"OMNICCL_SHM_CALIBRATION", "cached",
     "cached: reuse a valid calibration file for this host and kernel; force: measure again and rewrite it."},
    {"OMNICCL_SHM_CALIBRATION_FILE", "(runtime dir)",
     "Calibration cache file; default $XDG_RUNTIME_DIR/omniccl-shm-calibration, else "
     "/tmp/omniccl-shm-calibration-<uid>. Written atomically; ignored (and rewritten) unless it is a valid "
     "calibration owned by this user for this host and kernel."},
    {"OMNICCL_TCP_STREAMS", "auto",
     "TCP sockets per pair of ranks for data (1-16, or auto: between hosts, 2 while the job's sockets take at most "
     "half of the open-file limit, else 1; between ranks of one host, 2 only where the host's calibration found "
     "two faster than one over loopback, see OMNICCL_TCP_CALIBRATION; a pair uses the smaller of its two ranks' "
     "values). With more than one, payloads larger than 256 KiB are striped over them in 256 KiB pieces, so the "
     "kernel and the network card can spread one peer's traffic over several queues and congestion windows."},
    {"OMNICCL_TCP_CALIBRATION", "cached",
     "cached: with OMNICCL_TRANSPORT=tcp and OMNICCL_TCP_STREAMS=auto, the first communicator on a host times "
     "one-way 4 MiB messages over loopback with one data socket and with two (about 10 ms) and caches the rates "
     "(OMNICCL_TCP_CALIBRATION_FILE); force: measure again, ignoring the cache."},
    {"OMNICCL_TCP_CALIBRATION_FILE", "(runtime dir)",
     "TCP calibration cache file; default $XDG_RUNTIME_DIR/omniccl-tcp-calibration, else "
     "/tmp/omniccl-tcp-calibration-<uid>. Written atomically; ignored (and rewritten) unless it is a valid "
     "calibration owned by this user for this host and kernel."},
    {"OMNICCL_TCP_CONGESTION", "auto",
     "TCP congestion control of the data sockets. auto: between ranks of one host, a pacing algorithm (bbr) is "
     "replaced by cubic, else reno (pacing only delays loopback packets); links to other hosts keep the system's "
     "default. system: every link keeps the default. A name (cubic, reno, bbr, dctcp...): that algorithm on every "
     "link; one the kernel refuses is an error at setup."},
    {"OMNICCL_SOCKET_ADDR", "(auto)",
     "IP address this rank listens on for TCP connections; default: the address "
     "that reaches the rendezvous host."},
    {"OMNICCL_JOB_ID", "(launcher's)",
     "Identity of the job, checked at rendezvous: a rank never joins another job's rendezvous. "
     "omniccl-run sets a fresh one; otherwise torchrun's, Slurm's or Open MPI's job id is used."},
    {"OMNICCL_JOB_TOKEN", "(none)",
     "Secret shared by the ranks of a job (launchers generate one). When set, every connection to the "
     "rendezvous server proves it with an HMAC-SHA-256 challenge-response (the token never crosses the wire); "
     "a process without it cannot read or write rendezvous keys or take a rank. Must be the same on every rank."},
    {"OMNICCL_STORE_MAX_CONNECTIONS", "(auto)",
     "Connections the rendezvous server (rank 0 of tcp:// and env://, or the unique-id creator) serves at once; "
     "more are closed at accept. Default: max(2 x world size + 16, min(4096, half the open-file limit))."},
    {"OMNICCL_STORE_MAX_PENDING", "(auto)",
     "Connections to the rendezvous server that have proven nothing yet (no request completed; with a job token, "
     "no proof of it) that may be open at once; when one more arrives the oldest is closed, and each is closed "
     "after 5 s. Default: max(8, min(1024, an eighth of the open-file limit)), so that idle strangers never hold "
     "more than an eighth of rank 0's descriptors."},
    {"OMNICCL_RAISE_NOFILE", "1",
     "1: the first communicator of a process raises its soft open-file limit (RLIMIT_NOFILE) to the hard limit, "
     "as many servers do, so that rank 0's rendezvous server and every rank's sockets, shared-memory segments and "
     "splits have room; 0: the limit is left as it is (e.g. for a program that still uses select())."},
    {"OMNICCL_SIGNAL_CLEANUP", "1",
     "1: a process that makes a shared-memory segment handles SIGTERM, SIGINT, SIGHUP and SIGQUIT where they still "
     "have their default action: it unlinks the segments it holds, then dies by the signal as before. An "
     "application's own handler and an ignored signal are kept. 0: no handler is installed (what a rank killed "
     "during link setup leaves is removed by the next job on the host, or by omniccl-run)."},
    {"OMNICCL_STORE_MAX_BYTES", "268435456",
     "Bytes of keys and values the rendezvous server stores for all clients together (unprocessed input has "
     "the same limit of its own); one client may store at most 80 MiB. A set over a quota is refused with an "
     "error; a client sending more than it may have buffered is dropped."},
    {"OMNICCL_P2P_UNEXPECTED_BYTES", "268435456",
     "Bytes of point-to-point messages a rank keeps that arrived (or were sent to itself) before a receive "
     "matching their source and tag was posted. A message that would exceed it fails with "
     "OCCL_ERR_OUT_OF_MEMORY naming the setting."},
    {"OMNICCL_STORE_IDLE_TIMEOUT", "10s",
     "A connection to the rendezvous server must complete its first request, and finish any message it has "
     "started, within this time, or it is dropped (one waiting for a key is exempt)."},
    {"OMNICCL_SETUP_HEARTBEAT_TIMEOUT", "5s",
     "While a communicator is created (rendezvous, link setup, split), every rank sends a liveness heartbeat "
     "(to the rendezvous server, its file:// directory, or the parent communicator's peers) several times per "
     "timeout; a member silent for this long (stopped with SIGSTOP, hung, or a frozen VM) is reported to the "
     "others as having stopped responding. 0 turns the check off (e.g. to stop a rank in a debugger); else at "
     "least 250ms."},
    {"MASTER_ADDR", "-", "env:// rendezvous host (torchrun)."},
    {"MASTER_PORT", "-", "env:// rendezvous port (torchrun)."},
    {"RANK", "-", "env:// rank (torchrun); also OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID."},
    {"WORLD_SIZE", "-", "env:// number of ranks (torchrun); also OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS."},
    {"TORCHELASTIC_USE_AGENT_STORE", "-",
     "Set by torchrun: True means its agent's store listens on MASTER_PORT, so the rendezvous uses "
     "MASTER_PORT+1."},
    {"TORCHELASTIC_RUN_ID", "-", "torchrun's job id (--rdzv-id); part of the job identity unless 'none'."},
    {"SLURM_JOB_ID", "-", "Slurm job id; with SLURM_STEP_ID the job identity under srun."},
    {"SLURM_STEP_ID", "-", "Slurm job step id."},
    {"TORCHELASTIC_RESTART_COUNT", "-",
     "torchrun's restart count; with the job identity, names the attempt whose failed rendezvous a late rank "
     "learns of."},
    {"SLURM_RESTART_COUNT", "-", "Slurm's requeue count; used as TORCHELASTIC_RESTART_COUNT."},
    {"OMPI_MCA_ess_base_jobid", "-", "Open MPI's job id; the job identity under mpirun."},
    {"LOCAL_RANK", "-", "Rank within the host, set by the launchers (informational)."},
    {"OMPI_COMM_WORLD_RANK", "-", "env:// rank under Open MPI's mpirun."},
    {"OMPI_COMM_WORLD_SIZE", "-", "env:// size under Open MPI's mpirun."},
    {"PMI_RANK", "-", "env:// rank under MPICH/Hydra."},
    {"PMI_SIZE", "-", "env:// size under MPICH/Hydra."},
    {"SLURM_PROCID", "-", "env:// rank under Slurm's srun."},
    {"SLURM_NTASKS", "-", "env:// size under Slurm's srun."},
};

}  // namespace

std::span<const SettingInfo> all_settings() { return kSettings; }

std::optional<std::string> get_setting(const char* name) {
  bool known = false;
  for (const auto& s : kSettings) {
    if (std::strcmp(s.name, name) == 0) known = true;
  }
  if (!known) fail(Status::kInternal, "setting ", name, " is not in the settings table");
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int64_t parse_duration_ms(const std::string& text, const std::string& what) {
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  // strtod also reads "nan", "inf" and hexadecimal; only plain decimals are durations.
  const bool plain = end != s && std::all_of(s, static_cast<const char*>(end), [](char ch) {
                       return std::isdigit(static_cast<unsigned char>(ch)) || ch == '.' || ch == 'e' || ch == 'E' ||
                              ch == '+' || ch == '-';
                     });
  if (!plain || !std::isfinite(v) || v < 0) {
    fail(Status::kInvalidArgument, what, "='", text,
         "' is not a duration (a finite number, optionally with a unit: 600, 30s, 1500ms, 10m)");
  }
  std::string unit(end);
  double ms;
  if (unit.empty() || unit == "s") {
    ms = v * 1000.0;
  } else if (unit == "ms") {
    ms = v;
  } else if (unit == "m" || unit == "min") {
    ms = v * 60000.0;
  } else {
    fail(Status::kInvalidArgument, what, "='", text, "' has unknown unit '", unit, "' (use ms, s or m)");
  }
  if (errno == ERANGE && v != 0) {
    fail(Status::kInvalidArgument, what, "='", text, "' is out of range");
  }
  if (ms < 1) fail(Status::kInvalidArgument, what, "='", text, "' must be at least 1ms");
  // Longer than the clock can count: the same as never (deadlines saturate).
  if (ms >= static_cast<double>(kMaxDurationMs)) return kMaxDurationMs;
  return static_cast<int64_t>(ms);
}

int64_t setup_heartbeat_timeout_ms() {
  auto v = get_setting("OMNICCL_SETUP_HEARTBEAT_TIMEOUT");
  if (!v) return 5000;
  const int64_t ms = parse_duration_ms(*v, "OMNICCL_SETUP_HEARTBEAT_TIMEOUT");
  // Heartbeats go out at least every 50 ms: a shorter timeout would fire on
  // live ranks.
  check_arg(ms == 0 || ms >= 250, "OMNICCL_SETUP_HEARTBEAT_TIMEOUT='", *v,
            "' is too short: use 0 (no liveness checks) or at least 250ms");
  // Longer than a year is "never" (and keeps time arithmetic in range).
  return std::min<int64_t>(ms, int64_t{365} * 24 * 3600 * 1000);
}

int64_t setup_heartbeat_interval_ms(int64_t timeout_ms) { return std::clamp<int64_t>(timeout_ms / 5, 50, 1000); }

}  // namespace omniccl
