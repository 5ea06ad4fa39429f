// The doublewrite ring: see doublewrite_ring.hpp for the layout, states and invariants.
#include "storage/doublewrite_ring.hpp"
#include "storage/check.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace tidemark::storage {

const char* to_string(dw_state state) {
  switch (state) {
    case dw_state::free:
      return "FREE";
    case dw_state::allocated:
      return "ALLOCATED";
    case dw_state::written:
      return "WRITTEN";
    case dw_state::dwb_fsynced:
      return "DWB_FSYNCED";
    case dw_state::data_written:
      return "DATA_WRITTEN";
    case dw_state::data_fsynced:
      return "DATA_FSYNCED";
  }
  return "?";
}

std::uint32_t default_staging_chunks(std::uint32_t bgwriter_round_pages,
                                     std::uint32_t batch_pages) {
  std::uint32_t round = (bgwriter_round_pages + batch_pages - 1) / batch_pages;
  constexpr std::uint32_t other_writers = 2; // checkpointer, sessions' shared batch
  constexpr std::uint32_t in_flight = 2;     // per writer: one being filled, one being written
  constexpr std::uint32_t batcher = 10;      // further batches queued at the batcher
  return 2 * round + other_writers * in_flight + batcher;
}

std::uint32_t default_ring_pages(std::size_t page_size) {
  return static_cast<std::uint32_t>((std::uint64_t{512} << 20) / page_size);
}

namespace {

// How far ahead of a record the file is written with zeros, and in what steps: small
// enough that a step's zeros add little to the fdatasync that makes them durable, large
// enough that few fdatasyncs commit a new file length (about ten a second at pgbench's
// eviction rate).
constexpr std::uint64_t zero_fill_step = std::uint64_t{1} << 20;

unsigned char* aligned_buffer(std::size_t bytes) {
  void* memory = nullptr;
  if (posix_memalign(&memory, 4096, bytes) != 0)
    throw std::bad_alloc();
  return static_cast<unsigned char*>(memory);
}

} // namespace

doublewrite_ring::doublewrite_ring(io_engine& io, std::string dir, std::size_t page_size,
                                   std::uint32_t ring_pages, std::uint32_t batch_pages,
                                   std::uint32_t staging_chunks)
  : io_(io), path_(dir + "/ring"), page_size_(page_size), ring_pages_(ring_pages),
    batch_pages_(batch_pages), capacity_(std::uint64_t(ring_pages) * page_size),
    end_(ring_records_start + capacity_) {
  if (batch_pages == 0 || staging_chunks == 0 ||
      capacity_ < max_record_bytes(batch_pages, page_size))
    throw std::invalid_argument("doublewrite ring must hold a whole batch of incompressible pages");
  ::mkdir(dir.c_str(), 0700);
  header_ = aligned_buffer(ring_records_start);
  record_ = aligned_buffer(max_record_bytes(batch_pages, page_size));
  try {
    open_ring(dir);
  } catch (...) {
    std::free(record_);
    std::free(header_);
    if (fd_ >= 0)
      io_.close_file(fd_);
    throw;
  }
  // Every record takes at least ring_record_alignment bytes: with a chunk for each record
  // the ring can hold, only ring space, never the chunks, limits how many batches wait
  // for their data-file fsync (the batcher hurries it by ring space).
  chunks_.resize(capacity_ / ring_record_alignment + staging_chunks);
  for (std::uint32_t c = static_cast<std::uint32_t>(chunks_.size()); c-- > 0;)
    free_list_.push_back(c); // chunk 0 is taken first
  staging_.resize(staging_chunks);
  for (std::uint32_t i = 0; i < staging_chunks; ++i) {
    staging_[i].memory = aligned_buffer(std::size_t(batch_pages) * page_size);
    staging_[i].entries.reserve(batch_pages);
    free_staging_.push_back(i);
  }
}

