// The pending-sync table: which files have completed writes not yet covered by an fsync,
// since which sync cycle, and how much was written to them (PostgreSQL's pendingOps, with
// the amounts the sync phase paces by). Owned by the sync_worker actor; not thread-safe.
//
// Invariants:
//  - A file is in the table from the first registration after its last completed fsync
//    until an fsync that began after that registration completes. Repeated registrations
//    are absorbed: the entry keeps the cycle of the oldest one, and adds up what they wrote.
//  - An entry's range covers every byte its registrations wrote; its byte count is what they
//    wrote, rewrites counted again (written() caps it at the range).
//  - begin_cycle() returns C; every entry present then has a cycle < C and is due in the
//    sync phase of C; entries registered later get cycle C and wait for the next phase.
//  - synced(tag, C) removes the entry only if it is still the one that was due (cycle < C).
#pragma once

#include "storage/types.hpp"

#include <cstdint>
#include <map>
#include <vector>

namespace tidemark::storage {

enum class file_kind : std::uint8_t {
  relation = 1,   // a relation segment file
  commit_log = 2, // a commit-status log segment (segno only)
};

/// A file the sync machinery knows: handler kind plus segment.
struct file_tag {
  file_kind kind = file_kind::relation;
  segment_id segment;

  friend bool operator==(const file_tag& a, const file_tag& b) {
    return a.kind == b.kind && a.segment == b.segment;
  }
  friend bool operator<(const file_tag& a, const file_tag& b) {
    return a.kind != b.kind ? a.kind < b.kind : a.segment < b.segment;
  }
};

/// Completed writes to one file: how many bytes, and the byte range of the file they lie in.
struct file_write {
  file_tag tag;
  std::uint64_t bytes = 0;
  std::uint64_t begin = 0; // offset of the first byte written
  std::uint64_t end = 0;   // one past the last
};

/// Adds a write of `length` bytes at `offset` of `tag` to writes[0, count), merging it into
/// that file's element or appending one; returns the new count. The caller's array has room
/// for one more element than `count`.
std::size_t note_write(file_write* writes, std::size_t count, const file_tag& tag,
                       std::uint64_t offset, std::uint64_t length);

class sync_table {
public:
  /// Returns true if the file was new (not absorbed into an existing entry).
  bool remember(const file_write& write);
  void forget(const file_tag& tag);
  /// Starts a sync phase: returns its cycle C.
  std::uint64_t begin_cycle();
  /// Entries due in cycle C (registered before it began), in file order, with what was
  /// written to them.
  std::vector<file_write> due(std::uint64_t cycle) const;
  /// Records a completed fsync of `tag` for cycle C.
  void synced(const file_tag& tag, std::uint64_t cycle);
  /// Records a completed fsync of `tag` made outside a sync phase: it covers every
  /// registration processed before it began, so the entry goes whatever its cycle.
  void synced_now(const file_tag& tag) { entries_.erase(tag); }
  /// Every entry, due or not, in file order, with what was written to them.
  std::vector<file_write> pending() const;
  bool contains(const file_tag& tag) const { return entries_.count(tag) > 0; }
  std::size_t size() const { return entries_.size(); }
  std::uint64_t cycle() const { return cycle_; }

private:
  struct entry {
    std::uint64_t cycle = 0; // of its oldest registration
    std::uint64_t bytes = 0;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
  };
  static file_write written(const file_tag& tag, const entry& e);

  std::map<file_tag, entry> entries_;
  std::uint64_t cycle_ = 1;
};

} // namespace tidemark::storage
