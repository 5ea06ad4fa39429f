// The I/O engine interface: every byte Tidemark puts on disk or reads back goes through one
// of these. Engines: synchronous pread/pwrite/fdatasync (`sync`), io_uring (`io_uring`), and
// the fault-injecting engine that wraps either (fault_engine.hpp).
//
// Contract every engine keeps (tests/storage/io_engine_test.cpp checks both real engines alike):
//  - read() returns the number of bytes read; fewer than asked only at end of file, the
//    rest of the buffer is zero-filled.
//  - write() and write_batch() return only when every byte was handed to the kernel; short
//    writes are continued, EINTR/EAGAIN retried. Any other failure throws io_error.
//  - read_batch() reads like read() for each element; io_uring issues them in one
//    submission (the WAL prefetch of recovery), other engines one after another.
//  - sync() returns only when the file's data (and, for full, its metadata) is durable.
//    A failed sync throws io_error with fsync_failed() == true and is never retried (W3).
//  - Engines are thread-safe: any thread may call any method concurrently.
//  - A file is named by the fd open_file() returned; the engine remembers the path so that
//    errors name the file.
#pragma once

#include "storage/types.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tidemark::storage {

enum class sync_kind { data, full };

struct io_write {
  int fd = -1;
  const void* data = nullptr;
  std::size_t length = 0;
  std::uint64_t offset = 0;
};

struct io_read {
  int fd = -1;
  void* data = nullptr;
  std::size_t length = 0;
  std::uint64_t offset = 0;
};

class io_engine {
public:
  virtual ~io_engine() = default;

  /// "sync", "io_uring" or "fault(...)".
  virtual std::string name() const = 0;

  /// Opens `path` read-write; creates it (mode 0600) when `create` is true.
  /// Throws io_error naming the path on failure.
  virtual int open_file(const std::string& path, bool create) = 0;
  virtual void close_file(int fd) = 0;

  virtual std::size_t read(int fd, void* data, std::size_t length, std::uint64_t offset) = 0;
  virtual void write(int fd, const void* data, std::size_t length, std::uint64_t offset) = 0;
  /// Issues all writes (io_uring: in one submission) and returns when all completed.
  virtual void write_batch(const io_write* writes, std::size_t count) = 0;
  /// Issues all reads and returns when all completed; each buffer is zero-filled past the
  /// end of its file, as read() does.
  virtual void read_batch(const io_read* reads, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i)
      read(reads[i].fd, reads[i].data, reads[i].length, reads[i].offset);
  }
  virtual void sync(int fd, sync_kind kind) = 0;
  /// Starts writing the range's dirty pages back to the device and, with `wait`, waits for
  /// that — without a cache flush: nothing becomes durable, device writes are only paced (a
  /// later sync() has less to do). A failure is fatal like a failed sync (fsync_failed,
  /// W3): the kernel may have dropped the pages.
  virtual void write_back(int fd, std::uint64_t offset, std::uint64_t length, bool wait) = 0;
  /// A hint that the range will be read soon (posix_fadvise WILLNEED): the kernel starts
  /// reading it into its page cache and this returns without waiting for it. It changes no
  /// data and no durability, and an engine may ignore it (this default does).
  virtual void will_need(int /*fd*/, std::uint64_t /*offset*/, std::uint64_t /*length*/) {}
  /// Drops the kernel's cached copy of the range (posix_fadvise DONTNEED), so that the
  /// next read asks the file system again — for a re-read of bytes that read back wrong.
  /// Like will_need a hint: it changes no data and no durability (dirty pages stay).
  virtual void forget_cached(int /*fd*/, std::uint64_t /*offset*/, std::uint64_t /*length*/) {}

  /// Current size of the file in bytes.
  virtual std::uint64_t file_size(int fd) = 0;
  virtual void truncate(int fd, std::uint64_t length) = 0;

  /// Directory operations are metadata: rename is atomic; sync_directory makes earlier
  /// creates, renames and unlinks in `dir` durable.
  virtual void rename(const std::string& from, const std::string& to) = 0;
  virtual void unlink(const std::string& path) = 0;
  virtual void sync_directory(const std::string& dir) = 0;
  /// syncfs(2) of the file system holding `dir`: every file on it becomes durable.
  virtual void sync_file_system(const std::string& dir) = 0;

  /// The path open_file() was given for `fd` (for messages).
  virtual std::string path_of(int fd) const = 0;
};

enum class io_method { io_uring, sync };

/// Creates (or truncates) `path` and writes `contents` through `io`. Not durable by itself.
void write_whole_file(io_engine& io, const std::string& path, const std::string& contents);

/// Fsyncs the file at `path` through `io` (opened and closed here, closed on error too).
void sync_file_at(io_engine& io, const std::string& path);

/// Creates a real engine. io_uring falls back to nothing: if the kernel refuses a ring the
/// constructor throws io_error and the caller reports it (choose io_method=sync then).
std::unique_ptr<io_engine> make_io_engine(io_method method);

/// A synchronous engine that opens every file O_RDONLY and creates none (inspection of a
/// directory, possibly without write permission).
std::unique_ptr<io_engine> make_read_only_engine();

} // namespace tidemark::storage
