// wal_log: the insert ring, write-out to segment files, fdatasync, and segment lifecycle
// (creation, recycling, removal). See wal_log.hpp for the contract.
//
// Invariants (in addition to the header's):
//  - Lock order: insert_mutex_ before flush_mutex_ before create_mutex_. flush() takes
//    only flush_mutex_, so an insert that waits for ring space can write out safely.
//    remove_segments_before() holds flush_mutex_ only to close fds; it recycles segments
//    and fsyncs the directory under create_mutex_ alone.
//    fdatasync runs outside every lock (so syncs overlap); flush_mutex_ is held only to
//    write out, to pick the fds to sync, and to publish flushed_lsn.
//  - Ring space: inserted_lsn - written_lsn <= buffer_size. An inserter copies only into
//    [inserted_lsn, ...), the writer reads only [written_lsn, inserted_lsn): they never
//    touch the same ring bytes. inserted_lsn is published (release) after the copy.
//  - Every LSN is 8-aligned: insert positions start aligned and records are padded with
//    zero bytes to record_alignment.
//  - A segment file exists full-size, zero-filled (or recycled), and its directory entry is
//    durable before any record is written into it.
//  - A cached segment fd stays open until WAL past the segment's end is durable, so a sync
//    error on it is seen by the fd that wrote the data (W3).
//  - After a failed sync (failure_), insert() and flush() throw: the log is unusable (W3).
#include "storage/wal_log.hpp"
#include "storage/check.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace tidemark::storage {

namespace {

constexpr std::size_t zero_piece_size = 256u << 10;
constexpr std::size_t future_segments_min = 4; // recycled whatever recycle_through says
constexpr unsigned char zero_padding[record_alignment] = {};

const std::vector<unsigned char>& zero_piece() {
  static const std::vector<unsigned char> zeros(zero_piece_size);
  return zeros;
}

bool parse_segment_name(const std::string& name, lsn_t& start) {
  if (name.size() != 16)
    return false;
  lsn_t value = 0;
  for (char c : name) {
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0)
      return false;
    value = value << 4 | static_cast<lsn_t>(digit);
  }
  start = value;
  return true;
}

} // namespace

// Runs write-side work; a failed sync makes the log unusable (W3).
template <class Work>
void wal_log::guard_sync_failure(Work&& work) {
  try {
    work();
  } catch (const io_error& e) {
    if (e.fsync_failed())
      failure_.record(e.what());
    throw;
  }
}

// ---- construction -------------------------------------------------------------------------

wal_log::wal_log(io_engine& io, wal_options options, lsn_t insert_lsn, lsn_t prev_lsn)
  : io_(io), options_(std::move(options)), prev_lsn_(prev_lsn) {
  if (options_.segment_size == 0 || options_.segment_size % (64u << 10) != 0)
    throw std::invalid_argument("wal_log: segment_size must be a positive multiple of 64 KiB");
  if (options_.buffer_size < 64u << 10 || options_.buffer_size % record_alignment != 0)
    throw std::invalid_argument("wal_log: buffer_size must be >= 64 KiB and a multiple of 8");
  if (insert_lsn % record_alignment != 0)
    throw std::invalid_argument("wal_log: insert_lsn must be 8-byte aligned");
  buffer_ = std::make_unique<zeroed_memory>(options_.buffer_size);
  inserted_lsn_.store(insert_lsn);
  written_lsn_.store(insert_lsn);
  flushed_lsn_.store(insert_lsn);
  std::lock_guard lock(flush_mutex_);
  try {
    open_for_append(insert_lsn);
  } catch (...) {
    for (const open_segment& segment : segments_)
      io_.close_file(segment.fd);
    throw;
  }
}

wal_log::~wal_log() {
  for (const open_segment& segment : segments_)
    io_.close_file(segment.fd);
}

// Zeroes the insert segment from insert_lsn on and removes every later segment, so that no
// stale record can follow the records appended from here.
void wal_log::open_for_append(lsn_t insert_lsn) {
  lsn_t start = segment_start(insert_lsn);
  bool existed = std::filesystem::exists(segment_path(start));
  int fd = segment_fd(start); // creates it zero-filled when missing
  if (existed) {
    std::uint64_t offset = insert_lsn - start;
    write_zeros(fd, offset, options_.segment_size - offset);
    io_.sync(fd, sync_kind::full);
  }
  bool removed = false;
  for (lsn_t later : list_segments(options_.dir)) {
    if (later > start) {
      io_.unlink(segment_path(later));
      removed = true;
    }
  }
  if (removed)
    io_.sync_directory(options_.dir);
}

