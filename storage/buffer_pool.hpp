// The shared buffer pool: page frames, descriptors with one atomic state word, a
// partitioned page table, and clock-sweep victim selection (PostgreSQL's design).
//
// State word of a descriptor (bits):
//   0..17  pin count           18..21 usage count (0..5)
//   22 header locked   23 valid   24 tag valid   25 dirty   26 I/O in progress
//   27 just dirtied (dirtied again while a write of it was in progress)
//   28 in supply (offered to the victim supply; a hint: retagging drops it)
//   29 prefetched (read ahead by WAL prefetch and not pinned since; retagging drops it)
//
// Invariants (storage/README.md has the numbered write-ordering rules):
//  - A buffer is in the page table under tag T iff its tag is T and tag-valid is set.
//    Retagging takes both partition locks and the header lock, and requires pin count 1
//    (the retagger's own), not dirty and no I/O in progress.
//  - A frame's bytes change only under its exclusive content latch, by a caller holding a
//    pin; mark_dirty() is called under that latch.
//  - A write of a buffer copies the page under a shared latch between start_write() and
//    finish_write(); dirty stays set until the write finishes, and stays set after it if
//    the page was dirtied again meanwhile (just dirtied). So a dirty buffer is never
//    evicted, and a write never reports newer changes clean. A session writing a dirty
//    victim never waits for its latch (it may hold latches the victim's holder waits
//    for): it passes that victim by.
//  - Sessions reserve their pins up front (reserve_pins), so the pool never runs out of
//    unpinned buffers however small it is: writers (bgwriter, checkpointer) pin nothing.
//    At most pin_capacity() pins are held at once (the pool's size, and never more than
//    the pin count field holds), so no buffer's pin count overflows however large the pool.
//  - The victim supply (a lock-free queue the bgwriter fills with clean, reusable buffers)
//    only suggests: a session takes a buffer from it only by the same checks, under the
//    same CAS, as the clock sweep (unpinned, usage 0, clean, no I/O); stale entries are
//    dropped. Sessions take the supply before sweeping, and sound the alarm when it runs
//    below the low-water mark, so the bgwriter cleans now instead of at its next round;
//    once, until the supply is refilled to the mark (or the bgwriter rearms it).
//  - A thread remembers the buffers of the pages it pinned last (a small direct-mapped
//    table per thread): a pin of such a page pins that buffer first, without the partition
//    lock, and keeps it only when the buffer is tagged with the page after the pin (a
//    pinned buffer is never retagged, and a retag's header unlock publishes its tag to the
//    pin's CAS); otherwise it unpins it and looks the page up. A page pinned again soon
//    (a leaf a commit reads, then changes) is then pinned with one CAS.
//  - The page table is searched without the partition lock first: the bucket heads, chain
//    links and tags are atomics, a walk gives up after a few steps (a chain may change
//    under it), and what it finds counts only once pinned and checked as a hint is. A
//    miss is settled under the lock, which every change of a chain holds.
//  - Each frame has a version (a seqlock), odd while its bytes may be changing: from an
//    exclusive latch's grant to its release, and through a retag. Optimistic reads
//    (begin_optimistic) pin and latch nothing and count only if the version they began
//    at is still there; the frames are followed by optimistic_reach mapped bytes.
//  - A thread waiting for another's I/O, for a content latch or for pins sleeps
//    (wait_board.hpp) after a short spin; whoever ends the I/O, releases the latch or
//    returns pins wakes it.
#pragma once

#include "storage/page.hpp"
#include "storage/relation_files.hpp"
#include "storage/types.hpp"
#include "storage/wait_board.hpp"
#include "storage/zeroed_memory.hpp"

#include <boost/lockfree/queue.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace tidemark::storage {

using buffer_id = std::uint32_t;

/// Writes a dirty victim for a session that needs its buffer (policy provided by the
/// runtime: direct write, or through the doublewrite batcher). Called with the victim's
/// I/O-in-progress flag held and `copy` holding a private copy of the page; the write must
/// make WAL durable up to `lsn` first (W1) and register the segment for sync (W2).
/// Returns `completed` if the write is done (the pool then finishes it), `handed_over` if
/// whoever took it will call finish_write later, or — only when `may_wait` is false —
/// `declined` if it could not be taken without waiting (nothing was written). In the last
/// two cases the session moves on to another victim; it passes may_wait only after a whole
/// sweep found nothing better.
enum class victim_write { completed, handed_over, declined };

