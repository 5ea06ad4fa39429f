// One atomic multi-page change, logged as a single WAL record that is also the commit
// record, and validated so that committed transactions are serializable.
//
// A transaction collects operations (add_i64, write_bytes, append_row) without touching a
// page, and records every read it makes: the page, the bytes, and the page's LSN. Reads
// see the committed page with this transaction's own pending add_i64 and write_bytes laid
// over it. commit() then:
//   1. pins and exclusively latches every page it changes, in (rel, block) order;
//   2. validates its reads: on a page it changes (latched, so frozen), the bytes it read
//      are still there; on a page it only read, the page's LSN is unchanged — checked
//      under a shared latch taken without waiting (a page being changed by another commit
//      means: release everything, wait for that commit, start again; so latches are only
//      ever waited for in (rel, block) order or with nothing held, and no deadlock forms);
//      a failed check throws conflict_error with nothing applied;
//   3. applies the operations, inserts the record (with a full-page image of each page not
//      changed since the redo point, in full_page_writes mode), stamps the record's end
//      LSN on every page and marks them dirty;
//   4. sets the transaction's status in the commit-status log. From the insert until
//      then it holds a commit_hold: a checkpoint whose redo point lies past the record
//      (so that redo will not replay it) waits for both, the dirty pages and the status,
//      before it looks for what to write (storage rule 4).
// Why this is serializable: every read held at the moment all write latches were held
// (a changed page was frozen from then on; a read-only page did not change between the
// read and its check, which came after that moment), and the writes became visible
// atomically under those latches. Commutative add_i64 deltas that the transaction does
// not read conflict with nothing.
//
// Why no undo is ever needed: pages change only while their latches are held across the
// record's insertion, and no page is written before WAL up to its LSN is durable (W1). A
// crash before the record is durable loses the whole transaction, one after it keeps all
// of it: redo replays the record onto every page older than it. Every limit (pages per
// transaction, bytes of changes per page, rows per relation) is checked when the
// operation is added, or at the latest before the first byte is applied.
//
// Append-only use: append_row() places rows in the relation's tail page; slots are decided
// under the page latch, so concurrent appenders never collide. A page records its rows'
// size (page_header::row_size); an append never overwrites a non-zero byte or a byte the
// same transaction writes by offset, never mixes row sizes on one page, and never starts
// rows on a page written by offset (before, or by the same transaction) — it moves on to
// the next block instead. So every change a transaction made is there after its commit.
#pragma once

#include "storage/buffer_pool.hpp"
#include "storage/commit_log.hpp"
#include "storage/wal_log.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

namespace tidemark::storage {

/// Throws usage_error for a change made outside a transaction (before begin(), or after
/// commit, rollback or a conflict ended it): nothing would ever apply it. Page and table
/// transactions refuse alike.
void refuse_outside_transaction(bool active, const char* operation);

/// Pages one page transaction may change (each relation appended to counts as one).
constexpr std::size_t max_transaction_pages = 8;
static_assert(max_transaction_pages <= max_blocks_per_record, "a transaction is one record");

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

/// What a page says about its rows.
struct page_rows {
  std::uint16_t count = 0;
  std::uint16_t row_size = 0; // 0: no rows, or written before pages recorded it
};

class page_transaction {
public:
  /// `wal` is null for a read-only database: only read-only transactions commit. `status`
  /// may be null (no commit-status log, as in some tests). `on_half_applied` is
  /// called when a failure leaves applied but unlogged changes in the pool (the runtime
  /// stops the engine, W3); it runs before the pages' latches are released.
  page_transaction(buffer_pool& pool, wal_log* wal, append_tails& tails, bool full_page_writes,
                   commit_log* status = nullptr,
                   std::function<void(const std::string&)> on_half_applied = {});

  /// Starts a transaction: from now on reads are recorded for validation.
  void begin(xid_t xid);
  xid_t xid() const { return xid_; }
  bool active() const { return active_; }

