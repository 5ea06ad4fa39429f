// The first failed sync, remembered for good (W3): the I/O engines raise it as a read
// barrier, and the WAL as the reason it is unusable.
//
// After a failed fsync the kernel may have dropped the written pages it could not write
// back, so a later read could return data older than what was written. A page read that
// way and then changed would be logged with a full-page image (or a delta) of a stale
// page: a committed transaction whose WAL is durable, replayed faithfully, yet whose
// effect on the data is wrong. So once a sync failed, the engine refuses every read.
//
// Invariants:
//  - record() is called before the failed sync's error leaves the engine; an engine that
//    drops unsynced writes (the fault engine) records under the same lock as the drop, so
//    no read can see the dropped state and succeed.
//  - Only the first failure is kept, whichever thread records first; failed() never goes
//    back to false.
//  - check_readable() throws io_error with fsync_failed() naming the first failure, for
//    every read that completes after record().
#pragma once

#include "storage/types.hpp"

#include <atomic>
#include <cerrno>
#include <mutex>
#include <string>

namespace tidemark::storage {

class sync_failure_latch {
public:
  /// Keeps the first failure's description.
  void record(const std::string& failure) {
    std::lock_guard lock(mutex_);
    if (failed_.load(std::memory_order_relaxed))
      return;
    first_failure_ = failure;
    failed_.store(true, std::memory_order_release);
  }

  bool failed() const { return failed_.load(std::memory_order_acquire); }

  /// The first failure's description ("" before any).
  std::string first_failure() const {
    std::lock_guard lock(mutex_);
    return first_failure_;
  }

  /// Call after a read completed: throws if a sync failed before. `path_of()` names the
  /// file read (called only then).
  template <class PathOf>
  void check_readable(PathOf&& path_of) const {
    if (!failed())
      return;
    throw io_error("read of '" + path_of() +
                     "' refused: an earlier sync failed, so the file may "
                     "hold older data than was written (" +
                     first_failure() + ")",
                   EIO, true);
  }

private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  std::string first_failure_;
};

} // namespace tidemark::storage
