// One application thread's way into the engine: a sequence of transactions over pages,
// validated at commit (storage/page_transaction.hpp) — the commit path every transaction
// takes. The public tidemark::session wraps one; tests use it directly.
//
// Rules it keeps: a commit returns only once its record and everything its transaction
// read are durable (synchronous_commit=on), and a read outside a transaction only once
// what it returned is; a change is refused on a read-only or standby database before it
// is made; after a failure every call throws engine_stopped_error (W3: nothing is
// acknowledged that may not be durable).
#pragma once

#include "storage/page_transaction.hpp"
#include "storage/types.hpp"

#include <cstdint>
#include <memory>

namespace tidemark::runtime {

class instance;

/// One application session: a sequence of transactions, used from one thread at a time.
/// Transactions are validated at commit (storage/page_transaction.hpp); a read outside a
/// transaction returns only once what it saw is durable, and so does a commit, read-only
/// or not, for everything its transaction read (synchronous_commit=on).
class instance_session {
public:
  explicit instance_session(instance& db);
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
  /// The id of the transaction begun last (valid between begin() and commit()).
  storage::xid_t transaction_id() const;
  void rollback();

private:
  void check_running() const;
  void check_writable(const char* operation) const;
  /// After a read outside a transaction: waits until what it returned is durable.
  void settle_read();
  void wait_durable(storage::lsn_t lsn);
  /// synchronous_standby: waits until a standby has the commit's WAL.
  void wait_for_standby(storage::lsn_t lsn);

  instance* db_;
  std::unique_ptr<storage::page_transaction> txn_;
};

} // namespace tidemark::runtime
