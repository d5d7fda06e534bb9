// File store: a directory on a (shared) file system, one file per key.
//
// Key file names are "k_" + the key with every byte outside [A-Za-z0-9._-]
// written as %XX; names that would exceed 240 bytes become "h_" + a prefix
// + "~" + a 128-bit hash of the key. set() writes a temp file and renames it
// over the key file (atomic; no fsync: rendezvous data need not survive a
// crash). get() polls for the file with short sleeps. add() serialises
// read-modify-write through flock() on the directory's "lock" file, which
// works between threads (separate open files) and processes alike.
//
// Liveness marks (mark_alive): "m_" + the key's encoding holds a counter line
// and the holder's description. The holder keeps an open-file-description
// write lock on it (fcntl F_OFD_SETLK: per open file, so ranks that are
// threads of one process work too) and a thread of its own rewrites the
// counter every interval. The kernel drops the lock when the holder dies
// (the file stays: it died) or closes it after removing the file (an
// orderly end). A peer tests the lock without taking it (F_OFD_GETLK), and
// watches the counter with its own clock: no clocks are compared across
// hosts.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "bootstrap/store.h"
#include "bootstrap/util.h"
#include "common/fd.h"
#include "common/hash.h"
#include "common/status.h"

namespace omniccl::bootstrap {

using detail::printable;

namespace {

/// The file name (no directory) that stores key.
std::string key_file_name(const std::string& key) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string name = "k_";
  for (unsigned char c : key) {
    bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (plain) {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
  }
  if (name.size() <= 240) return name;
  char hash[40];
  std::snprintf(hash, sizeof hash, "~%016llx%016llx", static_cast<unsigned long long>(Fnv1a().bytes(key).value()),
                static_cast<unsigned long long>(Fnv1a(0x84222325cbf29ce4ull).bytes(key).value()));
  return "h_" + name.substr(2, 180) + hash;
}

/// Writes all of data to fd; false with errno set on failure.
bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t r = ::write(fd, data.data() + done, data.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

/// Sleeps for `step` (at most until deadline) and doubles step up to 20 ms.
void backoff_sleep(std::chrono::milliseconds* step, Deadline deadline) {
  auto left = std::chrono::milliseconds(deadline.remaining_ms(20));
  std::this_thread::sleep_for(std::min(*step, left));
  *step = std::min(*step * 2, std::chrono::milliseconds(20));
}

/// Store in a directory; see the file comment.
class FileStore final : public Store {
 public:
  /// Uses directory dir (already created).
  FileStore(std::string dir, int64_t op_timeout_ms) : dir_(std::move(dir)), op_timeout_ms_(op_timeout_ms) {}

  /// Atomically replaces the key's file.
  void set(const std::string& key, const std::string& value) override { write_atomically(key, value); }

  ~FileStore() override {
    for (auto& [key, mark] : marks_) mark->stop();
  }

  /// Polls for the key's file until the deadline.
  std::string get(const std::string& key, Deadline deadline) override {
    const auto start = Clock::now();
    auto step = std::chrono::milliseconds(1);
    for (;;) {
      if (check_) check_();
      if (auto v = read_key(key)) return *v;
      if (deadline.expired()) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        fail(Status::kTimeout, "timed out after ", ms, " ms waiting for key '", printable(key), "' in file store ",
             dir_);
      }
      backoff_sleep(&step, deadline);
    }
  }

  /// Read-modify-write under the directory's lock file.
  int64_t add(const std::string& key, int64_t delta) override {
    UniqueFd lock = lock_dir();
    int64_t current = 0;
    if (auto v = read_key(key)) {
      auto parsed = detail::parse_int64(*v);
      if (!parsed) {
        fail(Status::kInvalidArgument, "add: the value of key '", printable(key), "' in file store ", dir_,
             " is not an integer ('", printable(*v), "')");
      }
      current = *parsed;
    }
    int64_t result = 0;
    if (__builtin_add_overflow(current, delta, &result)) {
      fail(Status::kInvalidArgument, "add: ", current, " + ", delta, " overflows int64 for key '", printable(key), "'");
    }
    write_atomically(key, std::to_string(result));
    return result;  // `lock` closes here, releasing the flock
  }

  /// Whether the key's file exists.
  bool check(const std::string& key) override {
    struct stat st;
    if (::stat(path_of(key).c_str(), &st) == 0) return true;
    if (errno == ENOENT) return false;
    fail_errno(str_cat("file store: stat of key '", printable(key), "' in ", dir_), errno);
  }

  /// Unlinks the key's file (absent is fine).
  void erase(const std::string& key) override {
    if (::unlink(path_of(key).c_str()) != 0 && errno != ENOENT) {
      fail_errno(str_cat("file store: removing key '", printable(key), "' in ", dir_), errno);
    }
  }

  /// Runs `check` while get() polls.
  void set_wait_check(std::function<void()> check) override { check_ = std::move(check); }

  /// Makes the mark locked under a temporary name, then renames it into
  /// place: a peer never sees it unlocked while its holder lives.
  void mark_alive(const std::string& key, const std::string& who, int64_t interval_ms) override {
    unmark_alive(key);
    const std::string path = mark_path(key);
    const std::string tmp = str_cat(path, ".tmp.", ::getpid(), ".", std::random_device{}());
    auto mark = std::make_unique<Mark>();
    mark->path = path;
    mark->fd = UniqueFd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!mark->fd.valid()) fail_errno(str_cat("file store: creating liveness mark ", tmp), errno);
    struct flock lk = {};
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    if (::fcntl(mark->fd.get(), F_OFD_SETLK, &lk) != 0 || !write_all(mark->fd.get(), str_cat(counter_text(0), who)) ||
        ::rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      fail_errno(str_cat("file store: making liveness mark ", path), err);
    }
    Mark* m = mark.get();
    mark->thread = std::thread([m, interval_ms] { m->refresh(interval_ms); });
    marks_[key] = std::move(mark);
  }

