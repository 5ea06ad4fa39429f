// WAL-driven prefetch for redo (recovery_prefetch): a thread of its own decodes the WAL
// ahead of the redo loop and reads the blocks those records will need into the buffer
// pool, a batch at a time through io_engine::read_batch (one io_uring submission), while
// redo applies the records before them. A pool too small to hold what it reads ahead
// (reads_into_pool) gets none of it: the prefetcher asks the kernel to read those blocks
// into its page cache instead (io_engine::will_need), so redo's own read finds them there.
//
// What it skips: blocks the record restores from a full-page image (redo zero-fills
// those), and later references to them while redo has not reached that image yet;
// blocks already in the pool or being read; blocks it looked at within the last few
// hundred references (hot pages are not looked up on every record); after a thousand
// look-ups in a row that found their page cached, all but one block in eight until a
// look-up finds one that is not (a cached redo does not pay for look-ups that find
// nothing to read); and everything redo has already passed (if redo overtakes it, it
// jumps to where redo is).
//
// Rules it keeps:
//  - Redo never waits for a read it did not need: a prefetched buffer is an ordinary pool
//    buffer whose read is in progress, and only a pin of that very page waits for it.
//  - It stays within recovery_prefetch_distance bytes of WAL ahead of redo and, reading
//    into the pool, within half the pool's buffers read ahead and not yet reached by redo,
//    so a small pool is not churned by pages redo will not use before they are evicted.
//  - Reading into the pool, it pins at most one batch of buffers (reserved with
//    reserve_pins, so the pool never runs out of unpinned buffers), and every buffer it
//    claims is finished before its batch ends, also on errors: no pin ever waits for a
//    read nobody will complete. Advising the kernel, it pins nothing.
//  - A page that fails verification is left unread; the redo pin that needs it reads it
//    again and reports the error. Any other failure ends prefetching (redo goes on, reading
//    for itself) and is kept for the report.
#pragma once

#include "storage/buffer_pool.hpp"
#include "storage/io_engine.hpp"
#include "storage/relation_files.hpp"
#include "storage/wal_reader.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

namespace tidemark::storage {

struct prefetch_report {
  std::uint64_t records = 0;       // decoded ahead of redo
  std::uint64_t blocks_cached = 0; // referenced, already in the pool or looked at lately
  std::uint64_t images = 0;        // referenced with a full-page image (not read)
  std::uint64_t reads = 0;         // pages it read into the pool
  std::uint64_t advised = 0;       // pages it asked the kernel to read (a small pool)
  std::uint64_t batches = 0;       // read_batch calls
  std::string error;               // why it stopped early, if it did
};

/// Which blocks the prefetcher looks up in the pool: every one, until `streak` look-ups in
/// a row found their page cached; then one in `stride`, until a look-up finds a page that
/// is not cached.
class lookup_sampler {
public:
  lookup_sampler(std::uint32_t streak, std::uint32_t stride) : streak_(streak), stride_(stride) {}
  /// Whether to look up the next block.
  bool look();
  /// What that look-up found.
  void found(bool cached);

private:
  std::uint32_t streak_, stride_;
  std::uint32_t cached_streak_ = 0; // look-ups in a row that found their page cached
  std::uint32_t passed_ = 0;        // blocks passed over since the last look-up
};

class wal_prefetcher {
public:
  /// Where read-ahead goes: where reads_into_pool() says for the pool's size (into the
  /// pool, or to the kernel's page cache as will_need advice), or into the pool whatever
  /// its size.
  enum class target { by_pool_size, pool };

  /// Starts the thread: it reads WAL from `start` up to `end` (where redo will stop).
  /// With `arrival` (a standby's redo, which follows WAL as it arrives), it follows it too,
  /// and reads the pages it claimed before it waits for more WAL; its re-reads of WAL
  /// that arrived but read back wrong are counted in `rereads` (wal_reader::follow).
  wal_prefetcher(io_engine& io, std::string wal_dir, std::uint64_t segment_size,
                 std::size_t page_size, lsn_t start, lsn_t end, buffer_pool& pool,
                 relation_files& files, std::uint64_t distance_bytes,
                 wal_arrival* arrival = nullptr, target where = target::by_pool_size,
                 std::atomic<std::uint64_t>* rereads = nullptr);
  ~wal_prefetcher();
  wal_prefetcher(const wal_prefetcher&) = delete;
  wal_prefetcher& operator=(const wal_prefetcher&) = delete;

  /// Redo is about to apply the record ending at `end_lsn` (redo's thread only). Published
  /// every `publish_every` records, or at once where the prefetcher waits for it: a write
  /// of the shared position per record would move its cache line between the two cores on
  /// every record. A wake-up only when the prefetcher waits for redo to get there.
  void redo_reached(lsn_t end_lsn) {
    if (++unpublished_ < publish_every && end_lsn < wake_at_.load(std::memory_order_relaxed))
      return;
    unpublished_ = 0;
    redo_lsn_.store(end_lsn, std::memory_order_seq_cst);
    if (end_lsn >= wake_at_.load(std::memory_order_seq_cst))
      wake();
  }

  /// Blocks until the prefetcher has read as far ahead as its limits allow (it waits for
  /// redo) or has reached the end of the WAL.
  void wait_until_ahead();
  /// Ends the thread (idempotent); every read it started is finished when it returns.
  void stop();
  /// Valid after stop().
  const prefetch_report& report() const { return report_; }

  /// Prefetch batch and read-ahead limits for a pool of `buffers`.
  static std::size_t batch_pages(std::size_t buffers);
  static std::size_t ahead_pages(std::size_t buffers);
  /// Whether a pool of `buffers` holds what the prefetcher reads ahead long enough for redo
  /// to use it; if not, the prefetcher asks the kernel to read the pages instead.
  static bool reads_into_pool(std::size_t buffers);

private:
  static constexpr lsn_t never = std::numeric_limits<lsn_t>::max();
  static constexpr std::uint32_t publish_every = 64;

  struct run_state;
  void run();
  void follow_wal(run_state& st);
  std::size_t prefetch_blocks(run_state& st, const record_view& record, lsn_t record_end,
                              lsn_t redo);
  bool skip_block(run_state& st, const block_ref_view& block, lsn_t record_end, lsn_t redo);
  void read_claimed(run_state& st);
  void went_idle();
  void wake();
  /// Sleeps until redo reaches `lsn` or stop() is called; false on stop.
  bool wait_for_redo(lsn_t lsn);

  io_engine& io_;
  std::string wal_dir_;
  std::uint64_t segment_size_;
  std::size_t page_size_;
  lsn_t start_, end_;
  wal_arrival* arrival_;
  std::atomic<std::uint64_t>* rereads_;
  buffer_pool& pool_;
  relation_files& files_;
  std::uint64_t distance_;
  bool into_pool_;

  std::uint32_t unpublished_ = 0; // redo's thread only
  std::atomic<lsn_t> redo_lsn_;
  std::atomic<lsn_t> wake_at_{never};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable redo_moved_;
  std::condition_variable went_idle_;
  bool idle_ = false;      // waiting for redo, or done (mutex_)
  prefetch_report report_; // written by the thread only, read after join
  std::thread thread_;
};

} // namespace tidemark::storage
