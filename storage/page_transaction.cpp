// One atomic, validated multi-page change logged as one WAL record: see page_transaction.hpp.
#include "storage/page_transaction.hpp"

#include "storage/check.hpp"
#include "storage/page.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace tidemark::storage {

namespace {

constexpr std::uint16_t rows_header_offset = offsetof(page_header, item_count);
// item_count and row_size, written together by an append.
constexpr std::uint16_t rows_header_length = sizeof(std::uint16_t) * 2;
static_assert(offsetof(page_header, row_size) == rows_header_offset + sizeof(std::uint16_t),
              "an append writes item_count and row_size as one op");

void check_range(std::size_t page_size, std::size_t offset, std::size_t length) {
  if (offset < rows_header_offset || offset + length > page_size)
    throw tidemark::usage_error("page operation at offset " + std::to_string(offset) + " length " +
                                std::to_string(length) + " is outside the page's writable area");
}

std::string describe(page_id id) {
  return "relation " + std::to_string(id.rel) + " block " + std::to_string(id.block);
}

bool all_zero(const unsigned char* bytes, std::size_t length) {
  // Zero at the start, and equal to itself shifted by one: zero throughout (memcmp is
  // vectorised, a byte loop is not).
  return length == 0 || (bytes[0] == 0 && std::memcmp(bytes, bytes + 1, length - 1) == 0);
}

} // namespace

// ---- append_tails --------------------------------------------------------------------------

append_tails::append_tails(relation_files& files) : files_(files) {
  for (auto& tail : tails_)
    tail.store(-1, std::memory_order_relaxed);
}

block_id append_tails::current(rel_id rel) {
  std::int64_t tail = tails_[rel].load(std::memory_order_acquire);
  if (tail >= 0)
    return static_cast<block_id>(tail);
  block_id blocks = files_.nblocks(rel);
  std::int64_t initial = blocks == 0 ? 0 : blocks - 1;
  std::int64_t unknown = -1;
  tails_[rel].compare_exchange_strong(unknown, initial, std::memory_order_acq_rel);
  return static_cast<block_id>(tails_[rel].load(std::memory_order_acquire));
}

void append_tails::advance(rel_id rel, block_id full_block) {
  std::int64_t expected = full_block;
  tails_[rel].compare_exchange_strong(expected, std::int64_t(full_block) + 1,
                                      std::memory_order_acq_rel);
}

// ---- page_transaction: setup and pending operations ---------------------------------------

page_transaction::page_transaction(buffer_pool& pool, wal_log* wal, append_tails& tails,
                                   bool full_page_writes, commit_log* status,
                                   std::function<void(const std::string&)> on_half_applied)
  : pool_(pool), wal_(wal), tails_(tails), full_page_writes_(full_page_writes), status_(status),
    on_half_applied_(std::move(on_half_applied)) {}

void page_transaction::begin(xid_t xid) {
  abort();
  xid_ = xid;
  active_ = true;
}

void page_transaction::abort() {
  ops_.clear();
  appends_.clear();
  data_.clear();
  op_pages_.clear();
  reads_.clear();
  read_data_.clear();
  sizes_.clear();
  newest_seen_ = 0;
  active_ = false;
}

std::size_t page_transaction::store(const void* data, std::size_t length) {
  std::size_t at = data_.size();
  data_.insert(data_.end(), static_cast<const unsigned char*>(data),
               static_cast<const unsigned char*>(data) + length);
  return at;
}

bool page_transaction::changes(page_id id) const {
  return std::any_of(op_pages_.begin(), op_pages_.end(),
                     [&](const std::pair<page_id, std::size_t>& p) { return p.first == id; });
}

block_id page_transaction::extendable_to(rel_id rel) const {
  block_id limit = pool_.files().nblocks(rel);
  while (changes({rel, limit}))
    ++limit;
  return limit;
}

const unsigned char* page_transaction::pending_row(rel_id rel, std::size_t index,
                                                   std::uint16_t* size) const {
  for (const pending_append& a : appends_)
    if (a.rel == rel && index-- == 0) {
      *size = a.row_size;
      return &data_[a.data_at];
    }
  return nullptr;
}

std::size_t page_transaction::appended_relations() const {
  std::size_t distinct = 0;
  for (std::size_t i = 0; i < appends_.size(); ++i) {
    auto earlier = appends_.begin() + static_cast<std::ptrdiff_t>(i);
    distinct += std::none_of(appends_.begin(), earlier,
                             [&](const pending_append& a) { return a.rel == appends_[i].rel; });
  }
  return distinct;
}

