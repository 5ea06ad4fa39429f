// What the real I/O engines share (posix_engine.hpp): single transfers and syncs as plain
// system calls, metadata operations, and make_io_engine().
//
// Invariants:
//  - read() loops until `length` bytes or end of file, then zero-fills the rest; write()
//    loops until every byte was accepted. Short transfers continue where they stopped;
//    EINTR/EAGAIN are retried; any other failure throws io_error naming the file.
//  - A failed fdatasync/fsync throws io_error with fsync_failed() and is never retried
//    (W3); only EINTR, which reports no writeback failure, is retried. From then on every
//    read() throws too (sync_failure_latch.hpp): the file may hold older data than written.
//  - open_file() registers the fd before returning it; close_file() unregisters it before
//    closing, so a recycled fd number never maps to a stale path.
//  - Files are opened O_RDWR | O_CLOEXEC (mode 0600 when created); a directory is synced
//    through its own O_RDONLY | O_DIRECTORY descriptor, closed again before returning.
//  - A failed fsync of a directory is reported like a failed file sync (fsync_failed).
#include "storage/posix_engine.hpp"

#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

namespace tidemark::storage {
namespace {

// strerror_r exists in a GNU (returns char*) and an XSI (returns int) flavour.
[[maybe_unused]] const char* strerror_text(const char* gnu_result, const char*) {
  return gnu_result;
}
[[maybe_unused]] const char* strerror_text(int xsi_result, const char* buffer) {
  return xsi_result == 0 ? buffer : "unknown error";
}

std::string quoted(const std::string& path) { return "'" + path + "'"; }

[[noreturn]] void throw_path_error(const std::string& what, const std::string& path,
                                   int error_number) {
  throw io_error(what + " " + quoted(path) + " failed" + describe_errno(error_number),
                 error_number);
}

int open_retrying(const char* path, int flags, mode_t mode) {
  for (;;) {
    const int fd = ::open(path, flags, mode);
    if (fd >= 0 || errno != EINTR)
      return fd;
  }
}

int fsync_retrying_eintr(int fd) {
  for (;;) {
    const int result = ::fsync(fd);
    if (result == 0 || errno != EINTR)
      return result;
  }
}

} // namespace

std::string describe_errno(int error_number) {
  char buffer[256];
  return std::string(": ") + strerror_text(strerror_r(error_number, buffer, sizeof buffer), buffer);
}

// ---- single transfers and syncs: plain system calls on the calling thread ----

std::size_t posix_engine::read(int fd, void* data, std::size_t length, std::uint64_t offset) {
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
  if (done < length)
    std::memset(bytes + done, 0, length - done); // past end of file
  sync_failure_.check_readable([&] { return path_of(fd); });
  return done;
}

void posix_engine::write(int fd, const void* data, std::size_t length, std::uint64_t offset) {
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

void posix_engine::sync(int fd, sync_kind kind) {
  const bool data_only = kind == sync_kind::data;
  for (;;) {
    if ((data_only ? ::fdatasync(fd) : ::fsync(fd)) == 0)
      return;
    if (errno != EINTR)
      throw_sync_error(data_only ? "fdatasync" : "fsync", fd, errno);
  }
}

void posix_engine::write_back(int fd, std::uint64_t offset, std::uint64_t length, bool wait) {
  const unsigned flags = wait ? SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                  SYNC_FILE_RANGE_WAIT_AFTER
                              : SYNC_FILE_RANGE_WRITE;
  for (;;) {
    if (::sync_file_range(fd, static_cast<off_t>(offset), static_cast<off_t>(length), flags) == 0)
      return;
    if (errno != EINTR)
      throw_sync_error("sync_file_range", fd, errno);
  }
}

void posix_engine::will_need(int fd, std::uint64_t offset, std::uint64_t length) {
  // Only a hint: a failure leaves the later read to do the work, so it is not reported.
  (void)::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(length),
                        POSIX_FADV_WILLNEED);
}

void posix_engine::forget_cached(int fd, std::uint64_t offset, std::uint64_t length) {
  // A hint too: a failure leaves the cached copy, and the re-read shows whether it was right.
  (void)::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(length),
                        POSIX_FADV_DONTNEED);
}

