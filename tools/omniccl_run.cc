// omniccl-run: start N local ranks of a program, like `mpirun -n N` or
// `torchrun --nproc-per-node N`, for OmniCCL's env:// rendezvous.
//
// A standalone program: it links nothing of OmniCCL, only libc and libstdc++.
//
// Design decisions (see also the usage text below):
//
// * Process groups. Each rank is put in its own process group (setpgid in the
//   child and, to close the race, in the launcher too). A terminal Ctrl-C is
//   sent by the kernel to the terminal's foreground process group only, which
//   is the launcher's group; so the launcher receives it exactly once and
//   forwards it to every rank. Had the ranks stayed in the launcher's group,
//   each would get the terminal's signal directly *and* the forwarded copy,
//   i.e. twice, and `kill -TERM <launcher>` would behave differently from
//   Ctrl-C. Signals to a rank go to its whole process group, so helper
//   processes it started (a shell wrapper's child, for instance) get them too.
// * Orphans. Every rank sets PR_SET_PDEATHSIG=SIGKILL, so when the launcher
//   itself is SIGKILLed or crashes the ranks do not live on. After the last
//   rank has exited, processes still alive in a rank's process group (a
//   background helper it forgot) get SIGTERM.
// * Zombies. Every rank is waited for (waitpid) before the launcher exits, on
//   every path, including start-up failures.
// * Leftovers. A rank killed during its link setup (by SIGTERM's default
//   action, or SIGKILL) leaves the shared-memory segments it made for its
//   peers. After the last rank has exited, the launcher removes this user's
//   OmniCCL segments whose creating process is gone (each name carries the
//   creator's pid namespace and pid: core/common/shared_memory.cc), as the
//   next job on the host would; a live process's segments stay.
// * Output. With prefixing on, each rank's stdout and stderr are pipes that
//   the launcher reads in one poll() loop; it writes only whole lines, each
//   as "[RANK] line\n", so lines from different ranks never mix mid-line. A
//   partial last line is completed with a newline when the stream ends. A
//   line longer than 1 MiB is split into 1 MiB pieces (bounded memory). If
//   the launcher's own stdout (or stderr) is a closed pipe (`| head`), the
//   ranks' corresponding pipes are closed too, so the ranks get SIGPIPE just
//   as they would in a shell pipeline.
// * Stdin. Rank 0 inherits the launcher's stdin when it is not a terminal
//   (mpirun's rule); the other ranks, and every rank when stdin is a
//   terminal, read /dev/null. (A rank in a background process group reading
//   the terminal would be stopped by SIGTTIN and hang the job.)
// * Signals that the launcher was started with ignored (nohup's SIGHUP, the
//   SIGINT/SIGQUIT of a non-interactive shell's background job) stay ignored
//   and are inherited as ignored by the ranks, the usual Unix convention.
// * Job control: SIGTSTP (Ctrl-Z) is forwarded to the ranks before the
//   launcher stops itself; SIGCONT (fg/bg) is forwarded to them as well.
//   A second SIGINT kills the ranks (SIGKILL) at once; other repeated signals
//   are just forwarded again. The exit status still comes from the ranks:
//   ranks that catch a forwarded SIGTERM and exit 0 give status 0.
// * Reporting. Every rank that fails by itself is reported on stderr, after
//   its remaining output; ranks that the launcher ends itself (after --grace,
//   --timeout or a second Ctrl-C) are covered by the one line announcing it.
// * Everything is single-threaded; every wait is a poll() with a timeout of
//   at most one second, so deadlines (--grace, --timeout, the SIGKILL
//   escalation) are met even when no output arrives. (A reader of the
//   launcher's own stdout that stops reading blocks it, as in any pipeline.)
// * With prefixing, a rank's stdout is a pipe, not a terminal, so C stdio
//   buffers it fully; flush, or use --no-prefix, for live output. Python
//   ranks get PYTHONUNBUFFERED=1 (unless set), so their lines appear as they
//   are printed and nothing is lost when a surviving rank is terminated.
// * Who failed first. A rank's failure time is when it exited, or earlier
//   when it says so: the ranks inherit the write end of a pipe whose number
//   is in OMNICCL_RUN_FAILURE_FD, and a rank that is failing (the omniccl
//   Python package does this for an uncaught exception) writes one line
//   "RANK MONOTONIC_NS\n" (CLOCK_MONOTONIC) there. OMNICCL_RUN_FAILURE_PIPE
//   names the pipe ("pipe:[INODE]", as readlink /proc/self/fd/N shows it),
//   so a writer can check the descriptor was not closed and reused. The rank that failed
//   earliest decides the exit status and is named at the end, even when the
//   ranks it took down exited before it.
// * Job identity. Each job gets a fresh OMNICCL_JOB_ID (unless one is set),
//   which OmniCCL checks at rendezvous, so a rank never joins another job.

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli.h"

namespace {

namespace cli = omniccl::cli;

using Clock = std::chrono::steady_clock;

constexpr int kMaxRanks = 1024;
constexpr int kExitTimeout = 124;                      // as coreutils `timeout`
constexpr int kExitInternal = 125;                     // the launcher itself failed
constexpr int kExitCannotExecute = 126;                // as a shell: found but not runnable
constexpr int kExitNotFound = 127;                     // as a shell: command not found
constexpr auto kKillDelay = std::chrono::seconds(5);   // SIGTERM -> SIGKILL
constexpr auto kDrainDelay = std::chrono::seconds(2);  // output after exit
constexpr std::size_t kMaxLine = std::size_t{1} << 20;
constexpr int kMaxPollMs = 1000;
constexpr double kMaxSeconds = 1e7;  // ~115 days; keeps time arithmetic sane

/// --help up to the options (their lines come from the option table).
constexpr const char kSynopsis[] =
    R"(Usage: omniccl-run -n N [options] [--] PROGRAM [ARGS...]

Start N local ranks of PROGRAM ARGS... for an OmniCCL (or torch.distributed
style) job and wait for them. Rank i gets, on top of the current environment:
  RANK=i  WORLD_SIZE=N  LOCAL_RANK=i  LOCAL_WORLD_SIZE=N
  MASTER_ADDR  MASTER_PORT  OMNICCL_LAUNCHER=omniccl-run
  OMNICCL_JOB_ID (a fresh one unless set)  PYTHONUNBUFFERED=1 (unless set)
  OMNICCL_RUN_FAILURE_FD, OMNICCL_RUN_FAILURE_PIPE (where a failing rank
  may say so, see below)

Options:
)";

/// --help after the options.
constexpr const char kEpilogue[] = R"(
Options may also be written --option=VALUE or -nN, and '_' may replace '-'
in long names (--nproc_per_node). Options end at PROGRAM or at '--'.

Output: every line a rank writes is printed as "[RANK] line", stdout lines
to stdout and stderr lines to stderr; lines of different ranks never mix.

Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to omniccl-run are
forwarded to every rank (each rank runs in its own process group). A second
SIGINT (Ctrl-C pressed twice) kills all ranks with SIGKILL. Ctrl-Z stops
and 'fg' resumes the ranks together with omniccl-run.

