// Raw reads of WAL bytes by LSN across segment files: what the recovery reader decodes
// records from, and what a primary's WAL sender ships to a standby unchanged.
//
// Rules it keeps:
//  - Bytes are read from consecutive segments named by their first LSN
//    (wal_log::segment_name); a read stops at the first missing segment, so what it
//    returns is always a prefix of the requested range that exists on disk.
//  - Bytes past the end of a short segment file read as zeros (never-written WAL).
//  - One segment's descriptor is cached; it is re-opened when a read moves to another
//    segment, or on every read when `cache` is off (the sender, whose segments may be
//    recycled under it by a checkpoint).
#pragma once

#include "storage/io_engine.hpp"

#include <cstdint>
#include <string>

namespace tidemark::storage {

class wal_segment_reader {
public:
  wal_segment_reader(io_engine& io, std::string wal_dir, std::uint64_t segment_size,
                     bool cache = true);
  ~wal_segment_reader();
  wal_segment_reader(const wal_segment_reader&) = delete;
  wal_segment_reader& operator=(const wal_segment_reader&) = delete;

  /// Reads up to `length` bytes of WAL from `lsn`; returns how many could be read (fewer
  /// only where a segment is missing).
  std::size_t read(lsn_t lsn, unsigned char* out, std::size_t length);
  /// Closes the cached descriptor (the next read re-opens its segment).
  void forget();
  /// Drops the kernel's cached copy of the WAL bytes [lsn, lsn + length) and the cached
  /// descriptor: the next read of them asks the file system afresh.
  void forget_cached(lsn_t lsn, std::size_t length);

  std::string segment_path(lsn_t segment_start) const;
  lsn_t segment_start(lsn_t lsn) const { return lsn - lsn % segment_size_; }
  std::uint64_t segment_size() const { return segment_size_; }

private:
  int segment_fd(lsn_t segment_start);

  io_engine& io_;
  std::string dir_;
  std::uint64_t segment_size_;
  bool cache_;
  struct cached_segment {
    lsn_t start = ~lsn_t{0};
    int fd = -1; // -1 with a valid start: the segment file does not exist
  };
  cached_segment segment_;
};

} // namespace tidemark::storage
