// A test io_engine whose data syncs (fdatasync) each wait at a gate until the test lets
// them on, in arrival order, and fail or succeed as scripted — to put two syncs of one
// WAL segment in flight at once and decide their outcomes and order. A failing sync can
// also hold its throw back until release_failures(), so that a sync that arrived later
// reports first. Full syncs (segment creation) pass straight through.
//
// It models Linux's errseq behaviour: a writeback error is reported once per open file
// description, to the first fdatasync that checks, so a second concurrent fdatasync on the
// same fd may return 0 although the data never reached the disk.
#pragma once

#include "delegating_engine.hpp"
#include "storage/types.hpp"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace tidemark::storage::test {

class gated_sync_engine final : public delegating_engine {
public:
  explicit gated_sync_engine(std::unique_ptr<io_engine> inner)
    : delegating_engine(std::move(inner)) {}

  void sync(int fd, sync_kind kind) override {
    if (kind != sync_kind::data) {
      inner().sync(fd, kind);
      return;
    }
    std::unique_lock lock(mutex_);
    std::size_t me = entered_++;
    changed_.notify_all();
    changed_.wait(lock, [&] { return released_ > me; });
    if (me < fail_.size() && fail_[me]) {
      changed_.wait(lock, [&] { return failures_released_; });
      throw io_error("fdatasync " + inner().path_of(fd) + ": injected EIO", EIO, true);
    }
    lock.unlock();
    inner().sync(fd, kind);
  }

  /// Scripts the outcome of the data syncs in the order they arrive: true fails it.
  /// With `hold_failures`, a failing sync throws only after release_failures().
  void script(std::vector<bool> fail, bool hold_failures = false) {
    std::lock_guard lock(mutex_);
    fail_ = std::move(fail);
    failures_released_ = !hold_failures;
  }
  /// False if fewer than `count` syncs arrived within `limit`.
  bool wait_entered(std::size_t count, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return entered_ >= count; });
  }
  /// Lets the next waiting sync go on.
  void release_one() {
    std::lock_guard lock(mutex_);
    ++released_;
    changed_.notify_all();
  }
  void release_failures() {
    std::lock_guard lock(mutex_);
    failures_released_ = true;
    changed_.notify_all();
  }
  /// Lets every sync, now and later, go on (failing ones throw).
  void release_all() {
    std::lock_guard lock(mutex_);
    released_ = ~std::size_t{0};
    failures_released_ = true;
    changed_.notify_all();
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t entered_ = 0;
  std::size_t released_ = 0;
  bool failures_released_ = true;
  std::vector<bool> fail_;
};

} // namespace tidemark::storage::test