Exit status: 0 if every rank exits with 0; otherwise the status of the first
rank that failed (by time: when it exited, or earlier when it wrote
"RANK MONOTONIC_NS" to OMNICCL_RUN_FAILURE_FD, as OmniCCL's Python package
does for an uncaught exception), or 128+SIGNAL if it was killed by a signal;
that rank is named on the last line; 124 after
--timeout; 125 if omniccl-run itself fails; 126 or 127 if PROGRAM cannot be
executed or is not found; 2 for bad usage.
)";

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

/// Returns the abbreviation ("SIGKILL") of a signal number, or "SIG<n>" for
/// one not in the table. Own table rather than sigabbrev_np() so the program
/// builds with any libc.
std::string signal_name(int sig) {
  static constexpr std::pair<int, const char*> kNames[] = {
      {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},   {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"},     {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},     {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"},     {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"},   {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},   {SIGCHLD, "SIGCHLD"},
      {SIGCONT, "SIGCONT"},     {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},   {SIGTTIN, "SIGTTIN"},
      {SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"},   {SIGXFSZ, "SIGXFSZ"},
      {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"},
      {SIGSYS, "SIGSYS"},
  };
  for (const auto& [number, name] : kNames) {
    if (number == sig) return name;
  }
#ifdef SIGRTMIN
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) {
    return "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  }
#endif
  return "SIG" + std::to_string(sig);
}

/// Formats a number of seconds the way the user typed it ("1", "0.5").
std::string format_seconds(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  return buf;
}

/// Writes all of `data` to `fd`, retrying after EINTR and partial writes and
/// waiting (poll, 1 s steps) if `fd` was left non-blocking by whoever started
/// us. Returns false, with errno set, on any other error.
bool write_all(int fd, std::string_view data) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n > 0) {
      p += n;
      left -= static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      (void)::poll(&pfd, 1, kMaxPollMs);
    } else {
      if (n == 0) errno = EIO;
      return false;
    }
  }
  return true;
}

/// Prints "omniccl-run: <message>" as one line on stderr (one write, so it
/// never splits a rank's line or is split by one).
void log_line(const std::string& message) { (void)write_all(STDERR_FILENO, "omniccl-run: " + message + "\n"); }

/// Makes sure file descriptors 0, 1 and 2 are open (on /dev/null if they were
/// closed), so that pipes created later never land on them and confuse the
/// dup2() calls in the ranks.
void ensure_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      // open() returns the lowest free descriptor, which is `fd`.
      (void)::open("/dev/null", O_RDWR);
    }
  }
}

/// Names ranks for messages: "rank 3" or "ranks 0, 2, 3".
/// The pid in "omniccl.<ns>-<pid>.<rest>" when it starts with `prefix`
/// ("omniccl.<ns>-"), else 0.
pid_t pid_in_segment_name(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return 0;
  long pid = 0;
  size_t i = prefix.size();
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && pid < (1L << 30); ++i) {
    pid = pid * 10 + (name[i] - '0');
  }
  return i < name.size() && name[i] == '.' ? static_cast<pid_t>(pid) : 0;
}

/// Removes this user's OmniCCL shared-memory segments of this pid namespace
/// whose creating process is gone; returns how many.
int remove_dead_segments() {
  char link[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof link - 1);  // "pid:[4026531836]"
  std::string ns;
  for (ssize_t i = 0; i < n; ++i) {
    if (std::isdigit(static_cast<unsigned char>(link[i]))) ns.push_back(link[i]);
  }
  const std::string prefix = "omniccl." + (ns.empty() ? std::string("0") : ns) + "-";
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(dir)) {
    const pid_t pid = pid_in_segment_name(e->d_name, prefix);
    struct stat st {};
    if (pid <= 0 || ::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != ::geteuid()) {
      continue;
    }
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    if (::unlinkat(::dirfd(dir), e->d_name, 0) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  bool first = true;
  for (int r : ranks) {
    if (!first) out += ", ";
    first = false;
    out += std::to_string(r);
  }
  return out;
}

/// Returns a port that is free on 127.0.0.1 right now, found by binding port 0
/// and closing the socket again; on failure returns nullopt and sets `error`.
/// (Another process may take the port before rank 0 binds it; that race is
/// inherent to the torchrun-style MASTER_PORT scheme.)
std::optional<int> pick_free_port(std::string& error) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return std::nullopt;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  std::optional<int> port;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    error = std::string("bind 127.0.0.1:0: ") + std::strerror(errno);
  } else if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    error = std::string("getsockname: ") + std::strerror(errno);
  } else {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

/// Everything the command line decides.
struct Options {
  int nproc = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free one
  bool prefix = true;
  double grace_s = 30.0;
  std::optional<double> timeout_s;
  /// --bind-to: true (core, the default: round-robin over the CPUs), false (none).
  bool bind = true;
  char** program = nullptr;  // NULL-terminated argv of PROGRAM ARGS...
};

/// The outcome of parsing: options to run with, or an exit status to return
/// at once (help printed, or a usage error).
struct ParseOutcome {
  Options options;
  int exit_status = -1;  // -1: run the job
};

/// Parses a whole-number option value into [lo, hi]; on failure returns
/// nullopt and sets `error` to a message naming the option.
std::optional<int> parse_int(std::string_view option, std::string_view text, int lo, int hi, std::string& error) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size()) {
    error = std::string(option) + ": '" + std::string(text) + "' is not a whole number";
    return std::nullopt;
  }
  if (ec == std::errc::result_out_of_range || value < lo || value > hi) {
    error = std::string(option) + ": " + std::string(text) + " is out of range; it must be between " +
            std::to_string(lo) + " and " + std::to_string(hi);
    return std::nullopt;
  }
  return value;
}

/// Parses a number of seconds (decimals allowed) that must be >= 0, or > 0
/// when `positive`; on failure returns nullopt and sets `error`.
std::optional<double> parse_seconds(std::string_view option, const std::string& text, bool positive,
                                    std::string& error) {
  char* end = nullptr;
  errno = 0;
  double value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  bool bad = text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(value) ||
             std::isspace(static_cast<unsigned char>(text.front()));
  if (bad) {
    error = std::string(option) + ": '" + text + "' is not a number of seconds";
    return std::nullopt;
  }
  if (value < 0 || (positive && value == 0) || value > kMaxSeconds) {
    error = std::string(option) + ": " + text + " is out of range; it must be " +
            (positive ? "more than 0" : "0 or more") + " and at most " + format_seconds(kMaxSeconds) + " seconds";
    return std::nullopt;
  }
  return value;
}

// The option table. Each setter gets the option's name as typed ('_' read as
// '-') and its value, and returns an error message, or "" when it took them.

using Value = const std::string&;

/// Sets `out` to a whole number in [lo, hi] (see parse_int).
std::string set_int(int& out, Value name, Value text, int lo, int hi) {
  std::string error;
  if (auto n = parse_int(name, text, lo, hi, error)) out = *n;
  return error;
}

