// Data directory locks: flock on <dir>/tidemark.lock plus this process's table of the
// lock files it holds (see directory_lock.hpp).
#include "runtime/directory_lock.hpp"

#include "storage/check.hpp"

#include <tidemark/errors.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/file.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>
#include <utility>

namespace tidemark::runtime {

namespace {

// Lock files this process holds: (device, inode) -> holders, negative for one writer.
std::mutex held_mutex;
std::map<std::pair<unsigned long long, unsigned long long>, int> held;

std::string lock_path(const std::string& dir) { return dir + "/tidemark.lock"; }

// The lock file's identity in this process's table: (device, inode) of the open `fd`.
std::pair<unsigned long long, unsigned long long> identity_of(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0)
    throw config_error("cannot stat " + path + ": " + std::strerror(errno));
  return {st.st_dev, st.st_ino};
}

} // namespace

directory_lock directory_lock::exclusive(const std::string& dir) {
  const std::string path = lock_path(dir);
  directory_lock lock;
  lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock.fd_ < 0)
    throw config_error("cannot open " + path + ": " + std::strerror(errno));
  lock.exclusive_ = true;
  const auto id = identity_of(lock.fd_, path);
  std::lock_guard<std::mutex> guard(held_mutex);
  if (held.count(id) != 0)
    throw config_error("data directory \"" + dir +
                       "\" is already open in this process: "
                       "close that database first (one open database per directory)");
  if (::flock(lock.fd_, LOCK_EX | LOCK_NB) != 0)
    throw config_error("data directory \"" + dir + "\" is in use by another process");
  std::tie(lock.device_, lock.inode_) = id;
  held[id] = -1;
  lock.registered_ = true;
  return lock;
}

directory_lock directory_lock::shared(const std::string& dir) {
  const std::string path = lock_path(dir);
  directory_lock lock;
  lock.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (lock.fd_ < 0)
    return lock; // no lock file: nothing ever opened it for writing
  const auto id = identity_of(lock.fd_, path);
  std::lock_guard<std::mutex> guard(held_mutex);
  auto it = held.find(id);
  if (it != held.end() && it->second < 0)
    throw config_error("data directory \"" + dir +
                       "\" is open for writing in this process: "
                       "close that database first, or read through it");
  if (::flock(lock.fd_, LOCK_SH | LOCK_NB) != 0)
    throw config_error("data directory \"" + dir + "\" is in use by another process");
  std::tie(lock.device_, lock.inode_) = id;
  ++held[id];
  lock.registered_ = true;
  return lock;
}

directory_lock::directory_lock(directory_lock&& other) noexcept { *this = std::move(other); }

directory_lock& directory_lock::operator=(directory_lock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    exclusive_ = other.exclusive_;
    registered_ = std::exchange(other.registered_, false);
    device_ = other.device_;
    inode_ = other.inode_;
  }
  return *this;
}

void directory_lock::release() noexcept {
  if (fd_ < 0)
    return;
  if (std::exchange(registered_, false)) {
    std::lock_guard<std::mutex> guard(held_mutex);
    auto it = held.find({device_, inode_});
    TIDEMARK_CHECK(it != held.end(), "a held directory lock is in this process's table");
    if (exclusive_ || --it->second == 0)
      held.erase(it);
  }
  ::close(std::exchange(fd_, -1)); // closing the descriptor releases the flock
}

} // namespace tidemark::runtime