void doublewrite_ring::open_ring(const std::string& dir) {
  struct stat st;
  bool exists = ::stat(path_.c_str(), &st) == 0;
  fd_ = io_.open_file(path_, true);
  ring_header newest;
  bool intact = false;
  if (exists && static_cast<std::uint64_t>(st.st_size) <= end_) {
    io_.read(fd_, header_, ring_records_start, 0); // zeros past the end of a short file
    intact = newest_ring_header(header_, &newest, &header_slot_);
  }
  // The file grows as the first pass over the ring writes it, a step of zeros ahead of the
  // records (a short run, or a test, never makes it large). One larger than the ring (its
  // size was lowered), or without an intact header (new, or written before the header
  // slots), starts over empty: every record in it is dead (startup repaired from it before
  // opening the ring), and so none can be mistaken for one of this run's.
  if (!intact) {
    io_.truncate(fd_, 0);
    io_.sync(fd_, sync_kind::full);
    io_.sync_directory(dir);
  } else {
    // Past every record on disk: those written after the newest header take at most one
    // ring_record_alignment each of the span they may not cross (less than the file).
    sequence_ = newest.next_sequence + end_ / ring_record_alignment + 1;
    header_sequence_ = newest.header_sequence;
  }
  // This run's first sequence, durable before its first record: a run that crashes
  // before its next header leaves no record a later run's sequences can meet. Nothing
  // earlier is live, so the span to keep starts empty, at the start of the record area.
  durable_sequence_ = sequence_;
  write_header(next_record_at_, sequence_);
  io_.sync(fd_, sync_kind::data);
  // Zeros go only past the header slots, whichever of them the file holds yet.
  file_bytes_ = std::max<std::uint64_t>(io_.file_size(fd_), ring_records_start);
  if (file_bytes_ < end_) { // the first pass over the ring is not over: zeros to write
    zeros_ = aligned_buffer(zero_fill_step);
    std::memset(zeros_, 0, zero_fill_step);
  }
}

// Writes zeros from the file's end to `end` rounded up to a step (at most the ring's end),
// before a record is written there: the fdatasync that makes the record durable also makes
// the new length durable, once per step instead of once per record. Only the batcher
// calls it; nothing live lies past the file's end.
void doublewrite_ring::write_zeros_to(std::uint64_t end) {
  std::uint64_t target =
    std::min(end_, (end + zero_fill_step - 1) / zero_fill_step * zero_fill_step);
  if (target <= file_bytes_)
    return; // the file already reaches it, or the ring's end: every later call returns here
  TIDEMARK_CHECK(zeros_ != nullptr, "doublewrite ring: zeros are kept until the file is whole");
  while (file_bytes_ < target) {
    std::uint64_t bytes = std::min(zero_fill_step, target - file_bytes_);
    io_.write(fd_, zeros_, bytes, file_bytes_);
    file_bytes_ += bytes;
  }
  if (file_bytes_ == end_) {
    std::free(zeros_); // the whole ring is written: never needed again
    zeros_ = nullptr;
  }
}

doublewrite_ring::~doublewrite_ring() {
  for (staging_area& area : staging_)
    std::free(area.memory);
  std::free(zeros_);
  std::free(record_);
  std::free(header_);
  if (fd_ >= 0)
    io_.close_file(fd_);
}

// Writes the next header to the slot not holding the newest one (its fdatasync is the
// caller's). Only the batcher (or the constructor) calls it.
void doublewrite_ring::write_header(std::uint64_t horizon_at, std::uint64_t horizon_sequence) {
  ring_header h;
  h.header_sequence = ++header_sequence_;
  h.horizon_at = horizon_at;
  h.horizon_sequence = horizon_sequence;
  h.next_sequence = sequence_;
  encode_ring_header(h, header_);
  header_slot_ = 1 - header_slot_;
  io_.write(fd_, header_, ring_record_alignment,
            std::uint64_t{header_slot_} * ring_record_alignment);
}

void doublewrite_ring::move(std::uint32_t c, dw_state from, dw_state to) {
  TIDEMARK_CHECK_DETAIL(chunks_[c].state == from,
                        "a doublewrite chunk moves along its cycle (D1-D3)",
                        "chunk " + std::to_string(c) + " is " + to_string(chunks_[c].state) +
                          ", expected " + to_string(from) + " before " + to_string(to));
  chunks_[c].state = to;
}

// Takes a FREE chunk and staging memory for it if there are both. mutex_ held.
bool doublewrite_ring::take_free_locked(std::uint32_t* chunk) {
  if (failed_)
    throw io_error("the doublewrite ring is unusable after a failure", EIO);
  if (free_staging_.empty() || free_list_.empty())
    return false;
  std::uint32_t c = free_list_.back();
  free_list_.pop_back();
  move(c, dw_state::free, dw_state::allocated);
  chunks_[c].staging = free_staging_.back();
  free_staging_.pop_back();
  staging_[chunks_[c].staging].entries.clear();
  ++chunks_[c].allocations;
  *chunk = c;
  return true;
}

