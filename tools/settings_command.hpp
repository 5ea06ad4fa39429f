// tidemark settings: every setting a data directory takes, from
// tidemark::describe_settings() (the parser's own table), as text, JSON (--json) or the
// Markdown of docs/settings.md (--markdown). Also the check of --set KEY=VALUE keys that
// every command applies before it opens anything, naming the nearest setting for a typo.
#pragma once

#include "tools/cli_args.hpp"

#include <string>
#include <vector>

namespace tidemark::tools {

int cmd_settings(const cli_args& args);

/// The command's --set values, each checked to name a setting: config_error (exit 2) for
/// an unknown key, with the nearest setting's name when one is close. Values are checked
/// where they are applied (create, open).
std::vector<std::string> checked_sets(const cli_args& args);

} // namespace tidemark::tools
