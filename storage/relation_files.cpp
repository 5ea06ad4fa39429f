// Relation segment files: see relation_files.hpp for the layout and invariants.
#include "storage/relation_files.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace tidemark::storage {

relation_files::relation_files(io_engine& io, std::string base_dir, std::size_t page_size,
                               std::uint64_t segment_size)
  : io_(io), base_dir_(std::move(base_dir)), page_size_(page_size), segment_size_(segment_size),
    blocks_per_segment_(segment_size / page_size),
    fd_tables_(new std::atomic<std::atomic<int>*>[max_relations]) {
  if (blocks_per_segment_ == 0 || segment_size % page_size != 0)
    throw std::invalid_argument("segment_size must be a multiple of page_size");
  for (rel_id r = 0; r < max_relations; ++r) {
    fd_tables_[r].store(nullptr, std::memory_order_relaxed);
    nblocks_[r].store(0, std::memory_order_relaxed);
    nblocks_known_[r].store(false, std::memory_order_relaxed);
    dropped_[r].store(false, std::memory_order_relaxed);
  }
}

relation_files::~relation_files() {
  for (rel_id r = 0; r < max_relations; ++r) {
    std::atomic<int>* fds = fd_tables_[r].load(std::memory_order_relaxed);
    if (fds == nullptr)
      continue;
    for (std::uint32_t segno = 0; segno < max_segments; ++segno) {
      int fd = fds[segno].load(std::memory_order_relaxed);
      if (fd >= 0)
        io_.close_file(fd);
    }
    delete[] fds;
  }
}

void relation_files::check_ids(page_id id) const {
  if (id.rel == 0 || id.rel >= max_relations)
    throw std::invalid_argument("relation id " + std::to_string(id.rel) + " out of range 1.." +
                                std::to_string(max_relations - 1));
  if (id.block / blocks_per_segment_ >= max_segments)
    throw std::invalid_argument("block " + std::to_string(id.block) + " of relation " +
                                std::to_string(id.rel) + " is beyond the largest relation size");
}

segment_id relation_files::segment_of(page_id id) const {
  return {id.rel, static_cast<std::uint32_t>(id.block / blocks_per_segment_)};
}

std::string relation_files::segment_path(segment_id segment) const {
  return base_dir_ + "/" + std::to_string(segment.rel) + "." + std::to_string(segment.segno);
}

std::string relation_files::describe(page_id id) const {
  return "file " + segment_path(segment_of(id)) + " block " +
         std::to_string(id.block % blocks_per_segment_) + " (relation " + std::to_string(id.rel) +
         " block " + std::to_string(id.block) + ")";
}

int relation_files::fd_for(segment_id segment, bool create) {
  std::atomic<int>* fds = fd_tables_[segment.rel].load(std::memory_order_acquire);
  if (fds != nullptr) {
    int fd = fds[segment.segno].load(std::memory_order_acquire);
    if (fd >= 0)
      return fd;
  }
  std::lock_guard<std::mutex> guard(open_mutex_);
  if (dropped_[segment.rel].load(std::memory_order_relaxed))
    return -1; // drop() holds this lock while it marks the relation and removes its files
  fds = fd_tables_[segment.rel].load(std::memory_order_relaxed);
  if (fds == nullptr) {
    fds = new std::atomic<int>[max_segments];
    for (std::uint32_t segno = 0; segno < max_segments; ++segno)
      fds[segno].store(-1, std::memory_order_relaxed);
    fd_tables_[segment.rel].store(fds, std::memory_order_release);
  }
  std::atomic<int>& slot = fds[segment.segno];
  int fd = slot.load(std::memory_order_relaxed);
  if (fd >= 0)
    return fd;
  std::string path = segment_path(segment);
  struct stat st;
  if (!create && ::stat(path.c_str(), &st) != 0)
    return -1;
  fd = io_.open_file(path, true);
  slot.store(fd, std::memory_order_release);
  return fd;
}

void relation_files::read_page(page_id id, void* out) {
  check_ids(id);
  int fd = fd_for(segment_of(id), false);
  if (fd < 0) {
    std::memset(out, 0, page_size_);
    return;
  }
  io_.read(fd, out, page_size_, offset_in_segment(id));
}

void relation_files::read_pages(const page_read* pages, std::size_t count) {
  io_read reads[64];
  std::size_t pending = 0;
  for (std::size_t i = 0; i < count; ++i) {
    check_ids(pages[i].id);
    int fd = fd_for(segment_of(pages[i].id), false);
    if (fd < 0) {
      std::memset(pages[i].out, 0, page_size_);
      continue;
    }
    reads[pending++] = io_read{fd, pages[i].out, page_size_, offset_in_segment(pages[i].id)};
    if (pending == 64) {
      io_.read_batch(reads, pending);
      pending = 0;
    }
  }
  if (pending > 0)
    io_.read_batch(reads, pending);
}

