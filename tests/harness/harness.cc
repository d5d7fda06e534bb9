#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

namespace omniccl::testing {

namespace {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&in), sizeof in);
  socklen_t len = sizeof in;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&in), &len);
  ::close(fd);
  return ntohs(in.sin_port);
}

std::string make_temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "omniccl-test-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  return buf.data();
}

/// "tcpN": the number N of TCP data streams it asks for, else 0.
int tcp_streams_of(const std::string& transport) {
  if (transport.size() <= 3 || transport.compare(0, 3, "tcp") != 0) return 0;
  return std::atoi(transport.c_str() + 3);
}

int child_main(const JobOptions& opts, const RankFn& fn, int rank, const std::string& init,
               const occl_unique_id_t* uid) {
  for (const auto& [k, v] : opts.env) ::setenv(k.c_str(), v.c_str(), 1);
  if (rank % 2 == 1) {
    for (const auto& [k, v] : opts.env_odd_ranks) ::setenv(k.c_str(), v.c_str(), 1);
  }
  const int streams = tcp_streams_of(opts.transport);
  if (streams > 0) ::setenv("OMNICCL_TCP_STREAMS", std::to_string(streams).c_str(), 1);
  if (!opts.create_comm) {
    ::setenv("OCCL_TEST_INIT", init.c_str(), 1);
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(opts.nranks).c_str(), 1);
    return fn(nullptr, rank, opts.nranks);
  }
  occl_config_t cfg = OCCL_CONFIG_INIT;
  cfg.timeout_ms = opts.timeout_ms;
  cfg.transport = streams > 0 ? "tcp" : opts.transport.c_str();
  cfg.algorithm = opts.algorithm.empty() ? nullptr : opts.algorithm.c_str();
  occl_comm_t comm = nullptr;
  occl_status_t st;
  if (opts.init == "uid") {
    st = occl_comm_init_unique_id(&comm, opts.nranks, uid, rank, &cfg);
  } else if (opts.init == "env") {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(opts.nranks).c_str(), 1);
    st = occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, &cfg);
  } else {
    st = occl_comm_init(&comm, init.c_str(), rank, opts.nranks, &cfg);
  }
  if (st != OCCL_SUCCESS) {
    std::fprintf(stderr, "rank %d: init failed: %s: %s\n", rank, occl_status_string(st), occl_last_error());
    return 100;
  }
  int rc = fn(comm, rank, opts.nranks);
  occl_status_t ds = occl_comm_destroy(comm);
  if (rc == 0 && ds != OCCL_SUCCESS) {
    std::fprintf(stderr, "rank %d: destroy failed: %s\n", rank, occl_last_error());
    rc = 101;
  }
  return rc;
}

}  // namespace

bool JobResult::ok() const {
  for (const auto& r : ranks) {
    if (r.exit_code != 0) return false;
  }
  return !ranks.empty();
}

std::string JobResult::summary() const {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& r = ranks[i];
    os << "\n  rank " << i << ": ";
    if (r.timed_out)
      os << "killed after the job time limit";
    else if (r.signal)
      os << "killed by signal " << r.signal;
    else
      os << "exit " << r.exit_code;
    os << " after " << r.seconds << " s";
  }
  return os.str();
}

namespace {

/// The in-process test mesh: ranks as threads (JobOptions::threads).
JobResult run_rank_threads(const JobOptions& opts, const RankFn& fn, const std::string& init,
                           const occl_unique_id_t* uid) {
  JobResult res;
  res.ranks.resize(opts.nranks);
  if (!opts.create_comm || !opts.env.empty() || !opts.env_odd_ranks.empty() || opts.init == "env" ||
      tcp_streams_of(opts.transport) > 0) {
    std::fprintf(stderr, "run_ranks: threads need create_comm, no env and a tcp, file or uid rendezvous\n");
    return res;  // every rank failed (exit_code -1)
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < opts.nranks; ++r) {
    threads.emplace_back([&, r] {
      int rc = 99;
      try {
        rc = child_main(opts, fn, r, init, uid);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: exception: %s\n", r, e.what());
      }
      res.ranks[r].exit_code = rc;
      res.ranks[r].seconds = seconds_since(start);
    });
  }
  for (auto& t : threads) t.join();
  return res;
}

/// A unique id whose rendezvous server lives in a child process of its own
/// (killed by the caller, or when this process dies). The ranks are forked
/// from this process, and a fork while another thread runs (the server's)
/// may copy a lock that thread holds, such as one of the sanitizer
/// allocator's: the rank's first allocation on a new thread then waits
/// forever (seen under ASan: a heartbeat thread stuck at its start). Returns
/// the child's pid, or -1 (with a message) when the id could not be made.
pid_t unique_id_host(occl_unique_id_t* uid) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    occl_unique_id_t id{};
    const occl_status_t st = occl_get_unique_id(&id);
    if (st != OCCL_SUCCESS) std::fprintf(stderr, "occl_get_unique_id failed: %s\n", occl_last_error());
    const bool sent =
        ::write(fds[1], &st, sizeof st) == ssize_t(sizeof st) && ::write(fds[1], &id, sizeof id) == ssize_t(sizeof id);
    ::close(fds[1]);
    if (!sent || st != OCCL_SUCCESS) ::_exit(1);
    for (;;) ::pause();  // serving the rendezvous until killed
  }
  ::close(fds[1]);
  occl_status_t st = OCCL_ERR_INTERNAL;
  const bool got = pid > 0 && ::read(fds[0], &st, sizeof st) == ssize_t(sizeof st) && st == OCCL_SUCCESS &&
                   ::read(fds[0], uid, sizeof *uid) == ssize_t(sizeof *uid);
  ::close(fds[0]);
  if (got) return pid;
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  return -1;
}

}  // namespace