  /// Removes the mark first, then releases its lock.
  void unmark_alive(const std::string& key) override {
    auto it = marks_.find(key);
    if (it == marks_.end()) return;
    it->second->stop();
    ::unlink(it->second->path.c_str());
    marks_.erase(it);
  }

  /// Tests the mark's lock without taking it, and watches its counter.
  MarkState probe_mark(const std::string& key, int64_t silence_ms) override {
    const std::string path = mark_path(key);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return {};  // none (yet), or removed at an orderly end
    struct flock lk = {};
    lk.l_type = F_RDLCK;
    lk.l_whence = SEEK_SET;
    if (::fcntl(fd.get(), F_OFD_GETLK, &lk) != 0) return {};
    std::string text;
    char buf[4096];
    ssize_t r = ::pread(fd.get(), buf, sizeof buf, 0);
    if (r > 0) text.assign(buf, static_cast<size_t>(r));
    const size_t nl = text.find('\n');
    const std::string counter = text.substr(0, nl);
    MarkState st;
    st.who = nl == std::string::npos ? std::string("a rank") : text.substr(nl + 1);
    if (lk.l_type == F_UNLCK) {
      struct stat sb;
      if (::fstat(fd.get(), &sb) == 0 && sb.st_nlink == 0) return {};  // removed: an orderly end
      st.kind = MarkState::Kind::kDied;
      return st;
    }
    auto& seen = seen_[key];
    const auto now = Clock::now();
    if (seen.first != counter) {
      seen = {counter, now};
    } else if (silence_ms > 0 && now - seen.second > std::chrono::milliseconds(silence_ms)) {
      st.kind = MarkState::Kind::kStopped;
      return st;
    }
    return {};
  }

 private:
  /// This process's mark of one key (mark_alive) and its refreshing thread.
  struct Mark {
    std::string path;
    UniqueFd fd;
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;