// ---- insert side --------------------------------------------------------------------------

std::optional<lsn_range> wal_log::insert(record_builder& record, lsn_t expected_redo_lsn,
                                         commit_hold* hold) {
  TIDEMARK_CHECK(hold == nullptr || !hold->held(), "a commit inserts one record with its hold");
  std::size_t length = record.size();
  std::size_t aligned = aligned_record_size(length);
  if (aligned > buffer_->size() || length > max_wal_record_bytes)
    throw std::length_error(
      "a WAL record of " + std::to_string(length) + " bytes is longer than " +
      (length > max_wal_record_bytes
         ? "any record may be (" + std::to_string(max_wal_record_bytes) + ")"
         : "the WAL insert buffer (wal_buffers, " + std::to_string(buffer_->size()) + " bytes)"));
  std::unique_lock lock(insert_mutex_);
  check_usable();
  if (redo_lsn_.load(std::memory_order_relaxed) != expected_redo_lsn)
    return std::nullopt;
  lsn_t lsn = inserted_lsn_.load(std::memory_order_relaxed);
  if (lsn + aligned - written_lsn_.load(std::memory_order_acquire) > buffer_->size())
    make_room_locked();
  auto* bytes = reinterpret_cast<unsigned char*>(&record.header());
  seal_record(bytes, lsn, prev_lsn_, flushed_lsn_.load(std::memory_order_acquire),
              record.payload_crc());
  copy_to_ring(lsn, bytes, length);
  copy_to_ring(lsn + length, zero_padding, aligned - length);
  prev_lsn_ = lsn;
  inserted_lsn_.store(lsn + aligned, std::memory_order_release);
  if (hold != nullptr) { // rule 4: a redo point taken after this waits for its release
    hold->slot_ = static_cast<unsigned>(hold_generation_ % 2);
    holds_pending_[hold->slot_].fetch_add(1, std::memory_order_relaxed);
    hold->log_ = this;
  }
  lock.unlock();
  counters_.bytes.fetch_add(aligned, std::memory_order_relaxed);
  counters_.records.fetch_add(1, std::memory_order_relaxed);
  counters_.fpi.fetch_add(record.image_count(), std::memory_order_relaxed);
  return lsn_range{lsn, lsn + length};
}

void wal_log::append_received(lsn_t lsn, const void* data, std::size_t length) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::lock_guard lock(insert_mutex_);
  check_usable();
  TIDEMARK_CHECK_DETAIL(lsn == inserted_lsn_.load(std::memory_order_relaxed),
                        "received WAL continues the log (the receiver checks the primary's start)",
                        "received at " + std::to_string(lsn) + ", the log ends at " +
                          std::to_string(inserted_lsn_.load()));
  while (length > 0) {
    std::size_t piece = std::min(length, buffer_->size() / 2);
    lsn_t at = inserted_lsn_.load(std::memory_order_relaxed);
    if (at + piece - written_lsn_.load(std::memory_order_acquire) > buffer_->size())
      make_room_locked();
    copy_to_ring(at, bytes, piece);
    inserted_lsn_.store(at + piece, std::memory_order_release);
    counters_.bytes.fetch_add(piece, std::memory_order_relaxed);
    bytes += piece;
    length -= piece;
  }
}

void wal_log::restart_at(lsn_t end, lsn_t prev) {
  std::lock_guard insert_lock(insert_mutex_);
  std::lock_guard flush_lock(flush_mutex_);
  check_usable();
  TIDEMARK_CHECK(syncs_in_flight_.empty(), "wal_log::restart_at while no sync is running");
  TIDEMARK_CHECK(end <= flushed_lsn_.load(), "wal_log::restart_at within the flushed WAL");
  TIDEMARK_CHECK(end % record_alignment == 0,
                 "wal_log::restart_at: the end of a record is 8-byte aligned");
  for (const open_segment& segment : segments_) // later ones are about to be removed
    io_.close_file(segment.fd);
  segments_.clear();
  open_for_append(end);
  prev_lsn_ = prev;
  inserted_lsn_.store(end);
  written_lsn_.store(end);
  flushed_lsn_.store(end);
}

// The ring is full: write out everything inserted (no sync needed to reuse ring space).
void wal_log::make_room_locked() {
  std::lock_guard lock(flush_mutex_);
  guard_sync_failure([&] { write_out_locked(inserted_lsn_.load()); });
}

