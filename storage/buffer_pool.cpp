// The shared buffer pool: see buffer_pool.hpp for the state word and invariants.
#include "storage/buffer_pool.hpp"

#include "storage/check.hpp"
#include "storage/spin.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <string>

namespace tidemark::storage {

namespace {

constexpr std::uint32_t pin_mask = buffer_pool::max_pins; // bits 0..17
constexpr std::uint32_t usage_shift = 18;
constexpr std::uint32_t usage_mask = 0xFu << usage_shift;
constexpr std::uint32_t usage_max = 5;
constexpr std::uint32_t header_locked = 1u << 22;
constexpr std::uint32_t valid = 1u << 23;
constexpr std::uint32_t tag_valid = 1u << 24;
constexpr std::uint32_t dirty = 1u << 25;
constexpr std::uint32_t io_in_progress = 1u << 26;
constexpr std::uint32_t just_dirtied = 1u << 27;
constexpr std::uint32_t in_supply = 1u << 28;
constexpr std::uint32_t prefetched = 1u << 29; // read ahead by WAL prefetch, not yet pinned

std::uint32_t pins(std::uint32_t state) { return state & pin_mask; }
std::uint32_t usage(std::uint32_t state) { return (state & usage_mask) >> usage_shift; }

constexpr std::size_t partition_count = 128;
// How far a walk without the partition lock follows a chain (they average half a buffer:
// there are twice as many buckets as buffers) before the locked lookup settles it.
constexpr std::size_t unlocked_walk_steps = 16;

// A thread's pin hints (buffer_pool.hpp): the buffer it last pinned a page in, per slot of
// a direct-mapped table; `pool` names the pool (buffer_pool::instance_, never reused).
struct pin_hint {
  std::uint64_t pool = 0;
  page_id id{};
  buffer_id buffer = 0;
};
constexpr std::size_t pin_hint_slots = 64;
thread_local pin_hint pin_hints[pin_hint_slots];
std::atomic<std::uint64_t> pool_instances{0};
// How long a session that handed a dirty victim to the doublewrite batcher waits for a
// supplied buffer before it looks at (and writes) the next dirty one: about a batch's
// ring write, fdatasync and in-place write.
constexpr auto supply_wait = std::chrono::milliseconds(2);

} // namespace

struct buffer_pool::descriptor {
  std::atomic<std::uint32_t> state{0};
  std::atomic<std::int32_t> latch{0}; // -1 exclusive, n > 0 shared holders
  // Odd while the frame's bytes may be changing (an exclusive latch is held, or a retag is
  // moving the buffer to another page); each change moves it on (begin_optimistic).
  std::atomic<std::uint32_t> version{0};
  // Written under the header lock and the partition locks; read without them by
  // pin_unlocked, which checks what it found after pinning it.
  std::atomic<page_id> tag{page_id{}};
  std::atomic<std::int32_t> next_in_bucket{-1}; // written under the bucket's partition lock
};
static_assert(std::atomic<page_id>::is_always_lock_free, "a tag is read without a lock");

struct alignas(64) buffer_pool::partition_lock {
  spin_lock lock;
};

buffer_pool::buffer_pool(std::size_t buffer_count, relation_files& files, bool checksums)
  : instance_(pool_instances.fetch_add(1) + 1), buffer_count_(buffer_count),
    page_size_(files.page_size()), files_(files), checksums_(checksums),
    descriptors_(new descriptor[buffer_count]), partitions_(new partition_lock[partition_count]),
    pins_available_(static_cast<std::int64_t>(std::min<std::size_t>(buffer_count, max_pins))),
    supply_(buffer_count), supply_low_water_(std::max<std::size_t>(8, buffer_count / 32)) {
  if (buffer_count < 16 || buffer_count > max_buffers)
    throw std::invalid_argument("buffer pool needs 16 .. " + std::to_string(max_buffers) +
                                " buffers");
  frames_memory_ = std::make_unique<zeroed_memory>(buffer_count * page_size_ + optimistic_reach);
  frames_ = frames_memory_->data();
  std::size_t buckets = partition_count;
  while (buckets < buffer_count * 2)
    buckets *= 2;
  bucket_heads_ = std::make_unique<std::atomic<std::int32_t>[]>(buckets);
  for (std::size_t b = 0; b < buckets; ++b)
    bucket_heads_[b].store(-1, std::memory_order_relaxed);
  bucket_mask_ = buckets - 1;
}

buffer_pool::~buffer_pool() = default;

// ---- page table --------------------------------------------------------------------------

std::size_t buffer_pool::bucket_of(page_id id) const {
  std::uint64_t key = (std::uint64_t(id.rel) << 32) | id.block;
  key *= 0x9E3779B97F4A7C15ull;
  return static_cast<std::size_t>(key >> 20) & bucket_mask_;
}

buffer_pool::partition_lock& buffer_pool::partition_of_bucket(std::size_t bucket) {
  return partitions_[bucket % partition_count];
}

// Walks `bucket`'s chain for `id`. Under the bucket's partition lock the answer is exact;
// without it (pin_unlocked) a chain may change under the walk: every link read is a buffer
// of this pool or the end, a buffer retagged meanwhile may lead into another bucket's chain
// (a miss, not a wrong answer: the caller checks a find after pinning it), and the walk
// gives up after `max_steps`, as a chain that changes under it need not end.
buffer_id buffer_pool::find_in_bucket(page_id id, std::size_t bucket, std::size_t max_steps) const {
  std::int32_t b = bucket_heads_[bucket].load(std::memory_order_relaxed);
  for (std::size_t step = 0; b >= 0 && step < max_steps; ++step) {
    TIDEMARK_DEBUG_CHECK(static_cast<std::size_t>(b) < buffer_count_,
                         "a bucket chain links buffers of this pool"); // every pin walks here
    const descriptor& d = descriptors_[b];
    if (d.tag.load(std::memory_order_relaxed) == id)
      return static_cast<buffer_id>(b);
    b = d.next_in_bucket.load(std::memory_order_relaxed);
  }
  return ~buffer_id{0};
}

buffer_id buffer_pool::lookup_locked(page_id id, std::size_t bucket) const {
  return find_in_bucket(id, bucket, buffer_count_); // a chain under its lock ends
}

void buffer_pool::insert_locked(buffer_id buffer, std::size_t bucket) {
  descriptors_[buffer].next_in_bucket.store(bucket_heads_[bucket].load(std::memory_order_relaxed),
                                            std::memory_order_relaxed);
  bucket_heads_[bucket].store(static_cast<std::int32_t>(buffer), std::memory_order_relaxed);
}

void buffer_pool::remove_locked(buffer_id buffer, std::size_t bucket) {
  std::atomic<std::int32_t>* link = &bucket_heads_[bucket];
  for (std::int32_t b; (b = link->load(std::memory_order_relaxed)) != std::int32_t(buffer);) {
    TIDEMARK_CHECK(b >= 0, "a tagged buffer is in its tag's bucket (retag removes it from there)");
    link = &descriptors_[b].next_in_bucket;
  }
  std::atomic<std::int32_t>& next = descriptors_[buffer].next_in_bucket;
  link->store(next.load(std::memory_order_relaxed), std::memory_order_relaxed);
  next.store(-1, std::memory_order_relaxed);
}

// ---- header lock -------------------------------------------------------------------------

std::uint32_t buffer_pool::lock_header(buffer_id buffer) const {
  std::atomic<std::uint32_t>& state = descriptors_[buffer].state;
  backoff wait;
  for (;;) {
    std::uint32_t old = state.fetch_or(header_locked, std::memory_order_acquire);
    if (!(old & header_locked))
      return old | header_locked;
    wait.pause();
  }
}

void buffer_pool::unlock_header(buffer_id buffer, std::uint32_t new_state) const {
  descriptors_[buffer].state.store(new_state & ~header_locked, std::memory_order_release);
}

page_id buffer_pool::tag(buffer_id buffer) const {
  std::uint32_t s = lock_header(buffer);
  page_id id = descriptors_[buffer].tag.load(std::memory_order_relaxed);
  unlock_header(buffer, s);
  return id;
}

bool buffer_pool::is_dirty(buffer_id buffer) const {
  return descriptors_[buffer].state.load(std::memory_order_acquire) & dirty;
}

bool buffer_pool::write_in_progress(buffer_id buffer) const {
  std::uint32_t s = descriptors_[buffer].state.load(std::memory_order_acquire);
  return (s & io_in_progress) && (s & valid);
}

void buffer_pool::wait_for_write(buffer_id buffer) const {
  // What ended the wait is decided once, where it ended: a next write of the buffer may
  // begin right after the one waited for completes, and must not read as a stopped engine.
  bool written = false;
  waits_.wait(buffer, [&] { return (written = !write_in_progress(buffer)) || stopped_.load(); });
  if (!written)
    throw engine_stopped_error("the wait for an in-place write of " + files_.describe(tag(buffer)) +
                               " ended: the engine stopped after a failure");
}

void buffer_pool::stop_waits() {
  stopped_.store(true);
  waits_.wake_all();
}

bool buffer_pool::is_reusable(buffer_id buffer) const {
  std::uint32_t s = descriptors_[buffer].state.load(std::memory_order_acquire);
  return pins(s) == 0 && usage(s) == 0;
}

// ---- pins --------------------------------------------------------------------------------

void buffer_pool::reserve_pins(std::uint32_t count) {
  waits_.wait(pins_key(), [&] { return try_reserve_pins(count); });
}

bool buffer_pool::try_reserve_pins(std::uint32_t count) {
  std::int64_t available = pins_available_.load(std::memory_order_relaxed);
  while (available >= count)
    if (pins_available_.compare_exchange_weak(available, available - count,
                                              std::memory_order_acq_rel))
      return true;
  return false;
}

void buffer_pool::release_pins(std::uint32_t count) {
  std::int64_t before = pins_available_.fetch_add(count, std::memory_order_acq_rel);
  TIDEMARK_CHECK(before + count <= static_cast<std::int64_t>(pin_capacity()),
                 "release_pins gives back only pins reserve_pins reserved");
  waits_.wake(pins_key());
}

// Applies `change` to the state word atomically, waiting while the header is locked.
template <class Change>
void buffer_pool::update_state(buffer_id buffer, Change change) {
  std::atomic<std::uint32_t>& state = descriptors_[buffer].state;
  std::uint32_t old = state.load(std::memory_order_relaxed);
  backoff wait;
  for (;;) {
    if (old & header_locked) {
      wait.pause();
      old = state.load(std::memory_order_relaxed);
      continue;
    }
    if (state.compare_exchange_weak(old, change(old), std::memory_order_acq_rel))
      return;
  }
}

void buffer_pool::pin_existing(buffer_id buffer) {
  update_state(buffer, [](std::uint32_t old) {
    return old + 1 + (usage(old) < usage_max ? 1u << usage_shift : 0u);
  });
}

void buffer_pool::unpin(buffer_id buffer) {
  update_state(buffer, [](std::uint32_t old) {
    TIDEMARK_CHECK(pins(old) > 0, "every unpin pairs with a pin");
    return old - 1;
  });
}

// Pins `buffer` and keeps the pin when it holds `id` now (a pin hint that still holds).
// Once pinned, the buffer is not retagged; its tag was published by the header unlock of
// the retag that set it, which this pin's CAS reads. A hint gone stale has raised the
// usage count of another page's buffer: as a pin of that page would.
bool buffer_pool::pin_if_tagged(buffer_id buffer, page_id id) {
  pin_existing(buffer);
  const descriptor& d = descriptors_[buffer];
  if ((d.state.load(std::memory_order_acquire) & tag_valid) &&
      d.tag.load(std::memory_order_relaxed) == id)
    return true;
  unpin(buffer);
  return false;
}

// The buffer holding `id`, pinned, found without the partition lock; none when the walk
// missed (the page is not in the pool, or its chain changed under the walk).
buffer_id buffer_pool::pin_unlocked(page_id id, std::size_t bucket) {
  buffer_id found = find_in_bucket(id, bucket, unlocked_walk_steps);
  if (found != ~buffer_id{0} && pin_if_tagged(found, id))
    return found;
  return ~buffer_id{0};
}

// ---- optimistic reads ----------------------------------------------------------------------
//
// A seqlock per buffer: its version is odd from the moment a change of the frame may begin
// (an exclusive latch granted, a retag under way) to the moment it has ended, and moves on
// with every change. A reader takes an even version, reads, and keeps what it read only if
// the version is still the same: had it read anything a change wrote, the fences order the
// change's start before that write and the reader's check after its read, so the check sees
// the change. A retag ends its change before the new page's bytes arrive; they arrive while
// the buffer is not valid, and becoming valid publishes them (the state word's release).

void buffer_pool::begin_change(std::atomic<std::uint32_t>& version) {
  std::uint32_t before = version.fetch_add(1, std::memory_order_relaxed);
  TIDEMARK_CHECK((before & 1) == 0, "a frame has one change at a time");
  std::atomic_thread_fence(std::memory_order_release); // the change's writes come after
}

void buffer_pool::end_change(std::atomic<std::uint32_t>& version) {
  version.fetch_add(1, std::memory_order_release);
}

bool buffer_pool::begin_optimistic(page_id id, optimistic_read* read) const {
  buffer_id buffer = find_in_bucket(id, bucket_of(id), unlocked_walk_steps);
  if (buffer == ~buffer_id{0})
    return false;
  const descriptor& d = descriptors_[buffer];
  std::uint32_t version = d.version.load(std::memory_order_acquire);
  if (version & 1)
    return false; // being changed
  std::uint32_t s = d.state.load(std::memory_order_acquire);
  if ((s & (valid | tag_valid)) != (valid | tag_valid) ||
      d.tag.load(std::memory_order_relaxed) != id)
    return false; // not readable, or retagged since the walk
  *read = {buffer, version, frames_ + std::size_t(buffer) * page_size_};
  return true;
}

bool buffer_pool::still_unchanged(const optimistic_read& read) const {
  std::atomic_thread_fence(std::memory_order_acquire); // the reads come before the check
  return descriptors_[read.buffer].version.load(std::memory_order_relaxed) == read.version;
}

void buffer_pool::remember_pin(std::size_t bucket, page_id id, buffer_id buffer) const {
  pin_hints[bucket % pin_hint_slots] = {instance_, id, buffer};
}

buffer_id buffer_pool::pin(page_id id, read_mode mode) {
  std::size_t bucket = bucket_of(id);
  const pin_hint& hint = pin_hints[bucket % pin_hint_slots];
  buffer_id found = ~buffer_id{0};
  if (hint.pool == instance_ && hint.id == id && pin_if_tagged(hint.buffer, id))
    found = hint.buffer;
  if (found == ~buffer_id{0})
    found = pin_unlocked(id, bucket);
  partition_lock& partition = partition_of_bucket(bucket);
  while (found == ~buffer_id{0}) {
    partition.lock.lock();
    found = lookup_locked(id, bucket);
    if (found != ~buffer_id{0}) {
      pin_existing(found);
      partition.lock.unlock();
      break;
    }
    partition.lock.unlock();

    buffer_id victim = clock_sweep_victim();
    if (retag(victim, id, &found)) {
      try {
        read_into(victim, id, mode);
      } catch (...) {
        unpin(victim);
        throw;
      }
      remember_pin(bucket, id, victim);
      return victim;
    }
    unpin(victim);
  }
  wait_until_readable(found, id, mode);
  note_prefetch_use(found);
  remember_pin(bucket, id, found);
  return found;
}

// The first pin of a page WAL prefetch read counts as a prefetch hit.
void buffer_pool::note_prefetch_use(buffer_id buffer) {
  if (!(descriptors_[buffer].state.load(std::memory_order_relaxed) & prefetched))
    return;
  bool cleared = false;
  update_state(buffer, [&cleared](std::uint32_t old) {
    cleared = old & prefetched;
    return old & ~prefetched;
  });
  if (cleared)
    counters_.prefetch_hits.fetch_add(1, std::memory_order_relaxed);
}

bool buffer_pool::holds(page_id id) {
  std::size_t bucket = bucket_of(id);
  partition_lock& partition = partition_of_bucket(bucket);
  partition.lock.lock();
  bool cached = lookup_locked(id, bucket) != ~buffer_id{0};
  partition.lock.unlock();
  return cached;
}

bool buffer_pool::start_prefetch(page_id id, buffer_id* buffer) {
  for (;;) {
    if (holds(id))
      return false;
    buffer_id victim = clock_sweep_victim();
    buffer_id existing = ~buffer_id{0};
    if (retag(victim, id, &existing)) {
      *buffer = victim; // pinned by us, read in progress: whoever pins it waits for us
      return true;
    }
    unpin(victim);
    if (existing != ~buffer_id{0}) {
      unpin(existing); // mapped meanwhile: someone else reads it
      return false;
    }
  }
}

void buffer_pool::finish_prefetch(buffer_id buffer, bool read_ok) {
  const page_id id = descriptors_[buffer].tag.load(std::memory_order_relaxed);
  page_verdict verdict = read_ok ? verify_page(page(buffer), page_size_, id, checksums_)
                                 : page_verdict::bad_checksum;
  std::uint32_t s = lock_header(buffer);
  if (verdict == page_verdict::ok || verdict == page_verdict::all_zero) {
    counters_.prefetched.fetch_add(1, std::memory_order_relaxed);
    s = (s | valid | prefetched) & ~io_in_progress;
  } else {
    s &= ~io_in_progress; // left invalid: the pin that needs it reads it and reports why
  }
  unlock_header(buffer, s - 1); // and our pin
  waits_.wake(buffer);
}

// Waits for another session's read of the page; if that read failed, reads it here.
void buffer_pool::wait_until_readable(buffer_id buffer, page_id id, read_mode mode) {
  std::atomic<std::uint32_t>& state = descriptors_[buffer].state;
  for (;;) {
    std::uint32_t s = state.load(std::memory_order_acquire);
    if (s & valid)
      return;
    if (!(s & io_in_progress) && !(s & header_locked) &&
        state.compare_exchange_weak(s, s | io_in_progress, std::memory_order_acq_rel)) {
      try {
        read_into(buffer, id, mode);
      } catch (...) {
        unpin(buffer);
        throw;
      }
      return;
    }
    waits_.wait(buffer, [&] {
      std::uint32_t now = state.load(std::memory_order_acquire);
      return (now & valid) || !(now & io_in_progress); // (a header lock is momentary)
    });
  }
}

void buffer_pool::read_into(buffer_id buffer, page_id id, read_mode mode) {
  void* frame = page(buffer);
  std::atomic<std::uint32_t>& state = descriptors_[buffer].state;
  if (mode == read_mode::zero_fill) {
    std::memset(frame, 0, page_size_);
  } else {
    // A failed read leaves the buffer invalid and not being read: whoever pins it next
    // (waiting in wait_until_readable, or later) reads the page again and reports why.
    auto abandon_read = [&] {
      state.fetch_and(~io_in_progress, std::memory_order_acq_rel);
      waits_.wake(buffer);
    };
    try {
      files_.read_page(id, frame);
    } catch (...) {
      abandon_read();
      throw;
    }
    counters_.reads.fetch_add(1, std::memory_order_relaxed);
    page_verdict verdict = verify_page(frame, page_size_, id, checksums_);
    if (verdict != page_verdict::ok && verdict != page_verdict::all_zero) {
      abandon_read();
      throw page_corrupt_error("page verification failed (" + std::string(to_string(verdict)) +
                                 ") in " + files_.describe(id),
                               files_.describe(id));
    }
  }
  std::uint32_t s = lock_header(buffer);
  unlock_header(buffer, (s | valid) & ~io_in_progress);
  waits_.wake(buffer);
}

// ---- clock sweep -------------------------------------------------------------------------

void buffer_pool::clock_position(std::uint32_t* hand, std::uint64_t* passes) const {
  std::uint64_t next = next_victim_.load(std::memory_order_acquire);
  *hand = static_cast<std::uint32_t>(next % buffer_count_);
  *passes = next / buffer_count_;
}

void buffer_pool::fault_in_ahead(std::size_t buffers) {
  if (faulted_in_end_ == buffer_count_)
    return;
  std::uint64_t next = next_victim_.load(std::memory_order_acquire);
  if (next >= buffer_count_) { // the first pass is over: every buffer was handed out
    faulted_in_end_ = buffer_count_;
    return;
  }
  std::size_t from = std::max<std::size_t>(faulted_in_end_, next);
  std::size_t to = std::min<std::size_t>(buffer_count_, next + buffers);
  if (from >= to)
    return;
  bool done = frames_memory_->fault_in(from * page_size_, (to - from) * page_size_);
  faulted_in_end_ = done ? to : buffer_count_; // the kernel refused: stop asking
}

// ---- victim supply ------------------------------------------------------------------------

bool buffer_pool::offer_victim(buffer_id buffer) {
  std::atomic<std::uint32_t>& state = descriptors_[buffer].state;
  std::uint32_t s = state.load(std::memory_order_acquire);
  for (;;) {
    if ((s & (header_locked | dirty | io_in_progress | in_supply)) || !(s & valid) || pins(s) > 0 ||
        usage(s) > 0)
      return false;
    if (state.compare_exchange_weak(s, s | in_supply, std::memory_order_acq_rel))
      break;
  }
  if (!supply_.bounded_push(buffer)) {
    update_state(buffer, [](std::uint32_t old) { return old & ~in_supply; });
    return false;
  }
  supply_size_.fetch_add(1, std::memory_order_relaxed);
  if (supply_alarm_.load(std::memory_order_relaxed) && supply_size() >= supply_low_water_)
    rearm_supply_alarm(); // refilled: the next fall below the mark is news again
  waits_.wake(supply_key());
  return true;
}

std::size_t buffer_pool::supply_size() const {
  return static_cast<std::size_t>(
    std::max<std::int64_t>(0, supply_size_.load(std::memory_order_relaxed)));
}

// Pops supply entries until one is still a victim, and pins it as the clock sweep would.
bool buffer_pool::take_from_supply(buffer_id* victim) {
  buffer_id b;
  while (supply_.pop(b)) {
    supply_size_.fetch_sub(1, std::memory_order_relaxed);
    bool taken = false;
    update_state(b, [&taken](std::uint32_t old) {
      taken = pins(old) == 0 && usage(old) == 0 && !(old & (dirty | io_in_progress));
      return (old & ~in_supply) + (taken ? 1u : 0u);
    });
    if (taken) {
      counters_.supplied.fetch_add(1, std::memory_order_relaxed);
      *victim = b;
      return true;
    }
  }
  return false;
}

// Waits a moment for a victim this search handed over (or any other) to reach the supply.
bool buffer_pool::wait_for_handed_over(buffer_id* victim) {
  counters_.handover_waits.fetch_add(1, std::memory_order_relaxed);
  victim_writer_->before_handover_wait();
  return waits_.wait_until(supply_key(), std::chrono::steady_clock::now() + supply_wait,
                           [&] { return take_from_supply(victim); });
}

void buffer_pool::check_supply() {
  allocation_listener* listener = listener_.load(std::memory_order_acquire);
  if (supply_size() >= supply_low_water_ || listener == nullptr ||
      supply_alarm_.load(std::memory_order_relaxed) ||
      supply_alarm_.exchange(true, std::memory_order_acq_rel))
    return;
  counters_.supply_low.fetch_add(1, std::memory_order_relaxed);
  listener->on_supply_low();
}

buffer_id buffer_pool::clock_sweep_victim() {
  counters_.allocations.fetch_add(1, std::memory_order_relaxed);
  if (notify_allocation_.load(std::memory_order_relaxed) &&
      notify_allocation_.exchange(false, std::memory_order_acq_rel))
    if (allocation_listener* listener = listener_.load(std::memory_order_acquire))
      listener->on_allocation();
  buffer_id supplied;
  bool from_supply = take_from_supply(&supplied);
  check_supply();
  if (from_supply)
    return supplied;
  std::size_t scanned = 0;
  std::size_t dirty_seen = 0;  // dirty victims met in this search
  std::size_t handed_over = 0; // dirty victims this search handed to someone else to write
  backoff wait;
  for (;;) {
    buffer_id b =
      static_cast<buffer_id>(next_victim_.fetch_add(1, std::memory_order_acq_rel) % buffer_count_);
    if (++scanned > buffer_count_ * (usage_max + 1)) {
      // Every buffer pinned or being written right now; they are released soon, unless the
      // engine failed and the writer that was to finish them is gone.
      if (stopped_.load(std::memory_order_acquire))
        throw engine_stopped_error("no buffer can be reused (each is pinned or being written) "
                                   "and the engine stopped after a failure");
      if (handed_over > 0 && wait_for_handed_over(&supplied))
        return supplied;
      if (handed_over == 0)
        wait.pause();
      handed_over = 0;
      scanned = 0;
    }
    std::atomic<std::uint32_t>& state = descriptors_[b].state;
    std::uint32_t s = state.load(std::memory_order_relaxed);
    if ((s & header_locked) || pins(s) > 0 || (s & io_in_progress))
      continue;
    if (usage(s) > 0) {
      state.compare_exchange_strong(s, s - (1u << usage_shift), std::memory_order_acq_rel);
      continue;
    }
    if (!state.compare_exchange_strong(s, s + 1, std::memory_order_acq_rel))
      continue;
    if (!(s & dirty))
      return b;
    if (handed_over > 0 && handed_over >= victim_writer_->handover_limit()) {
      // Victims of ours are on their way to disk (doublewrite) and join the supply when
      // they get there: wait for the supply a moment rather than hand over more of the pool.
      unpin(b);
      if (wait_for_handed_over(&supplied))
        return supplied;
      handed_over = 0;
      continue;
    }
    // A dirty victim: the session writes it itself (the bgwriter exists to make this rare).
    if (std::optional<victim_write> outcome = write_dirty_victim(b, dirty_seen >= buffer_count_)) {
      ++dirty_seen;
      if (outcome == victim_write::handed_over)
        ++handed_over;
      if (outcome == victim_write::completed && !is_dirty(b))
        return b;
    }
    unpin(b);
  }
}

// Writes dirty victim `b` (pinned by the search) through the victim writer and finishes
// the write unless the writer took it over. Nothing if the write could not start.
std::optional<victim_write> buffer_pool::write_dirty_victim(buffer_id b, bool may_wait) {
  thread_local std::vector<unsigned char> copy_storage; // one per thread, reused
  if (copy_storage.size() < page_size_)
    copy_storage.resize(page_size_);
  page_id victim_id;
  lsn_t lsn;
  if (victim_writer_ == nullptr ||
      !start_write(b, copy_storage.data(), &victim_id, &lsn, false, true))
    return std::nullopt;
  victim_write outcome;
  try {
    outcome = victim_writer_->write_victim(b, victim_id, lsn, copy_storage.data(), may_wait);
  } catch (...) {
    finish_write(b, false);
    unpin(b);
    throw;
  }
  if (outcome == victim_write::declined)
    finish_write(b, false); // still dirty: look for a clean victim first
  if (outcome == victim_write::completed)
    finish_write(b, true);
  return outcome;
}

// Moves `victim` (pinned once by us) to `id`. Fails if another session mapped `id` first
// (then *existing is that buffer, pinned for the caller) or the victim got pinned/dirtied.
bool buffer_pool::retag(buffer_id victim, page_id id, buffer_id* existing) {
  descriptor& d = descriptors_[victim];
  std::size_t new_bucket = bucket_of(id);
  std::uint32_t s0 = d.state.load(std::memory_order_acquire);
  bool had_tag = s0 & tag_valid;
  page_id old_id = d.tag.load(std::memory_order_relaxed);
  std::size_t old_bucket = had_tag ? bucket_of(old_id) : new_bucket;
  partition_lock* first = &partition_of_bucket(std::min(old_bucket, new_bucket));
  partition_lock* second = &partition_of_bucket(std::max(old_bucket, new_bucket));
  if (first > second)
    std::swap(first, second);
  first->lock.lock();
  if (second != first)
    second->lock.lock();
  auto unlock_both = [&] {
    if (second != first)
      second->lock.unlock();
    first->lock.unlock();
  };
  buffer_id found = lookup_locked(id, new_bucket);
  if (found != ~buffer_id{0}) {
    pin_existing(found);
    unlock_both();
    *existing = found;
    return false;
  }
  std::uint32_t s = lock_header(victim);
  if (pins(s) != 1 || (s & (dirty | io_in_progress)) ||
      d.tag.load(std::memory_order_relaxed) != old_id || bool(s & tag_valid) != had_tag) {
    unlock_header(victim, s);
    unlock_both();
    return false;
  }
  begin_change(d.version); // an optimistic reader of the old page must not keep its read
  if (had_tag)
    remove_locked(victim, old_bucket);
  d.tag.store(id, std::memory_order_relaxed);
  insert_locked(victim, new_bucket);
  std::uint32_t next = (s & pin_mask) | (1u << usage_shift) | tag_valid | io_in_progress;
  unlock_header(victim, next | header_locked);
  end_change(d.version); // the new page's bytes come while it is not valid
  unlock_both();
  return true;
}

// ---- content latch -----------------------------------------------------------------------

namespace {

// Latches are held for a page copy or a commit's apply-and-log: spin this long with the
// CPU's pause hint before sleeping.
constexpr int latch_spins = 64;

bool try_exclusive(std::atomic<std::int32_t>& latch) {
  std::int32_t expected = 0;
  return latch.compare_exchange_strong(expected, -1, std::memory_order_acquire);
}

bool try_shared(std::atomic<std::int32_t>& latch) {
  std::int32_t current = latch.load(std::memory_order_relaxed);
  while (current >= 0)
    if (latch.compare_exchange_weak(current, current + 1, std::memory_order_acquire))
      return true;
  return false;
}

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

template <class Try>
void take_latch(wait_board& waits, buffer_id buffer, Try attempt) {
  for (int i = 0; i < latch_spins; ++i) {
    if (attempt())
      return;
    cpu_pause();
  }
  waits.wait(buffer, attempt);
}

} // namespace

void buffer_pool::lock_exclusive(buffer_id buffer) {
  descriptor& d = descriptors_[buffer];
  take_latch(waits_, buffer, [&] { return try_exclusive(d.latch); });
  begin_change(d.version);
}

void buffer_pool::unlock_exclusive(buffer_id buffer) {
  descriptor& d = descriptors_[buffer];
  end_change(d.version);
  d.latch.store(0, std::memory_order_release);
  waits_.wake(buffer);
}

bool buffer_pool::try_lock_exclusive(buffer_id buffer) {
  descriptor& d = descriptors_[buffer];
  if (!try_exclusive(d.latch))
    return false;
  begin_change(d.version);
  return true;
}

void buffer_pool::lock_shared(buffer_id buffer) {
  std::atomic<std::int32_t>& latch = descriptors_[buffer].latch;
  take_latch(waits_, buffer, [&] { return try_shared(latch); });
}

bool buffer_pool::try_lock_shared(buffer_id buffer) {
  return try_shared(descriptors_[buffer].latch);
}

void buffer_pool::unlock_shared(buffer_id buffer) {
  if (descriptors_[buffer].latch.fetch_sub(1, std::memory_order_release) == 1)
    waits_.wake(buffer); // the last reader: a writer may wait
}

void buffer_pool::mark_dirty(buffer_id buffer) {
  update_state(buffer, [](std::uint32_t old) { return old | dirty | just_dirtied; });
}

// ---- writes ------------------------------------------------------------------------------

bool buffer_pool::start_write(buffer_id buffer, void* copy, page_id* id, lsn_t* lsn,
                              bool only_reusable, bool never_wait) {
  std::atomic<std::uint32_t>& state = descriptors_[buffer].state;
  std::uint32_t s = state.load(std::memory_order_acquire);
  for (;;) {
    if ((s & header_locked) || !(s & valid) || !(s & dirty) || (s & io_in_progress))
      return false;
    if (only_reusable && (pins(s) > 0 || usage(s) > 0))
      return false;
    if (state.compare_exchange_weak(s, (s | io_in_progress) & ~just_dirtied,
                                    std::memory_order_acq_rel))
      break;
  }
  // Dirty + I/O in progress: the buffer cannot be retagged until finish_write.
  *id = descriptors_[buffer].tag.load(std::memory_order_relaxed);
  if (never_wait) {
    if (!try_lock_shared(buffer)) {
      finish_write(buffer, false); // not written: still dirty
      return false;
    }
  } else {
    lock_shared(buffer);
  }
  std::memcpy(copy, page(buffer), page_size_);
  unlock_shared(buffer);
  *lsn = page_lsn(copy);
  return true;
}

void buffer_pool::finish_write(buffer_id buffer, bool succeeded, bool offer) {
  std::uint32_t s = lock_header(buffer);
  std::uint32_t next = s & ~io_in_progress;
  if (succeeded && !(s & just_dirtied))
    next &= ~dirty;
  unlock_header(buffer, next);
  waits_.wake(buffer);
  if (offer && succeeded)
    offer_victim(buffer);
}

} // namespace tidemark::storage
