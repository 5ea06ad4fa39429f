// The engine's failure latch (W3): the first fatal error, kept for good. Any thread may
// trip it; once tripped it stays tripped, and every later trip is ignored, so the error
// reported is always the first one.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

namespace tidemark::actors {

class failure_latch {
public:
  /// Records `why` if nothing failed before; true when this call tripped the latch.
  bool trip(const std::string& why) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (failed_.load(std::memory_order_relaxed))
      return false;
    failure_ = why;
    failed_.store(true, std::memory_order_release);
    return true;
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  /// The first error (empty while nothing failed).
  std::string failure() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return failure_;
  }

private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  std::string failure_;
};

} // namespace tidemark::actors
