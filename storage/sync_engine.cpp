// The `sync` I/O engine: blocking pread/pwrite and fdatasync/fsync on the calling thread.
//
// Invariants:
//  - read() loops until `length` bytes or end of file, then zero-fills the rest; write()
//    loops until every byte was accepted. Short transfers continue where they stopped;
//    EINTR/EAGAIN are retried; any other failure throws io_error naming the file.
//  - write_batch() issues the writes one after another, in order.
//  - A failed fdatasync/fsync throws io_error with fsync_failed() and is never retried
//    (W3); only EINTR, which reports no writeback failure, is retried.
//  - The engine has no state besides the (locked) fd registry, so it is thread-safe.
#include "storage/posix_engine.hpp"

#include <cstring>
#include <unistd.h>

namespace tidemark::storage {
namespace {

class sync_engine final : public posix_engine {
public:
  std::string name() const override { return "sync"; }

  std::size_t read(int fd, void* data, std::size_t length, std::uint64_t offset) override {
    auto* bytes = static_cast<unsigned char*>(data);
    std::size_t done = 0;
    while (done < length) {
      const ssize_t result =
        ::pread(fd, bytes + done, length - done, static_cast<off_t>(offset + done));
      if (result > 0) {
        done += static_cast<std::size_t>(result);
      } else if (result == 0) {
        break; // end of file
      } else if (!is_retryable(errno)) {
        throw_transfer_error("pread", fd, length - done, offset + done, errno);
      }
    }
    if (done < length) std::memset(bytes + done, 0, length - done); // past end of file
    return done;
  }

  void write(int fd, const void* data, std::size_t length, std::uint64_t offset) override {
    const auto* bytes = static_cast<const unsigned char*>(data);
    std::size_t done = 0;
    while (done < length) {
      const ssize_t result =
        ::pwrite(fd, bytes + done, length - done, static_cast<off_t>(offset + done));
      if (result > 0) {
        done += static_cast<std::size_t>(result);
      } else if (result == 0) {
        throw_transfer_error("pwrite (no progress)", fd, length - done, offset + done, EIO);
      } else if (!is_retryable(errno)) {
        throw_transfer_error("pwrite", fd, length - done, offset + done, errno);
      }
    }
  }

  void write_batch(const io_write* writes, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i)
      write(writes[i].fd, writes[i].data, writes[i].length, writes[i].offset);
  }

  void sync(int fd, sync_kind kind) override {
    const bool data_only = kind == sync_kind::data;
    for (;;) {
      if ((data_only ? ::fdatasync(fd) : ::fsync(fd)) == 0) return;
      if (errno != EINTR) throw_sync_error(data_only ? "fdatasync" : "fsync", fd, errno);
    }
  }
};

} // namespace

std::unique_ptr<io_engine> make_sync_engine() { return std::make_unique<sync_engine>(); }

} // namespace tidemark::storage
