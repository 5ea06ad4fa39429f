// wal_reader: sequential validation of WAL records for recovery, the end-of-WAL decision,
// and the scan that tells a torn tail from damaged durable WAL. See wal_reader.hpp.
//
// Invariants:
//  - A record is returned only if its length is plausible, its stored lsn equals its
//    position, its CRC matches, its structure decodes, and (after the first) its prev_lsn is
//    the previous record's position. end_lsn only grows, record by record, and stops for
//    good at the first record that fails.
//  - Reads go through a read-ahead window (one large read serves many records, which are
//    decoded in place); bytes past the end of a short file read as zeros, a missing segment
//    ends the readable WAL.
//  - Following, a record that fails while all its bytes are below the arrived end is read
//    again from the file system (max_rereads times) and then is a data_error: such WAL
//    was fsynced on arrival, so a following reader ends only where the stream ended.
//  - find_corruption() reports only a record that is valid in itself, sits beyond end_lsn,
//    and proves (durable_lsn > end_lsn) that the bytes at end_lsn had been fsynced.
#include "storage/wal_reader.hpp"

#include "storage/wal_log.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tidemark::storage {

namespace {

constexpr std::size_t window_size = 1u << 20;

bool fail(std::string* why, std::string reason) {
  if (why)
    *why = std::move(reason);
  return false;
}

} // namespace

wal_reader::wal_reader(io_engine& io, std::string wal_dir, std::uint64_t segment_size,
                       std::size_t page_size, lsn_t start_lsn)
  : dir_(std::move(wal_dir)), segment_size_(segment_size), segments_(io, dir_, segment_size),
    page_size_(page_size), position_(start_lsn), end_lsn_(start_lsn), window_(window_size) {}

wal_reader::~wal_reader() = default;

void wal_reader::follow(wal_arrival* arrival, std::atomic<std::uint64_t>* rereads) {
  arrival_ = arrival;
  arrived_ = position_;
  rereads_ = rereads;
}

// ---- sequential reading -------------------------------------------------------------------

const record_view* wal_reader::next() {
  if (ended_)
    return nullptr;
  std::string why;
  const bool read =
    arrival_ != nullptr
      ? read_record_following(&why)
      : try_record_at(position_, have_previous_ ? last_record_lsn_ : no_prev_check, &why);
  if (!read) {
    ended_ = true;
    end_description_ = "record at " + format_lsn(position_) + ": " + why;
    return nullptr;
  }
  have_previous_ = true;
  last_record_lsn_ = position_;
  position_ += aligned_record_size(view_.header.total_length);
  end_lsn_ = position_;
  return &view_;
}

// A record that failed where WAL had arrived (and so had been fsynced) is read again with
// nothing of the earlier read kept; only a record cut off by the stream's end ends it.
bool wal_reader::read_record_following(std::string* why) {
  const lsn_t expected_prev = have_previous_ ? last_record_lsn_ : no_prev_check;
  for (int rereads = 0;; ++rereads) {
    beyond_arrival_ = false;
    try {
      if (try_record_at(position_, expected_prev, why))
        return true;
    } catch (const io_error& error) {
      if (error.fsync_failed())
        throw; // W3: what the file holds may be older than what was written
      *why = error.what();
    }
    if (beyond_arrival_)
      return false; // the stream ended inside this record: it never wholly arrived
    if (rereads == max_rereads)
      throw data_error("the WAL record at " + format_lsn(position_) + " in " +
                       segment_path(segment_start(position_)) + " cannot be read back (" + *why +
                       ", " + std::to_string(max_rereads + 1) + " reads) though WAL through " +
                       format_lsn(arrived_) + " was fsynced here; redo stops at " +
                       format_lsn(position_));
    forget_read_bytes();
    if (rereads_ != nullptr)
      rereads_->fetch_add(1, std::memory_order_relaxed);
  }
}

// The next read of the bytes from position_ to the arrived end goes to the file system.
void wal_reader::forget_read_bytes() {
  window_length_ = 0;
  const std::uint64_t length = std::min<std::uint64_t>(window_.size(), arrived_ - position_);
  segments_.forget_cached(position_, static_cast<std::size_t>(length));
}

const record_view* wal_reader::read_at(lsn_t lsn) {
  return try_record_at(lsn, no_prev_check, nullptr) ? &view_ : nullptr;
}