class victim_writer {
public:
  virtual ~victim_writer() = default;
  virtual victim_write write_victim(buffer_id buffer, page_id id, lsn_t lsn, void* copy,
                                    bool may_wait) = 0;
  /// How many victims one search may hand over before it waits for them to come back
  /// through the supply: a writer whose victims share one sync takes as many as share it.
  virtual std::size_t handover_limit() const { return 1; }
  /// Called before a search waits for the victims it handed over: a writer that holds them
  /// back for company sends them on now.
  virtual void before_handover_wait() {}
};

/// Told about a buffer allocation while someone asked to be (the hibernating bgwriter), and
/// when sessions find the victim supply running low (once until rearm_supply_alarm()).
class allocation_listener {
public:
  virtual ~allocation_listener() = default;
  virtual void on_allocation() = 0;
  virtual void on_supply_low() = 0;
};

enum class read_mode {
  normal,    // read from disk and verify
  zero_fill, // the caller will overwrite the whole page (redo of a full-page image)
};

struct buffer_pool_counters {
  std::atomic<std::uint64_t> allocations{0};    // victims handed out (bgwriter reads it)
  std::atomic<std::uint64_t> supplied{0};       // of which taken from the victim supply
  std::atomic<std::uint64_t> supply_low{0};     // times sessions sounded the alarm
  std::atomic<std::uint64_t> reads{0};          // pages read by pin() itself
  std::atomic<std::uint64_t> prefetched{0};     // pages read ahead (start/finish_prefetch)
  std::atomic<std::uint64_t> prefetch_hits{0};  // of which pinned before being evicted
  std::atomic<std::uint64_t> handover_waits{0}; // searches waiting for victims handed over
};

class buffer_pool {
public:
  static constexpr std::uint32_t max_pins = (1u << 18) - 1;        // the state word's pin count
  static constexpr std::size_t max_buffers = std::size_t(1) << 30; // buffer ids and buckets
  buffer_pool(std::size_t buffer_count, relation_files& files, bool checksums);
  ~buffer_pool();
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;

  void set_victim_writer(victim_writer* writer) { victim_writer_ = writer; }
  /// Set by the bgwriter on its own thread while sessions allocate: published with release,
  /// so a session that sees it sees the listener built.
  void set_allocation_listener(allocation_listener* listener) {
    listener_.store(listener, std::memory_order_release);
  }
  /// The next allocation calls the listener once (a hibernating bgwriter's wake-up).
  void notify_on_next_allocation() { notify_allocation_.store(true, std::memory_order_release); }

  // --- sessions ------------------------------------------------------------------------
  /// Blocks until `count` pins may be taken (returned by release_pins).
  void reserve_pins(std::uint32_t count);
  void release_pins(std::uint32_t count);
  /// reserve_pins() without waiting: false (nothing reserved) when they are not available.
  bool try_reserve_pins(std::uint32_t count);

  /// Pins `id`, reading it when it is not cached. Throws data_error naming the file and
  /// block when the page fails verification.
  buffer_id pin(page_id id, read_mode mode = read_mode::normal);
  void unpin(buffer_id buffer);

  /// WAL prefetch (recovery): claims a buffer for `id` and marks it being read, for a read
  /// the caller issues itself. False when `id` is cached (or being read) already. On true,
  /// *buffer is tagged `id` and pinned once by the caller, who fills page(*buffer) and then
  /// calls finish_prefetch(); a pin of `id` meanwhile waits as for any read.
  bool start_prefetch(page_id id, buffer_id* buffer);
  /// Whether `id` is cached or being read, at the moment of the look.
  bool holds(page_id id);
  /// Ends a prefetch and drops the caller's pin. A page that was read (`read_ok`) and
  /// verifies becomes readable; otherwise it stays invalid, so the pin that needs it reads
  /// it again and reports the failure itself.
  void finish_prefetch(buffer_id buffer, bool read_ok);

