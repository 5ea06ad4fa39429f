// tidemark tables and tidemark dump: see table_commands.hpp.
#include "tools/table_commands.hpp"

#include "tools/settings_command.hpp"
#include "workload/json.hpp"

#include <tidemark/database.hpp>

#include <cstdio>

namespace tidemark::tools {

namespace {

std::unique_ptr<database> open_read_only(const cli_args& args) {
  open_options options;
  options.read_only = true;
  options.settings = checked_sets(args);
  return database::open(args.required("-D"), options);
}

// Printable ASCII as it is, every other byte (and the backslash) as \xNN.
std::string escaped(const std::string& bytes) {
  std::string text;
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
      text += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      text += hex;
    }
  }
  return text;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

// The key `flag` gives, written as dump prints keys.
std::string unescaped(const std::string& flag, const std::string& text) {
  std::string bytes;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      bytes += text[i];
      continue;
    }
    int high = i + 3 < text.size() && text[i + 1] == 'x' ? hex_digit(text[i + 2]) : -1;
    int low = high >= 0 ? hex_digit(text[i + 3]) : -1;
    if (low < 0)
      throw bad_usage(flag + ": a backslash starts \\xNN (two hex digits) in \"" + text + "\"");
    bytes += static_cast<char>(high * 16 + low);
    i += 3;
  }
  return bytes;
}

} // namespace

int cmd_tables(const cli_args& args) {
  auto db = open_read_only(args);
  std::vector<table_info> tables = db->tables();
  workload::json_object r;
  std::printf("%-32s %12s %12s\n", "table", "pages", "MB");
  for (const table_info& t : tables) {
    double mb = double(t.pages) * double(db->page_size()) / 1e6;
    std::printf("%-32s %12llu %12.1f\n", escaped(t.name).c_str(),
                static_cast<unsigned long long>(t.pages), mb);
    r.set("tables." + t.name + ".pages", t.pages);
  }
  if (args.has("--json"))
    r.write_file(args.text("--json"));
  db->close();
  return exit_ok;
}

int cmd_dump(const cli_args& args) {
  auto db = open_read_only(args);
  table t;
  try {
    t = db->open_table(args.required("--table"));
  } catch (const usage_error& e) { // a name that is not there: bad input, exit status 2
    throw config_error(std::string("--table: ") + e.what());
  }
  key_range range;
  if (args.has("--from"))
    range.low = unescaped("--from", args.text("--from"));
  if (args.has("--to"))
    range.high = unescaped("--to", args.text("--to"));
  std::uint64_t limit = args.count("--limit", ~std::uint64_t{0} >> 1, 1, ~std::uint64_t{0} >> 1);
  session s = db->open_session();
  s.begin(); // one transaction: the entries as of one moment
  table_cursor c = s.cursor(t, range);
  for (std::uint64_t printed = 0; printed < limit && c.next(); ++printed)
    std::printf("%s\t%s\n", escaped(c.key()).c_str(), escaped(c.value()).c_str());
  s.commit();
  db->close();
  return exit_ok;
}

} // namespace tidemark::tools
