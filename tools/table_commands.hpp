// The tidemark commands on a directory's keyed tables, for an operator: tables (each table
// with its size) and dump (a table's entries in a key range). Both open the directory
// read-only (it must have been shut down cleanly and not be open for writing) and change
// nothing. Keys and values print as text, with bytes outside printable ASCII (and the
// backslash) written as \xNN; --from and --to take keys written the same way.
#pragma once

#include "tools/cli_args.hpp"

namespace tidemark::tools {

int cmd_tables(const cli_args& args);
int cmd_dump(const cli_args& args);

} // namespace tidemark::tools
