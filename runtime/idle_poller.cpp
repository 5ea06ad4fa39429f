// idle_poller: see idle_poller.hpp.
#include "runtime/idle_poller.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

namespace tidemark::runtime {

namespace {

using std::chrono::steady_clock;

// Pause instructions between looks at the activity counter.
constexpr int pauses_per_look = 64;

void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Lowers the calling thread to SCHED_IDLE, or nice 19. False when both are refused.
bool lower_own_priority() {
  sched_param none{};
  if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &none) == 0)
    return true;
  return setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19) == 0;
}

} // namespace

void idle_poller::start(unsigned threads, std::chrono::microseconds linger) {
  if (!threads_.empty())
    return;
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  linger_ = linger;
  stopping_.store(false);
  for (unsigned i = 0; i < threads; ++i)
    threads_.emplace_back([this] { poll_loop(); });
}

void idle_poller::stop() {
  {
    std::lock_guard lock(park_mutex_);
    stopping_.store(true);
  }
  park_signal_.notify_all();
  for (std::thread& t : threads_)
    t.join();
  threads_.clear();
}

void idle_poller::wake_parked() {
  std::lock_guard lock(park_mutex_);
  park_signal_.notify_all();
}

void idle_poller::poll_loop() {
  if (!lower_own_priority())
    return; // never spin at normal priority
  std::uint64_t seen = activity_.load(std::memory_order_relaxed);
  auto last_activity = steady_clock::now();
  while (!stopping_.load(std::memory_order_relaxed)) {
    for (int i = 0; i < pauses_per_look; ++i)
      cpu_pause();
    std::uint64_t now_seen = activity_.load(std::memory_order_relaxed);
    auto now = steady_clock::now();
    if (now_seen != seen) {
      seen = now_seen;
      last_activity = now;
      continue;
    }
    if (now - last_activity < linger_)
      continue;
    std::unique_lock lock(park_mutex_);
    parked_.fetch_add(1);
    park_signal_.wait(lock, [&] {
      return stopping_.load() || activity_.load(std::memory_order_relaxed) != seen;
    });
    parked_.fetch_sub(1);
    seen = activity_.load(std::memory_order_relaxed);
    last_activity = steady_clock::now();
  }
}

} // namespace tidemark::runtime