void wal_log::copy_to_ring(lsn_t lsn, const void* data, std::size_t length) {
  std::size_t at = lsn % buffer_->size();
  std::size_t first = std::min(length, buffer_->size() - at);
  std::memcpy(buffer_->data() + at, data, first);
  std::memcpy(buffer_->data(), static_cast<const unsigned char*>(data) + first, length - first);
}

void wal_log::fault_in_ahead(std::size_t bytes) {
  lsn_t inserted = inserted_lsn_.load(std::memory_order_acquire);
  if (!faulted_in_.started)
    faulted_in_ = {inserted, inserted, true};
  std::size_t ring = buffer_->size();
  lsn_t start = std::max(faulted_in_.end, inserted); // the inserts touched what lies below
  lsn_t target = std::min<lsn_t>(inserted + bytes, faulted_in_.from + ring);
  if (start >= target) // nothing new ahead, or the first pass has come round
    return;
  std::size_t at = start % ring, length = target - start;
  std::size_t first = std::min(length, ring - at);
  bool faulted = buffer_->fault_in(at, first) && buffer_->fault_in(0, length - first);
  faulted_in_.end = faulted ? target : faulted_in_.from + ring; // refused: stop asking
}

lsn_t wal_log::begin_redo_point() {
  std::lock_guard one_at_a_time(redo_point_mutex_);
  lsn_t redo;
  unsigned earlier;
  {
    std::lock_guard lock(insert_mutex_);
    redo = inserted_lsn_.load(std::memory_order_relaxed);
    redo_lsn_.store(redo, std::memory_order_release);
    earlier = static_cast<unsigned>(hold_generation_ % 2);
    ++hold_generation_; // holds taken from now on count in the other slot
  }
  // Every record before `redo` was inserted in the generation that just ended (the
  // previous call drained the one before it): wait for those commits' holds.
  if (holds_pending_[earlier].load(std::memory_order_acquire) != 0) {
    counters_.redo_point_waits.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock lock(holds_mutex_);
    holds_released_.wait(lock, [&] {
      return holds_pending_[earlier].load(std::memory_order_acquire) == 0;
    });
  }
  return redo;
}

void wal_log::release_hold(unsigned slot) noexcept {
  if (holds_pending_[slot].fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard lock(holds_mutex_);
    holds_released_.notify_all();
  }
}

void wal_log::commit_hold::release() noexcept {
  if (log_ != nullptr)
    std::exchange(log_, nullptr)->release_hold(slot_);
}

void wal_log::set_redo_lsn(lsn_t lsn) {
  std::lock_guard lock(insert_mutex_);
  redo_lsn_.store(lsn, std::memory_order_release);
}

// ---- write side ---------------------------------------------------------------------------

lsn_t wal_log::flush(lsn_t upto) {
  check_usable();
  lsn_t flushed = flushed_lsn_.load(std::memory_order_acquire);
  if (flushed >= upto)
    return flushed;
  return sync_through(write_out());
}

lsn_t wal_log::write_out() {
  std::lock_guard lock(flush_mutex_);
  check_usable();
  lsn_t target = inserted_lsn_.load(std::memory_order_acquire);
  guard_sync_failure([&] { write_out_locked(target); });
  return written_lsn_.load(std::memory_order_relaxed);
}

lsn_t wal_log::sync_through(lsn_t target) {
  std::vector<int> fds;
  std::uint64_t ticket = 0;
  {
    std::lock_guard lock(flush_mutex_);
    check_usable();
    lsn_t flushed = flushed_lsn_.load(std::memory_order_relaxed);
    if (flushed >= target)
      return flushed;
    for (lsn_t start = segment_start(flushed); start < target; start += options_.segment_size)
      fds.push_back(segment_fd(start));
    ticket = next_sync_ticket_++;
    syncs_in_flight_.push_back(ticket);
  }
  try {
    guard_sync_failure([&] {
      for (int fd : fds) {
        auto started = std::chrono::steady_clock::now();
        io_.sync(fd, sync_kind::data);
        std::uint64_t took = counters_.fsync_latency.record_since(started);
        counters_.fsyncs.fetch_add(1, std::memory_order_relaxed);
        counters_.fsync_micros.fetch_add(took, std::memory_order_relaxed);
      }
    });
  } catch (...) {
    {
      std::lock_guard lock(flush_mutex_);
      finish_sync_locked(ticket);
    }
    wake_waiters(true); // the failure is latched: waiters must not sleep on
    throw;
  }
  lsn_t flushed;
  {
    std::unique_lock lock(flush_mutex_);
    sync_settled_.wait(lock, [&] {
      return failure_.failed() || syncs_in_flight_.front() == ticket; // tickets are in start order
    });
    finish_sync_locked(ticket);
    check_usable(); // an earlier sync failed: this one's success proves nothing (W3)
    flushed = flushed_lsn_.load(std::memory_order_relaxed);
    if (target > flushed)
      flushed_lsn_.store(target, std::memory_order_release);
  }
  wake_waiters(false);
  if (flush_listener* listener = listener_.load(std::memory_order_acquire))
    listener->flushed(std::max(target, flushed));
  return std::max(target, flushed);
}