// ---- metadata ----

int posix_engine::open_file(const std::string& path, bool create) {
  const int flags = read_only_ ? O_RDONLY | O_CLOEXEC : O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0);
  create = create && !read_only_;
  const int fd = open_retrying(path.c_str(), flags, 0600);
  if (fd < 0)
    throw_path_error(create ? "open (create)" : "open", path, errno);
  std::unique_lock lock(registry_mutex_);
  paths_[fd] = path;
  return fd;
}

void posix_engine::close_file(int fd) {
  {
    std::unique_lock lock(registry_mutex_);
    paths_.erase(fd);
  }
  // Durability comes from sync(), never from close; its result carries nothing more.
  ::close(fd);
}

std::uint64_t posix_engine::file_size(int fd) {
  struct stat status {};
  if (::fstat(fd, &status) != 0)
    throw_path_error("fstat", path_of(fd), errno);
  return static_cast<std::uint64_t>(status.st_size);
}

void posix_engine::truncate(int fd, std::uint64_t length) {
  for (;;) {
    if (::ftruncate(fd, static_cast<off_t>(length)) == 0)
      return;
    if (errno != EINTR)
      throw_path_error("ftruncate to " + std::to_string(length) + " bytes of", path_of(fd), errno);
  }
}

void posix_engine::rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw_path_error("rename of " + quoted(from) + " to", to, errno);
}

void posix_engine::unlink(const std::string& path) {
  if (::unlink(path.c_str()) != 0)
    throw_path_error("unlink", path, errno);
}

void posix_engine::sync_directory(const std::string& dir) {
  const int fd = open_retrying(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0)
    throw_path_error("open directory", dir, errno);
  const int result = fsync_retrying_eintr(fd);
  const int error_number = errno;
  ::close(fd);
  if (result != 0)
    throw_sync_failure("fsync of directory", dir, error_number);
}

void posix_engine::sync_file_system(const std::string& dir) {
  const int fd = open_retrying(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0)
    throw_path_error("open directory", dir, errno);
  const int result = ::syncfs(fd);
  const int error_number = errno;
  ::close(fd);
  if (result != 0)
    throw_sync_failure("syncfs of the file system holding", dir, error_number);
}

std::string posix_engine::path_of(int fd) const {
  std::shared_lock lock(registry_mutex_);
  const auto found = paths_.find(fd);
  return found != paths_.end() ? found->second : "<unregistered fd " + std::to_string(fd) + ">";
}

void posix_engine::throw_transfer_error(const char* operation, int fd, std::size_t length,
                                        std::uint64_t offset, int error_number) const {
  throw_path_error(std::string(operation) + " of " + std::to_string(length) + " bytes at offset " +
                     std::to_string(offset) + " in",
                   path_of(fd), error_number);
}

void posix_engine::throw_sync_error(const char* operation, int fd, int error_number) {
  throw_sync_failure(operation + std::string(" of"), path_of(fd), error_number);
}

void posix_engine::throw_sync_failure(const std::string& operation, const std::string& path,
                                      int error_number) {
  io_error error(operation + " " + quoted(path) + " failed" + describe_errno(error_number),
                 error_number, true);
  sync_failure_.record(error.what());
  throw error;
}

void write_whole_file(io_engine& io, const std::string& path, const std::string& contents) {
  const int fd = io.open_file(path, true);
  try {
    io.truncate(fd, 0);
    io.write(fd, contents.data(), contents.size(), 0);
  } catch (...) {
    io.close_file(fd);
    throw;
  }
  io.close_file(fd);
}

void sync_file_at(io_engine& io, const std::string& path) {
  const int fd = io.open_file(path, false);
  try {
    io.sync(fd, sync_kind::full);
  } catch (...) {
    io.close_file(fd);
    throw;
  }
  io.close_file(fd);
}

std::unique_ptr<io_engine> make_io_engine(io_method method) {
  return method == io_method::io_uring ? make_uring_engine() : make_sync_engine();
}

} // namespace tidemark::storage
