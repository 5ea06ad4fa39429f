// The plain mechanism every data-file page write goes through, whoever the writer is:
// stamp identity and checksum on the private copy, make WAL durable up to the page LSN
// (W1), write the pages, and register each written segment for sync (W2) — all before the
// caller reports the buffers clean.
#pragma once

#include "storage/relation_files.hpp"
#include "storage/sync_table.hpp"
#include "storage/wal_log.hpp"

#include <atomic>
#include <cstddef>

namespace tidemark::storage {

/// Who wrote a page, for the statistics users read to see where writes come from.
enum class write_source : std::uint8_t { backend = 0, bgwriter = 1, checkpointer = 2 };
constexpr std::size_t write_source_count = 3;

/// Receives "these files have writes that need an fsync" registrations, with what was
/// written where (the sync worker's inbox). Called after the writes completed.
class sync_registry {
public:
  virtual ~sync_registry() = default;
  virtual void register_files(const file_write* files, std::size_t count, write_source source) = 0;
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
  void write(page_copy* pages, std::size_t count, write_source source);

  /// Only the W1 step and the stamping, for writers that put the bytes elsewhere first
  /// (the doublewrite batcher).
  void prepare(page_copy* pages, std::size_t count);
  /// Counts pages such a writer then wrote in place.
  void count_written(std::size_t count, write_source source) {
    written_[static_cast<std::size_t>(source)].fetch_add(count, std::memory_order_relaxed);
  }

  wal_log& wal() { return wal_; }
  relation_files& files() { return files_; }
  std::uint64_t written(write_source source) const {
    return written_[static_cast<std::size_t>(source)].load(std::memory_order_relaxed);
  }

private:
  wal_log& wal_;
  relation_files& files_;
  sync_registry& registry_;
  bool checksums_;
  std::atomic<std::uint64_t> written_[write_source_count] = {};
};

} // namespace tidemark::storage
