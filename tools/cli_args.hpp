// Command-line argument parsing for the tidemark program: the flags a command accepts, each
// with its one line of --help (flag_spec), and the parser that takes exactly those flags
// ("-D DIR", "--json FILE", "--set K=V" repeated, switches such as "--markdown"). -h and
// --help anywhere a flag may stand ask for the command's help instead. Errors are
// bad_usage (a config_error: exit status 2) naming the flag.
#pragma once

#include <tidemark/errors.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tidemark::tools {

/// The program's exit statuses: success, a failure the command reports (a check that found
/// damage, a lost commit), and bad input (a usage or configuration error).
constexpr int exit_ok = 0, exit_failure = 1, exit_usage = 2;

/// The command line is wrong (an unknown flag, a missing or malformed value): the program
/// prints the command's usage line after the message. Exit status 2, as every config_error.
class bad_usage : public config_error {
public:
  using config_error::config_error;
};

/// One flag a command accepts, and its line in the command's --help.
struct flag_spec {
  std::string flag;      // "-D", "--json"
  std::string value;     // what its value is ("DIR"); empty: a switch, given without one
  std::string meaning;   // one line
  bool required = false; // shown without brackets in the usage line
  bool repeated = false; // may be given more than once (--set KEY=VALUE ...)
};

class cli_args {
public:
  /// Parses argv[first..]. Every flag must be one of `flags`; a flag with a value takes the
  /// next argument or "--flag=value".
  cli_args(int argc, char** argv, int first, const std::vector<flag_spec>& flags);

  /// -h or --help was given (nothing else was checked then).
  bool help() const { return help_; }
  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::string text(const std::string& flag, const std::string& fallback = "") const;
  std::uint64_t count(const std::string& flag, std::uint64_t fallback, std::uint64_t low,
                      std::uint64_t high) const;
  double real(const std::string& flag, double fallback, double low, double high) const;
  const std::vector<std::string>& sets() const { return sets_; }
  std::string required(const std::string& flag) const;

private:
  bool help_ = false;
  std::map<std::string, std::string> values_;
  std::vector<std::string> sets_;
};

} // namespace tidemark::tools
