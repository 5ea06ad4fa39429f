// The tidemark program's replication commands (DESIGN §9): basebackup, standby, promote.
// Clients of the public API like the rest of the tool.
//
// A running standby watches its directory for promote.signal: tidemark promote creates it
// when a standby process holds the directory, and waits until that process has promoted
// and stopped (standby.conf gone); with no process running it promotes the directory
// itself, replaying the WAL the standby had received.
#pragma once

#include "tools/cli_args.hpp"

namespace tidemark::tools {

int cmd_basebackup(const cli_args& args);
int cmd_standby(const cli_args& args);
int cmd_promote(const cli_args& args);

} // namespace tidemark::tools
