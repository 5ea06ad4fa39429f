// Command-line argument parsing: see cli_args.hpp.
#include "tools/cli_args.hpp"

#include <cmath>

namespace tidemark::tools {

cli_args::cli_args(int argc, char** argv, int first, const std::set<std::string>& allowed) {
  for (int i = first; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    auto eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else {
      if (allowed.count(flag) == 0)
        throw config_error("unknown option \"" + flag + "\"");
      if (i + 1 >= argc)
        throw config_error("option " + flag + " needs a value");
      value = argv[++i];
    }
    if (allowed.count(flag) == 0)
      throw config_error("unknown option \"" + flag + "\"");
    if (flag == "--set")
      sets_.push_back(value);
    else
      values_[flag] = value;
  }
}

std::string cli_args::text(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second;
}

std::string cli_args::required(const std::string& flag) const {
  if (!has(flag))
    throw config_error("missing required option " + flag);
  return text(flag);
}

double cli_args::real(const std::string& flag, double fallback, double low, double high) const {
  if (!has(flag))
    return fallback;
  std::string v = text(flag);
  std::size_t used = 0;
  double d = 0;
  try {
    d = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || !std::isfinite(d))
    throw config_error("option " + flag + " expects a number, got \"" + v + "\"");
  if (d < low || d > high)
    throw config_error("option " + flag + " is out of range: " + std::to_string(low) + " .. " +
                       std::to_string(high));
  return d;
}

std::uint64_t cli_args::count(const std::string& flag, std::uint64_t fallback, std::uint64_t low,
                              std::uint64_t high) const {
  double d = real(flag, double(fallback), double(low), double(high));
  if (d != std::floor(d))
    throw config_error("option " + flag + " expects a whole number");
  return static_cast<std::uint64_t>(d);
}

} // namespace tidemark::tools