  /// The bytes at (page, offset): committed, with this transaction's own pending add_i64
  /// and write_bytes applied. Outside a transaction: the committed bytes.
  std::int64_t read_i64(page_id id, std::uint16_t offset);
  void read_bytes(page_id id, std::uint16_t offset, void* out, std::uint16_t length);
  /// Committed rows of the page and their size (recorded like any read).
  page_rows rows_on(page_id id);
  /// The relation's size in blocks, recorded: a commit fails if the relation grew (a scan
  /// that reached its end would have missed rows).
  block_id relation_size(rel_id rel);
  /// The newest page LSN a read returned since begin() (outside a transaction: by the
  /// last read). The caller makes WAL durable up to it before acting on what it read.
  lsn_t newest_seen() const { return newest_seen_; }

  /// Changes, buffered until commit(). usage_error outside a transaction (before begin(),
  /// or after commit(), abort() or a conflict ended it): nothing would ever apply them.
  void add_i64(page_id id, std::uint16_t offset, std::int64_t delta);
  void write_bytes(page_id id, std::uint16_t offset, const void* data, std::uint16_t length);
  void append_row(rel_id rel, const void* row, std::uint16_t row_size);
  /// True when this transaction has a pending change of the page.
  bool changes(page_id id) const;
  /// The highest block of `rel` this transaction may change: the relation's end, plus
  /// the blocks at and past it that the transaction already changes.
  block_id extendable_to(rel_id rel) const;
  /// This transaction's `index`-th pending row for `rel`, in append order (null past the
  /// last); `*size` is set to its size.
  const unsigned char* pending_row(rel_id rel, std::size_t index, std::uint16_t* size) const;

  /// Validates, applies and logs everything, then marks the transaction committed in the
  /// commit-status log; returns the record's position ({0, 0} for a transaction that
  /// changed nothing: it writes no record). The caller acknowledges the commit only after
  /// WAL is durable past max(end, newest_seen()) (W4). Throws conflict_error when a read
  /// no longer holds; nothing is applied then. Throws commit_outcome_unknown (after
  /// on_half_applied) when the record was inserted but its status could not be recorded.
  lsn_range commit();
  /// Forgets pending operations and reads (nothing was applied).
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
    block_id block;     // resolved under latch
    std::uint16_t slot; // resolved under latch
  };
  struct recorded_read {
    page_id id;
    std::uint16_t offset;
    std::uint16_t length;
    std::size_t data_at; // into read_data_
    lsn_t lsn;
  };
  struct recorded_size {
    rel_id rel;
    block_id blocks;
  };
  struct latched_page {
    page_id id;
    buffer_id buffer;
  };
  enum class read_check { held, changed, busy };

  void read_view(page_id id, std::size_t offset, std::size_t length, void* out);
  lsn_t read_committed(page_id id, std::size_t offset, std::size_t length, void* out);
  void record_read(page_id id, std::size_t offset, std::size_t length, const void* bytes,
                   lsn_t lsn);
  std::size_t appended_relations() const;
  void refuse_past_page_limit(std::size_t new_pages) const;
  void note_page(page_id id, std::size_t op_bytes);
  std::size_t op_bytes_of(page_id id) const;
  void latch_and_validate();
  void latch_pages();
  void release_pages();
  bool resolve_appends();
  bool writes_between(page_id id, std::size_t begin, std::size_t end) const;
  const latched_page* held(page_id id) const;
  bool validate_held_pages() const;
  read_check validate_read_pages(page_id* page);
  bool validate_sizes() const;
  void check_op_limits();
  void wait_for_page(page_id id);
  void encode(bool apply, lsn_t redo_lsn);
  std::size_t store(const void* data, std::size_t length);
  [[noreturn]] void conflict(const std::string& what);

  buffer_pool& pool_;
  wal_log* wal_;
  append_tails& tails_;
  bool full_page_writes_;
  commit_log* status_;
  std::function<void(const std::string&)> on_half_applied_;
  xid_t xid_ = 0;
  bool active_ = false;
  lsn_t newest_seen_ = 0;
  std::vector<pending_op> ops_;
  std::vector<pending_append> appends_;
  std::vector<unsigned char> data_;
  std::vector<std::pair<page_id, std::size_t>> op_pages_; // page, op bytes (≤ max pages)
  std::vector<recorded_read> reads_;
  std::vector<unsigned char> read_data_;
  std::vector<recorded_size> sizes_;
  std::vector<unsigned char> scratch_;
  std::vector<latched_page> pages_;
  bool extra_pin_ = false; // one more pin than pages_, for validating pages only read
  record_builder builder_;
};

} // namespace tidemark::storage
