// One writer per data directory, readers beside each other: an advisory flock on
// <dir>/tidemark.lock, held for as long as a directory_lock object lives.
//
// Invariants: a directory is held exclusively by at most one open database in the whole
// machine, or shared by any number of read-only opens and checks. flock() alone cannot
// tell a second open in this process from another process (each open() of the lock file
// is its own lock), so a process-wide table of the lock files this process holds (by
// device and inode) names the real cause: "already open in this process".
#pragma once

#include <string>

namespace tidemark::runtime {

class directory_lock {
public:
  /// Exclusive, for an open that may write; creates the lock file. config_error when
  /// another process or another open database of this process holds the directory.
  static directory_lock exclusive(const std::string& dir);
  /// Shared, for a read-only open or a check; creates nothing: holds nothing when the
  /// directory has no lock file. config_error when a writer holds the directory.
  static directory_lock shared(const std::string& dir);

  directory_lock() = default;
  directory_lock(directory_lock&& other) noexcept;
  directory_lock& operator=(directory_lock&& other) noexcept;
  directory_lock(const directory_lock&) = delete;
  directory_lock& operator=(const directory_lock&) = delete;
  ~directory_lock() { release(); }

  /// Gives the lock up now (idempotent).
  void release() noexcept;

private:
  int fd_ = -1;
  bool exclusive_ = false;
  bool registered_ = false; // in the process's table (the flock was taken)
  unsigned long long device_ = 0, inode_ = 0;
};

} // namespace tidemark::runtime