/// Sets `out` to a number of seconds (see parse_seconds).
template <typename Seconds>  // double, or std::optional<double>
std::string set_seconds(Seconds& out, Value name, Value text, bool positive) {
  std::string error;
  if (auto s = parse_seconds(name, text, positive, error)) out = *s;
  return error;
}

/// --master-addr: any address but "".
std::string set_master_addr(Options& o, Value, Value v) {
  if (v.empty()) return "--master-addr: the address is empty";
  o.master_addr = v;
  return {};
}

/// --bind-to: core or none.
std::string set_bind(Options& o, Value, Value v) {
  if (v != "core" && v != "none") return "--bind-to: '" + v + "' is not one of core, none";
  o.bind = v == "core";
  return {};
}

/// --no-prefix.
std::string clear_prefix(Options& o, Value, Value) {
  o.prefix = false;
  return {};
}

/// The option table: every option, its line in --help and what it sets in
/// `o` (`have_n`: -n was given).
std::vector<cli::Option> option_table(Options& o, bool& have_n) {
  auto nproc = [&o, &have_n](Value name, Value v) {
    have_n = true;  // a bad value ends parsing
    return set_int(o.nproc, name, v, 1, kMaxRanks);
  };
  return {
      {{"-n", "--nproc", "--nproc-per-node"},
       cli::Takes::kValue,
       "-n, --nproc, --nproc-per-node N",
       "number of ranks to start, 1 to 1024 (required)",
       nproc},
      {{"--master-addr"},
       cli::Takes::kValue,
       "--master-addr ADDR",
       "MASTER_ADDR for the ranks (default 127.0.0.1)",
       [&o](Value name, Value v) { return set_master_addr(o, name, v); }},
      {{"--master-port"},
       cli::Takes::kValue,
       "--master-port PORT",
       "MASTER_PORT for the ranks (default: a free TCP port,\n"
       "found by binding port 0 on 127.0.0.1)",
       [&o](Value name, Value v) { return set_int(o.master_port, name, v, 1, 65535); }},
      {{"--no-prefix"},
       cli::Takes::kNothing,
       "--no-prefix",
       "do not prefix output lines with \"[RANK] \"; the ranks\n"
       "then write straight to omniccl-run's stdout and stderr",
       [&o](Value name, Value v) { return clear_prefix(o, name, v); }},
      {{"--grace"},
       cli::Takes::kValue,
       "--grace SECONDS",
       "once a rank has failed, how long the other ranks may\n"
       "still run before they get SIGTERM, and SIGKILL 5 s\n"
       "later (default 30)",
       [&o](Value name, Value v) { return set_seconds(o.grace_s, name, v, /*positive=*/false); }},
      {{"--timeout"},
       cli::Takes::kValue,
       "--timeout SECONDS",
       "stop the whole job after SECONDS and exit with 124\n"
       "(default: no time limit)",
       [&o](Value name, Value v) { return set_seconds(o.timeout_s, name, v, /*positive=*/true); }},
      {{"--bind-to"},
       cli::Takes::kValue,
       "--bind-to core|none",
       "core: rank i runs only on the i-th CPU omniccl-run may\n"
       "use (round-robin when ranks outnumber them), as mpirun\n"
       "binds ranks to cores; none: ranks keep omniccl-run's\n"
       "CPU mask. Default: core",
       [&o](Value name, Value v) { return set_bind(o, name, v); }},
      {.names = {"-h", "--help"}, .label = "-h, --help", .help = "print this help and exit", .prints_help = true},
  };
}

/// Parses argv. Options come first and end at the first argument that is not
/// an option (PROGRAM) or at "--".
ParseOutcome parse_args(int argc, char** argv) {
  ParseOutcome out;
  bool have_n = false;
  const cli::Spec spec{.program = "omniccl-run",
                       .synopsis = kSynopsis,
                       .options = option_table(out.options, have_n),
                       .epilogue = kEpilogue,
                       .has_operands = true,
                       .unknown_hint = " (write '--' before PROGRAM if its name starts with '-')"};
  const cli::Parsed parsed = cli::parse(spec, argc, argv);
  if (parsed.exit_status >= 0) {
    out.exit_status = parsed.exit_status;
  } else if (!have_n) {
    out.exit_status = cli::usage_error(spec.program, "missing -n N (the number of ranks to start)");
  } else if (parsed.operands >= argc || argv[parsed.operands][0] == '\0') {
    out.exit_status = cli::usage_error(spec.program, "missing PROGRAM to run");
  } else {
    out.options.program = argv + parsed.operands;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Signals: handlers only write the signal number into a self-pipe that the
// poll() loop reads.
// ---------------------------------------------------------------------------

int g_signal_pipe_write = -1;

/// Async-signal-safe handler: records the signal in the self-pipe. If the pipe
/// is full the byte is dropped; SIGCHLD is also covered by reaping on every
/// loop iteration, and 64 KiB of pending signals carry the message anyway.
extern "C" void on_signal(int sig) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  ssize_t n = ::write(g_signal_pipe_write, &byte, 1);
  (void)n;
  errno = saved_errno;
}

// ---------------------------------------------------------------------------
// The launcher
// ---------------------------------------------------------------------------

/// One output stream (stdout or stderr) of one rank, as seen by the launcher.
struct Stream {
  int fd = -1;          // read end of the rank's pipe; -1 once closed
  int out_fd = -1;      // where its lines go: STDOUT_FILENO or STDERR_FILENO
  std::string pending;  // bytes of an incomplete line
};

/// One rank process.
struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  bool ended_by_launcher = false;              // got SIGTERM/SIGKILL from our teardown
  std::optional<Clock::time_point> failed_at;  // reported or exit time
  std::optional<int> failure_status;           // exit code, once exited
  std::string failure_what;                    // "exited with status 1"
  std::string prefix;                          // "[i] "
  Stream out, err;
};

/// Frees a CPU set made with CPU_ALLOC.
struct CpuSetFree {
  void operator()(cpu_set_t* s) const { CPU_FREE(s); }
};
using CpuSet = std::unique_ptr<cpu_set_t, CpuSetFree>;

/// The CPUs this process may run on, in increasing order (empty when the
/// mask cannot be read).
std::vector<int> allowed_cpus() {
  for (int n = CPU_SETSIZE; n <= (1 << 20); n *= 2) {
    CpuSet set(CPU_ALLOC(n));
    if (!set) return {};
    const std::size_t bytes = CPU_ALLOC_SIZE(n);
    if (::sched_getaffinity(0, bytes, set.get()) != 0) {
      if (errno == EINVAL) continue;  // more CPUs than the set holds
      return {};
    }
    std::vector<int> cpus;
    for (int c = 0; c < n; ++c) {
      if (CPU_ISSET_S(static_cast<std::size_t>(c), bytes, set.get())) cpus.push_back(c);
    }
    return cpus;
  }
  return {};
}

/// A CPU set holding one CPU, for sched_setaffinity in a forked child.
struct OneCpu {
  CpuSet set;
  std::size_t bytes = 0;
  explicit OneCpu(int cpu) : set(CPU_ALLOC(cpu + 1)), bytes(CPU_ALLOC_SIZE(cpu + 1)) {
    if (set) {
      CPU_ZERO_S(bytes, set.get());
      CPU_SET_S(static_cast<std::size_t>(cpu), bytes, set.get());
    }
  }
};

