// Basic vocabulary of the storage layer: log sequence numbers, page identities and the
// storage error type. No CAF, no I/O.
//
// Invariants:
//  - An lsn is a byte position in the WAL stream; it only grows. lsn 0 means "never logged".
//  - A page_id names one block of one relation; (rel, block) is stable for the page's life.
#pragma once

#include <cstdint>
#include <stdexcept>
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

  friend bool operator==(segment_id a, segment_id b) { return a.rel == b.rel && a.segno == b.segno; }
  friend bool operator<(segment_id a, segment_id b) {
    return a.rel != b.rel ? a.rel < b.rel : a.segno < b.segno;
  }
};

/// Thrown for data problems found on disk (checksum failure, corrupt WAL, corrupt control
/// file). The command-line tool maps it to exit status 1.
class data_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A page read from disk failed verification (checksum or identity) and nothing could
/// repair it. `where` names the file and block.
class page_corrupt_error : public data_error {
public:
  page_corrupt_error(const std::string& what, std::string where)
    : data_error(what), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

private:
  std::string where_;
};

/// Thrown for I/O system call failures. `fsync_failed` marks the W3 case: the runtime must
/// stop, and the next start must run crash recovery.
class io_error : public std::runtime_error {
public:
  io_error(const std::string& what, int error_number, bool fsync_failed = false)
    : std::runtime_error(what), error_number_(error_number), fsync_failed_(fsync_failed) {}
  int error_number() const { return error_number_; }
  bool fsync_failed() const { return fsync_failed_; }

private:
  int error_number_;
  bool fsync_failed_;
};

} // namespace tidemark::storage
