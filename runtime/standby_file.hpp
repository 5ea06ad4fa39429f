// <data>/standby.conf: what makes a data directory a standby. tidemark basebackup writes
// it (before the control file, which completes the copy); a promotion removes it once the
// end-of-recovery checkpoint has recorded the next generation.
//
//   primary = HOST:PORT            where to stream WAL from
//   standby_name = NAME            the primary keeps WAL for this standby by name
//   standby_id = HEX               this standby's id (16 hex digits), made by its base
//                                  backup: the name is this standby's and no other's (a file
//                                  from before ids has none: id 0)
//   generation = G                 the generation of the system it follows
//   backup_end_lsn = N             the copy is consistent once WAL up to here is replayed
//
// Rules it keeps:
//  - A directory with this file opens only as a standby (or to be promoted): a normal open
//    would write WAL of its own and diverge from the primary it follows.
//  - A file whose generation is older than the control file's is what a crash during
//    promotion left after the checkpoint completed: the promotion happened, the file is
//    stale and is removed.
#pragma once

#include "storage/io_engine.hpp"

#include <optional>
#include <string>

namespace tidemark::runtime {

struct standby_file {
  std::string primary;
  std::string name;
  std::uint64_t id = 0;
  std::uint32_t generation = 0;
  storage::lsn_t backup_end_lsn = 0;
};

std::string standby_file_path(const std::string& data_dir);

/// Nothing when there is no such file; config_error naming the file and line when it is
/// malformed.
std::optional<standby_file> read_standby_file(const std::string& data_dir);

/// A standby id as standby.conf writes it: 16 lowercase hex digits.
std::string hex_id(std::uint64_t id);

/// Written durably (file and directory entry).
void write_standby_file(storage::io_engine& io, const std::string& data_dir, const standby_file& f);

/// Removed durably.
void remove_standby_file(storage::io_engine& io, const std::string& data_dir);

} // namespace tidemark::runtime
