// The WAL write mechanism: a shared insert buffer, segment files, write-out and fdatasync,
// and waiting for durability. Policy (when to flush, which syncs run) lives in the
// wal_writer actor; this class only does what it is told, safely from any thread.
//
// Invariants:
//  - inserted_lsn >= written_lsn >= flushed_lsn, each monotonic.
//  - Bytes below inserted_lsn are complete records in the buffer or already written (on a
//    standby: the bytes that arrived, possibly ending mid-record, until restart_at());
//    bytes below flushed_lsn are durable (a completed fdatasync covered them).
//  - A record is inserted only if the redo point the caller built it against is still the
//    current one (the FPI decision depends on it); otherwise insert() returns nothing and
//    the caller rebuilds (rule 3 in storage/README.md).
//  - A redo point never gets ahead of a commit (rule 4): a commit inserts its record with
//    a commit_hold, which it releases once its pages are marked dirty and its status is in
//    the commit-status log; begin_redo_point() returns only after every hold taken before
//    it was released. Holds count in two slots, by the parity of the redo-point
//    generation they were taken in; begin_redo_point() (one call at a time) moves the
//    generation on and waits for the previous one's slot to drain, so new holds never
//    keep it waiting.
//  - Segment files are named by the 16-hex-digit LSN of their first byte, so the name of
//    the segment holding any LSN is computable. New segments are created zero-filled and
//    made durable (file and directory) before records are written into them; segments
//    wholly before the last checkpoint's redo point are recycled or removed (C2) only when
//    the caller says so.
#pragma once

#include "storage/io_engine.hpp"
#include "storage/latency_buckets.hpp"
#include "storage/sync_failure_latch.hpp"
#include "storage/wal_record.hpp"
#include "storage/zeroed_memory.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tidemark::storage {

struct wal_options {
  std::string dir;                        // <data>/wal
  std::uint64_t segment_size = 16u << 20; // bytes, multiple of 64 KiB
  std::size_t buffer_size = 16u << 20;    // insert buffer bytes
};

struct lsn_range {
  lsn_t start = 0;
  lsn_t end = 0; // end of the record (its page LSN)
};

/// A commit's WAL could not be made durable: its outcome is unknown to the caller (the
/// record may or may not survive a crash), and the log accepts no more work.
class wal_not_durable : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct wal_counters {
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> records{0};
  std::atomic<std::uint64_t> fpi{0};
  std::atomic<std::uint64_t> fsyncs{0};
  std::atomic<std::uint64_t> fsync_micros{0}; // time spent in those fdatasyncs
  atomic_latency_histogram fsync_latency;     // and how it was spread
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> redo_point_waits{0}; // begin_redo_point() waited for commits
};

/// Told each time the flushed LSN moves (a WAL sender shipping durable WAL). Called on
/// the syncing thread after the waiters were woken: it must be cheap and must not block.
class flush_listener {
public:
  virtual ~flush_listener() = default;
  virtual void flushed(lsn_t lsn) = 0;
};

class wal_log {
public:
  /// Opens the log for appending at `insert_lsn` (end of valid WAL found by the reader, or
  /// the start position at init). Bytes after it in its segment are zeroed and later
  /// segments removed, so no stale record can follow new ones.
  /// `prev_lsn` is the start of the last valid record (0 if none).
  wal_log(io_engine& io, wal_options options, lsn_t insert_lsn, lsn_t prev_lsn);
  ~wal_log();
  wal_log(const wal_log&) = delete;
  wal_log& operator=(const wal_log&) = delete;

  /// A commit's hold on redo points (PostgreSQL's DELAY_CHKPT_START): taken by insert()
  /// together with the commit record, released (release() or the destructor) once the
  /// commit's effects are where a checkpoint looks for them: its pages marked dirty in the
  /// buffer pool, its status set in the commit-status log. Until then a checkpoint whose
  /// redo point lies past the record — redo from there will not replay it — would miss
  /// them: begin_redo_point() waits. Move-only; it must not outlive its log.
  class commit_hold {
  public:
    commit_hold() = default;
    commit_hold(commit_hold&& other) noexcept
      : log_(std::exchange(other.log_, nullptr)), slot_(other.slot_) {}
    commit_hold& operator=(commit_hold&&) = delete;
    ~commit_hold() { release(); }
    bool held() const { return log_ != nullptr; }
    void release() noexcept;

  private:
    friend class wal_log;
    wal_log* log_ = nullptr;
    unsigned slot_ = 0;
  };

