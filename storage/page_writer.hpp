// The plain mechanism every data-file page write goes through, whoever the writer is:
// stamp identity and checksum on the private copy, make WAL durable up to the page LSN
// (W1), write the pages, and register each written segment for sync (W2) — all before the
// caller reports the buffers clean.
#pragma once

#include "storage/relation_files.hpp"
#include "storage/wal_log.hpp"

#include <cstddef>

namespace tidemark::storage {

/// Receives "this segment has writes that need an fsync" registrations (the sync worker's
/// inbox, or a plain table in tests).
class sync_registry {
public:
  virtual ~sync_registry() = default;
  virtual void register_segments(const segment_id* segments, std::size_t count) = 0;
};

struct page_copy {
  page_id id;
  lsn_t lsn = 0;
  void* data = nullptr; // page_size bytes, stamped in place
};

class page_writer {
public:
  page_writer(wal_log& wal, relation_files& files, sync_registry& registry, bool checksums)
    : wal_(wal), files_(files), registry_(registry), checksums_(checksums) {}

  /// Writes `count` page copies (any order). Throws io_error; the caller then keeps every
  /// one of the buffers dirty (pages written before the failure are registered already).
  void write(page_copy* pages, std::size_t count);

  /// Only the W1 step and the stamping, for writers that put the bytes elsewhere first
  /// (the doublewrite batcher).
  void prepare(page_copy* pages, std::size_t count);

  wal_log& wal() { return wal_; }
  relation_files& files() { return files_; }

private:
  wal_log& wal_;
  relation_files& files_;
  sync_registry& registry_;
  bool checksums_;
};

} // namespace tidemark::storage
