// Internal to storage/: what the two real I/O engines (sync_engine.cpp, uring_engine.cpp)
// share — single transfers and syncs and the metadata operations, all done with plain
// system calls, the fd-to-path registry, and error messages. Not part of the public
// storage API; include io_engine.hpp instead.
//
// Invariants:
//  - Every fd handed out by open_file() is in the registry until close_file() removes it,
//    so every error can name the file it concerns.
//  - The registry is guarded by a shared_mutex: lookups (every error path, path_of) share
//    it, open and close take it exclusively.
//  - Every io_error thrown names the operation, the path and (for transfers) the offset
//    and length, followed by strerror of the error number it carries.
#pragma once

#include "storage/io_engine.hpp"
#include "storage/sync_failure_latch.hpp"

#include <cerrno>
#include <shared_mutex>
#include <unordered_map>

namespace tidemark::storage {

class posix_engine : public io_engine {
public:
  /// `read_only`: every file is opened O_RDONLY and none is created (open_file's `create`
  /// is ignored), so a write fails with the kernel's EBADF.
  explicit posix_engine(bool read_only = false) : read_only_(read_only) {}
  std::size_t read(int fd, void* data, std::size_t length, std::uint64_t offset) override;
  void write(int fd, const void* data, std::size_t length, std::uint64_t offset) override;
  void sync(int fd, sync_kind kind) override;
  void write_back(int fd, std::uint64_t offset, std::uint64_t length, bool wait) override;
  void will_need(int fd, std::uint64_t offset, std::uint64_t length) override;
  void forget_cached(int fd, std::uint64_t offset, std::uint64_t length) override;
  int open_file(const std::string& path, bool create) override;
  void close_file(int fd) override;
  std::uint64_t file_size(int fd) override;
  void truncate(int fd, std::uint64_t length) override;
  void rename(const std::string& from, const std::string& to) override;
  void unlink(const std::string& path) override;
  void sync_directory(const std::string& dir) override;
  void sync_file_system(const std::string& dir) override;
  std::string path_of(int fd) const override;

protected:
  /// Throws io_error: "<operation> of <length> bytes at offset <offset> in '<path>' failed".
  [[noreturn]] void throw_transfer_error(const char* operation, int fd, std::size_t length,
                                         std::uint64_t offset, int error_number) const;
  /// Refuses reads from now on (sync_failure_latch.hpp) and throws io_error with
  /// fsync_failed() set: "<operation> of '<path>' failed".
  [[noreturn]] void throw_sync_error(const char* operation, int fd, int error_number);
  /// Throws as read() does once a sync has failed: what `fd` holds may be older than written.
  void check_readable(int fd) const {
    sync_failure_.check_readable([&] { return path_of(fd); });
  }

private:
  [[noreturn]] void throw_sync_failure(const std::string& operation, const std::string& path,
                                       int error_number);

  bool read_only_;
  sync_failure_latch sync_failure_;
  mutable std::shared_mutex registry_mutex_;
  std::unordered_map<int, std::string> paths_;
};

/// The error message tail every engine uses: ": <strerror>" (thread-safe).
std::string describe_errno(int error_number);

/// True for the errors a transfer simply retries.
inline bool is_retryable(int error_number) {
  return error_number == EINTR || error_number == EAGAIN;
}

std::unique_ptr<io_engine> make_sync_engine(bool read_only = false);
/// Throws io_error (suggesting io_method=sync) when the kernel refuses an io_uring.
std::unique_ptr<io_engine> make_uring_engine();

} // namespace tidemark::storage