// Refuses `new_pages` more pages when the record would then have more blocks than it can:
// changed pages, plus one per relation appended to.
void page_transaction::refuse_past_page_limit(std::size_t new_pages) const {
  if (op_pages_.size() + appends_.size() + new_pages <= max_transaction_pages)
    return; // a cheap bound first: appends_ counts every row, not every relation
  if (op_pages_.size() + appended_relations() + new_pages > max_transaction_pages)
    throw tidemark::usage_error("a transaction may change at most " +
                                std::to_string(max_transaction_pages) +
                                " pages (each relation appended to counts as one)");
}

// Counts `op_bytes` more of changes on `id`, refusing what the record could not hold: more
// pages than a record has blocks (appended relations count one page each), or more than
// max_block_ops_length bytes of ops on one page.
void page_transaction::note_page(page_id id, std::size_t op_bytes) {
  auto page = std::find_if(op_pages_.begin(), op_pages_.end(),
                           [&](const std::pair<page_id, std::size_t>& p) { return p.first == id; });
  if (page == op_pages_.end()) {
    refuse_past_page_limit(1);
    op_pages_.push_back({id, 0});
    page = op_pages_.end() - 1;
  }
  if (page->second + op_bytes > max_block_ops_length)
    throw tidemark::usage_error("a transaction may change at most " +
                                std::to_string(max_block_ops_length) + " bytes of " + describe(id) +
                                " (each change costs " + std::to_string(op_header_size) +
                                " bytes more than its length)");
  page->second += op_bytes;
}

std::size_t page_transaction::op_bytes_of(page_id id) const {
  std::size_t bytes = 0;
  for (const auto& p : op_pages_)
    if (p.first == id)
      bytes += p.second;
  std::size_t rows_here = 0;
  for (const pending_append& a : appends_)
    if (page_id{a.rel, a.block} == id) {
      bytes += op_header_size + a.row_size;
      ++rows_here;
    }
  if (rows_here > 0)
    bytes += op_header_size + rows_header_length;
  return bytes;
}

void refuse_outside_transaction(bool active, const char* operation) {
  if (!active)
    throw tidemark::usage_error(std::string(operation) +
                                " outside a transaction (commit(), rollback() and a "
                                "conflict_error end one): call begin() first; nothing changed");
}

void page_transaction::add_i64(page_id id, std::uint16_t offset, std::int64_t delta) {
  refuse_outside_transaction(active_, "add_i64");
  check_range(pool_.page_size(), offset, 8);
  note_page(id, op_header_size + 8);
  ops_.push_back({id, op_kind::add_i64, offset, 8, store(&delta, 8)});
}

void page_transaction::write_bytes(page_id id, std::uint16_t offset, const void* data,
                                   std::uint16_t length) {
  refuse_outside_transaction(active_, "write_bytes");
  check_range(pool_.page_size(), offset, length);
  note_page(id, op_header_size + length);
  ops_.push_back({id, op_kind::write_bytes, offset, length, store(data, length)});
}

void page_transaction::append_row(rel_id rel, const void* row, std::uint16_t row_size) {
  refuse_outside_transaction(active_, "append_row");
  if (row_size == 0 || rows_per_page(pool_.page_size(), row_size) == 0)
    throw tidemark::usage_error("row of " + std::to_string(row_size) +
                                " bytes does not fit a page");
  std::size_t rows = 0;
  for (const pending_append& a : appends_) {
    if (a.rel != rel)
      continue;
    ++rows;
    if (a.row_size != row_size)
      throw tidemark::usage_error("rows appended to relation " + std::to_string(rel) +
                                  " in one transaction must have one size (" +
                                  std::to_string(a.row_size) + " bytes, not " +
                                  std::to_string(row_size) + ")");
  }
  if (rows == 0)
    refuse_past_page_limit(1);
  std::size_t capacity = rows_per_page(pool_.page_size(), row_size);
  std::size_t bytes =
    (rows + 1) * (op_header_size + row_size) + op_header_size + rows_header_length;
  if (rows + 1 > capacity || bytes > max_block_ops_length)
    throw tidemark::usage_error(
      "a transaction may append at most " +
      std::to_string(
        std::min(capacity, (max_block_ops_length - op_header_size - rows_header_length) /
                             (op_header_size + row_size))) +
      " rows of " + std::to_string(row_size) + " bytes to one relation");
  appends_.push_back({rel, row_size, store(row, row_size), 0, 0});
}

