// The gate a commit closes to run its attempts alone: see commit_gate.hpp.
#include "access/commit_gate.hpp"

namespace tidemark::access {

commit_gate::attempt_pass::attempt_pass(commit_gate& gate) : gate_(gate) {
  for (;;) {
    gate_.in_attempt_.fetch_add(1);
    if (!gate_.closed_.load())
      return;
    gate_.leave_attempt(); // closed: step back out, and wait for it to open
    std::unique_lock lock(gate_.mutex_);
    gate_.changed_.wait(lock, [&] { return !gate_.closed_.load(); });
  }
}

commit_gate::attempt_pass::~attempt_pass() { gate_.leave_attempt(); }

void commit_gate::leave_attempt() {
  if (in_attempt_.fetch_sub(1) == 1 && closed_.load()) {
    std::lock_guard lock(mutex_); // the closer checks the count under it before waiting
    changed_.notify_all();
  }
}

commit_gate::alone::alone(commit_gate& gate) : gate_(gate) {
  std::unique_lock lock(gate_.mutex_);
  gate_.changed_.wait(lock, [&] { return !gate_.held_; });
  gate_.held_ = true;
  gate_.closed_.store(true);
  gate_.changed_.wait(lock, [&] { return gate_.in_attempt_.load() == 0; });
  gate_.closed_count_.fetch_add(1, std::memory_order_relaxed);
}

commit_gate::alone::~alone() {
  {
    std::lock_guard lock(gate_.mutex_);
    gate_.held_ = false;
    gate_.closed_.store(false);
  }
  gate_.changed_.notify_all();
}

} // namespace tidemark::access
