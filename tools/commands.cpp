// The command table and the help printed from it: see commands.hpp.
#include "tools/commands.hpp"

#include "tools/directory_commands.hpp"
#include "tools/fault_flags.hpp"
#include "tools/replication_commands.hpp"
#include "tools/settings_command.hpp"
#include "tools/table_commands.hpp"

#include <algorithm>
#include <cctype>

#ifndef TIDEMARK_VERSION
#error "TIDEMARK_VERSION is defined by CMakeLists.txt from project(tidemark VERSION ...)"
#endif

namespace tidemark::tools {

namespace {

constexpr std::size_t line_width = 88;

const flag_spec set_flag_run = {"--set", "KEY=VALUE",
                                "a setting for this run (tidemark settings lists them)", false,
                                true};

// The commands on one data directory (directory_commands.hpp), and the settings listing
// (settings_command.hpp) of what its tidemark.conf may hold.
std::vector<command> directory_commands() {
  return {
    {"init",
     "create a data directory holding the TPC-B-like tables",
     "Writes DIR/tidemark.conf with every setting (--set changes one) and loads the tables:\n"
     "keyed tables through transactions (--schema tables), or rows appended to page\n"
     "relations before the first checkpoint (--schema pages). Durable when it returns.",
     {{"-D", "DIR", "the new data directory (missing or empty)", true},
      {"-s", "SCALE", "size: 100 000 accounts per unit (1 .. 100000; default 1)"},
      {"--schema", "KIND", "tables (keyed tables, the default) or pages (rows at fixed places)"},
      {"--set", "KEY=VALUE", "a setting for DIR/tidemark.conf (tidemark settings lists them)",
       false, true}},
     true,
     cmd_init},
    {"bench",
     "run the TPC-B-like workload and print a JSON report",
     "Opens DIR (recovering it first after a crash), runs CLIENTS sessions on their own\n"
     "threads, and prints throughput, latency percentiles and the engine's counters.\n"
     "SIGHUP reloads DIR/tidemark.conf's reloadable settings (tidemark settings).",
     {{"-D", "DIR", "a data directory made by tidemark init", true},
      {"-c", "CLIENTS", "client threads, one session each (1 .. 1024; default 1)"},
      {"-T", "SECONDS", "run this long (default 10)"},
      {"-t", "TXNS", "run this many transactions per client instead (not with -T)"},
      {"-P", "SECONDS", "print a progress line to stderr this often (default: none)"},
      {"--json", "FILE", "also write the report to FILE"},
      {"--ack-log", "FILE", "record each acknowledged commit in FILE (for verify --ack-log)"},
      {"--history-bytes", "N", "pad each history row to N bytes (64 .. 4194304; keyed tables)"},
      set_flag_run,
      {"--trace", "FILE", "write every write-path message to FILE (Chrome trace-event JSON)"},
      {"--timeline", "FILE.csv", "write tps and latency for every second to FILE.csv"}},
     true,
     cmd_bench},
    {"verify",
     "recover if needed, then check acknowledged commits, balances and every page",
     "Reads the workload back through a session, closes cleanly and checks every page on\n"
     "disk. Exit status 1 when anything is missing, inconsistent or corrupt.",
     {{"-D", "DIR", "a data directory made by tidemark init", true},
      {"--ack-log", "FILE", "commits bench acknowledged (bench --ack-log): each must be there"},
      {"--json", "FILE", "also write the report to FILE"},
      set_flag_run},
     true,
     cmd_verify},
    {"recover",
     "run crash recovery if needed, close cleanly and print what it did",
     "",
     {{"-D", "DIR", "a data directory", true},
      {"--json", "FILE", "also write the report to FILE"},
      set_flag_run},
     true,
     cmd_recover},
    {"check",
     "check every file of a data directory, changing nothing",
     "The control file, every WAL record's CRC from the redo point on, every page's checksum\n"
     "and identity, the doublewrite ring (as pg_checksums --check). Run it on a directory no\n"
     "process has open for writing; after a crash, torn pages are expected until recovery.",
     {{"-D", "DIR", "a data directory (of any layout)", true},
      {"--json", "FILE", "also write the report to FILE"}},
     false,
     cmd_check},
    {"settings",
     "list every setting with its default, range and meaning",
     "The list comes from the table the settings parser uses; docs/settings.md is its\n"
     "--markdown output.",
     {{"--json", "", "print JSON: one object per setting"},
      {"--markdown", "", "print the Markdown table of docs/settings.md"}},
     false,
     cmd_settings},
  };
}

// The commands on a directory's keyed tables (table_commands.hpp).
std::vector<command> table_commands() {
  return {
    {"tables",
     "list the keyed tables of a data directory with their sizes",
     "Opens DIR read-only (shut down cleanly, not open for writing) and changes nothing.",
     {{"-D", "DIR", "a data directory", true},
      {"--json", "FILE", "also write the list to FILE"},
      set_flag_run},
     false,
     cmd_tables},
    {"dump",
     "print a keyed table's entries in key order, one per line",
     "Each line is KEY<TAB>VALUE; bytes outside printable ASCII (and \\) print as \\xNN, and\n"
     "--from and --to take keys written the same way. Opens DIR read-only.",
     {{"-D", "DIR", "a data directory", true},
      {"--table", "NAME", "the table", true},
      {"--from", "KEY", "the first key (included; default: the first)"},
      {"--to", "KEY", "the last key (included; default: the last)"},
      {"--limit", "N", "print at most N entries"},
      set_flag_run},
     false,
     cmd_dump},
  };
}

// The replication commands (replication_commands.hpp): a base backup, a standby, a
// promotion.
std::vector<command> replication_commands() {
  return {
    {"basebackup",
     "copy a running primary into a new standby directory",
     "The primary must have replication_listen set. The copy is consistent once a standby\n"
     "has replayed its WAL to the end position printed.",
     {{"-D", "NEWDIR", "the standby's directory (missing or empty)", true},
      {"--primary", "HOST:PORT", "the primary's replication_listen address", true},
      {"--name", "NAME", "the standby's name on the primary (default: a generated one)"},
      {"--take-over", "", "take over a name in use (its standby is refused from then on)"},
      {"--json", "FILE", "also write the report to FILE"}},
     false,
     cmd_basebackup},
    {"standby",
     "stream and replay a primary's WAL until promoted or stopped",
     "Runs until tidemark promote, SIGINT or SIGTERM; prints a status line every interval.\n"
     "SIGHUP reloads DIR/tidemark.conf's reloadable settings (tidemark settings).",
     {{"-D", "DIR", "a directory tidemark basebackup made", true},
      {"--primary", "HOST:PORT", "stream from here (default: the primary of the base backup)"},
      {"--json", "FILE", "write the status to FILE at each status line and at the end"},
      {"--status-interval", "SECONDS", "print a status line this often (0.05 .. 3600; default 1)"},
      set_flag_run},
     true,
     cmd_standby},
    {"promote",
     "make a standby a primary",
     "With a standby running in DIR, asks it to promote and waits; with none running,\n"
     "replays the WAL DIR received and promotes it here (the fault flags apply then).",
     {{"-D", "DIR", "the standby's directory", true},
      {"--timeout", "SECONDS", "wait this long for a running standby (1 .. 86400; default 60)"},
      {"--force", "", "promote even when another standby of the primary was further ahead"},
      {"--set", "KEY=VALUE", "a setting for a promotion here (no standby running in DIR)", false,
       true}},
     true,
     cmd_promote},
  };
}

} // namespace

const std::vector<command>& commands() {
  static const std::vector<command> table = [] {
    std::vector<command> all = directory_commands();
    for (const std::vector<command>& group : {table_commands(), replication_commands()})
      all.insert(all.end(), group.begin(), group.end());
    return all;
  }();
  return table;
}

const command* find_command(const std::string& name) {
  for (const command& c : commands())
    if (c.name == name)
      return &c;
  return nullptr;
}

std::vector<flag_spec> accepted_flags(const command& c) {
  std::vector<flag_spec> flags = c.flags;
  if (c.faults)
    flags.insert(flags.end(), fault_flags().begin(), fault_flags().end());
  return flags;
}

namespace {

std::string flag_with_value(const flag_spec& f) {
  return f.value.empty() ? f.flag : f.flag + " " + f.value;
}

// Words after `lead`, wrapped at line_width with continuation lines indented to its end.
std::string wrapped(const std::string& lead, const std::vector<std::string>& words) {
  std::string out = lead;
  std::size_t column = lead.size();
  const std::string indent(lead.size() + 1, ' ');
  for (const std::string& word : words) {
    if (column > indent.size() && column + 1 + word.size() > line_width) {
      out += "\n" + indent;
      column = indent.size();
    } else {
      out += " ";
      ++column;
    }
    out += word;
    column += word.size();
  }
  return out + "\n";
}

std::string option_lines(const std::vector<flag_spec>& flags) {
  std::size_t width = 0;
  for (const flag_spec& f : flags)
    width = std::max(width, flag_with_value(f).size());
  std::string out;
  for (const flag_spec& f : flags) {
    std::string left = flag_with_value(f);
    out += "  " + left + std::string(width + 2 - left.size(), ' ') + f.meaning + "\n";
  }
  return out;
}

} // namespace

std::string usage_text(const command& c) {
  std::vector<std::string> words;
  for (const flag_spec& f : c.flags) {
    std::string word = flag_with_value(f);
    if (!f.required)
      word = "[" + word + "]";
    if (f.repeated)
      word += "...";
    words.push_back(word);
  }
  if (c.faults)
    words.push_back("[FAULTS]");
  return wrapped("usage: tidemark " + c.name, words);
}

std::string help_text(const command& c) {
  std::vector<flag_spec> own = c.flags;
  own.push_back({"-h, --help", "", "print this help"});
  std::string out = usage_text(c) + "\n";
  std::string summary = c.summary;
  summary[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(summary[0])));
  out += summary + ".\n";
  if (!c.notes.empty())
    out += c.notes + "\n";
  out += "\noptions:\n" + option_lines(own);
  if (c.faults)
    out += "\nFAULTS: run on the fault-injecting I/O engine (crash tests):\n" +
           option_lines(fault_flags());
  return out;
}

