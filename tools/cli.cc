#include "cli.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace omniccl::cli {

namespace {

/// The column where --help starts an option's description.
constexpr std::size_t kHelpColumn = 22;

/// One argument read as an option: the name and the value written into it
/// ("--name=value", "-xVALUE").
struct Word {
  std::string name;
  std::optional<std::string> value;
  bool is_long = false;
};

Word split(std::string_view arg) {
  Word w;
  if (arg.starts_with("--")) {
    const std::size_t eq = arg.find('=');
    w.name = std::string(arg.substr(0, eq));
    if (eq != std::string_view::npos) w.value = std::string(arg.substr(eq + 1));
    w.is_long = true;
  } else if (arg.size() > 2 && arg[0] == '-') {
    w.name = std::string(arg.substr(0, 2));
    w.value = std::string(arg.substr(2));
  } else {
    w.name = std::string(arg);
  }
  return w;
}

const Option* find_exact(const Spec& spec, const std::string& name) {
  for (const Option& o : spec.options) {
    if (std::find(o.names.begin(), o.names.end(), name) != o.names.end()) return &o;
  }
  return nullptr;
}

/// The row of w.name: spelled as in the table, or a long name with '_' read
/// as '-' (w.name is then rewritten so).
const Option* find(const Spec& spec, Word& w) {
  if (const Option* o = find_exact(spec, w.name)) return o;
  if (!w.is_long) return nullptr;
  std::replace(w.name.begin() + 2, w.name.end(), '_', '-');
  return find_exact(spec, w.name);
}

/// `pattern` with its "{}" replaced by `text`.
std::string fill(const std::string& pattern, const std::string& text) {
  std::string out = pattern;
  const std::size_t at = out.find("{}");
  if (at != std::string::npos) out.replace(at, 2, text);
  return out;
}

/// The value of option `o` written as `w` (argument `arg`, at argv[i]);
/// takes the next argument where the option does, advancing i. nullopt,
/// with `error` set, when a value is missing or given to a flag.
std::optional<std::string> value_of(const Spec& spec, const Option& o, const Word& w, std::string_view arg, int& i,
                                    int argc, char** argv, std::string& error) {
  switch (o.takes) {
    case Takes::kNothing:
      if (!w.value) return std::string();
      // "-hx" may be meant as "-h -x", which is not supported: name it whole.
      error = w.is_long ? "option " + w.name + " takes no value" : "unknown option '" + std::string(arg) + "'";
      return std::nullopt;
    case Takes::kValue:
      if (w.value) return w.value;
      if (i + 1 < argc) return std::string(argv[++i]);
      error = fill(spec.needs_value, w.name);
      return std::nullopt;
    case Takes::kOptionalValue: {
      if (w.value) return w.value;
      const auto& next = o.next_values;
      if (i + 1 < argc && std::find(next.begin(), next.end(), argv[i + 1]) != next.end()) return argv[++i];
      return o.implicit_value;
    }
  }
  return std::nullopt;
}

}  // namespace

Parsed parse(const Spec& spec, int argc, char** argv) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (spec.has_operands && arg == "--") return {-1, i + 1};
    if (spec.has_operands && (arg.size() < 2 || arg[0] != '-')) break;  // PROGRAM (or "-")
    Word w = split(arg);
    const Option* o = find(spec, w);
    if (o == nullptr) {
      return {usage_error(spec.program, "unknown option '" + std::string(arg) + "'" + spec.unknown_hint)};
    }
    std::string error;
    const std::optional<std::string> value = value_of(spec, *o, w, arg, i, argc, argv, error);
    if (!value) return {usage_error(spec.program, error)};
    if (o->prints_help) {
      std::fputs(help_text(spec).c_str(), stdout);
      std::fflush(stdout);
      return {0};
    }
    error = o->apply(w.name, *value);
    if (!error.empty()) return {usage_error(spec.program, error)};
  }
  return {-1, i};
}

std::string help_text(const Spec& spec) {
  const std::string indent(kHelpColumn, ' ');
  std::string out = spec.synopsis;
  for (const Option& o : spec.options) {
    if (o.label.empty()) continue;  // accepted, not listed
    std::string line = "  " + o.label;
    // A label too long for the column puts its description on the next line.
    line += line.size() < kHelpColumn ? std::string(kHelpColumn - line.size(), ' ') : "\n" + indent;
    for (char ch : o.help) line += ch == '\n' ? "\n" + indent : std::string(1, ch);
    out += line + "\n";
  }
  return out + spec.epilogue;
}

int usage_error(std::string_view program, const std::string& message) {
  std::fprintf(stderr, "%.*s: error: %s\nTry '%.*s --help' for more information.\n", static_cast<int>(program.size()),
               program.data(), message.c_str(), static_cast<int>(program.size()), program.data());
  return kExitUsage;
}

}  // namespace omniccl::cli