// ---- reads ---------------------------------------------------------------------------------

lsn_t page_transaction::read_committed(page_id id, std::size_t offset, std::size_t length,
                                       void* out) {
  pool_.reserve_pins(1);
  buffer_id buffer;
  try {
    buffer = pool_.pin(id);
  } catch (...) {
    pool_.release_pins(1);
    throw;
  }
  pool_.lock_shared(buffer);
  const void* page = pool_.page(buffer);
  std::memcpy(out, static_cast<const unsigned char*>(page) + offset, length);
  lsn_t lsn = page_lsn(page);
  pool_.unlock_shared(buffer);
  pool_.unpin(buffer);
  pool_.release_pins(1);
  if (active_) {
    record_read(id, offset, length, out, lsn);
    newest_seen_ = std::max(newest_seen_, lsn);
  } else {
    newest_seen_ = lsn;
  }
  return lsn;
}

void page_transaction::record_read(page_id id, std::size_t offset, std::size_t length,
                                   const void* bytes, lsn_t lsn) {
  std::size_t at = read_data_.size();
  read_data_.insert(read_data_.end(), static_cast<const unsigned char*>(bytes),
                    static_cast<const unsigned char*>(bytes) + length);
  reads_.push_back(
    {id, static_cast<std::uint16_t>(offset), static_cast<std::uint16_t>(length), at, lsn});
}

// The bytes [offset, offset + length) of the page as this transaction would leave it: the
// committed bytes, widened to every pending add it overlaps (an add changes its 8 bytes
// together), with the pending operations applied in order.
void page_transaction::read_view(page_id id, std::size_t offset, std::size_t length, void* out) {
  std::size_t lo = offset, hi = offset + length;
  for (bool widened = true; widened;) {
    widened = false;
    for (const pending_op& op : ops_)
      if (op.id == id && op.kind == op_kind::add_i64 && op.offset < hi && op.offset + 8u > lo &&
          (op.offset < lo || op.offset + 8u > hi)) {
        lo = std::min<std::size_t>(lo, op.offset);
        hi = std::max<std::size_t>(hi, op.offset + 8u);
        widened = true;
      }
  }
  scratch_.resize(hi - lo);
  read_committed(id, lo, hi - lo, scratch_.data());
  for (const pending_op& op : ops_) {
    if (op.id != id || op.offset >= hi || op.offset + std::size_t(op.length) <= lo)
      continue;
    if (op.kind == op_kind::add_i64) {
      std::int64_t value, delta;
      std::memcpy(&value, &scratch_[op.offset - lo], 8);
      std::memcpy(&delta, &data_[op.data_at], 8);
      value = static_cast<std::int64_t>(std::uint64_t(value) + std::uint64_t(delta));
      std::memcpy(&scratch_[op.offset - lo], &value, 8);
    } else {
      std::size_t from = std::max<std::size_t>(op.offset, lo);
      std::size_t to = std::min<std::size_t>(op.offset + std::size_t(op.length), hi);
      std::memcpy(&scratch_[from - lo], &data_[op.data_at + (from - op.offset)], to - from);
    }
  }
  std::memcpy(out, &scratch_[offset - lo], length);
}

std::int64_t page_transaction::read_i64(page_id id, std::uint16_t offset) {
  check_range(pool_.page_size(), offset, 8);
  std::int64_t value;
  read_view(id, offset, 8, &value);
  return value;
}

void page_transaction::read_bytes(page_id id, std::uint16_t offset, void* out,
                                  std::uint16_t length) {
  check_range(pool_.page_size(), offset, length);
  read_view(id, offset, length, out);
}

page_rows page_transaction::rows_on(page_id id) {
  std::uint16_t header[2];
  page_rows rows;
  read_committed(id, rows_header_offset, rows_header_length, header);
  rows.count = header[0];
  rows.row_size = header[1];
  return rows;
}

block_id page_transaction::relation_size(rel_id rel) {
  block_id blocks = pool_.files().nblocks(rel);
  if (active_)
    sizes_.push_back({rel, blocks});
  return blocks;
}

// ---- commit --------------------------------------------------------------------------------

void page_transaction::conflict(const std::string& what) {
  abort();
  throw tidemark::conflict_error("transaction " + std::to_string(xid_) + " conflicts: " + what +
                                 "; nothing was applied, retry it");
}

