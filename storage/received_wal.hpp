// A standby's record of how far the WAL it receives is durable: the receiver publishes
// each flush, redo (and its prefetcher) wait on it for more (wal_reader::follow), and a
// promotion or a stop ends the stream so that they finish with what arrived.
//
// Invariants:
//  - flushed() only grows, and WAL below it has been fsynced on the standby: redo never
//    applies WAL that a standby crash could lose.
//  - Once ended, every wait returns at once, and no more WAL is published.
//  - A reader about to wait has consumed everything flushed: the caught-up callback says
//    so (the receiver then reports the replayed position at once, for remote_apply).
#pragma once

#include "storage/wal_reader.hpp"

#include <condition_variable>
#include <functional>
#include <mutex>

namespace tidemark::storage {

class received_wal final : public wal_arrival {
public:
  explicit received_wal(lsn_t flushed) : flushed_(flushed) {}

  /// Called (on the waiting thread, before it sleeps) whenever a reader has read all that
  /// was flushed. Set (or cleared) only while no reader follows.
  void on_caught_up(std::function<void()> callback) { caught_up_ = std::move(callback); }

  /// WAL below `lsn` is durable on the standby (ignored once ended or when not newer).
  void flushed_to(lsn_t lsn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ended_ || lsn <= flushed_)
        return;
      flushed_ = lsn;
    }
    changed_.notify_all();
  }
  /// No more WAL will be published: waits end with what arrived.
  void end() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ended_ = true;
    }
    changed_.notify_all();
  }
  lsn_t flushed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return flushed_;
  }
  bool ended() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return ended_;
  }
  lsn_t wait_beyond(lsn_t lsn) override {
    if (caught_up_) {
      bool will_wait;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        will_wait = !ended_ && flushed_ <= lsn;
      }
      if (will_wait)
        caught_up_();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return ended_ || flushed_ > lsn; });
    return flushed_;
  }

private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  lsn_t flushed_;
  bool ended_ = false;
  std::function<void()> caught_up_;
};

} // namespace tidemark::storage
