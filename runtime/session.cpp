// The commit path: what every transaction of every application thread runs through (see
// session.hpp). A commit applies its changes to the pages, inserts one WAL record, sends
// the wal_writer one message and sleeps until a group-commit fdatasync covers the record
// (and, with synchronous_standby, until a standby has it).
#include "runtime/session.hpp"

#include "runtime/instance.hpp"
#include "storage/check.hpp"

#include <caf/send.hpp>

#include <algorithm>
#include <string>

namespace tidemark::runtime {

instance_session::instance_session(instance& db)
  : db_(&db), txn_(std::make_unique<storage::page_transaction>(
                *db.internals().store.pool, db.internals().store.wal.get(), *db.internals().tails,
                db.internals().full_page_writes(), db.internals().store.commit_log.get(),
                [e = &db.internals()](const std::string& why) { e->fail(why); })),
    tables_(std::make_unique<access::table_transaction>(*db.internals().tables)) {}

void instance_session::use(uses kind, const char* operation) {
  if (!txn_->active() || uses_ == kind)
    return;
  if (uses_ == uses::nothing) {
    uses_ = kind;
    return;
  }
  throw tidemark::usage_error(std::string(operation) + ": this transaction uses " +
                              (uses_ == uses::pages ? "pages" : "keyed tables") +
                              " already; a transaction uses pages or tables, not both");
}

void instance_session::check_running() const {
  const engine& e = db_->internals();
  if (e.failed())
    throw tidemark::engine_stopped_error("the engine stopped after a failure (the next open "
                                         "runs crash recovery): " +
                                         e.failure());
}

void instance_session::wait_durable(storage::lsn_t lsn) {
  engine& e = db_->internals();
  if (e.store.wal == nullptr) // read-only: everything on disk was made durable by the clean stop
    return;
  if (!e.config.synchronous_commit || lsn <= e.store.wal->flushed_lsn())
    return;
  // Group commit: the wal_writer starts a sync covering `lsn` (together with every other
  // commit waiting), and the sync's completion wakes this thread.
  caf::anon_send(db_->wal_writer(), messages::flush_wanted{lsn});
  e.store.wal->wait_for_flush(lsn);
}

void instance_session::wait_for_standby(storage::lsn_t lsn) {
  engine& e = db_->internals();
  if (lsn == 0 || e.config.synchronous_standby == settings::standby_wait::off)
    return;
  e.sender.acknowledged.wait_for(lsn);
}

void instance_session::settle_read(storage::lsn_t newest_seen) {
  if (txn_->active())
    return; // the commit waits for everything the transaction read
  try {
    wait_durable(newest_seen);
  } catch (const storage::wal_not_durable& error) {
    db_->internals().fail(error.what()); // W3, as the wal_writer does: say it before returning
    throw tidemark::engine_stopped_error(std::string("a read saw a change that may not be "
                                                     "durable: ") +
                                         error.what());
  }
}

void instance_session::begin() {
  if (txn_->active())
    throw tidemark::usage_error("begin() inside a transaction: commit() or rollback() it first");
  check_running();
  storage::xid_t xid = db_->internals().next_xid.fetch_add(1);
  txn_->begin(xid);
  tables_->begin(xid);
  uses_ = uses::nothing;
}

void instance_session::check_block(storage::page_id id, bool changing) const {
  if (id.block < db_->internals().store.files->nblocks(id.rel))
    return; // the common case: a block the relation has
  storage::block_id limit = txn_->extendable_to(id.rel); // blocks [0, limit) may be read
  if (id.block < limit || (changing && id.block == limit))
    return;
  throw tidemark::usage_error(
    "block " + std::to_string(id.block) + " is past the end of relation " + std::to_string(id.rel) +
    " (" + std::to_string(limit) + " blocks" +
    (changing ? "; a change may extend a relation by its next block only)" : ")"));
}

std::int64_t instance_session::read_i64(storage::page_id id, std::uint16_t offset) {
  check_running();
  use(uses::pages, "read_i64");
  std::int64_t value = txn_->read_i64(id, offset);
  settle_read(txn_->newest_seen());
  return value;
}

void instance_session::read_bytes(storage::page_id id, std::uint16_t offset, void* out,
                                  std::uint16_t length) {
  check_running();
  use(uses::pages, "read_bytes");
  txn_->read_bytes(id, offset, out, length);
  settle_read(txn_->newest_seen());
}

storage::page_rows instance_session::rows_on(storage::page_id id) {
  check_running();
  use(uses::pages, "row_count");
  storage::page_rows rows = txn_->rows_on(id);
  settle_read(txn_->newest_seen());
  return rows;
}

storage::block_id instance_session::relation_size(storage::rel_id rel) {
  use(uses::pages, "rows");
  return txn_->relation_size(rel);
}

void instance_session::check_writable(const char* operation) const {
  if (db_->read_only())
    throw tidemark::usage_error(std::string(operation) + ": the database is open read-only");
  if (db_->is_standby())
    throw tidemark::usage_error(std::string(operation) +
                                ": the database is a standby (read-only until promoted)");
}

void instance_session::add_i64(storage::page_id id, std::uint16_t offset, std::int64_t delta) {
  check_writable("add_i64");
  use(uses::pages, "add_i64");
  txn_->add_i64(id, offset, delta);
}

void instance_session::write_bytes(storage::page_id id, std::uint16_t offset, const void* data,
                                   std::uint16_t length) {
  check_writable("write_bytes");
  use(uses::pages, "write_bytes");
  txn_->write_bytes(id, offset, data, length);
}

void instance_session::append_row(storage::rel_id rel, const void* row, std::uint16_t row_size) {
  check_writable("append_row");
  use(uses::pages, "append_row");
  txn_->append_row(rel, row, row_size);
}

std::optional<std::string> instance_session::get(storage::rel_id table, std::string_view key) {
  check_running();
  use(uses::tables, "get");
  std::optional<std::string> value = tables_->get(table, key);
  settle_read(tables_->newest_seen());
  return value;
}

void instance_session::put(storage::rel_id table, std::string_view key, std::string_view value) {
  check_writable("put");
  use(uses::tables, "put");
  tables_->put(table, key, value);
}

bool instance_session::insert(storage::rel_id table, std::string_view key, std::string_view value) {
  check_writable("insert");
  check_running();
  use(uses::tables, "insert");
  return tables_->insert(table, key, value);
}

bool instance_session::erase(storage::rel_id table, std::string_view key) {
  check_writable("erase");
  check_running();
  use(uses::tables, "erase");
  return tables_->erase(table, key);
}

void instance_session::add_i64(storage::rel_id table, std::string_view key, std::uint32_t offset,
                               std::int64_t delta) {
  check_writable("add_i64");
  use(uses::tables, "add_i64");
  tables_->add_i64(table, key, offset, delta);
}

std::optional<access::table_entry> instance_session::next_entry(storage::rel_id table,
                                                                std::string_view key,
                                                                bool inclusive,
                                                                access::read_ahead* ahead) {
  check_running();
  use(uses::tables, "a cursor's step");
  std::optional<access::table_entry> entry = tables_->next_entry(table, key, inclusive, ahead);
  settle_read(tables_->newest_seen());
  return entry;
}

std::optional<access::table_entry>
instance_session::previous_entry(storage::rel_id table, const std::string* key, bool inclusive) {
  check_running();
  use(uses::tables, "a cursor's step");
  std::optional<access::table_entry> entry = tables_->previous_entry(table, key, inclusive);
  settle_read(tables_->newest_seen());
  return entry;
}

access::table_transaction& instance_session::tables(const char* operation) {
  storage::refuse_outside_transaction(txn_->active(), operation);
  use(uses::tables, operation);
  return *tables_;
}

storage::xid_t instance_session::transaction_id() const { return txn_->xid(); }

void instance_session::rollback() {
  txn_->abort();
  tables_->abort();
}

storage::lsn_t instance_session::commit_used() {
  if (uses_ == uses::tables) {
    txn_->abort();
    return tables_->commit(); // ends the transaction, whatever happens
  }
  tables_->abort();
  return txn_->commit().end; // ends the transaction, whatever happens
}

storage::xid_t instance_session::commit() { return commit_and(true); }

storage::xid_t instance_session::commit_unsettled() { return commit_and(false); }

bool instance_session::append_entries(storage::rel_id table,
                                      const std::vector<access::node_item>& entries) {
  check_writable("table_loader::add");
  check_running();
  TIDEMARK_CHECK(!txn_->active(), "a bulk load appends outside a transaction");
  std::optional<storage::lsn_t> end = access::tree(*db_->internals().tables, table).append(entries);
  if (!end)
    return false;
  unsettled_end_ = std::max(unsettled_end_, *end);
  return true;
}

void instance_session::settle() {
  storage::lsn_t end = unsettled_end_;
  storage::xid_t xid = unsettled_xid_; // the last transaction among them (0: none)
  unsettled_end_ = 0;
  unsettled_xid_ = 0;
  settle_commit(xid, end, 0, "the bulk load's changes up to now");
}

storage::xid_t instance_session::commit_and(bool settle_now) {
  if (!txn_->active())
    throw tidemark::usage_error("commit() without begin()");
  try {
    check_running();
  } catch (...) {
    rollback();
    throw;
  }
  storage::xid_t xid = txn_->xid();
  storage::lsn_t seen = std::max(txn_->newest_seen(), tables_->newest_seen());
  storage::lsn_t end = 0;
  try {
    end = commit_used();
  } catch (const tidemark::commit_outcome_unknown&) {
    throw; // logged, then the engine stopped: status_of() tells after the next open
  } catch (...) {
    // A failure after applying stopped the engine: say so. Otherwise (conflict_error,
    // usage_error, page_corrupt_error, io_error) nothing was applied.
    check_running();
    throw;
  }
  if (settle_now) {
    settle_commit(xid, end, seen, "transaction " + std::to_string(xid));
  } else {
    unsettled_end_ = std::max({unsettled_end_, end, seen});
    unsettled_xid_ = xid;
  }
  return xid;
}

void instance_session::settle_commit(storage::xid_t xid, storage::lsn_t end, storage::lsn_t seen,
                                     const std::string& what) {
  try {
    wait_durable(std::max(end, seen));
    wait_for_standby(end);
  } catch (const storage::position_stopped& error) {
    throw tidemark::commit_outcome_unknown(what +
                                             ": durable here, but no synchronous standby "
                                             "confirmed it before " +
                                             error.what() + "; after a failover it may be absent",
                                           xid);
  } catch (const storage::wal_not_durable& error) {
    db_->internals().fail(error.what()); // W3, as the wal_writer does: say it before returning
    if (end == 0)
      throw tidemark::engine_stopped_error(
        what + " read changes that may not be durable: " + error.what());
    throw tidemark::commit_outcome_unknown(
      "the outcome of " + what +
        " is unknown: its WAL was written but the engine stopped before it was durable (" +
        error.what() +
        "); after the next open each commit is either wholly present or wholly absent",
      xid);
  }
}

} // namespace tidemark::runtime
