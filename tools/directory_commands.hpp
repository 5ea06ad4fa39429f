// The tidemark commands on a data directory: init (create it with the TPC-B-like tables),
// bench (run the workload), verify (recover, then check every acknowledged commit and every
// page), recover, check (every file, changing nothing). Each takes its parsed command line
// (the flags tools/commands.cpp gives it) and returns the exit status.
#pragma once

#include "tools/cli_args.hpp"

namespace tidemark::tools {

int cmd_init(const cli_args& args);
int cmd_bench(const cli_args& args);
int cmd_verify(const cli_args& args);
int cmd_recover(const cli_args& args);
int cmd_check(const cli_args& args);

} // namespace tidemark::tools