  /// Inserts a finished record. Returns nothing if `expected_redo_lsn` is no longer the
  /// current redo point (the caller must rebuild its full-page-image decisions). With
  /// `hold` (not held), a commit's record: the hold is taken with the insert, atomically
  /// with respect to begin_redo_point().
  std::optional<lsn_range> insert(record_builder& record, lsn_t expected_redo_lsn,
                                  commit_hold* hold = nullptr);

  /// A standby's receiver: appends WAL bytes as the primary sent them (records sealed
  /// there, possibly ending mid-record) at `lsn`, which must be the inserted LSN. They are
  /// written and synced like inserted records. A gap is a broken invariant (TIDEMARK_CHECK).
  void append_received(lsn_t lsn, const void* data, std::size_t length);
  /// Promotion: the log continues at `end` (the end of the last complete record replayed,
  /// whose start is `prev`), as when it was opened there: WAL that arrived after it is
  /// zeroed, later segments removed. No write or sync may be running.
  void restart_at(lsn_t end, lsn_t prev);

  /// Takes a new redo point: the current insert position, atomically with respect to
  /// inserts. Returns it once every commit_hold taken before it has been released, so
  /// that every commit whose record precedes the redo point has its pages marked dirty
  /// and its status in the commit-status log (rule 4). Concurrent calls take turns; a
  /// thread holding a commit_hold must not call it (it would wait for itself).
  lsn_t begin_redo_point();
  /// Sets the redo point read from the control file at start-up.
  void set_redo_lsn(lsn_t lsn);
  lsn_t redo_lsn() const { return redo_lsn_.load(std::memory_order_acquire); }

  lsn_t inserted_lsn() const { return inserted_lsn_.load(std::memory_order_acquire); }
  /// Has the kernel supply the insert buffer's memory for the next `bytes` of WAL past the
  /// inserted end while the ring's first pass (from the first call's position) has not
  /// come round, so that inserts do not pay fresh memory's first touch holding the insert
  /// mutex (and their commits' page latches). Leaves the bytes as they are; one caller at a
  /// time (the bgwriter). Stops for good when the kernel cannot.
  void fault_in_ahead(std::size_t bytes);
  lsn_t flushed_lsn() const { return flushed_lsn_.load(std::memory_order_acquire); }

  /// Makes WAL durable up to at least `upto`: write_out() then sync_through(). Returns the
  /// new flushed LSN. Throws io_error (fsync_failed) on sync failure; the log is then unusable.
  lsn_t flush(lsn_t upto);

  /// Writes everything inserted so far to the segment files (no sync). Returns the written
  /// LSN, the target to hand to sync_through().
  lsn_t write_out();

  /// Makes WAL durable through `target` (a value write_out() returned): one fdatasync per
  /// segment holding bytes between the flushed LSN and `target`. Several threads may sync
  /// at once (group commit keeps more than one fdatasync in flight): an fdatasync covers
  /// every byte written to the file before it started, and flushed_lsn only moves forward.
  /// A sync publishes its target only after every sync that started before it has
  /// finished, and throws if one of those failed: Linux reports a writeback error once
  /// per open file, so a concurrent fdatasync on the same fd can return 0 although pages
  /// it covers were lost (W3). Returns the flushed LSN. Throws io_error (fsync_failed) on
  /// sync failure; the log is then unusable.
  lsn_t sync_through(lsn_t target);

  /// Blocks until WAL is durable through `lsn`, whoever syncs it (a syncer's
  /// sync_through() wakes the waiters), without polling. Throws wal_not_durable when a
  /// sync failed or stop_waiters() was called before `lsn` became durable.
  void wait_for_flush(lsn_t lsn);
  /// Wakes every waiter: those whose WAL is not yet durable get wal_not_durable(`why`),
  /// and so does every later wait that is not already satisfied.
  void stop_waiters(const std::string& why);

  /// Removes every segment wholly before `lsn`'s segment. Each is recycled (renamed to a
  /// future segment, so that writing there later needs no zero-fill) while the future
  /// segment's end stays at or below `recycle_through` or fewer than four future segments
  /// exist; the rest are unlinked. PostgreSQL's rule: the checkpointer passes its redo point
  /// plus max_wal_size, so the directory stays near max_wal_size.
  void remove_segments_before(lsn_t lsn, lsn_t recycle_through = 0);

  /// Creates (zero-filled, durable) the `count` segments after the one being inserted into,
  /// where missing, so that a flush never stalls creating one. Safe from any thread; meant
  /// for a background actor's tick.
  void prepare_segments_ahead(std::size_t count);

