// The fault flags: see fault_flags.hpp.
#include "tools/fault_flags.hpp"

#include "tools/settings_command.hpp"

namespace tidemark::tools {

const std::vector<flag_spec>& fault_flags() {
  static const std::vector<flag_spec> flags = {
    {"--crash-after-writes", "N", "the N-th write simulates a crash (exit status 3)"},
    {"--crash-mode", "MODE", "lose-unsynced (default) | torn | process (as kill -9)"},
    {"--seed", "N", "what a crash loses or tears; bench: its choices too"},
    {"--fail-fsync-after", "N", "the N-th fsync fails with EIO"},
    {"--fail-fsync-match", "PATH-PART", "count only fsyncs of files whose path contains it"},
    {"--fault-journal", "FILE", "keep unsynced writes across runs, for a later crash"},
    {"--bad-read-after", "N", "the N-th read of bytes fsynced this run goes bad"},
    {"--bad-read", "KIND", "zeros (default) | short | error: how that read goes bad"},
    {"--bad-read-repeats", "N", "reads of the same bytes that go bad (0: all; default 1)"},
    {"--bad-read-match", "PATH-PART", "count only files whose path contains it (default /wal/)"},
  };
  return flags;
}

std::optional<fault_injection> faults_of(const cli_args& args) {
  if (args.has("--crash-mode") && !args.has("--crash-after-writes"))
    throw bad_usage("--crash-mode goes with --crash-after-writes");
  if (args.has("--fail-fsync-match") && !args.has("--fail-fsync-after"))
    throw bad_usage("--fail-fsync-match goes with --fail-fsync-after");
  for (const char* flag : {"--bad-read", "--bad-read-match", "--bad-read-repeats"})
    if (args.has(flag) && !args.has("--bad-read-after"))
      throw bad_usage(std::string(flag) + " goes with --bad-read-after");
  if (!args.has("--crash-after-writes") && !args.has("--fail-fsync-after") &&
      !args.has("--fault-journal") && !args.has("--bad-read-after"))
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
    throw bad_usage("--crash-mode must be lose-unsynced, torn or process, got \"" + mode + "\"");
  faults.seed = args.count("--seed", 1, 0, ~0ull >> 12);
  faults.journal_path = args.text("--fault-journal");
  faults.bad_read_after = args.count("--bad-read-after", 0, 1, 1ull << 50);
  std::string bad = args.text("--bad-read", "zeros");
  if (bad == "zeros")
    faults.bad_read = read_fault::zeros;
  else if (bad == "short")
    faults.bad_read = read_fault::short_read;
  else if (bad == "error")
    faults.bad_read = read_fault::error;
  else
    throw bad_usage("--bad-read must be zeros, short or error, got \"" + bad + "\"");
  faults.bad_read_match = args.text("--bad-read-match", "/wal/");
  faults.bad_read_repeats =
    static_cast<std::uint32_t>(args.count("--bad-read-repeats", 1, 0, 1ull << 31));
  return faults;
}

open_options options_with_faults(const cli_args& args) {
  open_options options;
  options.settings = checked_sets(args);
  options.faults = faults_of(args);
  options.trace = args.has("--trace");
  return options;
}

} // namespace tidemark::tools
