// The fault flags of the tidemark program (--crash-after-writes, --crash-mode, --seed,
// --fail-fsync-after, --fail-fsync-match, --fault-journal, --bad-read-*): their --help
// lines and the one parser every command that writes a data directory goes through, so
// that they all run on the fault-injecting I/O engine alike (storage/fault_engine.hpp;
// exit status 3 is its simulated crash).
#pragma once

#include "tools/cli_args.hpp"

#include <tidemark/options.hpp>

#include <optional>
#include <vector>

namespace tidemark::tools {

/// The fault flags every command that writes a data directory accepts, with their help.
const std::vector<flag_spec>& fault_flags();

/// The fault injection the flags ask for; nullopt when none is given. bad_usage for a
/// flag that needs another (--crash-mode without --crash-after-writes) or a bad mode.
std::optional<fault_injection> faults_of(const cli_args& args);

/// open_options with the command's --set settings (checked_sets()), its faults and --trace.
open_options options_with_faults(const cli_args& args);

} // namespace tidemark::tools