/// Starts the ranks, relays their output and signals, enforces --grace and
/// --timeout, and computes the exit status.
class Launcher {
 public:
  /// Takes the parsed command line.
  explicit Launcher(Options options) : opts_(std::move(options)) {}

  /// Closes the descriptors the launcher still holds.
  ~Launcher() {
    for (Rank& r : ranks_) {
      close_fd(r.out.fd);
      close_fd(r.err.fd);
    }
    close_fd(signal_pipe_read_);
    close_fd(devnull_);
    close_fd(report_read_);
    close_fd(report_write_);
    // The write end of the self-pipe stays open: a late signal handler may
    // still write to it until the process exits.
  }

  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  /// Runs the whole job and returns the launcher's exit status.
  int run() {
    if (int rc = prepare(); rc != 0) return rc;
    if (opts_.timeout_s) {
      timeout_at_ = Clock::now() + to_duration(*opts_.timeout_s);
    }
    if (int rc = start_ranks(); rc != 0) return rc;
    loop();
    if (const int removed = remove_dead_segments(); removed > 0) {
      log_line("removed " + std::to_string(removed) + " shared-memory segment(s) that ended ranks left in /dev/shm");
    }
    if (timed_out_) return kExitTimeout;
    if (const Rank* first = first_failed(); first != nullptr && first->failure_status) {
      if (failed_count() > 1) {
        log_line("rank " + std::to_string(first->index) + " failed first (" + first->failure_what + ")");
      }
      return *first->failure_status;
    }
    if (first_failure_status_) return *first_failure_status_;
    return 0;
  }