bool relation_files::will_need(page_id id) {
  check_ids(id);
  int fd = fd_for(segment_of(id), false);
  if (fd < 0)
    return false;
  io_.will_need(fd, offset_in_segment(id), page_size_);
  return true;
}

void relation_files::write_page(page_id id, const void* page) {
  page_write one{id, page};
  write_pages(&one, 1);
}

namespace {

// Adjacent pages go out as one write: the next block of the same file whose bytes follow
// the write's in memory (a writer that copies its sorted pages one after another, as the
// checkpointer and the doublewrite batcher do, gets one write per run of blocks).
constexpr std::size_t max_merged_bytes = std::size_t{1} << 20;

bool extends(const io_write& write, int fd, const void* data, std::uint64_t offset) {
  return write.fd == fd && write.offset + write.length == offset &&
         static_cast<const unsigned char*>(write.data) + write.length == data &&
         write.length < max_merged_bytes;
}

} // namespace

void relation_files::write_pages(const page_write* pages, std::size_t count) {
  io_write writes[64];
  std::size_t pending = 0;
  for (std::size_t i = 0; i < count; ++i) {
    check_ids(pages[i].id);
    if (dropped(pages[i].id.rel))
      continue; // nothing of a dropped relation is kept
    int fd = fd_for(segment_of(pages[i].id), true);
    if (fd < 0)
      continue; // dropped since the check above
    const std::uint64_t offset = offset_in_segment(pages[i].id);
    note_block(pages[i].id);
    if (pending > 0 && extends(writes[pending - 1], fd, pages[i].data, offset)) {
      writes[pending - 1].length += page_size_; // the next block, from the next page of memory
      continue;
    }
    writes[pending++] = io_write{fd, pages[i].data, page_size_, offset};
    if (pending == 64) {
      io_.write_batch(writes, pending);
      pending = 0;
    }
  }
  if (pending > 0)
    io_.write_batch(writes, pending);
}

void relation_files::sync_segment(segment_id segment) {
  int fd = fd_for(segment, false);
  if (fd >= 0)
    io_.sync(fd, sync_kind::data);
}

void relation_files::write_back_segment(segment_id segment, std::uint64_t offset,
                                        std::uint64_t length) {
  int fd = fd_for(segment, false);
  if (fd >= 0)
    io_.write_back(fd, offset, length, true);
}

std::vector<segment_id> relation_files::drop(rel_id rel) {
  check_ids({rel, 0});
  std::vector<segment_id> removed;
  std::lock_guard<std::mutex> guard(open_mutex_);
  dropped_[rel].store(true, std::memory_order_release);
  std::atomic<int>* fds = fd_tables_[rel].load(std::memory_order_relaxed);
  // Every segment the relation may have: up to its last noted block, and on while files
  // follow (a segment may exist past a missing one: writes create the file they need).
  const std::uint64_t noted = nblocks_[rel].load(std::memory_order_relaxed);
  const std::uint64_t noted_segments = (noted + blocks_per_segment_ - 1) / blocks_per_segment_;
  for (std::uint32_t segno = 0; segno < max_segments; ++segno) {
    segment_id segment{rel, segno};
    std::string path = segment_path(segment);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (segno >= noted_segments)
        break;
      continue;
    }
    int fd = fds != nullptr ? fds[segno].load(std::memory_order_relaxed) : -1;
    if (fd >= 0)
      io_.truncate(fd, 0); // an open descriptor keeps the file: free its space now
    io_.unlink(path);
    removed.push_back(segment);
  }
  return removed;
}

std::uint32_t relation_files::segment_count(rel_id rel) {
  std::uint32_t count = 0;
  struct stat st;
  while (count < max_segments && ::stat(segment_path({rel, count}).c_str(), &st) == 0)
    ++count;
  return count;
}

block_id relation_files::nblocks(rel_id rel) {
  check_ids({rel, 0});
  if (!nblocks_known_[rel].load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> guard(open_mutex_);
    if (!nblocks_known_[rel].load(std::memory_order_relaxed)) {
      block_id on_disk = 0;
      for (std::uint32_t segno = 0;; ++segno) {
        struct stat st;
        if (::stat(segment_path({rel, segno}).c_str(), &st) != 0)
          break;
        on_disk = static_cast<block_id>(segno * blocks_per_segment_ +
                                        (static_cast<std::uint64_t>(st.st_size) + page_size_ - 1) /
                                          page_size_);
      }
      block_id noted = nblocks_[rel].load(std::memory_order_relaxed);
      nblocks_[rel].store(std::max(noted, on_disk), std::memory_order_relaxed);
      nblocks_known_[rel].store(true, std::memory_order_release);
    }
  }
  return nblocks_[rel].load(std::memory_order_acquire);
}

void relation_files::note_block(page_id id) {
  std::atomic<block_id>& n = nblocks_[id.rel];
  block_id current = n.load(std::memory_order_relaxed);
  while (current < id.block + 1 &&
         !n.compare_exchange_weak(current, id.block + 1, std::memory_order_acq_rel)) {
  }
}

} // namespace tidemark::storage
