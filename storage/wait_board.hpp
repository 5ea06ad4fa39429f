// Blocking waits for conditions other threads make true by changing an atomic — a
// buffer's I/O flag, its content latch, the pool's free pins — so that a thread waiting
// for someone else's read, write or latch sleeps instead of spinning (on a 2-core machine
// a spinning waiter can hold the CPU the thread it waits for needs).
//
// Keys hash to a few dozen stripes, each a mutex, a condition variable and a count of
// waiters. wait() registers on its stripe, re-checks the condition and sleeps; wake()
// notifies the stripe only when someone waits there, so the cost on the common path is
// one fence and one load.
//
// Invariant (no lost wake-up): a waiter increments `waiters` and then, after a seq_cst
// fence, evaluates the condition while holding the stripe's mutex until it sleeps; a
// waker changes the atomic and then, after a seq_cst fence, reads `waiters`. In the fences'
// total order either the waiter's check sees the change, or the waker sees the waiter and
// takes the mutex — which the waiter releases only inside the condition variable's wait —
// before it notifies. Several keys share a stripe: waiters re-check after every wake-up.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace tidemark::storage {

class wait_board {
public:
  /// Returns once `ready()` returned true. `ready` may have an effect when it succeeds
  /// (taking what it waited for); it is called again after every wake-up.
  template <class Ready>
  void wait(std::size_t key, Ready ready) {
    if (ready())
      return;
    stripe& s = stripes_[key % stripe_count];
    std::unique_lock<std::mutex> lock(s.mutex);
    s.waiters.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    while (!ready())
      s.wake.wait(lock);
    s.waiters.fetch_sub(1, std::memory_order_relaxed);
  }

  /// As wait(), but gives up at `deadline`; returns whether `ready()` succeeded.
  template <class Ready>
  bool wait_until(std::size_t key, std::chrono::steady_clock::time_point deadline, Ready ready) {
    if (ready())
      return true;
    stripe& s = stripes_[key % stripe_count];
    std::unique_lock<std::mutex> lock(s.mutex);
    s.waiters.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool done = ready();
    while (!done && s.wake.wait_until(lock, deadline) != std::cv_status::timeout)
      done = ready();
    if (!done)
      done = ready();
    s.waiters.fetch_sub(1, std::memory_order_relaxed);
    return done;
  }

  /// Wakes every waiter on every key (they re-check their conditions).
  void wake_all() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (stripe& s : stripes_) {
      { std::lock_guard<std::mutex> guard(s.mutex); }
      s.wake.notify_all();
    }
  }

  /// Call after changing what a waiter on `key` may be waiting for.
  void wake(std::size_t key) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    stripe& s = stripes_[key % stripe_count];
    if (s.waiters.load(std::memory_order_relaxed) == 0)
      return;
    { std::lock_guard<std::mutex> guard(s.mutex); }
    s.wake.notify_all();
  }

private:
  static constexpr std::size_t stripe_count = 61; // prime: neighbouring keys spread out
  struct alignas(64) stripe {
    std::mutex mutex;
    std::condition_variable wake;
    std::atomic<int> waiters{0};
  };
  stripe stripes_[stripe_count];
};

} // namespace tidemark::storage
