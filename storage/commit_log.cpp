// The commit-status log: see commit_log.hpp for the layout and invariants.
#include "storage/commit_log.hpp"

#include "storage/check.hpp"
#include "storage/wal_log.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tidemark::storage {

namespace {

constexpr std::size_t xids_per_byte = 4; // two bits each

std::string segment_file(const std::string& dir, std::uint32_t segno) {
  char name[16];
  std::snprintf(name, sizeof name, "%04X", segno);
  return dir + "/" + name;
}

} // namespace

commit_log::commit_log(io_engine& io, std::string dir, std::size_t page_size, wal_log& wal,
                       sync_registry& registry, std::size_t buffered_pages)
  : io_(io), dir_(std::move(dir)), page_size_(page_size), wal_(wal), registry_(registry),
    slots_(buffered_pages) {
  ::mkdir(dir_.c_str(), 0700);
  for (slot& s : slots_)
    s.bytes.assign(page_size_, 0);
}

commit_log::~commit_log() {
  for (int fd : fds_)
    if (fd >= 0)
      io_.close_file(fd);
}

std::string commit_log::segment_path(std::uint32_t segno) const {
  return segment_file(dir_, segno);
}

int commit_log::segment_fd_locked(std::uint32_t segno) {
  if (fds_.size() <= segno)
    fds_.resize(segno + 1, -1);
  if (fds_[segno] < 0)
    fds_[segno] = io_.open_file(segment_path(segno), true);
  return fds_[segno];
}

void commit_log::write_locked(slot& s, write_source source) {
  if (s.max_lsn > wal_.flushed_lsn())
    wal_.flush(s.max_lsn); // W1
  std::uint32_t segno = static_cast<std::uint32_t>(s.page / segment_pages);
  std::uint64_t offset = std::uint64_t(s.page % segment_pages) * page_size_;
  io_.write(segment_fd_locked(segno), s.bytes.data(), page_size_, offset);
  file_write written{{file_kind::commit_log, {0, segno}}, page_size_, offset, offset + page_size_};
  registry_.register_files(&written, 1, source); // W2: the sync worker fsyncs it later
  s.dirty = false;
  page_writes_.fetch_add(1, std::memory_order_relaxed);
}

// The slot holding `page`, reading it in (after writing out the least recently used
// slot if that one is dirty).
commit_log::slot& commit_log::page_locked(std::uint64_t page) {
  TIDEMARK_CHECK(page / segment_pages <= UINT32_MAX,
                 "a transaction id within the log's segment names");
  ++clock_;
  for (slot& s : slots_)
    if (s.page == std::int64_t(page)) {
      s.last_used = clock_;
      return s;
    }
  slot& victim = *std::min_element(slots_.begin(), slots_.end(), [](const slot& a, const slot& b) {
    return a.last_used < b.last_used;
  });
  if (victim.dirty)
    write_locked(victim, write_source::backend);
  std::uint32_t segno = static_cast<std::uint32_t>(page / segment_pages);
  std::uint64_t offset = std::uint64_t(page % segment_pages) * page_size_;
  io_.read(segment_fd_locked(segno), victim.bytes.data(), page_size_, offset);
  victim.page = static_cast<std::int64_t>(page);
  victim.max_lsn = 0;
  victim.last_used = clock_;
  return victim;
}

void commit_log::set(xid_t xid, xact_status status, lsn_t lsn) {
  std::uint64_t byte = xid / xids_per_byte;
  unsigned shift = static_cast<unsigned>(xid % xids_per_byte) * 2;
  std::lock_guard<std::mutex> guard(mutex_);
  slot& s = page_locked(byte / page_size_);
  unsigned char& b = s.bytes[byte % page_size_];
  b = static_cast<unsigned char>((b & ~(3u << shift)) | (unsigned(status) << shift));
  s.dirty = true;
  s.max_lsn = std::max(s.max_lsn, lsn);
}

xact_status commit_log::get(xid_t xid) {
  std::uint64_t byte = xid / xids_per_byte;
  unsigned shift = static_cast<unsigned>(xid % xids_per_byte) * 2;
  std::lock_guard<std::mutex> guard(mutex_);
  slot& s = page_locked(byte / page_size_);
  return static_cast<xact_status>((s.bytes[byte % page_size_] >> shift) & 3u);
}

void commit_log::write_dirty(write_source source) {
  std::lock_guard<std::mutex> guard(mutex_);
  for (slot& s : slots_)
    if (s.dirty)
      write_locked(s, source);
}

xact_status read_recorded_status(io_engine& io, const std::string& dir, std::size_t page_size,
                                 xid_t xid) {
  std::uint64_t byte = xid / xids_per_byte;
  unsigned shift = static_cast<unsigned>(xid % xids_per_byte) * 2;
  std::uint64_t segment_bytes = std::uint64_t(commit_log::segment_pages) * page_size;
  std::uint64_t segno = byte / segment_bytes;
  if (segno > UINT32_MAX)
    return xact_status::unknown; // past any segment name
  std::string path = segment_file(dir, static_cast<std::uint32_t>(segno));
  if (!std::filesystem::exists(path))
    return xact_status::unknown;
  int fd = io.open_file(path, false);
  unsigned char bits = 0; // zero past the end of the file
  try {
    io.read(fd, &bits, 1, byte % segment_bytes);
  } catch (...) {
    io.close_file(fd);
    throw;
  }
  io.close_file(fd);
  return static_cast<xact_status>((bits >> shift) & 3u);
}

void commit_log::sync_segment(std::uint32_t segno) {
  int fd;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    fd = segment_fd_locked(segno);
  }
  io_.sync(fd, sync_kind::data);
}

} // namespace tidemark::storage
