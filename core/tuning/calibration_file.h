// The files in which a host's calibrations are cached (copy_calibration.h,
// tcp_calibration.h): private to this user, valid for one host and kernel,
// written atomically, and measured by one rank at a time.
#pragma once

#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "common/cpus.h"
#include "common/fd.h"
#include "common/settings.h"
#include "common/status.h"

namespace omniccl::calibration_file {

/// "host kernel-release kernel-version": what a cache is valid for.
std::string machine_key();

/// `setting`'s value where it is set, else $XDG_RUNTIME_DIR/`base` (a
/// directory this user owns), else /tmp/`base`-<uid>.
std::string path(const char* setting, const char* base);

/// The whole file if it is a small regular file owned by this user and
/// writable by no one else; nullopt (with *why) otherwise.
std::optional<std::string> read(const std::string& path, std::string* why);

/// Writes the file atomically (a private temporary file renamed over it);
/// false (with *why) when it could not.
bool write(const std::string& path, const std::string& text, std::string* why);

/// An exclusive flock on `path`.lock, waited for at most two seconds, so
/// that one rank of a host measures and the others read its result; invalid
/// when it could not be had (the caller then goes on without it).
UniqueFd lock(const std::string& path);

/// A cache's text: `magic`, "machine <machine_key()>", then "<name> <rate>"
/// per entry, a line each.
std::string format_rates(const char* magic, std::initializer_list<std::pair<const char*, double>> rates);

/// Parses format_rates' text into the fields named, in order: false unless
/// it holds `magic`, this machine's key, every name with a rate that is
/// finite, positive and at most 10^4, and nothing more.
bool parse_rates(const std::string& text, const char* magic,
                 std::initializer_list<std::pair<const char*, double*>> fields);

/// A rate for the log: two significant digits below 10, three above.
std::string rate_text(double gbps);

/// What read_or_measure found.
template <class Rates>
struct Found {
  std::optional<Rates> rates;  ///< nullopt: the measurement failed (`error` says why)
  /// "from the cache P", "calibrated: WHY; cached in P" or "calibrated: WHY; not cached: E".
  std::string how;
  std::string error;
};

/// The rates of a calibration cached at `path`: read from the file where it
/// holds valid ones (`parse`: nullopt unless it does) and `mode_setting` is
/// unset or "cached"; else measured by `measure(std::string* error)` on a
/// thread of its own that may use every CPU (a launcher may have bound this
/// rank to one, and a probe between two threads needs two cores, as two
/// ranks have), and written back (`format`), all under lock(path). What the
/// measurement throws is thrown here; a bad `mode_setting` throws
/// Error(kInvalidArgument) naming it. `what` names the calibration in the
/// reason a cache was not used ("calibration", "TCP calibration").
template <class Rates, class Parse, class Format, class Measure>
Found<Rates> read_or_measure(const std::string& path, const char* mode_setting, const char* what, Parse parse,
                             Format format, Measure measure) {
  std::string mode = "cached";
  if (auto v = get_setting(mode_setting)) mode = *v;
  check_arg(mode == "cached" || mode == "force", mode_setting, " is '", mode, "'; use cached or force");
  UniqueFd held = lock(path);  // may be invalid: then measure without one
  std::string why;
  if (mode == "cached") {
    if (auto text = read(path, &why)) {
      if (std::optional<Rates> r = parse(*text)) return {std::move(r), str_cat("from the cache ", path), {}};
      why = str_cat(path, " is not a valid ", what, " for this host and kernel");
    }
  } else {
    why = str_cat(mode_setting, "=force");
  }
  Found<Rates> out;
  std::exception_ptr thrown;
  std::thread probe([&] {
    cpus::allow_every_cpu();
    try {
      out.rates = measure(&out.error);
    } catch (...) {
      thrown = std::current_exception();
    }
  });
  probe.join();
  if (thrown) std::rethrow_exception(thrown);
  if (!out.rates) return out;
  std::string werr;
  out.how = write(path, format(*out.rates), &werr) ? str_cat("calibrated: ", why, "; cached in ", path)
                                                   : str_cat("calibrated: ", why, "; not cached: ", werr);
  return out;
}

}  // namespace omniccl::calibration_file
