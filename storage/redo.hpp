// WAL redo: replays records from a reader into the buffer pool (DESIGN §6 step 4).
//
// Rules it keeps:
//  - A block with a full-page image is restored from the image without reading the page
//    from disk (the on-disk copy may be torn), and gets the record's end LSN.
//  - Any other block is read and verified; its ops are applied only if the page LSN is
//    older than the record's end, so replaying a record twice changes nothing.
//  - A page that fails verification stops redo with a data_error naming file and block.
//  - A record's blocks are latched together, in page order, while it is applied: readers
//    (a standby's sessions) never see part of a record.
#pragma once

#include "storage/buffer_pool.hpp"
#include "storage/commit_log.hpp"
#include "storage/wal_prefetcher.hpp"
#include "storage/wal_reader.hpp"

#include <atomic>
#include <chrono>
#include <functional>

namespace tidemark::storage {

struct redo_summary {
  std::uint64_t records = 0;
  std::uint64_t blocks_applied = 0;
  std::uint64_t blocks_skipped = 0; // page already newer than the record
  std::uint64_t images_restored = 0;
  xid_t next_xid = 1; // one past the highest xid seen (or the checkpoint's)
};

/// Where a long redo is, for its progress lines.
struct redo_progress {
  lsn_t position = 0; // end of the last record applied
  std::uint64_t records = 0;
  double seconds = 0; // since replay began
};

struct redo_options {
  wal_prefetcher* prefetcher = nullptr; // told where redo is, record by record
  /// Called with redo's position about every `progress_every` (not at all when zero).
  std::function<void(const redo_progress&)> progress;
  std::chrono::steady_clock::duration progress_every{0};
  /// When set, the end of each record applied and the count so far (a standby's status).
  std::atomic<lsn_t>* replayed = nullptr;
  std::atomic<std::uint64_t>* records = nullptr;
  /// Called after each checkpoint record is replayed, with its position and payload.
  std::function<void(lsn_t, const checkpoint_payload&)> checkpoint_replayed;
  /// Called before a record with record_reuses_unlinked is replayed (a standby: returns
  /// once no read in progress may hold the reused block's number).
  std::function<void()> before_reusing_unlinked;
};

/// Replays every record the reader returns. Pages are left dirty in the pool; each
/// transaction record marks its transaction committed in `status` (when not null).
redo_summary replay(wal_reader& reader, buffer_pool& pool, xid_t next_xid_at_checkpoint,
                    commit_log* status = nullptr, const redo_options& options = {});

/// Applies one record's block changes (used by replay and by tests).
void redo_record(const record_view& record, buffer_pool& pool, redo_summary& summary);

} // namespace tidemark::storage
