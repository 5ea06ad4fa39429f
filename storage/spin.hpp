// Spinning helpers for the short critical sections of the buffer pool and WAL: spin a
// little with the CPU's pause hint, then yield the thread so a preempted holder can run.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

namespace tidemark::storage {

class backoff {
public:
  void pause() {
    if (++spins_ < 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      sched_yield();
    }
  }

private:
  std::uint32_t spins_ = 0;
};

/// A test-and-test-and-set lock for critical sections of a few instructions.
class spin_lock {
public:
  void lock() {
    backoff wait;
    while (locked_.exchange(true, std::memory_order_acquire))
      while (locked_.load(std::memory_order_relaxed))
        wait.pause();
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

private:
  std::atomic<bool> locked_{false};
};

} // namespace tidemark::storage