void page_transaction::latch_pages() {
  pages_.clear();
  for (const auto& p : op_pages_)
    pages_.push_back({p.first, 0});
  for (pending_append& append : appends_) {
    append.block = tails_.current(append.rel);
    pages_.push_back({{append.rel, append.block}, 0});
  }
  std::sort(pages_.begin(), pages_.end(),
            [](const latched_page& a, const latched_page& b) { return a.id < b.id; });
  pages_.erase(std::unique(pages_.begin(), pages_.end(),
                           [](const latched_page& a, const latched_page& b) {
                             return a.id == b.id;
                           }),
               pages_.end());
  // One more pin than pages when reads of other pages are to be validated.
  extra_pin_ = std::any_of(reads_.begin(), reads_.end(),
                           [&](const recorded_read& r) { return held(r.id) == nullptr; });
  auto pins = static_cast<std::uint32_t>(pages_.size() + (extra_pin_ ? 1 : 0));
  pool_.reserve_pins(pins);
  std::size_t pinned = 0;
  try {
    for (; pinned < pages_.size(); ++pinned)
      pages_[pinned].buffer = pool_.pin(pages_[pinned].id);
  } catch (...) {
    for (std::size_t i = 0; i < pinned; ++i)
      pool_.unpin(pages_[i].buffer);
    pool_.release_pins(pins);
    pages_.clear();
    throw;
  }
  for (const latched_page& p : pages_)
    pool_.lock_exclusive(p.buffer);
}

void page_transaction::release_pages() {
  for (const latched_page& p : pages_) {
    pool_.unlock_exclusive(p.buffer);
    pool_.unpin(p.buffer);
  }
  pool_.release_pins(static_cast<std::uint32_t>(pages_.size() + (extra_pin_ ? 1 : 0)));
  pages_.clear();
  extra_pin_ = false;
}

// True when one of this transaction's add_i64 or write_bytes on `id` touches bytes
// [begin, end).
bool page_transaction::writes_between(page_id id, std::size_t begin, std::size_t end) const {
  return std::any_of(ops_.begin(), ops_.end(), [&](const pending_op& op) {
    return op.id == id && op.offset < end && op.offset + std::size_t(op.length) > begin;
  });
}

// Decides each append's slot from the latched tail page. Returns false (after moving the
// tail on) when the tail page cannot take this transaction's rows: too few free slots,
// rows of another size, non-zero bytes or this transaction's own writes where the rows
// would go; the caller releases everything and tries again on the next block.
bool page_transaction::resolve_appends() {
  for (std::size_t i = 0; i < appends_.size(); ++i) {
    pending_append& append = appends_[i];
    page_id id{append.rel, append.block};
    auto page =
      std::find_if(pages_.begin(), pages_.end(), [&](const latched_page& p) { return p.id == id; });
    const auto* bytes = static_cast<const unsigned char*>(pool_.page(page->buffer));
    const page_header* header = header_of(bytes);
    std::size_t used = header->item_count;
    for (std::size_t j = 0; j < i; ++j)
      if (appends_[j].rel == append.rel)
        ++used;
    std::size_t at = page_header_size + used * append.row_size;
    // A page without rows takes them only if nothing was written on it by offset, before or
    // by this transaction; a row never lands on bytes this transaction writes by offset
    // (its ops are applied first: the row would overwrite them).
    bool fits = header->item_count == 0
                  ? all_zero(bytes + page_header_size, pool_.page_size() - page_header_size) &&
                      !writes_between(id, page_header_size, pool_.page_size())
                  : (header->row_size == 0 || header->row_size == append.row_size);
    fits = fits && used < rows_per_page(pool_.page_size(), append.row_size) &&
           all_zero(bytes + at, append.row_size) && !writes_between(id, at, at + append.row_size);
    if (!fits) {
      release_pages();
      tails_.advance(append.rel, append.block);
      return false;
    }
    append.slot = static_cast<std::uint16_t>(used);
    pool_.files().note_block(id); // the relation now has this block, even before it is written
  }
  return true;
}

const page_transaction::latched_page* page_transaction::held(page_id id) const {
  auto page = std::lower_bound(pages_.begin(), pages_.end(), id,
                               [](const latched_page& p, page_id i) { return p.id < i; });
  return page != pages_.end() && page->id == id ? &*page : nullptr;
}

