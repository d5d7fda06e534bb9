// The one table of every OMNICCL_* environment setting.
//
// Each setting has exactly one row in kSettings (settings.cc) with its default
// and meaning; a unit test checks that the docs' settings page names every
// row. Code reads settings only through get_setting().
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace omniccl {

struct SettingInfo {
  const char* name;  ///< environment variable, e.g. "OMNICCL_TIMEOUT"
  const char* default_value;
  const char* meaning;
};

/// Every setting OmniCCL reads.
std::span<const SettingInfo> all_settings();

/// Value of a setting from the environment; nullopt when unset or empty.
/// Throws Error(kInternal) for a name missing from the table.
std::optional<std::string> get_setting(const char* name);

/// The longest duration parse_duration_ms returns (INT64_MAX ms); longer
/// ones are clamped to it, and deadlines that far out never pass.
inline constexpr int64_t kMaxDurationMs = INT64_MAX;

/// Parses a duration: "600" or "600s" (seconds), "1500ms", "10m", "2.5".
/// Throws Error(kInvalidArgument) naming `what` on malformed text, nan, inf,
/// negative or out-of-range numbers.
int64_t parse_duration_ms(const std::string& text, const std::string& what);

/// OMNICCL_SETUP_HEARTBEAT_TIMEOUT in ms (default 5000; 0 = no liveness
/// checks while communicators are created). Throws Error(kInvalidArgument)
/// naming the setting.
int64_t setup_heartbeat_timeout_ms();

/// How often a rank that is creating a communicator sends its heartbeat for
/// a given timeout: five times per timeout, between every 50 ms and once a
/// second.
int64_t setup_heartbeat_interval_ms(int64_t timeout_ms);

}  // namespace omniccl