void doublewrite_ring::return_staging_locked(chunk& c) {
  free_staging_.push_back(c.staging);
  c.staging = no_staging;
}

std::vector<dw_entry>& doublewrite_ring::entries(std::uint32_t c) {
  TIDEMARK_CHECK_DETAIL(chunks_[c].staging != no_staging,
                        "staged pages live from acquire() until the ring write",
                        "chunk " + std::to_string(c) + " holds no staging memory");
  return staging_[chunks_[c].staging].entries;
}

std::uint32_t doublewrite_ring::acquire(const std::function<void()>& on_wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool waited = false;
  for (;;) {
    std::uint32_t chunk;
    if (take_free_locked(&chunk))
      return chunk;
    if (!waited) {
      waited = true;
      counters_.slot_waits.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      if (on_wait)
        on_wait();
      lock.lock();
      continue;
    }
    freed_.wait(lock);
  }
}

bool doublewrite_ring::try_acquire(std::uint32_t* chunk) {
  std::lock_guard<std::mutex> guard(mutex_);
  return take_free_locked(chunk);
}

unsigned char* doublewrite_ring::slot_memory(std::uint32_t chunk, std::uint32_t index) {
  return staging_[chunks_[chunk].staging].memory + std::size_t(index) * page_size_;
}

void doublewrite_ring::give_back(std::uint32_t c) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    TIDEMARK_CHECK_DETAIL(entries(c).empty(), "a chunk is given back only without pages",
                          "chunk " + std::to_string(c));
    move(c, dw_state::allocated, dw_state::free);
    return_staging_locked(chunks_[c]);
    free_list_.push_back(c);
  }
  freed_.notify_one();
}

// Whether [at, at + bytes) meets the span from the durable horizon to the write position:
// [span_at_, next_record_at_), or, once the records wrapped to the start of the record area,
// [span_at_, end_) and [ring_records_start, next_record_at_). mutex_ held.
bool doublewrite_ring::in_span_locked(std::uint64_t at, std::uint64_t bytes) const {
  if (sequence_ == durable_sequence_)
    return false; // no record placed since the durable horizon: nothing to keep
  auto meets = [&](std::uint64_t from, std::uint64_t to) { return at < to && from < at + bytes; };
  if (next_record_at_ > span_at_)
    return meets(span_at_, next_record_at_);
  return meets(span_at_, end_) || meets(ring_records_start, next_record_at_);
}

// Where a record of `bytes` can go: at the write position, or at the start of the record
// area when it does not fit before the end; never inside the span from the durable
// horizon to the write position, which holds every record not FREE yet. mutex_ held.
bool doublewrite_ring::place_record_locked(std::uint64_t bytes, std::uint64_t* at) const {
  TIDEMARK_CHECK_DETAIL(live_.empty() || live_.begin()->first >= durable_sequence_,
                        "no live doublewrite record lies behind the durable horizon",
                        "record " + std::to_string(live_.begin()->first) + ", horizon " +
                          std::to_string(durable_sequence_));
  std::uint64_t candidate = next_record_at_ + bytes <= end_ ? next_record_at_ : ring_records_start;
  if (in_span_locked(candidate, bytes))
    return false;
  *at = candidate;
  return true;
}

// The horizon: the oldest record of a chunk between WRITTEN and FREE, or the write
// position and the next sequence when there is none. mutex_ held.
void doublewrite_ring::horizon_locked(std::uint64_t* at, std::uint64_t* sequence) const {
  if (live_.empty()) {
    *at = next_record_at_;
    *sequence = sequence_;
  } else {
    *at = chunks_[live_.begin()->second].record_at;
    *sequence = live_.begin()->first;
  }
}

