// Command-line argument parsing for the tidemark program: flags with values ("-D DIR",
// "--json FILE", "--set K=V" repeated), checked against the flags a command accepts.
// Errors are config_error (exit status 2) naming the flag.
#pragma once

#include <tidemark/errors.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tidemark::tools {

class cli_args {
public:
  /// `allowed` lists every flag of the command; all take a value.
  cli_args(int argc, char** argv, int first, const std::set<std::string>& allowed);

  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::string text(const std::string& flag, const std::string& fallback = "") const;
  std::uint64_t count(const std::string& flag, std::uint64_t fallback, std::uint64_t low,
                      std::uint64_t high) const;
  double real(const std::string& flag, double fallback, double low, double high) const;
  const std::vector<std::string>& sets() const { return sets_; }
  std::string required(const std::string& flag) const;

private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> sets_;
};

} // namespace tidemark::tools