  // --- optimistic reads -----------------------------------------------------------------
  /// A read of a page's bytes made without a pin or a latch. The reader writes no shared
  /// memory, so readers of a hot page (a tree's root) on different cores do not pass its
  /// descriptor's cache line between them; in exchange the bytes may change under the read
  /// (a writer, or the buffer's reuse for another page), and whatever was read from them
  /// counts only once still_unchanged() says they did not.
  struct optimistic_read {
    buffer_id buffer = 0;
    std::uint32_t version = 0;
    const unsigned char* bytes = nullptr; // page_size() bytes of a frame
  };
  /// However the bytes read, offsets up to this far from `bytes` stay in memory the pool
  /// maps (the frames are followed by that much): a reader that follows 16-bit offsets and
  /// lengths in bytes changing under it (a slot, then a key length) reads no unmapped page.
  static constexpr std::size_t optimistic_reach = 64 + 2 * 65536;
  /// Starts an optimistic read of `id`: false when the page cannot be read that way now
  /// (not in the pool, not read in yet, or being changed under an exclusive latch).
  bool begin_optimistic(page_id id, optimistic_read* read) const;
  /// True when the bytes have not changed since begin_optimistic() and the buffer still
  /// holds the page: what was read from them is the page as it was at one moment.
  bool still_unchanged(const optimistic_read& read) const;

  void* page(buffer_id buffer) { return frames_ + std::size_t(buffer) * page_size_; }
  /// The buffer's page, read under its header lock: unless the caller pins the buffer or
  /// writes it, a session may retag it meanwhile.
  page_id tag(buffer_id buffer) const;

  void lock_exclusive(buffer_id buffer);
  void unlock_exclusive(buffer_id buffer);
  /// Takes the exclusive latch only if no one holds the latch; never waits.
  bool try_lock_exclusive(buffer_id buffer);
  void lock_shared(buffer_id buffer);
  /// Takes the shared latch only if no one holds it exclusively; never waits.
  bool try_lock_shared(buffer_id buffer);
  void unlock_shared(buffer_id buffer);
  /// Caller holds the exclusive latch.
  void mark_dirty(buffer_id buffer);

  // --- writers ---------------------------------------------------------------------------
  /// Starts writing `buffer` if it is valid, dirty and not being written. On success the
  /// page is copied to `copy` (page_size bytes) and its tag and LSN returned.
  /// With `only_reusable`, buffers that are pinned or recently used are skipped (bgwriter).
  /// With `never_wait`, a buffer someone holds latched exclusively is not written (false):
  /// a session sweeping for a victim may hold latches that holder is waiting for
  /// (PostgreSQL's BufferAlloc takes the content lock conditionally for the same reason).
  bool start_write(buffer_id buffer, void* copy, page_id* id, lsn_t* lsn,
                   bool only_reusable = false, bool never_wait = false);
  /// Ends a write started by start_write; clears dirty unless dirtied again meanwhile.
  /// With `offer`, a buffer that is then clean and reusable joins the victim supply.
  void finish_write(buffer_id buffer, bool succeeded, bool offer = false);

  // --- the victim supply ---------------------------------------------------------------
  /// Offers a clean, valid, unpinned buffer with usage count 0 to the sessions' next
  /// allocations, which take the supply before they sweep. False if the buffer is not
  /// such a buffer, is offered already, or the supply is full.
  bool offer_victim(buffer_id buffer);
  /// Buffers in the supply (approximate: entries may have been reused since).
  std::size_t supply_size() const;
  /// Below this, an allocation sounds the alarm (allocation_listener::on_supply_low).
  std::size_t supply_low_water() const { return supply_low_water_; }
  /// Lets the next allocation below the low-water mark sound the alarm again (also done
  /// by the offer that refills the supply to the mark).
  void rearm_supply_alarm() { supply_alarm_.store(false, std::memory_order_release); }
  /// Whether the alarm sounded and was not rearmed since.
  bool supply_alarm_sounded() const { return supply_alarm_.load(std::memory_order_acquire); }

  /// Waits until no write of `buffer` is in progress. A checkpoint must not move on to
  /// its sync phase while a write it relies on (begun by someone else) is still running:
  /// that write registers its segment for sync only when it completes (W2, C1).
  /// Throws engine_stopped_error when stop_waits() ends the wait first.
  void wait_for_write(buffer_id buffer) const;
  /// The engine failed: every wait_for_write() from now on ends at once (the writer it
  /// waits for, e.g. the doublewrite batcher, may be gone), and so does a clock sweep that
  /// finds every buffer pinned or being written (engine_stopped_error).
  void stop_waits();
  bool write_in_progress(buffer_id buffer) const;

  bool is_dirty(buffer_id buffer) const;
  /// Pinned, or usage count above zero: the clock sweep would not take it now.
  bool is_reusable(buffer_id buffer) const;

