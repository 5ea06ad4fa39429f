// Which tree operations may still hold a block number they read before a leaf was
// unlinked: the grace period a deleted leaf waits out before its block is given out again.
//
// A reader latches one node at a time: it reads a child's or a sibling's block number,
// releases the node, then latches the block. In between, the leaf may be unlinked from the
// tree (tree::remove_empty_leaf). That is harmless while the leaf stays a deleted node
// (its right link leads on, tree.hpp), but its block may not become anything else until
// every operation that could have read its number has ended. Each operation on a tree runs
// inside a section; unlinking a leaf takes an epoch (retire()); the block may be reused once
// passed(epoch): every section in progress began after it.
//
// Invariants:
//  - A thread's section covers the whole operation: every block number it holds was read
//    inside it. Sections nest (a read inside a commit): only the outermost one counts.
//  - retire() returns a value greater than every epoch a section already in progress
//    entered with, and every section entered later sees a greater epoch (sequentially
//    consistent atomics on both sides), so passed() never lets a block go early.
//  - Cheap for readers: entering and leaving are one store each into the thread's own slot;
//    the slots are scanned only by passed() and wait_for_sections().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

namespace tidemark::access {

struct epoch_slot;

class operation_epochs {
public:
  operation_epochs();
  ~operation_epochs();
  operation_epochs(const operation_epochs&) = delete;
  operation_epochs& operator=(const operation_epochs&) = delete;

  struct registry; // the slots, shared with the threads that hold one

  /// One operation of the calling thread (RAII); nested ones are free.
  class section {
  public:
    explicit section(operation_epochs& epochs);
    ~section();
    section(const section&) = delete;
    section& operator=(const section&) = delete;

  private:
    registry* registry_;
    epoch_slot* slot_;
  };

  /// The epoch of something unlinked now.
  std::uint64_t retire();
  /// True when every section in progress entered after `epoch`.
  bool passed(std::uint64_t epoch) const;
  /// Blocks until every section in progress now has ended (a standby's redo, before it
  /// replays a change that gives out an unlinked leaf's block).
  void wait_for_sections();

private:
  bool passed_locked(std::uint64_t epoch) const;

  std::shared_ptr<registry> registry_;
};

} // namespace tidemark::access
