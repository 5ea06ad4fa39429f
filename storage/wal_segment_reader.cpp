// wal_segment_reader: see wal_segment_reader.hpp.
#include "storage/wal_segment_reader.hpp"

#include "storage/wal_log.hpp"

#include <algorithm>
#include <filesystem>

namespace tidemark::storage {

wal_segment_reader::wal_segment_reader(io_engine& io, std::string wal_dir,
                                       std::uint64_t segment_size, bool cache)
  : io_(io), dir_(std::move(wal_dir)), segment_size_(segment_size), cache_(cache) {}

wal_segment_reader::~wal_segment_reader() { forget(); }

void wal_segment_reader::forget() {
  if (segment_.fd >= 0)
    io_.close_file(segment_.fd);
  segment_ = cached_segment{};
}

void wal_segment_reader::forget_cached(lsn_t lsn, std::size_t length) {
  for (lsn_t at = lsn; at < lsn + length;) {
    lsn_t start = segment_start(at);
    std::uint64_t piece = std::min<std::uint64_t>(lsn + length - at, start + segment_size_ - at);
    int fd = segment_fd(start);
    if (fd < 0)
      break;
    io_.forget_cached(fd, at - start, piece);
    at += piece;
  }
  forget();
}

std::size_t wal_segment_reader::read(lsn_t lsn, unsigned char* out, std::size_t length) {
  if (!cache_)
    forget();
  std::size_t done = 0;
  while (done < length) {
    lsn_t at = lsn + done;
    lsn_t start = segment_start(at);
    int fd = segment_fd(start);
    if (fd < 0)
      break;
    std::size_t piece =
      static_cast<std::size_t>(std::min<std::uint64_t>(length - done, start + segment_size_ - at));
    io_.read(fd, out + done, piece, at - start); // past end of file: zero-filled
    done += piece;
  }
  if (!cache_)
    forget();
  return done;
}

int wal_segment_reader::segment_fd(lsn_t start) {
  if (segment_.start == start)
    return segment_.fd;
  forget();
  std::string path = segment_path(start);
  segment_.start = start;
  if (std::filesystem::exists(path))
    segment_.fd = io_.open_file(path, false);
  return segment_.fd;
}

std::string wal_segment_reader::segment_path(lsn_t start) const {
  return dir_ + "/" + wal_log::segment_name(start);
}

} // namespace tidemark::storage