  /// Sets (or with nullptr clears) the one flush listener; it must outlive its setting.
  void set_flush_listener(flush_listener* listener) { listener_.store(listener); }

  const wal_counters& counters() const { return counters_; }
  const wal_options& options() const { return options_; }

  static std::string segment_name(lsn_t segment_start);
  /// Start LSNs of the segment files in `dir`, ascending (other files are ignored).
  static std::vector<lsn_t> list_segments(const std::string& dir);

private:
  // ---- start-up ----
  void open_for_append(lsn_t insert_lsn);
  // ---- insert side (insert_mutex_ held) ----
  void make_room_locked();
  void copy_to_ring(lsn_t lsn, const void* data, std::size_t length);
  // ---- write side (flush_mutex_ held) ----
  void write_out_locked(lsn_t upto);
  void finish_sync_locked(std::uint64_t ticket);
  void wake_waiters(bool everyone);
  int segment_fd(lsn_t segment_start);
  void create_segment_file(lsn_t segment_start);
  void write_zeros(int fd, std::uint64_t offset, std::uint64_t length);
  void close_segment(lsn_t segment_start);
  void remove_segment(lsn_t segment_start, lsn_t& highest, std::size_t& future_count,
                      lsn_t recycle_through);
  // ---- helpers ----
  void check_usable() const;
  template <class Work>
  void guard_sync_failure(Work&& work);
  lsn_t segment_start(lsn_t lsn) const { return lsn - lsn % options_.segment_size; }
  std::string segment_path(lsn_t segment_start) const;

  io_engine& io_;
  wal_options options_;
  std::unique_ptr<zeroed_memory> buffer_; // ring: byte at lsn L lives at L % buffer_size
  std::mutex insert_mutex_;
  std::mutex flush_mutex_;
  std::mutex create_mutex_; // segment file creation; taken after flush_mutex_ when both
  lsn_t prev_lsn_ = 0;      // guarded by insert_mutex_
  // fault_in_ahead's caller's: the ring positions of [from, end) are faulted in; nothing
  // more is once end reaches from + the ring's size (or the kernel refused).
  struct {
    lsn_t from = 0, end = 0;
    bool started = false;
  } faulted_in_;
  std::atomic<lsn_t> inserted_lsn_{0};
  std::atomic<lsn_t> written_lsn_{0};
  std::atomic<lsn_t> flushed_lsn_{0};
  std::atomic<lsn_t> redo_lsn_{0};
  sync_failure_latch failure_; // the first failed sync
  struct open_segment {
    lsn_t start = 0;
    int fd = -1;
  };
  std::vector<open_segment> segments_; // guarded by flush_mutex_
  // Tickets of the sync_through() calls in flight (fdatasyncs running outside flush_mutex_
  // on fds of segments_), in start order; guarded by flush_mutex_. Cached fds are closed
  // only while it is empty; a finished sync publishes only once every earlier ticket is
  // gone (sync_settled_).
  std::vector<std::uint64_t> syncs_in_flight_;
  std::uint64_t next_sync_ticket_ = 0;
  std::condition_variable sync_settled_;
  std::vector<io_write> pieces_; // guarded by flush_mutex_; reused by every write-out
  // wait_for_flush(): each waiter sleeps on a condition variable of its own, listed with
  // its LSN in flush_waiters_ (guarded by waiters_mutex_). A publication of flushed_lsn_
  // wakes exactly the waiters it satisfies; a failure or stop wakes all. Waiters check
  // and publishers notify under waiters_mutex_, so no wakeup is lost.
  struct flush_waiter {
    lsn_t lsn;
    std::condition_variable wake;
  };
  std::mutex waiters_mutex_;
  std::vector<flush_waiter*> flush_waiters_;
  std::string stopped_because_; // guarded by waiters_mutex_; set by stop_waiters()
  wal_counters counters_;
  std::atomic<flush_listener*> listener_{nullptr};
  // Commit holds (see commit_hold): pending per slot; a hold taken in redo-point
  // generation g counts in slot g % 2. hold_generation_ is guarded by insert_mutex_;
  // begin_redo_point() runs under redo_point_mutex_ and sleeps on holds_released_ (a
  // release that empties a slot notifies under holds_mutex_, so no wakeup is lost).
  std::uint64_t hold_generation_ = 0;
  std::atomic<std::uint64_t> holds_pending_[2] = {0, 0};
  std::mutex redo_point_mutex_;
  std::mutex holds_mutex_;
  std::condition_variable holds_released_;
  void release_hold(unsigned slot) noexcept;
};

} // namespace tidemark::storage
