// standby.conf: see standby_file.hpp.
#include "runtime/standby_file.hpp"

#include "runtime/config.hpp"

#include <sys/stat.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace tidemark::runtime {

namespace {

// A whole decimal number up to `max`, or config_error naming the key.
std::uint64_t parse_number(const std::string& key, const std::string& value, std::uint64_t max) {
  std::uint64_t number = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (error != std::errc() || end != value.data() + value.size() || number > max)
    throw config_error("bad number for " + key + ": " + value);
  return number;
}

} // namespace

std::string standby_file_path(const std::string& data_dir) { return data_dir + "/standby.conf"; }

std::optional<standby_file> read_standby_file(const std::string& data_dir) {
  const std::string path = standby_file_path(data_dir);
  std::ifstream in(path);
  if (!in) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return std::nullopt;
    throw config_error("cannot read " + path);
  }
  standby_file f;
  bool have_primary = false, have_name = false, have_generation = false, have_end = false;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string key, eq, value;
    if (!(words >> key))
      continue;
    if (!(words >> eq >> value) || eq != "=")
      throw config_error(path + " line " + std::to_string(number) + ": expected KEY = VALUE");
    try {
      if (key == "primary") {
        parse_endpoint("primary", value);
        f.primary = value;
        have_primary = true;
      } else if (key == "standby_name") {
        f.name = value;
        have_name = true;
      } else if (key == "generation") {
        f.generation = static_cast<std::uint32_t>(
          parse_number(key, value, std::numeric_limits<std::uint32_t>::max()));
        have_generation = true;
      } else if (key == "standby_id") {
        f.id = value.size() == 16 &&
                   value.find_first_not_of("0123456789abcdef") == std::string::npos
                 ? std::stoull(value, nullptr, 16) // 16 hex digits: no partial parse
                 : 0;
        if (f.id == 0)
          throw config_error("standby_id must be 16 hex digits, not all zero: " + value);
      } else if (key == "backup_end_lsn") {
        f.backup_end_lsn = parse_number(key, value, std::numeric_limits<std::uint64_t>::max());
        have_end = true;
      } else {
        throw config_error("unknown key " + key);
      }
    } catch (const config_error& e) {
      throw config_error(path + " line " + std::to_string(number) + ": " + e.what());
    }
  }
  if (!have_primary || !have_name || !have_generation || !have_end)
    throw config_error(path + " is incomplete: it needs primary, standby_name, generation and "
                              "backup_end_lsn (was the base backup interrupted?)");
  return f;
}

std::string hex_id(std::uint64_t id) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

void write_standby_file(storage::io_engine& io, const std::string& data_dir,
                        const standby_file& f) {
  std::ostringstream text;
  text << "# This directory is a standby (tidemark standby); tidemark promote ends that.\n"
       << "primary = " << f.primary << "\n"
       << "standby_name = " << f.name << "\n"
       << "standby_id = " << hex_id(f.id) << "\n"
       << "generation = " << f.generation << "\n"
       << "backup_end_lsn = " << f.backup_end_lsn << "\n";
  const std::string path = standby_file_path(data_dir);
  storage::write_whole_file(io, path, text.str());
  storage::sync_file_at(io, path);
  io.sync_directory(data_dir);
}

void remove_standby_file(storage::io_engine& io, const std::string& data_dir) {
  io.unlink(standby_file_path(data_dir));
  io.sync_directory(data_dir);
}

} // namespace tidemark::runtime
