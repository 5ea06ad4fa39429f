// WAL redo into the buffer pool: see redo.hpp for the rules.
#include "storage/redo.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace tidemark::storage {

// All of a record's blocks are latched together (in page order, as commits latch them)
// before any is changed, and released together: a reader on a standby sees either none or
// all of a transaction's changes among the pages it looks at.
void redo_record(const record_view& record, buffer_pool& pool, redo_summary& summary) {
  const lsn_t end = record.end_lsn();
  const std::size_t count = record.block_count;
  thread_local std::vector<buffer_id> buffers; // kept allocated from record to record
  thread_local std::vector<std::size_t> order;
  buffers.resize(count);
  order.resize(count);
  if (count > 1)
    pool.reserve_pins(static_cast<std::uint32_t>(count - 1)); // replay() reserved one
  std::size_t pinned = 0;
  try {
    for (; pinned < count; ++pinned) {
      const block_ref_view& block = record.blocks[pinned];
      pool.files().note_block(block.id);
      buffers[pinned] =
        pool.pin(block.id, block.image != nullptr ? read_mode::zero_fill : read_mode::normal);
    }
  } catch (...) {
    for (std::size_t i = 0; i < pinned; ++i)
      pool.unpin(buffers[i]);
    if (count > 1)
      pool.release_pins(static_cast<std::uint32_t>(count - 1));
    throw;
  }
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return record.blocks[a].id < record.blocks[b].id;
  });
  auto first_of_page = [&](std::size_t k) { // a page named twice is latched once
    return k == 0 || !(record.blocks[order[k - 1]].id == record.blocks[order[k]].id);
  };
  for (std::size_t k = 0; k < count; ++k)
    if (first_of_page(k))
      pool.lock_exclusive(buffers[order[k]]);
  for (std::size_t i = 0; i < count; ++i) {
    const block_ref_view& block = record.blocks[i];
    void* page = pool.page(buffers[i]);
    if (block.image != nullptr) {
      restore_image(block, page, pool.page_size());
      set_page_lsn(page, end);
      pool.mark_dirty(buffers[i]);
      ++summary.images_restored;
    } else if (page_lsn(page) < end) {
      apply_ops(page, pool.page_size(), block.ops, block.ops_length);
      set_page_lsn(page, end);
      pool.mark_dirty(buffers[i]);
      ++summary.blocks_applied;
    } else {
      ++summary.blocks_skipped;
    }
  }
  for (std::size_t k = 0; k < count; ++k)
    if (first_of_page(k))
      pool.unlock_exclusive(buffers[order[k]]);
  for (std::size_t i = 0; i < count; ++i)
    pool.unpin(buffers[i]);
  if (count > 1)
    pool.release_pins(static_cast<std::uint32_t>(count - 1));
}

redo_summary replay(wal_reader& reader, buffer_pool& pool, xid_t next_xid_at_checkpoint,
                    commit_log* status, const redo_options& options) {
  redo_summary summary;
  summary.next_xid = next_xid_at_checkpoint;
  using clock = std::chrono::steady_clock;
  const clock::time_point started = clock::now();
  clock::time_point next_progress = started + options.progress_every;
  const bool reports = options.progress && options.progress_every.count() > 0;
  pool.reserve_pins(1);
  try {
    while (const record_view* record = reader.next()) {
      ++summary.records;
      if (options.prefetcher != nullptr)
        options.prefetcher->redo_reached(record->end_lsn());
      if (reports && summary.records % 1024 == 0 && clock::now() >= next_progress) {
        auto now = clock::now();
        options.progress(
          {record->lsn(), summary.records, std::chrono::duration<double>(now - started).count()});
        next_progress = now + options.progress_every;
      }
      if (record->type() == record_type::checkpoint &&
          record->main_length >= sizeof(checkpoint_payload)) {
        checkpoint_payload payload;
        std::memcpy(&payload, record->main, sizeof payload);
        summary.next_xid = std::max(summary.next_xid, payload.next_xid);
        if (options.checkpoint_replayed)
          options.checkpoint_replayed(record->lsn(), payload);
      }
      if (record->header.xid != 0)
        summary.next_xid = std::max(summary.next_xid, record->header.xid + 1);
      if ((record->header.flags & record_reuses_unlinked) && options.before_reusing_unlinked)
        options.before_reusing_unlinked();
      redo_record(*record, pool, summary);
      if (status != nullptr && record->type() == record_type::transaction)
        status->set(record->header.xid, xact_status::committed, record->end_lsn());
      if (options.replayed != nullptr) {
        options.replayed->store(record->end_lsn(), std::memory_order_release);
        options.records->store(summary.records, std::memory_order_relaxed);
      }
    }
  } catch (...) {
    pool.release_pins(1);
    throw;
  }
  pool.release_pins(1);
  return summary;
}

} // namespace tidemark::storage
