// idle_poller: keeps otherwise idle CPUs out of the halted state while commits are in
// flight, so that waking a thread on them is cheap.
//
// Why: on a virtual machine a halted vCPU takes a host round trip to wake. Measured on the
// 2-vCPU machines Tidemark is benchmarked on (guest halt polling off): a condition-variable
// ping-pong between two threads costs 144 µs per round trip across vCPUs, 20–30 µs when the
// other vCPU is busy, 14 µs on one vCPU. A group commit crosses threads four times (session
// → WAL writer → syncer → WAL writer → session), so the halts cost more than the fdatasync.
// The same idea as the kernel's haltpoll and Seastar's reactor idle polling, in user space.
//
// How: one thread per CPU at SCHED_IDLE (the lowest scheduling class: it runs only when
// nothing else wants the CPU and yields to any waking thread at once) spins while there
// was commit activity in the last `linger`, and parks on a condition variable otherwise.
//
// Invariants:
//  - note_activity() is wait-free unless a poller is parked (then one notify).
//  - Pollers never touch engine state; stop() joins every thread.
//  - If the kernel refuses SCHED_IDLE, pollers run at nice 19 instead; if that is refused
//    too they exit at once (polling at normal priority would steal CPU from work).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tidemark::runtime {

class idle_poller {
public:
  idle_poller() = default;
  ~idle_poller() { stop(); }
  idle_poller(const idle_poller&) = delete;
  idle_poller& operator=(const idle_poller&) = delete;

  /// Starts `threads` pollers (0: one per CPU). No-op when already running.
  void start(unsigned threads, std::chrono::microseconds linger);
  void stop();

  /// A commit is on its way: keep polling for another `linger`.
  void note_activity() {
    // seq_cst pairs with the parking poller's increment of parked_ (store, then load the
    // other side's variable on both sides), so one of the two always sees the other.
    activity_.fetch_add(1);
    if (parked_.load() > 0)
      wake_parked();
  }

  /// Pollers started and not yet stopped (one refused a low priority has already exited).
  unsigned running() const { return static_cast<unsigned>(threads_.size()); }

private:
  void poll_loop();
  void wake_parked();

  std::vector<std::thread> threads_;
  std::chrono::microseconds linger_{0};
  std::atomic<std::uint64_t> activity_{0};
  std::atomic<unsigned> parked_{0};
  std::atomic<bool> stopping_{false};
  std::mutex park_mutex_;
  std::condition_variable park_signal_;
};

} // namespace tidemark::runtime
