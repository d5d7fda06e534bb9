// The one table of every OMNICCL_* environment setting.
//
// Each setting has exactly one row in kSettings (settings.cc) with its default
// and meaning; a unit test checks that the README's settings table names every
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

}  // namespace omniccl
