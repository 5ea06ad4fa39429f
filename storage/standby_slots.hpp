// <data>/global/standby_slots: the WAL sender's slots on disk (one line per standby:
// "NAME FLUSHED_LSN OWNER [LISTEN]", the owner the standby's id in hex, LISTEN where it
// serves once promoted; a file written before ids has no third column, read as owner 0:
// not known yet), so that a primary that restarts, after a crash or not, keeps the WAL
// its standbys still need from its first checkpoint on.
//
// Rules it keeps:
//  - Replaced atomically (temporary file fsynced, renamed, directory fsynced): a reader
//    sees the old or the new list.
//  - A slot's position on disk may lag the one in memory; it only ever asks for more WAL
//    to be kept than needed (a standby streams from its own flushed position, which is at
//    or past every position it reported).
#pragma once

#include "storage/io_engine.hpp"

#include <optional>
#include <string>
#include <vector>

namespace tidemark::storage {

struct standby_slot_record {
  std::string name;
  lsn_t flushed = 0;
  std::uint64_t owner = 0; // the id of the standby the name belongs to
  std::string listen;      // HOST:PORT it serves on once promoted ("" when not known)
  friend bool operator==(const standby_slot_record& a, const standby_slot_record& b) {
    return a.name == b.name && a.flushed == b.flushed && a.owner == b.owner && a.listen == b.listen;
  }
};

/// Letters, digits, '.', '_' and '-', 1 to 64 of them.
bool valid_standby_name(const std::string& name);

/// The slots recorded, in name order; none when there is no file. data_error naming the
/// file and line when it is malformed.
std::vector<standby_slot_record> read_standby_slots(const std::string& data_dir);

void write_standby_slots(io_engine& io, const std::string& data_dir,
                         const std::vector<standby_slot_record>& slots);

/// <data>/global/superseded: this primary learned that a standby of its system was
/// promoted since (a newer generation runs): why, in one line. While the file is there the
/// primary acknowledges no synchronous commit and serves no standby, across restarts; the
/// operator removes it only to keep this history on purpose (docs/replication.md).
std::optional<std::string> read_superseded_mark(const std::string& data_dir);
void write_superseded_mark(io_engine& io, const std::string& data_dir, const std::string& why);

} // namespace tidemark::storage