JobResult run_ranks(const JobOptions& opts, const RankFn& fn) {
  std::string init, dir;
  occl_unique_id_t uid{};
  pid_t uid_host = -1;
  if (opts.init == "tcp") {
    init = "tcp://127.0.0.1:" + std::to_string(free_port());
  } else if (opts.init == "file") {
    dir = make_temp_dir();
    init = "file://" + dir;
  } else if (opts.init == "uid") {
    uid_host = unique_id_host(&uid);
    if (uid_host < 0) return {};
  } else if (opts.init == "env") {
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  }
  if (opts.threads) {
    JobResult res = run_rank_threads(opts, fn, init, &uid);
    if (uid_host > 0) {
      ::kill(uid_host, SIGKILL);
      ::waitpid(uid_host, nullptr, 0);
    }
    if (!dir.empty()) std::filesystem::remove_all(dir);
    return res;
  }
  std::fflush(nullptr);
  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids(opts.nranks);
  JobResult res;
  res.ranks.resize(opts.nranks);
  for (int r = 0; r < opts.nranks; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 99;
      try {
        rc = child_main(opts, fn, r, init, &uid);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: exception: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    pids[r] = pid;
  }
  int running = opts.nranks;
  auto deadline = start + std::chrono::seconds(opts.job_timeout_s);
  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < opts.nranks; ++r) {
        if (pids[r] != pid) continue;
        auto& rr = res.ranks[r];
        rr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (WIFEXITED(status)) rr.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) rr.signal = WTERMSIG(status);
        pids[r] = -1;
        --running;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < opts.nranks; ++r) {
        if (pids[r] > 0) {
          res.ranks[r].timed_out = true;
          ::kill(pids[r], SIGKILL);
        }
      }
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (uid_host > 0) {
    ::kill(uid_host, SIGKILL);
    ::waitpid(uid_host, nullptr, 0);
  }
  if (!dir.empty()) std::filesystem::remove_all(dir);
  return res;
}

JobOptions job_options(int nranks, const std::string& transport, long long timeout_ms, int job_timeout_s) {
  JobOptions o;
  o.nranks = nranks;
  o.transport = transport;
  o.timeout_ms = timeout_ms;
  o.job_timeout_s = job_timeout_s;
  return o;
}

Tensor1D::Tensor1D(void* data, int64_t count, DLDataType dtype) {
  shape[0] = count;
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
}

DLDataType dl_int(int bits) { return {kDLInt, static_cast<uint8_t>(bits), 1}; }
DLDataType dl_uint(int bits) { return {kDLUInt, static_cast<uint8_t>(bits), 1}; }
DLDataType dl_float(int bits) { return {kDLFloat, static_cast<uint8_t>(bits), 1}; }
DLDataType dl_bfloat16() { return {kDLBfloat, 16, 1}; }
DLDataType dl_bool() { return {kDLBool, 8, 1}; }

int all_reduce_works(occl_comm_t comm, int rank, int nranks, int64_t count) {
  std::vector<int64_t> buf(static_cast<size_t>(count));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = (rank + 1) * int64_t(i + 1);
  Tensor1D t(buf.data(), count, dl_int(64));
  RANK_OK(occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr), rank);
  const int64_t tri = int64_t(nranks) * (nranks + 1) / 2;
  for (size_t i = 0; i < buf.size(); ++i) {
    RANK_CHECK(buf[i] == tri * int64_t(i + 1), rank,
               "all_reduce element " + std::to_string(i) + " = " + std::to_string(buf[i]) + " over " +
                   std::to_string(nranks) + " ranks, want " + std::to_string(tri * int64_t(i + 1)));
  }
  return 0;
}

bool contains_ci(const std::string& hay, const std::string& needle) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  return lower(hay).find(lower(needle)) != std::string::npos;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool check(bool cond, int rank, const char* file, int line, const std::string& text) {
  if (!cond) std::fprintf(stderr, "rank %d: CHECK FAILED at %s:%d: %s\n", rank, file, line, text.c_str());
  return cond;
}

}  // namespace omniccl::testing
