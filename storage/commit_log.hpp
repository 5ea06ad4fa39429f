// The commit-status log: two bits per transaction id (PostgreSQL's pg_xact, an SLRU), in
// <data>/xact/<segno>, pages of page_size bytes, segment_pages pages per file, with a
// few pages buffered in memory and replaced least-recently-used.
//
// Invariants:
//  - A status only ever moves from unknown to committed or aborted. So a page write torn at
//    a sector boundary still holds every status the page had when it was last fsynced:
//    each sector is either the old or the new image, and both contain those bits.
//  - W1: a page is written only after WAL is durable up to the highest commit-record LSN
//    whose status it holds.
//  - W2: page writes never fsync inline; they register their segment with the sync
//    registry, and the checkpoint's sync phase fsyncs it (after write_dirty()).
//  - Statuses of transactions after the last checkpoint's redo point are rebuilt by redo
//    from their commit records; earlier ones are in the files, fsynced by that checkpoint.
//    That needs every status of a commit record before the redo point to be set() before
//    the checkpoint's write_dirty(): a commit sets its status only after inserting its
//    record, so it holds a wal_log::commit_hold from the insert through set(), and
//    wal_log::begin_redo_point() waits for the holds taken before it (storage rule 4).
//    (Without it a commit whose status came a moment late was missing from the files of a
//    checkpoint whose redo point had passed its record: after a crash, or in a base backup
//    taken from that checkpoint, an acknowledged commit had no status.)
#pragma once

#include "storage/io_engine.hpp"
#include "storage/page_writer.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace tidemark::storage {

enum class xact_status : std::uint8_t { unknown = 0, committed = 1, aborted = 2 };

class commit_log {
public:
  static constexpr std::size_t segment_pages = 32;

  commit_log(io_engine& io, std::string dir, std::size_t page_size, wal_log& wal,
             sync_registry& registry, std::size_t buffered_pages = 8);
  ~commit_log();
  commit_log(const commit_log&) = delete;
  commit_log& operator=(const commit_log&) = delete;

  /// Records `status` for `xid`, whose commit (or abort) record ends at `lsn`.
  void set(xid_t xid, xact_status status, lsn_t lsn);
  xact_status get(xid_t xid);

  /// Writes every dirty buffered page (the checkpoint, before its sync phase).
  void write_dirty(write_source source);
  void sync_segment(std::uint32_t segno);

  std::uint64_t page_writes() const { return page_writes_.load(std::memory_order_relaxed); }
  std::string segment_path(std::uint32_t segno) const;

private:
  struct slot {
    std::int64_t page = -1; // page number held, -1 = empty
    bool dirty = false;
    lsn_t max_lsn = 0; // highest commit-record LSN of a status set on it
    std::uint64_t last_used = 0;
    std::vector<unsigned char> bytes;
  };

  slot& page_locked(std::uint64_t page);
  void write_locked(slot& s, write_source source);
  int segment_fd_locked(std::uint32_t segno);

  io_engine& io_;
  std::string dir_;
  std::size_t page_size_;
  wal_log& wal_;
  sync_registry& registry_;
  std::mutex mutex_;
  std::vector<slot> slots_;
  std::vector<int> fds_; // by segno, -1 = not open
  std::uint64_t clock_ = 0;
  std::atomic<std::uint64_t> page_writes_{0};
};

/// What the files in `dir` record for `xid`, read without buffering, creating or writing
/// anything: for a read-only open of a cleanly shut down directory, whose shutdown
/// checkpoint wrote every status. unknown where no segment file holds it.
xact_status read_recorded_status(io_engine& io, const std::string& dir, std::size_t page_size,
                                 xid_t xid);

} // namespace tidemark::storage
