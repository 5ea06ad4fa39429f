// The page_store a running engine gives the tree: pages latched in the shared buffer pool,
// changes logged in the WAL as structure records (storage/wal_record.hpp), new blocks at
// the relation's end.
//
// Invariants:
//  - Every latch holds one reserved pin (buffer_pool::reserve_pins) and one pin; releasing
//    the latch gives both back. try_latch() waits for neither pins nor the latch.
//  - reserve_latches() reserves its pins at once, for the calling thread (a thread-local
//    count): its latches draw on them and give them back to it until it is released. A
//    thread that holds a latch never waits for a pin (checked: latch() counts the calling
//    thread's latches), so pins held cannot wait for each other. A commit holds at most a
//    quarter of the pool's buffers, and at least 8 (max_latched_pages), so several may
//    hold theirs at once and the pool still has buffers to read into.
//  - log_change() inserts one record holding every page's ops (and a full-page image of
//    each page not changed since the redo point, in full_page_writes mode), with a
//    commit_hold released only after every page carries the record's LSN and is marked
//    dirty, and a transaction's status is set: a checkpoint never takes a redo point past
//    the record before it can see both (storage rule 4).
//  - A failure to insert leaves changed but unlogged pages in the pool: on_half_applied
//    is called (the engine stops, W3) before the caller's latches are released.
//  - new_block() hands each block out once: a per-relation counter that starts at the
//    relation's size. So there is one store per buffer pool (per open database), shared
//    by every session.
#pragma once

#include "access/page_store.hpp"
#include "storage/buffer_pool.hpp"
#include "storage/commit_log.hpp"
#include "storage/wal_log.hpp"

#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace tidemark::access {

class pool_page_store final : public page_store {
public:
  /// `wal` null: a read-only store (log_change() throws usage_error). `status` (may be
  /// null in tests) records each committed transaction.
  pool_page_store(storage::buffer_pool& pool, storage::wal_log* wal, bool full_page_writes,
                  storage::commit_log* status = nullptr,
                  std::function<void(const std::string&)> on_half_applied = {});

  std::size_t page_size() const override { return pool_.page_size(); }
  page_guard latch(page_id id, latch_mode mode) override;
  page_guard try_latch(page_id id, latch_mode mode) override;
  bool read_unlatched(page_id id, unlatched_page* page) const override;
  bool still_unchanged(const unlatched_page& page) const override;
  block_id new_block(rel_id rel) override;
  /// Pinned without a read: past the relation's end the file holds nothing.
  page_guard latch_new_block(rel_id rel) override;
  block_id blocks(rel_id rel) override;
  lsn_t log_change(const std::vector<logged_page>& pages, storage::xid_t xid = 0) override;
  std::size_t max_record_bytes() const override;
  void half_applied(const std::string& why) override;
  std::size_t max_latched_pages() const override;
  void reserve_latches(std::size_t count) override;
  bool try_reserve_latches(std::size_t count) override;
  void release_reserved_latches() override;
  bool latches_reserved() const override;
  std::size_t latches_in_reserve() const override;

protected:
  void unlatch(page_id id, std::uint64_t handle, latch_mode mode) override;

private:
  storage::buffer_id pin_reserved(page_id id, storage::read_mode mode);
  page_guard latch_as(page_id id, latch_mode mode, storage::read_mode read);
  /// Takes one pin of the calling thread's reservation; false when it has none left.
  bool draw_reserved();
  /// A latch's pin, given back to the thread's reservation while it has one, else the pool.
  void give_back_pin();
  void encode(storage::record_builder& record, const std::vector<logged_page>& pages,
              storage::xid_t xid, lsn_t redo_lsn) const;
  void record_status(storage::xid_t xid, lsn_t end);

  storage::buffer_pool& pool_;
  storage::wal_log* wal_;
  bool full_page_writes_;
  storage::commit_log* status_;
  std::function<void(const std::string&)> on_half_applied_;
  std::mutex blocks_mutex_;
  std::map<rel_id, block_id> next_block_; // relations this store has extended
};

} // namespace tidemark::access
