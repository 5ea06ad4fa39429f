// The TPC-B-like workload: see tpcb.hpp.
#include "workload/tpcb/tpcb.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

namespace tidemark::workload::tpcb {

namespace {

const char* const table_names[] = {"branches", "tellers", "accounts", "history"};

// Row `id` of fixed relation `rel` as loaded: its id, a zero balance, filler.
void fill_row(unsigned char* at, relation_id rel, std::uint64_t id) {
  std::memset(at, 0, row_size);
  std::memcpy(at, &id, sizeof id);
  std::memset(at + 16, 'a' + static_cast<int>(rel), row_size - 16);
}

} // namespace

const char* to_string(schema kind) { return kind == schema::tables ? "tables" : "pages"; }

schema parse_schema(const std::string& word) {
  if (word == "tables")
    return schema::tables;
  if (word == "pages")
    return schema::pages;
  throw usage_error("unknown schema \"" + word + "\" (tables or pages)");
}

std::string id_key(std::uint64_t id) {
  std::string key(8, '\0');
  for (int i = 7; i >= 0; --i, id >>= 8)
    key[std::size_t(i)] = static_cast<char>(id & 0xff);
  return key;
}

layout::layout(std::size_t page_size, std::uint32_t scale, schema kind)
  : page_size_(page_size), scale_(scale), kind_(kind),
    rows_per_page_(tidemark::rows_per_page(page_size, row_size)) {}

void layout::open_tables(database& db) {
  tables_.clear();
  for (const char* name : table_names)
    tables_.push_back(db.open_table(name));
}

std::uint64_t layout::rows(relation_id rel) const {
  switch (rel) {
    case branches:
      return scale_;
    case tellers:
      return 10ull * scale_;
    case accounts:
      return 100'000ull * scale_;
    default:
      return 0;
  }
}

block_number layout::blocks(relation_id rel) const {
  return static_cast<block_number>((rows(rel) + rows_per_page_ - 1) / rows_per_page_);
}

page_id layout::page_of(relation_id rel, std::uint64_t row) const {
  return {rel, static_cast<block_number>(row / rows_per_page_)};
}

std::uint32_t layout::balance_offset(std::uint64_t row) const {
  return static_cast<std::uint32_t>(page_header_bytes + (row % rows_per_page_) * row_size +
                                    balance_offset_in_row);
}

void load(initial_loader& loader, const layout& shape, const load_progress& progress) {
  constexpr std::uint64_t rows_per_call = 4096;
  std::vector<unsigned char> rows(rows_per_call * row_size);
  std::uint64_t total = shape.rows(branches) + shape.rows(tellers) + shape.rows(accounts);
  std::uint64_t done = 0;
  for (relation_id rel : {branches, tellers, accounts}) {
    for (std::uint64_t first = 0; first < shape.rows(rel); first += rows_per_call) {
      std::uint64_t n = std::min(rows_per_call, shape.rows(rel) - first);
      for (std::uint64_t i = 0; i < n; ++i)
        fill_row(rows.data() + i * row_size, rel, first + i);
      loader.append_rows(rel, rows.data(), row_size, n);
      done += n;
      progress(done, total);
    }
  }
}

void load_tables(database& db, const layout& shape, const load_progress& progress) {
  for (const char* name : table_names)
    db.create_table(name);
  layout opened = shape;
  opened.open_tables(db);
  session s = db.open_session();
  unsigned char row[row_size];
  std::uint64_t total = shape.rows(branches) + shape.rows(tellers) + shape.rows(accounts);
  std::uint64_t done = 0;
  for (relation_id rel : {branches, tellers, accounts}) {
    table_loader loader = s.load(opened.table_of(rel)); // ids in order: keys in order
    for (std::uint64_t id = 0; id < shape.rows(rel); ++id) {
      fill_row(row, rel, id);
      loader.add(id_key(id), std::string_view(reinterpret_cast<const char*>(row), row_size));
      if (++done % 4096 == 0)
        progress(done, total);
    }
    loader.finish();
  }
  progress(done, total);
}

transaction_input random_input(const layout& shape, std::mt19937_64& random) {
  transaction_input in;
  in.bid = random() % shape.rows(branches);
  in.tid = random() % shape.rows(tellers);
  in.aid = random() % shape.rows(accounts);
  in.delta = static_cast<std::int64_t>(random() % 10001) - 5000;
  return in;
}

namespace {

history_row history_of(transaction_id xid, const transaction_input& in) {
  history_row row{};
  row.xid = xid;
  row.delta = in.delta;
  row.aid = static_cast<std::uint32_t>(in.aid);
  row.tid = static_cast<std::uint32_t>(in.tid);
  row.bid = static_cast<std::uint32_t>(in.bid);
  row.time_us = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  return row;
}

// The tables schema: every row found by its key; the balances added to without reading
// them (but the account's, read back as pgbench does), so only the account conflicts.
committed_transaction run_on_tables(session& s, const layout& shape, const transaction_input& in) {
  s.begin();
  std::string account = id_key(in.aid);
  s.add_i64(shape.table_of(accounts), account, balance_offset_in_row, in.delta);
  (void)s.get(shape.table_of(accounts), account);
  s.add_i64(shape.table_of(tellers), id_key(in.tid), balance_offset_in_row, in.delta);
  s.add_i64(shape.table_of(branches), id_key(in.bid), balance_offset_in_row, in.delta);
  history_row row = history_of(s.id(), in);
  std::string value(reinterpret_cast<const char*>(&row), sizeof row);
  value.resize(std::max<std::size_t>(shape.history_bytes(), sizeof row), 'h');
  s.put(shape.table_of(history), id_key(row.xid), value);
  return {s.commit(), history_digest(row)};
}

} // namespace

std::uint64_t history_digest(const history_row& row) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(&row);
  std::uint64_t hash = 14695981039346656037ull; // FNV-1a offset basis
  for (std::size_t i = 0; i < sizeof row; ++i)
    hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

committed_transaction run_transaction(session& s, const layout& shape,
                                      const transaction_input& in) {
  if (shape.kind() == schema::tables)
    return run_on_tables(s, shape, in);
  s.begin();
  page_id account = shape.page_of(accounts, in.aid);
  s.add_i64(account, shape.balance_offset(in.aid), in.delta);
  (void)s.read_i64(account, shape.balance_offset(in.aid)); // "read it back", as pgbench does
  s.add_i64(shape.page_of(tellers, in.tid), shape.balance_offset(in.tid), in.delta);
  s.add_i64(shape.page_of(branches, in.bid), shape.balance_offset(in.bid), in.delta);
  history_row row = history_of(s.id(), in);
  s.append_row(history, &row, history_row_size);
  return {s.commit(), history_digest(row)};
}

namespace {

constexpr std::size_t unreadable_listed = 20;

// Reads `count` rows of `size` bytes from the start of `page`'s data area; false (and the
// page listed) when the database cannot read the page.
bool read_rows(session& s, page_id page, std::size_t count, std::size_t size,
               std::vector<unsigned char>& out, verify_report& report) {
  out.resize(count * size);
  ++report.pages_read;
  try {
    if (count > 0)
      s.read_bytes(page, page_header_bytes, out.data(), static_cast<std::uint32_t>(out.size()));
    return true;
  } catch (const page_corrupt_error& error) {
    if (report.unreadable.size() < unreadable_listed)
      report.unreadable.push_back(error.where());
    return false;
  }
}

std::int64_t sum_fixed_relation(session& s, const layout& shape, relation_id rel,
                                verify_report& report) {
  std::uint64_t sum = 0;
  std::vector<unsigned char> rows;
  for (block_number block = 0; block < shape.blocks(rel); ++block) {
    std::uint64_t first = std::uint64_t(block) * shape.rows_per_page();
    std::uint64_t last = std::min(first + shape.rows_per_page(), shape.rows(rel));
    if (!read_rows(s, {rel, block}, last - first, row_size, rows, report))
      continue;
    for (std::uint64_t row = first; row < last; ++row) {
      const unsigned char* at = rows.data() + (row - first) * row_size;
      std::uint64_t id;
      std::int64_t balance;
      std::memcpy(&id, at, 8);
      std::memcpy(&balance, at + balance_offset_in_row, 8);
      if (id != row)
        ++report.misplaced_rows;
      sum += static_cast<std::uint64_t>(balance);
    }
  }
  return static_cast<std::int64_t>(sum);
}

// Each history row's transaction id and digest.
using history_entry = std::pair<transaction_id, std::uint64_t>;

std::vector<history_entry> scan_history(database& db, session& s, verify_report& report) {
  std::vector<history_entry> xids;
  std::vector<unsigned char> rows;
  std::uint64_t sum = 0;
  std::size_t capacity = tidemark::rows_per_page(db.page_size(), history_row_size);
  for (block_number block = 0, blocks = db.relation_blocks(history); block < blocks; ++block) {
    std::size_t count;
    try {
      count = std::min<std::size_t>(s.row_count({history, block}), capacity);
    } catch (const page_corrupt_error& error) {
      ++report.pages_read;
      if (report.unreadable.size() < unreadable_listed)
        report.unreadable.push_back(error.where());
      continue;
    }
    if (!read_rows(s, {history, block}, count, history_row_size, rows, report))
      continue;
    for (std::size_t i = 0; i < count; ++i) {
      history_row row;
      std::memcpy(&row, rows.data() + i * history_row_size, sizeof row);
      xids.emplace_back(row.xid, history_digest(row));
      sum += static_cast<std::uint64_t>(row.delta);
    }
  }
  report.sum_history = static_cast<std::int64_t>(sum);
  return xids;
}

// The next entry of a table being verified; false at its end or at a page the database
// cannot read (listed; the rest of that table is not read).
bool next_readable(table_cursor& c, verify_report& report) {
  try {
    if (!c.next())
      return false;
    ++report.rows_read;
    return true;
  } catch (const page_corrupt_error& error) {
    if (report.unreadable.size() < unreadable_listed)
      report.unreadable.push_back(error.where());
    return false;
  }
}

// Tables schema: ids 0..rows-1, each in its own key, nothing else.
std::int64_t sum_fixed_table(session& s, const layout& shape, relation_id rel,
                             verify_report& report) {
  std::uint64_t sum = 0, expected = 0;
  table_cursor c = s.cursor(shape.table_of(rel));
  while (next_readable(c, report)) {
    std::uint64_t id = ~std::uint64_t{0};
    std::int64_t balance = 0;
    if (c.value().size() == row_size) {
      std::memcpy(&id, c.value().data(), 8);
      std::memcpy(&balance, c.value().data() + balance_offset_in_row, 8);
    }
    if (id != expected || c.key() != id_key(expected))
      ++report.misplaced_rows;
    sum += static_cast<std::uint64_t>(balance);
    ++expected;
  }
  if (expected != shape.rows(rel))
    ++report.misplaced_rows; // rows missing or extra
  return static_cast<std::int64_t>(sum);
}

std::vector<history_entry> scan_history_table(session& s, const layout& shape,
                                              verify_report& report) {
  std::vector<history_entry> xids;
  std::uint64_t sum = 0;
  table_cursor c = s.cursor(shape.table_of(history));
  while (next_readable(c, report)) {
    history_row row{};
    if (c.value().size() >= sizeof row) // padded rows (--history-bytes) start with it
      std::memcpy(&row, c.value().data(), sizeof row);
    if (c.key() != id_key(row.xid))
      ++report.misplaced_rows;
    xids.emplace_back(row.xid, history_digest(row));
    sum += static_cast<std::uint64_t>(row.delta);
  }
  report.sum_history = static_cast<std::int64_t>(sum);
  return xids;
}

} // namespace

verify_report verify(database& db, const layout& shape,
                     const std::vector<acknowledged_transaction>& acknowledged) {
  verify_report report;
  session s = db.open_session();
  std::vector<history_entry> xids;
  if (shape.kind() == schema::tables) {
    report.sum_branches = sum_fixed_table(s, shape, branches, report);
    report.sum_tellers = sum_fixed_table(s, shape, tellers, report);
    report.sum_accounts = sum_fixed_table(s, shape, accounts, report);
    xids = scan_history_table(s, shape, report);
  } else {
    report.sum_branches = sum_fixed_relation(s, shape, branches, report);
    report.sum_tellers = sum_fixed_relation(s, shape, tellers, report);
    report.sum_accounts = sum_fixed_relation(s, shape, accounts, report);
    xids = scan_history(db, s, report);
  }
  std::sort(xids.begin(), xids.end());
  report.history_rows = xids.size();
  for (std::size_t i = 1; i < xids.size(); ++i)
    if (xids[i].first == xids[i - 1].first)
      ++report.duplicate_history_xids;
  report.acknowledged = acknowledged.size();
  const std::uint32_t generation = db.generation();
  for (const acknowledged_transaction& ack : acknowledged) {
    auto found = std::lower_bound(xids.begin(), xids.end(), history_entry{ack.xid, 0});
    if (found == xids.end() || found->first != ack.xid)
      report.lost.push_back(ack.xid);
    else if (ack.has_digest && (found->second != ack.digest || ack.generation > generation))
      report.diverged.push_back(ack.xid); // this id ran another transaction here
    else if (db.status_of(ack.xid) != transaction_status::committed)
      report.not_committed.push_back(ack.xid); // durable in history, its commit status missing
  }
  std::sort(report.lost.begin(), report.lost.end());
  std::sort(report.diverged.begin(), report.diverged.end());
  return report;
}

} // namespace tidemark::workload::tpcb
