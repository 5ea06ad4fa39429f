// How the access layer changes a page: every change goes through a page_edit, which
// applies it to the page bytes and records it as WAL ops (storage/wal_record.hpp's
// write_bytes and move_bytes ops) in a page_changes log. Redo replays those ops with
// storage::apply_ops, the same function that replays every other record, so a page rebuilt by redo
// is byte for byte the page the change left (tests/access/node_test.cpp checks this after every
// operation).
//
// Invariants:
//  - The ops of a page_changes, applied in order to the page as it was before the first
//    edit, give the page as it is after the last one.
//  - One op never exceeds the u16 offset and length the WAL format has; a change of more
//    than max_op_bytes bytes is split into several ops.
//  - collapse() keeps the first invariant while bounding the log: when the ops of a page
//    outgrow the page itself, they are replaced by one write of everything past the page
//    header (the header's LSN and checksum are not the access layer's to log).
//  - A thread's reused_changes are in use by one commit at a time, and hand it empty logs.
#pragma once

#include "storage/page.hpp"
#include "storage/wal_record.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tidemark::access {

/// The ops that change one page, in WAL op format (u8 kind, u16 offset, u16 length, bytes).
class page_changes {
public:
  static constexpr std::size_t max_op_bytes = 0xFFFF;

  void record_write(std::size_t offset, const void* bytes, std::size_t length);
  /// page[source, source + count) copied to page[offset, offset + count) (one move_bytes op).
  void record_move(std::size_t offset, std::size_t source, std::size_t count);
  /// Replaces the ops by one write of the page's bytes past the header when they are longer
  /// than that write would be. `page` is the page as the ops leave it.
  void collapse(const void* page, std::size_t page_size);
  void clear() { ops_.clear(); }
  std::size_t capacity() const { return ops_.capacity(); }

  const unsigned char* data() const { return ops_.data(); }
  std::size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }

private:
  // One op in WAL op format: u8 kind, u16 offset, u16 length, then `length` bytes.
  void append_op(storage::op_kind kind, std::size_t offset, const void* data, std::size_t length);

  std::vector<unsigned char> ops_;
};

/// The page_changes of one commit, one a page, taken from those this thread's last commit
/// used: a bulk insert's ops (a megabyte for a thousand leaves) would otherwise be new memory
/// every commit, which the allocator gives back to the kernel between commits and takes
/// again, each page a fault (measured: a tenth of a 1 M-record load's CPU). Between commits
/// the thread keeps logs of at most `keep_bytes` in all. Addresses are stable while in use.
class reused_changes {
public:
  reused_changes(std::size_t count, std::size_t keep_bytes);
  ~reused_changes();
  reused_changes(const reused_changes&) = delete;
  reused_changes& operator=(const reused_changes&) = delete;

  page_changes& operator[](std::size_t i) { return (*logs_)[i]; }

private:
  std::vector<page_changes>* logs_;
  std::size_t keep_bytes_;
};

/// A page being changed: writes go to the page and, when `log` is not null, into `log`.
/// A page nobody else can see yet (a split's private copy) is edited without a log.
class page_edit {
public:
  page_edit(void* page, std::size_t page_size, page_changes* log)
    : page_(static_cast<unsigned char*>(page)), page_size_(page_size), log_(log) {}

  void write(std::size_t offset, const void* bytes, std::size_t length);
  template <class T>
  void write_value(std::size_t offset, T value) {
    write(offset, &value, sizeof(T));
  }
  /// Copies `count` bytes of the page from `source` to `offset` (ranges may overlap), logged
  /// as one op of a few bytes whatever `count` is.
  void move(std::size_t offset, std::size_t source, std::size_t count);

  unsigned char* bytes() { return page_; }
  const unsigned char* bytes() const { return page_; }
  std::size_t page_size() const { return page_size_; }

private:
  unsigned char* page_;
  std::size_t page_size_;
  page_changes* log_;
};

/// The value of type T at `offset` of a page (write_value's reader), unaligned.
template <class T>
T load(const unsigned char* page, std::size_t offset) {
  T value;
  std::memcpy(&value, page + offset, sizeof(T));
  return value;
}

} // namespace tidemark::access