std::string program_help() {
  std::string out = version_text() + ": create, load, benchmark, check and replicate Tidemark "
                                     "data directories\n\n"
                                     "usage: tidemark COMMAND [OPTIONS]\n"
                                     "       tidemark COMMAND --help     that command's options\n"
                                     "       tidemark --version\n\n"
                                     "commands:\n";
  std::size_t width = 0;
  for (const command& c : commands())
    width = std::max(width, c.name.size());
  width += 2;
  for (const command& c : commands())
    out += "  " + c.name + std::string(width - c.name.size(), ' ') + c.summary + "\n";
  out += "  help" + std::string(width - 4, ' ') +
         "print this help, or a command's (tidemark help "
         "COMMAND)\n\n"
         "Settings: tidemark settings lists them; --set KEY=VALUE gives one to a command.\n"
         "Exit status: 0 success; 1 runtime error or failed verification; 2 bad usage or\n"
         "configuration; 3 simulated crash (the fault flags).\n";
  return out;
}

std::string help_command_help() {
  return "usage: tidemark help [COMMAND]\n\n"
         "Print the commands, or COMMAND's usage and options (as tidemark COMMAND --help).\n\n"
         "options:\n" +
         option_lines({{"-h, --help", "", "print this help"}});
}

std::string version_text() { return std::string("tidemark ") + TIDEMARK_VERSION; }

} // namespace tidemark::tools
