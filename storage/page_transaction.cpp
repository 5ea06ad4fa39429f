// One atomic multi-page change logged as one WAL record: see page_transaction.hpp.
#include "storage/page_transaction.hpp"

#include "storage/page.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace tidemark::storage {

namespace {

constexpr std::uint16_t first_writable_offset = offsetof(page_header, item_count);

void check_range(std::size_t page_size, std::uint16_t offset, std::size_t length) {
  if (offset < first_writable_offset || offset + length > page_size)
    throw std::invalid_argument("page operation at offset " + std::to_string(offset) +
                                " length " + std::to_string(length) +
                                " is outside the page's writable area");
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

// ---- page_transaction ----------------------------------------------------------------------

page_transaction::page_transaction(buffer_pool& pool, wal_log& wal, append_tails& tails,
                                   bool full_page_writes, commit_log* status)
  : pool_(pool), wal_(wal), tails_(tails), full_page_writes_(full_page_writes), status_(status) {}

void page_transaction::begin(xid_t xid) {
  abort();
  xid_ = xid;
}

void page_transaction::abort() {
  ops_.clear();
  appends_.clear();
  data_.clear();
}

std::size_t page_transaction::store(const void* data, std::size_t length) {
  std::size_t at = data_.size();
  data_.insert(data_.end(), static_cast<const unsigned char*>(data),
               static_cast<const unsigned char*>(data) + length);
  return at;
}

void page_transaction::read_committed(page_id id, std::size_t offset, void* out, std::size_t length) {
  pool_.reserve_pins(1);
  buffer_id buffer;
  try {
    buffer = pool_.pin(id);
  } catch (...) {
    pool_.release_pins(1);
    throw;
  }
  pool_.lock_shared(buffer);
  std::memcpy(out, static_cast<unsigned char*>(pool_.page(buffer)) + offset, length);
  pool_.unlock_shared(buffer);
  pool_.unpin(buffer);
  pool_.release_pins(1);
}

std::int64_t page_transaction::read_i64(page_id id, std::uint16_t offset) {
  check_range(pool_.page_size(), offset, 8);
  std::int64_t value;
  read_committed(id, offset, &value, 8);
  for (const pending_op& op : ops_)
    if (op.id == id && op.offset == offset && op.kind == op_kind::add_i64) {
      std::int64_t delta;
      std::memcpy(&delta, &data_[op.data_at], 8);
      value = static_cast<std::int64_t>(std::uint64_t(value) + std::uint64_t(delta));
    }
  return value;
}

void page_transaction::read_bytes(page_id id, std::uint16_t offset, void* out, std::uint16_t length) {
  check_range(pool_.page_size(), offset, length);
  read_committed(id, offset, out, length);
}

std::uint16_t page_transaction::row_count(page_id id) {
  std::uint16_t count;
  read_committed(id, offsetof(page_header, item_count), &count, sizeof count);
  return count;
}

void page_transaction::add_i64(page_id id, std::uint16_t offset, std::int64_t delta) {
  check_range(pool_.page_size(), offset, 8);
  ops_.push_back({id, op_kind::add_i64, offset, 8, store(&delta, 8)});
}

void page_transaction::write_bytes(page_id id, std::uint16_t offset, const void* data,
                                   std::uint16_t length) {
  check_range(pool_.page_size(), offset, length);
  ops_.push_back({id, op_kind::write_bytes, offset, length, store(data, length)});
}

void page_transaction::append_row(rel_id rel, const void* row, std::uint16_t row_size) {
  if (row_size == 0 || rows_per_page(pool_.page_size(), row_size) == 0)
    throw std::invalid_argument("row of " + std::to_string(row_size) + " bytes does not fit a page");
  appends_.push_back({rel, row_size, store(row, row_size), 0, 0});
}

bool page_transaction::latch_pages() {
  pages_.clear();
  for (const pending_op& op : ops_)
    pages_.push_back({op.id, 0});
  for (pending_append& append : appends_) {
    append.block = tails_.current(append.rel);
    pages_.push_back({{append.rel, append.block}, 0});
  }
  std::sort(pages_.begin(), pages_.end(),
            [](const latched_page& a, const latched_page& b) { return a.id < b.id; });
  pages_.erase(std::unique(pages_.begin(), pages_.end(),
                           [](const latched_page& a, const latched_page& b) { return a.id == b.id; }),
               pages_.end());
  if (pages_.size() > max_blocks_per_record)
    throw std::invalid_argument("a transaction may change at most " +
                                std::to_string(max_blocks_per_record) + " pages");
  pool_.reserve_pins(static_cast<std::uint32_t>(pages_.size()));
  std::size_t pinned = 0;
  try {
    for (; pinned < pages_.size(); ++pinned)
      pages_[pinned].buffer = pool_.pin(pages_[pinned].id);
  } catch (...) {
    for (std::size_t i = 0; i < pinned; ++i)
      pool_.unpin(pages_[i].buffer);
    pool_.release_pins(static_cast<std::uint32_t>(pages_.size()));
    throw;
  }
  for (const latched_page& p : pages_)
    pool_.lock_exclusive(p.buffer);
  return resolve_appends();
}

void page_transaction::release_pages() {
  for (const latched_page& p : pages_) {
    pool_.unlock_exclusive(p.buffer);
    pool_.unpin(p.buffer);
  }
  pool_.release_pins(static_cast<std::uint32_t>(pages_.size()));
  pages_.clear();
}

// Decides each append's slot from the latched tail page. Returns false (after moving the
// tail on) when a tail page is full; the caller releases everything and tries again.
bool page_transaction::resolve_appends() {
  for (std::size_t i = 0; i < appends_.size(); ++i) {
    pending_append& append = appends_[i];
    page_id id{append.rel, append.block};
    auto page = std::find_if(pages_.begin(), pages_.end(),
                             [&](const latched_page& p) { return p.id == id; });
    std::size_t used = header_of(pool_.page(page->buffer))->item_count;
    for (std::size_t j = 0; j < i; ++j)
      if (appends_[j].rel == append.rel && appends_[j].block == append.block)
        ++used;
    if (used >= rows_per_page(pool_.page_size(), append.row_size)) {
      release_pages();
      tails_.advance(append.rel, append.block);
      return false;
    }
    append.slot = static_cast<std::uint16_t>(used);
    pool_.files().note_block(id); // the relation now has this block, even before it is written
  }
  return true;
}

void page_transaction::encode(bool apply, lsn_t redo_lsn) {
  builder_.reset(record_type::transaction, xid_);
  for (const latched_page& p : pages_) {
    void* page = pool_.page(p.buffer);
    bool needs_image = full_page_writes_ && page_lsn(page) <= redo_lsn;
    builder_.begin_block(p.id);
    for (const pending_op& op : ops_) {
      if (op.id != p.id)
        continue;
      if (op.kind == op_kind::add_i64) {
        std::int64_t delta;
        std::memcpy(&delta, &data_[op.data_at], 8);
        builder_.add_i64(op.offset, delta);
      } else {
        builder_.write_bytes(op.offset, &data_[op.data_at], op.length);
      }
    }
    std::uint16_t item_count = 0;
    for (const pending_append& append : appends_) {
      if (page_id{append.rel, append.block} != p.id)
        continue;
      std::size_t offset = page_header_size + std::size_t(append.slot) * append.row_size;
      builder_.write_bytes(static_cast<std::uint16_t>(offset), &data_[append.data_at],
                           append.row_size);
      item_count = std::max<std::uint16_t>(item_count, append.slot + 1);
    }
    if (item_count > 0)
      builder_.write_bytes(first_writable_offset, &item_count, sizeof item_count);
    if (apply)
      apply_ops(page, pool_.page_size(), builder_.block_ops(), builder_.block_ops_length());
    builder_.end_block(needs_image ? page : nullptr, pool_.page_size());
  }
  builder_.finish();
}

lsn_range page_transaction::commit() {
  while (!latch_pages()) {
  }
  lsn_t redo = wal_.redo_lsn();
  std::optional<lsn_range> position;
  try {
    encode(true, redo);
    while (!(position = wal_.insert(builder_, redo))) {
      redo = wal_.redo_lsn(); // a checkpoint moved the redo point: redo the image decisions
      encode(false, redo);
    }
  } catch (...) {
    // The pages may hold applied but unlogged changes: the runtime must stop (W3 path).
    release_pages();
    throw;
  }
  for (const latched_page& p : pages_) {
    set_page_lsn(pool_.page(p.buffer), position->end);
    pool_.mark_dirty(p.buffer);
  }
  release_pages();
  if (status_ != nullptr)
    status_->set(xid_, xact_status::committed, position->end);
  abort();
  return *position;
}

} // namespace tidemark::storage