  // --- clock sweep -----------------------------------------------------------------------
  /// Clock hand position and completed passes, read together.
  void clock_position(std::uint32_t* hand, std::uint64_t* passes) const;
  /// Has the kernel supply the memory of the `buffers` buffers ahead of the clock hand while
  /// its first pass hands out buffers never used (in order), so that the sessions taking
  /// them do not pay the first touch of fresh memory (on a virtual machine a trip to the
  /// host per page, a tenth of a load's CPU), often holding latches. Their bytes are left
  /// as they are, so it races with no one. Does nothing after the first pass, or once the
  /// kernel could not. One caller at a time (the bgwriter).
  void fault_in_ahead(std::size_t buffers);

  std::size_t size() const { return buffer_count_; }
  /// How many pins may be held at once (reserve_pins never gives out more).
  std::size_t pin_capacity() const { return std::min<std::size_t>(buffer_count_, max_pins); }
  std::size_t page_size() const { return page_size_; }
  buffer_pool_counters& counters() { return counters_; }
  relation_files& files() { return files_; }

private:
  struct descriptor;
  struct partition_lock;

  buffer_id find_in_bucket(page_id id, std::size_t bucket, std::size_t max_steps) const;
  buffer_id lookup_locked(page_id id, std::size_t bucket) const;
  void insert_locked(buffer_id buffer, std::size_t bucket);
  void remove_locked(buffer_id buffer, std::size_t bucket);
  std::size_t bucket_of(page_id id) const;
  partition_lock& partition_of_bucket(std::size_t bucket);

  void pin_existing(buffer_id buffer);
  bool pin_if_tagged(buffer_id buffer, page_id id);
  static void begin_change(std::atomic<std::uint32_t>& version);
  static void end_change(std::atomic<std::uint32_t>& version);
  buffer_id pin_unlocked(page_id id, std::size_t bucket);
  void remember_pin(std::size_t bucket, page_id id, buffer_id buffer) const;
  template <class Change>
  void update_state(buffer_id buffer, Change change);
  void wait_until_readable(buffer_id buffer, page_id id, read_mode mode);
  void note_prefetch_use(buffer_id buffer);
  buffer_id clock_sweep_victim();
  bool take_from_supply(buffer_id* victim);
  bool wait_for_handed_over(buffer_id* victim);
  std::optional<victim_write> write_dirty_victim(buffer_id buffer, bool may_wait);
  void check_supply();
  bool retag(buffer_id victim, page_id id, buffer_id* existing);
  void read_into(buffer_id buffer, page_id id, read_mode mode);

  std::size_t pins_key() const { return buffer_count_; }
  std::size_t supply_key() const { return buffer_count_ + 1; }
  // The header lock is a spin bit in the descriptor's state word; readers take it too.
  std::uint32_t lock_header(buffer_id buffer) const;
  void unlock_header(buffer_id buffer, std::uint32_t new_state) const;

  const std::uint64_t instance_; // tells this pool's pin hints from another's
  std::size_t buffer_count_;
  std::size_t page_size_;
  relation_files& files_;
  bool checksums_;
  victim_writer* victim_writer_ = nullptr;
  std::atomic<allocation_listener*> listener_{nullptr};
  std::atomic<bool> notify_allocation_{false};
  std::atomic<bool> stopped_{false}; // stop_waits()

  std::unique_ptr<zeroed_memory> frames_memory_;
  unsigned char* frames_ = nullptr; // frames_memory_'s bytes
  std::unique_ptr<descriptor[]> descriptors_;
  // Written under the bucket's partition lock; read without it by pin_unlocked.
  std::unique_ptr<std::atomic<std::int32_t>[]> bucket_heads_;
  std::unique_ptr<partition_lock[]> partitions_;
  std::size_t bucket_mask_;
  std::atomic<std::uint64_t> next_victim_{0};
  std::size_t faulted_in_end_ = 0; // buffers below it faulted in (fault_in_ahead's caller's)
  std::atomic<std::int64_t> pins_available_;
  boost::lockfree::queue<buffer_id> supply_; // capacity buffer_count_, never allocates
  std::atomic<std::int64_t> supply_size_{0};
  std::size_t supply_low_water_;
  std::atomic<bool> supply_alarm_{false}; // sounded, not yet rearmed
  // Sleeping waits: for a buffer's I/O (key: the buffer), its latch (key: the buffer) and
  // free pins (key: pins_key()).
  mutable wait_board waits_;
  buffer_pool_counters counters_;
};

} // namespace tidemark::storage
