// Command-line argument parsing: see cli_args.hpp.
#include "tools/cli_args.hpp"

#include <cmath>
#include <sstream>

namespace tidemark::tools {

namespace {

const flag_spec* find_flag(const std::vector<flag_spec>& flags, const std::string& flag) {
  for (const flag_spec& f : flags)
    if (f.flag == flag)
      return &f;
  return nullptr;
}

bool is_help(const std::string& arg) { return arg == "-h" || arg == "--help"; }

std::string number_text(double value) { // 1024, 0.05, 86400
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

} // namespace

cli_args::cli_args(int argc, char** argv, int first, const std::vector<flag_spec>& flags) {
  // -h or --help where a flag may stand (not as another flag's value) wins over any error.
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (is_help(arg)) {
      help_ = true;
      return;
    }
    const flag_spec* spec = find_flag(flags, arg);
    if (spec != nullptr && !spec->value.empty())
      ++i;
  }
  for (int i = first; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    bool inline_value = false;
    auto eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    const flag_spec* spec = find_flag(flags, flag);
    if (spec == nullptr)
      throw bad_usage("unknown option \"" + flag + "\"");
    if (spec->value.empty()) {
      if (inline_value)
        throw bad_usage("option " + flag + " takes no value");
    } else if (!inline_value) {
      if (i + 1 >= argc)
        throw bad_usage("option " + flag + " needs a value (" + spec->value + ")");
      value = argv[++i];
    }
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
    throw bad_usage("missing required option " + flag);
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
    throw bad_usage("option " + flag + " expects a number, got \"" + v + "\"");
  if (d < low || d > high)
    throw bad_usage("option " + flag + " is out of range: " + number_text(low) + " .. " +
                    number_text(high));
  return d;
}

std::uint64_t cli_args::count(const std::string& flag, std::uint64_t fallback, std::uint64_t low,
                              std::uint64_t high) const {
  double d = real(flag, double(fallback), double(low), double(high));
  if (d != std::floor(d))
    throw bad_usage("option " + flag + " expects a whole number");
  return static_cast<std::uint64_t>(d);
}

} // namespace tidemark::tools