// Wakes the waiters the flushed LSN satisfies (all of them after a failure or a stop).
void wal_log::wake_waiters(bool everyone) {
  std::lock_guard lock(waiters_mutex_);
  lsn_t flushed = flushed_lsn_.load(std::memory_order_acquire);
  for (flush_waiter* waiter : flush_waiters_)
    if (everyone || waiter->lsn <= flushed)
      waiter->wake.notify_one();
}

void wal_log::wait_for_flush(lsn_t lsn) {
  if (flushed_lsn_.load(std::memory_order_acquire) >= lsn)
    return;
  flush_waiter self{lsn, {}};
  std::unique_lock lock(waiters_mutex_);
  flush_waiters_.push_back(&self);
  self.wake.wait(lock, [&] {
    return flushed_lsn_.load(std::memory_order_acquire) >= lsn || failure_.failed() ||
           !stopped_because_.empty();
  });
  flush_waiters_.erase(std::find(flush_waiters_.begin(), flush_waiters_.end(), &self));
  if (flushed_lsn_.load(std::memory_order_acquire) >= lsn)
    return;
  throw wal_not_durable(!stopped_because_.empty() ? stopped_because_
                                                  : "WAL sync failed: " + failure_.first_failure());
}

void wal_log::stop_waiters(const std::string& why) {
  {
    std::lock_guard lock(waiters_mutex_);
    if (stopped_because_.empty())
      stopped_because_ = why.empty() ? "the WAL was stopped" : why;
  }
  wake_waiters(true);
}

// Writes [written_lsn, upto) with one write per contiguous piece (split at the ring's wrap
// and at segment boundaries), all in one batch.
void wal_log::write_out_locked(lsn_t upto) {
  lsn_t from = written_lsn_.load(std::memory_order_relaxed);
  if (from >= upto)
    return;
  pieces_.clear();
  while (from < upto) {
    lsn_t start = segment_start(from);
    std::size_t ring_at = from % buffer_->size();
    lsn_t end = std::min({upto, start + options_.segment_size, from + (buffer_->size() - ring_at)});
    pieces_.push_back({segment_fd(start), buffer_->data() + ring_at, end - from, from - start});
    from = end;
  }
  io_.write_batch(pieces_.data(), pieces_.size());
  counters_.writes.fetch_add(pieces_.size(), std::memory_order_relaxed);
  written_lsn_.store(upto, std::memory_order_release);
}

void wal_log::finish_sync_locked(std::uint64_t ticket) {
  syncs_in_flight_.erase(std::find(syncs_in_flight_.begin(), syncs_in_flight_.end(), ticket));
  sync_settled_.notify_all();
}

int wal_log::segment_fd(lsn_t start) {
  for (const open_segment& segment : segments_)
    if (segment.start == start)
      return segment.fd;
  // Segments wholly below the flushed LSN are never written or synced again (but a sync
  // still running may hold their fds).
  lsn_t flushed = flushed_lsn_.load(std::memory_order_relaxed);
  for (std::size_t i = segments_.size(); syncs_in_flight_.empty() && i-- > 0;)
    if (segments_[i].start + options_.segment_size <= flushed)
      close_segment(segments_[i].start);
  std::string path = segment_path(start);
  {
    std::lock_guard creating(create_mutex_); // a background preparation may be finishing it
    if (!std::filesystem::exists(path))
      create_segment_file(start);
  }
  segments_.push_back({start, io_.open_file(path, false)});
  return segments_.back().fd;
}

// Writes the segment under a temporary name, zero-filled and durable, then renames it into
// place: a segment name never refers to a partly created file. create_mutex_ held.
void wal_log::create_segment_file(lsn_t start) {
  std::string temporary = segment_path(start) + ".new";
  int fd = io_.open_file(temporary, true);
  try {
    write_zeros(fd, 0, options_.segment_size);
    io_.sync(fd, sync_kind::full);
  } catch (...) {
    io_.close_file(fd);
    throw;
  }
  io_.close_file(fd);
  io_.rename(temporary, segment_path(start));
  io_.sync_directory(options_.dir);
}