bool doublewrite_ring::write(std::uint32_t c) {
  chunk& ch = chunks_[c];
  std::uint64_t allocation;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (ch.state != dw_state::allocated)
      move(c, dw_state::allocated, dw_state::written); // throws: only ALLOCATED is written
    allocation = ch.allocations;
  }
  // A batch retried for ring space is encoded once (the same chunk, not taken anew since,
  // and no other record placed meanwhile: its sequence is still the next one).
  if (encoded_chunk_ != c || encoded_allocation_ != allocation || encoded_sequence_ != sequence_) {
    images_.clear();
    const staging_area& area = staging_[ch.staging];
    for (std::size_t i = 0; i < area.entries.size(); ++i)
      images_.push_back(area.memory + i * page_size_);
    encoded_bytes_ = encode_batch(images_.data(), static_cast<std::uint32_t>(images_.size()),
                                  page_size_, sequence_, record_);
    encoded_chunk_ = c;
    encoded_allocation_ = allocation;
    encoded_sequence_ = sequence_;
  }
  std::uint64_t at;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!place_record_locked(encoded_bytes_, &at)) {
      counters_.ring_full.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    move(c, dw_state::allocated, dw_state::written);
    ch.record_at = at;
    ch.record_sequence = sequence_;
    live_.emplace(sequence_, c);
    if (sequence_ == durable_sequence_)
      span_at_ = at; // the first record at the durable horizon: the span starts here
    next_record_at_ = at + encoded_bytes_;
    ++sequence_;
  }
  write_zeros_to(at + encoded_bytes_ + zero_fill_step);
  io_.write(fd_, record_, encoded_bytes_, at);
  counters_.batches.fetch_add(1, std::memory_order_relaxed);
  counters_.pages.fetch_add(entries(c).size(), std::memory_order_relaxed);
  counters_.bytes.fetch_add(encoded_bytes_, std::memory_order_relaxed);
  return true;
}

bool doublewrite_ring::sync(const std::uint32_t* chunks, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    TIDEMARK_CHECK_DETAIL(state(chunks[i]) == dw_state::written,
                          "a doublewrite chunk is synced only once WRITTEN",
                          "chunk " + std::to_string(chunks[i]) + " is " +
                            to_string(state(chunks[i])));
  std::uint64_t horizon_at, horizon_sequence;
  bool moved;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    horizon_locked(&horizon_at, &horizon_sequence);
    moved = horizon_sequence != durable_sequence_;
  }
  if (!moved && count == 0)
    return false;
  auto started = std::chrono::steady_clock::now();
  if (moved)
    write_header(horizon_at, horizon_sequence); // made durable by the same fdatasync
  io_.sync(fd_, sync_kind::data);
  counters_.fsyncs.fetch_add(1, std::memory_order_relaxed);
  if (count == 0)
    counters_.horizon_fsyncs.fetch_add(1, std::memory_order_relaxed);
  counters_.fsync_latency.record_since(started);
  std::lock_guard<std::mutex> guard(mutex_);
  for (std::size_t i = 0; i < count; ++i)
    move(chunks[i], dw_state::written, dw_state::dwb_fsynced);
  if (moved) {
    durable_sequence_ = horizon_sequence;
    if (horizon_sequence != sequence_)
      span_at_ = horizon_at; // a record's: the span starts there
  }
  return true;
}

void doublewrite_ring::advance(std::uint32_t c, dw_state to) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    move(c, to == dw_state::data_written ? dw_state::dwb_fsynced : dw_state::data_written, to);
    if (to != dw_state::data_written)
      return;
    return_staging_locked(chunks_[c]); // written in place: the images live on in the ring
  }
  freed_.notify_one();
}

void doublewrite_ring::release(std::uint32_t c) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    move(c, dw_state::data_fsynced, dw_state::free);
    live_.erase(chunks_[c].record_sequence);
    free_list_.push_back(c);
  }
  freed_.notify_one();
}

void doublewrite_ring::fail() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    failed_ = true;
  }
  freed_.notify_all();
}

dw_state doublewrite_ring::state(std::uint32_t c) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return chunks_[c].state;
}

std::uint32_t doublewrite_ring::free_chunks() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return static_cast<std::uint32_t>(free_list_.size());
}

std::uint64_t doublewrite_ring::used_bytes() const {
  std::lock_guard<std::mutex> guard(mutex_);
  if (sequence_ == durable_sequence_)
    return 0;
  if (next_record_at_ > span_at_)
    return next_record_at_ - span_at_;
  return (end_ - span_at_) + (next_record_at_ - ring_records_start);
}

} // namespace tidemark::storage
