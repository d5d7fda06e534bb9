// The files in which a host's calibrations are cached (copy_calibration.h,
// tcp_calibration.h): private to this user, valid for one host and kernel,
// written atomically, and measured by one rank at a time.
#pragma once

#include <optional>
#include <string>

#include "common/fd.h"

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

/// A rate line of a cache, "`name`<number>" (name ends with its space): the
/// number where it is finite, positive and at most 10^4; else false.
bool parse_rate(const std::string& line, const char* name, double* out);

/// A rate for the log: two significant digits below 10, three above.
std::string rate_text(double gbps);

}  // namespace omniccl::calibration_file