void wal_log::prepare_segments_ahead(std::size_t count) {
  check_usable();
  lsn_t current = segment_start(inserted_lsn_.load(std::memory_order_acquire));
  for (std::size_t i = 1; i <= count; ++i) {
    lsn_t start = current + i * options_.segment_size;
    std::lock_guard creating(create_mutex_);
    if (!std::filesystem::exists(segment_path(start)))
      create_segment_file(start);
  }
}

// Zero-fills in pieces, each written back to the device before the next, so that a new
// segment never puts megabytes in front of a commit's fdatasync (measured: 16 MB of zeros
// at once stalled commits for up to 25 ms).
void wal_log::write_zeros(int fd, std::uint64_t offset, std::uint64_t length) {
  while (length > 0) {
    std::size_t piece = static_cast<std::size_t>(std::min<std::uint64_t>(length, zero_piece_size));
    io_.write(fd, zero_piece().data(), piece, offset);
    io_.write_back(fd, offset, piece, true);
    offset += piece;
    length -= piece;
  }
}

void wal_log::close_segment(lsn_t start) {
  auto it = std::find_if(segments_.begin(), segments_.end(),
                         [&](const open_segment& s) { return s.start == start; });
  if (it == segments_.end())
    return;
  io_.close_file(it->fd);
  segments_.erase(it);
}

// ---- segment removal and recycling (C2) ---------------------------------------------------

void wal_log::remove_segments_before(lsn_t lsn, lsn_t recycle_through) {
  lsn_t limit;
  {
    // Only to read a consistent flushed LSN and close the fds: the renames, unlinks and the
    // directory fsync below run without flush_mutex_, so commits keep flushing meanwhile.
    std::lock_guard lock(flush_mutex_);
    // Never remove WAL that is not yet durable, whatever the caller says.
    limit = segment_start(std::min(lsn, flushed_lsn_.load(std::memory_order_relaxed)));
    for (std::size_t i = segments_.size(); syncs_in_flight_.empty() && i-- > 0;)
      if (segments_[i].start + options_.segment_size <= limit)
        close_segment(segments_[i].start); // otherwise segment_fd() closes it later
  }
  // Held until the directory fsync: a writer opening a segment takes create_mutex_ first,
  // so it never writes into a recycled name before the rename is durable.
  std::lock_guard creating(create_mutex_);
  lsn_t current = segment_start(written_lsn_.load(std::memory_order_acquire));
  std::vector<lsn_t> existing = list_segments(options_.dir);
  std::size_t future_count = 0;
  lsn_t highest = current;
  for (lsn_t start : existing) {
    future_count += start > current;
    highest = std::max(highest, start);
  }
  bool changed = false;
  for (lsn_t start : existing) {
    if (start + options_.segment_size > limit)
      break;
    remove_segment(start, highest, future_count, recycle_through);
    changed = true;
  }
  if (changed)
    io_.sync_directory(options_.dir);
}

// Renames the segment to the next future segment name, or unlinks it when enough future
// segments exist. Its stale records are harmless there: each carries its own lsn. An fd
// a running sync still holds outlives the name.
void wal_log::remove_segment(lsn_t start, lsn_t& highest, std::size_t& future_count,
                             lsn_t recycle_through) {
  lsn_t next = highest + options_.segment_size;
  if (future_count < future_segments_min || next + options_.segment_size <= recycle_through) {
    highest = next;
    io_.rename(segment_path(start), segment_path(highest));
    ++future_count;
  } else {
    io_.unlink(segment_path(start));
  }
}

// ---- helpers ------------------------------------------------------------------------------

void wal_log::check_usable() const {
  if (failure_.failed())
    throw io_error("WAL in " + options_.dir + " is unusable after a failed fsync (" +
                     failure_.first_failure() + ")",
                   EIO, true);
}

std::string wal_log::segment_path(lsn_t start) const {
  return options_.dir + "/" + segment_name(start);
}

std::string wal_log::segment_name(lsn_t segment_start) {
  char name[17];
  std::snprintf(name, sizeof name, "%016" PRIX64, segment_start);
  return name;
}

std::vector<lsn_t> wal_log::list_segments(const std::string& dir) {
  std::vector<lsn_t> starts;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    lsn_t start = 0;
    if (entry.is_regular_file() && parse_segment_name(entry.path().filename().string(), start))
      starts.push_back(start);
  }
  std::sort(starts.begin(), starts.end());
  return starts;
}

} // namespace tidemark::storage
