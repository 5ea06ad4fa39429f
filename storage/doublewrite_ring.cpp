// The doublewrite ring: see doublewrite_ring.hpp for the layout, states and invariants.
#include "storage/doublewrite_ring.hpp"

#include <sys/stat.h>

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

std::uint32_t default_ring_pages(std::uint32_t batch_pages) {
  constexpr std::uint32_t writers = 3;          // bgwriter, checkpointer, sessions' shared batch
  constexpr std::uint32_t in_flight = 2;        // per writer: one being filled, one being written
  constexpr std::uint32_t awaiting_fsync = 10;  // batches retiring while a segment fsync runs
  return (writers * in_flight + awaiting_fsync) * batch_pages;
}

doublewrite_ring::doublewrite_ring(io_engine& io, std::string dir, std::size_t page_size,
                                   std::uint32_t ring_pages, std::uint32_t batch_pages)
  : io_(io), path_(dir + "/ring"), page_size_(page_size), ring_pages_(ring_pages),
    batch_pages_(batch_pages) {
  if (batch_pages == 0 || ring_pages % batch_pages != 0 || ring_pages / batch_pages < 2)
    throw std::invalid_argument("doublewrite ring must hold at least two whole batches");
  ::mkdir(dir.c_str(), 0700);
  struct stat st;
  bool fresh = ::stat(path_.c_str(), &st) != 0 ||
               static_cast<std::uint64_t>(st.st_size) != std::uint64_t(ring_pages) * page_size;
  fd_ = io_.open_file(path_, true);
  if (fresh) {
    io_.truncate(fd_, 0);
    std::vector<unsigned char> zeros(std::size_t(batch_pages) * page_size, 0);
    for (std::uint32_t c = 0; c < ring_pages / batch_pages; ++c)
      io_.write(fd_, zeros.data(), zeros.size(), std::uint64_t(c) * zeros.size());
    io_.sync(fd_, sync_kind::full);
    io_.sync_directory(dir);
  }
  chunks_.resize(ring_pages / batch_pages);
  for (chunk& c : chunks_) {
    void* memory = nullptr;
    if (posix_memalign(&memory, 4096, std::size_t(batch_pages) * page_size) != 0)
      throw std::bad_alloc();
    c.memory = static_cast<unsigned char*>(memory);
    c.entries.reserve(batch_pages);
  }
}

doublewrite_ring::~doublewrite_ring() {
  for (chunk& c : chunks_)
    std::free(c.memory);
  if (fd_ >= 0)
    io_.close_file(fd_);
}

void doublewrite_ring::move(std::uint32_t c, dw_state from, dw_state to) {
  if (chunks_[c].state != from)
    throw std::logic_error(std::string("doublewrite chunk ") + std::to_string(c) + " is " +
                           to_string(chunks_[c].state) + ", expected " + to_string(from) +
                           " before " + to_string(to));
  chunks_[c].state = to;
}

// Takes a FREE chunk if there is one. mutex_ held.
bool doublewrite_ring::take_free_locked(std::uint32_t* chunk) {
  if (failed_)
    throw io_error("the doublewrite ring is unusable after a failure", EIO);
  for (std::uint32_t c = 0; c < chunks_.size(); ++c)
    if (chunks_[c].state == dw_state::free) {
      move(c, dw_state::free, dw_state::allocated);
      chunks_[c].entries.clear();
      *chunk = c;
      return true;
    }
  return false;
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
  return chunks_[chunk].memory + std::size_t(index) * page_size_;
}

void doublewrite_ring::give_back(std::uint32_t c) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!chunks_[c].entries.empty())
      throw std::logic_error("doublewrite chunk " + std::to_string(c) + " given back with pages");
    move(c, dw_state::allocated, dw_state::free);
  }
  freed_.notify_one();
}

void doublewrite_ring::write(std::uint32_t c) {
  std::size_t count = chunks_[c].entries.size();
  {
    std::lock_guard<std::mutex> guard(mutex_);
    move(c, dw_state::allocated, dw_state::written);
  }
  io_.write(fd_, chunks_[c].memory, count * page_size_,
            std::uint64_t(c) * batch_pages_ * page_size_);
  counters_.batches.fetch_add(1, std::memory_order_relaxed);
  counters_.pages.fetch_add(count, std::memory_order_relaxed);
}

void doublewrite_ring::sync(std::uint32_t c) {
  if (state(c) != dw_state::written)
    throw std::logic_error("doublewrite chunk " + std::to_string(c) + " synced while " +
                           to_string(state(c)));
  io_.sync(fd_, sync_kind::data);
  counters_.fsyncs.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> guard(mutex_);
  move(c, dw_state::written, dw_state::dwb_fsynced);
}

void doublewrite_ring::advance(std::uint32_t c, dw_state to) {
  std::lock_guard<std::mutex> guard(mutex_);
  move(c, to == dw_state::data_written ? dw_state::dwb_fsynced : dw_state::data_written, to);
}

void doublewrite_ring::release(std::uint32_t c) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    move(c, dw_state::data_fsynced, dw_state::free);
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
  std::uint32_t n = 0;
  for (const chunk& c : chunks_)
    n += c.state == dw_state::free;
  return n;
}

} // namespace tidemark::storage