 private:
  /// Converts seconds to a clock duration.
  static Clock::duration to_duration(double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

  /// A job id no other job on this host has now: pid, time and randomness.
  static std::string fresh_job_id() {
    unsigned long long r = 0;
    int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      if (::read(fd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) r = 0;
      ::close(fd);
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, "omniccl-run:%d:%lld:%016llx", static_cast<int>(::getpid()),
                  static_cast<long long>(Clock::now().time_since_epoch().count()), r);
    return buf;
  }

  /// The failed rank whose failure came first, or nullptr.
  const Rank* first_failed() const {
    const Rank* best = nullptr;
    for (const Rank& r : ranks_) {
      if (r.failed_at && (best == nullptr || *r.failed_at < *best->failed_at)) best = &r;
    }
    return best;
  }

  /// How many ranks have failed (reported or exited non-zero).
  int failed_count() const {
    int n = 0;
    for (const Rank& r : ranks_) n += r.failed_at ? 1 : 0;
    return n;
  }

  /// Reads the failure reports ("RANK MONOTONIC_NS" lines) the ranks wrote.
  void read_failure_reports() {
    char buf[4096];
    for (int round = 0; round < 16; ++round) {
      ssize_t n = ::read(report_read_, buf, sizeof buf);
      if (n <= 0) break;
      report_pending_.append(buf, static_cast<std::size_t>(n));
    }
    std::size_t nl;
    while ((nl = report_pending_.find('\n')) != std::string::npos) {
      std::string line = report_pending_.substr(0, nl);
      report_pending_.erase(0, nl + 1);
      long long rank = -1, ns = 0;
      if (std::sscanf(line.c_str(), "%lld %lld", &rank, &ns) != 2 || rank < 0 ||
          rank >= static_cast<long long>(ranks_.size()) || ns <= 0) {
        continue;  // not ours to judge; the exit status still counts
      }
      Rank& r = ranks_[static_cast<std::size_t>(rank)];
      // steady_clock is CLOCK_MONOTONIC on Linux, the clock the ranks use.
      Clock::time_point t{std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns))};
      if (!r.failed_at || t < *r.failed_at) r.failed_at = t;
    }
    if (report_pending_.size() > 65536) report_pending_.clear();  // garbage
  }

  /// Closes `fd` if open and marks it closed.
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  /// Everything before the first fork: descriptor limit, MASTER_PORT, the
  /// environment shared by all ranks, /dev/null, signal handlers. Returns 0
  /// or an exit status.
  int prepare() {
    int rc = raise_file_limit();
    if (rc == 0) rc = export_job_environment();
    if (rc == 0) rc = open_failure_report_pipe();
    if (rc == 0) rc = export_job_token();
    if (rc == 0) rc = open_launcher_fds();
    if (rc == 0) rc = install_signal_handlers();
    return rc;
  }

  /// Each rank costs two descriptors for its output pipes, plus a few while
  /// it starts: raises the soft RLIMIT_NOFILE if N needs it (ranks get the
  /// original limit back). Returns 0 or an exit status.
  int raise_file_limit() {
    ::getrlimit(RLIMIT_NOFILE, &original_nofile_);
    rlim_t needed = static_cast<rlim_t>(opts_.prefix ? 2 * opts_.nproc : 0) + 64;
    if (original_nofile_.rlim_cur != RLIM_INFINITY && original_nofile_.rlim_cur < needed) {
      rlimit raised = original_nofile_;
      raised.rlim_cur =
          original_nofile_.rlim_max == RLIM_INFINITY ? needed : std::min(needed, original_nofile_.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &raised);
      rlimit now{};
      ::getrlimit(RLIMIT_NOFILE, &now);
      if (now.rlim_cur < needed) {
        log_line("cannot open enough files for " + std::to_string(opts_.nproc) +
                 " ranks: the open-file limit (ulimit -n) is " + std::to_string(now.rlim_cur) + ", about " +
                 std::to_string(needed) + " are needed");
        return kExitInternal;
      }
    }
    return 0;
  }

  /// Exports the environment common to all ranks (WORLD_SIZE, MASTER_ADDR,
  /// MASTER_PORT, ...); RANK and LOCAL_RANK are set per rank just before its
  /// fork, so the child does no allocation. Returns 0 or an exit status.
  int export_job_environment() {
    int port = opts_.master_port;
    if (port == 0) {
      std::string error;
      auto free_port = pick_free_port(error);
      if (!free_port) {
        log_line("cannot find a free port for MASTER_PORT (" + error + "); pass --master-port");
        return kExitInternal;
      }
      port = *free_port;
    }
    const std::string n = std::to_string(opts_.nproc);
    const std::string p = std::to_string(port);
    if (::setenv("WORLD_SIZE", n.c_str(), 1) != 0 || ::setenv("LOCAL_WORLD_SIZE", n.c_str(), 1) != 0 ||
        ::setenv("MASTER_ADDR", opts_.master_addr.c_str(), 1) != 0 || ::setenv("MASTER_PORT", p.c_str(), 1) != 0 ||
        ::setenv("OMNICCL_LAUNCHER", "omniccl-run", 1) != 0 || ::setenv("PYTHONUNBUFFERED", "1", 0) != 0 ||
        ::setenv("OMNICCL_JOB_ID", fresh_job_id().c_str(), 0) != 0) {
      log_line(std::string("setenv: ") + std::strerror(errno));
      return kExitInternal;
    }
    return 0;
  }

  /// Opens the failure-report pipe, whose write end the ranks inherit, and
  /// exports where it is. Returns 0 or an exit status.
  int open_failure_report_pipe() {
    int report[2];
    if (::pipe2(report, O_NONBLOCK) != 0 || ::fcntl(report[0], F_SETFD, FD_CLOEXEC) != 0) {
      log_line(std::string("pipe: ") + std::strerror(errno));
      return kExitInternal;
    }
    report_read_ = report[0];
    report_write_ = report[1];
    // OMNICCL_RUN_FAILURE_PIPE ("pipe:[INODE]", as /proc/self/fd/N reads)
    // lets a rank check that descriptor N is still this pipe: a process the
    // rank started may have the variable but a reused descriptor number.
    const std::string report_fd = std::to_string(report_write_);
    struct stat st {};
    const std::string report_pipe =
        ::fstat(report_write_, &st) == 0 ? "pipe:[" + std::to_string(st.st_ino) + "]" : std::string();
    if (::setenv("OMNICCL_RUN_FAILURE_FD", report_fd.c_str(), 1) != 0 ||
        ::setenv("OMNICCL_RUN_FAILURE_PIPE", report_pipe.c_str(), 1) != 0) {
      log_line(std::string("setenv: ") + std::strerror(errno));
      return kExitInternal;
    }
    return 0;
  }

  /// Exports a fresh job token (unless the caller gave one), so the ranks'
  /// rendezvous is authenticated without the user doing anything
  /// (SECURITY.md). Returns 0 or an exit status.
  static int export_job_token() {
    const char* given = std::getenv("OMNICCL_JOB_TOKEN");
    if (given != nullptr && *given != '\0') return 0;
    unsigned char raw[32];
    size_t got = 0;
    while (got < sizeof raw) {
      ssize_t r = ::getrandom(raw + got, sizeof raw - got, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        log_line(std::string("getrandom: ") + std::strerror(errno));
        return kExitInternal;
      }
      got += static_cast<size_t>(r);
    }
    static const char kHex[] = "0123456789abcdef";
    std::string token;
    for (unsigned char b : raw) {
      token.push_back(kHex[b >> 4]);
      token.push_back(kHex[b & 15]);
    }
    if (::setenv("OMNICCL_JOB_TOKEN", token.c_str(), 1) != 0) {
      log_line(std::string("setenv: ") + std::strerror(errno));
      return kExitInternal;
    }
    return 0;
  }

  /// Opens /dev/null (stdin of the ranks that do not read the launcher's)
  /// and the self-pipe the signal handlers write to. Returns 0 or an exit
  /// status.
  int open_launcher_fds() {
    devnull_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull_ < 0) {
      log_line(std::string("cannot open /dev/null: ") + std::strerror(errno));
      return kExitInternal;
    }
    stdin_for_rank0_ = ::isatty(STDIN_FILENO) == 0;

    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      log_line(std::string("pipe: ") + std::strerror(errno));
      return kExitInternal;
    }
    signal_pipe_read_ = fds[0];
    g_signal_pipe_write = fds[1];
    return 0;
  }

  /// Installs on_signal for the forwarded, job-control and child signals and
  /// ignores SIGPIPE, remembering every original disposition so each rank can
  /// get it back before exec. Returns 0 or an exit status.
  int install_signal_handlers() {
    ::sigprocmask(SIG_SETMASK, nullptr, &original_mask_);
    sigemptyset(&handled_);

    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: every blocking call handles EINTR

    /// Installs `act` for `sig` unless it was ignored at start and
    /// `keep_ignored`; records the original disposition.
    auto install = [&](int sig, const struct sigaction& act, bool keep_ignored) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0) return false;
      if (keep_ignored && old.sa_handler == SIG_IGN) return true;
      if (::sigaction(sig, &act, nullptr) != 0) return false;
      saved_actions_.emplace_back(sig, old);
      sigaddset(&handled_, sig);
      return true;
    };

    bool ok = true;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP}) {
      ok = ok && install(sig, action, /*keep_ignored=*/true);
    }
    ok = ok && install(SIGCONT, action, /*keep_ignored=*/false);
    struct sigaction child_action = action;
    child_action.sa_flags = SA_NOCLDSTOP;
    // Installed even if SIGCHLD was ignored: with SIG_IGN the kernel would
    // reap the ranks itself and their exit statuses would be lost.
    ok = ok && install(SIGCHLD, child_action, /*keep_ignored=*/false);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ok = ok && install(SIGPIPE, ignore, /*keep_ignored=*/false);
    if (!ok) {
      log_line(std::string("sigaction: ") + std::strerror(errno));
      return kExitInternal;
    }
    return 0;
  }

  /// Forks and execs all ranks. Each fork happens with the handled signals
  /// blocked, so no handler can run in the child before it restored the
  /// original dispositions. The child reports an exec failure through a
  /// close-on-exec pipe; then the launcher stops the ranks already started
  /// and returns 126/127. Returns 0 when all ranks run.
  int start_ranks() {
    if (std::string hint = python_script_hint(); !hint.empty()) {
      log_line(hint);
      return kExitCannotExecute;
    }
    ranks_.resize(static_cast<std::size_t>(opts_.nproc));
    // --bind-to: by default each rank gets a CPU of its own when there are
    // enough, so two busy ranks never share one while another idles (the
    // scheduler may start them on one CPU and take milliseconds to part them);
    // round-robin when ranks outnumber the CPUs, so the first round of a
    // pairwise exchange (rank ^ 1) always pairs ranks on two CPUs (4 ranks on
    // 2 cores: 8 B barrier 2.6 us bound against 2.5-13 us unbound).
    cpus_ = allowed_cpus();
    if (!opts_.bind) cpus_.clear();
    for (int i = 0; i < opts_.nproc; ++i) {
      Rank& r = ranks_[static_cast<std::size_t>(i)];
      r.index = i;
      r.prefix = "[" + std::to_string(i) + "] ";
      int rc = start_rank(r);
      if (rc != 0) {
        abort_started_ranks();
        return rc;
      }
    }
    return 0;
  }

  /// For PROGRAM "x.py" that the system cannot run by itself (not executable,
  /// or no "#!" line, which execvp would hand to /bin/sh): how to run it.
  /// Empty otherwise.
  std::string python_script_hint() const {
    const std::string program = opts_.program[0];
    if (program.size() < 4 || program.compare(program.size() - 3, 3, ".py") != 0) return {};
    if (program.find('/') == std::string::npos && ::access(program.c_str(), F_OK) != 0) {
      return {};  // not a file here: execvp searches PATH and reports
    }
    char head[2] = {0, 0};
    int fd = ::open(program.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};  // execvp reports why
    ssize_t n = ::read(fd, head, sizeof head);
    ::close(fd);
    const bool shebang = n == 2 && head[0] == '#' && head[1] == '!';
    if (shebang && ::access(program.c_str(), X_OK) == 0) return {};
    const std::string n_ranks = std::to_string(opts_.nproc);
    return "'" + program + "' is a Python script " +
           (shebang ? std::string("that is not executable") : std::string("without a '#!' line")) +
           "; run it with Python: omniccl-run -n " + n_ranks + " python3 " + program +
           "   (or: python3 -m omniccl.run -n " + n_ranks + " " + program + ")";
  }

  /// The pipes of one rank being started: its stdout and stderr (with
  /// prefixing), and the close-on-exec pipe through which the child reports
  /// a failed exec (errno); -1 where not open in the launcher.
  struct RankPipes {
    int out[2] = {-1, -1};
    int err[2] = {-1, -1};
    int exec[2] = {-1, -1};

    /// Closes whichever of the pipes are still open in the launcher.
    void close_all() {
      for (int* p : {out, err, exec}) {
        close_fd(p[0]);
        close_fd(p[1]);
      }
    }
  };

  /// Starts one rank; returns 0, or an exit status after reporting the error
  /// (the failed child, if any, has been reaped).
  int start_rank(Rank& r) {
    const std::string rank = std::to_string(r.index);
    if (::setenv("RANK", rank.c_str(), 1) != 0 || ::setenv("LOCAL_RANK", rank.c_str(), 1) != 0) {
      log_line(std::string("setenv: ") + std::strerror(errno));
      return kExitInternal;
    }
    RankPipes pipes;
    bool piped = ::pipe2(pipes.exec, O_CLOEXEC) == 0;
    if (piped && opts_.prefix) {
      piped = ::pipe2(pipes.out, O_CLOEXEC) == 0 && ::pipe2(pipes.err, O_CLOEXEC) == 0;
    }
    if (!piped) {
      log_line(std::string("cannot create pipes for rank ") + rank + ": " + std::strerror(errno));
      pipes.close_all();
      return kExitInternal;
    }
    int fork_errno = 0;
    const pid_t pid = fork_rank(r, pipes, fork_errno);
    if (pid < 0) {
      log_line("cannot start rank " + rank + ": fork: " + std::strerror(fork_errno));
      pipes.close_all();
      return kExitInternal;
    }
    // Also set the group here: whichever of parent and child runs first, the
    // group exists before the launcher could signal it. EACCES after the
    // child's exec is harmless (the child set it itself).
    (void)::setpgid(pid, pid);
    r.pid = pid;
    r.running = true;
    if (int rc = await_exec(r, pipes); rc != 0) return rc;
    if (opts_.prefix) adopt_output(r, pipes);
    return 0;
  }

  /// Forks rank r, which execs PROGRAM (exec_rank). The fork happens with
  /// the handled signals blocked, so no handler runs in the child before it
  /// restored the original dispositions. Returns the child's pid, or -1 with
  /// fork's errno in `fork_errno`.
  pid_t fork_rank(const Rank& r, const RankPipes& pipes, int& fork_errno) {
    sigset_t blocked = original_mask_;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sigismember(&handled_, sig) == 1) sigaddset(&blocked, sig);
    }
    sigset_t before;
    ::sigprocmask(SIG_BLOCK, &blocked, &before);
    const pid_t launcher_pid = ::getpid();
    std::optional<OneCpu> cpu;
    if (!cpus_.empty()) cpu.emplace(cpus_[static_cast<std::size_t>(r.index) % cpus_.size()]);
    pid_t pid = ::fork();
    if (pid == 0) {
      if (cpu && cpu->set) (void)::sched_setaffinity(0, cpu->bytes, cpu->set.get());
      exec_rank(r.index, launcher_pid, pipes.out[1], pipes.err[1], pipes.exec[1]);
    }
    fork_errno = errno;
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    return pid;
  }

  /// Waits until rank r has exec'd PROGRAM (its exec pipe closes) or failed
  /// to (it sends errno). Returns 0, or after a failed exec, with the child
  /// reaped and reported, 127 (not found) or 126.
  int await_exec(Rank& r, RankPipes& pipes) {
    close_fd(pipes.exec[1]);
    int child_errno = 0;
    ssize_t n;
    do {
      n = ::read(pipes.exec[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    close_fd(pipes.exec[0]);
    if (n != static_cast<ssize_t>(sizeof child_errno)) return 0;
    // exec failed; the child has _exit()ed already or is about to.
    int status = 0;
    while (::waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {}
    r.running = false;
    pipes.close_all();
    log_line("cannot execute '" + std::string(opts_.program[0]) + "': " + std::strerror(child_errno));
    return child_errno == ENOENT ? kExitNotFound : kExitCannotExecute;
  }

  /// With prefixing: keeps the read ends of rank r's stdout and stderr
  /// pipes, closing the write ends the rank has.
  static void adopt_output(Rank& r, RankPipes& pipes) {
    close_fd(pipes.out[1]);
    close_fd(pipes.err[1]);
    // Only the launcher's read ends are non-blocking; the ranks' write ends
    // stay blocking, as a normal stdout is.
    (void)::fcntl(pipes.out[0], F_SETFL, O_NONBLOCK);
    (void)::fcntl(pipes.err[0], F_SETFL, O_NONBLOCK);
    r.out = Stream{pipes.out[0], STDOUT_FILENO, {}};
    r.err = Stream{pipes.err[0], STDERR_FILENO, {}};
  }

  /// In the forked child: own process group, parent-death signal, original
  /// signal dispositions and mask and file limit, stdio redirection, then
  /// execvp. Only async-signal-safe calls. Never returns.
  [[noreturn]] void exec_rank(int index, pid_t launcher_pid, int out_fd, int err_fd, int exec_status_fd) {
    (void)::setpgid(0, 0);
    (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher_pid) ::_exit(kExitInternal);  // already orphaned
    for (const auto& [sig, old] : saved_actions_) {
      (void)::sigaction(sig, &old, nullptr);
    }
    if (index != 0 || !stdin_for_rank0_) (void)::dup2(devnull_, STDIN_FILENO);
    if (out_fd >= 0) (void)::dup2(out_fd, STDOUT_FILENO);
    if (err_fd >= 0) (void)::dup2(err_fd, STDERR_FILENO);
    (void)::setrlimit(RLIMIT_NOFILE, &original_nofile_);
    ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    ::execvp(opts_.program[0], opts_.program);
    int e = errno;
    ssize_t n = ::write(exec_status_fd, &e, sizeof e);
    (void)n;
    ::_exit(e == ENOENT ? kExitNotFound : kExitCannotExecute);
  }

  /// After a start-up failure: SIGKILLs the ranks already started and reaps
  /// them (SIGKILL cannot be caught, so each wait is short).
  void abort_started_ranks() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      signal_rank(r, SIGKILL);
      int status = 0;
      while (::waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {}
      r.running = false;
    }
  }

  /// Sends `sig` to the rank's process group, or to the rank alone if it has
  /// moved itself to another group. No-op for ranks already reaped (their
  /// pid may have been reused).
  static void signal_rank(const Rank& r, int sig) {
    if (!r.running) return;
    if (::getpgid(r.pid) == r.pid && ::kill(-r.pid, sig) == 0) return;
    (void)::kill(r.pid, sig);
  }

  /// Returns the indices of the ranks still running.
  std::vector<int> running_ranks() const {
    std::vector<int> out;
    for (const Rank& r : ranks_) {
      if (r.running) out.push_back(r.index);
    }
    return out;
  }

  /// Whether any rank output pipe is still open.
  bool any_stream_open() const {
    for (const Rank& r : ranks_) {
      if (r.out.fd >= 0 || r.err.fd >= 0) return true;
    }
    return false;
  }

  /// Teardown by the launcher: sends `sig` to every running rank, marks them
  /// as ended by the launcher (their deaths are then not reported one by one)
  /// and arms the SIGKILL escalation if `sig` is SIGTERM.
  void terminate_running(int sig) {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      signal_rank(r, sig);
      r.ended_by_launcher = true;
    }
    if (sig == SIGTERM && !kill_at_) kill_at_ = Clock::now() + kKillDelay;
    if (sig == SIGKILL) kill_at_.reset();
  }

  /// The main loop: poll the self-pipe and the output pipes (1 s at most),
  /// react to signals, output, exits and deadlines, until every rank is
  /// reaped and its output drained.
  void loop() {
    std::vector<pollfd> fds;
    std::vector<Stream*> streams;
    std::vector<const Rank*> owners;
    for (;;) {
      const Clock::time_point now = Clock::now();
      check_deadlines(now);
      if (running_ranks().empty()) {
        if (!any_stream_open()) break;
        // All ranks exited but something (a helper they started) still holds
        // a pipe open: give it a moment to finish writing, then stop waiting.
        if (!drain_at_) drain_at_ = now + kDrainDelay;
        if (now >= *drain_at_) break;
      }

      fds.clear();
      streams.clear();
      owners.clear();
      fds.push_back(pollfd{signal_pipe_read_, POLLIN, 0});
      fds.push_back(pollfd{report_read_, POLLIN, 0});
      for (Rank& r : ranks_) {
        for (Stream* s : {&r.out, &r.err}) {
          if (s->fd < 0) continue;
          fds.push_back(pollfd{s->fd, POLLIN, 0});
          streams.push_back(s);
          owners.push_back(&r);
        }
      }
      int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(now));
      if (rc < 0 && errno != EINTR) {
        log_line(std::string("poll: ") + std::strerror(errno) + "; killing all ranks");
        terminate_running(SIGKILL);
        reap_blocking();
        if (!first_failure_status_) first_failure_status_ = kExitInternal;
        break;
      }
      if (rc > 0) {
        if (fds[0].revents != 0) handle_signals();
        if (fds[1].revents != 0) read_failure_reports();
        for (std::size_t k = 2; k < fds.size(); ++k) {
          if (fds[k].revents != 0) (void)pump(*streams[k - 2], owners[k - 2]->prefix);
        }
      }
      reap();
    }
    finish();
  }

  /// Milliseconds until the nearest deadline, capped at kMaxPollMs.
  int poll_timeout_ms(Clock::time_point now) const {
    auto ms = std::chrono::milliseconds(kMaxPollMs);
    for (const auto& deadline : {timeout_at_, grace_at_, kill_at_, drain_at_}) {
      if (!deadline) continue;
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now);
      ms = std::max(std::chrono::milliseconds(0), std::min(ms, left));
    }
    return static_cast<int>(ms.count());
  }

  /// Acts on --timeout, the end of the --grace period and the SIGKILL
  /// escalation when their time has come.
  void check_deadlines(Clock::time_point now) {
    if (timeout_at_ && now >= *timeout_at_) {
      timeout_at_.reset();
      std::vector<int> running = running_ranks();
      if (!running.empty()) {
        timed_out_ = true;
        grace_at_.reset();
        log_line("timeout: the job ran longer than " + format_seconds(*opts_.timeout_s) +
                 " s; still running: " + join_ranks(running) + "; sending SIGTERM");
        terminate_running(SIGTERM);
      }
    }
    if (grace_at_ && now >= *grace_at_) {
      grace_at_.reset();
      std::vector<int> running = running_ranks();
      if (!running.empty()) {
        const Rank* first = first_failed();
        log_line("still running " + format_seconds(opts_.grace_s) + " s (--grace) after rank " +
                 std::to_string(first != nullptr ? first->index : first_failed_rank_) +
                 " failed: " + join_ranks(running) + "; sending SIGTERM");
        terminate_running(SIGTERM);
      }
    }
    if (kill_at_ && now >= *kill_at_) {
      kill_at_.reset();
      std::vector<int> running = running_ranks();
      if (!running.empty()) {
        log_line("still running " +
                 std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kKillDelay).count()) +
                 " s after SIGTERM: " + join_ranks(running) + "; sending SIGKILL");
        terminate_running(SIGKILL);
      }
    }
  }

  /// Reads the self-pipe and acts on each signal received: forwards the
  /// terminating ones, kills on a second SIGINT, relays job control.
  void handle_signals() {
    unsigned char buf[256];
    for (int round = 0; round < 64; ++round) {  // bounded; the rest waits
      ssize_t n = ::read(signal_pipe_read_, buf, sizeof buf);
      if (n <= 0) break;
      for (ssize_t k = 0; k < n; ++k) on_launcher_signal(buf[k]);
      if (n < static_cast<ssize_t>(sizeof buf)) break;
    }
  }

  /// Handles one signal the launcher received.
  void on_launcher_signal(int sig) {
    switch (sig) {
      case SIGCHLD: return;  // reap() runs after every poll anyway
      case SIGCONT:
        for (const Rank& r : ranks_) signal_rank(r, SIGCONT);
        return;
      case SIGTSTP:
        // Stop the ranks, then ourselves (SIGSTOP, since SIGTSTP is caught).
        // On 'fg'/'bg' the shell sends SIGCONT, which is relayed above.
        for (const Rank& r : ranks_) signal_rank(r, SIGTSTP);
        (void)::kill(::getpid(), SIGSTOP);
        return;
      default: break;
    }
    std::vector<int> running = running_ranks();
    if (sig == SIGINT && got_sigint_) {
      if (!running.empty()) {
        log_line("second SIGINT: killing " + join_ranks(running) + " with SIGKILL");
      }
      terminate_running(SIGKILL);
      return;
    }
    if (sig == SIGINT) got_sigint_ = true;
    if (running.empty()) return;
    log_line("received " + signal_name(sig) + "; forwarding it to " + join_ranks(running) +
             (sig == SIGINT ? " (press Ctrl-C again to kill them)" : ""));
    for (const Rank& r : ranks_) signal_rank(r, sig);
  }

  /// Reads once from a rank's stream and prints its complete lines. Returns
  /// the number of bytes read (0 on EOF, would-block or error; the stream is
  /// closed on EOF or error).
  std::size_t pump(Stream& s, const std::string& prefix) {
    if (s.fd < 0) return 0;
    char buf[65536];
    ssize_t n = ::read(s.fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    }
    if (n <= 0) {
      close_stream(s, prefix);
      return 0;
    }
    s.pending.append(buf, static_cast<std::size_t>(n));
    emit_lines(s, prefix, /*final=*/false);
    return static_cast<std::size_t>(n);
  }

  /// Prints the complete lines buffered in `s`, each with `prefix`, in one
  /// write. With `final`, a trailing partial line is printed too, completed
  /// with a newline; a line longer than kMaxLine is printed in pieces.
  void emit_lines(Stream& s, const std::string& prefix, bool final) {
    std::string out;
    std::size_t start = 0;
    for (;;) {
      std::size_t nl = s.pending.find('\n', start);
      if (nl == std::string::npos) break;
      out += prefix;
      out.append(s.pending, start, nl + 1 - start);
      start = nl + 1;
    }
    s.pending.erase(0, start);
    if (!s.pending.empty() && (final || s.pending.size() >= kMaxLine)) {
      out += prefix;
      out += s.pending;
      out += '\n';
      s.pending.clear();
    }
    if (!out.empty()) write_output(s.out_fd, out);
  }

  /// Writes rank output to the launcher's stdout or stderr. When that is a
  /// closed pipe (EPIPE), closes the ranks' pipes for that stream, so that
  /// they get SIGPIPE as in a shell pipeline; on other errors, drops the
  /// output from then on but keeps reading so the ranks never block.
  void write_output(int out_fd, const std::string& data) {
    bool& broken = out_fd == STDOUT_FILENO ? stdout_broken_ : stderr_broken_;
    if (broken) return;
    if (write_all(out_fd, data)) return;
    int e = errno;
    broken = true;
    if (e != EPIPE) return;
    for (Rank& r : ranks_) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->out_fd != out_fd) continue;
        close_fd(s->fd);
        s->pending.clear();
      }
    }
  }

  /// Flushes a stream's partial line and closes it.
  void close_stream(Stream& s, const std::string& prefix) {
    if (s.fd < 0) return;
    emit_lines(s, prefix, /*final=*/true);
    close_fd(s.fd);  // may already be closed by write_output on EPIPE
    s.pending.clear();
  }

  /// Reads what is left in a rank's pipes (bounded), so that its last output
  /// is printed before the message about its exit.
  void drain(Rank& r) {
    for (Stream* s : {&r.out, &r.err}) {
      for (int round = 0; round < 64 && pump(*s, r.prefix) > 0; ++round) {}
    }
  }

  /// Collects every rank that has exited (non-blocking) and reports it. The
  /// ranks are the launcher's only children, so waitpid(-1) finds them all
  /// with one call per exited rank (plus one), however many ranks there are.
  void reap() {
    for (std::size_t round = 0; round <= ranks_.size(); ++round) {
      int status = 0;
      pid_t p = ::waitpid(-1, &status, WNOHANG);
      if (p < 0 && errno == EINTR) continue;
      if (p < 0) {
        // ECHILD while ranks count as running cannot happen (our SIGCHLD
        // handler keeps the kernel from auto-reaping); never wait forever.
        for (Rank& r : ranks_) {
          if (!r.running) continue;
          r.running = false;
          log_line("rank " + std::to_string(r.index) + " vanished: waitpid: " + std::strerror(ECHILD));
          on_rank_failed(r, kExitInternal);
        }
        break;
      }
      if (p == 0) break;  // nothing more has exited
      for (Rank& r : ranks_) {
        if (!r.running || r.pid != p) continue;
        r.running = false;
        drain(r);
        read_failure_reports();  // a report written just before exiting
        on_rank_exit(r, status);
        break;
      }
    }
  }

  /// Reaps all running ranks, waiting for each (used only after SIGKILL).
  void reap_blocking() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      int status = 0;
      while (::waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {}
      r.running = false;
      on_rank_exit(r, status);
    }
  }

  /// Reports a rank's end: nothing for exit status 0; otherwise a line on
  /// stderr (unless the launcher itself ended it) and the failure bookkeeping.
  void on_rank_exit(Rank& r, int status) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    std::string what;
    int code;
    if (WIFEXITED(status)) {
      code = WEXITSTATUS(status);
      what = "exited with status " + std::to_string(code);
    } else if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      code = 128 + sig;
      what = "killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
      if (WCOREDUMP(status)) what += ", core dumped";
    } else {
      code = kExitInternal;
      what = "ended with wait status " + std::to_string(status);
    }
    if (!r.ended_by_launcher) log_line("rank " + std::to_string(r.index) + " " + what);
    if (!r.failed_at) r.failed_at = Clock::now();
    r.failure_status = code;
    r.failure_what = what;
    on_rank_failed(r, code);
  }

  /// Failure bookkeeping: the first failure decides the exit status and
  /// starts the --grace period for the ranks still running.
  void on_rank_failed(const Rank& r, int code) {
    if (first_failure_status_) return;
    first_failure_status_ = code;
    first_failed_rank_ = r.index;
    if (timed_out_ || kill_at_) return;  // teardown already under way
    std::vector<int> running = running_ranks();
    if (running.empty()) return;
    if (opts_.grace_s <= 0) {
      log_line("--grace 0: sending SIGTERM to the other ranks still running, " + join_ranks(running));
      terminate_running(SIGTERM);
      return;
    }
    grace_at_ = Clock::now() + to_duration(opts_.grace_s);
    log_line("waiting up to " + format_seconds(opts_.grace_s) + " s (--grace) for " + join_ranks(running) +
             " to exit before sending SIGTERM");
  }

  /// After the last rank has exited: flushes and closes the remaining pipes
  /// and sends SIGTERM to any process left in a rank's process group.
  void finish() {
    for (Rank& r : ranks_) {
      close_stream(r.out, r.prefix);
      close_stream(r.err, r.prefix);
    }
    for (const Rank& r : ranks_) {
      if (r.pid <= 0) continue;
      // The rank (the group leader) is reaped, so the group id cannot have
      // been reused while members remain; kill(-pgid, 0) tests for them.
      if (::kill(-r.pid, 0) == 0) {
        log_line("rank " + std::to_string(r.index) + " left processes running after it exited; sending them SIGTERM");
        (void)::kill(-r.pid, SIGTERM);
      }
    }
  }

  Options opts_;
  std::vector<Rank> ranks_;
  std::vector<int> cpus_;  ///< rank i runs on cpus_[i % size]; empty: not bound
  std::vector<std::pair<int, struct sigaction>> saved_actions_;
  sigset_t original_mask_{};
  sigset_t handled_{};
  rlimit original_nofile_{};
  int signal_pipe_read_ = -1;
  int report_read_ = -1;   // failure reports from the ranks
  int report_write_ = -1;  // inherited by the ranks
  std::string report_pending_;
  int devnull_ = -1;
  bool stdin_for_rank0_ = false;
  bool stdout_broken_ = false;
  bool stderr_broken_ = false;
  bool got_sigint_ = false;
  bool timed_out_ = false;
  std::optional<int> first_failure_status_;
  int first_failed_rank_ = -1;
  std::optional<Clock::time_point> timeout_at_, grace_at_, kill_at_, drain_at_;
};

}  // namespace

/// Entry point: parse the command line, run the job, return its status.
int main(int argc, char** argv) {
  ensure_standard_fds();
  ParseOutcome parsed = parse_args(argc, argv);
  if (parsed.exit_status >= 0) return parsed.exit_status;
  Launcher launcher(std::move(parsed.options));
  return launcher.run();
}
