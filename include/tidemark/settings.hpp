// Every setting a data directory runs with, described: name, kind of value, default, what a
// plain number counts, the values it accepts, whether it is fixed when the directory is
// created, and one line of meaning. Made from the same table the settings parser uses
// (create_options::settings, open_options::settings, tidemark.conf), so a listing made
// from it names exactly the keys, defaults and ranges the parser keeps. `tidemark
// settings` prints it; docs/settings.md is that output.
#pragma once

#include <string>
#include <vector>

namespace tidemark {

struct setting_description {
  std::string name; // "shared_buffers"
  /// "size" (B, kB, MB, GB, TB), "duration" (ms, s, min, h, d), "integer", "real",
  /// "boolean" (on, off; also true/false, yes/no, 1/0), "enum" (one of `allowed`),
  /// "address" (HOST:PORT), "list" (standby names: synchronous_standby_names).
  std::string type;
  std::string default_value; // as database::setting() shows it: "128MB", "5min", "on"; "" none
  std::string unit;          // what a number without a unit counts ("MB", "pages", "s"); may be ""
  /// The values accepted: "16 pages .. 256GB", "1 .. 16", "0 (off) or 1s .. 1h",
  /// "full_page_writes | doublewrite | off". Rules between settings (doublewrite needs
  /// data_checksums=on) are checked when a directory is created or opened.
  std::string allowed;
  bool fixed_at_init = false; // recorded at create(); a later open may not change it
  bool reloadable = false;    // database::reload() applies a new value to the running engine
  std::string meaning;        // one line
};

/// Every setting, in the order tidemark.conf lists them. Throws nothing of errors.hpp.
std::vector<setting_description> describe_settings();

} // namespace tidemark
