// One application thread's way into the engine: a sequence of transactions over pages
// (storage/page_transaction.hpp) or over keyed tables (access/table_transaction.hpp), each
// validated at commit — the commit path every transaction takes. The public
// tidemark::session wraps one; tests use it directly.
//
// Rules it keeps: a commit returns only once its record and everything its transaction
// read are durable (synchronous_commit=on), and a read outside a transaction only once
// what it returned is; a change is refused on a read-only or standby database before it
// is made; a transaction uses pages or tables, never both (each kind validates its own
// reads, so a mix could not be serializable); after a failure every call throws
// engine_stopped_error (W3: nothing is acknowledged that may not be durable).
#pragma once

#include "access/table_transaction.hpp"
#include "storage/page_transaction.hpp"
#include "storage/types.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tidemark::runtime {

class instance;

/// One application session: a sequence of transactions, used from one thread at a time.
/// Transactions are validated at commit (storage/page_transaction.hpp); a read outside a
/// transaction returns only once what it saw is durable, and so does a commit, read-only
/// or not, for everything its transaction read (synchronous_commit=on).
class instance_session {
public:
  explicit instance_session(instance& db);
  instance& database() const { return *db_; }
  void begin();
  bool in_transaction() const { return txn_->active(); }
  std::int64_t read_i64(storage::page_id id, std::uint16_t offset);
  void read_bytes(storage::page_id id, std::uint16_t offset, void* out, std::uint16_t length);
  storage::page_rows rows_on(storage::page_id id);
  storage::block_id relation_size(storage::rel_id rel);
  void add_i64(storage::page_id id, std::uint16_t offset, std::int64_t delta);
  void write_bytes(storage::page_id id, std::uint16_t offset, const void* data,
                   std::uint16_t length);
  void append_row(storage::rel_id rel, const void* row, std::uint16_t row_size);
  // Keyed tables: `table` is a table's relation (the catalog's); keys and values within
  // the limits (the caller checks them).
  std::optional<std::string> get(storage::rel_id table, std::string_view key);
  void put(storage::rel_id table, std::string_view key, std::string_view value);
  bool insert(storage::rel_id table, std::string_view key, std::string_view value);
  bool erase(storage::rel_id table, std::string_view key);
  void add_i64(storage::rel_id table, std::string_view key, std::uint32_t offset,
               std::int64_t delta);
  /// `ahead`: the cursor's read-ahead (access::read_ahead).
  std::optional<access::table_entry> next_entry(storage::rel_id table, std::string_view key,
                                                bool inclusive, access::read_ahead* ahead);
  /// `key` null: the table's last entry.
  std::optional<access::table_entry> previous_entry(storage::rel_id table, const std::string* key,
                                                    bool inclusive);
  /// The transaction's table side, for the catalog's operations (runtime/tables.hpp): a
  /// table transaction from now on (usage_error inside one that used pages).
  access::table_transaction& tables(const char* operation);
  /// usage_error on a read-only database or a standby.
  void check_writable(const char* operation) const;
  /// Throws usage_error when `id` is past the relation's end: a read may reach blocks the
  /// relation has or this transaction extends it by; a change also the block just past them.
  void check_block(storage::page_id id, bool changing) const;
  const storage::page_transaction& transaction() const { return *txn_; }
  /// Validates, applies, logs and (synchronous_commit=on) waits until the commit and
  /// everything it read are durable: the thread sleeps until a group-commit sync covers
  /// them, without a message round trip of its own. Returns the transaction's id.
  /// conflict_error: nothing applied; commit_outcome_unknown: the engine stopped after
  /// the record was written.
  storage::xid_t commit();
  /// As commit(), but returns once the commit is applied and logged, not durable:
  /// settle() then waits until every such commit is (a bulk load's batches, durable
  /// together at its end).
  storage::xid_t commit_unsettled();
  /// Outside a transaction, a bulk load's leaf: `entries` (in key order, values inline,
  /// within access::append_capacity) become the table's new rightmost leaf in one record
  /// (access::tree::append), durable once settle() returns. False, nothing changed, when
  /// the table holds a key at or past the first entry.
  bool append_entries(storage::rel_id table, const std::vector<access::node_item>& entries);
  void settle();
  /// The id of the transaction begun last (valid between begin() and commit()).
  storage::xid_t transaction_id() const;
  void rollback();

private:
  enum class uses { nothing, pages, tables };
  /// Inside a transaction: records that it uses `kind`, or refuses the first call that
  /// would mix pages and tables.
  void use(uses kind, const char* operation);
  void check_running() const;
  /// After a read outside a transaction: waits until what it returned is durable.
  void settle_read(storage::lsn_t newest_seen);
  void wait_durable(storage::lsn_t lsn);
  /// synchronous_standby: waits until a standby has the commit's WAL.
  void wait_for_standby(storage::lsn_t lsn);

  /// Validates, applies and logs the transaction's side that it used; the end of its
  /// record (0: none).
  storage::lsn_t commit_used();
  storage::xid_t commit_and(bool settle_now);
  /// Waits until a commit's record and what it read are durable (and, with
  /// synchronous_standby, on a standby), or says why that is unknown.
  void settle_commit(storage::xid_t xid, storage::lsn_t end, storage::lsn_t seen,
                     const std::string& what);

  instance* db_;
  std::unique_ptr<storage::page_transaction> txn_;
  std::unique_ptr<access::table_transaction> tables_;
  uses uses_ = uses::nothing;
  storage::lsn_t unsettled_end_ = 0; // commits made by commit_unsettled() end by here
  storage::xid_t unsettled_xid_ = 0; // the last of them
};

} // namespace tidemark::runtime
