// The control file (<data>/global/tidemark.control): the one small file recovery starts
// from. It is replaced atomically: written to a temporary file, fsynced, renamed over the
// old one, then the directory is fsynced. A reader therefore sees the old or the new
// version, never a mixture.
//
// Invariants:
//  - checkpoint_lsn points at a valid checkpoint record whose redo_lsn equals redo_lsn here.
//  - redo_lsn only moves forward, and only after the checkpoint it belongs to completed (C1).
//  - page_size, segment sizes and data_checksums are fixed at init; the runtime refuses a
//    configuration that disagrees with them.
//  - protection names the torn-page protection every page write since the redo point
//    was made under (the runtime records it before its first write), so that a restart
//    after a crash can repair and redo in that mode whatever the new setting says.
#pragma once

#include "storage/io_engine.hpp"

#include <cstdint>
#include <string>

namespace tidemark::storage {

enum class cluster_state : std::uint32_t {
  shut_down = 1,     // clean shutdown: no recovery needed
  in_production = 2, // running, or crashed while running: recovery needed
  in_recovery = 3,   // crashed during recovery: recovery needed
};

const char* to_string(cluster_state state);

constexpr std::uint32_t control_magic = 0x54444d4b; // "TDMK"
constexpr std::uint32_t control_version = 2;        // 1: before generation (read as generation 0)

struct control_data {
  std::uint32_t magic = control_magic;
  std::uint32_t version = control_version;
  std::uint64_t system_id = 0; // random at init
  std::uint32_t page_size = 0;
  std::uint32_t data_checksums = 0;
  std::uint64_t segment_size = 0;     // relation segment bytes
  std::uint64_t wal_segment_size = 0; // WAL segment bytes
  std::uint32_t state = 0;            // cluster_state
  // The torn-page protection of the run that last wrote this file (recorded_protection);
  // 0 in directories from before it was recorded. Recovery after a crash runs in it.
  std::uint32_t protection = 0;
  std::uint64_t checkpoint_lsn = 0;
  std::uint64_t redo_lsn = 0;
  std::uint64_t next_xid = 0;
  std::uint64_t checkpoint_time_unix_ms = 0;
  // Which history this directory's WAL belongs to: a promoted standby starts the next
  // generation, so a standby following it refuses the old primary and the old primary
  // cannot feed it by accident.
  std::uint32_t generation = 0;
  std::uint32_t reserved = 0;
  std::uint32_t crc = 0; // crc32c of every byte before this field
  std::uint32_t padding = 0;
};

/// The values of control_data::protection.
enum class recorded_protection : std::uint32_t {
  unknown = 0,
  full_page_writes = 1,
  doublewrite = 2,
  off = 3,
};

std::string control_file_path(const std::string& data_dir);

/// Throws data_error with a message naming the file when it is missing, short, has a bad
/// magic (not a Tidemark data directory), an unknown version, or a checksum mismatch.
control_data read_control_file(io_engine& io, const std::string& data_dir);

/// Atomic replacement as described above. Throws io_error.
void write_control_file(io_engine& io, const std::string& data_dir, control_data data);

} // namespace tidemark::storage