bool wal_reader::try_record_at(lsn_t lsn, lsn_t expected_prev, std::string* why) {
  const unsigned char* bytes = bytes_at(lsn, sizeof(record_header));
  if (!bytes)
    return fail(why, stream_ended_ ? "end of the WAL that arrived" : missing_segment(lsn));
  record_header header;
  std::memcpy(&header, bytes, sizeof header);
  if (header.total_length == 0)
    return fail(why, "zero record length (never written)");
  if (header.total_length < sizeof header || header.total_length > max_record_length(page_size_))
    return fail(why, "invalid record length " + std::to_string(header.total_length));
  if (header.lsn != lsn)
    return fail(why, "stored lsn " + format_lsn(header.lsn) + " is not the record's position");
  if (!(bytes = bytes_at(lsn, header.total_length)))
    return fail(why, stream_ended_ ? "end of the WAL that arrived" : missing_segment(lsn));
  switch (decode_record(bytes, header.total_length, page_size_, view_)) {
    case decode_result::ok:
      break;
    case decode_result::bad_length:
      return fail(why, "invalid record length");
    case decode_result::bad_checksum:
      return fail(why, "checksum mismatch");
    case decode_result::bad_structure:
      return fail(why, "invalid block structure");
  }
  if (expected_prev != no_prev_check && view_.header.prev_lsn != expected_prev)
    return fail(why, "prev_lsn " + format_lsn(view_.header.prev_lsn) +
                       " does not link to the previous record at " + format_lsn(expected_prev));
  return true;
}

// ---- corruption scan ----------------------------------------------------------------------

std::optional<wal_corruption> wal_reader::find_corruption() {
  for (lsn_t start : wal_log::list_segments(dir_)) {
    if (start + segment_size_ <= end_lsn_)
      continue;
    if (std::optional<wal_corruption> found = scan_segment(start))
      return found;
  }
  return std::nullopt;
}

// Looks at every 8-aligned lsn field in the segment whose value names the position of the
// record it would belong to (a position after end_lsn), and checks that record fully only
// then. Records valid in themselves but without proof are stepped over like any bytes.
std::optional<wal_corruption> wal_reader::scan_segment(lsn_t start) {
  constexpr std::size_t lsn_field = offsetof(record_header, lsn);
  lsn_t first_field = end_lsn_ + record_alignment + lsn_field;
  for (lsn_t field = std::max(start, first_field); field < start + segment_size_; field += 8) {
    const unsigned char* bytes = bytes_at(field, sizeof(lsn_t));
    if (!bytes)
      return std::nullopt;
    lsn_t stored;
    std::memcpy(&stored, bytes, sizeof stored);
    lsn_t candidate = field - lsn_field;
    if (stored != candidate || !try_record_at(candidate, no_prev_check, nullptr))
      continue;
    if (view_.header.durable_lsn > end_lsn_)
      return wal_corruption{end_lsn_, candidate, view_.header.durable_lsn,
                            segment_path(segment_start(end_lsn_)), end_description_};
  }
  return std::nullopt;
}

// ---- reading bytes ------------------------------------------------------------------------

// The WAL bytes [lsn, lsn + length): in the window (refilled from lsn if needed), or for a
// record longer than the window in record_bytes_. Null if a segment is missing, or when
// following, if the stream ended before them.
const unsigned char* wal_reader::bytes_at(lsn_t lsn, std::size_t length) {
  if (!arrived(lsn + length))
    return nullptr;
  if (length > window_.size()) {
    record_bytes_.resize(length);
    bool complete = segments_.read(lsn, record_bytes_.data(), length) == length;
    return complete ? record_bytes_.data() : nullptr;
  }
  if (!in_window(lsn, length))
    fill_window(lsn);
  return in_window(lsn, length) ? window_.data() + (lsn - window_start_) : nullptr;
}

bool wal_reader::in_window(lsn_t lsn, std::size_t length) const {
  return lsn >= window_start_ && lsn - window_start_ + length <= window_length_;
}

// The window never holds bytes beyond what had arrived when it was filled.
void wal_reader::fill_window(lsn_t lsn) {
  window_start_ = lsn;
  std::size_t wanted =
    static_cast<std::size_t>(std::min<std::uint64_t>(window_.size(), arrived_ - lsn));
  window_length_ = segments_.read(lsn, window_.data(), wanted);
}

// Following: waits until WAL below `end` has arrived; false once the stream ended short.
bool wal_reader::arrived(lsn_t end) {
  while (end > arrived_) {
    if (stream_ended_) {
      beyond_arrival_ = true;
      return false;
    }
    lsn_t now = arrival_->wait_beyond(arrived_);
    if (now <= arrived_)
      stream_ended_ = true;
    else
      arrived_ = now;
  }
  return true;
}

// Names the first segment file missing from `lsn` on (a record may span two).
std::string wal_reader::missing_segment(lsn_t lsn) const {
  lsn_t start = segment_start(lsn);
  while (std::filesystem::exists(segment_path(start)))
    start += segment_size_;
  return "segment " + segment_path(start) + " is missing";
}

std::string wal_reader::segment_path(lsn_t start) const { return segments_.segment_path(start); }

} // namespace tidemark::storage