    /// Rewrites the counter every interval_ms until stop().
    void refresh(int64_t interval_ms) {
      uint64_t n = 0;
      std::unique_lock<std::mutex> lock(mu);
      while (!cv.wait_for(lock, std::chrono::milliseconds(interval_ms), [&] { return stopping; })) {
        const std::string text = counter_text(++n);
        ssize_t w = ::pwrite(fd.get(), text.data(), text.size(), 0);
        (void)w;  // a full disk shows up as silence, which is what it is
      }
    }
    void stop() {
      {
        std::lock_guard<std::mutex> lock(mu);
        stopping = true;
      }
      cv.notify_all();
      if (thread.joinable()) thread.join();
    }
  };

  /// A fixed-width counter line (so a rewrite replaces it in place).
  static std::string counter_text(uint64_t n) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%020llu\n", static_cast<unsigned long long>(n));
    return buf;
  }

  /// Full path of the mark of key.
  std::string mark_path(const std::string& key) const { return dir_ + "/m" + key_file_name(key).substr(1); }

  /// Full path of the key's file.
  std::string path_of(const std::string& key) const { return dir_ + "/" + key_file_name(key); }

  /// The key's value, or nullopt when its file does not exist (yet).
  std::optional<std::string> read_key(const std::string& key) const {
    UniqueFd fd(::open(path_of(key).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return std::nullopt;
      fail_errno(str_cat("file store: opening key '", printable(key), "' in ", dir_), errno);
    }
    std::string out;
    char buf[64 * 1024];
    for (;;) {
      ssize_t r = ::read(fd.get(), buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        fail_errno(str_cat("file store: reading key '", printable(key), "' in ", dir_), errno);
      }
      if (r == 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }

  /// Writes value to a unique temp file and renames it over the key's file.
  void write_atomically(const std::string& key, const std::string& value) const {
    static std::atomic<uint64_t> counter{0};
    static const uint64_t salt = std::random_device{}();
    const std::string tmp = str_cat(dir_, "/.tmp.", ::getpid(), ".", salt, ".", counter++);
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd.valid()) {
      fail_errno(str_cat("file store: creating ", tmp, " for key '", printable(key), "'"), errno);
    }
    bool ok = write_all(fd.get(), value);
    int err = errno;
    if (ok && ::close(fd.release()) != 0) {
      ok = false;
      err = errno;
    }
    if (ok && ::rename(tmp.c_str(), path_of(key).c_str()) != 0) {
      ok = false;
      err = errno;
    }
    if (!ok) {
      fd.reset();
      ::unlink(tmp.c_str());
      fail_errno(str_cat("file store: writing key '", printable(key), "' in ", dir_), err);
    }
  }

  /// Takes the directory's exclusive lock, waiting at most the op timeout.
  UniqueFd lock_dir() const {
    const std::string path = dir_ + "/lock";
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) fail_errno(str_cat("file store: opening lock file ", path), errno);
    Deadline deadline = Deadline::after_ms(op_timeout_ms_);
    auto step = std::chrono::milliseconds(1);
    for (;;) {
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return fd;
      if (errno != EWOULDBLOCK && errno != EINTR) {
        fail_errno(str_cat("file store: locking ", path), errno);
      }
      if (deadline.expired()) {
        fail(Status::kTimeout, "file store: timed out after ", op_timeout_ms_, " ms waiting for the lock ", path,
             " (held by a stuck process?)");
      }
      backoff_sleep(&step, deadline);
    }
  }

  std::string dir_;
  int64_t op_timeout_ms_;
  std::function<void()> check_;
  std::map<std::string, std::unique_ptr<Mark>> marks_;
  /// probe_mark: the counter last seen per key, and since when.
  std::map<std::string, std::pair<std::string, Clock::time_point>> seen_;
};

}  // namespace

std::unique_ptr<Store> open_file_store(const std::string& dir) {
  check_arg(!dir.empty(), "file store directory is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    fail(Status::kSystem, "cannot create file store directory '", dir, "': ", ec.message());
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    fail(Status::kInvalidArgument, "file store path '", dir, "' is not a directory");
  }
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return std::make_unique<FileStore>(d, detail::default_op_timeout_ms());
}

}  // namespace omniccl::bootstrap
