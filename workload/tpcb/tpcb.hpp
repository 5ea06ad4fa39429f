// The TPC-B-like workload of DESIGN §7, written against the public API only: schema,
// initial load, the transaction, and the verification of its invariant.
//
// Rows (scale S): branches (S rows), tellers (10·S), accounts (100 000·S), all 100-byte
// rows {u64 id, i64 balance, 84 filler bytes}; history, 64-byte rows {u64 xid, i64 delta,
// u32 aid, tid, bid, pad, u64 time}, one per transaction. Two schemas hold them:
//  - tables (the default): keyed tables "branches", "tellers", "accounts", "history", each
//    row the value of its id as an 8-byte big-endian key (history: its xid), so every row
//    a transaction touches is found by a key lookup, as in the other systems compared;
//  - pages: relations 1-3 with the rows appended in id order (row n at a fixed place:
//    types.hpp's packing rule) and relation 4 history appended, addressed directly.
//
// Invariant after any crash and recovery: sum(account balances) = sum(teller balances) =
// sum(branch balances) = sum(history deltas), and every acknowledged transaction id appears
// in history exactly once.
#pragma once

#include "workload/ack_log.hpp"

#include <tidemark/database.hpp>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tidemark::workload::tpcb {

enum class schema { tables, pages };
const char* to_string(schema kind);
/// "tables" or "pages"; usage_error naming the word otherwise.
schema parse_schema(const std::string& word);

constexpr relation_id branches = 1;
constexpr relation_id tellers = 2;
constexpr relation_id accounts = 3;
constexpr relation_id history = 4;
constexpr std::uint32_t row_size = 100;
constexpr std::uint32_t history_row_size = 64;
constexpr std::uint32_t balance_offset_in_row = 8;

struct history_row {
  std::uint64_t xid;
  std::int64_t delta;
  std::uint32_t aid, tid, bid, pad;
  std::uint64_t time_us;
  unsigned char filler[24];
};
static_assert(sizeof(history_row) == history_row_size, "history row layout");

/// A row's key in the tables schema: its id, 8 bytes big-endian (so keys sort as ids).
std::string id_key(std::uint64_t id);

class layout {
public:
  layout(std::size_t page_size, std::uint32_t scale, schema kind = schema::pages);
  std::uint32_t scale() const { return scale_; }
  schema kind() const { return kind_; }
  /// The tables schema: opens the four tables of `db` (usage_error when one is missing).
  void open_tables(database& db);
  /// The table holding `rel`'s rows (tables schema, after open_tables()).
  const table& table_of(relation_id rel) const { return tables_.at(rel - 1); }
  /// Tables schema: each history value is the 64-byte row padded to `bytes` (larger values
  /// go to overflow pages: crash tests use it so that chains are written all the time).
  void set_history_bytes(std::uint32_t bytes) { history_bytes_ = bytes; }
  std::uint32_t history_bytes() const { return history_bytes_; }
  std::uint64_t rows(relation_id rel) const;
  block_number blocks(relation_id rel) const;
  page_id page_of(relation_id rel, std::uint64_t row) const;
  std::uint32_t balance_offset(std::uint64_t row) const;
  std::size_t page_size() const { return page_size_; }
  std::size_t rows_per_page() const { return rows_per_page_; }

private:
  std::size_t page_size_;
  std::uint32_t scale_;
  schema kind_;
  std::size_t rows_per_page_;
  std::vector<table> tables_; // branches, tellers, accounts, history
  std::uint32_t history_bytes_ = history_row_size;
};

using load_progress = std::function<void(std::uint64_t, std::uint64_t)>;

/// Pages schema: appends the three fixed relations (balances zero); history starts empty.
/// Calls `progress(rows_done, rows_total)` now and then.
void load(initial_loader& loader, const layout& shape, const load_progress& progress);
/// Tables schema: creates the four tables in the open database and bulk-loads the three
/// fixed ones in id order (balances zero; session::load).
void load_tables(database& db, const layout& shape, const load_progress& progress);

struct transaction_input {
  std::uint64_t aid, tid, bid;
  std::int64_t delta;
};

/// pgbench's choice: uniform random branch, teller, account, delta in [-5000, 5000].
transaction_input random_input(const layout& shape, std::mt19937_64& random);

/// What a transaction did, as its history row shows it: the row's 64 bytes hashed
/// (FNV-1a, 64 bits). The row holds the id, the accounts, the delta and the commit's
/// microsecond, so two histories that ran different transactions under one id differ here.
std::uint64_t history_digest(const history_row& row);

struct committed_transaction {
  transaction_id xid = 0;
  std::uint64_t digest = 0; // history_digest of the row it wrote
};

/// Runs one transaction in `s` (begin, the changes, commit) and returns its id and digest
/// once the commit was acknowledged.
committed_transaction run_transaction(session& s, const layout& shape,
                                      const transaction_input& input);

struct verify_report {
  std::uint64_t pages_read = 0;        // pages schema
  std::uint64_t rows_read = 0;         // tables schema
  std::vector<std::string> unreadable; // pages the database could not read (corrupt)
  std::int64_t sum_accounts = 0, sum_tellers = 0, sum_branches = 0, sum_history = 0;
  std::uint64_t history_rows = 0;
  std::uint64_t duplicate_history_xids = 0;
  std::uint64_t misplaced_rows = 0;
  std::uint64_t acknowledged = 0;
  std::vector<transaction_id> lost;          // acknowledged ids missing from history
  std::vector<transaction_id> not_committed; // acknowledged, not committed in the status log
  /// Acknowledged ids whose history row is another transaction's (its digest differs) or
  /// that a generation newer than this history's acknowledged: a divergent history.
  std::vector<transaction_id> diverged;
  bool balances_consistent() const {
    return sum_accounts == sum_tellers && sum_tellers == sum_branches &&
           sum_branches == sum_history && duplicate_history_xids == 0 && misplaced_rows == 0;
  }
};

/// Reads the four relations (or tables) through a session of the open database `db` and
/// checks row placement (tables: every id present once, in its own key), the balance
/// invariant and the acknowledged transactions (in any order): each must be in history with
/// the digest it was acknowledged with, committed, and of a generation this history holds.
verify_report verify(database& db, const layout& shape,
                     const std::vector<acknowledged_transaction>& acknowledged);

} // namespace tidemark::workload::tpcb
