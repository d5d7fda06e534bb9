// A rendezvous that failed, told to ranks of its job that arrive after it.
//
// Rank 0 serves the rendezvous; when it fails there (a member died), it
// tells the ranks waiting on its server and exits, usually at once. A rank
// of the job that starts later then finds no server, which looks exactly like
// a rank 0 that has not started yet, and would wait for its whole deadline.
// So rank 0 also leaves a small note on its host, in /dev/shm like the
// shared-memory segments and named like them (its pid namespace and pid, so
// that the next job on the host, or omniccl-run at the end of this one,
// removes it once rank 0 is gone), saying which job's rendezvous at which
// port failed and why. A rank that finds no server looks for a note of its
// own job, for its port, younger than its deadline, and fails at once with
// the reason. Only where the job has an identity (a launcher's, or
// OMNICCL_JOB_ID; torchrun's and Slurm's restart counts are part of it): two
// plain env:// jobs on one port cannot be told apart, and a later job must
// never take an earlier one's failure for its own. Ranks on other hosts
// cannot see the note and still wait for their deadline. The note is meant
// to outlive rank 0, so it is not among the names a terminating signal
// removes (signal_cleanup.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include "bootstrap/rendezvous.h"
#include "common/fd.h"
#include "common/settings.h"
#include "common/shared_memory.h"

namespace omniccl::bootstrap {

namespace {

constexpr size_t kMaxNote = 4096;

/// The identity a note must carry to count: the job id with the launchers'
/// restart counts (a restarted job keeps its id); "" when the job has none.
std::string job_identity() {
  const std::string id = job_id();
  if (id.empty()) return {};
  return str_cat(id, "|", get_setting("TORCHELASTIC_RESTART_COUNT").value_or(""), "|",
                 get_setting("SLURM_RESTART_COUNT").value_or(""));
}

/// Whether a /dev/shm entry is a note for `port` ("omniccl.<ns>-<pid>.rdzv.<port>").
bool is_note_for(const std::string& name, uint16_t port) {
  const std::string tail = str_cat(".rdzv.", port);
  return name.starts_with("omniccl.") && name.size() > tail.size() && name.ends_with(tail);
}

/// The note's text if `name` (in /dev/shm) is this user's regular file.
std::optional<std::string> read_note(int dir_fd, const char* name) {
  UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    return std::nullopt;
  }
  std::string text(kMaxNote, '\0');
  const ssize_t n = ::read(fd.get(), text.data(), text.size());
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  return text;
}

}  // namespace

void leave_failure_note(uint16_t port, const std::string& why) {
  const std::string identity = job_identity();
  if (identity.empty()) return;
  const std::string path = "/dev/shm" + shm_object_name("rdzv", std::to_string(port));
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return;  // best effort: the late ranks then wait for their deadline
  const std::string text = str_cat(identity, "\n", why.substr(0, kMaxNote / 2));
  ssize_t w = ::write(fd.get(), text.data(), text.size());
  (void)w;
}

std::optional<std::string> find_failure_note(uint16_t port, int64_t younger_than_ms) {
  const std::string identity = job_identity();
  if (identity.empty()) return std::nullopt;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return std::nullopt;
  std::optional<std::string> found;
  const time_t now = ::time(nullptr);
  while (const dirent* e = ::readdir(dir)) {
    if (!is_note_for(e->d_name, port)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if ((now - st.st_mtime) * 1000 > younger_than_ms) continue;  // an earlier run's
    std::optional<std::string> text = read_note(::dirfd(dir), e->d_name);
    const size_t nl = text ? text->find('\n') : std::string::npos;
    if (nl == std::string::npos || text->compare(0, nl, identity) != 0) continue;
    found = text->substr(nl + 1);
    break;
  }
  ::closedir(dir);
  return found;
}

void remove_failure_notes(uint16_t port) {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;
  while (const dirent* e = ::readdir(dir)) {
    struct stat st {};
    if (!is_note_for(e->d_name, port) || ::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        st.st_uid != ::geteuid()) {
      continue;
    }
    (void)::unlinkat(::dirfd(dir), e->d_name, 0);
  }
  ::closedir(dir);
}

}  // namespace omniccl::bootstrap