// Pages this transaction latched exclusively (it changes them): the bytes it read are
// still there.
bool page_transaction::validate_held_pages() const {
  for (const recorded_read& r : reads_)
    if (const latched_page* page = held(r.id)) {
      const auto* bytes = static_cast<const unsigned char*>(pool_.page(page->buffer));
      if (std::memcmp(bytes + r.offset, &read_data_[r.data_at], r.length) != 0)
        return false;
    }
  return true;
}

// Pages only read: unchanged since each read (same LSN). While this transaction holds
// exclusive latches, the shared latch is taken without waiting: `busy` then names a page
// another commit holds; `changed` names the page that changed.
page_transaction::read_check page_transaction::validate_read_pages(page_id* page) {
  bool holding = !pages_.empty(); // then latch_pages reserved the pin (extra_pin_)
  if (holding && !extra_pin_)
    return read_check::held; // every read was of a page this transaction latched
  std::vector<const recorded_read*> unchanged;
  for (const recorded_read& r : reads_)
    if (held(r.id) == nullptr)
      unchanged.push_back(&r);
  std::sort(unchanged.begin(), unchanged.end(),
            [](const recorded_read* a, const recorded_read* b) { return a->id < b->id; });
  for (std::size_t i = 0; i < unchanged.size();) {
    page_id id = unchanged[i]->id;
    if (!holding)
      pool_.reserve_pins(1);
    buffer_id buffer = pool_.pin(id);
    if (holding && !pool_.try_lock_shared(buffer)) {
      pool_.unpin(buffer);
      *page = id;
      return read_check::busy;
    }
    if (!holding)
      pool_.lock_shared(buffer);
    lsn_t lsn = page_lsn(pool_.page(buffer));
    pool_.unlock_shared(buffer);
    pool_.unpin(buffer);
    if (!holding)
      pool_.release_pins(1);
    for (; i < unchanged.size() && unchanged[i]->id == id; ++i)
      if (unchanged[i]->lsn != lsn) {
        *page = id;
        return read_check::changed;
      }
  }
  return read_check::held;
}

// A relation a scan reached the end of has not grown, but by blocks this transaction
// latched that no one had changed yet (page LSN 0): its own extensions.
bool page_transaction::validate_sizes() const {
  for (const recorded_size& s : sizes_) {
    block_id now = pool_.files().nblocks(s.rel);
    for (block_id block = s.blocks; block < now; ++block) {
      const latched_page* page = held({s.rel, block});
      if (page == nullptr || page_lsn(pool_.page(page->buffer)) != 0)
        return false;
    }
  }
  return true;
}

// Waits, holding nothing, until the commit that holds `id`'s latch is done with it.
void page_transaction::wait_for_page(page_id id) {
  pool_.reserve_pins(1);
  buffer_id buffer = pool_.pin(id);
  pool_.lock_shared(buffer);
  pool_.unlock_shared(buffer);
  pool_.unpin(buffer);
  pool_.release_pins(1);
}

void page_transaction::check_op_limits() {
  std::size_t total = 0; // no page can be over the limit when all of them together are not
  for (const auto& p : op_pages_)
    total += p.second;
  for (const pending_append& a : appends_)
    total += op_header_size + a.row_size;
  if (total + op_header_size + rows_header_length <= max_block_ops_length)
    return;
  for (const latched_page& p : pages_)
    if (op_bytes_of(p.id) > max_block_ops_length) {
      std::string where = describe(p.id);
      release_pages();
      abort();
      throw tidemark::usage_error("the transaction's changes of " + where + " exceed " +
                                  std::to_string(max_block_ops_length) +
                                  " bytes (its rows landed on a page it also changes); "
                                  "nothing was applied");
    }
}

