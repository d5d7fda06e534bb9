// Command lines of the tools (omniccl-run, omniccl-bench), read from a table
// of options: each row names an option, says whether it takes a value, gives
// its line in --help and sets it. The --help text is made from the same rows,
// so an option cannot be accepted without being listed, or the reverse.
//
// The syntax is the same for every tool: --name VALUE, --name=VALUE, -x VALUE,
// -xVALUE; '_' may replace '-' in long names; a value that is a separate
// argument is taken as it is, even when it starts with '-'. A tool with
// operands (omniccl-run's PROGRAM ARGS...) ends its options at the first
// argument that is not one, or at "--".
//
// Only libc and libstdc++ are used: omniccl-run links nothing of OmniCCL.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace omniccl::cli {

/// The exit status for bad usage (2, as argparse and the shell builtins use).
inline constexpr int kExitUsage = 2;

/// Whether an option takes a value.
enum class Takes {
  kNothing,        // a flag; "--flag=x" is an error
  kValue,          // inline or the next argument, always
  kOptionalValue,  // inline, or the next argument if it is one of Option::next_values
};

/// One row of a tool's option table.
struct Option {
  std::vector<std::string> names;  // every spelling accepted: "-n", "--nproc"
  Takes takes = Takes::kNothing;
  std::string label;  // the option column of --help: "-n, --nproc N"
  std::string help;   // its description; '\n' continues it on the next line
  /// Applies the option: `name` is the spelling used ('_' read as '-'),
  /// `value` its value ("" for a flag). Returns an error message, or "" when
  /// the option was taken.
  std::function<std::string(const std::string& name, const std::string& value)> apply;
  /// Takes::kOptionalValue: the values that may follow as a separate
  /// argument, and the value when none is given.
  std::vector<std::string> next_values;
  std::string implicit_value;
  /// Prints --help and ends parsing with status 0 (apply is not called).
  bool prints_help = false;
};

/// A tool's command line: its options and the words of its messages.
struct Spec {
  std::string program;   // names every error: "omniccl-run: error: ..."
  std::string synopsis;  // --help up to the options
  std::vector<Option> options;
  std::string epilogue;  // --help after the options
  /// Whether options end at the first argument that is not one (PROGRAM) or
  /// at "--"; without operands every argument must be an option.
  bool has_operands = false;
  /// The error for an option that needs a value, "{}" standing for its name.
  std::string needs_value = "option {} needs a value";
  /// Added to "unknown option 'X'" for a name that is in no row.
  std::string unknown_hint;
};

/// The outcome of parsing: an exit status to return at once (help printed,
/// or a usage error), or -1 and the index of the first operand.
struct Parsed {
  int exit_status = -1;
  int operands = 0;
};

/// Parses argv[1..argc) by the table, applying each option in order; stops
/// at the first error, which is printed as usage_error() prints it.
Parsed parse(const Spec& spec, int argc, char** argv);

/// The --help text: the synopsis, one line (or more) per option, the epilogue.
std::string help_text(const Spec& spec);

/// Prints "PROGRAM: error: MESSAGE" and the hint to use --help on stderr;
/// returns kExitUsage.
int usage_error(std::string_view program, const std::string& message);

}  // namespace omniccl::cli
