// The fault flags: see fault_flags.hpp.
#include "tools/fault_flags.hpp"

namespace tidemark::tools {

const std::set<std::string> fault_flags = {"--crash-after-writes", "--crash-mode", "--seed",
                                           "--fail-fsync-after", "--fail-fsync-match",
                                           "--fault-journal"};

std::set<std::string> with_fault_flags(std::set<std::string> flags) {
  flags.insert(fault_flags.begin(), fault_flags.end());
  return flags;
}

std::optional<fault_injection> faults_of(const cli_args& args) {
  if (args.has("--crash-mode") && !args.has("--crash-after-writes"))
    throw config_error("--crash-mode goes with --crash-after-writes");
  if (args.has("--fail-fsync-match") && !args.has("--fail-fsync-after"))
    throw config_error("--fail-fsync-match goes with --fail-fsync-after");
  if (!args.has("--crash-after-writes") && !args.has("--fail-fsync-after") &&
      !args.has("--fault-journal"))
    return std::nullopt;
  fault_injection faults;
  faults.crash_after_writes = args.count("--crash-after-writes", 0, 1, 1ull << 50);
  faults.fail_fsync_after = args.count("--fail-fsync-after", 0, 1, 1ull << 50);
  faults.fail_fsync_match = args.text("--fail-fsync-match");
  std::string mode = args.text("--crash-mode", "lose-unsynced");
  if (mode == "lose-unsynced")
    faults.mode = crash_mode::lose_unsynced;
  else if (mode == "torn")
    faults.mode = crash_mode::torn;
  else if (mode == "process")
    faults.mode = crash_mode::process;
  else
    throw config_error("--crash-mode must be lose-unsynced, torn or process, got \"" + mode + "\"");
  faults.seed = args.count("--seed", 1, 0, ~0ull >> 12);
  faults.journal_path = args.text("--fault-journal");
  return faults;
}

open_options options_with_faults(const cli_args& args) {
  open_options options;
  options.settings = args.sets();
  options.faults = faults_of(args);
  options.trace = args.has("--trace");
  return options;
}

} // namespace tidemark::tools
