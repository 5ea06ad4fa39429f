// Sequential WAL reader for recovery and inspection.
//
// next() returns records in LSN order from the start position and stops at the end of
// valid WAL: a zero length (never written), a length that cannot be a record, a CRC
// mismatch, a record whose stored lsn is not its position (stale bytes of a recycled
// segment), a prev_lsn that does not link to the record before it, or a missing segment.
// end_lsn() is then where valid WAL ends and end_description() says why.
//
// Following WAL that is still arriving (a standby): with follow(), a read that reaches
// past what has arrived waits for more instead of ending; the reader ends only where the
// stream ended (the standby is promoted or stops), at the last complete record. WAL that
// arrived was fsynced there, so a record below that point that fails to read (zeros, a
// short read, a bad checksum, a read error) is never its end: the reader reads it again
// from the file system (a fresh descriptor, the kernel's cached copy dropped), up to
// max_rereads times, and then throws data_error naming the record's LSN — it never ends
// silently short of WAL that arrived.
//
// A torn or lost tail is normal after a crash. Corruption of WAL that had been durable is
// not: find_corruption() scans on from the end for records that are valid in themselves
// and whose durable_lsn lies beyond end_lsn. Such a record was inserted after WAL past the
// end point had been fsynced, so the bytes at the end point were durable and are now
// damaged: recovery must stop rather than silently drop committed transactions.
#pragma once

#include "storage/io_engine.hpp"
#include "storage/wal_record.hpp"
#include "storage/wal_segment_reader.hpp"

#include <atomic>
#include <optional>
#include <string>
#include <vector>

namespace tidemark::storage {

struct wal_corruption {
  lsn_t bad_lsn = 0;       // where valid WAL stopped
  lsn_t proof_lsn = 0;     // a later valid record ...
  lsn_t proof_durable = 0; // ... that says WAL up to here had been durable
  std::string segment_path;
  std::string reason;
};

/// WAL still arriving: how far it may be read.
class wal_arrival {
public:
  virtual ~wal_arrival() = default;
  /// Blocks until WAL beyond `lsn` may be read, or the stream has ended; returns how far
  /// WAL may be read (not beyond `lsn`: the stream ended there).
  virtual lsn_t wait_beyond(lsn_t lsn) = 0;
};

class wal_reader {
public:
  wal_reader(io_engine& io, std::string wal_dir, std::uint64_t segment_size, std::size_t page_size,
             lsn_t start_lsn);
  ~wal_reader();

  /// The next valid record, or nullptr at the end of valid WAL. The view stays valid until
  /// the next call.
  const record_view* next();

  lsn_t end_lsn() const { return end_lsn_; }
  /// Start of the last valid record returned (0 if none).
  lsn_t last_record_lsn() const { return last_record_lsn_; }
  const std::string& end_description() const { return end_description_; }

  /// Reads only WAL that `arrival` says has arrived, waiting for more at its end (set
  /// before the first next()). Each re-read of a record that failed below the arrived
  /// end is counted in `rereads` when given.
  void follow(wal_arrival* arrival, std::atomic<std::uint64_t>* rereads = nullptr);
  /// How often a following reader reads a failed record again before it gives up.
  static constexpr int max_rereads = 3;

  /// After next() returned nullptr: whether the reader ended because the record at
  /// end_lsn() runs past the end of a followed stream (a record cut off where WAL stopped
  /// arriving), rather than at a record that failed to read.
  bool ended_at_stream_end() const { return ended_ && beyond_arrival_; }

  /// Call after next() returned nullptr.
  std::optional<wal_corruption> find_corruption();

  /// Reads the single record at `lsn` (the checkpoint record named by the control file).
  /// Returns nullptr if no valid record starts there.
  const record_view* read_at(lsn_t lsn);

private:
  static constexpr lsn_t no_prev_check = ~lsn_t{0};

  bool try_record_at(lsn_t lsn, lsn_t expected_prev, std::string* why);
  bool read_record_following(std::string* why);
  void forget_read_bytes();
  const unsigned char* bytes_at(lsn_t lsn, std::size_t length);
  bool in_window(lsn_t lsn, std::size_t length) const;
  void fill_window(lsn_t lsn);
  bool arrived(lsn_t end);
  std::optional<wal_corruption> scan_segment(lsn_t segment_start);
  std::string missing_segment(lsn_t lsn) const;
  std::string segment_path(lsn_t segment_start) const;
  lsn_t segment_start(lsn_t lsn) const { return lsn - lsn % segment_size_; }

  std::string dir_;
  std::uint64_t segment_size_;
  wal_segment_reader segments_;
  wal_arrival* arrival_ = nullptr;
  lsn_t arrived_ = ~lsn_t{0}; // WAL below this may be read
  bool stream_ended_ = false;
  bool beyond_arrival_ = false; // the last record tried needed bytes past the stream's end
  std::atomic<std::uint64_t>* rereads_ = nullptr;
  std::size_t page_size_;
  lsn_t position_;
  lsn_t end_lsn_ = 0;
  lsn_t last_record_lsn_ = 0;
  bool have_previous_ = false; // a record was returned: the next one must link to it
  bool ended_ = false;
  std::string end_description_;
  std::vector<unsigned char> record_bytes_; // records longer than the window
  record_view view_;
  // Read-ahead window: WAL bytes [window_start_, window_start_ + window_length_).
  std::vector<unsigned char> window_;
  lsn_t window_start_ = 0;
  std::size_t window_length_ = 0;
};

} // namespace tidemark::storage
