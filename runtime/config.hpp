// Configuration: every setting of DESIGN §8 (the value, actors/settings.hpp), parsing in
// postgresql.conf style with PostgreSQL's units, range checks that name the key and its
// range, and the settings that are fixed when a data directory is created. One table in
// config.cpp holds each setting's parser, checks, rendering and description; the file
// init writes and tidemark::describe_settings() (tidemark/settings.hpp) are made from it.
//
// Invariants:
//  - A settings value that left validate() satisfies every range and cross-setting rule
//    (for example D7: doublewrite requires data_checksums).
//  - page_size, data_checksums, segment_size and wal_segment_size are "init" settings: the
//    control file records them and a later run may not change them.
#pragma once

#include "actors/settings.hpp"

#include <tidemark/errors.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tidemark::runtime {

/// Bad usage or configuration (tidemark/errors.hpp): the command-line tool exits with
/// status 2.
using tidemark::config_error;

/// The settings value and its enum live in the actors layer, which runs with them; the
/// runtime parses and checks them.
using actors::settings;
using actors::torn_page_protection;

/// Sets one key from its text value. Throws config_error naming the key (unknown key, bad
/// value, out of range).
void apply_setting(settings& s, const std::string& key, const std::string& value);

/// "key=value" as given to --set.
void apply_assignment(settings& s, const std::string& assignment);

/// Reads a postgresql.conf-style file ('#' comments, `key = value`, optional quotes).
/// Errors name the file and line. A file that is missing, unreadable or sets nothing is an
/// error: after a power loss right after it was written it may come back empty, and "all
/// defaults" would silently change settings such as torn_page_protection.
void apply_config_file(settings& s, const std::string& path);

/// Cross-setting rules. Throws config_error.
void validate(const settings& s);

/// The file `init` writes: every setting with its value, commented.
std::string render_config_file(const settings& s);

/// The value of `key` in `s` as the configuration file shows it. config_error if unknown.
std::string show_setting(const settings& s, const std::string& key);

/// True for page_size, data_checksums, segment_size, wal_segment_size.
bool is_init_setting(const std::string& key);

/// True for the settings a running engine takes from database::reload(): the checkpoint's
/// (checkpoint_timeout, checkpoint_completion_target, max_wal_size, log_checkpoints), the
/// bgwriter's (bgwriter_delay, bgwriter_lru_maxpages, bgwriter_lru_multiplier),
/// write_back_sweep, doublewrite_flush_delay and background_write_limit.
bool is_reloadable_setting(const std::string& key);

std::string format_bytes(std::uint64_t bytes);

/// A network address as HOST:PORT (replication_listen, a standby's primary).
struct endpoint {
  std::string host;
  std::uint16_t port = 0;
};
/// Throws config_error naming `what` when `text` is not HOST:PORT with a port 1..65535
/// (0..65535 with `any_port`: a listener on port 0 gets a free port from the system).
endpoint parse_endpoint(const std::string& what, const std::string& text, bool any_port = false);

} // namespace tidemark::runtime
