// Threads waiting for a position to reach an LSN that another thread publishes: commits
// waiting for a synchronous standby to have written, flushed or replayed their WAL.
//
// Invariants:
//  - published() only grows; a wait for an LSN at or below it returns at once.
//  - After stop(why) every wait that is not already satisfied throws position_stopped
//    with `why`, now and later (the engine is closing or failed).
#pragma once

#include "storage/types.hpp"

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>

namespace tidemark::storage {

class position_stopped : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class position_waiters {
public:
  void publish(lsn_t lsn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (lsn <= position_)
        return;
      position_ = lsn;
    }
    changed_.notify_all();
  }
  void stop(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_because_.empty())
        stopped_because_ = why;
    }
    changed_.notify_all();
  }
  lsn_t published() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return position_;
  }
  /// Blocks until the position reaches `lsn`; true if the caller had to wait.
  bool wait_for(lsn_t lsn) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (position_ >= lsn)
      return false;
    changed_.wait(lock, [&] { return position_ >= lsn || !stopped_because_.empty(); });
    if (position_ < lsn)
      throw position_stopped(stopped_because_);
    return true;
  }

private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  lsn_t position_ = 0;
  std::string stopped_because_;
};

} // namespace tidemark::storage
