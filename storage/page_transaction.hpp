// One atomic multi-page change, logged as a single WAL record that is also the commit
// record. A session collects operations; commit() pins and latches the pages in
// (rel, block) order, applies the operations, inserts the record (with a full-page image
// of each page not changed since the redo point, in full_page_writes mode), stamps the
// record's end LSN on every page and marks them dirty.
//
// Why no undo is ever needed: pages change only while their latches are held across the
// record's insertion, and no page is written before WAL up to its LSN is durable (W1). A
// crash before the record is durable therefore loses the whole transaction, one after it
// keeps all of it: redo replays the record onto every page older than it.
//
// Append-only relations: append_row() places a row in the relation's tail page; the slot
// is decided under the page latch, so concurrent appenders never collide.
#pragma once

#include "storage/buffer_pool.hpp"
#include "storage/commit_log.hpp"
#include "storage/wal_log.hpp"

#include <atomic>
#include <cstdint>
#include <vector>

namespace tidemark::storage {

/// The current tail block of each append-only relation.
class append_tails {
public:
  explicit append_tails(relation_files& files);
  block_id current(rel_id rel);
  /// Moves the tail past `full_block` (no-op if another session already did).
  void advance(rel_id rel, block_id full_block);

private:
  relation_files& files_;
  std::atomic<std::int64_t> tails_[max_relations];
};

inline std::size_t rows_per_page(std::size_t page_size, std::size_t row_size) {
  return (page_size - page_header_size) / row_size;
}

class page_transaction {
public:
  /// `status` may be null (no commit-status log, as in some tests).
  page_transaction(buffer_pool& pool, wal_log& wal, append_tails& tails, bool full_page_writes,
                   commit_log* status = nullptr);

  void begin(xid_t xid);
  xid_t xid() const { return xid_; }

  /// The committed value at (page, offset), plus this transaction's pending adds to it.
  std::int64_t read_i64(page_id id, std::uint16_t offset);
  /// The committed bytes at (page, offset); this transaction's pending changes not included.
  void read_bytes(page_id id, std::uint16_t offset, void* out, std::uint16_t length);
  /// Rows appended to the page (committed).
  std::uint16_t row_count(page_id id);
  void add_i64(page_id id, std::uint16_t offset, std::int64_t delta);
  void write_bytes(page_id id, std::uint16_t offset, const void* data, std::uint16_t length);
  void append_row(rel_id rel, const void* row, std::uint16_t row_size);

  /// Applies and logs everything, then marks the transaction committed in the
  /// commit-status log; returns the record's position. The caller acknowledges the commit
  /// only after WAL is durable past `end` (W4).
  lsn_range commit();
  /// Forgets pending operations (nothing was applied).
  void abort();

private:
  struct pending_op {
    page_id id;
    op_kind kind;
    std::uint16_t offset;
    std::uint16_t length;
    std::size_t data_at; // into data_
  };
  struct pending_append {
    rel_id rel;
    std::uint16_t row_size;
    std::size_t data_at;
    block_id block;      // resolved under latch
    std::uint16_t slot;  // resolved under latch
  };
  struct latched_page {
    page_id id;
    buffer_id buffer;
  };

  void read_committed(page_id id, std::size_t offset, void* out, std::size_t length);
  bool latch_pages();
  void release_pages();
  bool resolve_appends();
  void encode(bool apply, lsn_t redo_lsn);
  std::size_t store(const void* data, std::size_t length);

  buffer_pool& pool_;
  wal_log& wal_;
  append_tails& tails_;
  bool full_page_writes_;
  commit_log* status_;
  xid_t xid_ = 0;
  std::vector<pending_op> ops_;
  std::vector<pending_append> appends_;
  std::vector<unsigned char> data_;
  std::vector<latched_page> pages_;
  record_builder builder_;
};

} // namespace tidemark::storage
