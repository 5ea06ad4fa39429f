// Basic vocabulary of the storage layer: log sequence numbers, page identities and the
// storage error types. No CAF, no I/O.
//
// Invariants:
//  - An lsn is a byte position in the WAL stream; it only grows. lsn 0 means "never logged".
//  - A page_id names one block of one relation; (rel, block) is stable for the page's life.
#pragma once

#include <tidemark/errors.hpp>

#include <cstdint>
#include <string>

namespace tidemark::storage {

using lsn_t = std::uint64_t;
using xid_t = std::uint64_t;
using rel_id = std::uint32_t;
using block_id = std::uint32_t;

struct page_id {
  rel_id rel = 0;
  block_id block = 0;

  friend bool operator==(page_id a, page_id b) { return a.rel == b.rel && a.block == b.block; }
  friend bool operator!=(page_id a, page_id b) { return !(a == b); }
  friend bool operator<(page_id a, page_id b) {
    return a.rel != b.rel ? a.rel < b.rel : a.block < b.block;
  }
};

/// A relation segment file: relation `rel`, segment number `segno`.
struct segment_id {
  rel_id rel = 0;
  std::uint32_t segno = 0;

  friend bool operator==(segment_id a, segment_id b) {
    return a.rel == b.rel && a.segno == b.segno;
  }
  friend bool operator<(segment_id a, segment_id b) {
    return a.rel != b.rel ? a.rel < b.rel : a.segno < b.segno;
  }
};

// The error types are the public ones (tidemark/errors.hpp): data_error for data problems
// found on disk (checksum failure, corrupt WAL or control file), page_corrupt_error for one
// page nothing could repair, io_error for failed system calls (fsync_failed(): the W3
// case, the runtime must stop and the next start must run crash recovery),
// engine_stopped_error for a wait that ends because the engine failed.
using tidemark::data_error;
using tidemark::engine_stopped_error;
using tidemark::io_error;
using tidemark::page_corrupt_error;

} // namespace tidemark::storage
