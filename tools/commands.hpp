// The tidemark program's commands as one table: each command's name, one-line summary,
// the flags it accepts with one line of help each, and the function that runs it. The
// parser accepts exactly the flags listed, and every --help text and usage line is printed
// from the same entries, so that the help and the parser cannot disagree.
#pragma once

#include "tools/cli_args.hpp"

#include <string>
#include <vector>

namespace tidemark::tools {

struct command {
  std::string name;
  std::string summary;          // one line, for tidemark --help
  std::string notes;            // more for its own --help (may be empty)
  std::vector<flag_spec> flags; // besides -h/--help and the fault flags
  bool faults = false;          // also takes the fault flags (fault_flags.hpp)
  int (*run)(const cli_args&) = nullptr;
};

/// Every command, in the order tidemark --help lists them ("help" is not among them).
const std::vector<command>& commands();
/// nullptr when there is no such command.
const command* find_command(const std::string& name);

/// The flags cli_args accepts for `c`: its own and, when it takes them, the fault flags.
std::vector<flag_spec> accepted_flags(const command& c);

/// "usage: tidemark bench -D DIR [-c CLIENTS] ..." (wrapped, ending in a newline).
std::string usage_text(const command& c);
/// What tidemark COMMAND --help prints: usage, summary, every option with one line.
std::string help_text(const command& c);
/// What tidemark --help prints: the commands with their summaries.
std::string program_help();
/// What tidemark help --help prints.
std::string help_command_help();
/// "tidemark 0.1.0" (project(tidemark VERSION ...) in CMakeLists.txt).
std::string version_text();

} // namespace tidemark::tools
