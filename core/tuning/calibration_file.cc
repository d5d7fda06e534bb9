#include "tuning/calibration_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "common/settings.h"
#include "common/status.h"

namespace omniccl::calibration_file {

namespace {
constexpr auto kLockWait = std::chrono::seconds(2);
}  // namespace

std::string machine_key() {
  utsname u{};
  if (::uname(&u) != 0) return "unknown";
  std::string key = str_cat(u.nodename, " ", u.release, " ", u.version);
  std::replace(key.begin(), key.end(), '\n', ' ');
  return key;
}

std::string path(const char* setting, const char* base) {
  if (auto v = get_setting(setting)) return *v;
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  struct stat st {};
  if (xdg != nullptr && *xdg == '/' && ::stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid()) {
    return str_cat(xdg, "/", base);
  }
  return str_cat("/tmp/", base, "-", ::geteuid());
}

std::optional<std::string> read(const std::string& path, std::string* why) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    *why = errno == ENOENT ? "no cache yet" : str_cat("cannot open ", path, ": ", std::strerror(errno));
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || st.st_size > 4096) {
    *why = str_cat(path, " is not a small regular file owned by this user and writable only by it");
    return std::nullopt;
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t k = ::read(fd.get(), text.data() + got, text.size() - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  text.resize(got);
  return text;
}

bool write(const std::string& path, const std::string& text, std::string* why) {
  std::random_device rd;
  std::string tmp = str_cat(path, ".tmp.", ::getpid(), ".", rd());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    *why = str_cat("cannot create ", tmp, ": ", std::strerror(errno));
    return false;
  }
  bool ok = ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  fd = UniqueFd();
  if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return true;
  if (ok) err = errno;
  ::unlink(tmp.c_str());
  *why = str_cat("cannot write ", path, ": ", std::strerror(err));
  return false;
}

UniqueFd lock(const std::string& path) {
  UniqueFd fd(::open(str_cat(path, ".lock").c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return fd;
  const auto until = std::chrono::steady_clock::now() + kLockWait;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || std::chrono::steady_clock::now() >= until) return UniqueFd();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return fd;
}

std::string format_rates(const char* magic, std::initializer_list<std::pair<const char*, double>> rates) {
  std::ostringstream os;
  os << magic << "\nmachine " << machine_key() << "\n";
  for (const auto& [name, rate] : rates) os << name << ' ' << rate << '\n';
  return os.str();
}

bool parse_rates(const std::string& text, const char* magic,
                 std::initializer_list<std::pair<const char*, double*>> fields) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != magic) return false;
  if (!std::getline(in, line) || line != str_cat("machine ", machine_key())) return false;
  for (const auto& [name, field] : fields) {
    const std::string prefix = str_cat(name, " ");
    if (!std::getline(in, line) || line.rfind(prefix, 0) != 0) return false;
    const std::string num = line.substr(prefix.size());
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(num.c_str(), &end);
    if (num.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v <= 0 || v > 1e4) return false;
    *field = v;
  }
  return !std::getline(in, line);  // nothing after the last rate
}

std::string rate_text(double gbps) {
  std::ostringstream os;
  os.precision(gbps < 10 ? 2 : 3);
  os << gbps;
  return os.str();
}

}  // namespace omniccl::calibration_file
