// The tidemark program (DESIGN §9): finds the command (tools/commands.hpp), parses its
// flags, prints its help for -h/--help, runs it, and turns errors into exit statuses:
// 0 success; 1 runtime error or failed verification; 2 bad usage or configuration; 3
// simulated crash (raised inside the fault-injecting engine). A client of the public API
// (include/tidemark/) and the workload module, like any embedding application.
#include "tools/cli_args.hpp"
#include "tools/commands.hpp"

#include <cstdio>
#include <string>

using namespace tidemark;
using namespace tidemark::tools;

namespace {

int dispatch(int argc, char** argv, const command*& current) {
  std::string name = argv[1];
  if (name == "-h" || name == "--help") {
    std::printf("%s", program_help().c_str());
    return exit_ok;
  }
  if (name == "--version") {
    std::printf("%s\n", version_text().c_str());
    return exit_ok;
  }
  if (name == "help") { // tidemark help [COMMAND]
    if (argc == 2) {
      std::printf("%s", program_help().c_str());
      return exit_ok;
    }
    std::string topic = argv[2];
    if (argc == 3 && (topic == "-h" || topic == "--help" || topic == "help")) {
      std::printf("%s", help_command_help().c_str());
      return exit_ok;
    }
    const command* c = find_command(topic);
    if (argc > 3 || c == nullptr)
      throw bad_usage(argc > 3 ? "help takes one command" : "unknown command \"" + topic + "\"");
    std::printf("%s", help_text(*c).c_str());
    return exit_ok;
  }
  current = find_command(name);
  if (current == nullptr)
    throw bad_usage("unknown command \"" + name + "\"");
  cli_args args(argc, argv, 2, accepted_flags(*current));
  if (args.help()) {
    std::printf("%s", help_text(*current).c_str());
    return exit_ok;
  }
  return current->run(args);
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "%s", program_help().c_str());
    return exit_usage;
  }
  const command* current = nullptr;
  try {
    return dispatch(argc, argv, current);
  } catch (const bad_usage& e) {
    if (current != nullptr)
      std::fprintf(stderr, "tidemark %s: %s\n%s(tidemark %s --help lists every option)\n",
                   current->name.c_str(), e.what(), usage_text(*current).c_str(),
                   current->name.c_str());
    else
      std::fprintf(stderr, "tidemark: %s\n(tidemark --help lists the commands)\n", e.what());
    return exit_usage;
  } catch (const config_error& e) {
    std::fprintf(stderr, "tidemark: %s\n", e.what());
    return exit_usage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tidemark: error: %s\n", e.what());
    return exit_failure;
  }
}