void page_transaction::encode(bool apply, lsn_t redo_lsn) {
  builder_.reset(record_type::transaction, xid_);
  std::size_t ops_encoded = 0, appends_encoded = 0;
  for (const latched_page& p : pages_) {
    void* page = pool_.page(p.buffer);
    bool needs_image = full_page_writes_ && page_lsn(page) <= redo_lsn;
    builder_.begin_block(p.id);
    for (const pending_op& op : ops_) {
      if (op.id != p.id)
        continue;
      ++ops_encoded;
      if (op.kind == op_kind::add_i64) {
        std::int64_t delta;
        std::memcpy(&delta, &data_[op.data_at], 8);
        builder_.add_i64(op.offset, delta);
      } else {
        builder_.write_bytes(op.offset, &data_[op.data_at], op.length);
      }
    }
    std::uint16_t rows_header[2] = {0, 0};
    for (const pending_append& append : appends_) {
      if (page_id{append.rel, append.block} != p.id)
        continue;
      ++appends_encoded;
      std::size_t offset = page_header_size + std::size_t(append.slot) * append.row_size;
      builder_.write_bytes(static_cast<std::uint16_t>(offset), &data_[append.data_at],
                           append.row_size);
      rows_header[0] = std::max<std::uint16_t>(rows_header[0], append.slot + 1);
      rows_header[1] = append.row_size;
    }
    if (rows_header[0] > 0)
      builder_.write_bytes(rows_header_offset, rows_header, rows_header_length);
    if (apply)
      apply_ops(page, pool_.page_size(), builder_.block_ops(), builder_.block_ops_length());
    builder_.end_block(needs_image ? page : nullptr, pool_.page_size());
  }
  TIDEMARK_CHECK(ops_encoded == ops_.size() && appends_encoded == appends_.size(),
                 "every change of a transaction is on a page it latched");
  builder_.finish();
}

// Latches the pages to change and checks every read (see the header). Returns with the
// pages latched; throws conflict_error (or what a read of a page threw) with nothing held.
void page_transaction::latch_and_validate() {
  for (;;) {
    latch_pages();
    if (!resolve_appends())
      continue;
    check_op_limits();
    // Changes past the relation's end extend it now, before any read is checked: a scan
    // checked after this sees the new block (validate_sizes).
    for (const auto& p : op_pages_)
      pool_.files().note_block(p.first);
    std::string changed;
    page_id page;
    read_check reads = read_check::held;
    try {
      if (!validate_held_pages())
        changed = "bytes it read on a page it changes were changed by another commit";
      else if ((reads = validate_read_pages(&page)) == read_check::changed)
        changed = describe(page) + " changed after it was read";
      else if (reads == read_check::held && !validate_sizes())
        changed = "a relation it scanned grew";
    } catch (...) {
      release_pages();
      throw;
    }
    if (reads == read_check::busy) {
      release_pages();
      wait_for_page(page);
      continue;
    }
    if (!changed.empty()) {
      release_pages();
      conflict(changed);
    }
    return;
  }
}

lsn_range page_transaction::commit() {
  try {
    if (ops_.empty() && appends_.empty()) { // read-only: validate, write nothing
      page_id changed;
      if (validate_read_pages(&changed) != read_check::held)
        conflict(describe(changed) + " changed after it was read");
      if (!validate_sizes())
        conflict("a relation it scanned grew");
      abort();
      return {0, 0};
    }
    if (wal_ == nullptr)
      throw tidemark::usage_error(
        "the database is open read-only: a transaction may not change it");
    latch_and_validate();
  } catch (...) {
    abort();
    throw;
  }
  lsn_t redo = wal_->redo_lsn();
  std::optional<lsn_range> position;
  // Taken with the record, released once the pages are marked dirty and the status is
  // set: a checkpoint whose redo point passes the record waits for both (storage rule 4).
  wal_log::commit_hold hold;
  try {
    encode(true, redo);
    while (!(position = wal_->insert(builder_, redo, &hold))) {
      redo = wal_->redo_lsn(); // a checkpoint moved the redo point: redo the image decisions
      encode(false, redo);
    }
  } catch (const std::exception& error) {
    // The pages hold applied but unlogged changes: the engine must stop (W3) before anyone
    // can see or write them.
    if (on_half_applied_)
      on_half_applied_(std::string("a commit failed after changing pages: ") + error.what());
    release_pages();
    abort();
    throw;
  }
  for (const latched_page& p : pages_) {
    set_page_lsn(pool_.page(p.buffer), position->end);
    pool_.mark_dirty(p.buffer);
  }
  release_pages();
  if (status_ != nullptr) {
    try {
      status_->set(xid_, xact_status::committed, position->end);
    } catch (const std::exception& error) {
      // Logged and applied, but the commit-status log would say "unknown": the engine
      // stops (redo records the status from the record), and whether the record became
      // durable is not known.
      std::string why = "transaction " + std::to_string(xid_) +
                        " was logged, but the "
                        "commit-status log could not record it: " +
                        error.what();
      if (on_half_applied_)
        on_half_applied_(why);
      abort();
      throw tidemark::commit_outcome_unknown(why + "; after the next open it is either wholly "
                                                   "present or wholly absent",
                                             xid_);
    }
  }
  hold.release();
  abort();
  return *position;
}

} // namespace tidemark::storage
