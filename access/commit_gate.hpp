// Lets a commit that keeps losing the race for its leaves run its attempts alone.
//
// A table commit latches all its leaves at once; when one has no room for its changes it
// releases everything, splits it and starts again (table_transaction.hpp). Large commits
// whose keys are spread over the tree (a batch of 1 000 random inserts on 8 threads) can
// lose that race over and over: between one attempt's splits and the next attempt's
// latches, the other commits fill other leaves of its set. A commit that has failed
// `commit_gate::alone_after` attempts closes the gate: commits not yet in an attempt wait
// at it (holding nothing), the attempts in progress finish, and its own attempts then run
// with no other commit changing leaves, so the next one or two succeed. Readers and
// single-key tree operations do not pass the gate.
//
// Invariants:
//  - An attempt passes the gate holding no latch and no reservation, and leaves it before
//    it waits for anything outside its own latches; the closer waits for the attempts in
//    progress holding nothing. So the gate adds no wait to a cycle: no deadlock.
//  - At most one commit holds the gate closed; the others that want it queue behind it.
//  - An attempt counts itself in before it looks at the gate, and the closer marks the gate
//    closed before it counts the attempts in progress (sequentially consistent atomics):
//    one of the two always sees the other, so no attempt runs unseen beside a closer.
//  - Cheap when open: an attempt's entry and exit are one atomic add each and one load.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace tidemark::access {

class commit_gate {
public:
  /// Failed attempts after which a commit runs the rest alone.
  static constexpr std::size_t alone_after = 2;

  /// One attempt of a commit (RAII): waits while another commit holds the gate closed.
  class attempt_pass {
  public:
    explicit attempt_pass(commit_gate& gate);
    ~attempt_pass();
    attempt_pass(const attempt_pass&) = delete;
    attempt_pass& operator=(const attempt_pass&) = delete;

  private:
    commit_gate& gate_;
  };

  /// The rest of one commit's attempts, alone (RAII): waits for the attempts in progress.
  class alone {
  public:
    explicit alone(commit_gate& gate);
    ~alone();
    alone(const alone&) = delete;
    alone& operator=(const alone&) = delete;

  private:
    commit_gate& gate_;
  };

  /// Commits that have run alone (for the statistics and the tests).
  std::size_t closed_count() const { return closed_count_.load(std::memory_order_relaxed); }

private:
  void leave_attempt();

  std::atomic<std::size_t> in_attempt_{0};
  std::atomic<bool> closed_{false};
  std::atomic<std::size_t> closed_count_{0};
  std::mutex mutex_;
  std::condition_variable changed_; // closed_ cleared, or in_attempt_ reached 0 while closed
  bool held_ = false;               // guarded by mutex_: a closer holds the gate
};

} // namespace tidemark::access
