// pool_page_store: the tree's pages in the buffer pool, its changes in the WAL. See
// pool_page_store.hpp.
#include "access/pool_page_store.hpp"

#include "storage/check.hpp"
#include "storage/page.hpp"

#include <algorithm>

namespace tidemark::access {

namespace {

// The pins the calling thread reserved with reserve_latches() and has not drawn yet.
struct reserved_pins {
  const pool_page_store* store = nullptr;
  std::size_t count = 0;
};
thread_local reserved_pins reserved;
// The latches the calling thread holds, of any store: one that holds a latch may wait for
// another latch, never for a pin (the header's invariant).
thread_local std::size_t latches_held = 0;

} // namespace

pool_page_store::pool_page_store(storage::buffer_pool& pool, storage::wal_log* wal,
                                 bool full_page_writes, storage::commit_log* status,
                                 std::function<void(const std::string&)> on_half_applied)
  : pool_(pool), wal_(wal), full_page_writes_(full_page_writes), status_(status),
    on_half_applied_(std::move(on_half_applied)) {}

// Pins `id` with the pin the caller reserved, which a failed pin gives back.
storage::buffer_id pool_page_store::pin_reserved(page_id id, storage::read_mode mode) {
  try {
    return pool_.pin(id, mode);
  } catch (...) {
    give_back_pin();
    throw;
  }
}

bool pool_page_store::draw_reserved() {
  if (reserved.store != this || reserved.count == 0)
    return false;
  --reserved.count;
  return true;
}

// A quarter of the pins the pool gives out (its size, up to buffer_pool::max_pins), so that
// several commits hold theirs at once with buffers left to read into; at least 8 pages (a
// pool has 16 or more), so small pools still take the commits of a few keys. Any limit up
// to the pin capacity is safe: pins are reserved all at once and never beyond it, so a
// pinned buffer never waits for another.
std::size_t pool_page_store::max_latched_pages() const {
  return std::max<std::size_t>(pool_.pin_capacity() / 4, 8);
}

void pool_page_store::reserve_latches(std::size_t count) {
  TIDEMARK_CHECK(reserved.count == 0 || reserved.store == this,
                 "a thread reserves latches of one store at a time");
  pool_.reserve_pins(static_cast<std::uint32_t>(count));
  reserved = {this, reserved.count + count};
}

bool pool_page_store::try_reserve_latches(std::size_t count) {
  TIDEMARK_CHECK(reserved.count == 0 || reserved.store == this,
                 "a thread reserves latches of one store at a time");
  if (!pool_.try_reserve_pins(static_cast<std::uint32_t>(count)))
    return false;
  reserved = {this, reserved.count + count};
  return true;
}

bool pool_page_store::latches_reserved() const { return reserved.store == this; }

std::size_t pool_page_store::latches_in_reserve() const {
  return reserved.store == this ? reserved.count : 0;
}

void pool_page_store::release_reserved_latches() {
  if (reserved.store != this)
    return;
  pool_.release_pins(static_cast<std::uint32_t>(reserved.count));
  reserved = {};
}

page_guard pool_page_store::latch(page_id id, latch_mode mode) {
  return latch_as(id, mode, storage::read_mode::normal);
}

page_guard pool_page_store::latch_new_block(rel_id rel) {
  return latch_as({rel, new_block(rel)}, latch_mode::exclusive, storage::read_mode::zero_fill);
}

page_guard pool_page_store::latch_as(page_id id, latch_mode mode, storage::read_mode read) {
  if (!draw_reserved()) {
    TIDEMARK_CHECK(latches_held == 0, "a thread holding a latch takes another only from a "
                                      "reservation: it never waits for a pin while holding one");
    pool_.reserve_pins(1);
  }
  storage::buffer_id buffer = pin_reserved(id, read);
  if (mode == latch_mode::exclusive)
    pool_.lock_exclusive(buffer);
  else
    pool_.lock_shared(buffer);
  ++latches_held;
  return make_guard(id, buffer, static_cast<unsigned char*>(pool_.page(buffer)), mode);
}

page_guard pool_page_store::try_latch(page_id id, latch_mode mode) {
  if (!draw_reserved() && !pool_.try_reserve_pins(1))
    return {};
  storage::buffer_id buffer = pin_reserved(id, storage::read_mode::normal);
  bool granted = mode == latch_mode::exclusive ? pool_.try_lock_exclusive(buffer)
                                               : pool_.try_lock_shared(buffer);
  if (!granted) {
    pool_.unpin(buffer);
    give_back_pin();
    return {};
  }
  ++latches_held;
  return make_guard(id, buffer, static_cast<unsigned char*>(pool_.page(buffer)), mode);
}

bool pool_page_store::read_unlatched(page_id id, unlatched_page* page) const {
  storage::buffer_pool::optimistic_read read;
  if (!pool_.begin_optimistic(id, &read))
    return false;
  *page = {read.bytes, (std::uint64_t(read.buffer) << 32) | read.version};
  return true;
}

bool pool_page_store::still_unchanged(const unlatched_page& page) const {
  return pool_.still_unchanged({static_cast<storage::buffer_id>(page.handle >> 32),
                                static_cast<std::uint32_t>(page.handle), page.bytes});
}

void pool_page_store::give_back_pin() {
  if (reserved.store == this)
    ++reserved.count; // room for the commit's next latch
  else
    pool_.release_pins(1);
}

void pool_page_store::unlatch(page_id, std::uint64_t handle, latch_mode mode) {
  auto buffer = static_cast<storage::buffer_id>(handle);
  if (mode == latch_mode::exclusive)
    pool_.unlock_exclusive(buffer);
  else
    pool_.unlock_shared(buffer);
  pool_.unpin(buffer);
  give_back_pin();
  TIDEMARK_CHECK(latches_held > 0, "a latch is released by the thread that took it");
  --latches_held;
}

block_id pool_page_store::new_block(rel_id rel) {
  std::lock_guard<std::mutex> lock(blocks_mutex_);
  auto next = next_block_.find(rel);
  if (next == next_block_.end())
    next = next_block_.emplace(rel, pool_.files().nblocks(rel)).first;
  block_id block = next->second++;
  pool_.files().note_block({rel, block}); // the relation has it before anything is written
  return block;
}

block_id pool_page_store::blocks(rel_id rel) { return pool_.files().nblocks(rel); }

std::size_t pool_page_store::max_record_bytes() const {
  if (wal_ == nullptr)
    return storage::max_wal_record_bytes;
  return std::min(storage::max_wal_record_bytes, wal_->options().buffer_size);
}

void pool_page_store::half_applied(const std::string& why) {
  if (on_half_applied_)
    on_half_applied_(why);
}

void pool_page_store::encode(storage::record_builder& record, const std::vector<logged_page>& pages,
                             storage::xid_t xid, lsn_t redo_lsn) const {
  record.reset(xid == 0 ? storage::record_type::structure : storage::record_type::transaction, xid);
  for (const logged_page& page : pages)
    if (page.reuses_unlinked)
      record.set_flags(storage::record_reuses_unlinked);
  for (const logged_page& page : pages) {
    const unsigned char* bytes = page.page->bytes();
    bool image = full_page_writes_ && storage::page_lsn(bytes) <= redo_lsn;
    record.begin_block(page.page->id());
    if (!image) // an image is the page after the ops: redo restores it and skips them
      record.add_ops(page.changes->data(), page.changes->size(), page_size());
    record.end_block(image ? bytes : nullptr, page_size());
  }
  record.finish();
}

lsn_t pool_page_store::log_change(const std::vector<logged_page>& pages, storage::xid_t xid) {
  if (wal_ == nullptr)
    throw tidemark::usage_error("the database is open read-only: a table may not change");
  TIDEMARK_CHECK(!pages.empty() && pages.size() <= storage::max_blocks_per_record,
                 "a structure change fits one record");
  for (const logged_page& page : pages)
    TIDEMARK_CHECK(page.page->mode() == latch_mode::exclusive,
                   "a logged page is latched exclusively by the caller");
  // The thread's builder, reused: a commit's record (megabytes for a large one) would
  // otherwise be new memory every time, each page of it a fault. Between records it keeps
  // at most a sixteenth of the longest record (of wal_buffers), so sessions hold little
  // memory beside a small pool.
  thread_local storage::record_builder record;
  thread_local bool building = false;
  TIDEMARK_CHECK(!building, "log_change is not called again while it builds a record");
  building = true;
  struct done_building {
    storage::record_builder& record;
    std::size_t keep;
    ~done_building() {
      record.shrink_to(keep);
      building = false;
    }
  } done{record, max_record_bytes() / 16};
  storage::wal_log::commit_hold hold;
  std::optional<storage::lsn_range> position;
  try {
    lsn_t redo = wal_->redo_lsn();
    encode(record, pages, xid, redo);
    while (!(position = wal_->insert(record, redo, &hold))) {
      redo = wal_->redo_lsn(); // a checkpoint moved the redo point: decide images again
      encode(record, pages, xid, redo);
    }
  } catch (const std::exception& error) {
    half_applied(std::string("a table change failed after changing pages: ") + error.what());
    throw;
  }
  for (const logged_page& page : pages) {
    storage::set_page_lsn(page.page->mutable_bytes(), position->end);
    pool_.mark_dirty(static_cast<storage::buffer_id>(handle_of(*page.page)));
  }
  if (xid != 0)
    record_status(xid, position->end);
  hold.release();
  return position->end;
}

// Logged and applied, but if the commit-status log cannot say so the engine stops (redo
// records the status from the record), and whether the record became durable is unknown.
void pool_page_store::record_status(storage::xid_t xid, lsn_t end) {
  if (status_ == nullptr)
    return;
  try {
    status_->set(xid, storage::xact_status::committed, end);
  } catch (const std::exception& error) {
    std::string why = "transaction " + std::to_string(xid) +
                      " was logged, but the commit-status log could not record it: " + error.what();
    if (on_half_applied_)
      on_half_applied_(why);
    throw tidemark::commit_outcome_unknown(
      why + "; after the next open it is either wholly present or wholly absent", xid);
  }
}

} // namespace tidemark::access
